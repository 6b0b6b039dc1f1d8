"""Steps for stopping runs over the real wire: `ChatOpenAI` against a `ScriptedOpenAIServer`.

Every stop style a consumer has (break, `aclose()`, leaving `async with`, cancelling its own task,
a cancelled anyio cancel scope) at every kind of event; then what the stop cost in CPU, and how
far a run gets ahead of a consumer that reads slowly.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from behave import given, then, when
from behave.runner import Context
from langchain_core.callbacks import AsyncCallbackHandler

from cleveractors import ActorExecutor, ExecutionResult, demo
from cleveractors.agents.stream import MAX_BUFFERED_EVENTS, EventStream
from cleveractors.events import (
    Event,
    TextDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    UsageRecorded,
)
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from cleveractors.testing.tables import other_running_tasks

_API_KEY_ENV = "CLEVERACTORS_STOP_TEST_KEY"
_MESSAGE = "Look up the Louvre and the Orsay, then tell me about both."
_OPENING = "Let me look up both museums for you before I answer, one after the other."
# Long and slow: a run that lost its stop would still be sending this when the scenario ends.
_SLOW_ANSWER = " ".join(f"fact{n}" for n in range(60))
_SLOW_CHUNK_DELAY_S = 0.1
_HANG_GUARD_S = 60.0
_SETTLE_POLL_S = 0.005


@dataclass
class _StopOutcome:
    """What a consumer saw before it stopped, and what the stop left behind."""

    events: list[Event] = field(default_factory=list)
    stopped_at: float | None = None
    """`time.perf_counter()` when the consumer stopped (same clock as the demo tools' record)."""
    settled_after_s: float | None = None
    """Seconds from the stop until the run's result was settled."""
    result: ExecutionResult | None = None
    tasks_left: list[str] = field(default_factory=list)
    cpu_s: float | None = None


# -- the world ---------------------------------------------------------------------------------


def _wire_executor(context: Context, server: ScriptedOpenAIServer) -> ActorExecutor:
    os.environ[_API_KEY_ENV] = "sk-stop-test"
    return ActorExecutor.from_config(
        {
            "name": "museum-guide",
            "agent": {
                "type": "llm",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": server.base_url,
                "api_key_env": _API_KEY_ENV,
                "max_retries": 0,
                "tools": [
                    {
                        "name": "slow_lookup",
                        "handler": "cleveractors.demo:slow_lookup",
                    }
                ],
            },
        }
    )


def _start_server(context: Context, script: list[ScriptedReply]) -> ScriptedOpenAIServer:
    server = ScriptedOpenAIServer(script)
    server.start()
    context.add_cleanup(server.stop)
    context.server = server
    return server


def _lookup(call_id: str, query: str, seconds: float) -> ScriptedToolCall:
    return ScriptedToolCall(
        name="slow_lookup", id=call_id, args={"query": query, "seconds": seconds}
    )


@given(
    "a scripted OpenAI server whose first reply streams a sentence at full speed and calls "
    "slow_lookup twice, and whose second reply streams slowly"
)
def _given_two_rounds(context: Context) -> None:
    # Chunks at full speed arrive together, which is when Python 3.11's wait_for swallows a
    # cancellation; the lookups take long enough to be caught running.
    calls = (_lookup("louvre", "Louvre", 0.3), _lookup("orsay", "Orsay", 0.3))
    script = [
        ScriptedReply(text=_OPENING, tool_calls=calls),
        ScriptedReply(text=_SLOW_ANSWER, chunk_delay_s=_SLOW_CHUNK_DELAY_S),
    ]
    server = _start_server(context, script)
    context.executor = _wire_executor(context, server)


@given("a scripted OpenAI server whose reply is a long answer of {words:d} words")
def _given_long_answer(context: Context, words: int) -> None:
    server = _start_server(context, [ScriptedReply(text=" ".join(["word"] * words))])
    context.answer_words = words
    context.executor = _wire_executor(context, server)


# -- When: stopping ----------------------------------------------------------------------------

_POSITIONS: dict[str, Callable[[list[Event]], bool]] = {
    "first text": lambda seen: sum(isinstance(e, TextDelta) for e in seen) == 1,
    "mid-text": lambda seen: sum(isinstance(e, TextDelta) for e in seen) == 6,
    "tool requested": lambda seen: isinstance(seen[-1], ToolCallRequested),
    "tool started": lambda seen: isinstance(seen[-1], ToolCallStarted),
    "tool finished": lambda seen: isinstance(seen[-1], ToolCallFinished),
    "usage recorded": lambda seen: isinstance(seen[-1], UsageRecorded),
}


class _StopHere(Exception):
    """Raised inside a cancel scope or task to model a consumer that goes away."""


async def _read_until(
    events: AsyncIterator[Event], outcome: _StopOutcome, is_there: Callable[[list[Event]], bool]
) -> None:
    async for event in events:
        outcome.events.append(event)
        if is_there(outcome.events):
            outcome.stopped_at = time.perf_counter()
            return
    raise AssertionError(f"the run ended before the stop: {[e.kind for e in outcome.events]}")


async def _stop_by_break(stream: EventStream, outcome: _StopOutcome, at: Any) -> None:
    async for event in stream:  # no reference to the generator kept: the loop finalises it
        outcome.events.append(event)
        if at(outcome.events):
            outcome.stopped_at = time.perf_counter()
            break


async def _stop_by_aclose(stream: EventStream, outcome: _StopOutcome, at: Any) -> None:
    await _read_until(aiter(stream), outcome, at)
    await stream.aclose()


async def _stop_by_leaving_async_with(stream: EventStream, outcome: _StopOutcome, at: Any) -> None:
    async with stream:
        await _read_until(aiter(stream), outcome, at)


async def _stop_by_cancelling_the_consumer(
    stream: EventStream, outcome: _StopOutcome, at: Any
) -> None:
    reached = asyncio.Event()

    async def consume() -> None:
        await _read_until(aiter(stream), outcome, at)
        reached.set()
        await asyncio.sleep(_HANG_GUARD_S)  # still iterating: the cancel lands in our await

    async with stream:
        consumer = asyncio.create_task(consume())
        await reached.wait()
        consumer.cancel()
        await asyncio.wait({consumer})


async def _stop_by_cancel_scope(stream: EventStream, outcome: _StopOutcome, at: Any) -> None:
    with anyio.CancelScope() as scope:
        async with stream:
            await _read_until(aiter(stream), outcome, at)
            scope.cancel()
            await anyio.sleep(_HANG_GUARD_S)  # the scope cancels us here, and on every pass


_STYLES: dict[str, Callable[[EventStream, _StopOutcome, Any], Awaitable[None]]] = {
    "break": _stop_by_break,
    "aclose()": _stop_by_aclose,
    "leaving async with": _stop_by_leaving_async_with,
    "cancelling the consumer's task": _stop_by_cancelling_the_consumer,
    "an anyio cancel scope": _stop_by_cancel_scope,
}


async def _settled(stream: EventStream) -> None:
    """Return once the run's result is set and no task of it is left (a plain `break` leaves the
    closing to the loop's async-generator finaliser, a turn or two later)."""
    for _ in range(int(_HANG_GUARD_S / _SETTLE_POLL_S)):
        if stream.result is not None and not other_running_tasks():
            return
        await asyncio.sleep(_SETTLE_POLL_S)
    raise AssertionError("the run never settled")


@when("the consumer stops at the {position} by {how}")
def _when_stops_at(context: Context, position: str, how: str) -> None:
    assert position in _POSITIONS, f"unknown position {position!r}; one of {sorted(_POSITIONS)}"
    assert how in _STYLES, f"unknown way to stop {how!r}; one of {sorted(_STYLES)}"

    async def scenario() -> _StopOutcome:
        outcome = _StopOutcome()
        stream = context.executor.execute_events(_MESSAGE)
        await _STYLES[how](stream, outcome, _POSITIONS[position])
        assert outcome.stopped_at is not None, "the consumer never reached the stop"
        await _settled(stream)
        outcome.settled_after_s = time.perf_counter() - outcome.stopped_at
        outcome.result = stream.result
        outcome.tasks_left = [repr(task) for task in other_running_tasks()]
        return outcome

    context.outcome = _run_guarded(scenario())


def _run_guarded(scenario: Awaitable[_StopOutcome]) -> _StopOutcome:
    async def guarded() -> _StopOutcome:
        async with asyncio.timeout(_HANG_GUARD_S):
            return await scenario

    return asyncio.run(guarded())


# -- Then --------------------------------------------------------------------------------------


@then("no tool started after the stop")
def _then_no_tool_after_stop(context: Context) -> None:
    stopped_at = context.outcome.stopped_at
    late = [call for call in demo.invocations() if call.started > stopped_at]
    assert not late, f"tools started after the stop: {late}"
    still_running = [call for call in demo.invocations() if call.finished > stopped_at]
    assert all(call.ended == "cancelled" for call in still_running), still_running


@then("the stop returned within {seconds:g} seconds")
def _then_stop_prompt(context: Context, seconds: float) -> None:
    assert context.outcome.settled_after_s <= seconds, context.outcome.settled_after_s


@then("every request the server received is in the bill, as billed where its usage arrived")
def _then_billed_like_server(context: Context) -> None:
    result, server = context.outcome.result, context.server
    assert result is not None, "no result was settled"
    assert result.llm_calls == len(server.requests), (result.usage_by_call, server.requests)
    billed = {call.request_index: call for call in server.billed}
    for index, call in enumerate(result.usage_by_call):
        # A call cut off before its usage chunk was read is estimated: the server may have
        # finished sending it into the socket, but the figures never reached us.
        if not call.usage.estimated:
            sent = billed[index]
            reported = (call.usage.prompt_tokens, call.usage.completion_tokens)
            assert reported == (sent.prompt_tokens, sent.completion_tokens), (call, sent)


# -- CPU across a stop -------------------------------------------------------------------------


@given("a scripted OpenAI server whose reply calls slow_lookup taking {seconds:g} s to stop")
def _given_slow_to_stop(context: Context, seconds: float) -> None:
    call = ScriptedToolCall(
        name="slow_lookup",
        id="slow",
        args={"query": "Louvre", "seconds": 30, "cleanup_seconds": seconds},
    )
    server = _start_server(context, [ScriptedReply(tool_calls=(call,)), ScriptedReply(text="x")])
    context.executor = _wire_executor(context, server)
    context.cleanup_seconds = seconds


@when("an anyio cancel scope around the consumer is cancelled while the tool runs")
def _when_scope_cancelled_during_tool(context: Context) -> None:
    async def scenario() -> _StopOutcome:
        outcome = _StopOutcome()
        stream = context.executor.execute_events(_MESSAGE)
        is_started = _POSITIONS["tool started"]
        cpu_before = time.process_time()
        await _stop_by_cancel_scope(stream, outcome, is_started)
        outcome.cpu_s = time.process_time() - cpu_before
        assert outcome.stopped_at is not None
        outcome.settled_after_s = time.perf_counter() - outcome.stopped_at
        outcome.result = stream.result
        outcome.tasks_left = [repr(task) for task in other_running_tasks()]
        return outcome

    context.outcome = _run_guarded(scenario())


@then("the stop waited for the tool to let go")
def _then_waited_for_cleanup(context: Context) -> None:
    # Wall time only as evidence that the wait really spanned the tool's slow stop.
    assert context.outcome.settled_after_s >= context.cleanup_seconds * 0.9, context.outcome
    assert [call.ended for call in demo.invocations()] == ["cancelled"]


@then("the process spent less than {seconds:g} s of CPU from the first event to the settled run")
def _then_cpu_below(context: Context, seconds: float) -> None:
    assert context.outcome.cpu_s < seconds, f"{context.outcome.cpu_s:.3f} s of CPU"


# -- a slow consumer ---------------------------------------------------------------------------


class _ChunkCounter(AsyncCallbackHandler):
    """Counts the chunks the chat model has taken from the provider's stream."""

    def __init__(self, *, signal_at: int) -> None:
        self.chunks = 0
        self._signal_at = signal_at
        self.has_reached = asyncio.Event()

    async def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.chunks += 1
        if self.chunks >= self._signal_at:
            self.has_reached.set()


@when("the consumer reads one event, then nothing for a while, then the rest")
def _when_slow_consumer(context: Context) -> None:
    async def scenario() -> _StopOutcome:
        counter = _ChunkCounter(signal_at=MAX_BUFFERED_EVENTS)
        context.executor.agent.model.callbacks = [counter]
        outcome = _StopOutcome()
        async with context.executor.execute_events(_MESSAGE) as stream:
            events = aiter(stream)
            outcome.events.append(await anext(events))
            # The run fills the channel and must then stop pulling; give it every chance not to.
            await counter.has_reached.wait()
            await asyncio.sleep(0.5)
            context.chunks_while_stalled = counter.chunks
            async for event in events:
                outcome.events.append(event)
        outcome.result = stream.result
        return outcome

    context.outcome = _run_guarded(scenario())


@then("while it read nothing the model took no more than the channel holds from the provider")
def _then_model_waited(context: Context) -> None:
    # A chunk is one text delta; a few more chunks are in flight between two checkpoints.
    assert context.chunks_while_stalled <= MAX_BUFFERED_EVENTS + 4, context.chunks_while_stalled
    assert context.chunks_while_stalled < context.answer_words, context.chunks_while_stalled


@then("the whole answer arrived and the run is billed as the server billed it")
def _then_whole_answer(context: Context) -> None:
    text = "".join(e.text for e in context.outcome.events if isinstance(e, TextDelta))
    assert len(text.split()) == context.answer_words, len(text.split())
    result, billed = context.outcome.result, context.server.billed_total
    assert result is not None, "no result was settled"
    assert not result.cancelled, result
    assert (result.prompt_tokens, result.completion_tokens) == (
        billed.prompt_tokens,
        billed.completion_tokens,
    ), (result, billed)
