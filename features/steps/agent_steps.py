"""Steps that give the actor its script and limits, make one call to it, and read the answer.

Every When step that runs the actor lives here and records what its caller saw in
`context.outcome` (or `context.outcomes`, for concurrent calls); the Then steps of the other
modules only read those.

Scripted replies are tables. A `tool calls` cell lists calls separated by " ; ", each written
`name#id {"json": "arguments"}`; arguments that are not a JSON object are kept as raw text, so
invalid JSON can be scripted on purpose.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from behave import given, register_type, then, when
from behave.runner import Context
from support.shaped_models import executor_with_model

from cleveractors import (
    ActorExecutor,
    ExecutionResult,
    LLMAgent,
    TextStream,
    TokenUsage,
    last_token_usage_var,
    load_actor_config,
)
from cleveractors.agents.text import RunText
from cleveractors.events import Event, TextDelta, ToolCallStarted
from cleveractors.result import SYNTHESIS_WITHOUT_ANSWER
from cleveractors.testing import ScriptedChatModel, ScriptedReply
from cleveractors.testing.tables import other_running_tasks, scripted_reply

register_type(Json=json.loads)

_STREAMED_MODES = {"streaming", "events", "agent streaming"}
_HANG_GUARD_S = 15.0
"""A call that takes this long has hung (scripts sleep 30 s only where a run must be cut
short): fail the step rather than the whole suite's time budget."""
_MAX_WAITS = 5_000
"""Bound on the 1 ms pauses spent waiting for a condition, so a broken run fails, not hangs."""


@dataclass
class _Outcome:
    """What one call gave its caller.

    `mode` is how the call was made: `blocking` (`execute()`), `streaming` (`execute_stream()`),
    `events` (`execute_events()`), or straight to the agent, bypassing the executor:
    `agent blocking` (`process_message()`) and `agent streaming` (`stream_message()`).
    """

    mode: str
    result: ExecutionResult | None = None
    """The call's own result (returned, or the stream's `.result`); when `execute()` raised, the
    only copy is `executor.last_result`, so it is that."""
    error: BaseException | None = None
    chunks: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    last_result: ExecutionResult | None = None
    usage_var: TokenUsage | None = None
    tasks_left: list[str] = field(default_factory=list)
    """The tasks other than the caller's still running when the call returned, by name."""


# -- reading the script tables -----------------------------------------------------------------


# -- running the actor -------------------------------------------------------------------------


def _executor(context: Context) -> ActorExecutor:
    """The executor a Given built in code, or the one the scenario's actor config describes."""
    executor: ActorExecutor | None = getattr(context, "executor", None)
    if executor is None:
        stands_in_for = getattr(context, "stands_in_for", None)
        settings = getattr(context, "model_settings", None)
        if stands_in_for is not None:
            executor = _stand_in_executor(context.actor, *stands_in_for)
        elif settings is not None:
            executor = executor_with_model(context.actor, settings)
        else:
            executor = ActorExecutor.from_config(context.actor)
        context.executor = executor
    context.model = executor.agent.model
    return executor


def _stand_in_executor(actor: dict[str, Any], provider: str, model: str) -> ActorExecutor:
    """The actor's scripted model, named and priced as `model` of `provider`: the config is the
    actor's with that provider and model, and the agent is given the scripted model to run."""
    agent = {key: value for key, value in actor["agent"].items() if key != "script"}
    config = load_actor_config({**actor, "agent": {**agent, "provider": provider, "model": model}})
    scripted = ScriptedChatModel(replies=list(actor["agent"]["script"]))
    return ActorExecutor(LLMAgent.from_config(config.agent, model=scripted, name=config.name))


