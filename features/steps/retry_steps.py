"""Steps for the loop's retries: the retry settings, and what each attempt left behind (its usage
record and the `call_retrying` event before the next one)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import openai
from behave import given, then, when
from behave.runner import Context
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.exceptions import ModelTimeoutError
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from pydantic import PrivateAttr

from cleveractors import ActorExecutor, ConfigurationError, LLMAgent, RetryPolicy, TokenUsage
from cleveractors.events import CallRetrying
from cleveractors.testing import ScriptedChatModel, ScriptedReply

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


# -- failures of every family, raised by a model built in code ----------------------------------

_REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


def _caused(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


_FAILURES: dict[str, Callable[[], BaseException]] = {
    "httpx.ConnectError": lambda: httpx.ConnectError("connection refused", request=_REQUEST),
    "httpx.ConnectTimeout": lambda: httpx.ConnectTimeout("connect timed out", request=_REQUEST),
    "httpx.ReadTimeout": lambda: httpx.ReadTimeout("read timed out", request=_REQUEST),
    "httpx.RemoteProtocolError": lambda: httpx.RemoteProtocolError("peer closed connection"),
    "a bare TimeoutError": TimeoutError,
    "ConnectionResetError": lambda: ConnectionResetError("connection reset by peer"),
    "ConnectionRefusedError": lambda: ConnectionRefusedError("connection refused"),
    "openai.APIConnectionError caused by ConnectionRefusedError": lambda: _caused(
        openai.APIConnectionError(request=_REQUEST), ConnectionRefusedError("refused")
    ),
    "openai.APITimeoutError": lambda: openai.APITimeoutError(request=_REQUEST),
    "openai.ConflictError": lambda: openai.ConflictError(
        "conflict", response=httpx.Response(409, request=_REQUEST), body=None
    ),
    "ModelTimeoutError": lambda: ModelTimeoutError("the model timed out"),
    "an OpenAI server_error inside the stream": lambda: openai.APIError(
        "The server had an error", _REQUEST, body={"message": "oops", "type": "server_error"}
    ),
    "an Anthropic overloaded_error event inside the stream": lambda: openai.APIError(
        "Overloaded",
        _REQUEST,
        body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ),
    "an invalid_request_error inside the stream": lambda: openai.APIError(
        "bad", _REQUEST, body={"type": "error", "error": {"type": "invalid_request_error"}}
    ),
    "ValueError": lambda: ValueError("the reply could not be read"),
}


class _FirstCallFails(ScriptedChatModel):
    """A scripted model whose first call raises `failure` before any output."""

    _failure: BaseException | None = PrivateAttr(default=None)

    def _fail_once(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._fail_once()
        return await super()._agenerate(messages, stop, run_manager, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self._fail_once()
        async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
            yield chunk


@given("an actor built in code, retrying once, whose model first fails with {failure}")
def _given_failing_first(context: Context, failure: str) -> None:
    model = _FirstCallFails(replies=[ScriptedReply(text="Paris: 18 C and light rain.")])
    model._failure = _FAILURES[failure]()
    context.failure = failure
    agent = LLMAgent(model, retry=RetryPolicy(max_retries=1, backoff_s=0.01))
    context.executor = ActorExecutor(agent)


@then("the first attempt was retried, costing {cost}")
def _then_first_retried(context: Context, cost: str) -> None:
    outcome = context.outcome
    assert outcome.error is None, f"{context.failure} was not retried: {outcome.error!r}"
    calls = outcome.result.usage_by_call
    seen = [(c.attempt, c.status, _cost(c.usage)) for c in calls]
    assert seen == [(1, "failed", cost), (2, "ok", "reported")], seen


@then("the first attempt was not retried, costing {cost}")
def _then_first_not_retried(context: Context, cost: str) -> None:
    outcome = context.outcome
    assert outcome.error is not None, "the failure did not reach the caller"
    calls = outcome.result.usage_by_call
    seen = [(c.attempt, c.status, _cost(c.usage)) for c in calls]
    assert seen == [(1, "failed", cost)], seen


@when("a RetryPolicy is made with {setting} = {value:g}")
def _when_bad_policy(context: Context, setting: str, value: float) -> None:
    try:
        RetryPolicy(**{setting: value})
    except ConfigurationError as exc:
        context.policy_error = exc
    else:
        context.policy_error = None


@then('it is refused with a ConfigurationError saying "{text}"')
def _then_policy_refused(context: Context, text: str) -> None:
    assert context.policy_error is not None, "the policy was accepted"
    assert str(context.policy_error) == text, str(context.policy_error)
