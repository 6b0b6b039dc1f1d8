"""`POST /v1/chat/completions` and `GET /v1/models`: an actor in OpenAI's Chat Completions
format (`cleveractors.web.openai_compat` for how a conversation maps to an actor turn), streamed
or not. The turn is opened and owned by `cleveractors.web.turns`; refusals are in OpenAI's error
format."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import aclosing

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from sse_starlette import ServerSentEvent

from cleveractors.events import Event, RunFailed, RunFinished, TextDelta
from cleveractors.executor import ActorExecutor
from cleveractors.turns import NewMessage
from cleveractors.web.openai_compat import (
    AnswerText,
    ChatCompletionRequest,
    CompletionReply,
    Delta,
    Model,
    ModelList,
    error_response,
    output_json,
    run_error_response,
)
from cleveractors.web.requests import (
    RequestPolicy,
    RequestRejected,
    as_provider_history,
    authenticate_request,
    check_history,
    new_request_id,
    openai_error,
    read_request,
)
from cleveractors.web.security import public_error
from cleveractors.web.sse import data_frame
from cleveractors.web.turns import (
    FAILURE_STATUS,
    OpenedRun,
    RunSettings,
    RunStreamResponse,
    billed_run,
    open_turn,
)

__all__ = ["CompletionChunks", "add_completion_routes", "add_model_routes"]


def add_completion_routes(router: APIRouter, runs: RunSettings, policy: RequestPolicy) -> None:
    """`POST /v1/chat/completions`: OpenAI's Chat Completions format, streamed or not."""

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Response:
        """OpenAI-compatible chat completion, streamed (SSE chunks) or not."""
        try:
            body = await read_request(request, ChatCompletionRequest, policy)
            earlier = [turn.text for turn in body.messages[:-1]]
            check_history(body.message, earlier, policy, where="messages")
            if (unsupported := body.unsupported()) is not None:
                param, message = unsupported
                raise RequestRejected(400, message, param=param)
            # OpenAI's format cannot ask a person: gated calls are declined, never run.
            turn = NewMessage(
                body.message,
                as_provider_history(body.history),
                max_output_tokens=body.max_output_tokens,
                can_pause=False,
                output_schema=body.output_schema,
            )
            opened = await open_turn(runs, request, turn)
        except RequestRejected as rejected:
            return rejected.as_openai_error()
        reply = CompletionReply(model=body.model)
        request_id = new_request_id()
        is_typed = body.output_schema is not None
        if body.stream:
            chunks = CompletionChunks(
                reply, request_id, include_usage=body.include_usage, is_typed=is_typed
            )
            return RunStreamResponse(opened, chunks, runs, headers=opened.headers(request_id))
        async with billed_run(opened.stream, runs):
            response = await _completion_unless_client_leaves(
                request, opened, reply, request_id, is_typed=is_typed
            )
        response.headers.update(opened.headers(request_id))
        return response


class CompletionChunks:
    """The streamed format: a first chunk naming the role, one chunk per text delta, the last
    chunk (and the usage chunk when asked for) and `[DONE]`; a failure as an error in-band.
    A typed request (`is_typed`) gets its object as one content chunk, once it is valid."""

    def __init__(
        self,
        reply: CompletionReply,
        request_id: str,
        *,
        include_usage: bool,
        is_typed: bool = False,
    ) -> None:
        self._reply = reply
        self._request_id = request_id
        self._include_usage = include_usage
        self._is_typed = is_typed
        self._answer = AnswerText()

    def start(self) -> list[ServerSentEvent]:
        return [self._chunk(Delta(role="assistant", content=""))]

    def of(self, event: Event) -> list[ServerSentEvent]:
        match event:
            case TextDelta() as delta if not self._is_typed:
                return [self._chunk(Delta(content=self._answer.add(delta)))]
            case RunFinished(result=result):
                frames = [self._chunk(Delta(), is_last=True)]
                if self._is_typed:
                    frames.insert(0, self._chunk(Delta(content=output_json(result))))
                if self._include_usage:
                    frames.append(data_frame(self._reply.usage_chunk(result).model_dump_json()))
                return [*frames, data_frame("[DONE]")]
            case RunFailed(error=error):
                # Headers are sent: the failure goes in-band, as OpenAI does; no [DONE].
                problem = run_error_response(public_error(error, self._request_id))
                return [data_frame(problem.model_dump_json())]
            case _:
                return []

    def _chunk(self, delta: Delta, *, is_last: bool = False) -> ServerSentEvent:
        return data_frame(self._reply.chunk(delta, is_last=is_last).model_dump_json())


async def _completion_unless_client_leaves(
    request: Request, opened: OpenedRun, reply: CompletionReply, request_id: str, *, is_typed: bool
) -> Response:
    """The completion; or, when the client hangs up first, the run is stopped (by cancelling
    its consumer) and an empty response is returned that nobody reads."""
    response: Response = Response(status_code=499)
    async with anyio.create_task_group() as group:

        async def stop_when_client_leaves() -> None:
            await _until_disconnected(request)
            group.cancel_scope.cancel()

        group.start_soon(stop_when_client_leaves)
        response = await _completion(opened, reply, request_id, is_typed=is_typed)
        group.cancel_scope.cancel()
    return response


async def _until_disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message is the disconnect (the server sends it
    # when the client closes the connection, or when the response is complete).
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _completion(
    opened: OpenedRun, reply: CompletionReply, request_id: str, *, is_typed: bool
) -> Response:
    answer = AnswerText()
    async with aclosing(opened.all_events()) as events:
        while not isinstance(event := await anext(events), RunFinished | RunFailed):
            if isinstance(event, TextDelta):
                answer.add(event)
    if isinstance(event, RunFailed):
        status = FAILURE_STATUS.get(event.error.type, 502)
        return openai_error(run_error_response(public_error(event.error, request_id)), status)
    result = event.result
    content = output_json(result) if is_typed else answer.text
    return JSONResponse(reply.completion(content, result).model_dump(mode="json"))


def add_model_routes(
    router: APIRouter, executor_factory: Callable[[], ActorExecutor], policy: RequestPolicy
) -> None:
    """`GET /v1/models` and `/v1/models/{id}`: the served actor, as the one model."""

    created = int(time.time())

    @router.get("/v1/models", response_model=None)
    async def list_models(request: Request) -> Response:
        """The served actor, as the one model (chat frontends list models first)."""
        try:
            await authenticate_request(request, policy.authenticate)
        except RequestRejected as rejected:
            return rejected.as_openai_error()
        model = Model(id=executor_factory().name, created=created)
        return JSONResponse(ModelList(data=[model]).model_dump(mode="json"))

    @router.get("/v1/models/{model_id:path}", response_model=None)
    async def retrieve_model(request: Request, model_id: str) -> Response:
        """The served actor, if `model_id` names it; OpenAI's 404 otherwise."""
        try:
            await authenticate_request(request, policy.authenticate)
        except RequestRejected as rejected:
            return rejected.as_openai_error()
        name = executor_factory().name
        if model_id != name:
            problem = error_response(
                f"The model {model_id!r} does not exist; this server serves {name!r}",
                type="invalid_request_error",
                param="model",
                code="model_not_found",
            )
            return openai_error(problem, 404)
        return JSONResponse(Model(id=name, created=created).model_dump(mode="json"))
