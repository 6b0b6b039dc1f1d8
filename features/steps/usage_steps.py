"""Steps that check the bill: the counts on the result against what the model itself reported.

The scripted model's own record is the source of truth: its script (explicit token figures, or
none, in which case it bills the words of the request and of the reply) and the requests it
received. Nothing here repeats a figure printed by the code under test.
"""

from __future__ import annotations

import re

from behave import then
from behave.runner import Context
from langchain_core.messages.utils import convert_to_openai_messages

from cleveractors import ExecutionResult, TokenUsage
from cleveractors.events import UsageRecorded
from cleveractors.testing import ScriptedChatModel, completion_words, prompt_words
from cleveractors.tokens import count_tokens, estimate_prompt_tokens

_WORD = re.compile(r"\s*\S+")
"""How the scripted model splits text into streamed chunks: a word with the space before it."""


def _reported_by_model(model: ScriptedChatModel) -> list[TokenUsage | None]:
    """The usage of each call the model received, in order (every attempt is a record): what it
    reported; None for a call that reported none (usage omitted, or a stream cut off before its
    usage chunk), which is estimated; zero for a call refused with an error or beyond the end of
    the script, where the provider did no work."""
    reported: list[TokenUsage | None] = []
    for position, request in enumerate(model.requests):
        reply = model.replies[position] if position < len(model.replies) else None
        if reply is None or reply.error is not None:
            reported.append(TokenUsage())
            continue
        cut_off = request.streamed and reply.cut_off_after_chunks is not None
        if reply.omit_usage or cut_off:
            reported.append(None)
            continue
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = prompt_words(convert_to_openai_messages(list(request.messages)))
        completion = reply.completion_tokens
        if completion is None:
            completion = completion_words(reply)
        reported.append(TokenUsage(prompt_tokens=prompt, completion_tokens=completion))
    return reported


def _check_bill(result: ExecutionResult, model: ScriptedChatModel) -> None:
    reported = _reported_by_model(model)
    calls = result.usage_by_call
    assert len(calls) == len(reported), f"{len(calls)} calls billed, model answered {len(reported)}"
    assert result.llm_calls == len(reported), result.llm_calls
    for call, expected in zip(calls, reported, strict=True):
        if expected is None:
            assert call.usage.estimated, f"call {call.index} should be flagged estimated"
        else:
            assert call.usage == expected, f"call {call.index}: {call.usage} != {expected}"
    assert [call.index for call in calls] == list(range(1, len(calls) + 1))
    assert result.prompt_tokens == sum(call.usage.prompt_tokens for call in calls)
    assert result.completion_tokens == sum(call.usage.completion_tokens for call in calls)
    assert result.total_tokens == result.prompt_tokens + result.completion_tokens
    assert result.usage_estimated == (None in reported), result.usage_estimated


@then("the reported tokens are what the model reported for each call")
def _then_bill(context: Context) -> None:
    _check_bill(context.outcome.result, context.model)


@then(
    "the prompt tokens are the sum of the prompt tokens the model reported for its {count:d} calls"
)
def _then_prompt_sum(context: Context, count: int) -> None:
    reported = _reported_by_model(context.model)
    assert len(reported) == count, reported
    assert None not in reported, reported
    expected = sum(usage.prompt_tokens for usage in reported if usage is not None)
    assert context.outcome.result.prompt_tokens == expected, context.outcome.result.prompt_tokens


@then("the LLM calls were made for:")
def _then_purposes(context: Context) -> None:
    calls = context.outcome.result.usage_by_call
    seen = [(call.purpose, call.round) for call in calls]
    expected = [(row["purpose"], int(row["round"])) for row in context.table]
    assert seen == expected, f"calls: {seen}"


@then("the run took {rounds:d} rounds")
@then("the run took {rounds:d} round")
def _then_rounds(context: Context, rounds: int) -> None:
    assert context.outcome.result.rounds == rounds, context.outcome.result.rounds


@then("the tokens spent before the synthesis reached the budget of {budget:d}")
def _then_budget_reached(context: Context, budget: int) -> None:
    calls = context.outcome.result.usage_by_call
    before = sum(call.usage.total_tokens for call in calls if call.purpose != "synthesis")
    assert before >= budget, f"only {before} tokens were spent before the synthesis"


