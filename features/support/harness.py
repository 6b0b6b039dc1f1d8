"""One harness for consuming a run: how the caller runs a message, how it stops, what it saw.

The caller runs a message in one of three modes (`Mode`: `execute()`, `execute_events()` or
`execute_stream()`) and may stop early (`Stop`): a plain `break`, `aclose()` (its own, or another
task's while it reads), leaving `async with`, its task cancelled, or a cancelled anyio cancel
scope; at a position in what it has read, or when an outside condition holds. `consume()` runs
the caller in a task of its own, as a client would, and returns a `Consumption`: the result or
the error, the events and text chunks read, and the tasks the run left behind.

Behave steps, the Robot libraries (robot/ runs with `--pythonpath features`) and the billing
property all consume runs through it:

    stop = Stop("break", at=after_items(2))
    consumed = await consume(executor, "Weather in Paris?", mode="text", stop=stop)
    assert consumed.tasks_left == ()
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, cast, get_args

import anyio
from langchain_core.callbacks import AsyncCallbackHandler

from cleveractors import (
    ActorExecutor,
    EventStream,
    ExecutionResult,
    TextStream,
    TokenUsage,
    last_token_usage_var,
)
from cleveractors.events import (
    Event,
    TextDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    UsageRecorded,
)
from support.run_tasks import TaskWatch

__all__ = [
    "HANG_GUARD_S",
    "MODES",
    "NAMED_POSITIONS",
    "ChunkCounter",
    "Consumption",
    "InSession",
    "Item",
    "Mode",
    "Position",
    "Stop",
    "StopStyle",
    "Target",
    "after_items",
    "after_text",
    "consume",
    "guarded",
    "read_slowly",
    "run_guarded",
    "tool_started",
    "wait_until",
]

HANG_GUARD_S = 60.0
"""A consumption (or a wait) that takes this long has hung: fail it rather than the suite's time
budget. Scripts sleep 30 s only where a run must be cut short, and the machine may be busy."""

_POLL_S = 0.005
"""How often `wait_until` looks at a condition nothing can await."""

_RECANCEL_PAUSE_S = 0.01
"""Between two cancellations of the caller: long enough for it to be waiting for the run to stop."""

Mode = Literal["blocking", "events", "text"]
"""How the caller runs the message: `execute()`, `execute_events()` or `execute_stream()`."""
MODES: tuple[Mode, ...] = get_args(Mode)

StopStyle = Literal[
    "break", "aclose", "aclose from another task", "async with", "cancel task", "cancel scope"
]
"""How a caller stops early: breaks out of `async for` and drops the stream (asyncio's
async-generator finaliser closes it); reads up to the stop, then awaits `aclose()`; keeps reading
while another task awaits the stream's `aclose()`; breaks out inside `async with`; has its own
task cancelled (at the stop it cancels itself, so the cancellation lands in its next read; with
an outside condition, the harness cancels it); or reads inside an anyio cancel scope that is
cancelled at the stop (as Starlette does when a client hangs up), so that its next read is
cancelled, and every await after it until it leaves the scope."""

Item = Event | str
"""What a streaming caller reads: an event (`events` mode) or a text chunk (`text` mode)."""
Position = Callable[[Sequence[Item]], bool]
"""Where to stop: true once the items read so far reach it (asked before every read)."""


def after_items(count: int) -> Position:
    """Stop once `count` items were read."""
    return lambda items: len(items) >= count


def after_text(word: str) -> Position:
    """Stop right after the text chunk (or text delta) that is `word`, spaces aside."""

    def is_there(items: Sequence[Item]) -> bool:
        last = items[-1] if items else None
        text = last.text if isinstance(last, TextDelta) else last
        return isinstance(text, str) and text.strip() == word

    return is_there


def tool_started(tool: str) -> Position:
    """Stop right after the event saying the tool `tool` started."""
    return lambda items: bool(items) and _is_start_of(items[-1], tool)


def _is_start_of(item: Item, tool: str) -> bool:
    return isinstance(item, ToolCallStarted) and item.name == tool


def _text_deltas(items: Sequence[Item]) -> int:
    return sum(isinstance(item, TextDelta) for item in items)


def _last_is(kind: type) -> Position:
    return lambda items: bool(items) and isinstance(items[-1], kind)


NAMED_POSITIONS: dict[str, Position] = {
    "first text": lambda items: _text_deltas(items) == 1,
    "mid-text": lambda items: _text_deltas(items) == 6,
    "tool requested": _last_is(ToolCallRequested),
    "tool started": _last_is(ToolCallStarted),
    "tool finished": _last_is(ToolCallFinished),
    "usage recorded": _last_is(UsageRecorded),
}
"""The event positions the stop scenarios name, in events mode."""


@dataclass(frozen=True, slots=True)
class Stop:
    """How and where the caller stops: at a position in what it read (`at`), or, for a
    cancelled task, when an outside condition holds (`when`, polled: a blocking caller reads
    nothing), `delay_s` later. A cancelled task is cancelled `cancels` times, the later ones
    while it waits for the run to stop (as anyio cancel scopes do)."""

    style: StopStyle
    at: Position | None = None
    when: Callable[[], bool] | None = None
    delay_s: float = 0.0
    cancels: int = 1

    def __post_init__(self) -> None:
        if (self.at is None) == (self.when is None):
            raise ValueError("a stop needs exactly one of `at` (a position) or `when`")
        if self.style != "cancel task" and (self.when is not None or self.cancels != 1):
            raise ValueError(f"only a cancelled task stops on a condition or again: {self}")


class Target(Protocol):
    """What runs a message: `ActorExecutor`, or a stand-in with the same three methods."""

    @property
    def last_result(self) -> ExecutionResult | None: ...

    async def execute(self, message: str, history: Any = None) -> ExecutionResult: ...

    def execute_events(self, message: str, history: Any = None) -> EventStream: ...

    def execute_stream(self, message: str, history: Any = None) -> TextStream: ...


@dataclass(frozen=True, slots=True)
class InSession:
    """A target whose every message continues the stored session `session_id` of `executor`."""

    executor: ActorExecutor
    session_id: str

    @property
    def last_result(self) -> ExecutionResult | None:
        return self.executor.last_result

    async def execute(self, message: str, history: Any = None) -> ExecutionResult:
        return await self.executor.execute(message, history, session_id=self.session_id)

    def execute_events(self, message: str, history: Any = None) -> EventStream:
        return self.executor.execute_events(message, history, session_id=self.session_id)

    def execute_stream(self, message: str, history: Any = None) -> TextStream:
        return self.executor.execute_stream(message, history, session_id=self.session_id)


@dataclass(slots=True)
class Consumption:
    """What the caller saw of one run, and what the run left behind."""

    mode: Mode
    result: ExecutionResult | None = None
    """The call's own result: what `execute()` returned, or the stream's `.result` once settled;
    when `execute()` raised, the only copy is the target's `last_result`, so it is that."""
    error: BaseException | None = None
    """What escaped the caller (`execute()` or its reading of the stream), if anything."""
    events: list[Event] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)
    """Text chunks (`text` mode) or the texts of the text deltas (`events` mode), as read."""
    chunk_times: list[float] = field(default_factory=list)
    """`time.perf_counter()` when each chunk reached the caller."""
    usage_var: TokenUsage | None = None
    """`last_token_usage_var` as the caller sees it once its call returned."""
    stopped_at: float | None = None
    """`time.perf_counter()` when the caller reached its stop; None if it never did."""
    run_had_ended_at_stop: bool = False
    """At the stop, the target's `last_result` was already set: the run had ended its own way."""
    last_result_on_return: ExecutionResult | None = None
    last_result: ExecutionResult | None = None
    """The target's `last_result` once the run settled."""
    settled_at: float | None = None
    tasks_pending_on_return: tuple[str, ...] = ()
    """Tasks of the run pending the moment the caller returned, except asyncio's own tasks that
    close a dropped async generator."""
    tasks_left: tuple[str, ...] = ()
    """Tasks the run left behind: pending when the caller returned (not counting asyncio's own
    closing of dropped generators; not at all after a plain `break`, which leaves the closing of
    the stream to asyncio), or still pending once the run settled. A resource the run opened
    (an MCP session) may keep tasks of its own here."""
    task_errors: tuple[str, ...] = ()
    """Exceptions that ended a task of the run and that nobody retrieved (asyncio would log them
    as "Task exception was never retrieved")."""

    @property
    def items(self) -> Sequence[Item]:
        """What the caller read: the events (`events` mode) or the text chunks."""
        return self.events if self.mode == "events" else self.chunks

    @property
    def stopped_early(self) -> bool:
        return self.stopped_at is not None

    @property
    def settled_after_s(self) -> float:
        """Seconds from the stop until the run had settled."""
        if self.stopped_at is None or self.settled_at is None:
            raise AssertionError("the caller never reached its stop")
        return self.settled_at - self.stopped_at


