"""A request's turn, below every route that runs the actor: the turn a route read (a new
message, or a person's decisions on a paused run), its run opened, the response that owns the
run, and the bill.

- `open_turn()` starts the run (the one call into the executor) and reads its first event, so
  the response's headers can name the run (`X-Run-Id`). A run the executor refuses before it
  begins is refused here, by one table (`REFUSALS`): nothing ran, nothing is billed.
- `RunStreamResponse` streams the run in a route's format (its `RunEncoder`) and owns the run:
  however the response ends (the answer is complete, the model failed, the client hung up or
  stopped reading for `send_timeout_s`, the server shut down), the run is stopped if it is still
  going, its usage settled, and `on_usage` called with the final result, once (`billed_run`).
- When the server's grace period ends and cancels a stream, the client still gets the route's
  terminal event (a failure whose error type is `ServerShuttingDown`: send the turn again), and
  the run is billed before the app's lifespan ends (`RunsInFlight.settled()`): the store closes
  after the last run has settled.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
from fastapi import Request
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from cleveractors.agents import EventStream
from cleveractors.approvals import ApprovalDecision
from cleveractors.errors import InvalidDecisionError
from cleveractors.events import Event, RunFailed, RunFinished, RunPaused, RunStarted
from cleveractors.executor import ActorExecutor
from cleveractors.result import ErrorInfo, ExecutionResult, ResultCallback
from cleveractors.turns import NewMessage, Resumption, Turn
from cleveractors.web.requests import RequestRejected
from cleveractors.web.security import (
    SHUTDOWN_ERROR_TYPE,
    current_caller,
    logger,
    request_deps,
)
from cleveractors.web.sse import SSE_LINE_SEPARATOR

__all__ = [
    "DEFAULT_SEND_TIMEOUT_S",
    "FAILURE_STATUS",
    "IDEMPOTENCY_HEADER",
    "REFUSALS",
    "OpenedRun",
    "Refusal",
    "RunEncoder",
    "RunSettings",
    "RunStreamResponse",
    "RunsInFlight",
    "Turn",
    "billed_run",
    "open_turn",
    "resumption",
    "shutdown_event",
]

DEFAULT_SEND_TIMEOUT_S = 30.0
IDEMPOTENCY_HEADER = "Idempotency-Key"

# When the client leaves before the run was ever started (it is started by the first read of
# its events), nothing was spent; the callback still hears of the request, once.
_NOTHING_SPENT = ExecutionResult(
    text="",
    error=ErrorInfo(type="CancelledError", message="the client left before the run started"),
    cancelled=True,
)
_SHUTDOWN = ErrorInfo(
    type=SHUTDOWN_ERROR_TYPE,
    message="the server shut down before the run ended; send the turn again",
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """How a run the executor refused before it began is answered: its HTTP status, and
    whether the refusal is about the request's `Idempotency-Key` (then the message names it)."""

    status_code: int
    is_about_key: bool = False
    code: str | None = None
    """The error's `code` in OpenAI's format (`/v1`)."""


REFUSALS: dict[str, Refusal] = {
    # A resumption: not the caller's paused run, already resumed (or being resumed: a busy
    # session is reported as this conflict), an expired call, a decision that does not fit.
    "RunNotFoundError": Refusal(404),
    "ApprovalConflictError": Refusal(409),
    "ApprovalExpiredError": Refusal(409),
    "InvalidDecisionError": Refusal(422),
    # An Idempotency-Key: its first run still going, another body under it, a bad key.
    "IdempotencyKeyInProgressError": Refusal(409, is_about_key=True),
    "IdempotencyKeyMismatchError": Refusal(422, is_about_key=True),
    "ConfigurationError": Refusal(422, is_about_key=True),
    # The caller's spend limit: come back when the window resets (`Retry-After`).
    "SpendLimitExceeded": Refusal(429, code="insufficient_quota"),
}
"""Each way a run is refused before it begins, by the error type of its first event. Any other
failure is the run's own: it is streamed (`run_failed`) and billed."""

FAILURE_STATUS: dict[str, int] = {"GuardrailTripped": 400}
"""The HTTP status of a run's own failure where the route answers once (`/v1` not streamed), by
its error type: a tripped guardrail is the request's fault. Any other failure is a 502."""