@then("call {index:d} is billed by an estimate of the messages sent to it")
def _then_estimated(context: Context, index: int) -> None:
    result = context.outcome.result
    call = result.usage_by_call[index - 1]
    assert call.usage.estimated, call
    sent = context.model.requests[index - 1].messages
    assert call.usage.prompt_tokens == estimate_prompt_tokens(sent), call
    assert result.usage_estimated, "the result does not say it holds an estimate"


@then("call {index:d} is billed exactly what the model reported")
def _then_exact(context: Context, index: int) -> None:
    call = context.outcome.result.usage_by_call[index - 1]
    assert call.usage == _reported_by_model(context.model)[index - 1], call
    assert not call.usage.estimated


@then("the result holds {count:d} billed call")
@then("the result holds {count:d} billed calls")
def _then_call_count(context: Context, count: int) -> None:
    assert context.outcome.result.llm_calls == count, context.outcome.result.llm_calls


@then("the cut-off call's completion counts the text received before the cut")
def _then_partial_completion(context: Context) -> None:
    call = context.outcome.result.usage_by_call[-1]
    assert call.usage.completion_tokens > 0, call


@then("the cut-off call's completion is the estimate of the text streamed before the cut")
def _then_cut_off_completion(context: Context) -> None:
    call = context.outcome.result.usage_by_call[-1]
    reply = context.model.replies[call.index - 1]
    assert reply.cut_off_after_chunks is not None, "that call was not scripted to be cut off"
    received = "".join(_WORD.findall(reply.text)[: reply.cut_off_after_chunks])
    assert received, "the script must stream some text before the cut"
    assert call.usage.completion_tokens == count_tokens(received), (call, received)


@then("last_result is the call's own result")
def _then_last_result(context: Context) -> None:
    outcome = context.outcome
    assert outcome.last_result is not None, "last_result was not set"
    assert outcome.last_result == outcome.result, (outcome.last_result, outcome.result)


@then("last_token_usage_var holds the usage of last_result")
def _then_usage_var(context: Context) -> None:
    outcome = context.outcome
    assert outcome.usage_var is not None, "last_token_usage_var was not set"
    assert outcome.usage_var == outcome.last_result.usage, (outcome.usage_var, outcome.last_result)


@then("last_result records the error {error_type} with zero usage")
def _then_error_zero_usage(context: Context, error_type: str) -> None:
    result = context.outcome.last_result
    assert result is not None, "last_result was not set"
    assert result.error is not None, "no error was recorded"
    assert result.error.type == error_type, result.error
    assert result.error.message == str(context.outcome.error)
    assert (result.prompt_tokens, result.completion_tokens) == (0, 0), result
    # An attempt the provider refused is still a record, costing 0.
    assert all(
        call.usage == TokenUsage() and call.status == "failed" for call in result.usage_by_call
    ), result.usage_by_call


@then("last_result records the error {error_type}")
def _then_error_recorded(context: Context, error_type: str) -> None:
    result = context.outcome.last_result
    assert result is not None, "last_result was not set"
    assert result.error is not None, "no error was recorded"
    assert result.error.type == error_type, result.error
    assert not result.is_success
    assert result.text == ""


@then("the result is marked cancelled")
def _then_cancelled(context: Context) -> None:
    result = context.outcome.result
    assert result is not None, "no result was settled"
    assert result.cancelled, result
    assert result.error is not None, "no error was recorded"
    assert result.error.type == "CancelledError", result.error


@then("no estimate is flagged")
def _then_exact_only(context: Context) -> None:
    result = context.outcome.result
    assert not result.usage_estimated
    assert not any(call.usage.estimated for call in result.usage_by_call)


