"""`create_chat_router()`: an actor behind FastAPI routes, streamed as Server-Sent Events.

    router = create_chat_router(lambda: executor, on_usage=bill)
    app.include_router(router)

- `POST /chat` takes `{"message": ..., "history": [{"role", "content"}]}` and streams the run's
  typed events, one SSE message per event named by its `kind`, ending with `run_finished` or
  `run_failed`, each carrying the `ExecutionResult` with the usage.
- `POST /v1/chat/completions` speaks OpenAI's Chat Completions format, streamed or not (see
  `cleveractors.web.openai_compat` for how a conversation maps to an actor turn). The actor's tool
  rounds run here, server-side; the client only sees text and usage.

Every request that starts a run owns it through `_billed_run()`: however the request ends (the
answer is complete, the model failed, the client hung up, the server shuts down), leaving that
context stops the run if it is still going, waits until its usage is settled, and then calls
`on_usage` with the final result, once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from typing import Literal, TypeVar

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from cleveractors.agents import EventStream
from cleveractors.events import RunFailed, RunFinished, TextDelta
from cleveractors.executor import ActorExecutor
from cleveractors.result import ErrorInfo, ExecutionResult, ResultCallback
from cleveractors.web.openai_compat import (
    AnswerText,
    ChatCompletionRequest,
    CompletionReply,
    Delta,
    ErrorResponse,
    error_response,
    run_error_response,
)
from cleveractors.web.sse import SSE_LINE_SEPARATOR, data_frame, event_frame

__all__ = ["ChatRequest", "ChatTurn", "create_chat_router"]

_Body = TypeVar("_Body", bound=BaseModel)

# When the client leaves before the run was ever started (it is started by the first read of
# its events), nothing was spent; the callback still hears of the request, once.
_NOTHING_SPENT = ExecutionResult(
    text="",
    error=ErrorInfo(type="CancelledError", message="the client left before the run started"),
    cancelled=True,
)


class ChatTurn(BaseModel):
    """One earlier turn of the conversation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # No "system": a web client must not add instructions beside the actor's own system prompt.
    role: Literal["user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """The body of `POST /chat`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: str
    history: list[ChatTurn] = Field(default_factory=list)

    @field_validator("message")
    @classmethod
    def _has_text(cls, message: str) -> str:
        if not message.strip():
            raise ValueError("must not be empty")
        return message


class _RequestRejected(Exception):
    """A request we refuse before running anything; each route renders it in its own format."""

    def __init__(self, status_code: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param


def create_chat_router(
    executor_factory: Callable[[], ActorExecutor],
    on_usage: ResultCallback | None = None,
    *,
    max_body_bytes: int = 1_000_000,
) -> APIRouter:
    """Routes that run an actor: `POST /chat` (typed events) and `POST /v1/chat/completions`.

    Args:
        executor_factory: Returns the executor for a request; called once per request, so it may
            return one shared executor or pick one per request.
        on_usage: Called exactly once per request that ran the actor, with its final
            `ExecutionResult`: also when the model failed, or the client disconnected mid-stream
            (then the run is cancelled and the result holds what was spent, `cancelled=True`).
            It runs on the event loop: hand slow work (a billing API call) to a queue or task.
        max_body_bytes: Larger request bodies are refused with 413, before they are parsed.

    Returns:
        An `APIRouter` to include in a FastAPI app. Bad requests get 422 with a message.
    """
    router = APIRouter()

    @router.post("/chat", response_class=EventSourceResponse)
    async def chat(request: Request) -> Response:
        """Run a message; stream the run's typed events as SSE (event name = kind)."""
        try:
            body = await _read_request(request, ChatRequest, max_body_bytes)
        except _RequestRejected as rejected:
            return JSONResponse({"detail": rejected.message}, status_code=rejected.status_code)
        history = [turn.model_dump() for turn in body.history]
        stream = executor_factory().execute_events(body.message, history)
        return _RunStreamResponse(_event_frames(stream), _billed_run(stream, on_usage))

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Response:
        """OpenAI-compatible chat completion, streamed (SSE chunks) or not."""
        try:
            body = await _read_request(request, ChatCompletionRequest, max_body_bytes)
        except _RequestRejected as rejected:
            problem = error_response(
                rejected.message, type="invalid_request_error", param=rejected.param
            )
            return _openai_error(problem, rejected.status_code)
        stream = executor_factory().execute_events(body.message, body.history)
        reply = CompletionReply(model=body.model)
        billed = _billed_run(stream, on_usage)
        if body.stream:
            frames = _completion_chunks(stream, reply, include_usage=body.include_usage)
            return _RunStreamResponse(frames, billed)
        async with billed:
            return await _completion(stream, reply)

    return router


# -- the run a request owns ----------------------------------------------------------------------


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
        if on_usage is not None:
            on_usage(stream.result or _NOTHING_SPENT)


class _RunStreamResponse(EventSourceResponse):
    """An SSE response that owns its run: the run lives as long as the response, however the
    response ends (sse-starlette cancels the frames when the client disconnects)."""

    def __init__(
        self,
        frames: AsyncIterator[ServerSentEvent],
        run: AbstractAsyncContextManager[EventStream],
    ) -> None:
        super().__init__(frames, sep=SSE_LINE_SEPARATOR)
        self._run = run

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self._run:
            await super().__call__(scope, receive, send)


# -- /chat ---------------------------------------------------------------------------------------


async def _event_frames(stream: EventStream) -> AsyncIterator[ServerSentEvent]:
    async with aclosing(aiter(stream)) as events:
        while True:
            event = await anext(events)
            yield event_frame(event)
            # The stream re-raises a failed run's exception after `RunFailed`; the failure is
            # already told, so stop at the last event.
            if isinstance(event, RunFinished | RunFailed):
                return


# -- /v1/chat/completions ------------------------------------------------------------------------


async def _completion(stream: EventStream, reply: CompletionReply) -> Response:
    answer = AnswerText()
    async with aclosing(aiter(stream)) as events:
        while not isinstance(event := await anext(events), RunFinished | RunFailed):
            if isinstance(event, TextDelta):
                answer.add(event)
    if isinstance(event, RunFailed):
        return _openai_error(run_error_response(event.error), 502)
    return JSONResponse(reply.completion(answer.text, event.result).model_dump(mode="json"))


async def _completion_chunks(
    stream: EventStream, reply: CompletionReply, *, include_usage: bool
) -> AsyncIterator[ServerSentEvent]:
    answer = AnswerText()
    yield data_frame(reply.chunk(Delta(role="assistant", content="")).model_dump_json())
    async with aclosing(aiter(stream)) as events:
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
                    yield data_frame(run_error_response(error).model_dump_json())
                    return
                case _:
                    pass


def _openai_error(problem: ErrorResponse, status_code: int) -> JSONResponse:
    return JSONResponse(problem.model_dump(mode="json"), status_code=status_code)


# -- reading a request ---------------------------------------------------------------------------


async def _read_request(request: Request, model: type[_Body], max_bytes: int) -> _Body:
    """The body, size-checked (413) then validated (422)."""
    body = await _read_body(request, max_bytes)
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