class RunsInFlight:
    """The runs the routes have opened and not yet billed, so that a server shutting down can
    wait for the last one to settle before it closes what they bill into (the store)."""

    def __init__(self) -> None:
        self._count = 0
        self._waiters: list[asyncio.Future[None]] = []

    def enter(self) -> None:
        self._count += 1

    def leave(self) -> None:
        self._count -= 1
        if self._count == 0:
            for waiter in self._waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._waiters.clear()

    async def settled(self) -> None:
        """Return once no run is in flight."""
        if self._count == 0:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What the routes that run the actor share."""

    executor_factory: Callable[[], ActorExecutor]
    on_usage: ResultCallback | None
    send_timeout_s: float
    in_flight: RunsInFlight = field(default_factory=RunsInFlight)


@dataclass(frozen=True, slots=True)
class OpenedRun:
    """A request's run once it is open: its first event read (`RunStarted`, or the `RunFailed`
    of a run refused before it began), so the response's headers can name the run."""

    stream: EventStream
    events: AsyncGenerator[Event, None]
    first: Event

    @property
    def run_id(self) -> str | None:
        first = self.first
        if isinstance(first, RunStarted):
            return first.run_id
        return first.result.run_id if isinstance(first, RunFinished | RunFailed) else None

    @property
    def is_resumption(self) -> bool:
        first = self.first
        return isinstance(first, RunStarted) and first.resumed_from is not None

    def headers(self, request_id: str) -> dict[str, str]:
        run_id = self.run_id
        return {"X-Request-ID": request_id} | ({} if run_id is None else {"X-Run-Id": run_id})

    async def all_events(self) -> AsyncGenerator[Event, None]:
        """Every event of the run, the first one included; closing this closes the stream."""
        async with aclosing(self.events) as events:
            yield self.first
            async for event in events:
                yield event


async def open_turn(
    runs: RunSettings,
    request: Request,
    turn: Turn,
    executor: ActorExecutor | None = None,
) -> OpenedRun:
    """Start the turn's run (a new message under the request's `Idempotency-Key`, if it sent
    one; or the resumption of a paused run) and open it.

    Args:
        executor: The request's executor, when the route already asked `runs` for it.

    Raises:
        RequestRejected: a session or a key on a storeless server (422), or a refusal of
            `REFUSALS`. Nothing ran, nothing is billed.
    """
    executor = executor or runs.executor_factory()
    if isinstance(turn, NewMessage):
        turn = replace(turn, idempotency_key=request.headers.get(IDEMPOTENCY_HEADER))
        _check_storeless(executor, turn)
    deps = await request_deps(request)
    runs.in_flight.enter()
    try:
        stream = _start(executor, turn, deps)
    except InvalidDecisionError as invalid:
        runs.in_flight.leave()
        raise RequestRejected(422, str(invalid)) from None
    opened = await _open_run(stream, runs)
    first = opened.first
    if isinstance(first, RunFailed) and (refusal := REFUSALS.get(first.error.type)):
        await stream.aclose()
        runs.in_flight.leave()
        has_key = isinstance(turn, NewMessage) and turn.idempotency_key is not None
        if refusal.is_about_key and has_key:
            # Named by its header: the client knows the key by the header it sent.
            message = f"{IDEMPOTENCY_HEADER}: {first.error.message}"
            raise RequestRejected(refusal.status_code, message, param=IDEMPOTENCY_HEADER)
        raise RequestRejected(
            refusal.status_code,
            first.error.message,
            code=refusal.code,
            headers=_retry_after(first.result),
        )
    return opened


def _retry_after(result: ExecutionResult) -> dict[str, str]:
    """`Retry-After` at the reset of the spend limit's window that refused the run, if one did."""
    resets = [left.resets_at for left in result.spend_left if left.refused and left.resets_at]
    if not resets:
        return {}
    seconds = (max(resets) - datetime.now(UTC)).total_seconds()
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def _start(executor: ActorExecutor, turn: Turn, deps: object) -> EventStream:
    """The one call into the executor: the run of TURN, as the caller the server authenticated,
    with the request's deps, as typed events."""
    return executor.execute_events(replace(turn, caller=current_caller()), deps=deps)


def resumption(run_id: str, decisions: Sequence[ApprovalDecision | dict[str, Any]]) -> Resumption:
    """The resumption of the paused run `run_id` with a person's DECISIONS.

    Raises:
        RequestRejected: 422 naming a decision that is not one.
    """
    try:
        return Resumption(run_id, decisions)
    except InvalidDecisionError as invalid:
        raise RequestRejected(422, str(invalid)) from None


