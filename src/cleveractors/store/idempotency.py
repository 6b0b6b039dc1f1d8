"""Idempotency keys: a request sent again under its key is answered once, by one run.

A key is one caller's (another caller's key of the same name is another key) and names one
request, told by `request_digest()`. Its row in `cleveractors_idempotency_keys` goes through:

- **claimed**: the first request's run holds it (`status` "running"), on a lease
  (`claimed_until`, `lease_s` long, judged by the database's clock) that the run renews while
  it goes, as it renews its session's (`SqlStore.idempotency_lease`). A repeat meanwhile is
  refused with `IdempotencyKeyInProgressError`. A claim whose lease ran out belongs to a run
  whose process died (or stalled past its lease): the next request takes it over and runs
  anew. Settling does not need the lease, only the run id, so a
  slow run nobody took over from still settles.
- **answered**: the run settled with an answer; every repeat gets that `ExecutionResult` back
  (`Replay`) and nothing runs.
- **released** (the row deleted): the run failed or was cancelled; a retry runs anew. What the
  failed run spent stays billed in its own ledger rows, under its own run id.

The same key with another request's digest is refused with `IdempotencyKeyMismatchError`,
whatever the state. A key expires `retention_days` after it was claimed (never when that is
None): an expired key is claimed anew as if unseen, and `prune_keys()` deletes it. Every moment
here is the database's (`now=None`); a caller may bring its own clock (`now=`), as tests that
step through a lease do.

Claiming is one INSERT ... ON CONFLICT DO UPDATE ... WHERE <the row is free>, then a read of the
row in the same transaction: on PostgreSQL the upsert locks the row it found (also when its WHERE
is false), on SQLite the INSERT takes the database's write lock, so of two claims of one key,
across processes, exactly one wins, and the loser reads the winner's row.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage, messages_to_dict
from pydantic import ValidationError
from sqlalchemy import Delete, Update, and_, delete, or_, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.errors import (
    ConfigurationError,
    IdempotencyKeyInProgressError,
    IdempotencyKeyMismatchError,
    StoreError,
)
from cleveractors.result import ExecutionResult
from cleveractors.store.dialects import database_time, insert_for
from cleveractors.store.engine import GatedEngine
from cleveractors.store.schema import idempotency_keys

__all__ = [
    "MAX_KEY_LENGTH",
    "Claimed",
    "IdempotencyClaim",
    "Replay",
    "claim_key",
    "prune_keys",
    "renew_key",
    "request_digest",
    "settle_key",
]

MAX_KEY_LENGTH = 255
"""The longest key the store keeps (its column's width)."""

_keys = idempotency_keys.c


@dataclass(frozen=True, slots=True)
class Claimed:
    """The key is now the claiming run's: run the request, renew the claim while it goes, then
    settle the key with the run's result."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The request was answered already: `result` is that run's, to give back unchanged."""

    result: ExecutionResult


IdempotencyClaim = Claimed | Replay
"""What claiming an idempotency key gives: `Claimed` (run the request under the key) or `Replay`
(the request was answered already; give its stored result back, running nothing)."""


def request_digest(
    message: str,
    history: Sequence[BaseMessage | dict[str, object]] | None,
    session_id: str | None,
    *,
    max_output_tokens: int | None = None,
    output_schema: Mapping[str, object] | None = None,
) -> str:
    """The sha256 (hex) of a request's canonical JSON: what an idempotency key is checked against.

    Dicts are taken as they are (their key order does not matter) and LangChain messages as
    `messages_to_dict` writes them, so a request sent again in the same form has the same
    digest; no history and an empty one are the same request. A cap on the output changes the
    answer, so it is part of the request when given; so is the turn's output schema.
    """
    turns = [
        messages_to_dict([turn])[0] if isinstance(turn, BaseMessage) else turn
        for turn in history or ()
    ]
    request: dict[str, object] = {"message": message, "history": turns, "session_id": session_id}
    if max_output_tokens is not None:
        request["max_output_tokens"] = max_output_tokens
    if output_schema is not None:
        request["output_schema"] = output_schema
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def claim_key(
    engine: GatedEngine,
    *,
    caller: str,
    key: str,
    request_digest: str,
    run_id: str,
    lease_s: float,
    retention_days: int | None,
    now: datetime | None = None,
) -> IdempotencyClaim:
    """Claim `key` for `run_id`, or find the answer its request already has.

    Raises:
        IdempotencyKeyInProgressError: another run holds the key for this request.
        IdempotencyKeyMismatchError: the key was claimed for a different request.
        ConfigurationError: the key is empty or longer than `MAX_KEY_LENGTH`.
        StoreError: the database failed, or the answer kept for the key cannot be read.
    """
    _check_key(key)
    async with _writing(f"claiming idempotency key {key!r}", engine) as connection:
        dialect = connection.dialect.name
        retention_s = None if retention_days is None else retention_days * 86_400.0
        claim = {
            "request_digest": request_digest,
            "run_id": run_id,
            "status": "running",
            "result": None,
            "created_at": database_time(dialect, at=now),
            "expires_at": (
                None if retention_s is None else database_time(dialect, after_s=retention_s, at=now)
            ),
            "claimed_until": database_time(dialect, after_s=lease_s, at=now),
        }
        upsert = insert_for(connection)(idempotency_keys).values(caller=caller, key=key, **claim)
        taken = await connection.execute(
            upsert.on_conflict_do_update(
                index_elements=[_keys.caller, _keys.key],
                set_={name: upsert.excluded[name] for name in claim},
                where=_is_free(database_time(dialect, at=now)),
            )
        )
        if taken.rowcount == 1:
            return Claimed()
        row = (await connection.execute(select(idempotency_keys).where(_one(caller, key)))).one()
    if row.request_digest != request_digest:
        raise IdempotencyKeyMismatchError(key=key, run_id=row.run_id)
    if row.status == "answered":
        return Replay(_stored_result(row.result, key=key, run_id=row.run_id))
    raise IdempotencyKeyInProgressError(key=key, run_id=row.run_id)


def _stored_result(stored: str, *, key: str, run_id: str) -> ExecutionResult:
    try:
        return ExecutionResult.model_validate_json(stored)
    except ValidationError as exc:
        # Written by a cleveractors whose results read differently: serving something else, or
        # running the request again, would break the key's promise, so the repeat fails.
        raise StoreError(
            f"store: the answer of run {run_id} kept under idempotency key {key!r} cannot be "
            f"read ({exc.error_count()} errors); its repeats fail until the key expires"
        ) from exc


async def renew_key(
    engine: GatedEngine,
    *,
    caller: str,
    key: str,
    run_id: str,
    lease_s: float,
    now: datetime | None = None,
) -> bool:
    """Extend the claim's lease to `lease_s` from now; False when `run_id` holds no claim on the
    key (it was taken over after its lease ran out, or settled).

    Raises:
        StoreError: the database failed.
    """
    async with _writing(f"renewing idempotency key {key!r}", engine) as connection:
        renewed = await connection.execute(
            update(idempotency_keys)
            .where(_held(caller, key, run_id))
            .values(claimed_until=database_time(connection.dialect.name, after_s=lease_s, at=now))
        )
    return bool(renewed.rowcount == 1)


async def settle_key(
    engine: GatedEngine, *, caller: str, key: str, run_id: str, result: ExecutionResult
) -> bool:
    """Keep an answered `result` for every repeat of the request, or release the key when the
    result is a failure (its `error` set: failed or cancelled). Only the claiming run settles:
    False, and nothing changed, when `run_id` holds no claim on the key.

    Raises:
        StoreError: the database failed.
    """
    held = _held(caller, key, run_id)
    if result.error is None:
        settle: Update | Delete = (
            update(idempotency_keys)
            .where(held)
            .values(status="answered", result=result.model_dump_json(), claimed_until=None)
        )
    else:
        settle = delete(idempotency_keys).where(held)
    async with _writing(f"settling idempotency key {key!r}", engine) as connection:
        settled = await connection.execute(settle)
    return bool(settled.rowcount == 1)


async def prune_keys(connection: AsyncConnection, *, now: datetime | None = None) -> int:
    """Delete the keys past their expiry (none a live run holds); returns how many."""
    moment = database_time(connection.dialect.name, at=now)
    pruned = await connection.execute(
        delete(idempotency_keys).where(_keys.expires_at < moment, _is_free(moment))
    )
    return int(pruned.rowcount)


def _check_key(key: str) -> None:
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ConfigurationError(
            f"an idempotency key must be 1 to {MAX_KEY_LENGTH} characters, got {len(key)}"
        )


def _one(caller: str, key: str) -> Any:
    return (_keys.caller == caller) & (_keys.key == key)


def _held(caller: str, key: str, run_id: str) -> Any:
    """The key's row while `run_id` holds its claim."""
    return _one(caller, key) & (_keys.run_id == run_id) & (_keys.status == "running")


def _is_free(now: Any) -> Any:
    """A row that no longer binds its key: an abandoned claim, or an answer past its expiry."""
    return or_(
        and_(_keys.status == "running", _keys.claimed_until < now),
        and_(_keys.status == "answered", _keys.expires_at < now),
    )


@contextlib.asynccontextmanager
async def _writing(doing: str, engine: GatedEngine) -> AsyncIterator[AsyncConnection]:
    """One transaction; the database's failure becomes a `StoreError` saying what was done."""
    try:
        async with engine.begin() as connection:
            yield connection
    except SQLAlchemyError as exc:
        raise StoreError(f"store: {type(exc).__name__} while {doing}") from exc
