"""Steps of usage.billing_property.feature: the Hypothesis billing property (issue 3, item 5).

Each step starts with "the billing property", so it cannot collide with other step files, and
needs no hook from environment.py. The conversation strategy, the runner and the expected bill
live in `features/support/faults.py`; this file holds the steps and the assertions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from typing import cast

import hypothesis
from behave import given, then, when
from behave.runner import Context
from hypothesis import HealthCheck, settings
from langchain_core.exceptions import ModelError
from support.faults import (
    Conversation,
    ConversationRun,
    ExpectedBill,
    conversations,
    estimated_cost,
    expected_bill,
    run_conversation,
    unanswered_tool_calls,
)
from support.harness import MODES, Mode
from support.step_text import listed_names

from cleveractors.errors import CleverActorsError
from cleveractors.events import RunFailed, RunFinished, UsageRecorded
from cleveractors.result import ErrorInfo, ExecutionResult
from cleveractors.tokens import estimate_prompt_tokens
from cleveractors.usage import LLMCallUsage, TokenUsage

# The documented failures of a run: the model's own errors (langchain-core's ModelError family:
# the stub raises ModelAPIError and ModelConnectionError), our own (ScriptExhaustedError) and
# cancellation. Anything else escaping (a `_ToolLoopError`, a KeyError) is a bug.
_DOCUMENTED_FAILURES = (ModelError, CleverActorsError, asyncio.CancelledError)


# -- steps -------------------------------------------------------------------------------------


@given("the billing property's conversations are generated for the modes {modes}")
def step_generate_conversations(context: Context, modes: str) -> None:
    chosen = listed_names(modes, MODES, what="modes")
    context.billing_conversations = conversations(modes=cast(tuple[Mode, ...], chosen))


@when("the billing property is checked on {variable} examples (default {default:d})")
def step_check_property(context: Context, variable: str, default: int) -> None:
    examples = int(os.environ.get(variable, default))
    loop = asyncio.new_event_loop()  # one loop for every example: asyncio.run() each is slower
    checked = 0

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,  # the same examples on every run, so CI results are stable
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @hypothesis.given(context.billing_conversations)
    def billing_holds(conversation: Conversation) -> None:
        nonlocal checked
        checked += 1
        run = loop.run_until_complete(run_conversation(conversation))
        _assert_run_settled(run)
        _assert_documented_failure(run)
        _assert_bill(run)
        _assert_transcripts(run)
        _assert_limits(run)
        _assert_stream_view(run)

    # Failing tools log a warning each; thousands of them would bury a failure's report.
    library_logger = logging.getLogger("cleveractors")
    level = library_logger.level
    library_logger.setLevel(logging.ERROR)
    context.billing_failure = None
    try:
        billing_holds()
    except Exception as exc:  # the counterexample is the result this step reports
        context.billing_failure = "".join(traceback.format_exception(exc))
    finally:
        library_logger.setLevel(level)
        loop.close()
    context.billing_examples = examples
    context.billing_checked = checked


@then("the billing property holds for every example")
def step_property_holds(context: Context) -> None:
    if context.billing_failure is not None:
        # Terse formatters (progress) print no assertion text; the counterexample is the news.
        print(context.billing_failure, file=sys.stderr)
    assert context.billing_failure is None, context.billing_failure


@then("the billing property was checked on as many examples as asked for")
def step_examples_checked(context: Context) -> None:
    assert context.billing_checked >= context.billing_examples, (
        f"only {context.billing_checked} examples ran, {context.billing_examples} asked for"
    )


# -- the property ------------------------------------------------------------------------------


def _assert_run_settled(run: ConversationRun) -> None:
    """When control returns to the caller, the run's tasks are done and `last_result` is set
    (after a plain `break`: within a few loop iterations, as asyncio closes the dropped stream);
    no task is left after that, and no task ended with an exception nobody retrieved."""
    assert run.consumed.tasks_left == (), f"tasks left running: {run.consumed.tasks_left}"
    assert run.consumed.task_errors == (), f"exceptions lost in tasks: {run.consumed.task_errors}"
    assert run.result is not None, "last_result is not set"
    stop = run.conversation.consumer_stop
    if stop is None or stop.how != "break":
        assert run.consumed.tasks_pending_on_return == (), (
            f"tasks still running when control returned: {run.consumed.tasks_pending_on_return}"
        )
        assert run.consumed.last_result_on_return is not None, (
            "last_result was not set when control returned to the caller"
        )


def _assert_documented_failure(run: ConversationRun) -> None:
    """Only documented exceptions escape, unchanged; `last_result.error` names the one that
    escaped and is None when none did (unless the caller stopped reading the stream itself)."""
    result, escaped = run.result, run.consumed.error
    assert result is not None
    if escaped is None:
        if run.conversation.mode == "blocking":
            returned = run.consumed.result
            assert returned == result, "execute() returned something else than last_result"
        if run.consumed.stopped_early:
            # The caller stopped reading: the run was cancelled, or had already ended its own way.
            assert result.cancelled or result.error is None or _failed_as_scripted(run, result)
            assert not (run.consumed.run_had_ended_at_stop and result.cancelled), (
                "the run had ended before the consumer stopped, yet it is marked cancelled"
            )
        else:
            assert result.error is None, f"no exception escaped, but the result says {result.error}"
        return
    assert isinstance(escaped, _DOCUMENTED_FAILURES), f"undocumented exception: {escaped!r}"
    if isinstance(escaped, asyncio.CancelledError):
        if run.conversation.mode == "blocking":
            assert result.cancelled, f"execute() was cancelled, the result says {result.error}"
            return
        # A streaming run may end its own way in the very loop step in which its consumer is
        # cancelled (its last events waiting in the queue); then the result is the run's true
        # outcome. Otherwise it says the run was cancelled.
        assert result.cancelled or result.error is None or _failed_as_scripted(run, result), (
            f"CancelledError escaped, result says {result.error}"
        )
        return
    raised_by_model = run.deliveries[-1].raised if run.deliveries else None
    assert escaped is raised_by_model, (
        f"{escaped!r} escaped; the model's last call raised {raised_by_model!r}"
    )
    assert result.error == ErrorInfo.from_exception(escaped), (result.error, escaped)
    assert not result.cancelled


def _failed_as_scripted(run: ConversationRun, result: ExecutionResult) -> bool:
    raised = run.deliveries[-1].raised if run.deliveries else None
    return raised is not None and result.error == ErrorInfo.from_exception(raised)


def _assert_bill(run: ConversationRun) -> None:
    """Reported tokens are the sum of the calls the model served (estimates flagged), one
    record per call, none counted twice, none lost."""
    result = run.result
    assert result is not None
    expected = expected_bill(run)
    calls = _as_if_known_issues_were_fixed(run, expected, result.usage_by_call)
    assert tuple(call.usage for call in calls) == expected.usages, (
        f"per-call usage {[call.usage for call in calls]}, expected {list(expected.usages)}"
    )
    assert tuple(call.purpose for call in calls) == expected.purposes
    assert [call.index for call in result.usage_by_call] == list(
        range(1, len(result.usage_by_call) + 1)
    )
    reported = sum((call.usage for call in result.usage_by_call), TokenUsage())
    assert (result.prompt_tokens, result.completion_tokens) == (
        reported.prompt_tokens,
        reported.completion_tokens,
    )
    assert result.total_tokens == reported.total_tokens
    assert result.usage_estimated == any(call.usage.estimated for call in result.usage_by_call)
    assert result.llm_calls == len(result.usage_by_call)


def _assert_transcripts(run: ConversationRun) -> None:
    """Every tool call id the model sees in a request is answered by exactly one tool message."""
    for number, request in enumerate(run.requests, start=1):
        problems = unanswered_tool_calls(request.messages)
        assert not problems, f"request {number}: {problems}"


def _assert_limits(run: ConversationRun) -> None:
    """No more tool rounds than allowed, and no round asked for once the budget was spent."""
    result = run.result
    assert result is not None
    limits = run.conversation.limits
    tool_rounds = {record.round for record in result.tool_calls}
    assert len(tool_rounds) <= limits.max_tool_rounds, (
        f"{len(tool_rounds)} tool rounds, max_tool_rounds={limits.max_tool_rounds}"
    )
    if limits.token_budget is None:
        return
    expected = expected_bill(run)
    for position, request in enumerate(run.requests[1:], start=1):
        if request.may_call_tools:
            spent = expected.spent_before(position).total_tokens
            assert spent < limits.token_budget, (
                f"request {position + 1} was a round though {spent} tokens of a budget of "
                f"{limits.token_budget} were spent"
            )


def _assert_stream_view(run: ConversationRun) -> None:
    """What a streaming caller read agrees with the result: text chunks are never empty, usage
    events replay the per-call records, and a final event carries the result itself."""
    result = run.result
    assert result is not None
    if run.conversation.mode == "text":
        items = run.consumed.items
        assert all(isinstance(item, str) and item for item in items), items
        return
    if run.conversation.mode != "events":
        return
    recorded = [item.call for item in run.consumed.items if isinstance(item, UsageRecorded)]
    assert recorded == list(result.usage_by_call[: len(recorded)]), (
        f"usage events {recorded} disagree with the result {result.usage_by_call}"
    )
    for item in run.consumed.items:
        if isinstance(item, RunFinished | RunFailed):
            assert item.result == result, "the final event's result is not last_result"


# -- cancellation races the loop cannot see through ----------------------------------------------
# A and E are documented billing policy (docs/tokens.md): a call cancelled
# after the loop issued it is billed an estimate of its prompt, because the loop cannot tell
# whether the provider had received (or already refused) it. Each is accepted only in its exact
# shape, so the property keeps checking everything else. CLEVERACTORS_PROPERTY_KNOWN_ISSUES=
# (empty) shows how often the races happen.

_KNOWN_CORE_ISSUES = "A,E"
_TOLERATED = frozenset(
    os.environ.get("CLEVERACTORS_PROPERTY_KNOWN_ISSUES", _KNOWN_CORE_ISSUES)
    .replace(",", " ")
    .split()
)


def _as_if_known_issues_were_fixed(
    run: ConversationRun, expected: ExpectedBill, calls: tuple[LLMCallUsage, ...]
) -> tuple[LLMCallUsage, ...]:
    """The per-call records with the races A and E (and fixed issue B) undone. All concern
    the last call of a cancelled run, where `_Run.bill_interrupted_call` bills a prompt estimate
    for a cancelled call with nothing received, and an estimate for one with something. The
    last call is dropped (A) or given the cost the model's record says (E, B)."""
    if run.result is None or not run.result.cancelled or not calls:
        return calls
    if _is_unsent_call(run, expected, calls):
        return calls[:-1]
    if _is_refused_call(run, expected, calls) or _is_estimate_despite_usage(run, expected, calls):
        last_cost = expected.costs[-1]
        return (*calls[:-1], calls[-1].model_copy(update={"usage": last_cost}))
    return calls


