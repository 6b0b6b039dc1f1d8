"""A session's rows: its hold by one run at a time, and its turns, each in one statement or two.

A run claims its session with one conditional UPDATE (atomic on both databases): the session is
free, or its holder's lease ran out by the database's clock. `append_turn` is the one writer of
a session's turn positions (a run's answered turn, and the turn of a pause a new message
declined, both go through it).

A session's compacted history (`SessionContext`: a summary standing for its oldest turns, the
tool outputs of old turns cleared) is kept beside its turns, which stay whole: `history_sent`
is what a run is given, `compacted_context` what the session keeps of the run's compaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors._compacted import CompactedHistory, SizedHistory, cleared, summary_message
from cleveractors.approvals import PausedRun
from cleveractors.errors import SessionBusyError, SessionNotFoundError, StoreError
from cleveractors.store.dialects import as_utc, database_time, insert_for, utc_now
from cleveractors.store.engine import GatedEngine
from cleveractors.store.records import StoredTurn
from cleveractors.store.schema import paused_runs, session_contexts, sessions, turns

__all__ = [
    "HistoryLayout",
    "SessionContext",
    "active_actor",
    "append_turn",
    "claim_session",
    "compacted_context",
    "delete_sessions",
    "history_sent",
    "idle_session_ids",
    "keep_context",
    "read_context",
    "read_turns",
    "release_session",
    "renew_session",
    "session_exists",
    "set_active_actor",
]


async def claim_session(
    connection: AsyncConnection, session_id: str, caller: str, run_id: str, *, lease_s: float
) -> None:
    """Make `run_id` the session's holder for `lease_s` (creating the session on first use).

    Raises:
        SessionBusyError: another run holds it, and its lease has not run out.
        SessionNotFoundError: the session belongs to another caller.
    """
    now = utc_now()
    await connection.execute(
        insert_for(connection)(sessions)
        .values(id=session_id, caller=caller, created_at=now, updated_at=now)
        .on_conflict_do_nothing(index_elements=["id"])
    )
    dialect = connection.dialect.name
    claimed = await connection.execute(
        update(sessions)
        .where(
            sessions.c.id == session_id,
            sessions.c.caller == caller,
            or_(
                sessions.c.running_run_id.is_(None), sessions.c.lease_until < database_time(dialect)
            ),
        )
        .values(running_run_id=run_id, lease_until=database_time(dialect, after_s=lease_s))
    )
    if claimed.rowcount == 1:
        return
    owner = await connection.scalar(select(sessions.c.caller).where(sessions.c.id == session_id))
    if owner != caller:
        raise SessionNotFoundError(f"no session {session_id!r}")
    raise SessionBusyError(f"session {session_id!r} is busy with another run")


async def renew_session(engine: GatedEngine, run_id: str, *, lease_s: float) -> bool:
    """Extend the lease of the session `run_id` holds; False when it holds none any more."""
    async with engine.begin() as connection:
        renewed = await connection.execute(
            update(sessions)
            .where(sessions.c.running_run_id == run_id)
            .values(lease_until=database_time(connection.dialect.name, after_s=lease_s))
        )
    return bool(renewed.rowcount == 1)


async def release_session(connection: AsyncConnection, run_id: str) -> None:
    await connection.execute(
        update(sessions)
        .where(sessions.c.running_run_id == run_id)
        .values(running_run_id=None, lease_until=None)
    )


async def append_turn(
    connection: AsyncConnection,
    session_id: str,
    *,
    run_id: str,
    messages: Sequence[BaseMessage],
    held_by: str,
) -> int:
    """Append run `run_id`'s whole turn at the session's next position, while run `held_by`
    holds the session (the same run, or the one whose new message declined a pause), so no
    other writer can take that position.

    Raises:
        StoreError: `held_by` no longer holds the session.
    """
    now = utc_now()
    held = await connection.execute(
        update(sessions)
        .where(sessions.c.id == session_id, sessions.c.running_run_id == held_by)
        .values(updated_at=now)
    )
    if held.rowcount != 1:
        # The lease ran out (the run stalled longer than `lease_s`) and another run may hold the
        # session now: appending would interleave two runs' turns.
        raise StoreError(
            f"store: run {held_by} no longer holds session {session_id!r} "
            "(its lease ran out); the turn is not appended"
        )
    last = await connection.scalar(
        select(func.max(turns.c.position)).where(turns.c.session_id == session_id)
    )
    position = (last or 0) + 1
    await connection.execute(
        turns.insert().values(
            session_id=session_id,
            position=position,
            run_id=run_id,
            created_at=now,
            messages=json.dumps(messages_to_dict(list(messages))),
        )
    )
    return position


async def active_actor(connection: AsyncConnection, session_id: str) -> str | None:
    """The actor a handoff left the session's conversation with; None for the session's own
    (or one that never handed off)."""
    found: str | None = await connection.scalar(
        select(sessions.c.active_actor).where(sessions.c.id == session_id)
    )
    return found


async def set_active_actor(
    connection: AsyncConnection, session_id: str, actor: str, *, held_by: str
) -> None:
    """The session's next turns run on `actor`, said by the run `held_by` that holds it."""
    await connection.execute(
        update(sessions)
        .where(sessions.c.id == session_id, sessions.c.running_run_id == held_by)
        .values(active_actor=actor)
    )