def _check_storeless(executor: ActorExecutor, turn: NewMessage) -> None:
    if executor.store is not None:
        return
    if turn.session_id is not None:
        raise RequestRejected(
            422, "session_id: this server keeps no sessions (serve it with --store URL)"
        )
    if turn.idempotency_key is not None:
        raise RequestRejected(
            422,
            f"{IDEMPOTENCY_HEADER}: this server keeps no idempotency keys "
            "(serve it with --store URL)",
            param=IDEMPOTENCY_HEADER,
        )


async def _open_run(stream: EventStream, runs: RunSettings) -> OpenedRun:
    """Start the run and read its first event. Whatever interrupts that (a server shutting
    down) stops the run, settles it and bills it before it propagates."""
    events = aiter(stream)
    try:
        first = await anext(events)
    except BaseException:
        async with billed_run(stream, runs):
            raise
    return OpenedRun(stream, events, first)


@asynccontextmanager
async def billed_run(stream: EventStream, runs: RunSettings) -> AsyncIterator[EventStream]:
    """Own an opened run: on leaving, stop it if it is still going, wait until its usage is
    settled, and call `on_usage` with the final result, once."""
    try:
        yield stream
    finally:
        try:
            # Shielded: when the client hangs up, the response's task group is cancelled, and
            # the run must still be stopped and its usage settled before it is reported.
            with anyio.CancelScope(shield=True):
                await stream.aclose()
            result = stream.result or _NOTHING_SPENT
            if runs.on_usage is not None and not result.replayed:  # billed as its first run
                runs.on_usage(result)
        finally:
            runs.in_flight.leave()


def shutdown_event(result: ExecutionResult | None) -> RunFailed:
    """The failure a client is told when the server shut down during its run."""
    spent = (result or _NOTHING_SPENT).model_copy(update={"error": _SHUTDOWN})
    return RunFailed(error=_SHUTDOWN, result=spent)


class RunEncoder(Protocol):
    """A route's format: the frames it opens its stream with, and those each event becomes
    (often none). The stream ends after the frames of `RunFinished`, `RunPaused` or
    `RunFailed`."""

    def start(self) -> list[ServerSentEvent]: ...

    def of(self, event: Event) -> list[ServerSentEvent]: ...


class RunStreamResponse(EventSourceResponse):
    """An SSE response that owns its run: the run lives as long as the response, however the
    response ends (sse-starlette cancels the frames when the client disconnects)."""

    def __init__(
        self,
        opened: OpenedRun,
        encoder: RunEncoder,
        runs: RunSettings,
        *,
        headers: dict[str, str],
    ) -> None:
        super().__init__(
            self._frames(),
            sep=SSE_LINE_SEPARATOR,
            send_timeout=runs.send_timeout_s,
            headers=headers,
        )
        self._opened = opened
        self._encoder = encoder
        self._runs = runs
        self._request_id = headers["X-Request-ID"]
        self._has_ended = False
        self._has_started = False

    async def _frames(self) -> AsyncIterator[ServerSentEvent]:
        for frame in self._encoder.start():
            yield frame
        async with aclosing(self._opened.all_events()) as events:
            while True:
                event = await anext(events)
                is_last = isinstance(event, RunFinished | RunPaused | RunFailed)
                self._has_ended = is_last
                for frame in self._encoder.of(event):
                    yield frame
                if is_last:
                    # A failed run's stream re-raises its exception after `RunFailed`; the
                    # failure is already told, so stop at the last event.
                    return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def noting_start(message: Message) -> None:
            self._has_started = self._has_started or message["type"] == "http.response.start"
            await send(message)

        async with billed_run(self._opened.stream, self._runs) as stream:
            try:
                await super().__call__(scope, receive, noting_start)
            except SendTimeoutError:
                # The run is stopped and billed by now; the server closes the connection.
                logger.warning(
                    "request %s: the client read nothing for %s s; dropped",
                    self._request_id,
                    self.send_timeout,
                )
            except anyio.get_cancelled_exc_class():
                # The server cancels what is still running when its grace period ends: the run
                # is stopped and the client told so before the connection closes. The response
                # is then complete, which is all the cancellation asked for.
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                    # (Cancelled before sse-starlette began the response, there is nothing to
                    # end: the connection closes.)
                    if self._has_started and not self._has_ended:
                        await self._say_shut_down(send, stream.result)

    async def _say_shut_down(self, send: Send, result: ExecutionResult | None) -> None:
        frames = self._encoder.of(shutdown_event(result))
        body = b"".join(frame.encode() for frame in frames)
        logger.warning("request %s: the server shut down during its run", self._request_id)
        with anyio.move_on_after(self._runs.send_timeout_s):
            await send({"type": "http.response.body", "body": body, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