async def _consume(outcome: _Outcome, executor: ActorExecutor, message: str, history: Any) -> None:
    if outcome.mode == "blocking":
        outcome.result = await executor.execute(message, history=history)
    elif outcome.mode == "streaming":
        stream = executor.execute_stream(message, history=history)
        try:
            async for chunk in stream:
                outcome.chunks.append(chunk)
        finally:
            outcome.result = stream.result
    elif outcome.mode == "events":
        events = executor.execute_events(message, history=history)
        try:
            async for event in events:
                outcome.events.append(event)
                if isinstance(event, TextDelta):
                    outcome.chunks.append(event.text)
        finally:
            outcome.result = events.result
    elif outcome.mode == "agent blocking":
        outcome.result = await executor.agent.process_message(message, history=history)
    elif outcome.mode == "agent streaming":
        stream = TextStream(executor.agent.stream_message(message, history=history))
        try:
            async for chunk in stream:
                outcome.chunks.append(chunk)
        finally:
            outcome.result = stream.events.result
    else:
        raise ValueError(f"unknown mode {outcome.mode!r}")


async def _ask(executor: ActorExecutor, message: str, mode: str, history: Any = None) -> _Outcome:
    outcome = _Outcome(mode=mode)
    try:
        await _consume(outcome, executor, message, history)
    except Exception as exc:
        outcome.error = exc
    _settle(outcome, executor)
    return outcome


def _settle(outcome: _Outcome, executor: ActorExecutor) -> None:
    outcome.last_result = executor.last_result
    if outcome.result is None:
        outcome.result = outcome.last_result
    outcome.usage_var = last_token_usage_var.get()
    outcome.tasks_left = [f"{t.get_name()}: {t.get_coro()!r}" for t in other_running_tasks()]


def _run(context: Context, call: Callable[[ActorExecutor], Awaitable[_Outcome]]) -> None:
    async def guarded(executor: ActorExecutor) -> _Outcome:
        async with asyncio.timeout(_HANG_GUARD_S):
            return await call(executor)

    context.outcome = asyncio.run(guarded(_executor(context)))


async def _wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(_MAX_WAITS):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never came true")


# -- Given: the actor's script and limits ------------------------------------------------------


@given("the actor's model replies:")
def _given_script(context: Context) -> None:
    context.actor["agent"]["script"] = [scripted_reply(row.as_dict()) for row in context.table]


@given('the actor\'s model answers every message with "{text}"')
def _given_same_answer(context: Context, text: str) -> None:
    context.actor["agent"]["script"] = [ScriptedReply(text=text)] * 200


@given("the actor allows at most {rounds:d} tool round")
@given("the actor allows at most {rounds:d} tool rounds")
def _given_max_rounds(context: Context, rounds: int) -> None:
    context.actor["agent"]["tool_max_rounds"] = rounds


@given("the actor has a token budget of {tokens:d}")
def _given_budget(context: Context, tokens: int) -> None:
    context.actor["agent"]["token_budget"] = tokens


@given("tool outputs over {tokens:d} tokens are condensed")
def _given_pruning(context: Context, tokens: int) -> None:
    context.actor["agent"]["tool_output_max_tokens"] = tokens


@given('the actor has the system prompt "{prompt}"')
def _given_system_prompt(context: Context, prompt: str) -> None:
    context.actor["agent"]["system_prompt"] = prompt


@given("the actor does not stream tool rounds")
def _given_single_chunk_rounds(context: Context) -> None:
    context.actor["agent"]["stream_tool_rounds"] = False


@given("{count:d} messages of different lengths, each already sent alone to a fresh actor")
def _given_reference_runs(context: Context, count: int) -> None:
    context.messages = [
        f"Please remember item number {number}: " + " ".join(["pear"] * number)
        for number in range(1, count + 1)
    ]

    async def alone() -> list[ExecutionResult]:
        return [
            await ActorExecutor.from_config(context.actor).execute(message)
            for message in context.messages
        ]

    context.references = asyncio.run(alone())


# -- When: one call ----------------------------------------------------------------------------


@when('the actor is asked "{message}" in {mode} mode')
def _when_asked(context: Context, message: str, mode: str) -> None:
    _run(context, lambda executor: _ask(executor, message, mode))


@when("the actor is asked {message:Json} with the history {history:Json} in {mode} mode")
def _when_asked_raw(context: Context, message: Any, history: Any, mode: str) -> None:
    _run(context, lambda executor: _ask(executor, message, mode, history))


@when('the actor is asked "{message}" after this conversation, in {mode} mode:')
def _when_asked_with_history(context: Context, message: str, mode: str) -> None:
    history = [{"role": row["role"], "content": row["content"]} for row in context.table]
    _run(context, lambda executor: _ask(executor, message, mode, history))


