"""One run (one user message through an agent): its identity while it runs, and how its end is
awaited.

The agent opens a scope for every run and `current_run_var` holds it for everything the run calls:
the chat model, tools, callbacks. A chat model that keeps per-conversation state (the `stub`
provider's script replays from its first reply for every run) keys it on the scope. The scope's
`id` is the run's one id: an executor mints it (`new_run_id()`) before the run opens, and the
result, the events, the ledger, the logs and the HTTP headers all carry it.

A run's end is work that must finish even when whoever waits for it is cancelled (its settling,
its ledger, its stream's closing): `wait_through_cancellation` and `finish_despite_cancellation`
wait that way, for the agents, the store and the executor alike.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

__all__ = [
    "RunScope",
    "current_run_id",
    "current_run_var",
    "finish_despite_cancellation",
    "new_run_id",
    "run_scope",
    "wait_through_cancellation",
]


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


def current_run_id() -> str:
    """The id of the run the current code belongs to, for log lines; "-" outside any run."""
    scope = current_run_var.get()
    return "-" if scope is None else scope.id


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


T = TypeVar("T")


async def wait_through_cancellation(pending: asyncio.Future[Any]) -> None:
    """Wait until `pending` (a cancelled run, the closing of its stream, the settling of its
    ledger) is done, even if we are cancelled meanwhile; then re-raise that cancellation.

    A cancelled anyio cancel scope (Starlette, sse-starlette) cancels the tasks directly inside it
    again on every pass of the event loop until they leave it: waiting there would wake us
    thousands of times a second and spin a core for as long as the run takes to stop. The shielded
    scope moves us out of its reach, so we sleep until the run is done. A plain asyncio
    cancellation still gets through, once per `cancel()`; it is remembered and re-raised."""
    is_cancelled = False
    with anyio.CancelScope(shield=True):
        while not pending.done():
            try:
                await asyncio.wait({pending})
            except asyncio.CancelledError:
                is_cancelled = True
    if is_cancelled:
        raise asyncio.CancelledError


async def finish_despite_cancellation(step: Awaitable[T]) -> tuple[T, bool]:
    """Run `step` to its end even if we are cancelled meanwhile; says whether we were."""
    task = asyncio.ensure_future(step)
    try:
        await wait_through_cancellation(task)
    except asyncio.CancelledError:
        return task.result(), True
    return task.result(), False
