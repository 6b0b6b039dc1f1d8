"""`SqlStore`: sessions and an append-only usage ledger on SQLite or PostgreSQL.

    async with SqlStore("sqlite:///cleveractors.db") as store:
        async with store.run(session_id="s-1", caller="key-1") as run:
            history = run.history                  # the session's last turns, loaded in one query
            await run.record_call(call)            # one ledger row per LLM call, as it happens
            await run.commit_turn(messages, result)  # the new turn, atomically, on an answer

A session is held by one run at a time, across processes: `run()` takes a lease on the session
row with one conditional UPDATE (atomic on both databases) and renews it while the run goes, so
a second run gets `SessionBusyError` at once, and a run whose process was killed frees the
session when its lease runs out. Ledger rows are keyed `(run_id, call_index)` and inserted with
ON CONFLICT DO NOTHING, so a write retried after a transient error never doubles a row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from sqlalchemy import Row, delete, event, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from cleveractors._pause import CheckedDecisions, PausedRun, ToolAnswer
from cleveractors.approvals import ApprovalRecord
from cleveractors.config import StoreConfig
from cleveractors.errors import (
    ConfigurationError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)
from cleveractors.result import ErrorInfo, ExecutionResult, RunOutcome
from cleveractors.runs import finish_despite_cancellation, new_run_id
from cleveractors.store.idempotency import (
    IdempotencyClaim,
    claim_key,
    prune_keys,
    renew_key,
    settle_key,
)
from cleveractors.store.pauses import (
    claim_pause,
    find_pause,
    keep_pause,
    list_approvals,
    pause_of_session,
    segment_status,
    supersede_pause,
)
from cleveractors.store.records import (
    LedgerRow,
    RunStatus,
    SegmentStatus,
    StoredTurn,
    UsageReport,
)
from cleveractors.store.schema import llm_calls, migrate, paused_runs, runs, sessions, turns
from cleveractors.usage import LLMCallUsage

__all__ = ["DEFAULT_STORE_URL", "SqlStore", "StoreRun", "resolve_sqlite_path"]

logger = logging.getLogger(__name__)

DEFAULT_STORE_URL = "sqlite:///cleveractors.db"
"""The store an actor's `store:` uses when it names no `url`: SQLite `cleveractors.db`, in the
actor file's folder."""

# The async driver for each plain URL scheme, and the extra that installs it.
_DRIVERS = {
    "sqlite": ("sqlite+aiosqlite", "aiosqlite", "cleveractors[store]"),
    "postgresql": ("postgresql+asyncpg", "asyncpg", "cleveractors[postgres]"),
}
_NO_CALLER = ""

SupersededAnswers = Callable[[PausedRun], dict[str, ToolAnswer]]
"""What the model reads, by call id, for each call a superseded pause waited for."""


def _now() -> datetime:
    return datetime.now(UTC)


