"""`Lease`: a hold on a row that its run renews while it goes, for sessions and idempotency keys.

A run holds its session, and its request's idempotency key, on a lease of `lease_s` seconds,
judged by the database's clock (`dialects.database_time`). While the run goes, a `Lease`
renews it every third of its span, so a run whose process died frees the row by itself once the
lease runs out. A renewal the database refuses is tried again at the next tick (the lease holds
until then); a renewal that finds the row taken (the run stalled past its lease and another run
took it over) stops renewing and calls `on_lost`, which is the one thing that differs between a
session (its turn will not be appended) and a key (the run is stopped: the request now runs
elsewhere).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Self

__all__ = ["Lease"]

logger = logging.getLogger(__name__)


class Lease:
    """Renews a held row every third of `span_s`, from its making until `stop()` (or the end of
    its `async with` block); made while the holder's event loop runs.

    Args:
        renew: Extends the lease; returns False when the row is no longer the holder's.
        span_s: How long the lease lasts without renewal.
        on_lost: Called once, when a renewal finds the row taken by another run.
        name: What is held, for the log ("the lease of run r-1 on session 's-1'").
    """

    def __init__(
        self,
        renew: Callable[[], Awaitable[bool]],
        *,
        span_s: float,
        on_lost: Callable[[], None],
        name: str,
    ) -> None:
        self._renew = renew
        self._span_s = span_s
        self._on_lost = on_lost
        self._name = name
        self._task = asyncio.create_task(self._keep())

    async def stop(self) -> None:
        """Stop renewing and wait for the renewal task's end (a cancellation of the caller's
        own still reaches it)."""
        self._task.cancel()
        await asyncio.wait({self._task})

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._span_s / 3)
            try:
                is_held = await self._renew()
            except Exception as exc:  # the next renewal may succeed; the lease holds until then
                logger.warning("store: renewing %s failed: %r", self._name, exc)
                continue
            if not is_held:
                self._on_lost()
                return
