"""The ledger's cost: how long writing one LLM call's row takes, on SQLite (issue: <= 2 ms p50).

Each sample is one `StoreRun.record_call()` (a transaction with one INSERT, WAL mode) on a file
database in a temporary folder, as a run makes it between its model call and its tools. The
session history load is shown beside it: one query for the latest 50 turns of a 200-turn session.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from report import Row, Target, median_ms, spread_ms

from cleveractors.result import ExecutionResult
from cleveractors.store import SqlStore
from cleveractors.usage import LLMCallUsage, TokenUsage

SECTION = "Ledger (SQLite)"
WRITE_TARGET = Target(2.0)
SESSION_TURNS = 200


def _call(index: int) -> LLMCallUsage:
    usage = TokenUsage(prompt_tokens=1200 + index, completion_tokens=80)
    return LLMCallUsage(index=index, purpose="round", round=index, usage=usage)


def _answered() -> ExecutionResult:
    return ExecutionResult(text="ok", usage_by_call=(_call(1),))


async def measure_ledger(writes: int) -> tuple[list[Row], dict[str, list[float]]]:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-bench-"))
    write_s: list[float] = []
    load_s: list[float] = []
    async with SqlStore(f"sqlite:///{folder / 'bench.db'}") as store:
        async with store.run(session_id="bench") as run:
            for index in range(1, writes + 1):
                started = time.perf_counter()
                await run.record_call(_call(index))
                write_s.append(time.perf_counter() - started)
            await run.commit_turn([HumanMessage("q"), AIMessage("a")], _answered())
        for _ in range(SESSION_TURNS - 1):
            async with store.run(session_id="bench") as run:
                await run.commit_turn([HumanMessage("q" * 400), AIMessage("a" * 800)], _answered())
        for _ in range(20):
            started = time.perf_counter()
            async with store.run(session_id="bench") as run:
                pass
            load_s.append(time.perf_counter() - started)
    rows = [
        Row(
            SECTION,
            "One LLM call's ledger row written",
            median_ms(write_s),
            "ms",
            WRITE_TARGET,
            spread_ms(write_s),
        ),
        Row(
            SECTION,
            f"A run's start: session claimed, latest 50 of {SESSION_TURNS} turns loaded",
            median_ms(load_s),
            "ms",
            None,
            spread_ms(load_s),
        ),
    ]
    return rows, {"write_s": write_s, "start_s": load_s}
