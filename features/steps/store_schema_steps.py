"""Steps of store.schema.feature and store.clocks.feature, and the on-time expiry of
approvals.expiry.feature.

A "database made by schema version 4" is written here with the DDL that version created (the
pause tables without the `cleveractors_` prefix) and rows in it, then opened by the store. A
"worker whose clock is an hour ahead" is a second `SqlStore` in this process whose clock (the
store's `utc_now`, the only process clock it reads, in every module that reads it) is moved
while it acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

from behave import given, then, when
from behave.runner import Context
from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
)
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from cleveractors.errors import IdempotencyKeyInProgressError, SessionBusyError
from cleveractors.store import Claimed, SqlStore, dialects, request_digest
from cleveractors.store.engine import async_url
from cleveractors.store.schema import SCHEMA_VERSION, metadata, schema_version, sessions

T = TypeVar("T")

# -- the DDL of schema version 4 -----------------------------------------------------------------

_V4 = MetaData()
_V4_PAUSED_RUNS = Table(
    "paused_runs",
    _V4,
    Column("run_id", String(64), primary_key=True),
    Column("session_id", String(200), index=True),
    Column("caller", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("state", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("resumed_in", String(64)),
)
_V4_APPROVALS = Table(
    "approvals",
    _V4,
    Column("run_id", String(64), primary_key=True),
    Column("call_id", String(200), primary_key=True),
    Column("session_id", String(200), index=True),
    Column("caller", String(200), nullable=False),
    Column("name", String(200), nullable=False),
    Column("arguments", Text, nullable=False),
    Column("digest", String(64), nullable=False),
    Column("requested_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("decision", String(16)),
    Column("decided_by", String(200)),
    Column("decided_at", DateTime(timezone=True)),
    Column("edited_arguments", Text),
    Column("reason", Text),
    Column("output", Text),
    Column("resumed_in", String(64)),
)
_UNCHANGED_SINCE_V4 = [
    "cleveractors_schema",
    "cleveractors_sessions",
    "cleveractors_turns",
    "cleveractors_runs",
    "cleveractors_llm_calls",
    "cleveractors_idempotency_keys",
]
_V4_MOMENT = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _database(context: Context, database: str) -> str:
    if database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-schema-"))
        return f"sqlite:///{folder / 'store.db'}"
    return str(context.postgres.new_database())


async def _on_raw(url: str, work: Callable[[Connection], object]) -> Any:
    """Run `work` on the database in one transaction, without the store (its DDL is ours)."""
    engine = create_async_engine(async_url(url))
    try:
        async with engine.begin() as connection:
            return await connection.run_sync(work)
    finally:
        await engine.dispose()


def _make_v4(sync: Connection) -> None:
    tables = [metadata.tables[name] for name in _UNCHANGED_SINCE_V4]
    metadata.create_all(sync, tables=tables)
    _V4.create_all(sync)
    sync.execute(schema_version.insert().values(version=4))
    sync.execute(
        _V4_PAUSED_RUNS.insert().values(
            run_id="run-paused",
            session_id="s-1",
            caller="alice",
            status="resumed",
            state="{}",
            created_at=_V4_MOMENT,
            resumed_in="run-next",
        )
    )
    sync.execute(
        _V4_APPROVALS.insert(),
        [
            _v4_approval("c-1", "approve", reason="fine"),
            _v4_approval("c-2", "reject", reason="too much"),
        ],
    )


def _v4_approval(call_id: str, decision: str, *, reason: str) -> dict[str, object]:
    return {
        "run_id": "run-paused",
        "call_id": call_id,
        "session_id": "s-1",
        "caller": "alice",
        "name": "refund",
        "arguments": '{"order": "A1"}',
        "digest": "d" * 32,
        "requested_at": _V4_MOMENT,
        "expires_at": _V4_MOMENT + timedelta(days=1),
        "decision": decision,
        "decided_by": "alice",
        "decided_at": _V4_MOMENT + timedelta(minutes=5),
        "reason": reason,
        "resumed_in": "run-next",
    }


def _application_table(sync: Connection) -> None:
    own = MetaData()
    table = Table("approvals", own, Column("id", Integer, primary_key=True), Column("memo", Text))
    own.create_all(sync)
    sync.execute(table.insert().values(id=1, memo="the application's own row"))


def _table_names(sync: Connection) -> set[str]:
    return set(inspect(sync).get_table_names())


def _opened(url: str) -> None:
    async def open_and_close() -> None:
        async with SqlStore(url):
            pass

    asyncio.run(open_and_close())


@given("a {database} database made by schema version 4, holding a resumed pause and its audit")
def v4_database(context: Context, database: str) -> None:
    context.schema_url = _database(context, database)
    asyncio.run(_on_raw(context.schema_url, _make_v4))


@given('a {database} database holding the application\'s own "approvals" table')
def application_database(context: Context, database: str) -> None:
    context.schema_url = _database(context, database)
    asyncio.run(_on_raw(context.schema_url, _application_table))


@when("the store opens it")
def store_opens(context: Context) -> None:
    _opened(context.schema_url)


@then('its tables are all prefixed: "paused_runs" and "approvals" are gone')
def tables_prefixed(context: Context) -> None:
    names = asyncio.run(_on_raw(context.schema_url, _table_names))
    assert names == set(metadata.tables), sorted(names)


@then("the store reads the audit as version 4 kept it, at the current schema version")
def audit_kept(context: Context) -> None:
    async def read() -> tuple[list[Any], int]:
        async with SqlStore(context.schema_url) as store:
            records = await store.approvals(session_id="s-1")
            async with store.engine.connect() as connection:
                version = int(await connection.scalar(select(schema_version.c.version)))
            return records, version

    records, version = asyncio.run(read())
    assert version == SCHEMA_VERSION, version
    seen = [
        (r.call_id, r.decision, r.decided_by, r.reason, r.resumed_in, r.decided_at) for r in records
    ]
    decided = _V4_MOMENT + timedelta(minutes=5)
    assert seen == [
        ("c-1", "approve", "alice", "fine", "run-next", decided),
        ("c-2", "reject", "alice", "too much", "run-next", decided),
    ], seen


@then("the application's \"approvals\" table still holds its row, and the store's are prefixed")
def application_table_kept(context: Context) -> None:
    def read(sync: Connection) -> tuple[set[str], list[Any]]:
        own = Table("approvals", MetaData(), autoload_with=sync)
        return _table_names(sync), [tuple(row) for row in sync.execute(select(own))]

    names, rows = asyncio.run(_on_raw(context.schema_url, read))
    assert rows == [(1, "the application's own row")], rows
    assert names == {*metadata.tables, "approvals"}, sorted(names)


# -- two workers, two clocks -------------------------------------------------------------------


@contextlib.contextmanager
def _clock_moved(by: timedelta) -> Iterator[None]:
    """This process's clock, as every module of the store reads it (`utc_now`), moved by `by`
    meanwhile."""
    moved = datetime.now(UTC) + by  # the test is over in far less than a lease
    readers = [
        module
        for name, module in sorted(sys.modules.items())
        if name.startswith("cleveractors.store") and hasattr(module, "utc_now")
    ]
    assert dialects in readers, readers
    with contextlib.ExitStack() as stack:
        for module in readers:
            stack.enter_context(mock.patch.object(module, "utc_now", return_value=moved))
        yield


def _skew(words: str) -> timedelta:
    return {"an hour ahead": timedelta(hours=1), "an hour behind": timedelta(hours=-1)}[words]


def _in_session(context: Context, work: Callable[[SqlStore], Awaitable[T]]) -> T:
    async def run() -> T:
        async with SqlStore(context.clock_url, lease_s=context.clock_lease_s) as store:
            return await work(store)

    return asyncio.run(run())


@given("a fresh {database} store whose workers lease for {seconds:g} seconds")
def clock_store(context: Context, database: str, seconds: float) -> None:
    context.clock_url = _database(context, database)
    context.clock_lease_s = seconds


@when('a worker holding session "{session_id}" meets a worker whose clock is {skew}')
def skewed_session(context: Context, session_id: str, skew: str) -> None:
    async def meet() -> BaseException | None:
        holder = SqlStore(context.clock_url, lease_s=context.clock_lease_s)
        other = SqlStore(context.clock_url, lease_s=context.clock_lease_s)
        async with holder, other, holder.run(session_id=session_id, run_id="run-holder"):
            with _clock_moved(_skew(skew)):
                try:
                    async with other.run(session_id=session_id, run_id="run-other"):
                        return None
                except SessionBusyError as exc:
                    return exc

    context.clock_refusal = asyncio.run(meet())


@when('a worker holding key "{key}" meets a worker whose clock is {skew}')
def skewed_key(context: Context, key: str, skew: str) -> None:
    digest = request_digest("hello", None, None)

    async def meet(store: SqlStore) -> BaseException | None:
        first = await store.claim_idempotency_key(
            caller=None, key=key, request_digest=digest, run_id="run-holder"
        )
        assert first == Claimed(), first
        with _clock_moved(_skew(skew)):
            try:
                await store.claim_idempotency_key(
                    caller=None, key=key, request_digest=digest, run_id="run-other"
                )
            except IdempotencyKeyInProgressError as exc:
                return exc
        return None

    context.clock_refusal = _in_session(context, meet)


@then("the second worker is refused with {error_type}: the first one's lease holds")
def skewed_refused(context: Context, error_type: str) -> None:
    refusal = context.clock_refusal
    assert type(refusal).__name__ == error_type, repr(refusal)
    assert "run-holder" in str(refusal) or "busy" in str(refusal), refusal


@given('session "{session_id}" is held by a run whose lease ran out a second ago')
def lapsed_holder(context: Context, session_id: str) -> None:
    async def lapse(store: SqlStore) -> None:
        now = datetime.now(UTC)
        async with store.engine.begin() as connection:
            lapsed = dialects.database_time(connection.dialect.name, after_s=-1.0)
            await connection.execute(
                sessions.insert().values(
                    id=session_id,
                    caller="",
                    created_at=now,
                    updated_at=now,
                    running_run_id="run-dead",
                    lease_until=lapsed,
                )
            )

    _in_session(context, lapse)


@when('a worker whose clock is {skew} starts a run on session "{session_id}"')
def skewed_start(context: Context, skew: str, session_id: str) -> None:
    async def start(store: SqlStore) -> BaseException | None:
        with _clock_moved(_skew(skew)):
            try:
                async with store.run(session_id=session_id, run_id="run-late"):
                    return None
            except SessionBusyError as exc:
                return exc

    context.clock_refusal = _in_session(context, start)


@then("the late worker holds the session: the lease ran out by the database's clock")
def skewed_took_over(context: Context) -> None:
    assert context.clock_refusal is None, repr(context.clock_refusal)


# -- a pause that expired, read on time ---------------------------------------------------------


@then(
    "with no resumption, the first paused segment reads as expired: call {call_id} decided at "
    "its expiry, the segment's status expired, the run still resumable"
)
def expired_on_time(context: Context, call_id: str) -> None:
    shop = context.shop
    loop: asyncio.AbstractEventLoop = context.shop_loop
    executor = shop.executor()
    store = executor.store
    first = shop.paused_segment("first")
    (pending,) = [call for call in first.pending_approvals if call.call_id == call_id]
    records = loop.run_until_complete(store.approvals(run_id=first.run_id))
    assert [(r.call_id, r.decision, r.decided_at, r.resumed_in) for r in records] == [
        (call_id, "expired", pending.expires_at, None)
    ], records
    assert loop.run_until_complete(store.run_status(first.run_id)) == "expired"
    paused = loop.run_until_complete(executor.paused_run(first.run_id))
    assert [call.call_id for call in paused.pending] == [call_id], paused.pending
