"""The loop's retries: one LLM call made in attempts, each attempt a usage record.

Retries live here, not in the provider's client, so that every attempt is seen (a
`CallRetrying` event), billed (an attempt cut off after sending is an estimate; one refused with
an HTTP error status costs 0) and never repeats text the caller was already shown. What a failure
means (retryable, possibly billed) is read by `cleveractors.agents._failures`. When another model
can take over (`cleveractors.agents._fallback`), a model that gives up says so with `MovingOn`.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from langchain_core.messages import AIMessage

from cleveractors.agents._failures import is_retryable
from cleveractors.agents._loop import _Run
from cleveractors.errors import ConfigurationError, describe_failure
from cleveractors.events import CallRetrying

__all__ = ["MovingOn", "RetryPolicy", "call_with_retries"]

_JITTER = 0.25
"""Each backoff is shortened by up to this fraction, at random, so that clients refused at the
same moment do not all come back at the same moment."""
_random = secrets.SystemRandom()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How the tool loop retries an LLM call that failed in a way a second try may fix.

    Retried: HTTP 408, 409, 429 and 5xx, connection errors, streams cut off, timeouts, a server
    error or overload reported inside a stream (and any langchain-core `ModelError` whose
    `is_retryable` is true). Not retried: other HTTP errors
    (400, 401, 403, 404, ...), cancellation, and a streamed attempt that already showed the
    caller text (that text cannot be taken back).

    Attempt n + 1 waits the provider's `Retry-After` (seconds or an HTTP date) when it sent one
    of at most `max_retry_after_s`; otherwise `backoff_s * 2 ** (n - 1)`, at most `max_backoff_s`,
    shortened by up to 25 % at random.

    Attributes:
        max_retries: Retries after the first attempt; 0 never retries.
        backoff_s: The wait before the first retry, without `Retry-After`.
        max_backoff_s: The longest wait backoff reaches.
        max_retry_after_s: The longest `Retry-After` honoured; a longer one is replaced by
            backoff (as the `openai` and `anthropic` SDKs do).

    Raises:
        ConfigurationError: a field is negative.
    """

    max_retries: int = 0
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        negative = [name for name in self.__slots__ if getattr(self, name) < 0]
        if negative:
            raise ConfigurationError(f"RetryPolicy: {', '.join(negative)} must not be negative")


class MovingOn(Exception):
    """The model gave up on a call another model may still answer: its retries are spent on an
    error a retry may fix, or it failed with an error that moves on at once (`immediate`); none
    of the call's text reached the caller. Raised only when the caller asked for it."""

    def __init__(self, error: Exception, *, immediate: bool) -> None:
        super().__init__(describe_failure(error))
        self.error = error
        self.immediate = immediate


@dataclass(frozen=True, slots=True)
class _Retry:
    reason: str
    delay_s: float


async def call_with_retries(
    run: _Run,
    policy: RetryPolicy,
    attempt: Callable[[int], Awaitable[AIMessage]],
    *,
    moves_on: Callable[[BaseException], bool] | None = None,
) -> AIMessage:
    """Make `attempt` (one model call, given its number from 1, which records its own reply)
    until it answers, or fails in a way not worth retrying, or the retries are spent. Every
    failed attempt is billed here.

    With `moves_on` (another model can take over), a failure that showed the caller no text
    raises `MovingOn` instead of itself: at once for an error `moves_on` names, or once a
    retryable error has spent the retries."""
    number = 1
    while True:
        try:
            return await attempt(number)
        except (Exception, asyncio.CancelledError) as exc:
            # Read before billing: billing ends the in-flight call that knows what it showed.
            in_flight = run.bill.in_flight
            has_shown_text = in_flight is not None and in_flight.has_shown_text
            run.bill.bill_interrupted_call(exc)
            if run.pacing.is_stop_requested:
                # A stop that a library swallowed must not turn into a retry and its wait.
                raise asyncio.CancelledError from exc
            retry = _plan_retry(exc, number, policy, has_shown_text=has_shown_text)
            if moves_on is not None and isinstance(exc, Exception) and not has_shown_text:
                if moves_on(exc):
                    raise MovingOn(exc, immediate=True) from exc
                if retry is None and is_retryable(exc):
                    raise MovingOn(exc, immediate=False) from exc
            if retry is None:
                raise
        number += 1
        run.sink(
            CallRetrying(
                round=run.round, attempt=number, reason=retry.reason, delay_s=retry.delay_s
            )
        )
        await asyncio.sleep(retry.delay_s)


def _plan_retry(
    error: BaseException, number: int, policy: RetryPolicy, *, has_shown_text: bool
) -> _Retry | None:
    if number > policy.max_retries or has_shown_text or not is_retryable(error):
        return None
    waited = _retry_after_s(error)
    if waited is None or waited > policy.max_retry_after_s:
        backoff = min(policy.backoff_s * 2 ** (number - 1), policy.max_backoff_s)
        waited = backoff * (1 - _JITTER * _random.random())
    return _Retry(reason=describe_failure(error), delay_s=waited)


def _retry_after_s(error: BaseException) -> float | None:
    """The wait the provider asked for in `Retry-After`: seconds, or an HTTP date."""
    headers = getattr(getattr(error, "response", None), "headers", None)
    if not isinstance(headers, Mapping):
        return None
    value = next(
        (str(v) for k, v in headers.items() if str(k).lower() == "retry-after"),
        None,
    )
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
