"""The stall limit of a streamed model call: no chunk for `limit_s` seconds ends the call.

One timer per call, never one per chunk (a client's per-chunk `asyncio.wait_for` starts a task
per chunk on Python 3.11). The reader stamps the time whenever it goes back to waiting for the
provider; a single `loop.call_at` handle, when it comes due, either finds a younger stamp and
re-arms at stamp + limit, or cancels the reading task. Time the run spends waiting for its
consumer is not a stall: the handle re-arms while the reader says it is paused.

The cancellation is told apart as `asyncio.timeout()` tells its own: the watch takes back the
one cancel it requested (`Task.uncancel()`), and the run's stop test (`Pacing.is_stop_requested`,
the task's cancel count) then sees only a stop asked for by someone else, before or after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["StallWatch"]


class StallWatch:
    """Watches one streamed call of the task that creates it; `close()` it when the call ends.

    Attributes:
        waiting_since: When the reader last began waiting for a chunk (`clock()` time); the
            reader sets it after each chunk, which is all a chunk costs.
        clock: The event loop's clock, the one the timer runs on.
    """

    __slots__ = (
        "_handle",
        "_has_fired",
        "_is_paused",
        "_limit_s",
        "_loop",
        "_task",
        "clock",
        "waiting_since",
    )

    def __init__(self, limit_s: float | None, *, is_paused: Callable[[], bool]) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a stall watch watches the task of a coroutine")
        self._loop = asyncio.get_running_loop()
        self._task = task
        self._limit_s = limit_s or 0.0
        self._is_paused = is_paused
        self._has_fired = False
        self.clock = self._loop.time
        self.waiting_since = self.clock()
        self._handle: asyncio.TimerHandle | None = None
        if limit_s is not None:
            self._handle = self._loop.call_at(self.waiting_since + limit_s, self._check)

    def _check(self) -> None:
        now = self.clock()
        due = self.waiting_since + self._limit_s
        if self._is_paused():
            due = now + self._limit_s  # the consumer is behind: nobody is reading
        if now < due:
            self._handle = self._loop.call_at(due, self._check)
            return
        self._handle = None
        self._has_fired = True
        self._task.cancel()

    def close(self) -> bool:
        """Stop watching; whether the watch ended the call. Takes back the cancel it requested,
        so a stop requested by anyone else is all that remains of the task's cancel count."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if not self._has_fired:
            return False
        self._has_fired = False
        self._task.uncancel()
        return True