def _as_utc(moment: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; every one we write is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def async_url(url: str) -> str:
    """The SQLAlchemy URL with the async driver for its database.

    Raises:
        ConfigurationError: the URL is not a database URL we support.
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        # Not echoed: what cannot be parsed cannot have its password taken out.
        raise ConfigurationError(
            f"store.url is not a database URL (e.g. {DEFAULT_STORE_URL}); "
            "the value is not shown, as it may hold a password"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in _DRIVERS:
        raise ConfigurationError(
            f"store.url: unsupported database {backend!r}; use sqlite:/// or postgresql://"
        )
    driver, _module, _extra = _DRIVERS[backend]
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def resolve_sqlite_path(url: str, folder: Path) -> str:
    """`url` with a relative SQLite file path taken from `folder`; any other URL as given
    (an absolute path, an in-memory database, PostgreSQL, or what is no URL at all)."""
    path = _sqlite_file(url)
    if path is None or path.is_absolute():
        return url
    resolved = make_url(url).set(database=str((folder / path).resolve()))
    return resolved.render_as_string(hide_password=False)


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL, as written; None for another database, an in-memory one, a
    `uri=true` filename, or what cannot be parsed (`async_url` reports that)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    if parsed.get_backend_name() != "sqlite" or "uri" in parsed.query:
        return None
    if parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _check_driver(url: str) -> None:
    backend = make_url(url).get_backend_name()
    _driver, module, extra = _DRIVERS[backend]
    try:
        __import__(module)
    except ImportError:
        raise ConfigurationError(
            f"store: {backend} needs the {module} driver: pip install '{extra}'"
        ) from None


class SqlStore:
    """Sessions and the usage ledger in one SQL database.

    Args:
        url: `sqlite:///path.db` or `postgresql://user@host/db` (the async drivers are chosen
            for you).
        history_turns: How many of a session's latest turns a run loads into its prompt.
        retention_days: `prune()` removes sessions untouched for longer, and idempotency keys
            expire that long after their claim; None keeps them all.
        lease_s: How long a run's hold on its session, or its claim on an idempotency key, lasts
            without renewal (renewed every third of it while the run goes): the longest a
            crashed run keeps its session busy or its key in progress.
        should_create: False for a tool that only looks at an existing store (a usage report):
            opening a SQLite file that does not exist is then a `ConfigurationError` naming
            it, and no file is created.

    A relative SQLite path is relative to the working directory, as SQLite takes it;
    `from_config()` takes it from the actor file's folder instead.
    """

    def __init__(
        self,
        url: str = DEFAULT_STORE_URL,
        *,
        history_turns: int = 50,
        retention_days: int | None = None,
        lease_s: float = 30.0,
        should_create: bool = True,
    ) -> None:
        self.url = async_url(url)
        self.history_turns = history_turns
        self.retention_days = retention_days
        self.lease_s = lease_s
        self.should_create = should_create
        self._engine: AsyncEngine | None = None

    @property
    def shown_url(self) -> str:
        """The database URL fit for a log line or a banner: as a config writes it (no async
        driver), its password and query hidden."""
        parsed = make_url(self.url)
        plain = parsed.set(drivername=parsed.get_backend_name(), query={})
        return plain.render_as_string(hide_password=True)

    @classmethod
    def from_config(
        cls, config: StoreConfig, *, config_dir: Path | None = None, should_create: bool = True
    ) -> SqlStore:
        """The store an actor config's `store:` describes. A relative SQLite path in its `url`
        is taken from `config_dir`, the folder of the actor file it was read from (so the
        store is the same from whatever folder a command runs); without one, from the working
        directory.

        Raises:
            ConfigurationError: the URL is not a database URL we support.
        """
        url = config.url if config_dir is None else resolve_sqlite_path(config.url, config_dir)
        return cls(
            url,
            history_turns=config.history_turns,
            retention_days=config.retention_days,
            lease_s=config.lease_s,
            should_create=should_create,
        )

    async def open(self) -> None:
        """Connect and bring the schema up to date. Safe to call again.

        Raises:
            ConfigurationError: the database's driver is not installed, or (without
                `should_create`) the SQLite file does not exist.
            StoreError: the database cannot be reached or written.
        """
        if self._engine is not None:
            return
        _check_driver(self.url)
        missing = _sqlite_file(self.url)
        if not self.should_create and missing is not None and not missing.exists():
            raise ConfigurationError(
                f"no store database at {missing.resolve()} (nothing was created)"
            )
        engine = create_async_engine(self.url, **self._engine_options())
        if engine.dialect.name == "sqlite":
            event.listen(engine.sync_engine, "connect", _tune_sqlite)
        try:
            async with engine.begin() as connection:
                await migrate(connection)
        except (SQLAlchemyError, OSError) as exc:  # OSError: asyncpg's refused connection
            await engine.dispose()
            raise StoreError(f"store: cannot open {self.shown_url} ({type(exc).__name__})") from exc
        except BaseException:
            await engine.dispose()
            raise
        self._engine = engine

    def _engine_options(self) -> dict[str, Any]:
        if make_url(self.url).get_backend_name() == "sqlite":
            # Writers from several processes wait for each other instead of failing at once.
            return {"connect_args": {"timeout": 30}}
        return {"pool_size": 10, "max_overflow": 20, "pool_pre_ping": True}

    async def aclose(self) -> None:
        """Close the connection pool; a later use opens it again."""
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.dispose()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("the store is not open: use `async with store:` or `await open()`")
        return self._engine

    # -- a run -----------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def run(
        self,
        *,
        session_id: str | None = None,
        caller: str | None = None,
        run_id: str | None = None,
    ) -> AsyncIterator[StoreRun]:
        """Hold a session (if any) for one run, and keep its ledger.

        Leaving the block without `commit_turn()` marks the run failed or cancelled (from the
        exception) and appends nothing to the session.

        Raises:
            SessionBusyError: another run holds the session.
            SessionNotFoundError: the session belongs to another caller.
        """
        handle = await self.begin_run(
            run_id=run_id or new_run_id(), session_id=session_id, caller=caller
        )
        try:
            yield handle
        except BaseException as exc:
            await finish_despite_cancellation(handle.abort(exc))
            raise
        else:
            await handle.end("ok" if handle.is_committed else "failed")

    async def begin_run(
        self, *, run_id: str, session_id: str | None = None, caller: str | None = None
    ) -> StoreRun:
        """Open run `run_id` in the ledger: claim its session (if any) and load its history.
        End it with `StoreRun.close()` (or `abort()`).

        Raises:
            SessionBusyError: another run holds the session.
            SessionNotFoundError: the session belongs to another caller.
            StoreError: the database could not be written.
        """
        handle = StoreRun(self, run_id, session_id, caller or _NO_CALLER)
        try:
            await handle.start()
        except SQLAlchemyError as exc:
            raise _store_error(f"starting run {run_id}", exc) from exc
        return handle

    # -- reading ---------------------------------------------------------------------------------

    async def history(self, session_id: str, *, caller: str | None = None) -> list[StoredTurn]:
        """Every turn of a session, oldest first; empty for an unknown (or another caller's)
        session."""
        async with self.engine.connect() as connection:
            return await _turns(connection, session_id, caller or _NO_CALLER, limit=None)

    async def session_turns(
        self, session_id: str, *, caller: str | None = None
    ) -> list[StoredTurn] | None:
        """Every turn of a session, oldest first, and last the turn that waits for a person,
        if one does (its `pending` calls): empty for a session whose first run has neither
        answered nor paused yet (a session exists from its first run's start); None when there
        is no such session for this caller (also when it is another caller's)."""
        owner = caller or _NO_CALLER
        async with self.engine.connect() as connection:
            exists = await connection.scalar(
                select(sessions.c.id).where(sessions.c.id == session_id, sessions.c.caller == owner)
            )
            if exists is None:
                return None
            found = await _turns(connection, session_id, owner, limit=None)
            paused = await pause_of_session(connection, session_id, owner)
            if paused is not None:
                earlier = await _earlier_segments(connection, session_id)
                found.append(_waiting_turn(paused, len(found) + 1, earlier))
            return found

    async def delete_session(self, session_id: str, *, caller: str | None = None) -> bool:
        """Remove a session and its turns (its ledger rows stay: they are the bill).
        Returns whether there was such a session for this caller."""
        async with self.engine.begin() as connection:
            return await _delete_sessions(
                connection,
                (sessions.c.id == session_id) & (sessions.c.caller == (caller or _NO_CALLER)),
            )

    async def usage(
        self,
        *,
        session_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> UsageReport:
        """The ledger's rows (oldest first), filtered, with their totals."""
        query = select(llm_calls).order_by(llm_calls.c.recorded_at, llm_calls.c.call_index)
        if session_id is not None:
            query = query.where(llm_calls.c.session_id == session_id)
        if since is not None:
            query = query.where(llm_calls.c.recorded_at >= since)
        if until is not None:
            query = query.where(llm_calls.c.recorded_at < until)
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return UsageReport(rows=tuple(_ledger_row(row) for row in rows))

    async def prune(self, *, now: datetime | None = None) -> int:
        """Remove sessions untouched for `retention_days` (never the ledger), and idempotency
        keys past their expiry. Returns how many sessions."""
        moment = now or _now()
        async with self.engine.begin() as connection:
            await prune_keys(connection, now=moment)
            ids = await self._idle_session_ids(connection, moment)
            await _delete_sessions(connection, sessions.c.id.in_(ids))
        return len(ids)

    async def idle_sessions(self, *, now: datetime | None = None) -> list[str]:
        """The ids of the sessions `prune()` would remove now, oldest first; it removes
        nothing. Empty without `retention_days`."""
        async with self.engine.connect() as connection:
            return await self._idle_session_ids(connection, now or _now())

    async def _idle_session_ids(self, connection: AsyncConnection, now: datetime) -> list[str]:
        """Sessions untouched for `retention_days` that no run holds."""
        if self.retention_days is None:
            return []
        cutoff = now - timedelta(days=self.retention_days)
        idle = (sessions.c.updated_at < cutoff) & (sessions.c.running_run_id.is_(None))
        query = select(sessions.c.id).where(idle).order_by(sessions.c.updated_at, sessions.c.id)
        return list((await connection.execute(query)).scalars().all())

    # -- idempotency keys (see `cleveractors.store.idempotency`) ----------------------------------

    # -- paused runs -----------------------------------------------------------------------------

    async def paused_run(self, run_id: str, *, caller: str | None = None) -> PausedRun:
        """The state of paused run `run_id`, for its own caller.

        Raises:
            RunNotFoundError: no paused run by that id for this caller.
            ApprovalConflictError: it was resumed already, or a new message answered it.
            StoreError: the database could not be read.
        """
        try:
            async with self.engine.connect() as connection:
                return await find_pause(connection, run_id, caller or _NO_CALLER)
        except SQLAlchemyError as exc:
            raise _store_error(f"reading paused run {run_id}", exc) from exc

    async def run_status(self, run_id: str, *, caller: str | None = None) -> SegmentStatus | None:
        """How run segment `run_id` stands, for its own caller: `running` (or its process
        died), `answered`, `failed`, `cancelled`, `paused` (it waits for decisions), `resumed`
        or `superseded` (see `SegmentStatus`); None for no such run of this caller's.

        Raises:
            StoreError: the database could not be read.
        """
        try:
            async with self.engine.connect() as connection:
                return await segment_status(connection, run_id, caller or _NO_CALLER)
        except SQLAlchemyError as exc:
            raise _store_error(f"reading run {run_id}", exc) from exc

    async def approvals(
        self,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        caller: str | None = None,
    ) -> list[ApprovalRecord]:
        """Every decision on a gated call (who, when, what, the edited arguments, the reason),
        oldest first; by paused run segment, by session, by owner (all when None)."""
        async with self.engine.connect() as connection:
            return await list_approvals(
                connection, run_id=run_id, session_id=session_id, caller=caller
            )

    async def claim_idempotency_key(
        self, *, caller: str | None, key: str, request_digest: str, run_id: str
    ) -> IdempotencyClaim:
        """Claim `key` of `caller` for the run `run_id`, before the run spends anything.

        Returns `Claimed()` (run the request, renew the claim every third of `lease_s` while
        it goes, then settle it) or `Replay(result)` (the request was answered: give back that
        run's result and run nothing). A key past its expiry (`retention_days` after its claim)
        or whose run's lease ran out (its process died) is claimed anew.

        Args:
            request_digest: `request_digest(message, history, session_id)` of the request.

        Raises:
            IdempotencyKeyInProgressError: the key's run is still going.
            IdempotencyKeyMismatchError: the key was claimed for a different request.
            ConfigurationError: the key is empty or too long.
            StoreError: the database failed, or the answer kept for the key cannot be read.
        """
        return await claim_key(
            self.engine,
            caller=caller or _NO_CALLER,
            key=key,
            request_digest=request_digest,
            run_id=run_id,
            now=_now(),
            lease_s=self.lease_s,
            retention_days=self.retention_days,
        )

    async def renew_idempotency_key(self, *, caller: str | None, key: str, run_id: str) -> bool:
        """Extend the run's claim on `key` by `lease_s`; False when the run no longer holds it.

        Raises:
            StoreError: the database failed.
        """
        return await renew_key(
            self.engine,
            caller=caller or _NO_CALLER,
            key=key,
            run_id=run_id,
            now=_now(),
            lease_s=self.lease_s,
        )

    async def settle_idempotency_key(
        self, *, caller: str | None, key: str, run_id: str, result: ExecutionResult
    ) -> bool:
        """Keep the run's answered `result` for every repeat, or release the key when `result`
        failed or was cancelled (its `error` set), so a retry runs anew. Only the claiming run
        settles: False, and nothing changed, when `run_id` holds no claim on the key.

        Raises:
            StoreError: the database failed.
        """
        return await settle_key(
            self.engine, caller=caller or _NO_CALLER, key=key, run_id=run_id, result=result
        )


class StoreRun:
    """One run's hold on its session and its ledger; made by `SqlStore.run()`."""

    def __init__(self, store: SqlStore, run_id: str, session_id: str | None, caller: str) -> None:
        self.store = store
        self.run_id = run_id
        self.session_id = session_id
        self.caller = caller
        self.history: list[BaseMessage] = []
        """The session's latest `history_turns` turns, flattened, as the run found them."""
        self.is_committed = False
        self.failure: tuple[RunStatus, ExecutionResult] | None = None
        """How the run failed, when it ended without an answer (set by `settle`)."""
        self._lease: asyncio.Task[None] | None = None

    async def start(self) -> None:
        async with self.store.engine.begin() as connection:
            if self.session_id is not None:
                await self._claim_session(connection)
                found = await _turns(
                    connection, self.session_id, self.caller, limit=self.store.history_turns
                )
                self.history = [message for turn in found for message in turn.messages]
            await connection.execute(
                runs.insert().values(
                    run_id=self.run_id,
                    session_id=self.session_id,
                    caller=self.caller,
                    status="running",
                    started_at=_now(),
                )
            )
        if self.session_id is not None:
            self._lease = asyncio.create_task(self._renew_lease())

    async def _claim_session(self, connection: AsyncConnection) -> None:
        now = _now()
        insert = (postgresql if connection.dialect.name == "postgresql" else sqlite).insert
        await connection.execute(
            insert(sessions)
            .values(id=self.session_id, caller=self.caller, created_at=now, updated_at=now)
            .on_conflict_do_nothing(index_elements=["id"])
        )
        claimed = await connection.execute(
            update(sessions)
            .where(
                sessions.c.id == self.session_id,
                sessions.c.caller == self.caller,
                or_(sessions.c.running_run_id.is_(None), sessions.c.lease_until < now),
            )
            .values(running_run_id=self.run_id, lease_until=now + self._lease_span())
        )
        if claimed.rowcount == 1:
            return
        owner = await connection.scalar(
            select(sessions.c.caller).where(sessions.c.id == self.session_id)
        )
        if owner != self.caller:
            raise SessionNotFoundError(f"no session {self.session_id!r}")
        raise SessionBusyError(f"session {self.session_id!r} is busy with another run")

    def _lease_span(self) -> timedelta:
        return timedelta(seconds=self.store.lease_s)

    async def _renew_lease(self) -> None:
        while True:
            await asyncio.sleep(self.store.lease_s / 3)
            try:
                async with self.store.engine.begin() as connection:
                    renewed = await connection.execute(
                        update(sessions)
                        .where(sessions.c.running_run_id == self.run_id)
                        .values(lease_until=_now() + self._lease_span())
                    )
            except Exception:  # the next renewal may succeed; the lease holds until then
                logger.warning("store: renewing the lease of run %s failed", self.run_id)
                continue
            if renewed.rowcount != 1:
                logger.warning(
                    "store: run %s lost its lease on session %r; its turn will not be appended",
                    self.run_id,
                    self.session_id,
                )
                return

    async def record_call(self, call: LLMCallUsage) -> None:
        """Write one LLM call's ledger row now. Writing it again is a no-op.

        Raises:
            StoreError: the row could not be written.
        """
        await self.record_calls((call,))

    async def record_calls(self, calls: Sequence[LLMCallUsage]) -> None:
        """Write ledger rows in one transaction; rows already written are left as they are."""
        if not calls:
            return
        rows = [_call_values(self, call) for call in calls]
        try:
            async with self.store.engine.begin() as connection:
                insert = (postgresql if connection.dialect.name == "postgresql" else sqlite).insert
                await connection.execute(insert(llm_calls).values(rows).on_conflict_do_nothing())
        except SQLAlchemyError as exc:
            raise StoreError(
                f"store: the ledger rows of run {self.run_id} could not be written "
                f"({type(exc).__name__})"
            ) from exc

    async def close(self, outcome: RunOutcome) -> RunOutcome:
        """Settle the run and end it: the ledger whole, the turn appended if it answered, the
        session freed. Never raises: a write that fails becomes the outcome's `StoreError`."""
        settled = await self.settle(outcome)
        try:
            await self.end("ok" if self.is_committed else "failed")
        except SQLAlchemyError as exc:
            return _with_store_error(settled, _store_error(f"ending run {self.run_id}", exc))
        return settled

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        """Make the ledger whole (calls recorded on the way out of a failure included) and, for
        an answered run, append its turn. A write that fails turns the outcome into a failure."""
        result = outcome.result
        try:
            await self.record_calls(result.usage_by_call)
            if outcome.pause is not None:
                await self.commit_pause(outcome.pause, result)
            elif outcome.error is None:
                await self.commit_turn(outcome.turn, result)
            else:
                self.failure = ("cancelled" if result.cancelled else "failed", result)
        except (StoreError, SQLAlchemyError) as exc:
            failure = (
                exc if isinstance(exc, StoreError) else _store_error(f"run {self.run_id}", exc)
            )
            self.failure = ("failed", result)
            return _with_store_error(outcome, failure)
        return outcome

    async def claim_pause(self, paused: PausedRun, checked: CheckedDecisions) -> None:
        """Take `paused` for this run's resumption and record the decisions, made by this run's
        caller.

        Raises:
            ApprovalConflictError: another resumption (or a new message) took it first.
            StoreError: the database could not be written.
        """
        try:
            async with self.store.engine.begin() as connection:
                await claim_pause(
                    connection,
                    paused,
                    checked,
                    resumed_in=self.run_id,
                    decided_by=self.caller or None,
                )
        except SQLAlchemyError as exc:
            raise _store_error(f"resuming run {paused.run_id}", exc) from exc

    async def supersede_waiting_run(self, answer: SupersededAnswers) -> list[BaseMessage]:
        """End the session's paused run, if one waits, its calls answered by `answer` (a new
        message came instead of decisions); returns its turn's messages (empty when none
        waits). The run holds the session, so nothing resumes it meanwhile.

        Raises:
            StoreError: the database could not be written.
        """
        if self.session_id is None:
            return []
        try:
            async with self.store.engine.begin() as connection:
                paused = await pause_of_session(connection, self.session_id, self.caller)
                if paused is None:
                    return []
                return await supersede_pause(
                    connection, paused, answer(paused), by_run=self.run_id, caller=self.caller
                )
        except SQLAlchemyError as exc:
            raise _store_error(f"declining the waiting calls of {self.session_id!r}", exc) from exc

    async def commit_pause(self, paused: PausedRun, result: ExecutionResult) -> None:
        """Keep the pause, mark the run `paused` and free its session, in one transaction."""
        async with self.store.engine.begin() as connection:
            await keep_pause(connection, paused, self.caller)
            await connection.execute(_finish(self.run_id, "paused", result))
            await self._release(connection)
        self.is_committed = True

    async def commit_turn(self, messages: Sequence[BaseMessage], result: ExecutionResult) -> None:
        """Append the run's whole turn to its session and close the run, in one transaction."""
        async with self.store.engine.begin() as connection:
            if self.session_id is not None:
                await self._append_turn(connection, messages)
            await connection.execute(_finish(self.run_id, "ok", result))
            await self._release(connection)
        self.is_committed = True

    async def _append_turn(
        self, connection: AsyncConnection, messages: Sequence[BaseMessage]
    ) -> None:
        now = _now()
        held = await connection.execute(
            update(sessions)
            .where(sessions.c.id == self.session_id, sessions.c.running_run_id == self.run_id)
            .values(updated_at=now)
        )
        if held.rowcount != 1:
            # The lease ran out (the run stalled longer than `lease_s`) and another run may hold
            # the session now: appending would interleave two runs' turns.
            raise StoreError(
                f"store: run {self.run_id} no longer holds session {self.session_id!r} "
                "(its lease ran out); the turn is not appended"
            )
        last = await connection.scalar(
            select(func.max(turns.c.position)).where(turns.c.session_id == self.session_id)
        )
        await connection.execute(
            turns.insert().values(
                session_id=self.session_id,
                position=(last or 0) + 1,
                run_id=self.run_id,
                created_at=now,
                messages=json.dumps(messages_to_dict(list(messages))),
            )
        )

    async def abort(self, error: BaseException) -> None:
        """End a run that `error` stopped before it had an outcome (a cancellation before it
        began): marked from the error, its session freed."""
        await self.end(_ended_by(error), error_type=type(error).__name__)

    async def end(self, status: RunStatus, *, error_type: str | None = None) -> None:
        """Stop renewing the lease; a run not committed is marked and its session freed."""
        if self._lease is not None:
            self._lease.cancel()
            await asyncio.wait({self._lease})  # its end; a cancellation of ours still reaches us
        if self.is_committed:
            return
        values: dict[str, object] = {"status": status, "finished_at": _now()}
        if self.failure is not None:
            status, result = self.failure
            values.update(_totals(result), status=status)
            error_type = result.error.type if result.error is not None else error_type
        values["error_type"] = error_type
        async with self.store.engine.begin() as connection:
            await connection.execute(
                update(runs).where(runs.c.run_id == self.run_id).values(values)
            )
            await self._release(connection)

    async def _release(self, connection: AsyncConnection) -> None:
        if self.session_id is not None:
            await connection.execute(
                update(sessions)
                .where(sessions.c.running_run_id == self.run_id)
                .values(running_run_id=None, lease_until=None)
            )


# -- rows ----------------------------------------------------------------------------------------


def _tune_sqlite(dbapi_connection: Any, _record: object) -> None:
    # WAL lets readers go on while one process writes; NORMAL sync is durable at each commit
    # in WAL mode except across a power loss, which is the usual trade for a local ledger.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _call_values(run: StoreRun, call: LLMCallUsage) -> dict[str, object]:
    return {
        "run_id": run.run_id,
        "call_index": call.index,
        "session_id": run.session_id,
        "caller": run.caller,
        "recorded_at": _now(),
        "purpose": call.purpose,
        "round": call.round,
        "attempt": call.attempt,
        "status": call.status,
        "prompt_tokens": call.usage.prompt_tokens,
        "completion_tokens": call.usage.completion_tokens,
        "estimated": call.usage.estimated,
        "cache_read_tokens": call.usage.cache_read_tokens,
        "cache_write_tokens": call.usage.cache_write_tokens,
        "reasoning_tokens": call.usage.reasoning_tokens,
        "provider": call.provider,
        "model": call.model,
        "cost_usd": _money(call.cost_usd),
        "trace_id": call.trace_id,
        "span_id": call.span_id,
    }


def _money(cost: Decimal | None) -> str | None:
    """A cost as exact decimal text (the column is a string: no float ever holds money)."""
    return None if cost is None else str(cost)


def _totals(result: ExecutionResult) -> dict[str, object]:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "estimated": result.usage_estimated,
        "cost_usd": _money(result.cost_usd),
    }


def _finish(run_id: str, status: RunStatus, result: ExecutionResult) -> Any:
    values = {"status": status, "finished_at": _now(), **_totals(result)}
    return update(runs).where(runs.c.run_id == run_id).values(values)


def _ended_by(error: BaseException) -> RunStatus:
    """How a run that ended with `error` is marked in the ledger."""
    return "cancelled" if isinstance(error, asyncio.CancelledError) else "failed"


def _store_error(doing: str, cause: SQLAlchemyError) -> StoreError:
    failure = StoreError(f"store: {type(cause).__name__} while {doing}")
    failure.__cause__ = cause
    return failure


def _with_store_error(outcome: RunOutcome, failure: StoreError) -> RunOutcome:
    """The run's outcome, failed by the store: its usage kept, the store's error on it."""
    result = outcome.result.model_copy(update={"error": ErrorInfo.from_exception(failure)})
    return RunOutcome(result, failure, outcome.turn)


def _ledger_row(row: Row[Any]) -> LedgerRow:
    return LedgerRow(
        run_id=row.run_id,
        call_index=row.call_index,
        session_id=row.session_id,
        caller=row.caller or None,
        recorded_at=_as_utc(row.recorded_at),
        purpose=row.purpose,
        round=row.round,
        attempt=row.attempt,
        status=row.status,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        estimated=row.estimated,
        cache_read_tokens=row.cache_read_tokens,
        cache_write_tokens=row.cache_write_tokens,
        reasoning_tokens=row.reasoning_tokens,
        provider=row.provider,
        model=row.model,
        cost_usd=None if row.cost_usd is None else Decimal(row.cost_usd),
        trace_id=row.trace_id,
        span_id=row.span_id,
    )


async def _turns(
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
    earlier = await _earlier_segments(connection, session_id) if rows else {}
    return [
        StoredTurn(
            position=row.position,
            run_id=row.run_id,
            created_at=_as_utc(row.created_at),
            messages=tuple(messages_from_dict(json.loads(row.messages))),
            segments=_segments(row.run_id, earlier),
        )
        for row in reversed(rows)
    ]


async def _earlier_segments(connection: AsyncConnection, session_id: str) -> dict[str, str]:
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


def _waiting_turn(paused: PausedRun, position: int, earlier: dict[str, str]) -> StoredTurn:
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


async def _delete_sessions(connection: AsyncConnection, which: Any) -> bool:
    ids = select(sessions.c.id).where(which).scalar_subquery()
    await connection.execute(delete(turns).where(turns.c.session_id.in_(ids)))
    removed = await connection.execute(delete(sessions).where(which))
    return removed.rowcount > 0
