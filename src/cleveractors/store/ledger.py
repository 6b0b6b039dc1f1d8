"""The usage ledger's rows: one per LLM call, keyed `(run_id, call_index)` and written with ON
CONFLICT DO NOTHING, so a write retried after a transient error never doubles a row; and one
`runs` row per run, with its status and totals.

Money is exact decimal text (the columns are strings: no float ever holds money).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.result import ExecutionResult
from cleveractors.store.dialects import as_utc, insert_for, utc_now
from cleveractors.store.records import LedgerRow, RunStatus
from cleveractors.store.schema import llm_calls, runs
from cleveractors.usage import LLMCallUsage

if TYPE_CHECKING:
    from cleveractors.store.spend import SpendAccount

__all__ = [
    "ended_by",
    "finish_run",
    "open_run",
    "read_ledger",
    "run_totals",
    "write_calls",
]


async def open_run(
    connection: AsyncConnection, run_id: str, session_id: str | None, caller: str
) -> None:
    await connection.execute(
        runs.insert().values(
            run_id=run_id,
            session_id=session_id,
            caller=caller,
            status="running",
            started_at=utc_now(),
        )
    )


async def write_calls(
    connection: AsyncConnection,
    calls: Sequence[LLMCallUsage],
    *,
    run_id: str,
    session_id: str | None,
    caller: str,
    spend: SpendAccount | None = None,
) -> list[int]:
    """One row per call; rows already written are left as they are. With `spend`, the calls'
    reservations are settled in the same statement (PostgreSQL) or transaction: returns the
    indices of the calls settled."""
    rows = [_call_values(call, run_id, session_id, caller) for call in calls]
    # One row as a mapping: SQLAlchemy caches that statement's compiled form (a list of rows,
    # never), and a run writes its calls one at a time.
    values = rows[0] if len(rows) == 1 else rows
    insert = insert_for(connection)(llm_calls).values(values).on_conflict_do_nothing()
    if spend is None:
        await connection.execute(insert)
        return []
    return await spend.write_settled(connection, insert, calls)


async def finish_run(
    connection: AsyncConnection, run_id: str, status: RunStatus, values: dict[str, object]
) -> None:
    """Mark the run ended: its status, when, and `values` (its totals, its error type)."""
    ended = {"status": status, "finished_at": utc_now(), **values}
    await connection.execute(update(runs).where(runs.c.run_id == run_id).values(ended))


def run_totals(result: ExecutionResult) -> dict[str, object]:
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "estimated": result.usage_estimated,
        "cost_usd": _money(result.cost_usd),
    }


def ended_by(error: BaseException) -> RunStatus:
    """How a run that ended with `error` is marked in the ledger."""
    return "cancelled" if isinstance(error, asyncio.CancelledError) else "failed"


async def read_ledger(
    connection: AsyncConnection,
    *,
    session_id: str | None,
    since: datetime | None,
    until: datetime | None,
) -> tuple[LedgerRow, ...]:
    """The ledger's rows, oldest first, filtered."""
    query = select(llm_calls).order_by(llm_calls.c.recorded_at, llm_calls.c.call_index)
    if session_id is not None:
        query = query.where(llm_calls.c.session_id == session_id)
    if since is not None:
        query = query.where(llm_calls.c.recorded_at >= since)
    if until is not None:
        query = query.where(llm_calls.c.recorded_at < until)
    rows = (await connection.execute(query)).all()
    return tuple(_ledger_row(row) for row in rows)


def _call_values(
    call: LLMCallUsage, run_id: str, session_id: str | None, caller: str
) -> dict[str, object]:
    return {
        "run_id": call.run_id or run_id,
        "parent_run_id": call.parent_run_id,
        "call_index": call.index,
        "session_id": session_id,
        "caller": caller,
        "recorded_at": utc_now(),
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
        "cache_savings_usd": _money(call.cache_savings_usd),
        "trace_id": call.trace_id,
        "span_id": call.span_id,
    }


def _money(cost: Decimal | None) -> str | None:
    """A cost as exact decimal text."""
    return None if cost is None else str(cost)


def _savings(row: Row[Any]) -> Decimal | None:
    """The row's saving; for a priced row written before savings were kept, 0 when nothing of
    its prompt was cached (else unknown)."""
    if row.cache_savings_usd is not None:
        return Decimal(row.cache_savings_usd)
    nothing_cached = not (row.cache_read_tokens or row.cache_write_tokens)
    return Decimal(0) if row.cost_usd is not None and nothing_cached else None


def _ledger_row(row: Row[Any]) -> LedgerRow:
    return LedgerRow(
        run_id=row.run_id,
        call_index=row.call_index,
        session_id=row.session_id,
        caller=row.caller or None,
        recorded_at=as_utc(row.recorded_at),
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
        cache_savings_usd=_savings(row),
        trace_id=row.trace_id,
        span_id=row.span_id,
        parent_run_id=row.parent_run_id,
    )
