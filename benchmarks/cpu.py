"""CPU per turn: the library against the hand-written loop, blocking and streamed, zero latency.

The scripted server runs in a separate process, so `time.process_time()` of this process counts
only the client: our loop, LangChain, the openai SDK and httpx. The variants run interleaved in a
shuffled order each repetition (drift and order effects hit all alike), each turn after a
`gc.collect()` so no variant pays for another's garbage.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import random
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bare_sdk import BareSdkLoop
from handwritten import Fold, HandWrittenLoop, TurnTally
from report import Row, Target, spread_ms
from scenario import (
    ANSWER,
    API_KEY_ENV,
    MODEL_NAME,
    TWO_TOOLS_MESSAGE,
    USER_MESSAGE,
    WEATHER_SCHEMA,
    conversation_scripts,
    lookup_weather,
    openai_actor_config,
)

from cleveractors import ActorExecutor
from cleveractors.testing import ScriptedOpenAIServer

SECTION = "CPU per turn"
# Issue 32: at most the hand-written loop's CPU on a blocking turn (one tool call, or two in one
# reply), at most three quarters of it on a streamed turn.
TARGETS = {
    "blocking": Target(1.0),
    "blocking_two_tools": Target(1.0),
    "streamed": Target(0.75),
}
MODES = ("blocking", "blocking_two_tools", "streamed")
LOOPS = ("library", "handwritten", "bare_sdk")
VARIANTS = (
    *(f"{loop}_{mode}" for loop in LOOPS for mode in MODES),
    "handwritten_streamed_adding_chunks",
)
Turn = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CpuSamples:
    """CPU seconds per turn, per variant (`library_streamed`, `handwritten_blocking`, ...)."""

    by_variant: dict[str, list[float]]
    wall_by_variant: dict[str, list[float]]

    def ratio(self, variant: str, baseline: str) -> float:
        """The median of the per-repetition ratios `variant / baseline`.

        The two turns of a pair ran within a fraction of a second of each other, so load from
        other processes on a shared machine hits both; a ratio of medians would not cancel it.
        """
        pairs = zip(self.by_variant[variant], self.by_variant[baseline], strict=True)
        return statistics.median(ours / theirs for ours, theirs in pairs)

    def ratio_of_medians(self, variant: str, baseline: str) -> float:
        return self.median_s(variant) / self.median_s(baseline)

    def median_s(self, variant: str) -> float:
        return statistics.median(self.by_variant[variant])


def _serve(connection: Connection) -> None:
    """In the server process: answer every conversation on its own until told to stop; report
    what it billed when asked."""
    with ScriptedOpenAIServer(conversation_scripts()) as server:
        connection.send(server.base_url)
        while connection.recv() == "billed":
            billed = [(call.prompt_tokens, call.completion_tokens) for call in server.billed]
            connection.send(billed)
        connection.send(len(server.requests))


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A scripted server in its own process: its URL, and what it billed so far."""

    base_url: str
    _connection: Connection

    def billed(self) -> list[tuple[int, int]]:
        """(prompt, completion) tokens of every call the server billed, in order."""
        self._connection.send("billed")
        billed: list[tuple[int, int]] = self._connection.recv()
        return billed


@contextmanager
def server_process() -> Iterator[ServerProcess]:
    """A `ScriptedOpenAIServer` (no delays) in its own process, answering each conversation
    (`USER_MESSAGE`, `TWO_TOOLS_MESSAGE`) with its own script, however many turns run."""
    context = multiprocessing.get_context("spawn")  # no fork of a process that has threads
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs,), daemon=True)
    process.start()
    try:
        yield ServerProcess(ours.recv(), ours)
        ours.send("stop")
        ours.recv()
    finally:
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()


def library_turns(base_url: str) -> dict[str, Turn]:
    """The library's blocking and streamed turns, on one executor built from an actor config."""
    executor = ActorExecutor.from_config(openai_actor_config(base_url))

    def blocking(message: str) -> Turn:
        async def turn() -> None:
            result = await executor.execute(message)
            _check(result.text, result.llm_calls)

        return turn

    async def streamed() -> None:
        stream = executor.execute_stream(USER_MESSAGE)
        async for _text in stream:
            pass
        assert stream.result is not None
        _check(stream.result.text, stream.result.llm_calls)

    return {
        "library_blocking": blocking(USER_MESSAGE),
        "library_blocking_two_tools": blocking(TWO_TOOLS_MESSAGE),
        "library_streamed": streamed,
    }


def handwritten_turns(base_url: str) -> dict[str, Turn]:
    loop = HandWrittenLoop(
        base_url=base_url,
        api_key=os.environ[API_KEY_ENV],
        model=MODEL_NAME,
        tools={"lookup_weather": lookup_weather},
        schemas=[WEATHER_SCHEMA],
    )

    def blocking(message: str) -> Turn:
        async def turn() -> None:
            tally = await loop.run_turn(message)
            _check(tally.text, tally.llm_calls)

        return turn

    def streamed(fold: Fold) -> Turn:
        async def turn() -> None:
            tally = TurnTally()
            async for _text in loop.stream_turn(USER_MESSAGE, tally, fold=fold):
                pass
            _check(tally.text, tally.llm_calls)

        return turn

    return {
        "handwritten_blocking": blocking(USER_MESSAGE),
        "handwritten_blocking_two_tools": blocking(TWO_TOOLS_MESSAGE),
        "handwritten_streamed": streamed("once"),
        "handwritten_streamed_adding_chunks": streamed("each_chunk"),
    }


