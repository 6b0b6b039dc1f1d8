"""Stops: the CPU a storm of client disconnects costs, and the memory a stalled reader holds.

*Disconnect storm*: `DISCONNECTS` streamed runs on the stub provider, each consumed inside an
anyio cancel scope as Starlette runs a response body, each stopped while its tool runs; the tool
takes `TOOL_STOP_S` to let go when cancelled, so every stop waits that long for its run to
settle. The CPU of the process (`time.process_time()`) from the cancellation of all scopes until
every run has settled, per disconnect, is set against the CPU each run did before its stop
(issue 8: within 2x). Waiting must cost nothing: the old settling loop spun a core per stop.

*Stalled reader*: one answer of `LONG_ANSWER_WORDS` words over the real wire (`ChatOpenAI`
against `ScriptedOpenAIServer`, in this process). The reader takes the first text, then reads
nothing for `STALL_S`; the memory Python allocated meanwhile (`tracemalloc`) is what a server
holds for a client that has stopped reading, and the chunks the model took from the provider
meanwhile show the run waiting once the event channel is full.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from typing import Any

import anyio
from langchain_core.callbacks import AsyncCallbackHandler
from report import Row, Target
from scenario import API_KEY_ENV, MODEL_NAME

from cleveractors import ActorExecutor
from cleveractors.agents.stream import MAX_BUFFERED_EVENTS
from cleveractors.events import TextDelta, ToolCallStarted
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

SECTION = "Stops"
DISCONNECTS = 50
TOOL_STOP_S = 1.0
LONG_ANSWER_WORDS = 20_000
STALL_S = 1.0
STORM_TARGET = Target(2.0)
STALLED_MEMORY_TARGET = Target(8.0, is_strict=True)
# A text delta per chunk; a few chunks are in flight between two of the run's checkpoints.
STALLED_CHUNKS_TARGET = Target(MAX_BUFFERED_EVENTS + 4)


def _slow_to_stop_actor() -> dict[str, Any]:
    call = {
        "name": "slow_lookup",
        "args": {"query": "Louvre", "seconds": 60, "cleanup_seconds": TOOL_STOP_S},
        "id": "call_slow",
    }
    return {
        "name": "bench-disconnect",
        "agent": {
            "type": "llm",
            "provider": "stub",
            "tools": [{"name": "slow_lookup", "handler": "cleveractors.demo:slow_lookup"}],
            "script": [{"text": "Looking it up.", "tool_calls": [call]}, {"text": "Never."}],
        },
    }


async def _consume_until_stopped(
    executor: ActorExecutor, scope: anyio.CancelScope, started: asyncio.Event
) -> bool:
    """Read one run inside `scope` until its tool starts, then wait to be cancelled. Returns
    whether the run ended cancelled."""
    stream = executor.execute_events("Look up the Louvre.")
    with scope:
        async with stream:
            async for event in stream:
                if isinstance(event, ToolCallStarted):
                    started.set()
                    await anyio.sleep(600)
    return stream.result is not None and stream.result.cancelled


async def _storm(disconnects: int) -> tuple[float, float, float]:
    """CPU before the stops, CPU from the stops until all settled, and that wait's wall time."""
    executors = [ActorExecutor.from_config(_slow_to_stop_actor()) for _ in range(disconnects)]
    scopes = [anyio.CancelScope() for _ in executors]
    started = [asyncio.Event() for _ in executors]
    cpu_start = time.process_time()
    runs = [
        asyncio.create_task(_consume_until_stopped(executor, scope, event))
        for executor, scope, event in zip(executors, scopes, started, strict=True)
    ]
    await asyncio.gather(*(event.wait() for event in started))
    cpu_stop, wall_stop = time.process_time(), time.perf_counter()
    for scope in scopes:
        scope.cancel()
    cancelled = await asyncio.gather(*runs)
    if not all(cancelled):
        raise RuntimeError(f"{cancelled.count(False)} runs were not cancelled")
    cpu_end, wall_end = time.process_time(), time.perf_counter()
    return cpu_stop - cpu_start, cpu_end - cpu_stop, wall_end - wall_stop


class _ChunkCounter(AsyncCallbackHandler):
    """Counts the chunks the chat model has taken from the provider's stream."""

    def __init__(self) -> None:
        self.chunks = 0

    async def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.chunks += 1


async def _stalled_reader(words: int) -> tuple[int, int, int]:
    """Bytes allocated and chunks taken from the provider while a reader of a long answer read
    nothing, and the answer's size in bytes."""
    text = " ".join(f"word{n}" for n in range(words))
    counter = _ChunkCounter()
    with ScriptedOpenAIServer([ScriptedReply(text=text)]) as server:
        executor = ActorExecutor.from_config(
            {
                "name": "bench-slow-reader",
                "agent": {
                    "type": "llm",
                    "provider": "openai",
                    "model": MODEL_NAME,
                    "base_url": server.base_url,
                    "api_key_env": API_KEY_ENV,
                    "max_retries": 0,
                },
            }
        )
        executor.agent.model.callbacks = [counter]
        async with executor.execute_events("Tell me everything.") as stream:
            events = aiter(stream)
            while not isinstance(await anext(events), TextDelta):
                pass  # the connection is set up (and its modules imported) before we measure
            chunks_before = counter.chunks
            tracemalloc.start()
            try:
                await asyncio.sleep(STALL_S)
                held, _peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            taken = counter.chunks - chunks_before
            async for _event in events:
                pass
    return held, taken, len(text.encode())


async def measure_stops(disconnects: int = DISCONNECTS) -> tuple[list[Row], dict[str, Any]]:
    before_s, settling_s, wall_s = await _storm(disconnects)
    held, taken, answer_bytes = await _stalled_reader(LONG_ANSWER_WORDS)
    per_disconnect_ms = settling_s / disconnects * 1000
    rows = [
        Row(
            SECTION,
            f"Disconnect storm: CPU per disconnect ({disconnects} at once)",
            per_disconnect_ms,
            "ms",
            None,
            f"{settling_s:.3f} s in all while the runs took {wall_s:.2f} s to stop "
            f"(each tool {TOOL_STOP_S:g} s)",
        ),
        Row(
            SECTION,
            "Disconnect storm: CPU settling / CPU before the stop",
            settling_s / before_s,
            "x",
            STORM_TARGET,
            f"before the stops: {before_s / disconnects * 1000:.2f} ms per run",
        ),
        Row(
            SECTION,
            f"Stalled reader of a {LONG_ANSWER_WORDS}-word answer: memory allocated in "
            f"{STALL_S:g} s of not reading",
            held / 1e6,
            "MB",
            STALLED_MEMORY_TARGET,
            f"answer {answer_bytes / 1e6:.2f} MB of text",
        ),
        Row(
            SECTION,
            "Stalled reader: chunks the model took from the provider while nothing was read",
            taken,
            "chunks",
            STALLED_CHUNKS_TARGET,
            f"event channel: {MAX_BUFFERED_EVENTS} events",
        ),
    ]
    samples = {
        "storm": {"cpu_before_s": before_s, "cpu_settling_s": settling_s, "wall_s": wall_s},
        "stalled_reader": {"bytes": held, "chunks": taken},
    }
    return rows, samples
