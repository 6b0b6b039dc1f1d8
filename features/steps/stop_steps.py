"""Steps for stopping runs over the real wire: `ChatOpenAI` against a `ScriptedOpenAIServer`.

Every stop style a consumer has (break, `aclose()`, leaving `async with`, cancelling its own task,
a cancelled anyio cancel scope) at every kind of event; then what the stop cost in CPU, and how
far a run gets ahead of a consumer that reads slowly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable

from behave import given, then, when
from behave.runner import Context
from support.billing import SentPrompts, billing_problems, requests_of_conversation
from support.harness import (
    NAMED_POSITIONS,
    ChunkCounter,
    Consumption,
    Stop,
    StopStyle,
    consume,
    read_slowly,
    run_guarded,
)

from cleveractors import ActorExecutor, demo
from cleveractors.agents.stream import MAX_BUFFERED_EVENTS, EventStream, RunOutcome
from cleveractors.events import Event, TextDelta
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

_API_KEY_ENV = "CLEVERACTORS_STOP_TEST_KEY"
_MESSAGE = "Look up the Louvre and the Orsay, then tell me about both."
_OPENING = "Let me look up both museums for you before I answer, one after the other."
# Long and slow: a run that lost its stop would still be sending this when the scenario ends.
_SLOW_ANSWER = " ".join(f"fact{n}" for n in range(60))
_SLOW_CHUNK_DELAY_S = 0.1


# -- the world ---------------------------------------------------------------------------------


def _wire_executor(context: Context, server: ScriptedOpenAIServer) -> ActorExecutor:
    """The actor over the wire to `server`; `context.sent_prompts` records its calls' messages."""
    os.environ[_API_KEY_ENV] = "sk-stop-test"
    executor = ActorExecutor.from_config(
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
    context.sent_prompts = SentPrompts()
    executor.agent.model.callbacks = [context.sent_prompts]
    return executor


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

_STYLES: dict[str, StopStyle] = {
    "break": "break",
    "aclose()": "aclose",
    "leaving async with": "async with",
    "cancelling the consumer's task": "cancel task",
    "an anyio cancel scope": "cancel scope",
}


async def _stop_at(context: Context, position: str, style: StopStyle) -> Consumption:
    stop = Stop(style, at=NAMED_POSITIONS[position])
    consumed = await consume(context.executor, _MESSAGE, mode="events", stop=stop)
    assert consumed.stopped_early, f"the run ended before the stop: {consumed.events}"
    return consumed


@when("the consumer stops at the {position} by {how}")
def _when_stops_at(context: Context, position: str, how: str) -> None:
    assert position in NAMED_POSITIONS, (
        f"unknown position {position!r}; one of {sorted(NAMED_POSITIONS)}"
    )
    assert how in _STYLES, f"unknown way to stop {how!r}; one of {sorted(_STYLES)}"
    context.outcome = run_guarded(_stop_at(context, position, _STYLES[how]))


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
    billed = requests_of_conversation(server.requests, server.billed, _MESSAGE)
    calls = [call.usage for call in result.usage_by_call]
    problems = billing_problems(calls, billed, context.sent_prompts.of())
    assert not problems, "\n".join(problems)


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
    async def scenario() -> Consumption:
        cpu_before = time.process_time()
        consumed = await _stop_at(context, "tool started", "cancel scope")
        context.cpu_s = time.process_time() - cpu_before
        return consumed

    context.outcome = run_guarded(scenario())


@then("the stop waited for the tool to let go")
def _then_waited_for_cleanup(context: Context) -> None:
    # Wall time only as evidence that the wait really spanned the tool's slow stop.
    assert context.outcome.settled_after_s >= context.cleanup_seconds * 0.9, context.outcome
    assert [call.ended for call in demo.invocations()] == ["cancelled"]


@then("the process spent less than {seconds:g} s of CPU from the first event to the settled run")
def _then_cpu_below(context: Context, seconds: float) -> None:
    assert context.cpu_s < seconds, f"{context.cpu_s:.3f} s of CPU"


# -- a slow consumer ---------------------------------------------------------------------------


@when("the consumer reads one event, then nothing for a while, then the rest")
def _when_slow_consumer(context: Context) -> None:
    _read_slowly(context, context.executor.execute_events)


@when(
    "the consumer of an agent that wraps its run's sink reads one event, then nothing for a "
    "while, then the rest"
)
def _when_slow_consumer_of_wrapped_sink(context: Context) -> None:
    # What an agent of one's own does to pass on (or relabel) another agent's events.
    agent = context.executor.agent

    def wrapping_stream(message: str) -> EventStream:
        def run(sink: Callable[[Event], None]) -> Awaitable[RunOutcome]:
            return agent.run(message, history=None, sink=lambda event: sink(event), streaming=True)

        return EventStream(run)

    _read_slowly(context, wrapping_stream)


def _read_slowly(context: Context, open_stream: Callable[[str], EventStream]) -> None:
    counter = ChunkCounter(signal_at=MAX_BUFFERED_EVENTS)
    context.executor.agent.model.callbacks = [counter]
    # The run fills the channel and must then stop pulling; give it every chance not to.
    reading = read_slowly(open_stream, _MESSAGE, counter=counter, stall_s=0.5)
    context.outcome, context.chunks_while_stalled = run_guarded(reading)


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
