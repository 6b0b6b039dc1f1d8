"""`RunScope`: the identity of one run (one user message through an agent), while it runs.

The agent opens a scope for every run and `current_run_var` holds it for everything the run calls:
the chat model, tools, callbacks. A chat model that keeps per-conversation state (the `stub`
provider's script replays from its first reply for every run) keys it on the scope; the scope's
`id` names the run in logs and in its `ExecutionResult`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["RunScope", "current_run_var", "run_scope"]


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class RunScope:
    """One run. Compared by identity, and weakly referenceable, so per-run state keyed on it
    (a `WeakKeyDictionary`) goes away with the run."""

    id: str = field(default_factory=lambda: f"run_{uuid.uuid4().hex[:16]}")


current_run_var: ContextVar[RunScope | None] = ContextVar("cleveractors_current_run", default=None)
"""The run the current code belongs to; None outside any run."""


@contextmanager
def run_scope() -> Iterator[RunScope]:
    """Open a new run's scope for the code inside the block (and the tasks it starts)."""
    scope = RunScope()
    token = current_run_var.set(scope)
    try:
        yield scope
    finally:
        current_run_var.reset(token)
