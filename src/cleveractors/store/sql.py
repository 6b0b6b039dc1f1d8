"""`SqlStore`: sessions and an append-only usage ledger on SQLite or PostgreSQL.

    async with SqlStore("sqlite:///cleveractors.db") as store:
        async with store.run(session_id="s-1", caller="key-1") as run:
            history = run.history                  # the session's last turns, loaded in one query
            await run.record_call(call)            # one ledger row per LLM call, as it happens
            await run.commit_turn(messages, result)  # the new turn, atomically, on an answer

A session is held by one run at a time, across processes: `run()` takes a lease on the session
row with one conditional UPDATE (atomic on both databases), judged by the database's clock, and
renews it while the run goes, so a second run gets `SessionBusyError` at once, and a run whose
process was killed frees the session when its lease runs out. Ledger rows are keyed
`(run_id, call_index)` and inserted with ON CONFLICT DO NOTHING, so a write retried after a
transient error never doubles a row.

The rows are written by the modules beside this one: `sessions` (holds and turns), `ledger`,
`idempotency`, `pauses`; `run` holds one run from its start to its settling; `engine` opens the
database and migrates its `schema`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from sqlalchemy.exc import SQLAlchemyError

from cleveractors.approvals import ApprovalRecord, PausedRun
from cleveractors.config import StoreConfig
from cleveractors.errors import ConfigurationError
from cleveractors.result import ExecutionResult
from cleveractors.runs import finish_despite_cancellation, new_run_id
from cleveractors.store.dialects import utc_now
from cleveractors.store.engine import (
    CONNECTION_WAIT_S,
    DEFAULT_STORE_URL,
    GatedEngine,
    async_url,
    open_engine,
    resolve_sqlite_path,
    shown_url,
)
from cleveractors.store.idempotency import (
    IdempotencyClaim,
    claim_key,
    prune_keys,
    renew_key,
    settle_key,
)
from cleveractors.store.leases import Lease
from cleveractors.store.ledger import read_ledger
from cleveractors.store.pauses import (
    find_pause,
    list_approvals,
    pause_of_session,
    run_segments,
    segment_status,
)
from cleveractors.store.records import SegmentStatus, StoredTurn, UsageReport
from cleveractors.store.run import StoreRun, store_error
from cleveractors.store.schema import sessions
from cleveractors.store.sessions import (
    delete_sessions,
    earlier_segments,
    idle_session_ids,
    read_turns,
    session_exists,
    waiting_turn,
)

__all__ = ["DEFAULT_STORE_URL", "SqlStore", "StoreRun", "resolve_sqlite_path"]

_NO_CALLER = ""


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
        max_connections: The most database connections the store opens at once (30 on
            PostgreSQL, 15 on a SQLite file when None). Work that finds them all busy waits
            in its turn, first come first served.
        connection_wait_s: How long work waits for a connection before it fails with
            `StoreError` (a run that cannot start fails so, before the web routes send any
            header; keep it below the timeouts of the clients and proxies in front).

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
        max_connections: int | None = None,
        connection_wait_s: float = CONNECTION_WAIT_S,
    ) -> None:
        if max_connections is not None and max_connections < 1:
            raise ConfigurationError(
                f"store: max_connections must be 1 or more, got {max_connections}"
            )
        self.url = async_url(url)
        self.history_turns = history_turns
        self.retention_days = retention_days
        self.lease_s = lease_s
        self.should_create = should_create
        self.max_connections = max_connections
        self.connection_wait_s = connection_wait_s
        self._engine: GatedEngine | None = None

    @property
    def shown_url(self) -> str:
        """The database URL fit for a log line or a banner: as a config writes it (no async
        driver), its password and query hidden."""
        return shown_url(self.url)

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
            max_connections=config.max_connections,
            connection_wait_s=config.connection_wait_s,
        )

    async def open(self) -> None:
        """Connect and bring the schema up to date. Safe to call again.

        Raises:
            ConfigurationError: the database's driver is not installed, or (without
                `should_create`) the SQLite file does not exist.
            StoreError: the database cannot be reached or written.
        """
        if self._engine is None:
            self._engine = await open_engine(
                self.url,
                should_create=self.should_create,
                max_connections=self.max_connections,
                wait_s=self.connection_wait_s,
            )

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
    def engine(self) -> GatedEngine:
        """The database, each connection taken in its turn."""
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
            raise store_error(f"starting run {run_id}", exc) from exc
        return handle

    # -- reading ---------------------------------------------------------------------------------

    async def history(self, session_id: str, *, caller: str | None = None) -> list[StoredTurn]:
        """Every turn of a session, oldest first; empty for an unknown (or another caller's)
        session."""
        async with self.engine.connect() as connection:
            return await read_turns(connection, session_id, caller or _NO_CALLER, limit=None)

    async def session_turns(
        self, session_id: str, *, caller: str | None = None
    ) -> list[StoredTurn] | None:
        """Every turn of a session, oldest first, and last the turn that waits for a person,
        if one does (its `pending` calls): empty for a session whose first run has neither
        answered nor paused yet (a session exists from its first run's start); None when there
        is no such session for this caller (also when it is another caller's)."""
        owner = caller or _NO_CALLER
        async with self.engine.begin() as connection:  # it marks expired calls first
            if not await session_exists(connection, session_id, owner):
                return None
            found = await read_turns(connection, session_id, owner, limit=None)
            paused = await pause_of_session(connection, session_id, owner)
            if paused is not None:
                earlier = await earlier_segments(connection, session_id)
                found.append(waiting_turn(paused, len(found) + 1, earlier))
            return found

    async def delete_session(self, session_id: str, *, caller: str | None = None) -> bool:
        """Remove a session and its turns (its ledger rows stay: they are the bill).
        Returns whether there was such a session for this caller."""
        async with self.engine.begin() as connection:
            return await delete_sessions(
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
        async with self.engine.connect() as connection:
            rows = await read_ledger(connection, session_id=session_id, since=since, until=until)
        return UsageReport(rows=rows)

    async def prune(self, *, now: datetime | None = None) -> int:
        """Remove sessions untouched for `retention_days` (never the ledger), and idempotency
        keys past their expiry. Returns how many sessions."""
        moment = now or utc_now()
        async with self.engine.begin() as connection:
            await prune_keys(connection, now=now)
            ids = await idle_session_ids(connection, now=moment, retention_days=self.retention_days)
            await delete_sessions(connection, sessions.c.id.in_(ids))
        return len(ids)

    async def idle_sessions(self, *, now: datetime | None = None) -> list[str]:
        """The ids of the sessions `prune()` would remove now, oldest first; it removes
        nothing. Empty without `retention_days`."""
        async with self.engine.connect() as connection:
            return await idle_session_ids(
                connection, now=now or utc_now(), retention_days=self.retention_days
            )

    # -- paused runs -----------------------------------------------------------------------------

    async def paused_run(self, run_id: str, *, caller: str | None = None) -> PausedRun:
        """The state of paused run `run_id`, for its own caller.

        Raises:
            RunNotFoundError: no paused run by that id for this caller.
            ApprovalConflictError: it was resumed already, or a new message answered it.
            StoreError: the database could not be read.
        """
        try:
            async with self.engine.begin() as connection:  # it marks expired calls first
                return await find_pause(connection, run_id, caller or _NO_CALLER)
        except SQLAlchemyError as exc:
            raise store_error(f"reading paused run {run_id}", exc) from exc

    async def run_status(self, run_id: str, *, caller: str | None = None) -> SegmentStatus | None:
        """How run segment `run_id` stands, for its own caller: `running` (or its process
        died), `answered`, `failed`, `cancelled`, `paused` (it waits for decisions), `expired`
        (every call it waited on expired), `resumed` or `superseded` (see `SegmentStatus`); None
        for no such run of this caller's.

        Raises:
            StoreError: the database could not be read.
        """
        try:
            async with self.engine.begin() as connection:  # it marks expired calls first
                return await segment_status(connection, run_id, caller or _NO_CALLER)
        except SQLAlchemyError as exc:
            raise store_error(f"reading run {run_id}", exc) from exc

    async def approvals(
        self,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        caller: str | None = None,
    ) -> list[ApprovalRecord]:
        """Every decision on a gated call (who, when, what, the edited arguments, the reason),
        oldest first; by paused run segment, by session, by owner (all when None). A call
        nobody decided before it expired is listed `expired`, decided at its expiry."""
        async with self.engine.begin() as connection:  # it marks expired calls first
            return await list_approvals(
                connection, run_id=run_id, session_id=session_id, caller=caller
            )

    async def run_segments(self, run_id: str) -> list[str]:
        """The ids of the segments of the run that `run_id` is one of, first to last: the first
        run, then each resumption (`resumed_from` links them); `[run_id]` when it never paused.

        Raises:
            StoreError: the database could not be read.
        """
        try:
            async with self.engine.connect() as connection:
                return await run_segments(connection, run_id)
        except SQLAlchemyError as exc:
            raise store_error(f"reading the segments of run {run_id}", exc) from exc

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
            lease_s=self.lease_s,
        )

    def idempotency_lease(
        self, *, caller: str | None, key: str, run_id: str, on_lost: Callable[[], None]
    ) -> Lease:
        """The run's claim on `key`, renewed every third of `lease_s` from this call until the
        end of its `async with` block, as the run's hold on its session is. `on_lost` is called
        once if the claim was taken over by another run (the database was out of reach for a
        whole lease): the request runs there now."""
        return Lease(
            lambda: self.renew_idempotency_key(caller=caller, key=key, run_id=run_id),
            span_s=self.lease_s,
            on_lost=on_lost,
            name=f"the claim of run {run_id} on idempotency key {key!r}",
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
