"""Steps for fallback models: an actor whose model fails and whose fallback answers, the calls
each model was asked, and the transcript each provider was sent."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from decimal import Decimal
from typing import Any

import yaml
from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from cleveractors import (
    ActorExecutor,
    FallbackModel,
    FallbackPolicy,
    LLMAgent,
    LoopLimits,
    ModelPrices,
)
from cleveractors.agents._fallback import MODEL_KEY
from cleveractors.errors import ConfigurationError
from cleveractors.events import ModelFellBack, UsageRecorded
from cleveractors.testing import ScriptedChatModel, ScriptedReply, ScriptedToolCall

# -- Given -------------------------------------------------------------------------------------


@given('an actor whose model "{first}" fails and whose fallback is "{second}":')
def _given_actor(context: Context, first: str, second: str) -> None:
    context.actor = yaml.safe_load(context.text)
    assert context.actor["agent"]["model"] == first
    assert context.actor["agent"]["fallback_models"][0]["model"] == second


@given('the first model fails with HTTP {status:d} of type "{kind}"')
def _given_first_fails(context: Context, status: int, kind: str) -> None:
    failure = {"error": "unavailable", "error_status": status, "error_type": kind}
    context.actor["agent"]["script"] = [failure, failure]


@given('the first model shows "{text}" and is then cut off')
def _given_first_cut_off(context: Context, text: str) -> None:
    context.actor["agent"]["script"] = [{"text": text, "cut_off_after_chunks": 1}] * 2


@given("the actor falls back at once on:")
def _given_immediate(context: Context) -> None:
    context.actor["agent"]["fallback"] = {"immediate": yaml.safe_load(context.text)}


@given("the first model's script is:")
def _given_first_script(context: Context) -> None:
    context.actor["agent"]["script"] = yaml.safe_load(context.text)


@given("the fallback's script is:")
def _given_fallback_script(context: Context) -> None:
    context.actor["agent"]["fallback_models"][0]["script"] = yaml.safe_load(context.text)


@given('the actor keeps sessions in a fresh SQLite store, sticky "{sticky}"')
def _given_store(context: Context, sticky: str) -> None:
    directory = tempfile.mkdtemp(prefix="fallback-")
    context.add_cleanup(shutil.rmtree, directory, ignore_errors=True)
    context.actor["store"] = {"url": f"sqlite:///{directory}/sessions.db"}
    context.actor["agent"]["fallback"] = {"sticky": sticky}
    context.session_results = []


@given("the actor is traced")
def _given_traced(context: Context) -> None:
    context.executor = ActorExecutor.from_config(
        context.actor, tracer_provider=context.tracer_provider
    )


@given("an actor config dict with these fallback models:")
def _given_config_with_fallbacks(context: Context) -> None:
    context.config_source = {
        "name": "checked",
        "agent": {
            "provider": "stub",
            "script": [{"text": "Hello."}],
            "fallback_models": yaml.safe_load(context.text),
        },
    }


@given(
    'an agent in code on a model of provider "anthropic" refused with HTTP 529, falling back '
    'to a scripted model of provider "openai"'
)
def _given_agent_in_code(context: Context) -> None:
    context.first = ScriptedChatModel(replies=[ScriptedReply(error="Overloaded", error_status=529)])
    context.second = ScriptedChatModel(replies=[ScriptedReply(text="Rome is sunny.")])
    context.agent = LLMAgent(
        context.first,
        provider="anthropic",
        model_name="claude-sonnet-4-5",
        fallback_models=[
            FallbackModel(context.second, provider="openai", model_name="gpt-4o-mini")
        ],
    )


@given(
    'an agent in code on a model of provider "anthropic" refused with HTTP 529, falling back '
    'to a scripted model of provider "openai" that hands the conversation to "{target}"'
)
def _given_handing_over(context: Context, target: str) -> None:
    billing = LLMAgent(
        ScriptedChatModel(replies=[ScriptedReply(text="Billing here.")]),
        name=target,
        provider="openai",
        model_name="billing-model",
    )
    transfer = ScriptedToolCall(name=f"transfer_to_{target}", args={"reason": "a refund"})
    context.agent = LLMAgent(
        ScriptedChatModel(replies=[ScriptedReply(error="Overloaded", error_status=529)]),
        provider="anthropic",
        model_name="claude-sonnet-4-5",
        fallback_models=[
            FallbackModel(
                ScriptedChatModel(replies=[ScriptedReply(tool_calls=(transfer,))]),
                provider="openai",
                model_name="gpt-4o-mini",
            )
        ],
        handoffs=[billing],
    )


@given("the agent keeps a session on the model that answered")
def _given_sticky_agent(context: Context) -> None:
    context.agent = LLMAgent(
        context.first,
        provider="anthropic",
        model_name="claude-sonnet-4-5",
        fallback_models=[
            FallbackModel(context.second, provider="openai", model_name="gpt-4o-mini")
        ],
        fallback=FallbackPolicy(sticky="session"),
    )


@given('the config\'s fallback moves on at once on "{rules}"')
def _given_config_immediate(context: Context, rules: str) -> None:
    context.config_source["agent"]["fallback"] = {"immediate": yaml.safe_load(rules)}


@given("an agent in code with a cost budget, falling back to a model of unknown price")
def _given_cost_budget(context: Context) -> None:
    context.build_error = None
    try:
        LLMAgent(
            ScriptedChatModel(replies=[]),
            provider="openai",
            model_name="gpt-4o-mini",
            pricing=ModelPrices(input_per_mtok=Decimal(1), output_per_mtok=Decimal(2)),
            limits=LoopLimits(cost_budget_usd=Decimal(1)),
            fallback_models=[ScriptedChatModel(replies=[])],
        )
    except ConfigurationError as exc:
        context.build_error = exc


# -- When --------------------------------------------------------------------------------------


@when('the actor is asked "{message}" in session "{session_id}"')
def _when_asked_in_session(context: Context, message: str, session_id: str) -> None:
    executor = getattr(context, "executor", None)
    if executor is None:
        executor = context.executor = ActorExecutor.from_config(context.actor)

    async def ask() -> None:
        context.session_results.append(await executor.execute(message, session_id=session_id))
        if executor.store is not None:
            await executor.store.aclose()

    asyncio.run(ask())


@when(
    'it is asked "{message}" after an Anthropic turn with thinking, a tool call "{call_id}" and '
    "its result"
)
def _when_asked_after_anthropic_turn(context: Context, message: str, call_id: str) -> None:
    written = AIMessage(
        content=[
            {"type": "thinking", "thinking": "Paris first.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "RedactedBlob"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {"city": "Paris"}},
        ],
        tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": call_id}],
        response_metadata={"model_provider": "anthropic", "model_name": "claude-sonnet-4-5"},
    )
    context.history = [
        HumanMessage("Weather in Paris?"),
        written,
        ToolMessage("Paris: 18 C, light rain", tool_call_id=call_id),
        # Written by a provider nobody named: sent as plain text to every provider.
        AIMessage([{"type": "text", "text": "Paris is rainy."}]),
    ]
    context.result = asyncio.run(context.agent.process_message(message, history=context.history))


@when('it is asked "{message}" after a reply of "{written_by}"')
def _when_asked_after_reply_of(context: Context, message: str, written_by: str) -> None:
    history = [
        HumanMessage("Weather in Paris?"),
        AIMessage("Paris is rainy.", response_metadata={MODEL_KEY: written_by}),
    ]
    context.result = asyncio.run(context.agent.process_message(message, history=history))


@when('the agent is asked "{message}"')
def _when_agent_asked(context: Context, message: str) -> None:
    context.result = asyncio.run(context.agent.process_message(message))


# -- Then --------------------------------------------------------------------------------------


@then("the calls were made to:")
def _then_calls(context: Context) -> None:
    calls = context.outcome.result.usage_by_call
    seen = [(c.model, c.round, c.attempt, c.status) for c in calls]
    expected = [
        (row["model"], int(row["round"]), int(row["attempt"]), row["status"])
        for row in context.table
    ]
    assert seen == expected, f"calls: {seen}"


@then("every call is priced at its own model's prices, the refused ones at 0")
def _then_priced(context: Context) -> None:
    agent = context.actor["agent"]
    prices = {
        entry["model"]: ModelPrices(**entry["pricing"])
        for entry in (agent, *agent["fallback_models"])
    }
    for call in context.outcome.result.usage_by_call:
        expected = Decimal(0) if call.status == "failed" else prices[call.model].cost(call.usage)
        assert call.cost_usd == expected, f"{call}: expected {expected}"
        assert call.status == "failed" or call.cost_usd > 0, call


@then('the run was answered by "{model}", falling back from "{earlier}"')
def _then_answered_by(context: Context, model: str, earlier: str) -> None:
    result = context.outcome.result
    assert (result.model, result.fell_back_from) == (model, (earlier,)), result


@then("the model_fell_back events were:")
def _then_fell_back_events(context: Context) -> None:
    seen = [
        (e.round, e.from_model, e.to_model, e.reason, e.immediate)
        for e in context.outcome.events
        if isinstance(e, ModelFellBack)
    ]
    expected = [
        (int(r["round"]), r["from"], r["to"], r["reason"], r["immediate"] == "true")
        for r in context.table
    ]
    assert seen == expected, f"model_fell_back events: {seen}"
    providers = {
        (e.from_provider, e.to_provider)
        for e in context.outcome.events
        if isinstance(e, ModelFellBack)
    }
    assert providers == {("stub", "stub")}, providers


@then("the model_fell_back event came after the last failed attempt's usage_recorded")
def _then_after_usage(context: Context) -> None:
    kinds = [
        (e.kind, e.call.status if isinstance(e, UsageRecorded) else None)
        for e in context.outcome.events
        if isinstance(e, UsageRecorded | ModelFellBack)
    ]
    at = kinds.index(("model_fell_back", None))
    assert kinds[at - 1] == ("usage_recorded", "failed"), kinds
    assert kinds[at + 1] == ("usage_recorded", "ok"), kinds


@then("the second message's calls were made to {models}")
def _then_second_calls(context: Context, models: str) -> None:
    second = context.session_results[1]
    seen = [call.model for call in second.usage_by_call]
    assert seen == models.split(", "), f"calls of the second message: {seen}"


@then("the anthropic model was asked first")
def _then_anthropic_first(context: Context) -> None:
    models = [call.model for call in context.result.usage_by_call]
    assert models == ["claude-sonnet-4-5", "gpt-4o-mini"], models


@then("the anthropic model was sent the turn's thinking blocks as written")
def _then_anthropic_kept(context: Context) -> None:
    sent = context.first.requests[0].messages
    assert context.history[1] in sent, sent
    assert sent[-2].text == "Paris is rainy.", sent[-2]


@then(
    "the openai model was sent the turn without thinking or redacted thinking, its text and "
    'tool call "{call_id}" kept'
)
def _then_openai_portable(context: Context, call_id: str) -> None:
    replies = [m for m in context.second.requests[0].messages if isinstance(m, AIMessage)]
    first = replies[0]
    assert first.content == "Let me look.", first.content
    assert replies[1].content == "Paris is rainy.", replies[1]
    assert [call["id"] for call in first.tool_calls] == [call_id], first.tool_calls
    assert not first.additional_kwargs, first.additional_kwargs
    assert "model_provider" not in first.response_metadata, first.response_metadata
    assert context.result.answer == "Rome is sunny.", context.result


@then('the tool result answering "{call_id}" was sent to both')
def _then_tool_result_sent(context: Context, call_id: str) -> None:
    for model in (context.first, context.second):
        sent: tuple[BaseMessage, ...] = model.requests[0].messages
        answers: list[Any] = [m.tool_call_id for m in sent if isinstance(m, ToolMessage)]
        assert answers == [call_id], answers


@then("the chat spans were:")
def _then_chat_spans(context: Context) -> None:
    chats = [s for s in context.exporter.get_finished_spans() if s.name.startswith("chat")]
    seen = [
        (
            str(span.attributes["gen_ai.request.model"]),
            str(span.attributes["cleveractors.call.attempt"]),
            str(span.attributes.get("cleveractors.call.fell_back_from", "")),
        )
        for span in chats
    ]
    expected = [
        (row["request model"], row["attempt"], row["fell back from"]) for row in context.table
    ]
    assert seen == expected, f"chat spans: {seen}"


@then('the answer of the agent is "{text}"')
def _then_agent_answer(context: Context, text: str) -> None:
    assert context.result.answer == text, context.result


@then('the agent\'s calls went to "{models}"')
def _then_agent_calls(context: Context, models: str) -> None:
    seen = [call.model for call in context.result.usage_by_call]
    assert seen == models.split(", "), seen
