"""Many streams at once: 500 streamed turns in one process, the library against the hand-written
`ChatOpenAI` loop and the bare openai SDK loop, on one scripted server in its own process.

*Wall*: the time from starting every turn (`asyncio.gather`) to the last one's end, a round of
each loop in turn (library, hand-written, bare SDK), repeated; the ratio is the median over
rounds of library wall / hand-written wall of the same round. *Memory per stream*: the same
500 turns under `tracemalloc`: the peak traced memory over what was traced before they started,
divided by 500 (clients built beforehand; each turn's connection, request, reply and events are
the stream's). *Billing*: every library turn's reported usage must equal what the server billed
for that turn's two calls (no estimate), and their sum the server's total.
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import time
import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable

from bare_sdk import BareSdkLoop
from cpu import ServerProcess, server_process
from handwritten import HandWrittenLoop, TurnTally
from report import Row, Target
from scenario import (
    ANSWER,
    API_KEY_ENV,
    MODEL_NAME,
    USER_MESSAGE,
    WEATHER_SCHEMA,
    lookup_weather,
    openai_actor_config,
)

from cleveractors import ActorExecutor
from cleveractors.usage import TokenUsage

SECTION = "Concurrent streams"
WALL_TARGET = Target(0.70)
MEMORY_TARGET_KB = Target(180.0)
LOOPS = ("library", "handwritten", "bare_sdk")
# Hundreds of connections opened at once by a busy event loop can take longer than the clients'
# default 5 s connect timeout to be seen through; every loop gets the same generous timeout.
TIMEOUT_S = 300.0

Many = Callable[[int], Awaitable[list[TokenUsage | None]]]


def _many_turns(base_url: str) -> dict[str, Many]:
    """Per loop: run `n` streamed turns at once, every text chunk read; the library's usages."""
    executor = ActorExecutor.from_config(openai_actor_config(base_url, timeout_s=TIMEOUT_S))
    handwritten = HandWrittenLoop(
        base_url=base_url,
        api_key=os.environ[API_KEY_ENV],
        model=MODEL_NAME,
        tools={"lookup_weather": lookup_weather},
        schemas=[WEATHER_SCHEMA],
        timeout_s=TIMEOUT_S,
    )
    bare = BareSdkLoop(
        base_url=base_url,
        api_key=os.environ[API_KEY_ENV],
        model=MODEL_NAME,
        tools={"lookup_weather": lookup_weather},
        schemas=[WEATHER_SCHEMA],
        timeout_s=TIMEOUT_S,
    )

    async def library_turn() -> TokenUsage | None:
        stream = executor.execute_stream(USER_MESSAGE)
        async for _text in stream:
            pass
        assert stream.result is not None
        _check(stream.result.text)
        return stream.result.usage

    async def handwritten_turn() -> TokenUsage | None:
        tally = TurnTally()
        async for _text in handwritten.stream_turn(USER_MESSAGE, tally):
            pass
        _check(tally.text)
        return None

    async def bare_turn() -> TokenUsage | None:
        tally = TurnTally()
        async for _text in bare.stream_turn(USER_MESSAGE, tally):
            pass
        _check(tally.text)
        return None

    def many(turn: Callable[[], Awaitable[TokenUsage | None]]) -> Many:
        async def run(n: int) -> list[TokenUsage | None]:
            return list(await asyncio.gather(*(turn() for _ in range(n))))

        return run

    return {
        "library": many(library_turn),
        "handwritten": many(handwritten_turn),
        "bare_sdk": many(bare_turn),
    }


def _check(text: str) -> None:
    if text != ANSWER:
        raise RuntimeError(f"unexpected answer {text!r}")


async def _wall_s(run: Many, n: int) -> float:
    gc.collect()
    started = time.perf_counter()
    await run(n)
    return time.perf_counter() - started


async def _memory_per_stream_kb(run: Many, n: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before, _peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await run(n)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return (peak - before) / n / 1024


def _check_billing(server: ServerProcess, billed_before: int, usages: list[TokenUsage]) -> str:
    """Every turn reported exactly what the server billed for it; raises otherwise."""
    calls = server.billed()[billed_before:]
    kinds = Counter(calls)
    turns = len(usages)
    if len(calls) != 2 * turns or sorted(kinds.values()) != [turns, turns]:
        raise RuntimeError(f"the server billed {len(calls)} calls of kinds {dict(kinds)}")
    prompt = sum(p for p, _ in kinds)
    completion = sum(c for _, c in kinds)
    wrong = [
        usage
        for usage in usages
        if usage.estimated or (usage.prompt_tokens, usage.completion_tokens) != (prompt, completion)
    ]
    if wrong:
        raise RuntimeError(
            f"{len(wrong)} of {turns} turns reported other than billed ({prompt}, {completion}): "
            f"{wrong[0]}"
        )
    return f"reported = billed on all {turns} turns ({prompt} + {completion} tokens each)"


async def measure_streams(*, streams: int, rounds: int) -> tuple[list[Row], dict[str, object]]:
    with server_process() as server:
        runs = _many_turns(server.base_url)
        for loop in LOOPS:  # warm up: imports, clients, connection pools
            await runs[loop](min(streams, 20))
        walls: dict[str, list[float]] = {loop: [] for loop in LOOPS}
        billing = ""
        for _ in range(rounds):
            for loop in LOOPS:
                billed_before = len(server.billed())
                gc.collect()
                started = time.perf_counter()
                usages = await runs[loop](streams)
                walls[loop].append(time.perf_counter() - started)
                if loop == "library":
                    billing = _check_billing(
                        server, billed_before, [u for u in usages if u is not None]
                    )
        memory: dict[str, list[float]] = {loop: [] for loop in LOOPS}
        for _ in range(max(1, rounds // 2)):
            for loop in LOOPS:
                memory[loop].append(await _memory_per_stream_kb(runs[loop], streams))
    ratios = _paired(walls["library"], walls["handwritten"])
    bare_ratios = _paired(walls["bare_sdk"], walls["handwritten"])
    kb = {loop: statistics.median(values) for loop, values in memory.items()}
    rows = [
        Row(
            SECTION,
            f"{streams} streamed turns at once: wall, library / hand-written loop",
            statistics.median(ratios),
            "x",
            WALL_TARGET,
            f"median of {rounds} rounds; median wall library "
            f"{statistics.median(walls['library']):.2f} s, hand-written "
            f"{statistics.median(walls['handwritten']):.2f} s, bare SDK "
            f"{statistics.median(walls['bare_sdk']):.2f} s; {billing}",
        ),
        Row(
            SECTION,
            f"Reference: {streams} streamed turns at once: wall, bare SDK / hand-written loop",
            statistics.median(bare_ratios),
            "x",
        ),
        Row(
            SECTION,
            f"Memory per stream, {streams} at once: library",
            kb["library"],
            "KB",
            MEMORY_TARGET_KB,
            f"peak traced over before, / {streams}; hand-written {kb['handwritten']:.0f} KB, "
            f"bare SDK {kb['bare_sdk']:.0f} KB",
        ),
    ]
    return rows, {"wall_s": walls, "memory_kb": memory}


def _paired(ours: list[float], theirs: list[float]) -> list[float]:
    return [a / b for a, b in zip(ours, theirs, strict=True)]