@when('"{message}" is sent blocking to one actor and streamed to an identical one')
def _when_blocking_and_streamed(context: Context, message: str) -> None:
    blocking = asyncio.run(_ask(ActorExecutor.from_config(context.actor), message, "blocking"))
    _run(context, lambda executor: _ask(executor, message, "streaming"))
    context.outcomes = [blocking, context.outcome]


@when("the {count:d} messages are sent at once to one executor in {mode} mode")
def _when_concurrent(context: Context, count: int, mode: str) -> None:
    async def all_at_once(executor: ActorExecutor) -> list[_Outcome]:
        return list(
            await asyncio.gather(*(_ask(executor, message, mode) for message in context.messages))
        )

    executor = _executor(context)
    context.outcomes = asyncio.run(all_at_once(executor))


_STOPS = {
    "breaking out inside async with",
    "breaking out of the event stream inside async with",
    "calling aclose()",
    "a plain break, once the loop has finalised the stream",
    "a plain break out of the event stream, once the loop has finalised it",
}


@when('the consumer stops reading after the answer chunk "{word}" by {how}')
def _when_consumer_stops(context: Context, word: str, how: str) -> None:
    assert how in _STOPS, f"unknown way to stop: {how!r}; one of {sorted(_STOPS)}"

    async def stop_early(executor: ActorExecutor) -> _Outcome:
        outcome = _Outcome(mode="events" if "event stream" in how else "streaming")
        message = "What is the weather in Paris?"
        if how == "breaking out of the event stream inside async with":
            async with executor.execute_events(message) as events:
                async for event in events:
                    outcome.events.append(event)
                    if isinstance(event, TextDelta) and event.text.strip() == word:
                        break
            outcome.result = events.result
        elif how == "breaking out inside async with":
            async with executor.execute_stream(message) as stream:
                async for chunk in stream:
                    outcome.chunks.append(chunk)
                    if chunk.strip() == word:
                        break
            outcome.result = stream.result
        elif how == "calling aclose()":
            stream = executor.execute_stream(message)
            chunks = aiter(stream)
            while (chunk := await anext(chunks)).strip() != word:
                outcome.chunks.append(chunk)
            outcome.chunks.append(chunk)
            await stream.aclose()
            outcome.result = stream.result
        elif how == "a plain break out of the event stream, once the loop has finalised it":
            # No reference to the stream is kept, as in `async for e in execute_events(...)`.
            async for event in executor.execute_events(message):
                outcome.events.append(event)
                if isinstance(event, TextDelta) and event.text.strip() == word:
                    break
            await _wait_until(lambda: not other_running_tasks())
        else:
            async for chunk in executor.execute_stream(message):
                outcome.chunks.append(chunk)
                if chunk.strip() == word:
                    break
            await _wait_until(lambda: not other_running_tasks())
        _settle(outcome, executor)
        return outcome

    _run(context, stop_early)
    gc.collect()  # abandoned tasks report unretrieved exceptions when they are collected


@when('the consumer\'s task is cancelled while the tool "{tool}" runs')
def _when_cancelled_during_tool(context: Context, tool: str) -> None:
    _run(context, lambda executor: _cancel_during_tool(executor, tool, times=1))


@when('the consumer\'s task is cancelled while the tool "{tool}" runs, and again while it stops')
def _when_cancelled_twice_during_tool(context: Context, tool: str) -> None:
    # Cancelling again at every await is what anyio cancel scopes (Starlette) do.
    _run(context, lambda executor: _cancel_during_tool(executor, tool, times=2))


