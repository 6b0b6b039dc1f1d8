"""The public exception tree.

```
CleverActorsError                 root of everything this library raises itself
 ├── ConfigurationError           you configured or called us wrong (field, file, value named)
 │    └── DepsMissingError        a run's tools need `deps` and the run was given none (named)
 └── ExecutionError               a run went wrong at run time
      ├── McpServerError          an MCP server cannot be reached or answered wrongly (named)
      ├── ToolExecutionError      one tool call failed (tool name and call id named);
      │                           the loop turns it into an error ToolMessage, it never escapes
      ├── ScriptExhaustedError    the scripted (stub) model was asked for more turns than scripted
      ├── StreamStalledError      a streamed model call sent no chunk for the stall limit (also a
      │                           TimeoutError, so retried like one before any text was shown)
      ├── GuardrailTripped        an input or output guardrail stopped the run (name, reason)
      ├── OutputValidationError   a typed answer still failed validation after its retries
      │                           (the errors, the last raw text and every attempt's usage)
      ├── ContextWindowExceededError  the provider refused a prompt as too long for its window
      │                           again, after one compaction and one retry
      ├── SessionBusyError        another run holds the session (in this process or another)
      ├── SessionNotFoundError    no such session for this caller (another's is never shown)
      ├── IdempotencyError        a request's idempotency key cannot serve it (key and run named)
      │    ├── IdempotencyKeyInProgressError   the key's first run is still going (HTTP 409)
      │    └── IdempotencyKeyMismatchError     the key was first used for another request (422)
      ├── SpendLimitExceeded      the caller's spend limit is reached (caller, window, when it
      │                           resets): refused before any LLM call (HTTP 429)
      ├── ApprovalError           a decision on a paused run cannot be taken (run and call named)
      │    ├── RunNotFoundError           no paused run by that id for this caller (HTTP 404)
      │    ├── ApprovalConflictError      the call or run was already decided or resumed (409)
      │    │    └── ApprovalExpiredError  the call's approval ran out before the decision (409)
      │    └── InvalidDecisionError       a decision that does not fit its call (422): unknown
      │                                   call id, stale digest, edit failing the tool's schema
      └── StoreError              the store could not write the ledger or the session: the run
                                  fails (an answer that cannot be billed is not served)
```

Model failures are not wrapped: what a chat model raises (for `ChatOpenAI`, langchain-core's
provider-neutral `ModelError` family, which also subclasses the `openai` SDK errors) reaches the
caller unchanged, with its `is_retryable`. Whatever escapes `ActorExecutor.execute()` or a stream,
`executor.last_result` already holds the tokens spent before it.

`describe_failure()` is how the library itself tells a failure in one line (a retry's reason,
an MCP server that cannot be reached): its secrets hidden, since that line reaches events,
results and logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

from cleveractors.usage import LLMCallUsage, TokenUsage

__all__ = [
    "ApprovalConflictError",
    "ApprovalError",
    "ApprovalExpiredError",
    "CleverActorsError",
    "ConfigurationError",
    "ContextWindowExceededError",
    "ExecutionError",
    "GuardrailTripped",
    "IdempotencyError",
    "IdempotencyKeyInProgressError",
    "IdempotencyKeyMismatchError",
    "InvalidDecisionError",
    "McpServerError",
    "OutputValidationError",
    "RunNotFoundError",
    "ScriptExhaustedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "SpendLimitExceeded",
    "StoreError",
    "StreamStalledError",
    "ToolExecutionError",
]


class CleverActorsError(Exception):
    """Root of every exception cleveractors raises itself: catch it for all of them. A model's
    own `ModelError` and `asyncio.CancelledError` are not under it."""


class ConfigurationError(CleverActorsError):
    """An actor config, a tool declaration or a call's arguments are wrong.

    The message names what is wrong: the file (when there is one), the field path and the value.
    """


class DepsMissingError(ConfigurationError):
    """A run was started without `deps` though a tool of the agent needs them (a parameter
    annotated `RunContext[MyDeps]`): refused before anything runs, the tools named. A resumed
    run gets its deps again from its caller, like a new one."""

    def __init__(self, message: str, *, tool_names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.tool_names = tool_names


class ExecutionError(CleverActorsError):
    """A run went wrong at run time, as opposed to `ConfigurationError`: the base of the
    run-failure types. A model's own errors are not wrapped in it."""


class McpServerError(ExecutionError):
    """An MCP server cannot be connected, or its answer cannot be used; the server is named.

    Raised when a toolbox opens (e.g. `async with executor:` or `cleveractors validate`); during
    a run, a failing MCP call becomes an error result the model reads instead.
    """


