"""`EventStream` and `TextStream`: a run's events (or text) as an async iterator, plus its result.

The run itself works in a task that pushes events into a bounded `EventChannel`, and the iterator
drains it: a consumer that reads slowly holds the run back (and, through it, the provider's
stream) instead of letting the events pile up. When the consumer stops early (it breaks, calls
`aclose()`, or its task or cancel scope is cancelled), the run's task is cancelled and awaited
before control returns, so no task outlives the stream and the result, with every token spent,
is settled first.

The run's side of that link is its pace, `Pacing`: where it may stop, and where it waits for
its consumer. A run checks in (`Pacing.checkpoint`) before and after each model call, after each
streamed chunk and before each tool. There it ends if its task was asked to stop, and a streamed
run waits while its consumer is behind (`EventChannel.has_room`, found through
`current_consumer_room()`), so the events never pile up ahead of a slow reader.

`StallWatch` keeps the stall limit of a streamed model call: no chunk for `limit_s` seconds ends the
call. One timer per call, never one per chunk (a client's per-chunk `asyncio.wait_for` starts a task
per chunk on Python 3.11). The reader stamps the time whenever it goes back to waiting for the
provider; a single `loop.call_at` handle, when it comes due, either finds a younger stamp and
re-arms at stamp + limit, or cancels the reading task. Time the run spends waiting for its consumer
is not a stall: the handle re-arms while the reader says it is paused.

The cancellation is told apart as `asyncio.timeout()` tells its own: the watch takes back the one
cancel it requested (`Task.uncancel()`), and the run's stop test (`Pacing.is_stop_requested`, the
task's cancel count) then sees only a stop asked for by someone else, before or after.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from types import AsyncGeneratorType
from typing import Self, cast

from cleveractors.events import Event, RunFailed, RunFinished, RunPaused, TextDelta
from cleveractors.result import ROUND_SEPARATOR, ErrorInfo, ExecutionResult, RunOutcome, RunText
from cleveractors.runs import wait_through_cancellation
from cleveractors.usage import last_token_usage_var

__all__ = [
    "MAX_BUFFERED_EVENTS",
    "ROUND_SEPARATOR",
    "EventChannel",
    "EventStream",
    "Pacing",
    "RunOutcome",
    "StallWatch",
    "TextStream",
    "current_consumer_room",
    "wait_through_cancellation",
]

MAX_BUFFERED_EVENTS = 64
"""How many events a run may get ahead of its consumer before it waits (a text delta is one
event per provider chunk). Enough that a consumer keeping up never makes the run wait."""


@dataclass(frozen=True, slots=True)
class _End:
    """The queue's last item: the run has settled."""


class EventChannel:
    """The bounded link from a run to its consumer.

    The channel is the run's sink, a plain callable called deep inside the loop, so it never
    waits; the run waits instead at its checkpoints (after each streamed chunk, before each model
    call and tool) while `has_room` is clear, that is while `max_buffered` events are unread. The
    buffer thus exceeds `max_buffered` by at most the few events emitted between two checkpoints.
    The run finds `has_room` through `current_consumer_room()`, so a sink that wraps the channel
    paces the run as the channel itself does.

    One event per provider chunk passes through here, so it is a deque and one waiting consumer
    rather than an `asyncio.Queue` (whose bookkeeping for many producers and `join()` we never
    use).
    """

    __slots__ = ("_events", "_max_buffered", "_waiter", "has_room")

    def __init__(self, max_buffered: int = MAX_BUFFERED_EVENTS) -> None:
        self._events: deque[Event | _End] = deque()
        self._max_buffered = max_buffered
        self._waiter: asyncio.Future[None] | None = None
        self.has_room = asyncio.Event()
        self.has_room.set()

    def __call__(self, event: Event) -> None:
        """The run's sink: buffer an event for the consumer; never waits."""
        self.put(event)

    def put(self, event: Event | _End) -> None:
        """Buffer an event (or the end) for the consumer; never waits."""
        events = self._events
        events.append(event)
        if len(events) >= self._max_buffered:
            self.has_room.clear()
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> Event | _End:
        """The next event, waiting for one. One consumer at a time."""
        events = self._events
        while not events:
            self._waiter = waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        event = events.popleft()
        if len(events) < self._max_buffered and not self.has_room.is_set():
            self.has_room.set()
        return event


_consumer_room: ContextVar[asyncio.Event | None] = ContextVar(
    "cleveractors_consumer_room", default=None
)


def current_consumer_room() -> asyncio.Event | None:
    """The `has_room` of the stream whose run this task is working for (None outside a stream):
    a run paces itself by it whatever its sink is, the channel or a callable wrapping it."""
    return _consumer_room.get()


RunWithSink = Callable[[EventChannel], Awaitable[RunOutcome]]


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


