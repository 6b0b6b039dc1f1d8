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
from typing import Any

from behave import given, register_type, then, when
from behave.runner import Context
from support.harness import (
    Consumption,
    Mode,
    Stop,
    StopStyle,
    after_items,
    after_text,
    consume,
    run_guarded,
    tool_started,
)
from support.shaped_models import executor_with_model

from cleveractors import (
    ActorExecutor,
    EventStream,
    ExecutionResult,
    LLMAgent,
    TextStream,
    load_actor_config,
)
from cleveractors.events import TextDelta
from cleveractors.result import SYNTHESIS_WITHOUT_ANSWER, RunText
from cleveractors.testing import ScriptedChatModel, ScriptedReply
from cleveractors.testing.tables import scripted_reply

register_type(Json=json.loads)

_MODES: dict[str, Mode] = {
    "blocking": "blocking",
    "streaming": "text",
    "events": "events",
    "agent blocking": "blocking",
    "agent streaming": "text",
}
"""The modes scenarios name: through the executor, or (`agent ...`) straight to its agent."""


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


class _StraightToAgent:
    """The executor's agent, called without the executor: `process_message()` and
    `stream_message()` (read as text, or as events)."""

    def __init__(self, executor: ActorExecutor) -> None:
        self._executor = executor

    @property
    def last_result(self) -> ExecutionResult | None:
        return self._executor.last_result

    async def execute(self, message: str, history: Any = None) -> ExecutionResult:
        return await self._executor.agent.process_message(message, history=history)

    def execute_events(self, message: str, history: Any = None) -> EventStream:
        return self._executor.agent.stream_message(message, history=history)

    def execute_stream(self, message: str, history: Any = None) -> TextStream:
        return TextStream(self.execute_events(message, history))


async def _ask(
    executor: ActorExecutor,
    message: str,
    mode: str,
    history: Any = None,
    stop: Stop | None = None,
) -> Consumption:
    target = _StraightToAgent(executor) if mode.startswith("agent ") else executor
    return await consume(target, message, mode=_MODES[mode], stop=stop, history=history)


def _run(context: Context, call: Callable[[ActorExecutor], Awaitable[Consumption]]) -> None:
    context.outcome = run_guarded(call(_executor(context)))


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
    context.actor["agent"]["max_tool_rounds"] = rounds


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
    async def all_at_once(executor: ActorExecutor) -> list[Consumption]:
        return list(
            await asyncio.gather(*(_ask(executor, message, mode) for message in context.messages))
        )

    executor = _executor(context)
    context.outcomes = asyncio.run(all_at_once(executor))


_STOPS: dict[str, tuple[str, StopStyle]] = {
    "breaking out inside async with": ("streaming", "async with"),
    "breaking out of the event stream inside async with": ("events", "async with"),
    "calling aclose()": ("streaming", "aclose"),
    "a plain break, once the loop has finalised the stream": ("streaming", "break"),
    "a plain break out of the event stream, once the loop has finalised it": ("events", "break"),
}


@when('the consumer stops reading after the answer chunk "{word}" by {how}')
def _when_consumer_stops(context: Context, word: str, how: str) -> None:
    assert how in _STOPS, f"unknown way to stop: {how!r}; one of {sorted(_STOPS)}"
    mode, style = _STOPS[how]
    stop = Stop(style, at=after_text(word))
    _run(context, lambda executor: _ask(executor, "What is the weather in Paris?", mode, stop=stop))
    gc.collect()  # abandoned tasks report unretrieved exceptions when they are collected


@when('the consumer\'s task is cancelled while the tool "{tool}" runs')
def _when_cancelled_during_tool(context: Context, tool: str) -> None:
    stop = Stop("cancel task", at=tool_started(tool))
    _run(context, lambda executor: _ask(executor, "Look it up, please.", "events", stop=stop))


@when('the consumer\'s task is cancelled while the tool "{tool}" runs, and again while it stops')
def _when_cancelled_twice_during_tool(context: Context, tool: str) -> None:
    # Cancelling again at every await is what anyio cancel scopes (Starlette) do.
    stop = Stop("cancel task", at=tool_started(tool), cancels=2)
    _run(context, lambda executor: _ask(executor, "Look it up, please.", "events", stop=stop))


@when("the caller's task is cancelled while the model is answering, in {mode} mode")
def _when_cancelled_during_model(context: Context, mode: str) -> None:
    def cancel(executor: ActorExecutor) -> Awaitable[Consumption]:
        model = executor.agent.model
        assert isinstance(model, ScriptedChatModel)
        stop = Stop("cancel task", when=lambda: bool(model.requests))
        return _ask(executor, "Weather in Paris?", mode, stop=stop)

    _run(context, cancel)


@when("the caller's task is cancelled while the loop waits to retry, in {mode} mode")
def _when_cancelled_in_backoff(context: Context, mode: str) -> None:
    def cancel(executor: ActorExecutor) -> Awaitable[Consumption]:
        model = executor.agent.model
        assert isinstance(model, ScriptedChatModel)
        # 50 ms after the first request, the refusal is billed and the wait has begun.
        stop = Stop("cancel task", when=lambda: bool(model.requests), delay_s=0.05)
        return _ask(executor, "Weather in Paris?", mode, stop=stop)

    _run(context, cancel)


@when('the agent runs "{message}" with its events into a list, {mode}')
def _when_agent_runs(context: Context, message: str, mode: str) -> None:
    _run_agent(context, message, mode, run_id=None)


@when('the agent runs "{message}" as run "{run_id}", its events into a list, {mode}')
def _when_agent_runs_named(context: Context, message: str, run_id: str, mode: str) -> None:
    _run_agent(context, message, mode, run_id=run_id)


def _run_agent(context: Context, message: str, mode: str, *, run_id: str | None) -> None:
    assert mode in {"blocking", "streaming"}, mode
    agent = _executor(context).agent
    assert isinstance(agent, LLMAgent)
    context.run_events = []
    context.run_outcome = asyncio.run(
        agent.run(
            message,
            history=None,
            sink=context.run_events.append,
            streaming=mode == "streaming",
            run_id=run_id,
        )
    )


@when("the {kind} stream is closed before it is read")
def _when_closed_unread(context: Context, kind: str) -> None:
    mode = {"text": "streaming", "event": "events"}[kind]
    stop = Stop("aclose", at=after_items(0))
    _run(context, lambda executor: _ask(executor, "Weather in Paris?", mode, stop=stop))


# -- Then: the answer and the model's requests -------------------------------------------------


@then('the answer is "{text}"')
def _then_answer(context: Context, text: str) -> None:
    outcome = context.outcome
    assert outcome.error is None, f"the call failed: {outcome.error!r}"
    assert outcome.result.answer == text, f"answer {outcome.result.answer!r}"
    assert outcome.result.text.endswith(text), f"text {outcome.result.text!r}"
    if outcome.mode != "blocking":
        shown = _shown_text(outcome)
        # One rule for the text of a run: the result's text is what the stream showed.
        assert shown == outcome.result.text, f"shown {shown!r}, text {outcome.result.text!r}"
        assert all(outcome.chunks), f"an empty chunk was yielded: {outcome.chunks!r}"


def _shown_text(outcome: Consumption) -> str:
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
