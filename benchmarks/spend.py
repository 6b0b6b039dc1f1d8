"""What a spend limit adds to each LLM call, on PostgreSQL (issue: <= 1 extra round trip per
call, folded into the ledger write where possible).

The same runs, with and without a caller's spend limit, on one throwaway PostgreSQL database:
each run makes three LLM calls (two tool rounds and the answer, from the stub provider, so
the model costs nothing). Round trips are counted on the store's engine with SQLAlchemy event
listeners: every statement, plus the BEGIN and the COMMIT (or ROLLBACK) of each transaction that
is not in autocommit mode, each its own round trip on asyncpg. The CPU is this process's
(`time.process_time`), over all the runs; the database server's is not in it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from report import Row, Target
from sqlalchemy import event

from cleveractors import ActorExecutor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The test tree's PostgreSQL helper (initdb in a temporary folder, on 127.0.0.1).
from features.support.postgres import TemporaryPostgres

SECTION = "Spend limits (PostgreSQL)"
ROUND_TRIP_TARGET = Target(1.0)
CALLS_PER_RUN = 3
_LOOKUP = {
    "text": "Looking.",
    "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}}],
    "prompt_tokens": 40,
    "completion_tokens": 12,
}
_ANSWER = {"text": "Sunny.", "prompt_tokens": 70, "completion_tokens": 5}


def _actor(url: str, *, is_limited: bool) -> dict[str, Any]:
    actor: dict[str, Any] = {
        "name": "bench-spend",
        "agent": {
            "provider": "stub",
            "script": [_LOOKUP, _LOOKUP, _ANSWER],
            "pricing": {"input_per_mtok": 1, "output_per_mtok": 2},
            "tools": [{"name": "get_weather", "handler": "cleveractors.demo:get_weather"}],
        },
        "store": {"url": url},
    }
    if is_limited:
        actor["spend_limits"] = {"limits": [{"window": "day", "usd": 1000}]}
    return actor


class _RoundTrips:
    """Statements, and the BEGIN and end of each transaction not in autocommit, on one engine."""

    def __init__(self) -> None:
        self.count = 0

    def listen(self, engine: Any) -> None:
        event.listen(engine, "before_cursor_execute", self._statement)
        for name in ("begin", "commit", "rollback"):
            event.listen(engine, name, self._transaction)

    def _statement(self, *_: object) -> None:
        self.count += 1

    def _transaction(self, connection: Any) -> None:
        if connection.get_execution_options().get("isolation_level") != "AUTOCOMMIT":
            self.count += 1


async def _measure(url: str, runs: int, *, is_limited: bool) -> tuple[float, float]:
    """Round trips and CPU seconds per LLM call."""
    trips = _RoundTrips()
    async with ActorExecutor.from_config(_actor(url, is_limited=is_limited)) as executor:
        assert executor.store is not None
        trips.listen(executor.store.engine.sync_engine)
        for _ in range(3):  # warm: prepared statements, the pool's connections
            await executor.execute("Weather in Paris?", caller="bench")
        trips.count = 0
        started = time.process_time()
        for _ in range(runs):
            result = await executor.execute("Weather in Paris?", caller="bench")
            assert result.llm_calls == CALLS_PER_RUN, result
        cpu_s = time.process_time() - started
    calls = runs * CALLS_PER_RUN
    return trips.count / calls, cpu_s / calls


async def measure_spend(runs: int) -> tuple[list[Row], dict[str, float]]:
    postgres = TemporaryPostgres()
    try:
        url = postgres.new_database()
        off_trips, off_cpu = await _measure(url, runs, is_limited=False)
        on_trips, on_cpu = await _measure(url, runs, is_limited=True)
    finally:
        postgres.stop()
    samples = {
        "round_trips_per_call_off": off_trips,
        "round_trips_per_call_on": on_trips,
        "cpu_s_per_call_off": off_cpu,
        "cpu_s_per_call_on": on_cpu,
    }
    detail = f"{off_trips:.2f} without a limit, {on_trips:.2f} with one"
    rows = [
        Row(
            SECTION,
            "Extra database round trips per LLM call",
            on_trips - off_trips,
            "round trips",
            ROUND_TRIP_TARGET,
            detail,
        ),
        Row(
            SECTION,
            "Extra CPU per LLM call (this process)",
            (on_cpu - off_cpu) * 1000,
            "ms",
            None,
            f"{off_cpu * 1000:.2f} ms without a limit, {on_cpu * 1000:.2f} ms with one",
        ),
    ]
    return rows, samples
