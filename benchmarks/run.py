"""Benchmarks of issues 3, 8, 18, 19, 27 and 29 (`nox -s bench`): latency to the first token,
CPU per turn, what a typed answer adds to it, what tracing adds to it, concurrency, what stops
cost (a disconnect storm's CPU, a stalled reader's memory), what pausing for an approval and
resuming add, and what calling an agent as a tool costs.

Prints a table (measured value, target, PASS / MISSED) and writes it to
`benchmarks/results/bench.md`, with raw samples in `bench.json`. It is a report: it exits 0
when a target is missed, and then profiles the library's turns (`profile_<mode>.txt`).

    python benchmarks/run.py            # the full run, about 2.5 minutes
    python benchmarks/run.py --quick    # a smoke run with few repetitions
    python benchmarks/run.py --profile  # profile the library's turns even when targets are met
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from approvals import measure_approvals
from concurrency import measure_concurrency
from cpu import (
    MODES,
    all_turns,
    cpu_rows,
    measure_cpu,
    missed_modes,
    server_process,
    task_rows,
)
from delegation import measure_delegation
from latency import measure_latency
from ledger import measure_ledger
from profiling import ProfileReport, profile_turns
from report import Row, missed, render_markdown, write_results
from scenario import use_dummy_api_key
from spend import measure_spend
from stops import measure_stops
from streams import measure_streams
from tracing_cost import measure_tracing
from typed import measure_typed

RESULTS = Path(__file__).parent / "results"


@dataclass(frozen=True, slots=True)
class Settings:
    latency_turns: int
    cpu_repetitions: int
    cpu_warmup: int
    concurrency_repetitions: int
    profile_turns: int
    disconnects: int
    streams: int
    stream_rounds: int
    ledger_writes: int
    approval_runs: int
    spend_runs: int
    delegation_runs: int

    @classmethod
    def full(cls) -> Settings:
        return cls(
            latency_turns=20,
            cpu_repetitions=150,
            cpu_warmup=10,
            concurrency_repetitions=7,
            profile_turns=40,
            disconnects=50,
            streams=500,
            stream_rounds=3,
            ledger_writes=500,
            approval_runs=200,
            spend_runs=200,
            delegation_runs=200,
        )

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            latency_turns=3,
            cpu_repetitions=10,
            cpu_warmup=2,
            concurrency_repetitions=2,
            profile_turns=10,
            disconnects=10,
            streams=100,
            stream_rounds=2,
            ledger_writes=50,
            approval_runs=20,
            spend_runs=20,
            delegation_runs=20,
        )


@dataclass(slots=True)
class Outcome:
    rows: list[Row]
    samples: dict[str, Any]
    profiles: list[ProfileReport]


async def _run_cpu(settings: Settings, *, always_profile: bool, outcome: Outcome) -> None:
    with server_process() as server:
        turns = all_turns(server.base_url)
        samples = await measure_cpu(
            turns, repetitions=settings.cpu_repetitions, warmup=settings.cpu_warmup
        )
        outcome.rows.extend(cpu_rows(samples))
        outcome.rows.extend(await task_rows(turns))
        outcome.samples["cpu_s"] = samples.by_variant
        outcome.samples["cpu_wall_s"] = samples.wall_by_variant
        for mode in MODES if always_profile else missed_modes(samples):
            print(f"  profiling {mode} turns, library and hand-written ...", flush=True)
            report = await profile_turns(
                mode,
                turns[f"library_{mode}"],
                turns[f"handwritten_{mode}"],
                turns=settings.profile_turns,
                directory=RESULTS,
            )
            outcome.profiles.append(report)


async def _run_all(settings: Settings, *, always_profile: bool) -> Outcome:
    outcome = Outcome(rows=[], samples={}, profiles=[])
    with _section("latency (server with 200 ms to first token, 5 ms per token)"):
        latency_rows, outcome.samples["latency"] = await measure_latency(settings.latency_turns)
        outcome.rows.extend(latency_rows)
    with _section("CPU per turn (server in its own process, zero latency)"):
        await _run_cpu(settings, always_profile=always_profile, outcome=outcome)
    with _section("typed answers (server in its own process, zero latency)"):
        typed_rows, outcome.samples["typed_cpu_s"] = await measure_typed(
            repetitions=settings.cpu_repetitions, warmup=settings.cpu_warmup
        )
        outcome.rows.extend(typed_rows)
    with _section(f"{settings.streams} concurrent streamed turns (server in its own process)"):
        stream_rows, outcome.samples["streams"] = await measure_streams(
            streams=settings.streams, rounds=settings.stream_rounds
        )
        outcome.rows.extend(stream_rows)
    with _section("tracing (SDK with a batch exporter that drops the spans, vs no SDK)"):
        tracing_rows, samples = await measure_tracing(
            repetitions=settings.cpu_repetitions, warmup=settings.cpu_warmup
        )
        outcome.rows.extend(tracing_rows)
        outcome.samples["tracing_cpu_s"] = samples.by_variant
    with _section("concurrency (stub provider, 200 ms tool)"):
        concurrency_rows, outcome.samples["concurrency_s"] = await measure_concurrency(
            settings.concurrency_repetitions
        )
        outcome.rows.extend(concurrency_rows)
    with _section("stops (a storm of disconnects, a stalled reader)"):
        stop_rows, outcome.samples["stops"] = await measure_stops(settings.disconnects)
        outcome.rows.extend(stop_rows)
    with _section("ledger (SQLite file, WAL)"):
        ledger_rows, outcome.samples["ledger"] = await measure_ledger(settings.ledger_writes)
        outcome.rows.extend(ledger_rows)
    with _section("approvals (SQLite file, model in process)"):
        approval_rows, outcome.samples["approvals"] = await measure_approvals(
            settings.approval_runs
        )
        outcome.rows.extend(approval_rows)
    with _section("spend limits (PostgreSQL, stub model, three calls a run)"):
        spend_rows, outcome.samples["spend"] = await measure_spend(settings.spend_runs)
        outcome.rows.extend(spend_rows)
    with _section("agents as tools (model in process)"):
        delegation_rows, outcome.samples["delegation"] = await measure_delegation(
            settings.delegation_runs
        )
        outcome.rows.extend(delegation_rows)
    return outcome


@contextmanager
def _section(title: str) -> Iterator[None]:
    print(f"{title} ...", flush=True)
    started = time.perf_counter()
    yield
    print(f"  done in {time.perf_counter() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions, for a smoke run")
    parser.add_argument("--profile", action="store_true", help="profile even if targets are met")
    args = parser.parse_args(argv)
    settings = Settings.quick() if args.quick else Settings.full()
    use_dummy_api_key()
    outcome = asyncio.run(_run_all(settings, always_profile=args.profile))
    markdown, data = write_results(RESULTS, outcome.rows, asdict(settings), outcome.samples)
    print()
    print(render_markdown(outcome.rows))
    for report in outcome.profiles:
        print()
        print(report.text)
    print()
    for row in missed(outcome.rows):
        print(
            f"MISSED: {row.section}: {row.measure}: {row.value:.2f} {row.unit} "
            f"(target {row.target.describe(row.unit) if row.target else '-'})"
        )
    if not missed(outcome.rows):
        print("All targets met.")
    print(f"Written: {markdown} and {data.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
