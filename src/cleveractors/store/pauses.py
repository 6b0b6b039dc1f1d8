"""Paused runs and the audit of decisions, in the store's database.

A pause is one `cleveractors_paused_runs` row (the state its resumption starts from) and one
`cleveractors_approvals` row per gated call. Whatever ends a pause changes its row's status from
`paused` once, in the transaction that records the decisions: of two workers resuming the same
run (or a resumption and a new message on its session), exactly one changes it, and the other is
told so.

A call nobody decided by its `expires_at` is recorded `expired` (decided at its expiry) by the
first reader after that moment: every read of a pause, of a segment's status or of the audit
first marks the overdue calls it covers, in its own transaction, so what it reads is true at the
moment it reads, whether or not anyone tried to resume the run. A pause whose every call expired
still waits for a resumption (with no decision), in which the model reads them declined.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import BaseMessage
from sqlalchemy import Row, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.approvals import (
    ApprovalRecord,
    CheckedDecisions,
    PausedRun,
    RecordedDecision,
    ToolAnswer,
)
from cleveractors.errors import ApprovalConflictError, RunNotFoundError
from cleveractors.store.dialects import as_utc, utc_now
from cleveractors.store.records import SegmentStatus
from cleveractors.store.schema import approvals, paused_runs, runs
from cleveractors.store.sessions import append_turn

__all__ = [
    "claim_pause",
    "expire_overdue",
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
            created_at=utc_now(),
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
    await expire_overdue(connection, approvals.c.run_id == run_id)
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
    await expire_overdue(connection, approvals.c.run_id == run_id)
    waiting = exists().where(approvals.c.run_id == run_id, approvals.c.decision.is_(None))
    query = (
        select(runs.c.status, paused_runs.c.status.label("pause"), waiting.label("waiting"))
        .select_from(runs.outerjoin(paused_runs, paused_runs.c.run_id == runs.c.run_id))
        .where(runs.c.run_id == run_id, runs.c.caller == caller)
    )
    row = (await connection.execute(query)).first()
    if row is None:
        return None
    status: SegmentStatus = "answered" if row.status == "ok" else row.status
    if row.pause is not None:  # the pause's own row says whether it still waits
        status = row.pause
    if status == "paused" and not row.waiting:
        status = "expired"
    return status


async def pause_of_session(
    connection: AsyncConnection, session_id: str, caller: str
) -> PausedRun | None:
    """The session's paused run, if one waits (a session has at most one: it is held while a
    run goes, and a new message ends the pause)."""
    await expire_overdue(connection, approvals.c.session_id == session_id)
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
    now = utc_now()
    # The pause is this resumption's now: a call a reader marked expired after the decisions
    # were checked in time is the resumption's to settle, as it was checked.
    settled = or_(approvals.c.decision.is_(None), approvals.c.decision == "expired")
    for call_id, decision in checked.all_decided().items():  # the run tree's, at any depth
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
            still=settled,
        )
    for pending in checked.all_expired():
        await _record_decision(
            connection,
            paused.run_id,
            pending.call_id,
            {"decision": "expired", "decided_at": pending.expires_at, "resumed_in": resumed_in},
            still=settled,
        )


async def supersede_pause(
    connection: AsyncConnection,
    paused: PausedRun,
    answers: dict[str, ToolAnswer],
    *,
    session_id: str,
    by_run: str,
    caller: str,
) -> list[BaseMessage]:
    """End a pause that a new message on session `session_id` answers: its waiting calls
    recorded as `superseded`, its turn appended to the session (every call answered, so the
    history stays valid for any provider). Run `by_run`, the new message's, holds the session.
    Returns the turn's messages.

    Raises:
        ApprovalConflictError: a resumption took the pause first.
    """
    await _end_pause(connection, paused.run_id, "superseded", by_run)
    now = utc_now()
    for pending in paused.pending:
        await _record_decision(
            connection,
            paused.run_id,
            pending.call_id,
            {"decision": "superseded", "decided_by": caller, "decided_at": now},
            still=approvals.c.decision.is_(None),
        )
    messages = paused.turn_messages(answers)
    await append_turn(
        connection, session_id, run_id=paused.run_id, messages=messages, held_by=by_run
    )
    return messages


async def list_approvals(
    connection: AsyncConnection,
    *,
    run_id: str | None,
    session_id: str | None,
    caller: str | None,
) -> list[ApprovalRecord]:
    """The decisions taken (the calls that expired meanwhile marked first), oldest first,
    filtered by run, session and owner."""
    which: list[Any] = []
    if run_id is not None:
        which.append(approvals.c.run_id == run_id)
    if session_id is not None:
        which.append(approvals.c.session_id == session_id)
    if caller is not None:
        which.append(approvals.c.caller == caller)
    await expire_overdue(connection, *which)
    query = select(approvals).where(approvals.c.decision.is_not(None), *which)
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


async def expire_overdue(connection: AsyncConnection, *which: Any) -> None:
    """Record as `expired`, decided at its expiry, every call among `which` that nobody decided
    before its `expires_at` (by this process's clock, as decisions are checked)."""
    await connection.execute(
        update(approvals)
        .where(approvals.c.decision.is_(None), approvals.c.expires_at <= utc_now(), *which)
        .values(decision="expired", decided_at=approvals.c.expires_at)
    )


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
    connection: AsyncConnection, run_id: str, call_id: str, values: dict[str, Any], *, still: Any
) -> None:
    """Record what became of a call, unless its row says otherwise already (`still` false)."""
    await connection.execute(
        update(approvals)
        .where(approvals.c.run_id == run_id, approvals.c.call_id == call_id, still)
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
        decided_at=as_utc(row.decided_at),
        edited_arguments=None if row.edited_arguments is None else json.loads(row.edited_arguments),
        reason=row.reason,
        output=row.output,
        resumed_in=row.resumed_in,
    )