async def session_exists(connection: AsyncConnection, session_id: str, caller: str) -> bool:
    found = await connection.scalar(
        select(sessions.c.id).where(sessions.c.id == session_id, sessions.c.caller == caller)
    )
    return found is not None


async def read_turns(
    connection: AsyncConnection,
    session_id: str,
    caller: str,
    *,
    limit: int | None,
    after: int = 0,
) -> list[StoredTurn]:
    """A session's turns after position `after`, oldest first (the latest `limit`), in one query
    scoped to the caller."""
    query = (
        select(turns)
        .join(sessions, sessions.c.id == turns.c.session_id)
        .where(
            turns.c.session_id == session_id,
            sessions.c.caller == caller,
            turns.c.position > after,
        )
        .order_by(turns.c.position.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    rows = (await connection.execute(query)).all()
    earlier = await earlier_segments(connection, session_id) if rows else {}
    return [
        StoredTurn(
            position=row.position,
            run_id=row.run_id,
            created_at=as_utc(row.created_at),
            messages=tuple(messages_from_dict(json.loads(row.messages))),
            segments=_segments(row.run_id, earlier),
        )
        for row in reversed(rows)
    ]


async def earlier_segments(connection: AsyncConnection, session_id: str) -> dict[str, str]:
    """By run segment of the session: the paused segment it resumed (a turn that paused is
    every segment of its chain)."""
    query = select(paused_runs.c.run_id, paused_runs.c.resumed_in).where(
        paused_runs.c.session_id == session_id, paused_runs.c.status == "resumed"
    )
    return {row.resumed_in: row.run_id for row in await connection.execute(query)}


def _segments(last: str, earlier: dict[str, str]) -> tuple[str, ...]:
    """The run segments of the turn whose last segment is `last`, oldest first."""
    chain = [last]
    while chain[-1] in earlier:
        chain.append(earlier[chain[-1]])
    return tuple(reversed(chain))


def waiting_turn(paused: PausedRun, position: int, earlier: dict[str, str]) -> StoredTurn:
    """The turn `paused` waits in: its messages so far, the batch's answered calls with their
    answers, and the calls it waits on."""
    answered = (call.tool_message() for call in paused.batch if call.answer is not None)
    return StoredTurn(
        position=position,
        run_id=paused.run_id,
        created_at=min(call.requested_at for call in paused.pending),
        messages=(*paused.messages[paused.turn_start :], *answered),
        segments=_segments(paused.run_id, earlier),
        pending=paused.pending,
    )


async def delete_sessions(connection: AsyncConnection, which: Any) -> bool:
    """Remove the sessions `which` selects and their turns; whether there were any."""
    ids = select(sessions.c.id).where(which).scalar_subquery()
    await connection.execute(delete(turns).where(turns.c.session_id.in_(ids)))
    await connection.execute(delete(session_contexts).where(session_contexts.c.session_id.in_(ids)))
    removed = await connection.execute(delete(sessions).where(which))
    return bool(removed.rowcount > 0)


async def idle_session_ids(
    connection: AsyncConnection, *, now: datetime, retention_days: int | None
) -> list[str]:
    """Sessions untouched for `retention_days` that no run holds, oldest first."""
    if retention_days is None:
        return []
    cutoff = now - timedelta(days=retention_days)
    idle = (sessions.c.updated_at < cutoff) & (sessions.c.running_run_id.is_(None))
    query = select(sessions.c.id).where(idle).order_by(sessions.c.updated_at, sessions.c.id)
    return list((await connection.execute(query)).scalars().all())


@dataclass(frozen=True, slots=True)
class SessionContext:
    """How far a session's history is compacted, in turn positions."""

    summary: str | None = None
    """Stands for the turns up to `summary_through`."""
    summary_through: int = 0
    cleared_through: int = 0
    """The tool outputs of the turns up to this position are sent as a placeholder."""
    history_tokens: int | None = None
    """The size of the history after the summary, through `history_through`, as measured."""
    history_through: int | None = None
    history_turns: int | None = None


HistoryLayout = list[tuple[int | None, int]]
"""The history a run was given, turn by turn: (its position, or None for the summary; how many
messages it has)."""


async def read_context(connection: AsyncConnection, session_id: str) -> SessionContext:
    row = (
        await connection.execute(
            select(session_contexts).where(session_contexts.c.session_id == session_id)
        )
    ).first()
    if row is None:
        return SessionContext()
    return SessionContext(
        row.summary,
        row.summary_through,
        row.cleared_through,
        row.history_tokens,
        row.history_through,
        row.history_turns,
    )


async def keep_context(connection: AsyncConnection, session_id: str, kept: SessionContext) -> None:
    values = {
        "summary": kept.summary,
        "summary_through": kept.summary_through,
        "cleared_through": kept.cleared_through,
        "history_tokens": kept.history_tokens,
        "history_through": kept.history_through,
        "history_turns": kept.history_turns,
        "updated_at": utc_now(),
    }
    await connection.execute(
        insert_for(connection)(session_contexts)
        .values(session_id=session_id, **values)
        .on_conflict_do_update(index_elements=["session_id"], set_=values)
    )


def history_sent(
    found: Sequence[StoredTurn], context: SessionContext
) -> tuple[list[BaseMessage], HistoryLayout]:
    """What a run is given of the turns found: the summary first (if any) instead of the turns
    it stands for, and the old turns' tool outputs cleared; with the layout of that history."""
    history: list[BaseMessage] = []
    layout: HistoryLayout = []
    if context.summary is not None:
        history.append(summary_message(context.summary))
        layout.append((None, 1))
    for turn in found:
        if turn.position <= context.summary_through:
            continue
        messages = turn.messages
        if turn.position <= context.cleared_through:
            messages = tuple(cleared(message) for message in messages)
        history.extend(messages)
        layout.append((turn.position, len(messages)))
    turns_found = [position for position, _ in layout if position is not None]
    if (
        context.history_tokens is not None
        and turns_found
        and turns_found[-1] == context.history_through
        and len(turns_found) == context.history_turns
    ):  # the very history the last run measured
        return SizedHistory(history, tokens=context.history_tokens), layout
    return history, layout


def compacted_context(
    layout: HistoryLayout, kept: SessionContext, compacted: CompactedHistory, *, appended: int
) -> SessionContext:
    """What the session keeps after a run compacted the history it was given (counted in
    that history's messages): the new summary and the turns it stands for, the turns whose
    tool outputs are cleared, each as the last whole turn position they reach; and the size
    of the next run's history, through the turn `appended` at that position."""

    def through(messages: int, before: int) -> int:
        reached, last = 0, before
        for position, count in layout:
            reached += count
            if reached > messages:
                break
            last = last if position is None else position
        return last

    if compacted.summary is None:
        summary, summary_through = kept.summary, kept.summary_through
    else:
        summary = compacted.summary
        summary_through = through(compacted.summarized, kept.summary_through)
    cleared_through = max(kept.cleared_through, through(compacted.cleared, kept.cleared_through))
    kept_turns = sum(
        1 for position, _ in layout if position is not None and position > summary_through
    )
    return SessionContext(
        summary,
        summary_through,
        max(cleared_through, summary_through),
        history_tokens=compacted.next_tokens,
        history_through=appended,
        history_turns=kept_turns + 1,
    )
