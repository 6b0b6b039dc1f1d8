"""`create_chat_router()`: an actor behind FastAPI routes, streamed as Server-Sent Events.

    router = create_chat_router(lambda: executor, on_usage=bill)
    app.include_router(router)

- `POST /chat` takes `{"message": ..., "history": [{"role", "content"}]}` and streams the run's
  typed events, one SSE message per event named by its `kind`, ending with `run_finished`,
  `run_paused` or `run_failed`, each carrying the `ExecutionResult` with the usage.
  With a store, `{"message": ..., "session_id": ...}` continues (or starts) a stored session
  instead: the server holds its history (a `history` beside it is a 422). A session another run
  holds ends the stream at once with `run_failed` (`error.type` "SessionBusyError"); another
  caller's session with `run_failed` "SessionNotFoundError". `GET` / `DELETE /sessions/{id}`
  read and remove the caller's sessions (`cleveractors.web.sessions`).
  A run that calls a tool needing a person's approval streams `tool_approval_requested` for
  each such call and ends with `run_paused` (its result lists `pending_approvals`).
- `POST /runs/{run_id}/decisions` takes `{"decisions": [...]}` (each an `ApprovalDecision`'s
  JSON) for the caller's paused run and streams the resumed segment like `/chat`: first
  `run_started` (its `resumed_from` the paused run's id), a `tool_call_decided` per decision.
  Refused before anything runs: 404 for a run that is not the caller's paused run (another
  caller's included, so its existence is never revealed), 409 for one already resumed (or a
  call that expired, or a run whose session another request holds), 422 for a decision that
  does not fit its call; nothing is billed, and `on_usage` does not hear of it.
  `GET /runs/{run_id}` shows a run's status and pending approvals (`cleveractors.web.runs`).
- `POST /v1/chat/completions` speaks OpenAI's Chat Completions format, streamed or not (see
  `cleveractors.web.openai_compat` for how a conversation maps to an actor turn). The actor's tool
  rounds run here, server-side; the client only sees text and usage. The format has no way to
  ask for an approval: a tool call that needs one is never run there; the model reads it as
  declined ("approval is not available on this endpoint").

Every request that starts a run owns it through `_billed_run()`: however the request ends (the
answer is complete, the model failed, the client hung up or stopped reading for `send_timeout_s`,
the server shuts down), leaving that context stops the run if it is still going, waits until its
usage is settled, and then calls `on_usage` with the final result, once.

With a store, a run request may carry an `Idempotency-Key` header: sent again (same caller,
same body) after the answer, it replays the first run's answer under the same `X-Run-Id`, and
`on_usage` does not hear of it again; while the first run goes on it is 409; with another body,
or on a server without a store, 422 (errors name the header). A failed run frees its key.

Before anything runs, a request is checked in this order: the caller (`authenticate`, 401), the
Content-Type (`application/json`, 415), the body size (413), its shape (422), and the history
limits (`max_history_turns`, `max_turn_chars`; 422 naming the limit).

A failed run tells the client its error type and a generic message with the request's id (also
in the `X-Request-ID` header); the upstream text, which may quote keys or hosts, goes to the
`cleveractors.web` logger with that id.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

import anyio
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from cleveractors.agents import EventStream
from cleveractors.approvals import ApprovalDecision
from cleveractors.events import Event, RunFailed, RunFinished, RunPaused, RunStarted, TextDelta
from cleveractors.executor import ActorExecutor
from cleveractors.result import ErrorInfo, ExecutionResult, ResultCallback
from cleveractors.turns import Resumption
from cleveractors.web.openai_compat import (
    AnswerText,
    ChatCompletionRequest,
    CompletionReply,
    Delta,
    ErrorResponse,
    Model,
    ModelList,
    error_response,
    run_error_response,
)
from cleveractors.web.runs import add_run_routes
from cleveractors.web.security import (
    Authenticate,
    current_caller,
    logger,
    public_error,
    set_current_caller,
)
from cleveractors.web.sessions import CallerOf, add_session_routes
from cleveractors.web.sse import SSE_LINE_SEPARATOR, data_frame, event_frame

__all__ = [
    "DEFAULT_MAX_HISTORY_TURNS",
    "DEFAULT_MAX_TURN_CHARS",
    "DEFAULT_SEND_TIMEOUT_S",
    "ChatRequest",
    "ChatTurn",
    "DecisionsRequest",
    "create_chat_router",
]

DEFAULT_MAX_HISTORY_TURNS = 200
DEFAULT_MAX_TURN_CHARS = 16_000
"""About 4k tokens of English: a long pasted text fits; a turn is not a file upload. Sized with
the event loop in mind: every turn is converted for the provider on it, at every model call."""
DEFAULT_SEND_TIMEOUT_S = 30.0
_JSON = "application/json"

_Body = TypeVar("_Body", bound=BaseModel)


# When the client leaves before the run was ever started (it is started by the first read of
# its events), nothing was spent; the callback still hears of the request, once.
_NOTHING_SPENT = ExecutionResult(
    text="",
    error=ErrorInfo(type="CancelledError", message="the client left before the run started"),
    cancelled=True,
)


class ChatTurn(BaseModel):
    """One earlier turn of a `/chat` conversation: `role` `user` or `assistant` (no `system`:
    the actor's own prompt governs) and its `content`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # No "system": a web client must not add instructions beside the actor's own system prompt.
    role: Literal["user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """The body of `POST /chat`: the user's `message`, and either the earlier turns (`history`)
    or a stored `session_id` to continue, never both (422)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: str
    history: list[ChatTurn] = Field(default_factory=list)
    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    """A stored session to continue (or start); then the server keeps the history."""

    @field_validator("message")
    @classmethod
    def _has_text(cls, message: str) -> str:
        if not message.strip():
            raise ValueError("must not be empty")
        return message

    @model_validator(mode="after")
    def _one_history(self) -> ChatRequest:
        if self.session_id is not None and self.history:
            raise ValueError("history cannot be sent with session_id: the session holds it")
        return self


class DecisionsRequest(BaseModel):
    """The body of `POST /runs/{run_id}/decisions`: a person's decisions on the paused run's
    calls. Who decided is the caller the server authenticated, never a name in the body."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decisions: list[ApprovalDecision]


class _RequestRejected(Exception):
    """A request we refuse before running anything; each route renders it in its own format."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param
        self.code = code
        self._headers = dict(headers or {})

    @property
    def headers(self) -> dict[str, str]:
        asks_for_key = {"WWW-Authenticate": "Bearer"} if self.status_code == 401 else {}
        return {**asks_for_key, **self._headers}

    def as_detail(self) -> JSONResponse:
        """The refusal as FastAPI words its own: `{"detail": message}`."""
        return JSONResponse(
            {"detail": self.message}, status_code=self.status_code, headers=self.headers
        )

    def as_openai_error(self) -> JSONResponse:
        """The refusal in OpenAI's error format, which the `openai` client raises with."""
        problem = error_response(
            self.message, type="invalid_request_error", param=self.param, code=self.code
        )
        return _openai_error(problem, self.status_code, self.headers)


@dataclass(frozen=True, slots=True)
class _RequestPolicy:
    """What the router checks before it runs anything."""

    authenticate: Authenticate | None
    max_body_bytes: int
    max_history_turns: int
    max_turn_chars: int


def create_chat_router(
    executor_factory: Callable[[], ActorExecutor],
    on_usage: ResultCallback | None = None,
    *,
    max_body_bytes: int = 1_000_000,
    authenticate: Authenticate | None = None,
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    max_history_turns: int = DEFAULT_MAX_HISTORY_TURNS,
    max_turn_chars: int = DEFAULT_MAX_TURN_CHARS,
) -> APIRouter:
    """Routes that run an actor: `POST /chat` (typed events), `POST /runs/{id}/decisions` (a
    paused run resumed, typed events), `GET /runs/{id}`, `POST /v1/chat/completions`,
    `GET /v1/models` (and `/v1/models/{id}`), which list the actor as the one model, and
    `GET` / `DELETE /sessions/{id}` for an executor with a store.

    Args:
        executor_factory: Returns the executor for a request; called once per request, so it may
            return one shared executor or pick one per request.
        on_usage: Called exactly once per request that ran the actor, with its final
            `ExecutionResult`: also when the model failed, or the client disconnected mid-stream
            (then the run is cancelled and the result holds what was spent, `cancelled=True`).
            A run that paused for an approval and its resumption are two requests, each heard
            of once, with its own segment's usage (no token in both).
            It runs on the event loop: hand slow work (a billing API call) to a queue or task.
            `cleveractors.web.current_caller()` tells whom to bill.
        max_body_bytes: Larger request bodies are refused with 413, before they are parsed.
        authenticate: `request -> identity or None`, a plain or a coroutine function, called
            before the body is read; None refuses the request with 401. Without it every caller
            is accepted. `api_key_authenticator(keys)` makes one for bearer API keys.
        send_timeout_s: A streaming client that takes no data for this long (its socket buffers
            are full) is dropped; its run is cancelled and billed.
        max_history_turns: More history turns (earlier messages) are refused with 422.
        max_turn_chars: A message or history turn with more characters is refused with 422.

    Returns:
        An `APIRouter` to include in a FastAPI app. Bad requests get 422 with a message; a body
        that is not `application/json` gets 415.
    """
    router = APIRouter()
    policy = _RequestPolicy(authenticate, max_body_bytes, max_history_turns, max_turn_chars)
    runs = _RunSettings(executor_factory, on_usage, send_timeout_s)
    caller_of = _caller_check(policy)
    _add_chat_route(router, runs, policy)
    _add_decisions_route(router, runs, policy)
    _add_completions_route(router, runs, policy)
    add_run_routes(router, executor_factory, caller_of)
    # `POST /ai-sdk` and `/ag-ui` build on this module's helpers, so they are imported here.
    from cleveractors.web.frontends import add_frontend_routes

    add_frontend_routes(router, runs, policy)
    add_session_routes(router, executor_factory, caller_of)
    _add_model_routes(router, executor_factory, policy)
    return router


@dataclass(frozen=True, slots=True)
class _RunSettings:
    """What the routes that run the actor share."""

    executor_factory: Callable[[], ActorExecutor]
    on_usage: ResultCallback | None
    send_timeout_s: float


def _add_chat_route(router: APIRouter, runs: _RunSettings, policy: _RequestPolicy) -> None:
    """`POST /chat`: the run's typed events as SSE."""

    @router.post("/chat", response_class=EventSourceResponse)
    async def chat(request: Request) -> Response:
        """Run a message; stream the run's typed events as SSE (event name = kind)."""
        try:
            body = await _read_request(request, ChatRequest, policy)
            _check_history(body.message, [turn.content for turn in body.history], policy)
            history = _as_provider_history([turn.model_dump() for turn in body.history])
            opened = await _open_request_run(
                runs, request, body.message, history, session_id=body.session_id
            )
        except _RequestRejected as rejected:
            return rejected.as_detail()
        return _event_stream_response(opened, runs)


def _add_decisions_route(router: APIRouter, runs: _RunSettings, policy: _RequestPolicy) -> None:
    """`POST /runs/{run_id}/decisions`: a paused run resumed, its new segment's events as SSE."""

    @router.post("/runs/{run_id}/decisions", response_class=EventSourceResponse)
    async def decide(run_id: str, request: Request) -> Response:
        """Resume the caller's paused run with a person's decisions; stream the new segment's
        typed events as SSE, as `/chat` does (event name = kind)."""
        try:
            body = await _read_request(request, DecisionsRequest, policy)
            opened = await _open_resumption(runs, run_id, body.decisions)
        except _RequestRejected as rejected:
            return rejected.as_detail()
        return _event_stream_response(opened, runs)


def _event_stream_response(opened: _OpenedRun, runs: _RunSettings) -> Response:
    """The run's typed events as SSE; the response owns the run (stopped and billed however
    the response ends)."""
    request_id = _request_id()
    return _RunStreamResponse(
        _event_frames(opened, request_id),
        _billed_run(opened.stream, runs.on_usage),
        send_timeout_s=runs.send_timeout_s,
        headers=opened.headers(request_id),
    )


def _add_completions_route(router: APIRouter, runs: _RunSettings, policy: _RequestPolicy) -> None:
    """`POST /v1/chat/completions`: OpenAI's Chat Completions format, streamed or not."""

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Response:
        """OpenAI-compatible chat completion, streamed (SSE chunks) or not."""
        try:
            body = await _read_request(request, ChatCompletionRequest, policy)
            earlier = [turn.text for turn in body.messages[:-1]]
            _check_history(body.message, earlier, policy, where="messages")
            if (unsupported := body.unsupported()) is not None:
                param, message = unsupported
                raise _RequestRejected(400, message, param=param)
            history = _as_provider_history(body.history)
            # OpenAI's format cannot ask a person: gated calls are declined, never run.
            opened = await _open_request_run(
                runs,
                request,
                body.message,
                history,
                max_output_tokens=body.max_output_tokens,
                can_pause=False,
            )
        except _RequestRejected as rejected:
            return rejected.as_openai_error()
        reply = CompletionReply(model=body.model)
        billed = _billed_run(opened.stream, runs.on_usage)
        request_id = _request_id()
        if body.stream:
            frames = _completion_chunks(
                opened, reply, include_usage=body.include_usage, request_id=request_id
            )
            return _RunStreamResponse(
                frames,
                billed,
                send_timeout_s=runs.send_timeout_s,
                headers=opened.headers(request_id),
            )
        async with billed:
            response = await _completion_unless_client_leaves(request, opened, reply, request_id)
        response.headers.update(opened.headers(request_id))
        return response


def _caller_check(policy: _RequestPolicy) -> CallerOf:
    """How the routes that run nothing learn whose request it is (401 for no one)."""

    async def caller_of(request: Request) -> str | None:
        """The authenticated caller, whose sessions alone the session routes show."""
        try:
            await _authenticate(request, policy.authenticate)
        except _RequestRejected as rejected:
            raise HTTPException(
                rejected.status_code, rejected.message, headers=rejected.headers
            ) from None
        return current_caller()

    return caller_of


def _add_model_routes(
    router: APIRouter, executor_factory: Callable[[], ActorExecutor], policy: _RequestPolicy
) -> None:
    """`GET /v1/models` and `/v1/models/{id}`: the served actor, as the one model."""

    created = int(time.time())

    @router.get("/v1/models", response_model=None)
    async def list_models(request: Request) -> Response:
        """The served actor, as the one model (chat frontends list models first)."""
        try:
            await _authenticate(request, policy.authenticate)
        except _RequestRejected as rejected:
            return rejected.as_openai_error()
        model = Model(id=executor_factory().name, created=created)
        return JSONResponse(ModelList(data=[model]).model_dump(mode="json"))

    @router.get("/v1/models/{model_id:path}", response_model=None)
    async def retrieve_model(request: Request, model_id: str) -> Response:
        """The served actor, if `model_id` names it; OpenAI's 404 otherwise."""
        try:
            await _authenticate(request, policy.authenticate)
        except _RequestRejected as rejected:
            return rejected.as_openai_error()
        name = executor_factory().name
        if model_id != name:
            problem = error_response(
                f"The model {model_id!r} does not exist; this server serves {name!r}",
                type="invalid_request_error",
                param="model",
                code="model_not_found",
            )
            return _openai_error(problem, 404)
        return JSONResponse(Model(id=name, created=created).model_dump(mode="json"))


def _request_id() -> str:
    return uuid.uuid4().hex


# -- the run a request owns ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _OpenedRun:
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

    def headers(self, request_id: str) -> dict[str, str]:
        run_id = self.run_id
        return {"X-Request-ID": request_id} | ({} if run_id is None else {"X-Run-Id": run_id})

    async def all_events(self) -> AsyncGenerator[Event, None]:
        """Every event of the run, the first one included; closing this closes the stream."""
        async with aclosing(self.events) as events:
            yield self.first
            async for event in events:
                yield event


_KEY_REFUSALS = {
    "IdempotencyKeyInProgressError": 409,
    "IdempotencyKeyMismatchError": 422,
    "ConfigurationError": 422,  # a key that is empty or too long
}
"""The HTTP status of each way a run is refused for its `Idempotency-Key`, before it begins."""
_IDEMPOTENCY_HEADER = "Idempotency-Key"


async def _open_request_run(
    runs: _RunSettings,
    request: Request,
    message: str,
    history: list[dict[str, object]],
    *,
    session_id: str | None = None,
    max_output_tokens: int | None = None,
    can_pause: bool = True,
) -> _OpenedRun:
    """Start the request's run (under its `Idempotency-Key`, if it sent one) and open it.

    Raises:
        _RequestRejected: a session or a key on a storeless server (422); the key's first run
            is still going (409) or served another request (422). Nothing ran, nothing is billed.
    """
    key = request.headers.get(_IDEMPOTENCY_HEADER)
    executor = runs.executor_factory()
    if executor.store is None:
        if session_id is not None:
            raise _RequestRejected(
                422, "session_id: this server keeps no sessions (serve it with --store URL)"
            )
        if key is not None:
            raise _RequestRejected(
                422,
                f"{_IDEMPOTENCY_HEADER}: this server keeps no idempotency keys "
                "(serve it with --store URL)",
                param=_IDEMPOTENCY_HEADER,
            )
    stream = executor.execute_events(
        message,
        history,
        session_id=session_id,
        caller=current_caller(),
        idempotency_key=key,
        max_output_tokens=max_output_tokens,
        can_pause=can_pause,
    )
    opened = await _open_run(stream, runs.on_usage)
    first = opened.first
    if (
        key is not None
        and isinstance(first, RunFailed)
        and (status := _KEY_REFUSALS.get(first.error.type)) is not None
    ):
        await stream.aclose()
        # Named by its header: the client knows the key by the header it sent.
        message = f"{_IDEMPOTENCY_HEADER}: {first.error.message}"
        raise _RequestRejected(status, message, param=_IDEMPOTENCY_HEADER)
    return opened


_DECISION_REFUSALS = {
    "RunNotFoundError": 404,
    "ApprovalConflictError": 409,
    "ApprovalExpiredError": 409,
    # Another request holds the paused run's session: a rival resumption of the same run, or a
    # new message that is declining its calls. Either way this decision cannot be taken.
    "SessionBusyError": 409,
    "InvalidDecisionError": 422,
}
"""The HTTP status of each way a resumption is refused, before anything of it runs."""


async def _open_resumption(
    runs: _RunSettings, run_id: str, decisions: list[ApprovalDecision]
) -> _OpenedRun:
    """Resume the caller's paused run `run_id` with `decisions` and open the new segment.

    Raises:
        _RequestRejected: not the caller's paused run (404), already resumed or being resumed,
            an expired call (409), a decision that does not fit its call (422). Nothing ran,
            nothing is billed.
    """
    stream = runs.executor_factory().execute_events(Resumption(run_id, decisions, current_caller()))
    opened = await _open_run(stream, runs.on_usage)
    first = opened.first
    if isinstance(first, RunFailed) and (status := _DECISION_REFUSALS.get(first.error.type)):
        await stream.aclose()
        raise _RequestRejected(status, first.error.message)
    return opened


async def _open_run(stream: EventStream, on_usage: ResultCallback | None) -> _OpenedRun:
    """Start the run and read its first event. Whatever interrupts that (a server shutting
    down) stops the run, settles it and bills it before it propagates."""
    events = aiter(stream)
    try:
        first = await anext(events)
    except BaseException:
        async with _billed_run(stream, on_usage):
            raise
    return _OpenedRun(stream, events, first)


@asynccontextmanager
async def _billed_run(
    stream: EventStream, on_usage: ResultCallback | None
) -> AsyncIterator[EventStream]:
    try:
        yield stream
    finally:
        # Shielded: when the client hangs up, the response's task group is cancelled, and the run
        # must still be stopped and its usage settled before it is reported.
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        result = stream.result or _NOTHING_SPENT
        if on_usage is not None and not result.replayed:  # a replay was billed as its first run
            on_usage(result)


class _RunStreamResponse(EventSourceResponse):
    """An SSE response that owns its run: the run lives as long as the response, however the
    response ends (sse-starlette cancels the frames when the client disconnects)."""

    def __init__(
        self,
        frames: AsyncIterator[ServerSentEvent],
        run: AbstractAsyncContextManager[EventStream],
        *,
        send_timeout_s: float,
        headers: dict[str, str],
    ) -> None:
        super().__init__(
            frames, sep=SSE_LINE_SEPARATOR, send_timeout=send_timeout_s, headers=headers
        )
        self._run = run
        self._request_id = headers["X-Request-ID"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with self._run:
                await super().__call__(scope, receive, send)
        except SendTimeoutError:
            # The run is stopped and billed by now; the server closes the connection.
            logger.warning(
                "request %s: the client read nothing for %s s; dropped",
                self._request_id,
                self.send_timeout,
            )


# -- /chat ---------------------------------------------------------------------------------------


async def _event_frames(opened: _OpenedRun, request_id: str) -> AsyncIterator[ServerSentEvent]:
    async with aclosing(opened.all_events()) as events:
        while True:
            event = await anext(events)
            if isinstance(event, RunFailed):
                yield event_frame(_public_failure(event, request_id))
                # The stream re-raises a failed run's exception after `RunFailed`; the failure is
                # already told, so stop at the last event.
                return
            yield event_frame(event)
            if isinstance(event, RunFinished | RunPaused):
                return


def _public_failure(event: RunFailed, request_id: str) -> RunFailed:
    """`RunFailed` with the upstream error text replaced (it is logged instead)."""
    error = public_error(event.error, request_id)
    result = event.result.model_copy(update={"error": error})
    return event.model_copy(update={"error": error, "result": result})


# -- /v1/chat/completions ------------------------------------------------------------------------


async def _completion_unless_client_leaves(
    request: Request, opened: _OpenedRun, reply: CompletionReply, request_id: str
) -> Response:
    """The completion; or, when the client hangs up first, the run is stopped (by cancelling
    its consumer) and an empty response is returned that nobody reads."""
    response: Response = Response(status_code=499)
    async with anyio.create_task_group() as group:

        async def stop_when_client_leaves() -> None:
            await _until_disconnected(request)
            group.cancel_scope.cancel()

        group.start_soon(stop_when_client_leaves)
        response = await _completion(opened, reply, request_id)
        group.cancel_scope.cancel()
    return response


async def _until_disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message is the disconnect (the server sends it
    # when the client closes the connection, or when the response is complete).
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _completion(opened: _OpenedRun, reply: CompletionReply, request_id: str) -> Response:
    answer = AnswerText()
    async with aclosing(opened.all_events()) as events:
        while not isinstance(event := await anext(events), RunFinished | RunFailed):
            if isinstance(event, TextDelta):
                answer.add(event)
    if isinstance(event, RunFailed):
        return _openai_error(run_error_response(public_error(event.error, request_id)), 502)
    return JSONResponse(reply.completion(answer.text, event.result).model_dump(mode="json"))


async def _completion_chunks(
    opened: _OpenedRun, reply: CompletionReply, *, include_usage: bool, request_id: str
) -> AsyncIterator[ServerSentEvent]:
    answer = AnswerText()
    yield data_frame(reply.chunk(Delta(role="assistant", content="")).model_dump_json())
    async with aclosing(opened.all_events()) as events:
        while True:
            match await anext(events):
                case TextDelta() as delta:
                    piece = Delta(content=answer.add(delta))
                    yield data_frame(reply.chunk(piece).model_dump_json())
                case RunFinished(result=result):
                    yield data_frame(reply.chunk(Delta(), is_last=True).model_dump_json())
                    if include_usage:
                        yield data_frame(reply.usage_chunk(result).model_dump_json())
                    yield data_frame("[DONE]")
                    return
                case RunFailed(error=error):
                    # Headers are sent: the failure goes in-band, as OpenAI does; no [DONE].
                    problem = run_error_response(public_error(error, request_id))
                    yield data_frame(problem.model_dump_json())
                    return
                case _:
                    pass


def _openai_error(
    problem: ErrorResponse, status_code: int, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(problem.model_dump(mode="json"), status_code=status_code, headers=headers)


# -- reading a request ---------------------------------------------------------------------------


async def _read_request(request: Request, model: type[_Body], policy: _RequestPolicy) -> _Body:
    """The body of an authenticated caller (401), JSON by its Content-Type (415), size-checked
    (413), then validated (422)."""
    await _authenticate(request, policy.authenticate)
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != _JSON:
        # A page on any site may POST text/plain without a CORS preflight; JSON needs one.
        raise _RequestRejected(415, f"the body must be {_JSON}, not {media_type or 'untyped'}")
    body = await _read_body(request, policy.max_body_bytes)
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise _invalid(exc) from None


async def _read_body(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    # A chunked body declares no length, and a declared one may lie: count what arrives.
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise _too_large(max_bytes)
    return bytes(body)


async def _authenticate(request: Request, authenticate: Authenticate | None) -> None:
    if authenticate is None:
        return
    try:
        identity = authenticate(request)
        if inspect.isawaitable(identity):
            identity = await identity
    except StarletteHTTPException as refused:
        # An `authenticate` may refuse in its own words (a 403 for a known caller who may not
        # use the actor): each route then says it in its own format.
        raise _RequestRejected(
            refused.status_code, str(refused.detail), headers=refused.headers
        ) from None
    if identity is None:
        message = "a valid API key is required (Authorization: Bearer <key>)"
        raise _RequestRejected(401, message, code="invalid_api_key")
    set_current_caller(identity)


def _check_history(
    message: str, earlier: Iterable[str], policy: _RequestPolicy, *, where: str = "history"
) -> None:
    """422 when the conversation is longer than `max_history_turns` or a turn longer than
    `max_turn_chars`: converting a long history for the provider runs on the event loop."""
    texts = list(earlier)
    if len(texts) > policy.max_history_turns:
        raise _RequestRejected(
            422,
            f"{where}: {len(texts)} earlier turns; at most {policy.max_history_turns} "
            "are accepted (max_history_turns)",
            param=where,
        )
    for name, text in [("message", message)] + [(f"{where}.{n}", t) for n, t in enumerate(texts)]:
        if len(text) > policy.max_turn_chars:
            raise _RequestRejected(
                422,
                f"{name}: {len(text)} characters; at most {policy.max_turn_chars} "
                "are accepted per turn (max_turn_chars)",
                param=name,
            )


def _as_provider_history(turns: list[dict[str, object]]) -> list[dict[str, object]]:
    """The history with each assistant turn's text as one text block: langchain-openai looks at
    a plain-string assistant content character by character (its audio-block check), which at
    200 turns of 32k characters blocked the event loop for 2.5 s; one block costs one look."""
    return [
        {**turn, "content": [{"type": "text", "text": turn["content"]}]}
        if turn["role"] == "assistant"
        else turn
        for turn in turns
    ]


def _too_large(max_bytes: int) -> _RequestRejected:
    return _RequestRejected(413, f"request body is larger than {max_bytes} bytes")


def _invalid(exc: ValidationError) -> _RequestRejected:
    problems: list[tuple[str, str]] = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        # Our own validators' messages read better without pydantic's "Value error, " prefix.
        cause = error.get("ctx", {}).get("error")
        problems.append((where, str(cause) if error["type"] == "value_error" else error["msg"]))
    message = "; ".join(f"{where or 'body'}: {problem}" for where, problem in problems)
    return _RequestRejected(422, message, param=problems[0][0] or None)
