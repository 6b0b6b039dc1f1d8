"""Steps for the loop's retries: the retry settings, and what each attempt left behind (its usage
record and the `call_retrying` event before the next one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from behave import given, then
from behave.runner import Context

from cleveractors import TokenUsage
from cleveractors.events import CallRetrying

_JITTER = 0.25
"""The documented jitter: a backoff is shortened by up to a quarter, never lengthened."""


@given("the actor retries a failed model call up to {count:d} times, backing off {seconds:g} s")
def _given_retries(context: Context, count: int, seconds: float) -> None:
    context.actor["agent"]["max_retries"] = count
    context.actor["agent"]["retry_backoff_s"] = seconds


@given("the actor keeps the default max_retries, backing off {seconds:g} s")
def _given_default_retries(context: Context, seconds: float) -> None:
    del context.actor["agent"]["max_retries"]
    context.actor["agent"]["retry_backoff_s"] = seconds


@given("reply {number:d} asks to retry at an HTTP date {seconds:d} seconds from now")
def _given_retry_at_date(context: Context, number: int, seconds: int) -> None:
    script = context.actor["agent"]["script"]
    when = datetime.now(UTC) + timedelta(seconds=seconds)
    script[number - 1] = script[number - 1].model_copy(
        update={"retry_after": format_datetime(when, usegmt=True)}
    )


@then("the attempts were recorded as:")
def _then_attempts(context: Context) -> None:
    """Each row: the call's purpose, round, attempt and status, and its cost: `reported` (the
    provider's figures), `estimate` (flagged, with a prompt estimate) or `0`."""
    calls = context.outcome.result.usage_by_call
    seen = [(c.purpose, c.round, c.attempt, c.status, _cost(c.usage)) for c in calls]
    expected = [
        (row["purpose"], int(row["round"]), int(row["attempt"]), row["status"], row["cost"])
        for row in context.table
    ]
    assert seen == expected, f"attempts: {seen}"


def _cost(usage: TokenUsage) -> str:
    if usage == TokenUsage():
        return "0"
    if usage.estimated:
        assert usage.prompt_tokens > 0, usage
        return "estimate"
    return "reported"


@then("the call_retrying events were:")
def _then_retry_events(context: Context) -> None:
    """Each row: round, the attempt about to be made, the reason, and the delay: a number of
    seconds (what `Retry-After` asked), `backoff` (the configured backoff for that attempt,
    shortened by the jitter), or `up to N` (an HTTP date N seconds ahead, read a moment later)."""
    events = [e for e in context.outcome.events if isinstance(e, CallRetrying)]
    assert len(events) == len(context.table.rows), events
    backoff = context.actor["agent"]["retry_backoff_s"]
    for event, row in zip(events, context.table, strict=True):
        assert (event.round, event.attempt) == (int(row["round"]), int(row["attempt"])), event
        assert event.reason == row["reason"], event
        delay = row["delay"]
        if delay == "backoff":
            longest = backoff * 2 ** (event.attempt - 2)
            assert longest * (1 - _JITTER) <= event.delay_s <= longest, (event, longest)
        elif delay.startswith("up to "):
            assert 0 < event.delay_s <= float(delay.removeprefix("up to ")), event
        else:
            assert event.delay_s == float(delay), event


@then("no call was retried")
def _then_not_retried(context: Context) -> None:
    calls = context.outcome.result.usage_by_call
    assert all(call.attempt == 1 for call in calls), calls
    retried = [e for e in context.outcome.events if isinstance(e, CallRetrying)]
    assert not retried, retried


@then("call {index:d} is recorded as attempt {attempt:d}, {status}, costing 0")
def _then_refused_record(context: Context, index: int, attempt: int, status: str) -> None:
    call = context.outcome.result.usage_by_call[index - 1]
    assert (call.attempt, call.status, call.usage) == (attempt, status, TokenUsage()), call
