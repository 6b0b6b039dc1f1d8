"""The store's database engine: its URL (the async driver for each database, a SQLite path taken
from a folder), its connection pool behind a first-come-first-served gate, and its schema
brought up to date on opening.

The gate: SQLAlchemy's async pool does not serve its waiters in turn. A connection given back
goes to whichever checkout runs first, and a request that has just arrived takes it ahead of
one that has waited since long before (its `get()` takes a free connection without queueing,
and a woken waiter that finds none queues again at the back). Under load a few requests wait
far longer than their share, until the pool's timeout fails them, while later ones go ahead.
`GatedEngine` queues every checkout in arrival order (`asyncio.Semaphore` is FIFO) for as many
connections as the pool can open, so the pool itself never has to make anyone wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from cleveractors.errors import ConfigurationError, StoreError
from cleveractors.store.schema import migrate

__all__ = [
    "CONNECTION_WAIT_S",
    "DEFAULT_STORE_URL",
    "GatedEngine",
    "async_url",
    "open_engine",
    "resolve_sqlite_path",
    "shown_url",
]

DEFAULT_STORE_URL = "sqlite:///cleveractors.db"
"""The store an actor's `store:` uses when it names no `url`: SQLite `cleveractors.db`, in the
actor file's folder."""

CONNECTION_WAIT_S = 30.0
"""How long a database operation waits for a connection (in its turn) by default before it
fails with `sqlalchemy.exc.TimeoutError`, which the store reports as a `StoreError`."""

# How many connections a store opens at most, when it is not told: PostgreSQL keeps 10 and opens
# up to 20 more under load; a SQLite file keeps 5 and opens up to 10 more (SQLAlchemy's own
# defaults). An in-memory SQLite database has one connection, shared, taken by one at a time.
_DEFAULT_MAX_CONNECTIONS = {"postgresql": 30, "sqlite": 15}
_KEPT_CONNECTIONS = {"postgresql": 10, "sqlite": 5}

# The async driver for each plain URL scheme, and the extra that installs it.
_DRIVERS = {
    "sqlite": ("sqlite+aiosqlite", "aiosqlite", "cleveractors[store]"),
    "postgresql": ("postgresql+asyncpg", "asyncpg", "cleveractors[postgres]"),
}


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


def shown_url(url: str) -> str:
    """The database URL fit for a log line or a banner: as a config writes it (no async
    driver), its password and query hidden."""
    parsed = make_url(url)
    plain = parsed.set(drivername=parsed.get_backend_name(), query={})
    return plain.render_as_string(hide_password=True)


class GatedEngine:
    """The store's `AsyncEngine` behind a first-come-first-served gate with a place for each
    connection its pool can open: `begin()` and `connect()` as the engine's, but a checkout
    that has to wait is served in its turn, and fails with `sqlalchemy.exc.TimeoutError` after
    `wait_s` (the pool's own wait is never reached).

    Args:
        max_connections: The pool's size and overflow together (1 for the one shared
            connection of an in-memory SQLite database).
    """

    def __init__(
        self, engine: AsyncEngine, *, max_connections: int, wait_s: float = CONNECTION_WAIT_S
    ) -> None:
        self.max_connections = max_connections
        self._engine = engine
        self._wait_s = wait_s
        self._gate = asyncio.Semaphore(max_connections)
        self._waiting = 0

    @property
    def sync_engine(self) -> Engine:
        """The engine's synchronous core, for event listeners (as `AsyncEngine.sync_engine`)."""
        return self._engine.sync_engine

    @property
    def waiting(self) -> int:
        """How many checkouts wait for a connection now."""
        return self._waiting

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a transaction, committed on leaving (rolled back on an error)."""
        async with self._turn(), self._engine.begin() as connection:
            yield connection

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[AsyncConnection]:
        """A connection, given back on leaving."""
        async with self._turn(), self._engine.connect() as connection:
            yield connection

    async def dispose(self) -> None:
        """Close every connection of the pool."""
        await self._engine.dispose()

    @asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        # Held until the connection is back in the pool, so the next in line finds it there.
        self._waiting += 1
        try:
            async with asyncio.timeout(self._wait_s):
                await self._gate.acquire()
        except TimeoutError:
            raise sa_exc.TimeoutError(
                f"every one of the store's {self.max_connections} connections was busy "
                f"for {self._wait_s:g} s"
            ) from None
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._gate.release()


async def open_engine(
    url: str,
    *,
    should_create: bool,
    max_connections: int | None = None,
    wait_s: float = CONNECTION_WAIT_S,
) -> GatedEngine:
    """Connect to `url` (an `async_url`) and bring its schema up to date.

    Args:
        max_connections: The most connections the store opens; None for the database's
            default (30 on PostgreSQL, 15 on a SQLite file).
        wait_s: How long an operation waits for a connection in its turn before it fails.

    Raises:
        ConfigurationError: the database's driver is not installed, or (without
            `should_create`) the SQLite file does not exist.
        StoreError: the database cannot be reached or written.
    """
    _check_driver(url)
    missing = _sqlite_file(url)
    if not should_create and missing is not None and not missing.exists():
        raise ConfigurationError(f"no store database at {missing.resolve()} (nothing was created)")
    backend = make_url(url).get_backend_name()
    limit = max_connections or _DEFAULT_MAX_CONNECTIONS[backend]
    if backend == "sqlite" and missing is None:  # in memory, or a `uri=true` name
        engine = create_async_engine(url, **_SQLITE_OPTIONS)
    else:
        engine = create_async_engine(url, **_engine_options(backend, limit))
    if isinstance(engine.pool, StaticPool):
        # An in-memory database is one connection, shared: two transactions at once on it
        # would commit or roll back each other's work. One at a time, in turn.
        limit = 1
    if backend == "sqlite":
        event.listen(engine.sync_engine, "connect", _tune_sqlite)
    try:
        async with engine.begin() as connection:
            await migrate(connection)
    except (SQLAlchemyError, OSError) as exc:  # OSError: asyncpg's refused connection
        await engine.dispose()
        raise StoreError(f"store: cannot open {shown_url(url)} ({type(exc).__name__})") from exc
    except BaseException:
        await engine.dispose()
        raise
    return GatedEngine(engine, max_connections=limit, wait_s=wait_s)


# Writers from several processes wait for each other instead of failing at once.
_SQLITE_OPTIONS: dict[str, Any] = {"connect_args": {"timeout": 30}}


def _engine_options(backend: str, max_connections: int) -> dict[str, Any]:
    kept = min(_KEPT_CONNECTIONS[backend], max_connections)
    pool = {"pool_size": kept, "max_overflow": max_connections - kept}
    if backend == "sqlite":
        return _SQLITE_OPTIONS | pool
    return pool | {"pool_pre_ping": True}


def _tune_sqlite(dbapi_connection: Any, _record: object) -> None:
    # WAL lets readers go on while one process writes; NORMAL sync is durable at each commit
    # in WAL mode except across a power loss, which is the usual trade for a local ledger.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
