"""Concurrency: a batch of three `concurrent: true` calls of a 200 ms tool, on the stub provider.

The batch time runs from the first `ToolCallStarted` to the last `ToolCallFinished` as the caller
receives them. The same batch with `concurrent: false` is shown for comparison (about 600 ms).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from report import Row, Target, median_ms, spread_ms
from scenario import TOOL_SLEEP_S, sleeper_actor_config

from cleveractors import ActorExecutor
from cleveractors.events import RunFinished, ToolCallFinished, ToolCallStarted

SECTION = "Concurrency"
CALLS = 3
BATCH_TARGET = Target(300.0, is_strict=True)


@dataclass(frozen=True, slots=True)
class _Variant:
    label: str
    handler: str
    is_concurrent: bool
    target: Target | None


VARIANTS = (
    _Variant("3 concurrent calls, async handler", "scenario:sleep_async", True, BATCH_TARGET),
    _Variant(
        "3 concurrent calls, sync handler (worker threads)",
        "scenario:sleep_blocking",
        True,
        BATCH_TARGET,
    ),
    _Variant("Reference: 3 calls, `concurrent: false`", "scenario:sleep_async", False, None),
)


async def _batch_seconds(variant: _Variant) -> float:
    config = sleeper_actor_config(variant.handler, concurrent=variant.is_concurrent, calls=CALLS)
    executor = ActorExecutor.from_config(config)  # the stub's script is used up by one run
    started: list[float] = []
    finished: list[float] = []
    order: list[str] = []
    async for event in executor.execute_events("Sleep three times."):
        if isinstance(event, ToolCallStarted):
            started.append(time.perf_counter())
        elif isinstance(event, ToolCallFinished):
            finished.append(time.perf_counter())
        elif isinstance(event, RunFinished):
            order = [record.call_id for record in event.result.tool_calls]
    expected = [f"call_{n}" for n in range(CALLS)]
    if order != expected or len(finished) != CALLS:
        raise RuntimeError(f"tool records {order}, expected {expected} in the model's order")
    return max(finished) - min(started)


async def measure_concurrency(repetitions: int) -> tuple[list[Row], dict[str, list[float]]]:
    rows: list[Row] = []
    raw: dict[str, list[float]] = {}
    for variant in VARIANTS:
        runs = repetitions if variant.target is not None else max(1, repetitions // 2)
        seconds = [await _batch_seconds(variant) for _ in range(runs)]
        raw[variant.label] = seconds
        sequential_ms = CALLS * TOOL_SLEEP_S * 1000
        rows.append(
            Row(
                SECTION,
                f"{variant.label}: batch time",
                median_ms(seconds),
                "ms",
                variant.target,
                f"median of {runs}; {spread_ms(seconds)}; one after another: "
                f"{sequential_ms:.0f} ms",
            )
        )
    return rows, raw
