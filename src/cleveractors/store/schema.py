"""The store's tables and their migrations, in SQLAlchemy Core, for SQLite and PostgreSQL.

The schema is versioned in `cleveractors_schema`; `migrate()` applies every step above the
stored version in one transaction, so a database is always at exactly one version. Steps are
only ever appended, and each is told the version the database was at: a step creates its tables
as they are now, and a later step brings a database made by an earlier cleveractors up to them
(`_v3_call_spans` adds columns, `_v5_prefixed_names` moves the unprefixed pause tables).
Every table carries the `cleveractors_` prefix, so none collides with an application's own.

Money is stored as text (`Decimal` rendered exactly) because SQLite has no exact decimal type;
sums are made in Python with `Decimal`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)
from sqlalchemy import column as column_named
from sqlalchemy import table as table_named
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.errors import ConfigurationError

__all__ = [
    "SCHEMA_VERSION",
    "approvals",
    "idempotency_keys",
    "llm_calls",
    "migrate",
    "paused_runs",
    "runs",
    "sessions",
    "spend",
    "turns",
]

metadata = MetaData()

schema_version = Table(
    "cleveractors_schema",
    metadata,
    Column("version", Integer, nullable=False),
)

sessions = Table(
    "cleveractors_sessions",
    metadata,
    Column("id", String(200), primary_key=True),
    # "" for a session of no particular caller; never NULL, so equality scopes a session.
    Column("caller", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, index=True),
    # The run holding the session, and until when its lease holds (renewed while it runs), so a
    # run whose process died frees the session by itself.
    Column("running_run_id", String(64)),
    Column("lease_until", DateTime(timezone=True)),
    # The actor that has the conversation (a handoff moved it there); NULL: the session's own.
    Column("active_actor", String(200)),
)

turns = Table(
    "cleveractors_turns",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("run_id", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("messages", Text, nullable=False),
)

runs = Table(
    "cleveractors_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("session_id", String(200), index=True),
    Column("caller", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("prompt_tokens", Integer),
    Column("completion_tokens", Integer),
    Column("estimated", Boolean),
    Column("cost_usd", String(40)),
    Column("error_type", String(200)),
)

llm_calls = Table(
    "cleveractors_llm_calls",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("call_index", Integer, primary_key=True),
    Column("session_id", String(200), index=True),
    Column("caller", String(200), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False, index=True),
    Column("purpose", String(16), nullable=False),
    Column("round", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("prompt_tokens", Integer, nullable=False),
    Column("completion_tokens", Integer, nullable=False),
    Column("cache_read_tokens", Integer, nullable=False),
    Column("cache_write_tokens", Integer, nullable=False),
    Column("reasoning_tokens", Integer, nullable=False),
    Column("estimated", Boolean, nullable=False),
    Column("provider", String(100)),
    Column("model", String(200)),
    Column("cost_usd", String(40)),
    # What the prompt cache saved against the uncached price (exact text; may be negative).
    Column("cache_savings_usd", String(40)),
    # The call's `chat` span (hex), when a tracer recorded it: the line links to its trace.
    Column("trace_id", String(32)),
    Column("span_id", String(16)),
    # The run that called the agent whose run made the call (an agent called as a tool); NULL
    # for a call of a run nobody called.
    Column("parent_run_id", String(64), index=True),
)

idempotency_keys = Table(
    "cleveractors_idempotency_keys",
    metadata,
    # "" for no particular caller, as in sessions: a key is one caller's.
    Column("caller", String(200), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("request_digest", String(64), nullable=False),
    Column("run_id", String(64), nullable=False),
    # "running" or "answered"; a run that failed or was cancelled deletes its row.
    Column("status", String(16), nullable=False),
    # The answered run's `ExecutionResult` as JSON, replayed to every repeat of the request.
    Column("result", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # None when the store keeps everything (`retention_days=None`).
    Column("expires_at", DateTime(timezone=True), index=True),
    # A running claim's lease, renewed while the run goes: a claim whose process died is
    # taken over by the next request once this has passed.
    Column("claimed_until", DateTime(timezone=True)),
)

paused_runs = Table(
    # A run segment that waits for a person: the state its resumption starts from.
    "cleveractors_paused_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("session_id", String(200), index=True),
    Column("caller", String(200), nullable=False),
    # `paused` until one resumption claims it (`resumed`), or a new message on its session
    # answers its calls as declined (`superseded`): a state changes once, so one claim wins.
    Column("status", String(16), nullable=False),
    Column("state", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("resumed_in", String(64)),
)

approvals = Table(
    # Every gated call a run paused for, and what became of it: the audit of decisions.
    "cleveractors_approvals",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("call_id", String(200), primary_key=True),
    Column("session_id", String(200), index=True),
    Column("caller", String(200), nullable=False),
    Column("name", String(200), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("requested_at", DateTime(timezone=True), nullable=False),
    # Readers mark the calls past this `expired` first (`pauses.expire_overdue`).
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
    # NULL while it waits; then approve, edit, reject, respond, expired or superseded.
    Column("decision", String(16)),
    Column("decided_by", String(200)),
    Column("decided_at", DateTime(timezone=True)),
    Column("edited_arguments", Text),
    Column("reason", Text),
    Column("output", Text),
    Column("resumed_in", String(64)),
)

spend = Table(
    # One row per caller: what its calls in flight reserved, and what each window's calls
    # spent. Money in nano-dollars (whole numbers, so one conditional UPDATE can compare and
    # add). A window's amounts count from its start (seconds since the epoch, UTC); a row whose
    # start is not the current window's counts 0 there.
    "cleveractors_spend",
    metadata,
    Column("caller", String(200), primary_key=True),
    Column("reserved_nusd", BigInteger, nullable=False, default=0),
    Column("reserved_tokens", BigInteger, nullable=False, default=0),
    # Reservations of a worker that died mid-call are let go this long after the last one.
    Column("reserved_until", BigInteger, nullable=False, default=0),
    Column("day_start", BigInteger, nullable=False, default=0),
    Column("day_nusd", BigInteger, nullable=False, default=0),
    Column("day_tokens", BigInteger, nullable=False, default=0),
    Column("month_start", BigInteger, nullable=False, default=0),
    Column("month_nusd", BigInteger, nullable=False, default=0),
    Column("month_tokens", BigInteger, nullable=False, default=0),
    Column("rolling_start", BigInteger, nullable=False, default=0),
    Column("rolling_nusd", BigInteger, nullable=False, default=0),
    Column("rolling_tokens", BigInteger, nullable=False, default=0),
)

_Step = Callable[[AsyncConnection, int], Awaitable[None]]
"""One migration step, given the version the database was at before this opening."""


async def _v1_tables(connection: AsyncConnection, _found: int) -> None:
    tables = [sessions, turns, runs, llm_calls]
    await connection.run_sync(lambda sync: metadata.create_all(sync, tables=tables))


async def _v2_idempotency_keys(connection: AsyncConnection, _found: int) -> None:
    await connection.run_sync(idempotency_keys.create)


async def _v3_call_spans(connection: AsyncConnection, _found: int) -> None:
    """The trace and span ids of each ledger row. A database made at version 3 or later has
    them from `_v1_tables` already (it creates the table as it is now)."""
    await _add_call_columns(connection, (llm_calls.c.trace_id, llm_calls.c.span_id))


async def _v6_cache_savings(connection: AsyncConnection, _found: int) -> None:
    """What the prompt cache saved on each ledger row; NULL on the rows written before."""
    await _add_call_columns(connection, (llm_calls.c.cache_savings_usd,))


async def _add_call_columns(connection: AsyncConnection, columns: Sequence[Column[Any]]) -> None:
    """Add those of `columns` the ledger's table lacks (a table made by `_v1_tables` at a later
    version has them all)."""

    def existing(sync: Connection) -> set[str]:
        return {column["name"] for column in inspect(sync).get_columns(llm_calls.name)}

    present = await connection.run_sync(existing)
    for column in columns:
        if column.name not in present:
            kind = column.type.compile(dialect=connection.dialect)
            await connection.execute(
                text(f"ALTER TABLE {llm_calls.name} ADD COLUMN {column.name} {kind}")
            )


async def _v4_approvals(connection: AsyncConnection, _found: int) -> None:
    """The paused runs and the audit, as they are now: a database made at version 4 by an
    earlier cleveractors has them under unprefixed names, which `_v5_prefixed_names` moves."""
    await connection.run_sync(
        lambda sync: metadata.create_all(sync, tables=[paused_runs, approvals])
    )


_UNPREFIXED = ((paused_runs, "paused_runs"), (approvals, "approvals"))
"""The tables version 4 once created without the `cleveractors_` prefix, by their names then."""


async def _v5_prefixed_names(connection: AsyncConnection, found: int) -> None:
    """Every table the store creates carries the `cleveractors_` prefix, so none collides with
    an application's own (an `approvals` table is common). A database that was at version 4
    has `paused_runs` and `approvals`: their rows move to the prefixed tables, and they go. Any
    other database never had ours: a table of those names there is the application's, and is
    left alone."""
    if found != 4:
        return
    await _v4_approvals(connection, found)
    for current, name in _UNPREFIXED:  # version 4 made both
        columns = [each.name for each in current.columns]
        old = table_named(name, *(column_named(each) for each in columns))
        await connection.execute(current.insert().from_select(columns, select(old)))
        await connection.execute(text(f"DROP TABLE {name}"))


async def _v8_spend(connection: AsyncConnection, _found: int) -> None:
    """The spend limits' counters, one row per caller."""
    await connection.run_sync(lambda sync: spend.create(sync, checkfirst=True))