async def consume(
    target: Target,
    message: str,
    *,
    mode: Mode,
    stop: Stop | None = None,
    history: Any = None,
    settle_iterations: int | None = None,
    cancel_tasks_left: bool = False,
    on_caller: Callable[[asyncio.Task[None]], None] | None = None,
) -> Consumption:
    """Run `message` through `target` in `mode` from a caller task of its own, stop it as `stop`
    says, let the run settle and record it all.

    Settling: the harness waits until asyncio has closed the generators the run dropped (or,
    with `settle_iterations`, for every task of the run, up to that many event-loop iterations:
    a property of prompt settling). Tasks left are those pending when the caller returned,
    except asyncio's own closing of dropped generators, and those still pending once settled; a
    caller that only breaks out leaves the closing of its stream to asyncio, so for it only the
    latter count. With `cancel_tasks_left` they are then cancelled and awaited, so that they
    cannot disturb the next run. `on_caller` is handed the caller's task before it runs (a
    fault plan may cancel it).
    """
    if mode == "blocking" and stop is not None and stop.at is not None:
        raise ValueError("a blocking caller reads nothing to stop at: give a `when` condition")
    consumed = Consumption(mode=mode)
    caller = _Caller(target, consumed, stop)
    with TaskWatch() as watch:
        task = watch.create_task(caller.call(message, history))
        if on_caller is not None:
            on_caller(task)
        await caller.stop_from_outside(task)
        await asyncio.wait({task})
        consumed.error = _escaped(task)
        consumed.last_result_on_return = target.last_result
        is_break = stop is not None and stop.style == "break"
        await _settle(consumed, watch, is_break=is_break, iterations=settle_iterations)
        if cancel_tasks_left:
            await watch.cancel_pending()
        consumed.task_errors = watch.unretrieved_errors()
    consumed.last_result = target.last_result
    if caller.stream is not None:
        consumed.result = caller.stream.result
    if consumed.result is None:
        consumed.result = consumed.last_result
    return consumed