async def _cancel_during_tool(executor: ActorExecutor, tool: str, *, times: int) -> _Outcome:
    outcome = _Outcome(mode="events")
    tool_started = asyncio.Event()
    events = executor.execute_events("Look it up, please.")

    async def consume() -> None:
        async for event in events:
            outcome.events.append(event)
            if isinstance(event, ToolCallStarted) and event.name == tool:
                tool_started.set()

    consumer = asyncio.create_task(consume())
    waiter = asyncio.create_task(tool_started.wait())
    await asyncio.wait({consumer, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    consumer.cancel()
    for _ in range(times - 1):
        await asyncio.sleep(0.01)  # the consumer is waiting for the run to stop by now
        consumer.cancel()
    try:
        await consumer
    except asyncio.CancelledError as exc:
        outcome.error = exc
    outcome.result = events.result
    await asyncio.wait({waiter})
    _settle(outcome, executor)
    return outcome


@when("the caller's task is cancelled while the model is answering, in {mode} mode")
def _when_cancelled_during_model(context: Context, mode: str) -> None:
    async def cancel(executor: ActorExecutor) -> _Outcome:
        outcome = _Outcome(mode=mode)
        model = executor.agent.model
        assert isinstance(model, ScriptedChatModel)
        caller = asyncio.create_task(_consume(outcome, executor, "Weather in Paris?", None))
        await _wait_until(lambda: bool(model.requests) or caller.done())
        caller.cancel()
        try:
            await caller
        except asyncio.CancelledError as exc:
            outcome.error = exc
        _settle(outcome, executor)
        return outcome

    _run(context, cancel)


@when("the caller's task is cancelled while the loop waits to retry, in {mode} mode")
def _when_cancelled_in_backoff(context: Context, mode: str) -> None:
    async def cancel(executor: ActorExecutor) -> _Outcome:
        outcome = _Outcome(mode=mode)
        model = executor.agent.model
        assert isinstance(model, ScriptedChatModel)
        caller = asyncio.create_task(_consume(outcome, executor, "Weather in Paris?", None))
        await _wait_until(lambda: bool(model.requests) or caller.done())
        await asyncio.sleep(0.05)  # the refusal is billed and the wait has begun
        caller.cancel()
        try:
            await caller
        except asyncio.CancelledError as exc:
            outcome.error = exc
        _settle(outcome, executor)
        return outcome

    _run(context, cancel)


@when('the agent runs "{message}" with its events into a list, {mode}')
def _when_agent_runs(context: Context, message: str, mode: str) -> None:
    assert mode in {"blocking", "streaming"}, mode
    agent = _executor(context).agent
    assert isinstance(agent, LLMAgent)
    context.run_events = []
    context.run_outcome = asyncio.run(
        agent.run(
            message, history=None, sink=context.run_events.append, streaming=mode == "streaming"
        )
    )


@when("the {kind} stream is closed before it is read")
def _when_closed_unread(context: Context, kind: str) -> None:
    async def close(executor: ActorExecutor) -> _Outcome:
        outcome = _Outcome(mode="streaming")
        stream = executor.execute_stream("Weather in Paris?")
        await (stream.aclose() if kind == "text" else stream.events.aclose())
        outcome.result = stream.result
        _settle(outcome, executor)
        return outcome

    _run(context, close)


# -- Then: the answer and the model's requests -------------------------------------------------


@then('the answer is "{text}"')
def _then_answer(context: Context, text: str) -> None:
    outcome = context.outcome
    assert outcome.error is None, f"the call failed: {outcome.error!r}"
    assert outcome.result.answer == text, f"answer {outcome.result.answer!r}"
    assert outcome.result.text.endswith(text), f"text {outcome.result.text!r}"
    if outcome.mode in _STREAMED_MODES:
        shown = _shown_text(outcome)
        # One rule for the text of a run: the result's text is what the stream showed.
        assert shown == outcome.result.text, f"shown {shown!r}, text {outcome.result.text!r}"
        assert all(outcome.chunks), f"an empty chunk was yielded: {outcome.chunks!r}"


def _shown_text(outcome: _Outcome) -> str:
    """What the user saw: a text stream's chunks as they came; for events, their deltas joined
    by the library's one rule, as a UI reading the events shows them."""
    if outcome.mode != "events":
        return "".join(outcome.chunks)
    shown = RunText()
    for event in outcome.events:
        if isinstance(event, TextDelta):
            shown.add(event.round, event.text)
    return shown.text


@then('the call failed with {error_type} "{message}"')
def _then_failed(context: Context, error_type: str, message: str) -> None:
    error = context.outcome.error
    assert error is not None, f"the call succeeded: {context.outcome.result!r}"
    assert type(error).__name__ == error_type, f"{error!r} is not a {error_type}"
    assert message in str(error), f"{str(error)!r} does not mention {message!r}"


@then("the call failed with {error_type}")
def _then_failed_with(context: Context, error_type: str) -> None:
    error = context.outcome.error
    assert error is not None, f"the call succeeded: {context.outcome.result!r}"
    assert type(error).__name__ == error_type, f"{error!r} is not a {error_type}"


@then('the synthesis reason is "{reason}"')
def _then_synthesis_reason(context: Context, reason: str) -> None:
    result = context.outcome.result
    assert result.synthesis_reason == reason, f"synthesis reason {result.synthesis_reason!r}"
    assert result.budget_exhausted == (reason in ("budget", "cost_budget"))
    assert result.usage_by_call[-1].purpose == "synthesis", result.usage_by_call


@then("the answer is the fixed message for a synthesis without an answer")
def _then_fixed_synthesis_answer(context: Context) -> None:
    _then_answer(context, SYNTHESIS_WITHOUT_ANSWER)


@then("the synthesis reply's calls of {names} were ignored")
def _then_synthesis_calls_ignored(context: Context, names: str) -> None:
    ignored = context.outcome.result.synthesis_ignored_tool_calls
    assert ignored == tuple(re.split(r",\s*", names)), f"ignored {ignored}"


@then("the answer is no synthesis")
def _then_no_synthesis(context: Context) -> None:
    result = context.outcome.result
    assert result.synthesis_reason is None, result.synthesis_reason
    assert not result.budget_exhausted
    assert all(call.purpose != "synthesis" for call in result.usage_by_call)


@then("the model was asked {count:d} time")
@then("the model was asked {count:d} times")
def _then_asked(context: Context, count: int) -> None:
    model: ScriptedChatModel = context.model
    assert len(model.requests) == count, f"the model was asked {len(model.requests)} times"


@then("the model was never asked")
def _then_never_asked(context: Context) -> None:
    assert not context.model.requests, context.model.requests


@then("every scripted reply was used")
def _then_consumed(context: Context) -> None:
    context.model.assert_consumed()


@then("every request to the model had the tools {names} bound")
def _then_tools_bound(context: Context, names: str) -> None:
    expected = tuple(re.split(r",\s*|\s+and\s+", names))
    for number, request in enumerate(context.model.requests, start=1):
        assert request.tool_names == expected, f"request {number} bound {request.tool_names}"


@then("the last request to the model declared the tools {names} with tool_choice {choice:Json}")
def _then_last_declared(context: Context, names: str, choice: Any) -> None:
    request = context.model.requests[-1]
    assert request.tool_names == tuple(re.split(r",\s*|\s+and\s+", names)), request.tool_names
    assert request.tool_choice == choice, f"tool_choice {request.tool_choice!r}"


@then("the last request to the model had no tools bound")
def _then_last_unbound(context: Context) -> None:
    assert context.model.requests[-1].tool_names == ()


@then("every request to the model was streamed")
def _then_all_streamed(context: Context) -> None:
    flags = [request.streamed for request in context.model.requests]
    assert all(flags), f"streamed: {flags}"


@then("no request to the model was streamed")
def _then_none_streamed(context: Context) -> None:
    flags = [request.streamed for request in context.model.requests]
    assert not any(flags), f"streamed: {flags}"


@then("the model's request {number:d} holds these messages:")
def _then_request_messages(context: Context, number: int) -> None:
    messages = context.model.requests[number - 1].messages
    seen = [(message.type, message.text) for message in messages]
    expected = [(row["type"], row["text"]) for row in context.table]
    assert seen == expected, f"request {number} held {seen}"


@then('the model\'s request {number:d} asked to condense the output of {tool} for "{message}"')
def _then_condensing_request(context: Context, number: int, tool: str, message: str) -> None:
    request = context.model.requests[number - 1]
    assert request.tool_names == (), f"tools were bound: {request.tool_names}"
    assert len(request.messages) == 1, "the condensing call carries only its own prompt"
    prompt = request.messages[0].text
    assert tool in prompt, prompt
    assert message in prompt, prompt