def bare_sdk_turns(base_url: str) -> dict[str, Turn]:
    """The same turns on the bare openai SDK: the floor a LangChain-based loop can approach."""
    loop = BareSdkLoop(
        base_url=base_url,
        api_key=os.environ[API_KEY_ENV],
        model=MODEL_NAME,
        tools={"lookup_weather": lookup_weather},
        schemas=[WEATHER_SCHEMA],
    )

    def blocking(message: str) -> Turn:
        async def turn() -> None:
            tally = await loop.run_turn(message)
            _check(tally.text, tally.llm_calls)

        return turn

    async def streamed() -> None:
        tally = TurnTally()
        async for _text in loop.stream_turn(USER_MESSAGE, tally):
            pass
        _check(tally.text, tally.llm_calls)

    return {
        "bare_sdk_blocking": blocking(USER_MESSAGE),
        "bare_sdk_blocking_two_tools": blocking(TWO_TOOLS_MESSAGE),
        "bare_sdk_streamed": streamed,
    }


def all_turns(base_url: str) -> dict[str, Turn]:
    """Every variant of `VARIANTS`, in its order."""
    turns = {
        **library_turns(base_url),
        **handwritten_turns(base_url),
        **bare_sdk_turns(base_url),
    }
    return {name: turns[name] for name in VARIANTS}


def _check(text: str, llm_calls: int) -> None:
    # Outside the timed region would be nicer, but it is a handful of comparisons per turn.
    if text != ANSWER or llm_calls != 2:
        raise RuntimeError(f"unexpected turn: {llm_calls} LLM calls, answer {text!r}")


async def measure_cpu(
    turns: dict[str, Turn], *, repetitions: int, warmup: int, seed: int = 3
) -> CpuSamples:
    """Run every variant `warmup + repetitions` times, interleaved in a shuffled order."""
    order = random.Random(seed)
    cpu: dict[str, list[float]] = {name: [] for name in turns}
    wall: dict[str, list[float]] = {name: [] for name in turns}
    names = list(turns)
    for repetition in range(warmup + repetitions):
        if repetition == warmup:
            _freeze_heap()
        order.shuffle(names)
        for name in names:
            gc.collect()
            wall_start, cpu_start = time.perf_counter(), time.process_time()
            await turns[name]()
            cpu_s, wall_s = time.process_time() - cpu_start, time.perf_counter() - wall_start
            if repetition >= warmup:
                cpu[name].append(cpu_s)
                wall[name].append(wall_s)
    gc.unfreeze()
    return CpuSamples(cpu, wall)


async def task_rows(turns: dict[str, Turn]) -> list[Row]:
    """The asyncio tasks one streamed turn starts, library and hand-written (one turn each):
    langchain-openai's `stream_chunk_timeout` reads every chunk through `asyncio.wait_for`, a
    task per chunk on Python 3.11; the library's stall limit is one timer per call instead."""
    library = await _tasks_started(turns["library_streamed"])
    handwritten = await _tasks_started(turns["handwritten_streamed"])
    return [
        Row(
            SECTION,
            "Tasks started per streamed turn: library",
            library,
            "tasks",
            None,
            f"hand-written loop (ChatOpenAI's default per-chunk timeout): {handwritten}",
        )
    ]


async def _tasks_started(turn: Turn) -> int:
    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    started = 0

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> asyncio.Future[Any]:
        nonlocal started
        started += 1
        if previous is not None:
            return previous(loop, coro, **options)
        return asyncio.Task(coro, loop=loop, **options)

    loop.set_task_factory(counting)
    try:
        await turn()
    finally:
        loop.set_task_factory(previous)
    return started


def _freeze_heap() -> None:
    """Move what warm-up left (imports, clients, caches) out of the collector's sight: a full
    collection then costs microseconds instead of ~70 ms, and none lands inside a timed turn."""
    gc.collect()
    gc.freeze()


def missed_modes(samples: CpuSamples) -> list[str]:
    """The modes (blocking, streamed) whose library/hand-written ratio misses its target."""
    return [
        mode
        for mode in MODES
        if not TARGETS[mode].is_met(samples.ratio(f"library_{mode}", f"handwritten_{mode}"))
    ]


def cpu_rows(samples: CpuSamples) -> list[Row]:
    rows = []
    for mode in MODES:
        label = mode.replace("_", " ").capitalize()
        rows.append(
            _ratio_row(
                samples,
                f"library_{mode}",
                f"handwritten_{mode}",
                TARGETS[mode],
                f"{label}: library / hand-written `ChatOpenAI` loop",
            )
        )
        rows.append(
            _ratio_row(
                samples,
                f"bare_sdk_{mode}",
                f"handwritten_{mode}",
                None,
                f"Reference: {label.lower()}, bare openai SDK loop / hand-written loop",
            )
        )
    rows.append(
        _ratio_row(
            samples,
            "library_streamed",
            "handwritten_streamed_adding_chunks",
            None,
            "Reference: streamed, library / hand-written loop adding chunks with `+`",
        )
    )
    return rows


def _ratio_row(
    samples: CpuSamples, variant: str, baseline: str, target: Target | None, measure: str
) -> Row:
    ours = samples.by_variant[variant]
    return Row(
        SECTION,
        measure,
        samples.ratio(variant, baseline),
        "x",
        target,
        f"median of {len(ours)} paired ratios; median CPU {samples.median_s(variant) * 1000:.2f} "
        f"ms vs {samples.median_s(baseline) * 1000:.2f} ms (ratio of medians "
        f"{samples.ratio_of_medians(variant, baseline):.2f}x); library {spread_ms(ours)}",
    )
