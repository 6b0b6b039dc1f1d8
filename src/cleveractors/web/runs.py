"""`GET /runs/{run_id}`: how a run segment stands, and the tool calls it waits on, for its owner.

A paused run (`status: paused`) lists its `pending_approvals`: each call's id, tool name,
arguments, `digest` (give it back with the decision, `POST /runs/{id}/decisions`) and when it
expires; once every one of them expired before anyone decided, it is `expired`. With a store,
every run the caller started is shown: `running` (or its process died), `answered`, `failed`,
`cancelled`, `paused`, `expired`, and for a pause that ended otherwise, `resumed` (a later
segment carried its decisions out) or `superseded` (a new message on its session declined its
calls). Without a store the server keeps nothing of a run but its pause, in memory: a run that
never paused is 404 there. Another caller's run is 404, exactly as an id nobody used, so a
caller cannot even learn that it exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict

from cleveractors.approvals import PendingApproval
from cleveractors.errors import ApprovalConflictError, ApprovalExpiredError, RunNotFoundError
from cleveractors.executor import ActorExecutor
from cleveractors.web.sessions import CallerOf

__all__ = ["RunStatusName", "RunView", "add_run_routes"]

RunStatusName = Literal[
    "running", "answered", "failed", "cancelled", "paused", "expired", "resumed", "superseded"
]
"""How a run segment stands (the store's `SegmentStatus`; named here too, as the web extra
does not need the store extra)."""


class RunView(BaseModel):
    """The body of `GET /runs/{run_id}`."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    status: RunStatusName
    pending_approvals: list[PendingApproval] = []
    """The calls the run waits on, in the model's order (none unless `status` is `paused`)."""


def add_run_routes(
    router: APIRouter, executor_factory: Callable[[], ActorExecutor], caller_of: CallerOf
) -> None:
    """Add `GET /runs/{run_id}` to `router`."""

    @router.get("/runs/{run_id}", response_model=RunView)
    async def read_run(run_id: str, request: Request) -> Response:
        """The run's status and the calls it waits on; 404 if it is not the caller's."""
        caller = await caller_of(request)
        view = await _run_view(executor_factory(), run_id, caller)
        if view is None:
            return JSONResponse({"detail": f"no run {run_id!r}"}, status_code=404)
        return JSONResponse(view.model_dump(mode="json"))


async def _run_view(executor: ActorExecutor, run_id: str, caller: str | None) -> RunView | None:
    store = executor.store
    if store is not None:  # the ledger knows every run, paused or not
        status = await store.run_status(run_id, caller=caller)
        if status != "paused":
            return None if status is None else RunView(run_id=run_id, status=status)
    try:
        paused = await executor.paused_run(run_id, caller=caller)
    except ApprovalExpiredError:
        return RunView(run_id=run_id, status="expired")
    except (RunNotFoundError, ApprovalConflictError) as exc:
        # In memory, a pause is all there is: a conflict means its owner resumed it (as it does
        # when a stored pause is taken between the two reads).
        is_resumed = isinstance(exc, ApprovalConflictError)
        return RunView(run_id=run_id, status="resumed") if is_resumed else None
    return RunView(run_id=run_id, status="paused", pending_approvals=list(paused.pending))
