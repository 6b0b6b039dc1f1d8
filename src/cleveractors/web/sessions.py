"""The stored-session routes: `GET /sessions/{id}` (its turns) and `DELETE /sessions/{id}`.

A turn is shown whole, however many run segments made it: a turn that paused for a person and
was resumed bills every segment's calls, and each gated call shows what became of it (approved,
rejected with its reason, ...). A turn that still waits for a person is the session's last,
with its pending calls, so a page reloaded meanwhile can ask for the decisions again.

A session exists from the moment its first run starts: until a run answers (or pauses) in it,
reading it shows no turns (200, as after a first run that failed). A session belongs to the caller
who started it. Another caller's session does not exist for anyone else: reading or deleting it
answers 404, exactly as for an id nobody used, so a caller cannot even learn that it exists. A
server without a store keeps no sessions: 404 too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from decimal import Decimal
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ConfigDict

from cleveractors.approvals import ApprovalRecord, PendingApproval, RecordedDecision
from cleveractors.executor import ActorExecutor
from cleveractors.result import RunText
from cleveractors.store import LedgerRow, StoredTurn, UsageReport

__all__ = [
    "CallerOf",
    "SessionMessage",
    "SessionTurn",
    "SessionUsage",
    "SessionView",
    "add_session_routes",
]

CallerOf = Callable[[Request], Awaitable[str | None]]
"""Whose request this is: the identity sessions are scoped to (None without authentication)."""


class SessionToolCall(BaseModel):
    """A tool call the assistant made in a turn."""

    model_config = ConfigDict(frozen=True)

    id: str | None
    name: str
    arguments: dict[str, Any]


class SessionMessage(BaseModel):
    """One message of a stored turn, as a chat page renders it."""

    model_config = ConfigDict(frozen=True)

    role: Literal["user", "assistant", "tool"]
    content: str
    tool_calls: list[SessionToolCall] = []
    tool_call_id: str | None = None
    """For a tool result: the call it answers."""
    name: str | None = None
    """For a tool result: the tool's name."""
    status: Literal["success", "error"] | None = None
    """For a tool result: whether the tool answered or failed (the model read its error)."""
    decision: RecordedDecision | None = None
    """For the result of a call that waited for a person: what became of it (a declined call's
    result is an error the model read, not a failure of the tool)."""
    reason: str | None = None
    """For a decided call: the reason given with the decision, if any."""


class SessionUsage(BaseModel):
    """What a turn's runs billed, from the ledger: every segment's calls, summed."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    estimated: bool
    llm_calls: int
    cost_usd: Decimal | None
    """None unless every call was priced, as on the run's result."""


class SessionTurn(BaseModel):
    """One whole turn: the user's message, tool calls and results, the answer."""

    model_config = ConfigDict(frozen=True)

    position: int
    run_id: str
    """The turn's last run segment: the one that answered, or, while the turn waits, the one
    that paused (decide at `POST /runs/{run_id}/decisions`)."""
    segments: list[str]
    """Every run segment that made the turn, oldest first (one unless it paused)."""
    status: Literal["answered", "paused"]
    created_at: str
    messages: list[SessionMessage]
    text: str
    """The run's text as the user saw it live: every round's text, rounds set apart."""
    usage: SessionUsage | None
    """What the turn's segments billed together; None if the ledger holds none of their
    calls."""
    pending_approvals: list[PendingApproval] = []
    """The calls a paused turn waits on, as `run_paused` gave them."""


class SessionView(BaseModel):
    """The body of `GET /sessions/{id}`."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    turns: list[SessionTurn]


def add_session_routes(
    router: APIRouter, executor_factory: Callable[[], ActorExecutor], caller_of: CallerOf
) -> None:
    """Add `GET` and `DELETE /sessions/{session_id}` to `router`."""

    @router.get("/sessions/{session_id}", response_model=SessionView)
    async def read_session(session_id: str, request: Request) -> Response:
        """The session's turns, oldest first, a turn that waits for a person last (none
        before its first answer or pause); 404 if there is no such session of the caller's."""
        caller = await caller_of(request)
        store = executor_factory().store
        if store is None:
            return _not_found(session_id)
        await store.open()
        stored = await store.session_turns(session_id, caller=caller)
        if stored is None:
            return _not_found(session_id)
        bill = await store.usage(session_id=session_id)
        decided = await store.approvals(session_id=session_id)
        turns = [_turn(turn, bill.rows, decided) for turn in stored]
        view = SessionView(session_id=session_id, turns=turns)
        return JSONResponse(view.model_dump(mode="json"))

    @router.delete("/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str, request: Request) -> Response:
        """Remove the session and its turns (the ledger keeps its rows); 404 if not the
        caller's."""
        caller = await caller_of(request)
        store = executor_factory().store
        if store is None:
            return _not_found(session_id)
        await store.open()
        if not await store.delete_session(session_id, caller=caller):
            return _not_found(session_id)
        return Response(status_code=204)


def _not_found(session_id: str) -> JSONResponse:
    return JSONResponse({"detail": f"no session {session_id!r}"}, status_code=404)


def _turn(
    turn: StoredTurn, ledger: Iterable[LedgerRow], decided: Iterable[ApprovalRecord]
) -> SessionTurn:
    """`turn` as shown: the ledger rows and the decisions of every segment that made it."""
    decisions = {record.call_id: record for record in decided if record.run_id in turn.segments}
    return SessionTurn(
        position=turn.position,
        run_id=turn.run_id,
        segments=list(turn.segments),
        status="paused" if turn.pending else "answered",
        created_at=turn.created_at.isoformat(),
        messages=[_message(message, decisions) for message in turn.messages],
        text=_run_text(turn.messages),
        usage=_usage(tuple(row for row in ledger if row.run_id in turn.segments)),
        pending_approvals=list(turn.pending),
    )


def _run_text(messages: Iterable[BaseMessage]) -> str:
    """The text the run streamed: its replies' texts, one round each, by the rule of
    `cleveractors.result.RunText`."""
    text = RunText()
    replies = (message for message in messages if isinstance(message, AIMessage))
    for round_number, reply in enumerate(replies, start=1):
        text.add(round_number, reply.text)
    return text.text


def _usage(rows: tuple[LedgerRow, ...]) -> SessionUsage | None:
    if not rows:
        return None
    report = UsageReport(rows=rows)
    return SessionUsage(
        prompt_tokens=report.prompt_tokens,
        completion_tokens=report.completion_tokens,
        total_tokens=report.total_tokens,
        estimated=report.estimated,
        llm_calls=len(rows),
        cost_usd=report.cost_usd,
    )


def _message(message: BaseMessage, decisions: dict[str, ApprovalRecord]) -> SessionMessage:
    if isinstance(message, HumanMessage):
        return SessionMessage(role="user", content=message.text)
    if isinstance(message, ToolMessage):
        decided = decisions.get(message.tool_call_id)
        return SessionMessage(
            role="tool",
            content=message.text,
            tool_call_id=message.tool_call_id,
            name=message.name,
            status=message.status,
            decision=None if decided is None else decided.decision,
            reason=None if decided is None else decided.reason,
        )
    # A turn holds nothing else but the assistant's replies (with their tool calls).
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return SessionMessage(
        role="assistant",
        content=message.text,
        tool_calls=[
            SessionToolCall(id=call["id"], name=call["name"], arguments=call["args"])
            for call in calls
        ],
    )
