"""What differs between SQLite and PostgreSQL, said once for the store's modules.

- Times: every moment the store writes is UTC (`utc_now()`, the process's clock, for records
  such as when a turn was made); SQLite hands them back without their zone (`as_utc()`).
- Leases are judged by the database's clock, never a process's: `database_time()` is "now"
  (plus a span) as the database reads it in the statement that uses it, so workers whose clocks
  disagree still agree on whether a lease has run out.
- `insert_for()`: the dialect's INSERT, which has ON CONFLICT.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, func, literal
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

__all__ = [
    "as_utc",
    "database_time",
    "insert_for",
    "utc_now",
]

# SQLAlchemy keeps a SQLite DateTime as this text (microseconds, no zone); SQLite's own `%f` is
# seconds with milliseconds, padded here so both compare as text in time order.
_SQLITE_MOMENT = "%Y-%m-%d %H:%M:%f000"


def utc_now() -> datetime:
    """This process's clock, in UTC: when something was made, never whether a lease holds."""
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands timestamps back without their zone; every one we write is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def database_time(
    dialect: str, *, after_s: float = 0.0, at: datetime | None = None
) -> ColumnElement[datetime]:
    """`after_s` seconds after now by the database's clock, read in the statement that uses it
    (PostgreSQL's `now()`, SQLite's `'now'`). With `at`, after that moment instead: a clock a
    caller brings (a test stepping through a lease second by second)."""
    moment_type = DateTime(timezone=True)
    if at is not None:
        return literal(at + timedelta(seconds=after_s), moment_type)
    if dialect == "postgresql":
        return func.now(type_=moment_type) + timedelta(seconds=after_s)
    return func.strftime(_SQLITE_MOMENT, "now", f"{after_s:+.6f} seconds", type_=moment_type)


def insert_for(connection: AsyncConnection) -> Callable[..., Any]:
    """The dialect's `insert`, with `on_conflict_do_nothing` / `on_conflict_do_update`."""
    insert: Callable[..., Any] = (
        postgresql if connection.dialect.name == "postgresql" else sqlite
    ).insert
    return insert