class ToolExecutionError(ExecutionError):
    """One tool call failed: its handler raised, timed out, or its arguments were invalid.

    Attributes:
        tool_name: The name the model called.
        call_id: The id of the model's tool call.
    """

    def __init__(self, message: str, *, tool_name: str, call_id: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id


class ScriptExhaustedError(ExecutionError):
    """A `ScriptedChatModel` was called more times than it has scripted replies."""


class StreamStalledError(ExecutionError, TimeoutError):
    """A streamed model call sent no chunk for `stream_stall_timeout_s`, so the loop ended it.

    A `TimeoutError`, so the loop's retries treat it as any timeout: retried unless the call had
    already shown text.

    Attributes:
        timeout_s: The stall limit that was reached.
        model: The model's name, when known.
        chunks_received: How many chunks of the call arrived before it stalled.
    """

    def __init__(self, timeout_s: float, *, model: str | None, chunks_received: int) -> None:
        super().__init__(
            f"model {model or 'unnamed'!r} sent no stream chunk for {timeout_s:g} s "
            f"(stream_stall_timeout_s) after {chunks_received} chunks; the call was ended"
        )
        self.timeout_s = timeout_s
        self.model = model
        self.chunks_received = chunks_received


class GuardrailTripped(ExecutionError):
    """An input or output guardrail tripped, so the run ended without an answer (its usage, every
    call made, is on the run's result as for any failure).

    Attributes:
        guardrail: The guardrail's name.
        stage: `input` (the user's message) or `output` (the answer).
        reason: Why it tripped, in the guardrail's words.
    """

    def __init__(self, guardrail: str, *, stage: str, reason: str) -> None:
        super().__init__(f"{stage} guardrail {guardrail!r} tripped: {reason}")
        self.guardrail = guardrail
        self.stage = stage
        self.reason = reason


class OutputValidationError(ExecutionError):
    """The model's typed answer failed validation, and so did every retry `output_retries`
    allowed (or the model never gave one).

    Attributes:
        errors: What was wrong with the last attempt, one line each.
        raw_text: The last attempt as the model sent it (its text, or its output tool's
            arguments).
        usage_by_call: One record per LLM call of the run, every attempt included.
    """

    def __init__(
        self,
        *,
        errors: tuple[str, ...],
        raw_text: str,
        attempts: int,
        usage_by_call: tuple[LLMCallUsage, ...],
    ) -> None:
        super().__init__(
            f"the typed answer failed validation after {attempts} attempts: " + "; ".join(errors)
        )
        self.errors = errors
        self.raw_text = raw_text
        self.usage_by_call = usage_by_call

    @property
    def usage(self) -> TokenUsage:
        """The sum over every call of the run."""
        return sum((call.usage for call in self.usage_by_call), TokenUsage())


class ContextWindowExceededError(ExecutionError):
    """The provider refused a prompt as too long for the model's context window a second time:
    the loop compacted the conversation once and retried the call once, and the retry was
    refused too. The provider's error is the `__cause__`.

    Attributes:
        model: The model that refused the prompt.
        prompt_tokens: The loop's estimate of the retried prompt's size.
    """

    def __init__(self, *, model: str | None, prompt_tokens: int) -> None:
        super().__init__(
            f"model {model!r} refused the prompt as too long for its context window, again "
            f"after one compaction and one retry (about {prompt_tokens} tokens); set the "
            "agent's context_window (or a smaller context_budget) so the loop compacts in time"
        )
        self.model = model
        self.prompt_tokens = prompt_tokens


class SessionBusyError(ExecutionError):
    """A run asked for a session that another run holds; raised at once, never queued."""


class SessionNotFoundError(ExecutionError):
    """No session by that id belongs to this caller. Another caller's session is reported the
    same way, so its existence is never revealed."""


class IdempotencyError(ExecutionError):
    """A request came with an idempotency key that cannot serve it; raised before anything is
    spent. Keys are scoped to their caller: another caller's key of the same name is another key.

    Attributes:
        key: The idempotency key, as the caller sent it.
        run_id: The run that holds the key (the one its first request started).
    """

    def __init__(self, message: str, *, key: str, run_id: str) -> None:
        super().__init__(message)
        self.key = key
        self.run_id = run_id


class IdempotencyKeyInProgressError(IdempotencyError):
    """The key's first request is still running: retry once it has answered, to get its answer."""

    def __init__(self, *, key: str, run_id: str) -> None:
        super().__init__(
            f"idempotency key {key!r} is in use by run {run_id}, which is still going",
            key=key,
            run_id=run_id,
        )


class IdempotencyKeyMismatchError(IdempotencyError):
    """The key was first used for a different request (another message, history or session):
    a key names one request, so this one is refused rather than answered with another's answer."""

    def __init__(self, *, key: str, run_id: str) -> None:
        super().__init__(
            f"idempotency key {key!r} was used by run {run_id} for a different request",
            key=key,
            run_id=run_id,
        )


class ApprovalError(ExecutionError):
    """Decisions on a paused run that cannot be taken; raised before any of them is applied, so
    nothing runs and nothing is recorded.

    Attributes:
        run_id: The paused run the decisions were sent to.
        call_id: The tool call the problem is about, when it is about one.
    """

    def __init__(self, message: str, *, run_id: str, call_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.call_id = call_id


class RunNotFoundError(ApprovalError):
    """No paused run by that id belongs to this caller. Another caller's run is reported the same
    way, so its existence is never revealed."""


class ApprovalConflictError(ApprovalError):
    """The run was already resumed (by another worker too: exactly one of two wins), or the call
    already has a decision: decisions are single-use."""


class ApprovalExpiredError(ApprovalConflictError):
    """The call waited longer than the agent's `approval_timeout_s`: it was not run, and the
    model reads it as declined."""


class InvalidDecisionError(ApprovalError):
    """A decision that does not fit the call it names: an unknown call id, a digest of other
    arguments (the decision was made on a stale view), edited arguments that fail the tool's
    schema, or no decision at all."""


class SpendLimitExceeded(ExecutionError):
    """The caller's spend limit leaves no room for the next LLM call: refused before it is
    sent, nothing billed for it.

    Attributes:
        caller: Whose limit it is (None: the runs of no particular caller).
        window: The limit's window: `day`, `month` or `rolling`.
        resets_at: When that window starts again (UTC): the caller may come back then.
    """

    def __init__(self, *, caller: str | None, window: str, unit: str, resets_at: datetime) -> None:
        who = "no particular caller" if caller is None else f"caller {caller!r}"
        super().__init__(
            f"the {window} spend limit ({unit}) of {who} is reached; it resets at "
            f"{resets_at.isoformat(timespec='seconds')}"
        )
        self.caller = caller
        self.window = window
        self.unit = unit
        self.resets_at = resets_at


class StoreError(ExecutionError):
    """The store failed to write what a run must keep (a ledger row, the session's new turn).
    The database's own exception is the `__cause__`; the run's usage is on its result."""


# -- telling a failure ---------------------------------------------------------------------------

_HIDDEN = "***"
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_MIN_HIDDEN_LENGTH = 4
"""A shorter value is no credential, and hiding it would blank out every digit of a message."""


def http_status(error: BaseException) -> int | None:
    """The HTTP error status an error carries (400 and up), if any: `status_code`, as the
    `openai` and `anthropic` SDKs set it, or `response.status_code`."""
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


def describe_failure(error: BaseException, *, hidden: Iterable[str] = ()) -> str:
    """A failure in one line: `HTTP <status>` when it carries one, else its type and message.

    An exception group (what a task group raises) is told by its first innermost error. Every
    URL in the message loses its userinfo and its query values, and each of the `hidden`
    values (the credentials of the connection that failed) is replaced by `***`.
    """
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    status = http_status(error)
    if status is not None:
        return f"HTTP {status}"
    message = _URL_IN_TEXT.sub(lambda match: redact_url(match.group()), str(error))
    message = hide_values(message, hidden)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def hide_values(text: str, hidden: Iterable[str]) -> str:
    """`text` with each of the `hidden` values replaced by `***` (the longest first, so a value
    that contains another is hidden whole)."""
    for value in sorted(set(hidden), key=len, reverse=True):
        if len(value) >= _MIN_HIDDEN_LENGTH:
            text = text.replace(value, _HIDDEN)
    return text


def redact_url(url: str) -> str:
    """`url` fit for a message: userinfo (`user:password@`) and query values become `***`;
    the scheme, host, port, path and query names stay, to tell which endpoint it was."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. a bracketed host that is no IPv6 address
        return f"{url.partition('://')[0]}://{_HIDDEN}"
    _userinfo, has_userinfo, host = parts.netloc.rpartition("@")
    netloc = f"{_HIDDEN}@{host}" if has_userinfo else host
    query = "&".join(
        f"{name}={_HIDDEN}" if has_value else name
        for name, has_value, _value in (field.partition("=") for field in parts.query.split("&"))
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query if parts.query else ""))