async def _v7_active_actor(connection: AsyncConnection, _found: int) -> None:
    """The actor a session's conversation was handed to. A database made at this version or
    later has the column from `_v1_tables` already (it creates the table as it is now)."""

    def existing(sync: Connection) -> set[str]:
        return {column["name"] for column in inspect(sync).get_columns(sessions.name)}

    if sessions.c.active_actor.name not in await connection.run_sync(existing):
        kind = sessions.c.active_actor.type.compile(dialect=connection.dialect)
        await connection.execute(
            text(f"ALTER TABLE {sessions.name} ADD COLUMN {sessions.c.active_actor.name} {kind}")
        )


async def _v9_parent_runs(connection: AsyncConnection, _found: int) -> None:
    """The parent run of each ledger row (agents called as tools). A database made at this
    version or later has it from `_v1_tables` already."""

    def existing(sync: Connection) -> set[str]:
        return {column["name"] for column in inspect(sync).get_columns(llm_calls.name)}

    if "parent_run_id" in await connection.run_sync(existing):
        return
    column = llm_calls.c.parent_run_id
    kind = column.type.compile(dialect=connection.dialect)
    await connection.execute(text(f"ALTER TABLE {llm_calls.name} ADD COLUMN {column.name} {kind}"))
    await connection.execute(
        text(f"CREATE INDEX ix_{llm_calls.name}_parent_run_id ON {llm_calls.name} (parent_run_id)")
    )


