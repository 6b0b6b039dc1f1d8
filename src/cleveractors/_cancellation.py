"""Waiting for work that must finish even when its waiter is cancelled (a run's settling, its
ledger, its stream's closing). Below the agents and the store: both wait this way."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio

__all__ = ["finish_despite_cancellation", "wait_through_cancellation"]

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
