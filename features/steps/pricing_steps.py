"""Steps for token details, who answered, and what calls cost.

Expected costs are computed here from the per-million-token prices the feature writes down and
the counts the scripted model reported, never read back from the price table under test.
"""

from __future__ import annotations

import logging
from decimal import Decimal

import yaml
from behave import given, then, when
from behave.runner import Context
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from cleveractors import ExecutionResult, LLMAgent, LLMCallUsage
from cleveractors.testing import ScriptedChatModel, ScriptedReply
from cleveractors.tokens import count_tokens, estimate_prompt_tokens

_PER_MTOK = Decimal(1_000_000)


def _replies_used(model: ScriptedChatModel) -> list[ScriptedReply]:
    return model.replies[: len(model.requests)]


def _prices(input: str, cached: str, written: str, output: str) -> tuple[Decimal, ...]:
    return Decimal(input), Decimal(cached), Decimal(written), Decimal(output)


def _hand_cost(call: LLMCallUsage, prices: tuple[Decimal, ...]) -> Decimal:
    """The bill of one call by hand: fresh input, cache reads and writes and output at their own
    prices; reasoning tokens are output tokens and are not added again."""
    input, cached, written, output = prices
    usage = call.usage
    fresh = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    return (
        fresh * input
        + usage.cache_read_tokens * cached
        + usage.cache_write_tokens * written
        + usage.completion_tokens * output
    ) / _PER_MTOK


# -- Given -------------------------------------------------------------------------------------


@given('the actor\'s model stands in for "{model}" of {provider}')
def _given_stand_in(context: Context, model: str, provider: str) -> None:
    context.stands_in_for = (provider, model)


@given(
    "the actor's prices are USD {input} input, {cached} cache read, {written} cache write and "
    "{output} output per million tokens"
)
def _given_prices(context: Context, input: str, cached: str, written: str, output: str) -> None:
    context.actor["agent"]["pricing"] = {
        "input_per_mtok": input,
        "output_per_mtok": output,
        "cache_read_per_mtok": cached,
        "cache_write_per_mtok": written,
    }


@given("the actor has a cost budget of USD {usd}")
def _given_cost_budget(context: Context, usd: str) -> None:
    context.actor["agent"]["cost_budget_usd"] = usd


# -- Then: token details -----------------------------------------------------------------------


@then("each call carries the prompt, completion, cache and reasoning counts the model reported")
def _then_details_per_call(context: Context) -> None:
    result: ExecutionResult = context.outcome.result
    replies = _replies_used(context.model)
    assert len(result.usage_by_call) == len(replies), result.usage_by_call
    for call, reply in zip(result.usage_by_call, replies, strict=True):
        usage = call.usage
        seen = (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
        )
        scripted = (
            reply.prompt_tokens,
            reply.completion_tokens,
            reply.cache_read_tokens,
            reply.cache_write_tokens,
            reply.reasoning_tokens,
        )
        if reply.error is not None:  # refused with an HTTP error: the attempt cost nothing
            scripted = (0, 0, 0, 0, 0)
            assert (call.status, call.attempt) == ("failed", 1), call
        assert seen == scripted, f"call {call.index} ({call.purpose}): {seen} != {scripted}"
        assert not usage.estimated, call


@then("the result's counts are the sums over its calls")
def _then_details_summed(context: Context) -> None:
    result: ExecutionResult = context.outcome.result
    replies = _replies_used(context.model)
    for field in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        expected = sum(getattr(reply, field) for reply in replies)
        assert getattr(result, field) == expected, f"{field}: {getattr(result, field)}"
    assert result.prompt_tokens == sum(reply.prompt_tokens or 0 for reply in replies)
    assert result.completion_tokens == sum(reply.completion_tokens or 0 for reply in replies)
    dumped = result.model_dump(mode="json")
    assert dumped["cache_write_tokens"] == result.cache_write_tokens, dumped


@then("call {index:d} was answered by {model} of {provider}")
def _then_answered_by(context: Context, index: int, model: str, provider: str) -> None:
    call = context.outcome.result.usage_by_call[index - 1]
    assert (call.model, call.provider) == (model, provider), call


@then("every call was recorded under provider {provider}")
def _then_all_recorded_under(context: Context, provider: str) -> None:
    calls = context.outcome.result.usage_by_call
    assert calls, "no call was recorded"
    assert {call.provider for call in calls} == {provider}, calls


# -- Then: cost --------------------------------------------------------------------------------


@then(
    "the call is priced at USD {input} input, {cached} cache read, {written} cache write and "
    "{output} output per million tokens"
)
def _then_priced(context: Context, input: str, cached: str, written: str, output: str) -> None:
    (call,) = context.outcome.result.usage_by_call
    expected = _hand_cost(call, _prices(input, cached, written, output))
    assert call.cost_usd == expected, f"cost {call.cost_usd}, by hand {expected}"
    assert isinstance(call.cost_usd, Decimal)


@then("the result's cost is the sum of its calls' costs, with no call unpriced")
def _then_cost_summed(context: Context) -> None:
    result: ExecutionResult = context.outcome.result
    assert result.unpriced_calls == (), result.unpriced_calls
    assert result.cost_usd == sum(call.cost_usd or 0 for call in result.usage_by_call)
    assert result.model_dump(mode="json")["cost_usd"] == str(result.cost_usd)


@then("no call has a cost")
def _then_no_cost(context: Context) -> None:
    calls = context.outcome.result.usage_by_call
    assert calls, "no call was made"
    assert all(call.cost_usd is None for call in calls), calls