@then("each run reports exactly the tokens of its message sent alone")
def _then_own_counts(context: Context) -> None:
    references = context.references
    assert len({reference.prompt_tokens for reference in references}) == len(references), (
        "the messages must cost different amounts, or a mix-up could go unnoticed"
    )
    for number, (outcome, reference) in enumerate(
        zip(context.outcomes, references, strict=True), start=1
    ):
        assert outcome.error is None, f"run {number}: {outcome.error!r}"
        seen = (outcome.result.prompt_tokens, outcome.result.completion_tokens)
        alone = (reference.prompt_tokens, reference.completion_tokens)
        assert seen == alone, f"run {number}: {seen}, sent alone: {alone}"
        assert outcome.result.llm_calls == reference.llm_calls == 1


@then("each run's last_token_usage_var holds its own usage")
def _then_own_usage_var(context: Context) -> None:
    for number, outcome in enumerate(context.outcomes, start=1):
        assert outcome.usage_var == outcome.result.usage, f"run {number}: {outcome.usage_var}"


@then("the model was asked once per message")
def _then_once_per_message(context: Context) -> None:
    assert len(context.executor.agent.model.requests) == len(context.messages)


@then("the run succeeded with the model's last reply as its answer")
def _then_run_answered(context: Context) -> None:
    outcome = context.run_outcome
    assert outcome.error is None, f"the run failed: {outcome.error!r}"
    last_reply = context.model.replies[len(context.model.requests) - 1]
    assert outcome.result.answer == outcome.result.text == last_reply.text, outcome.result
    assert outcome.result.error is None, outcome.result.error


@then('the run ended in the model\'s own {error_type} "{message}", which its result records')
def _then_run_ended_in(context: Context, error_type: str, message: str) -> None:
    error = context.run_outcome.error
    assert error is not None, f"the run succeeded: {context.run_outcome.result!r}"
    assert type(error).__name__ == error_type, f"{error!r} is not the model's {error_type}"
    assert str(error) == message, str(error)
    recorded = context.run_outcome.result.error
    assert (recorded.type, recorded.message) == (error_type, message), recorded


@then("the run's result holds the counts of every call the model answered, one usage event each")
def _then_run_counts(context: Context) -> None:
    result = context.run_outcome.result
    reported = _reported_by_model(context.model)
    assert None not in reported, reported
    assert result.llm_calls == len(reported) == len(context.model.requests)
    assert result.prompt_tokens == sum(usage.prompt_tokens for usage in reported)
    assert result.completion_tokens == sum(usage.completion_tokens for usage in reported)
    announced = [event for event in context.run_events if isinstance(event, UsageRecorded)]
    assert [event.call for event in announced] == list(result.usage_by_call), announced
    assert announced[-1].total == result.usage, (announced[-1].total, result.usage)


@then("the run's result records {rounds:d} rounds, no synthesis, and the tool calls as ok")
def _then_run_rounds(context: Context, rounds: int) -> None:
    result = context.run_outcome.result
    assert result.rounds == rounds, result.rounds
    assert (result.synthesis_reason, result.budget_exhausted) == (None, False), result
    assert [record.status for record in result.tool_calls] == ["ok"], result.tool_calls


@then('the run\'s turn is "{message}", the call {call_id}, its result and the answer')
def _then_run_turn(context: Context, message: str, call_id: str) -> None:
    outcome = context.run_outcome
    kinds = [type(message).__name__ for message in outcome.turn]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"], kinds
    asked, call, answered, answer = outcome.turn
    assert asked.text == message, asked
    assert [requested["id"] for requested in call.tool_calls] == [call_id], call.tool_calls
    assert answered.tool_call_id == call_id, answered
    assert answered.text == outcome.result.tool_calls[0].output, answered
    assert answer.text == outcome.result.answer, answer


@then("the run kept no turn")
def _then_no_turn(context: Context) -> None:
    assert context.run_outcome.turn == (), context.run_outcome.turn


@then('the run\'s result is named "{run_id}"')
def _then_named(context: Context, run_id: str) -> None:
    assert context.run_outcome.result.run_id == run_id, context.run_outcome.result.run_id


@then("the run's result is named by a new run id")
def _then_named_new(context: Context) -> None:
    run_id = context.run_outcome.result.run_id
    assert re.fullmatch(r"run_[0-9a-f]{24}", run_id or ""), run_id


@then("no result was settled")
def _then_no_result(context: Context) -> None:
    assert context.outcome.result is None, context.outcome.result
