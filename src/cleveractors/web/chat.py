"""`POST /chat` and `POST /runs/{run_id}/decisions`: a run's typed events as SSE, one message
per event named by its `kind` (`cleveractors.web.sse`). `/chat` builds a `NewMessage`, the
decisions route a `Resumption`; both are opened and owned by `cleveractors.web.turns`."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sse_starlette import EventSourceResponse, ServerSentEvent

from cleveractors.approvals import ApprovalDecision
from cleveractors.events import Event, RunFailed
from cleveractors.turns import NewMessage
from cleveractors.web.requests import (
    RequestPolicy,
    RequestRejected,
    as_provider_history,
    check_history,
    new_request_id,
    read_request,
)
from cleveractors.web.security import public_error
from cleveractors.web.sse import event_frame
from cleveractors.web.turns import OpenedRun, RunSettings, RunStreamResponse, open_turn, resumption

__all__ = ["ChatRequest", "ChatTurn", "DecisionsRequest", "TypedEvents", "add_chat_routes"]


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


class TypedEvents:
    """`/chat`'s format: each event as itself, a failure with the generic error text."""

    def __init__(self, request_id: str) -> None:
        self._request_id = request_id

    def start(self) -> list[ServerSentEvent]:
        return []

    def of(self, event: Event) -> list[ServerSentEvent]:
        if isinstance(event, RunFailed):
            # The upstream error text is logged instead (it may quote keys or hosts).
            error = public_error(event.error, self._request_id)
            result = event.result.model_copy(update={"error": error})
            event = event.model_copy(update={"error": error, "result": result})
        return [event_frame(event)]


def add_chat_routes(router: APIRouter, runs: RunSettings, policy: RequestPolicy) -> None:
    """`POST /chat` and `POST /runs/{run_id}/decisions`."""

    @router.post("/chat", response_class=EventSourceResponse)
    async def chat(request: Request) -> Response:
        """Run a message; stream the run's typed events as SSE (event name = kind)."""
        try:
            body = await read_request(request, ChatRequest, policy)
            check_history(body.message, [turn.content for turn in body.history], policy)
            history = as_provider_history([turn.model_dump() for turn in body.history])
            turn = NewMessage(body.message, history, session_id=body.session_id)
            opened = await open_turn(runs, request, turn)
        except RequestRejected as rejected:
            return rejected.as_detail()
        return _typed_events(opened, runs)

    @router.post("/runs/{run_id}/decisions", response_class=EventSourceResponse)
    async def decide(run_id: str, request: Request) -> Response:
        """Resume the caller's paused run with a person's decisions; stream the new segment's
        typed events as SSE, as `/chat` does (event name = kind)."""
        try:
            body = await read_request(request, DecisionsRequest, policy)
            opened = await open_turn(runs, request, resumption(run_id, body.decisions))
        except RequestRejected as rejected:
            return rejected.as_detail()
        return _typed_events(opened, runs)


def _typed_events(opened: OpenedRun, runs: RunSettings) -> Response:
    request_id = new_request_id()
    return RunStreamResponse(
        opened, TypedEvents(request_id), runs, headers=opened.headers(request_id)
    )