_STEPS: Sequence[_Step] = (
    _v1_tables,
    _v2_idempotency_keys,
    _v3_call_spans,
    _v4_approvals,
    _v5_prefixed_names,
    _v6_cache_savings,
    _v7_active_actor,
    _v8_spend,
    _v9_parent_runs,
)
SCHEMA_VERSION = len(_STEPS)
"""The version this code writes; a database at a newer one is refused, not guessed at."""


async def migrate(connection: AsyncConnection) -> int:
    """Bring the database to `SCHEMA_VERSION` inside the caller's transaction; returns the
    version it found (0 for an empty database).

    Raises:
        ConfigurationError: the database was written by a newer cleveractors.
    """
    if connection.dialect.name == "postgresql":
        # Two workers opening one fresh database must not both create the tables.
        await connection.execute(text("SELECT pg_advisory_xact_lock(7264311)"))
    await connection.run_sync(lambda sync: schema_version.create(sync, checkfirst=True))
    found = (await connection.execute(select(schema_version.c.version))).scalar_one_or_none()
    current = found or 0
    if current > SCHEMA_VERSION:
        raise ConfigurationError(
            f"store: the database is at schema version {current}, newer than this cleveractors "
            f"knows ({SCHEMA_VERSION}); upgrade cleveractors"
        )
    for step in _STEPS[current:]:
        await step(connection, current)
    if found is None:
        await connection.execute(schema_version.insert().values(version=SCHEMA_VERSION))
    elif current < SCHEMA_VERSION:
        await connection.execute(schema_version.update().values(version=SCHEMA_VERSION))
    return current
