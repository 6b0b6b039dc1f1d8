"""Store URLs: the async driver for each database, and SQLite paths taken from a folder."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from cleveractors.errors import ConfigurationError

__all__ = ["DEFAULT_STORE_URL", "async_url", "check_driver", "resolve_sqlite_path", "sqlite_file"]

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
    path = sqlite_file(url)
    if path is None or path.is_absolute():
        return url
    resolved = make_url(url).set(database=str((folder / path).resolve()))
    return resolved.render_as_string(hide_password=False)


def sqlite_file(url: str) -> Path | None:
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


def check_driver(url: str) -> None:
    backend = make_url(url).get_backend_name()
    _driver, module, extra = _DRIVERS[backend]
    try:
        __import__(module)
    except ImportError:
        raise ConfigurationError(
            f"store: {backend} needs the {module} driver: pip install '{extra}'"
        ) from None
