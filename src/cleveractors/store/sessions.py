"""A session's rows: its hold by one run at a time, and its turns, each in one statement or two.

A run claims its session with one conditional UPDATE (atomic on both databases): the session is
free, or its holder's lease ran out by the database's clock. `append_turn` is the one writer of
a session's turn positions (a run's answered turn, and the turn of a pause a new message
declined, both go through it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.approvals import PausedRun
from cleveractors.errors import SessionBusyError, SessionNotFoundError, StoreError
from cleveractors.store.dialects import as_utc, database_time, insert_for, utc_now
from cleveractors.store.engine import GatedEngine
from cleveractors.store.records import StoredTurn
from cleveractors.store.schema import paused_runs, sessions, turns

__all__ = [
    "active_actor",
    "append_turn",
    "claim_session",
    "delete_sessions",
    "idle_session_ids",
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
) -> None:
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
    await connection.execute(
        turns.insert().values(
            session_id=session_id,
            position=(last or 0) + 1,
            run_id=run_id,
            created_at=now,
            messages=json.dumps(messages_to_dict(list(messages))),
        )
    )


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
    connection: AsyncConnection, session_id: str, caller: str, *, limit: int | None
) -> list[StoredTurn]:
    """A session's turns, oldest first (the latest `limit`), in one query scoped to the caller."""
    query = (
        select(turns)
        .join(sessions, sessions.c.id == turns.c.session_id)
        .where(turns.c.session_id == session_id, sessions.c.caller == caller)
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
