"""The chat frontends' own protocols, beside `/chat` and the OpenAI endpoint: what their routes
share.

- `POST /ai-sdk`: the Vercel AI SDK's UI message stream (`cleveractors.web.ai_sdk`), which
  `useChat` and its framework-free `Chat` speak.
- `POST /ag-ui`: AG-UI (`cleveractors.web.ag_ui`), which CopilotKit and the other AG-UI
  frontends speak; it needs the `ag-ui` extra, and answers 501 naming it when it is missing.

A request becomes one of two turns: a new message (`NewMessage`), or the decisions of a person
on a paused run's gated calls (`Resumption`). Both are opened here, through the router's own
request helpers, so each route keeps the router's guarantees: the caller checked, one run id
(`X-Run-Id`), `on_usage` once per run, a client that hangs up stops the run and is billed.

A resumption names the paused run by the id the server gave it (in the approval id of an AI SDK
`tool-approval-request` part, in an AG-UI interrupt's id); whether that run is paused, is the
caller's, and which calls it waits for is decided by the executor on its own records
(`ActorExecutor.execute_events` of a `cleveractors.turns.Resumption`), never on what the
client sends back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from cleveractors import turns
from cleveractors.errors import InvalidDecisionError
from cleveractors.events import RunFailed
from cleveractors.web.router import (
    _check_history,
    _open_request_run,
    _open_run,
    _OpenedRun,
    _RequestPolicy,
    _RequestRejected,
    _RunSettings,
)
from cleveractors.web.security import current_caller

__all__ = ["NewMessage", "Resumption", "add_frontend_routes", "approval_id", "paused_call_of"]

_RESUME_REFUSALS = {
    "RunNotFoundError": 404,
    "ApprovalConflictError": 409,
    "ApprovalExpiredError": 409,
    "InvalidDecisionError": 422,
}
"""The HTTP status of each way the executor refuses a resumption, before anything runs."""
_APPROVAL_ID_SEPARATOR = ":"


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A user's message, with the earlier turns a client holds (none when a session does)."""

    message: str
    history: list[dict[str, object]] = field(default_factory=list)
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Resumption:
    """A person's decisions on the gated calls of the paused run `run_id`."""

    run_id: str
    decisions: list[dict[str, Any]]


Turn = NewMessage | Resumption


def approval_id(run_id: str, call_id: str) -> str:
    """The id a frontend answers a gated call by: the paused run's id and the call's."""
    return f"{run_id}{_APPROVAL_ID_SEPARATOR}{call_id}"


def paused_call_of(answered_id: str, where: str) -> tuple[str, str]:
    """The (run id, call id) an approval id names.

    Raises:
        _RequestRejected: 422 naming WHERE, for an id this server did not make.
    """
    run_id, separator, call_id = answered_id.partition(_APPROVAL_ID_SEPARATOR)
    if not (separator and run_id and call_id):
        raise _RequestRejected(
            422, f"{where}: {answered_id!r} is not an approval this server asked for"
        )
    return run_id, call_id


def one_paused_run(answers: list[tuple[str, dict[str, Any]]], where: str) -> Resumption:
    """The resumption of the one run that (run id, decision) ANSWERS all name.

    Raises:
        _RequestRejected: 422 when they name two runs.
    """
    run_ids = sorted({run_id for run_id, _ in answers})
    if len(run_ids) != 1:
        raise _RequestRejected(
            422, f"{where}: the answers name {len(run_ids)} paused runs, not one"
        )
    return Resumption(run_ids[0], [decision for _, decision in answers])


async def open_turn(
    runs: _RunSettings,
    request: Request,
    read_turn: Callable[[bool], Turn],
    policy: _RequestPolicy,
    *,
    where: str,
) -> _OpenedRun:
    """Read the request's turn (`read_turn(keeps_sessions)`: whether the executor has a store),
    then start its run (a new message, or the resumption of a paused run) and open it.

    Raises:
        _RequestRejected: a history over the limits (422); a paused run that is not there or not
            the caller's (404), already resumed or expired (409), decisions that do not fit it
            (422); a session on a storeless server (422). Nothing ran, nothing is billed.
    """
    executor = runs.executor_factory()  # once per request, as the router promises
    runs = replace(runs, executor_factory=lambda: executor)
    match read_turn(executor.store is not None):
        case NewMessage(message=message, history=history, session_id=session_id):
            earlier = [str(each["content"]) for each in history]
            _check_history(message, earlier, policy, where=where)
            return await _open_request_run(runs, request, message, history, session_id=session_id)
        case Resumption(run_id=run_id, decisions=decisions):
            return await _open_resumption(runs, run_id, decisions)


async def _open_resumption(
    runs: _RunSettings, run_id: str, decisions: list[dict[str, Any]]
) -> _OpenedRun:
    executor = runs.executor_factory()
    try:
        stream = executor.execute_events(turns.Resumption(run_id, decisions, current_caller()))
    except InvalidDecisionError as invalid:
        raise _RequestRejected(422, str(invalid)) from None
    opened = await _open_run(stream, runs.on_usage)
    first = opened.first
    if isinstance(first, RunFailed) and (status := _RESUME_REFUSALS.get(first.error.type)):
        await stream.aclose()
        raise _RequestRejected(status, first.error.message)
    return opened


def rejection_response(rejected: _RequestRejected) -> JSONResponse:
    """A refusal as `/chat` gives it: `{"detail": message}` with its status."""
    return JSONResponse(
        {"detail": rejected.message}, status_code=rejected.status_code, headers=rejected.headers
    )


def add_frontend_routes(router: APIRouter, runs: _RunSettings, policy: _RequestPolicy) -> None:
    """`POST /ai-sdk`, and `POST /ag-ui` (501 naming the `ag-ui` extra when it is missing)."""
    from cleveractors.web.ai_sdk import add_ai_sdk_route

    add_ai_sdk_route(router, runs, policy)
    try:
        from cleveractors.web.ag_ui import add_ag_ui_route
    except ModuleNotFoundError as missing:
        _add_missing_extra_route(router, str(missing.name))
    else:
        add_ag_ui_route(router, runs, policy)


def _add_missing_extra_route(router: APIRouter, module: str) -> None:
    @router.post("/ag-ui", response_model=None)
    async def ag_ui_missing() -> Response:
        """AG-UI needs the `ag-ui` extra, which this server lacks."""
        message = (
            f"AG-UI needs the ag-ui extra ({module} is missing): pip install 'cleveractors[ag-ui]'"
        )
        return JSONResponse({"detail": message}, status_code=501)


def headers_with(opened: _OpenedRun, request_id: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The run's headers (`X-Request-ID`, `X-Run-Id`) and a protocol's own."""
    return opened.headers(request_id) | dict(extra)
