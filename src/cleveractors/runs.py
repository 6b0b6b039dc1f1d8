"""`RunScope`: the identity of one run (one user message through an agent), while it runs.

The agent opens a scope for every run and `current_run_var` holds it for everything the run calls:
the chat model, tools, callbacks. A chat model that keeps per-conversation state (the `stub`
provider's script replays from its first reply for every run) keys it on the scope. The scope's
`id` is the run's one id: an executor mints it (`new_run_id()`) before the run opens, and the
result, the events, the ledger, the logs and the HTTP headers all carry it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["RunScope", "current_run_var", "new_run_id", "run_scope"]


def new_run_id() -> str:
    """A fresh run id: `run_` and 24 hex digits (96 random bits)."""
    return f"run_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class RunScope:
    """One run. Compared by identity, and weakly referenceable, so per-run state keyed on it
    (a `WeakKeyDictionary`) goes away with the run."""

    id: str = field(default_factory=new_run_id)


current_run_var: ContextVar[RunScope | None] = ContextVar("cleveractors_current_run", default=None)
"""The run the current code belongs to; None outside any run."""


@contextmanager
def run_scope(run_id: str | None = None) -> Iterator[RunScope]:
    """Open a run's scope for the code inside the block (and the tasks it starts).

    Args:
        run_id: The run's id, when the caller made it already (an executor that names the run
            in its own records); a new one (`new_run_id()`) when None.
    """
    scope = RunScope() if run_id is None else RunScope(run_id)
    token = current_run_var.set(scope)
    try:
        yield scope
    finally:
        current_run_var.reset(token)
