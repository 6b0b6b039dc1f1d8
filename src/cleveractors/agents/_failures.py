"""What a failed model call means: whether a second try may succeed, and whether the provider
may have billed it.

Failures are read without importing any provider package: langchain-core's provider-neutral
`ModelError` family (with its `is_retryable`), an HTTP status on the error (`http_status`), and
transport errors of `httpx` (or `httpx2`), `openai` and `anthropic` looked up in `sys.modules`
(an exception of a module nobody imported cannot occur). The retries (`_retry`) and the run's
billing (`_bill`) both ask these questions; neither owns the answers.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator, Mapping

from langchain_core.exceptions import ModelConnectionError, ModelError, ModelTimeoutError

from cleveractors.errors import http_status

__all__ = ["is_retryable", "may_have_been_billed"]

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
