"""The loop's retries: one LLM call made in attempts, each attempt a usage record.

Retries live here, not in the provider's client, so that every attempt is seen (a
`CallRetrying` event), billed (an attempt cut off after sending is an estimate; one refused with
an HTTP error status costs 0) and never repeats text the caller was already shown.

Failures are read without importing any provider package: langchain-core's provider-neutral
`ModelError` family (with its `is_retryable`), an HTTP status on the error (`status_code`, as the
`openai` and `anthropic` SDKs set it, or `response.status_code`), and transport errors of
`httpx` (or `httpx2`), `openai` and `anthropic` looked up in `sys.modules` (an exception of a
module nobody imported cannot occur).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from langchain_core.exceptions import ModelConnectionError, ModelError, ModelTimeoutError
from langchain_core.messages import AIMessage

from cleveractors.errors import ConfigurationError, describe_failure, http_status
from cleveractors.events import CallRetrying, Event, TextDelta

if TYPE_CHECKING:
    from cleveractors.agents._loop import _Run

__all__ = ["RetryPolicy", "call_with_retries", "may_have_been_billed"]

_RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides every 5xx: request timeout, conflict (a lock, a concurrent edit) and rate limit."""
_RETRYABLE_ERROR_TYPES = frozenset(
    {"server_error", "api_error", "overloaded_error", "rate_limit_error", "timeout_error"}
)
"""The `type` of an error a provider sends inside a stream that began with HTTP 200 (OpenAI's
`server_error`; Anthropic's SSE `error` event, e.g. `overloaded_error`), when a retry may fix it."""
_HTTP_CLIENTS = ("httpx", "httpx2")  # recent `openai` SDKs use httpx2
_TRANSPORT_KINDS = ("TimeoutException", "NetworkError", "RemoteProtocolError")
_TRANSPORT_ERRORS = (
    *((client, kind) for client in _HTTP_CLIENTS for kind in _TRANSPORT_KINDS),
    ("openai", "APIConnectionError"),  # also its APITimeoutError
    ("anthropic", "APIConnectionError"),
)
_NOT_SENT_ERRORS = tuple(
    (client, kind)
    for client in _HTTP_CLIENTS
    for kind in ("ConnectError", "ConnectTimeout", "PoolTimeout")
)
"""Failures before the request left this machine: the provider cannot have billed them."""
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
    """

    max_retries: int = 0
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        negative = [name for name in self.__slots__ if getattr(self, name) < 0]
        if negative:
            raise ConfigurationError(f"RetryPolicy: {', '.join(negative)} must not be negative")


@dataclass(frozen=True, slots=True)
class _Retry:
    reason: str
    delay_s: float


async def call_with_retries(
    run: _Run, policy: RetryPolicy, attempt: Callable[[], Awaitable[AIMessage]]
) -> AIMessage:
    """Make `attempt` (one model call, which records its own reply) until it answers, or fails in
    a way not worth retrying, or the retries are spent. Every failed attempt is billed here."""
    number = 1
    while True:
        run.attempt = number
        with _TextWatch(run) as watch:
            try:
                return await attempt()
            except (Exception, asyncio.CancelledError) as exc:
                run.bill_interrupted_call(exc)
                if run.is_stop_requested:
                    # A stop that a library swallowed must not turn into a retry and its wait.
                    raise asyncio.CancelledError from exc
                retry = _plan_retry(exc, number, policy, has_shown_text=watch.has_shown_text)
                if retry is None:
                    raise
        number += 1
        run.sink(
            CallRetrying(
                round=run.round, attempt=number, reason=retry.reason, delay_s=retry.delay_s
            )
        )
        await asyncio.sleep(retry.delay_s)


class _TextWatch:
    """Notes whether an attempt sent the caller any text, by watching the run's sink."""

    def __init__(self, run: _Run) -> None:
        self._run = run
        self._sink = run.sink
        self.has_shown_text = False

    def __enter__(self) -> _TextWatch:
        self._run.sink = self._forward
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._run.sink = self._sink

    def _forward(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.has_shown_text = True
        self._sink(event)


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


def is_retryable(error: BaseException) -> bool:
    """Whether a second try of the same request may succeed."""
    status = http_status(error)
    if status is not None:
        return status in _RETRYABLE_STATUSES or status >= 500
    if _streamed_error_type(error) in _RETRYABLE_ERROR_TYPES:
        return True
    if isinstance(error, ModelError):
        return error.is_retryable
    return _is_transport_failure(error)


def may_have_been_billed(error: BaseException) -> bool:
    """Whether an attempt that failed before any output got past sending, so the provider may
    have billed it: cancelled, timed out or dropped after sending. An HTTP error status (the
    rest of langchain-core's `ModelError` family is keyed to one), a connection never made, or
    any other failure costs nothing."""
    if isinstance(error, asyncio.CancelledError):
        return True
    if http_status(error) is not None or not _is_transport_failure(error):
        return False
    return not any(
        _is_any(cause, _NOT_SENT_ERRORS) or isinstance(cause, ConnectionRefusedError)
        for cause in _causes(error)
    )


def _streamed_error_type(error: BaseException) -> str | None:
    """The error `type` of the body an SDK error carries: `{"type": ...}` (OpenAI) or
    `{"type": "error", "error": {"type": ...}}` (Anthropic)."""
    body = getattr(error, "body", None)
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    kind = body.get("type") if isinstance(body, Mapping) else None
    return kind if isinstance(kind, str) else None


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


def _is_transport_failure(error: BaseException) -> bool:
    """A connection error or timeout: the request may or may not have reached the provider."""
    return isinstance(
        error, (ModelConnectionError, ModelTimeoutError, TimeoutError, ConnectionError)
    ) or _is_any(error, _TRANSPORT_ERRORS)


def _is_any(error: BaseException, kinds: tuple[tuple[str, str], ...]) -> bool:
    for module_name, class_name in kinds:
        kind = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(kind, type) and isinstance(error, kind):
            return True
    return False


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error and what caused it (SDKs wrap the transport error that really happened)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