async def _settle(
    consumed: Consumption, watch: TaskWatch, *, is_break: bool, iterations: int | None
) -> None:
    """Record the tasks pending when the caller returned, let the run settle, record the tasks
    left (after a plain `break`, asyncio closes the dropped stream after the caller returned:
    then only what is pending once settled counts)."""
    on_return = watch.pending(include_generator_closing=False)
    consumed.tasks_pending_on_return = on_return
    await watch.settle(iterations=iterations)
    consumed.settled_at = time.perf_counter()
    consumed.tasks_left = tuple(sorted({*watch.pending(), *(() if is_break else on_return)}))


def _escaped(task: asyncio.Task[None]) -> BaseException | None:
    try:
        task.result()
    except (Exception, asyncio.CancelledError) as exc:  # what escaped is the observation
        return exc
    return None


class _Caller:
    """The caller's side of one run: reads the stream in its stop style, records what it reads."""

    def __init__(self, target: Target, consumed: Consumption, stop: Stop | None) -> None:
        self._target = target
        self._consumed = consumed
        self._stop = stop
        self._reached = asyncio.Event()
        self.stream: EventStream | TextStream | None = None

    async def call(self, message: str, history: Any) -> None:
        try:
            if self._consumed.mode == "blocking":
                self._consumed.result = await self._target.execute(message, history=history)
                return
            if self._consumed.mode == "events":
                self.stream = self._target.execute_events(message, history=history)
            else:
                self.stream = self._target.execute_stream(message, history=history)
            style = "read all" if self._stop is None or self._stop.at is None else self._stop.style
            await _READERS[style](self, self.stream)
        finally:
            self._consumed.usage_var = last_token_usage_var.get()

    async def stop_from_outside(self, task: asyncio.Task[None]) -> None:
        """The part of a stop another task does: cancel the caller on a condition, close the
        stream under it, or cancel it again while it stops."""
        stop = self._stop
        if stop is None:
            return
        if stop.when is not None:
            condition = stop.when
            await wait_until(lambda: condition() or task.done())
            if task.done():
                return
            self._mark_stop()
            await asyncio.sleep(stop.delay_s)
            task.cancel()
        elif stop.style == "aclose from another task" or stop.cancels > 1:
            reached = asyncio.ensure_future(self._reached.wait())
            await asyncio.wait({reached, task}, return_when=asyncio.FIRST_COMPLETED)
            reached.cancel()
            await asyncio.wait({reached})
            if self._consumed.stopped_at is None:
                return
            if stop.style == "aclose from another task":
                await cast(EventStream | TextStream, self.stream).aclose()
        for _ in range(stop.cancels - 1):
            await asyncio.sleep(_RECANCEL_PAUSE_S)
            task.cancel()

    # -- reading ----------------------------------------------------------------------------

    def _take(self, item: Item) -> None:
        if isinstance(item, str):
            self._add_chunk(item)
            return
        self._consumed.events.append(item)
        if isinstance(item, TextDelta):
            self._add_chunk(item.text)

    def _add_chunk(self, text: str) -> None:
        self._consumed.chunk_times.append(time.perf_counter())
        self._consumed.chunks.append(text)

    def _reaches_stop(self) -> bool:
        """Whether what was read has just reached the stop (true once, when it is marked)."""
        position = None if self._stop is None else self._stop.at
        if position is None or self._consumed.stopped_at is not None:
            return False
        if not position(self._consumed.items):
            return False
        self._mark_stop()
        return True

    def _mark_stop(self) -> None:
        self._consumed.stopped_at = time.perf_counter()
        self._consumed.run_had_ended_at_stop = self._target.last_result is not None
        self._reached.set()

    async def _read_until_stop(self, stream: EventStream | TextStream) -> None:
        """Read until the stop (or the end); the iterator is dropped on return."""
        if self._reaches_stop():
            return
        async for item in stream:
            self._take(item)
            if self._reaches_stop():
                return

    async def _read_all(self, stream: EventStream | TextStream) -> None:
        async for item in stream:
            self._take(item)
            self._reaches_stop()  # marks the stop for a task that acts on it

    async def _by_break(self, stream: EventStream | TextStream) -> None:
        await self._read_until_stop(stream)

    async def _by_aclose(self, stream: EventStream | TextStream) -> None:
        # The iterator stays referenced until aclose(), as in a caller that reads with anext().
        items = None
        while not self._reaches_stop():
            items = items or aiter(stream)
            try:
                self._take(await anext(items))
            except StopAsyncIteration:
                break
        await stream.aclose()

    async def _by_async_with(self, stream: EventStream | TextStream) -> None:
        async with stream:
            await self._read_until_stop(stream)

    async def _by_cancelling_the_task(self, stream: EventStream | TextStream) -> None:
        # Cancelled at the stop, the caller reads on: the cancellation lands in its next read.
        if self._reaches_stop():
            _cancel_own_task()
        async for item in stream:
            self._take(item)
            if self._reaches_stop():
                _cancel_own_task()

    async def _by_cancel_scope(self, stream: EventStream | TextStream) -> None:
        # As Starlette ends a response body when its client hangs up: the scope is cancelled at
        # the stop and the caller reads on, so the cancellation lands in its next read, and
        # again at every await until it leaves the scope (the stream settles the run on its
        # own way out).
        with anyio.CancelScope() as scope:
            if self._reaches_stop():
                scope.cancel()
            async for item in stream:
                self._take(item)
                if self._reaches_stop():
                    scope.cancel()