@then("the result's cost is unknown, with calls {first:d} and {second:d} unpriced")
def _then_cost_unknown(context: Context, first: int, second: int) -> None:
    result: ExecutionResult = context.outcome.result
    assert result.cost_usd is None, result.cost_usd
    assert result.unpriced_calls == (first, second), result.unpriced_calls
    assert result.model_dump(mode="json")["cost_usd"] is None


@then("the result's cost is unknown, with call {index:d} unpriced")
def _then_one_unpriced(context: Context, index: int) -> None:
    result: ExecutionResult = context.outcome.result
    assert result.cost_usd is None, result.cost_usd
    assert result.unpriced_calls == (index,), result.unpriced_calls


@then("the cost spent before the synthesis reached the budget of USD {usd}")
def _then_cost_budget_reached(context: Context, usd: str) -> None:
    result: ExecutionResult = context.outcome.result
    before = [call for call in result.usage_by_call if call.purpose != "synthesis"]
    spent = sum(call.cost_usd or 0 for call in before)
    assert spent >= Decimal(usd), f"only {spent} was spent before the synthesis"
    assert sum(call.cost_usd or 0 for call in before[:-1]) < Decimal(usd), "it went on too long"
    assert result.budget_exhausted


@then(
    "the result's cost is USD {usd} at {input} input and {output} output per million tokens, "
    "the synthesis call included"
)
def _then_total_cost(context: Context, usd: str, input: str, output: str) -> None:
    result: ExecutionResult = context.outcome.result
    prices = _prices(input, input, input, output)
    assert result.usage_by_call[-1].purpose == "synthesis", result.usage_by_call
    by_hand = sum(_hand_cost(call, prices) for call in result.usage_by_call)
    assert by_hand == Decimal(usd), f"the scenario's own arithmetic: {by_hand}"
    assert result.cost_usd == Decimal(usd), result.cost_usd


@then("the actor loads, with a cost budget of USD {usd}")
def _then_loads_with_budget(context: Context, usd: str) -> None:
    assert context.error is None, context.error
    assert context.executor.agent.limits.cost_budget_usd == Decimal(usd)


# -- Then: implausible usage -------------------------------------------------------------------


@then("every call is billed an estimated prompt of the messages sent to it")
def _then_prompt_estimated(context: Context) -> None:
    result: ExecutionResult = context.outcome.result
    requests = context.model.requests
    assert len(result.usage_by_call) == len(requests)
    for call, request in zip(result.usage_by_call, requests, strict=True):
        assert call.usage.estimated, call
        assert call.usage.prompt_tokens == estimate_prompt_tokens(request.messages), call
        assert call.usage.prompt_tokens > 0, call
    assert result.usage_estimated


@then("each call keeps the completion it reported")
def _then_completion_kept(context: Context) -> None:
    result: ExecutionResult = context.outcome.result
    for call, reply in zip(result.usage_by_call, _replies_used(context.model), strict=True):
        assert call.usage.completion_tokens == reply.completion_tokens, call


@then("each call's completion is estimated")
def _then_completion_estimated(context: Context) -> None:
    """The documented estimate: the tokens of the reply's text and of its calls' arguments."""
    result: ExecutionResult = context.outcome.result
    for call, reply in zip(result.usage_by_call, _replies_used(context.model), strict=True):
        expected = count_tokens(reply.text) + sum(
            count_tokens(str(tool_call.args)) for tool_call in reply.tool_calls
        )
        assert call.usage.completion_tokens == expected, (call, expected)


@then('one warning names {provider}, {model} and "{problem}"')
def _then_warned_once(context: Context, provider: str, model: str, problem: str) -> None:
    warnings = [
        record.getMessage()
        for record in context.log_records
        if record.levelno == logging.WARNING and problem in record.getMessage()
    ]
    assert len(warnings) == 1, f"warnings: {warnings}"
    assert provider in warnings[0], warnings[0]
    assert model in warnings[0], warnings[0]


# -- providers from config ---------------------------------------------------------------------


@then("the actor's chat model is a {class_name} with:")
def _then_chat_model(context: Context, class_name: str) -> None:
    assert context.error is None, context.error
    model = context.executor.agent.model
    assert type(model).__name__ == class_name, type(model)
    for row in context.table:
        expected = yaml.safe_load(row["value"])
        seen = getattr(model, row["setting"])
        assert seen == expected, f"{row['setting']}: {seen!r} != {expected!r}"


@then("the actor's calls are recorded as {provider}'s {model}")
def _then_recorded_as(context: Context, provider: str, model: str) -> None:
    pricer = context.executor.agent.pricer
    assert (pricer.provider, pricer.model) == (provider, model), pricer


@then("the error's problem is one line")
def _then_one_line(context: Context) -> None:
    _header, *problems = str(context.error).splitlines()
    assert len(problems) == 1, problems


@given("a ChatOpenAI built in code for a server at {url} without stream_usage")
def _given_code_built_openai(context: Context, url: str) -> None:
    context.code_model = ChatOpenAI(model="gpt-4o", base_url=url, api_key=SecretStr("unused"))
    assert context.code_model.stream_usage is not True  # ChatOpenAI's default off OpenAI's URL


@when("an agent is built around it")
def _when_agent_built(context: Context) -> None:
    context.agent = LLMAgent(context.code_model)


@then("the agent's model requests streamed usage, sharing the original's client")
def _then_stream_usage(context: Context) -> None:
    model = context.agent.model
    assert isinstance(model, ChatOpenAI), model
    assert model.stream_usage is True, model
    assert model.root_async_client is context.code_model.root_async_client
    assert (context.agent.pricer.provider, context.agent.pricer.model) == ("openai", "gpt-4o")
