"""Paused runs and the audit of decisions, in the store's database.

A pause is one `paused_runs` row (the state its resumption starts from) and one `approvals` row
per gated call. Whatever ends a pause changes its row's status from `paused` once, in the
transaction that records the decisions: of two workers resuming the same run (or a resumption
and a new message on its session), exactly one changes it, and the other is told so.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from langchain_core.messages import BaseMessage, messages_to_dict
from sqlalchemy import Row, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.approvals import (
    ApprovalRecord,
    CheckedDecisions,
    PausedRun,
    RecordedDecision,
    ToolAnswer,
)
from cleveractors.errors import ApprovalConflictError, RunNotFoundError
from cleveractors.store.records import SegmentStatus
from cleveractors.store.schema import approvals, paused_runs, runs, turns

__all__ = [
    "claim_pause",
    "find_pause",
    "keep_pause",
    "list_approvals",
    "pause_of_session",
    "run_segments",
    "segment_status",
    "supersede_pause",
]


async def keep_pause(connection: AsyncConnection, paused: PausedRun, caller: str) -> None:
    """Write a pause: its state, and a waiting `approvals` row per gated call."""
    await connection.execute(
        paused_runs.insert().values(
            run_id=paused.run_id,
            session_id=paused.session_id,
            caller=caller,
            status="paused",
            state=paused.to_json(),
            created_at=datetime.now(UTC),
        )
    )
    await connection.execute(
        approvals.insert(),
        [
            {
                "run_id": paused.run_id,
                "call_id": pending.call_id,
                "session_id": paused.session_id,
                "caller": caller,
                "name": pending.name,
                "arguments": json.dumps(pending.arguments),
                "digest": pending.digest,
                "requested_at": pending.requested_at,
                "expires_at": pending.expires_at,
            }
            for pending in paused.pending
        ],
    )


async def find_pause(connection: AsyncConnection, run_id: str, caller: str) -> PausedRun:
    """The pause of run `run_id`, for its own caller.

    Raises:
        RunNotFoundError: no paused run by that id for this caller (another's is not shown).
        ApprovalConflictError: it was resumed already, or answered by a new message.
    """
    row = (
        await connection.execute(
            select(paused_runs.c.status, paused_runs.c.state, paused_runs.c.resumed_in).where(
                paused_runs.c.run_id == run_id, paused_runs.c.caller == caller
            )
        )
    ).first()
    if row is None:
        raise RunNotFoundError(f"no paused run {run_id!r}", run_id=run_id)
    if row.status != "paused":
        raise ApprovalConflictError(_ended(run_id, row.status, row.resumed_in), run_id=run_id)
    return PausedRun.from_json(row.state)


async def segment_status(
    connection: AsyncConnection, run_id: str, caller: str
) -> SegmentStatus | None:
    """How run segment `run_id` of `caller` stands; None for no such run of theirs."""
    query = (
        select(runs.c.status, paused_runs.c.status.label("pause"))
        .select_from(runs.outerjoin(paused_runs, paused_runs.c.run_id == runs.c.run_id))
        .where(runs.c.run_id == run_id, runs.c.caller == caller)
    )
    row = (await connection.execute(query)).first()
    if row is None:
        return None
    status: SegmentStatus = "answered" if row.status == "ok" else row.status
    if row.pause is not None:  # the pause's own row says whether it still waits
        status = row.pause
    return status


async def pause_of_session(
    connection: AsyncConnection, session_id: str, caller: str
) -> PausedRun | None:
    """The session's paused run, if one waits (a session has at most one: it is held while a
    run goes, and a new message ends the pause)."""
    state = await connection.scalar(
        select(paused_runs.c.state).where(
            paused_runs.c.session_id == session_id,
            paused_runs.c.caller == caller,
            paused_runs.c.status == "paused",
        )
    )
    return None if state is None else PausedRun.from_json(state)


async def claim_pause(
    connection: AsyncConnection,
    paused: PausedRun,
    checked: CheckedDecisions,
    *,
    resumed_in: str,
    decided_by: str | None,
) -> None:
    """Take the pause for one resumption and record its decisions (and the expired calls).

    Raises:
        ApprovalConflictError: another resumption (or a new message) took it first.
    """
    await _end_pause(connection, paused.run_id, "resumed", resumed_in)
    now = datetime.now(UTC)
    for call_id, decision in checked.decided.items():
        await _record_decision(
            connection,
            paused.run_id,
            call_id,
            {
                "decision": decision.decision,
                "decided_by": decided_by,
                "decided_at": now,
                "edited_arguments": (
                    None if decision.arguments is None else json.dumps(decision.arguments)
                ),
                "reason": decision.reason,
                "output": decision.output,
                "resumed_in": resumed_in,
            },
        )
    for pending in checked.expired:
        await _record_decision(
            connection,
            paused.run_id,
            pending.call_id,
            {"decision": "expired", "decided_at": now, "resumed_in": resumed_in},
        )


async def supersede_pause(
    connection: AsyncConnection,
    paused: PausedRun,
    answers: dict[str, ToolAnswer],
    *,
    by_run: str,
    caller: str,
) -> list[BaseMessage]:
    """End a pause that a new message on its session answers: its waiting calls recorded as
    `superseded`, its turn appended to the session (every call answered, so the history stays
    valid for any provider). The caller holds the session. Returns the turn's messages.

    Raises:
        ApprovalConflictError: a resumption took the pause first.
    """
    await _end_pause(connection, paused.run_id, "superseded", by_run)
    now = datetime.now(UTC)
    for pending in paused.pending:
        await _record_decision(
            connection,
            paused.run_id,
            pending.call_id,
            {"decision": "superseded", "decided_by": caller, "decided_at": now},
        )
    messages = paused.turn_messages(answers)
    last = await connection.scalar(
        select(func.max(turns.c.position)).where(turns.c.session_id == paused.session_id)
    )
    await connection.execute(
        turns.insert().values(
            session_id=paused.session_id,
            position=(last or 0) + 1,
            run_id=paused.run_id,
            created_at=now,
            messages=json.dumps(messages_to_dict(messages)),
        )
    )
    return messages


async def list_approvals(
    connection: AsyncConnection,
    *,
    run_id: str | None,
    session_id: str | None,
    caller: str | None,
) -> list[ApprovalRecord]:
    """The decisions taken, oldest first, filtered by run, session and owner."""
    query = select(approvals).where(approvals.c.decision.is_not(None))
    if run_id is not None:
        query = query.where(approvals.c.run_id == run_id)
    if session_id is not None:
        query = query.where(approvals.c.session_id == session_id)
    if caller is not None:
        query = query.where(approvals.c.caller == caller)
    rows = await connection.execute(query.order_by(approvals.c.decided_at, approvals.c.call_id))
    return [_approval_record(row) for row in rows]


async def run_segments(connection: AsyncConnection, run_id: str) -> list[str]:
    """The segments of the run that `run_id` is one of, first to last: each paused segment,
    then the one that resumed it; `[run_id]` alone for a run that never paused."""
    chain = [run_id]
    earlier = select(paused_runs.c.run_id).where(paused_runs.c.resumed_in == chain[0])
    while (first := (await connection.execute(earlier)).scalar()) is not None:
        chain.insert(0, first)
        earlier = select(paused_runs.c.run_id).where(paused_runs.c.resumed_in == first)
    later = select(paused_runs.c.resumed_in).where(paused_runs.c.run_id == chain[-1])
    while (last := (await connection.execute(later)).scalar()) is not None:
        chain.append(last)
        later = select(paused_runs.c.resumed_in).where(paused_runs.c.run_id == last)
    return chain


async def _end_pause(
    connection: AsyncConnection, run_id: str, status: str, resumed_in: str
) -> None:
    changed = await connection.execute(
        update(paused_runs)
        .where(paused_runs.c.run_id == run_id, paused_runs.c.status == "paused")
        .values(status=status, resumed_in=resumed_in)
    )
    if changed.rowcount != 1:
        raise ApprovalConflictError(
            f"run {run_id!r} was resumed or answered by another request first", run_id=run_id
        )


async def _record_decision(
    connection: AsyncConnection, run_id: str, call_id: str, values: dict[str, Any]
) -> None:
    await connection.execute(
        update(approvals)
        .where(
            approvals.c.run_id == run_id,
            approvals.c.call_id == call_id,
            approvals.c.decision.is_(None),
        )
        .values(values)
    )


def _ended(run_id: str, status: str, resumed_in: str | None) -> str:
    if status == "superseded":
        return f"run {run_id!r} is over: a new message on its session declined its calls"
    return f"run {run_id!r} was already resumed (by run {resumed_in})"


def _approval_record(row: Row[Any]) -> ApprovalRecord:
    decision: RecordedDecision = row.decision
    return ApprovalRecord(
        run_id=row.run_id,
        session_id=row.session_id,
        call_id=row.call_id,
        name=row.name,
        arguments=json.loads(row.arguments),
        decision=decision,
        decided_by=row.decided_by or None,
        decided_at=_as_utc(row.decided_at),
        edited_arguments=None if row.edited_arguments is None else json.loads(row.edited_arguments),
        reason=row.reason,
        output=row.output,
        resumed_in=row.resumed_in,
    )


def _as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; every moment we write is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