def _cancel_own_task() -> None:
    cast(asyncio.Task[None], asyncio.current_task()).cancel()


_READERS: dict[
    StopStyle | Literal["read all"],
    Callable[[_Caller, EventStream | TextStream], Awaitable[None]],
] = {
    "read all": _Caller._read_all,
    "aclose from another task": _Caller._read_all,
    "break": _Caller._by_break,
    "aclose": _Caller._by_aclose,
    "async with": _Caller._by_async_with,
    "cancel task": _Caller._by_cancelling_the_task,
    "cancel scope": _Caller._by_cancel_scope,
}


class ChunkCounter(AsyncCallbackHandler):
    """Counts the chunks a chat model has taken from the provider's stream (give it to the model
    as a callback); `has_reached` is set once it took `signal_at`."""

    def __init__(self, *, signal_at: int) -> None:
        self.chunks = 0
        self._signal_at = signal_at
        self.has_reached = asyncio.Event()

    async def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.chunks += 1
        if self.chunks >= self._signal_at:
            self.has_reached.set()


async def read_slowly(
    open_stream: Callable[[str], EventStream],
    message: str,
    *,
    counter: ChunkCounter,
    stall_s: float,
) -> tuple[Consumption, int]:
    """A slow reader of the events `open_stream(message)` gives (e.g. `execute_events`): reads
    one, then nothing until `counter` has reached its mark and `stall_s` more, then the rest.
    Returns what it read, and how many chunks the model had taken when it read on."""
    consumed = Consumption(mode="events")
    async with open_stream(message) as stream:
        events = aiter(stream)
        consumed.events.append(await anext(events))
        await counter.has_reached.wait()
        await asyncio.sleep(stall_s)  # every chance to pull more, were it not held back
        chunks_while_stalled = counter.chunks
        consumed.events += [event async for event in events]
    consumed.result = stream.result
    return consumed, chunks_while_stalled


# -- waiting ------------------------------------------------------------------------------------

T = TypeVar("T")


async def wait_until(condition: Callable[[], bool], *, timeout_s: float = HANG_GUARD_S) -> bool:
    """Whether `condition` came true within `timeout_s`. Polled: only for conditions nothing can
    await (a handler's note, the scripted model's record, a server thread's bill)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_POLL_S)
    return True


async def guarded(awaitable: Awaitable[T]) -> T:
    """`awaitable`, failed with `TimeoutError` once it took `HANG_GUARD_S`."""
    async with asyncio.timeout(HANG_GUARD_S):
        return await awaitable


def run_guarded(awaitable: Awaitable[T]) -> T:
    """Run `awaitable` in a fresh event loop, under the hang guard."""
    return asyncio.run(guarded(awaitable))
