"""The store's database engine: its URL (the async driver for each database, a SQLite path taken
from a folder), its connection pool, and its schema brought up to date on opening."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from cleveractors.errors import ConfigurationError, StoreError
from cleveractors.store.schema import migrate

__all__ = [
    "DEFAULT_STORE_URL",
    "async_url",
    "open_engine",
    "resolve_sqlite_path",
    "shown_url",
]

DEFAULT_STORE_URL = "sqlite:///cleveractors.db"
"""The store an actor's `store:` uses when it names no `url`: SQLite `cleveractors.db`, in the
actor file's folder."""

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


async def open_engine(url: str, *, should_create: bool) -> AsyncEngine:
    """Connect to `url` (an `async_url`) and bring its schema up to date.

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
    engine = create_async_engine(url, **_engine_options(backend))
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
    return engine


def _engine_options(backend: str) -> dict[str, Any]:
    if backend == "sqlite":
        # Writers from several processes wait for each other instead of failing at once.
        return {"connect_args": {"timeout": 30}}
    return {"pool_size": 10, "max_overflow": 20, "pool_pre_ping": True}


def _tune_sqlite(dbapi_connection: Any, _record: object) -> None:
    # WAL lets readers go on while one process writes; NORMAL sync is durable at each commit
    # in WAL mode except across a power loss, which is the usual trade for a local ledger.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