class _ClosesOnExit:
    """`async with` support: leaving the block closes the stream, cancelling a run still going."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class EventStream(_ClosesOnExit):
    """The events of one run. Iterate it once; `result` is set when the run has ended.

    Use it as `async with executor.execute_events(...) as events:` or iterate it directly; leaving
    early cancels the run and settles its usage. Nothing runs until the first read.

    Raises:
        RuntimeError: it is iterated a second time.
        Exception: after the `run_failed` event, the run's own error, once the stream ends (as
            `execute()` raises it); the result holds the usage spent before it.
    """

    def __init__(
        self, run: RunWithSink, *, on_result: Callable[[ExecutionResult], None] | None = None
    ) -> None:
        self._run = run
        self._on_result = on_result
        self._channel = EventChannel()
        self._is_iterated = False
        self._drain_ref: weakref.ref[AsyncGeneratorType[Event, None]] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._outcome: RunOutcome | None = None

    @property
    def result(self) -> ExecutionResult | None:
        """The run's result (also when it failed or was cancelled); None while it runs."""
        return None if self._outcome is None else self._outcome.result

    def __aiter__(self) -> AsyncGenerator[Event, None]:
        # The generator is held only weakly: when a consumer breaks out and drops it, the event
        # loop's async-generator finalizer closes it at once, which cancels the run.
        if self._is_iterated:
            raise RuntimeError("an EventStream can be iterated only once")
        self._is_iterated = True
        drain = self._drain()
        self._drain_ref = weakref.ref(cast("AsyncGeneratorType[Event, None]", drain))
        return drain

    async def aclose(self) -> None:
        """Stop the run now (if it is still going) and wait until its usage is settled."""
        self._is_iterated = True  # a closed stream never starts
        drain = None if self._drain_ref is None else self._drain_ref()
        if drain is not None and not drain.ag_running:
            await drain.aclose()  # its cleanup stops the run
        elif drain is None and self._drained is not None:
            await wait_through_cancellation(
                self._drained
            )  # dropped: the loop's finalizer is closing it right now
        else:
            await self._stop_run()  # another task is inside the generator: end the run under it

    async def _drain(self) -> AsyncGenerator[Event, None]:
        self._drained = asyncio.get_running_loop().create_future()
        self._task = task = asyncio.create_task(self._produce())
        try:
            while not isinstance(event := await self._channel.get(), _End):
                yield event
            await task  # done by now; re-raises a failure of the stream machinery itself
        finally:
            try:
                await self._stop_run()
            finally:
                self._drained.set_result(None)
        if self._outcome is not None and self._outcome.error is not None:
            raise self._outcome.error

    async def _stop_run(self) -> None:
        """Cancel the run if it is still going, and wait for it to settle. Safe to call from
        `aclose()` and from the generator's cleanup at the same time."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            await wait_through_cancellation(task)
        if self._outcome is not None:
            last_token_usage_var.set(self._outcome.result.usage)

    async def _produce(self) -> None:
        _consumer_room.set(self._channel.has_room)  # this task's context only: its run's pace
        try:
            outcome = await self._run(self._channel)
            self._outcome = outcome
            if self._on_result is not None:
                self._on_result(outcome.result)
            if outcome.error is None:
                self._channel.put(_ending(outcome.result))
            else:
                error = outcome.result.error or ErrorInfo.from_exception(outcome.error)
                self._channel.put(RunFailed(error=error, result=outcome.result))
        finally:
            # Whatever happens, the consumer must not wait forever for an event.
            self._channel.put(_End())


def _ending(result: ExecutionResult) -> RunFinished | RunPaused:
    """The last event of a run that did not fail: it answered, or it waits for a person."""
    if result.pending_approvals:
        return RunPaused(result=result)
    return RunFinished(result=result)


class TextStream(_ClosesOnExit):
    """The text view of an `EventStream`: non-empty answer chunks, as they arrive, joined by the
    rule of `result.text` (a later round's text set apart by a blank line). What
    `ActorExecutor.execute_stream()` returns; `result` is the run's once the stream has ended.

    Raises:
        RuntimeError: it is iterated a second time.
        Exception: the run's own error, when the run failed, once the text before it was read.
    """

    def __init__(self, events: EventStream) -> None:
        self._events = events

    @property
    def events(self) -> EventStream:
        """The run's events, of which this is the text."""
        return self._events

    @property
    def result(self) -> ExecutionResult | None:
        """The run's result (also when it failed or was cancelled); None while it runs."""
        return self._events.result

    def __aiter__(self) -> AsyncIterator[str]:
        return _TextChunks(self._events.__aiter__())

    async def aclose(self) -> None:
        await self._events.aclose()


class _TextChunks:
    """Iterates the text deltas of a run's events. A plain iterator, not a generator: the events
    generator it holds is then dropped (and the run cancelled) the moment a consumer breaks out.

    The chunks join by the rule of `cleveractors.result.RunText` (rounds set apart by a blank line),
    so they add up to the run's `result.text`.
    """

    __slots__ = ("_events", "_text")

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events
        self._text = RunText()

    def __aiter__(self) -> _TextChunks:
        return self

    async def __anext__(self) -> str:
        while True:
            event = await self._events.__anext__()
            if isinstance(event, TextDelta) and (piece := self._text.add(event.round, event.text)):
                return piece