def _is_prompt_estimate(call: LLMCallUsage) -> bool:
    return call.usage.estimated and call.usage.completion_tokens == 0


def _is_unsent_call(
    run: ConversationRun, expected: ExpectedBill, calls: tuple[LLMCallUsage, ...]
) -> bool:
    """POLICY A. A non-streamed call (`ainvoke`: a round with `stream_tool_rounds:
    false`, or a pruning call) cancelled before the model received it is billed a prompt
    estimate: langchain-core's `agenerate` sends the request from a task of its own
    (`asyncio.gather`), one loop iteration after `_model_turn` set `run.in_flight`. Shape: one
    extra last call, a prompt estimate, which is not that of the model's last request."""
    if "A" not in _TOLERATED or len(calls) != len(expected.usages) + 1:
        return False
    repeats_last_request = bool(run.requests) and calls[-1].usage.prompt_tokens == (
        estimate_prompt_tokens(run.requests[-1].messages)
    )
    return _is_prompt_estimate(calls[-1]) and not repeats_last_request


def _is_refused_call(
    run: ConversationRun, expected: ExpectedBill, calls: tuple[LLMCallUsage, ...]
) -> bool:
    """POLICY E. A call the provider refused (an HTTP 500, the script running out) is
    billed a prompt estimate when the cancellation lands while the refusal is on its way to the
    loop (langchain-core's `astream` awaits `on_llm_error` before re-raising it; `ainvoke` gets
    it from a task of its own), though "a call refused before any output costs nothing". Shape:
    the last call, which the model refused, is the prompt estimate of its request, not 0."""
    if "E" not in _TOLERATED or len(calls) != len(expected.usages) or not run.requests:
        return False
    delivery = run.deliveries[-1]
    refused = (
        expected.costs[-1] == TokenUsage()
        and delivery.raised is not None
        and not isinstance(delivery.raised, asyncio.CancelledError)
        and not delivery.chunks
    )
    return (
        refused
        and _is_prompt_estimate(calls[-1])
        and calls[-1].usage.prompt_tokens == estimate_prompt_tokens(run.requests[-1].messages)
    )


def _is_estimate_despite_usage(
    run: ConversationRun, expected: ExpectedBill, calls: tuple[LLMCallUsage, ...]
) -> bool:
    """FIXED ISSUE B (kept as a switch). A stream cancelled after its usage chunk arrived
    (langchain-core's `astream` still awaits its callbacks before it ends) was billed an
    estimate instead of the provider's figures that the fold already held. Shape: the last call
    is exactly the estimate of the model's last request, whose usage chunk had been delivered."""
    if "B" not in _TOLERATED or not run.deliveries:
        return False
    delivery = run.deliveries[-1]
    return (
        delivery.streamed
        and delivery.has_received_usage
        and calls[-1].usage == estimated_cost(run.requests[-1], delivery)
    )
