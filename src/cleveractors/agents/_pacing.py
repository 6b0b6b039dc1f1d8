"""The pace of one run: where it may stop, and where it waits for the consumer of its events.

A run checks in (`Pacing.checkpoint`) before and after each model call, after each streamed
chunk and before each tool. There it ends if its task was asked to stop, and a streamed run
waits while its consumer is behind (`EventChannel.has_room`, found through
`current_consumer_room()`), so the events never pile up ahead of a slow reader.
"""

from __future__ import annotations

import asyncio

from cleveractors.agents.stream import current_consumer_room

__all__ = ["Pacing"]


class Pacing:
    """The stop and backpressure of the run whose task makes it. Made per run, never shared.

    Attributes:
        is_waiting_for_room: The run is waiting for its consumer to catch up (which a stall
            watch does not count).
    """

    __slots__ = ("_cancels_at_start", "_room", "_task", "is_waiting_for_room")

    def __init__(self) -> None:
        self._task: asyncio.Task[object] | None = asyncio.current_task()
        self._cancels_at_start = 0 if self._task is None else self._task.cancelling()
        self._room = current_consumer_room()
        """Set while the consumer of the stream this run works for has room for more events."""
        self.is_waiting_for_room = False

    @property
    def is_stop_requested(self) -> bool:
        """Whether the run's task was asked to cancel since the run began, whatever became of
        the CancelledError (see `checkpoint`)."""
        return self._task is not None and self._task.cancelling() > self._cancels_at_start

    async def checkpoint(self) -> None:
        """Where the run may stop or wait.

        A run whose task was asked to cancel ends here even if a library swallowed the
        CancelledError: Python 3.11's `asyncio.wait_for`, through which langchain-openai reads
        every chunk, does when the chunk completes as the cancellation arrives. The task's
        cancel count, not the exception, records the request (as for `asyncio.timeout()`).
        Then a streamed run waits while its consumer is behind."""
        if self.is_stop_requested:
            raise asyncio.CancelledError
        if self._room is not None and not self._room.is_set():
            self.is_waiting_for_room = True
            try:
                await self._room.wait()
            finally:
                self.is_waiting_for_room = False
