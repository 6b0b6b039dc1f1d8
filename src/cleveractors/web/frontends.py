"""The chat frontends' own protocols, beside `/chat` and the OpenAI endpoint: what their routes
share.

- `POST /ai-sdk`: the Vercel AI SDK's UI message stream (`cleveractors.web.ai_sdk`), which
  `useChat` and its framework-free `Chat` speak.
- `POST /ag-ui`: AG-UI (`cleveractors.web.ag_ui`), which CopilotKit and the other AG-UI
  frontends speak; it needs the `ag-ui` extra, and answers 501 naming it when it is missing.

Both are one route (`add_frontend_route`) given a `FrontendProtocol`: how its body is read into
a turn, a new message (`NewMessage`) or the decisions of a person on a paused run's gated calls
(`Resumption`), and how the run's events are encoded. Each keeps the guarantees of every route
that runs the actor (`cleveractors.web.turns`): the caller checked, one run id (`X-Run-Id`),
`on_usage` once per run, a client that hangs up stops the run and is billed.

A resumption names the paused run by the id the server gave it (in the approval id of an AI SDK
`tool-approval-request` part, in an AG-UI interrupt's id); whether that run is paused, is the
caller's, and which calls it waits for is decided by the executor on its own records, never on
what the client sends back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from cleveractors.turns import NewMessage, Resumption, Turn
from cleveractors.web.requests import (
    RequestPolicy,
    RequestRejected,
    check_history,
    new_request_id,
    read_request,
)
from cleveractors.web.turns import (
    OpenedRun,
    RunEncoder,
    RunSettings,
    RunStreamResponse,
    open_turn,
    resumption,
)

__all__ = [
    "FrontendProtocol",
    "OpenText",
    "add_frontend_route",
    "add_missing_extra_route",
    "approval_id",
    "new_message",
    "one_paused_run",
    "paused_call_of",
]

_APPROVAL_ID_SEPARATOR = ":"

Body = TypeVar("Body", bound=BaseModel)


def approval_id(run_id: str, call_id: str) -> str:
    """The id a frontend answers a gated call by: the paused run's id and the call's."""
    return f"{run_id}{_APPROVAL_ID_SEPARATOR}{call_id}"


def paused_call_of(answered_id: str, where: str) -> tuple[str, str]:
    """The (run id, call id) an approval id names.

    Raises:
        RequestRejected: 422 naming WHERE, for an id this server did not make.
    """
    run_id, separator, call_id = answered_id.partition(_APPROVAL_ID_SEPARATOR)
    if not (separator and run_id and call_id):
        raise RequestRejected(
            422, f"{where}: {answered_id!r} is not an approval this server asked for"
        )
    return run_id, call_id


def one_paused_run(answers: list[tuple[str, dict[str, Any]]], where: str) -> Resumption:
    """The resumption of the one run that (run id, decision) ANSWERS all name.

    Raises:
        RequestRejected: 422 when they name two runs.
    """
    run_ids = sorted({run_id for run_id, _ in answers})
    if len(run_ids) != 1:
        raise RequestRejected(422, f"{where}: the answers name {len(run_ids)} paused runs, not one")
    return resumption(run_ids[0], [decision for _, decision in answers])


def new_message(
    text: str, earlier: Iterable[tuple[str, str | None]], *, session_id: str | None, where: str
) -> NewMessage:
    """The new message a frontend's conversation asks for: its last message, the user's `text`
    (at `where`), in the server's session `session_id` (which holds the history) or, without
    one, after the `earlier` (role, text) messages that have text.

    Raises:
        RequestRejected: 422 when the user's message has no text.
    """
    if not text.strip():
        raise RequestRejected(422, f"{where}: the last message (the user's) has no text")
    if session_id is not None:
        return NewMessage(text, session_id=session_id)
    history: list[dict[str, object]] = [
        {"role": role, "content": said} for role, said in earlier if said
    ]
    return NewMessage(text, history)


class OpenText:
    """The text a frontend's stream has open (a text part, a text message), by the id it gave
    it: `{run_id}-text-{n}`, counted over the run."""

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self._opened = 0
        self.id: str | None = None

    def open(self) -> str | None:
        """Open a text when none is: its new id; None when one is open already."""
        if self.id is not None:
            return None
        self._opened += 1
        self.id = f"{self._run_id}-text-{self._opened}"
        return self.id

    def close(self) -> str | None:
        """Close the open text: its id; None when none was open."""
        closed, self.id = self.id, None
        return closed


@dataclass(frozen=True, slots=True)
class FrontendProtocol(Generic[Body]):
    """What sets one frontend's route apart from another's."""

    path: str
    summary: str
    """What the route does, as its API docs show it."""
    body: type[Body]
    read_turn: Callable[[Body, bool], Turn]
    """`(body, keeps_sessions) -> turn`; raises `RequestRejected` naming what it refuses."""
    encoder: Callable[[Body, Request, OpenedRun, str], RunEncoder]
    """`(body, request, opened run, request id) -> the run's encoder`."""
    headers: Mapping[str, str]
    """The protocol's own response headers, beside the run's."""


def add_frontend_route(
    router: APIRouter, protocol: FrontendProtocol[Body], runs: RunSettings, policy: RequestPolicy
) -> None:
    """`POST <protocol.path>`: a turn in the protocol's body, the run in its events."""

    async def frontend_route(request: Request) -> Response:
        try:
            body = await read_request(request, protocol.body, policy)
            executor = runs.executor_factory()  # once per request, as the router promises
            turn = protocol.read_turn(body, executor.store is not None)
            if isinstance(turn, NewMessage):
                earlier = [str(m["content"]) for m in turn.history or () if isinstance(m, dict)]
                check_history(turn.message, earlier, policy, where="messages")
            opened = await open_turn(runs, request, turn, executor)
        except RequestRejected as rejected:
            return rejected.as_detail()
        request_id = new_request_id()
        encoder = protocol.encoder(body, request, opened, request_id)
        headers = opened.headers(request_id) | dict(protocol.headers)
        return RunStreamResponse(opened, encoder, runs, headers=headers)

    router.add_api_route(
        protocol.path,
        frontend_route,
        methods=["POST"],
        response_class=EventSourceResponse,
        summary=protocol.summary,
    )


def add_missing_extra_route(
    router: APIRouter, path: str, *, protocol: str, extra: str, module: str
) -> None:
    """`POST <path>`: 501 naming the extra PROTOCOL needs and this server lacks."""

    async def missing_extra() -> Response:
        message = (
            f"{protocol} needs the {extra} extra ({module} is missing): "
            f"pip install 'cleveractors[{extra}]'"
        )
        return JSONResponse({"detail": message}, status_code=501)

    router.add_api_route(path, missing_extra, methods=["POST"], response_model=None)
