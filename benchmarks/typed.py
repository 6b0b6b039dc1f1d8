"""Typed answers (issue 27): the CPU a typed turn costs against the same turn untyped, and the
CPU of streaming a large object (partial objects as `output_delta` events) against streaming
as much plain text.

`ChatOpenAI` against a scripted server in its own process (so only the client's CPU counts),
zero latency. Each turn is a tool round, then the answer; a typed actor's answer is the same
JSON text an untyped one gets (`native` mode: the request asks for `response_format`). The
variants run interleaved, in a shuffled order each repetition, and a ratio is the median of
the per-repetition ratios (see `cpu.CpuSamples`).
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from cpu import Turn, measure_cpu
from report import Row, Target
from scenario import openai_actor_config

from cleveractors import ActorExecutor
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

SECTION = "Typed answers"
TYPED_TURN = Target(1.05)
"""A typed turn costs at most 5 % more CPU than the same turn untyped."""
LARGE_OBJECT = Target(2.0)
"""Streaming an object costs at most twice the CPU of streaming as much text."""
_CHUNKS_PER_KB = 100
"""Words of about 10 bytes: 2,000 chunks for 20 KB."""
_MESSAGE = "Weather report for Paris?"
_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city", "notes"],
}


def _answer(kilobytes: int) -> str:
    """A JSON object of about `kilobytes` KB in `_CHUNKS_PER_KB` words per KB."""
    notes = [f"n{n:06d}" for n in range(kilobytes * _CHUNKS_PER_KB)]
    return json.dumps({"city": "Paris", "notes": notes})


def _scripts() -> dict[str, list[ScriptedReply]]:
    call = ScriptedToolCall(name="lookup_weather", args={"city": "Paris"})
    return {
        f"{_MESSAGE} ({size} KB)": [
            ScriptedReply(tool_calls=(call,)),
            ScriptedReply(text=_answer(size)),
        ]
        for size in (0, 2, 20)
    }


def _serve(connection: Connection) -> None:
    with ScriptedOpenAIServer(_scripts()) as server:
        connection.send(server.base_url)
        connection.recv()


@contextmanager
def _server() -> Iterator[str]:
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve, args=(theirs,), daemon=True)
    process.start()
    try:
        yield ours.recv()
    finally:
        ours.send("stop")
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()


def _turns(base_url: str) -> dict[str, Turn]:
    plain = openai_actor_config(base_url)
    typed = {**plain, "agent": {**plain["agent"], "output_mode": "native"}}
    typed["agent"]["output_schema"] = _OBJECT_SCHEMA
    executors = {
        "untyped": ActorExecutor.from_config(plain),
        "typed": ActorExecutor.from_config(typed),
    }

    def blocking(executor: ActorExecutor, size: int) -> Turn:
        async def turn() -> None:
            await executor.execute(f"{_MESSAGE} ({size} KB)")

        return turn

    def streamed(executor: ActorExecutor, size: int) -> Turn:
        async def turn() -> None:
            async for _event in executor.execute_events(f"{_MESSAGE} ({size} KB)"):
                pass

        return turn

    turns: dict[str, Turn] = {}
    for name, executor in executors.items():
        turns[f"{name}_blocking"] = blocking(executor, 0)
        for size in (0, 2, 20):
            turns[f"{name}_streamed_{size}kb"] = streamed(executor, size)
    return turns


async def measure_typed(*, repetitions: int, warmup: int) -> tuple[list[Row], dict[str, Any]]:
    """The rows of the typed-answer section, and the raw CPU samples."""
    with _server() as base_url:
        samples = await measure_cpu(_turns(base_url), repetitions=repetitions, warmup=warmup)
    rows = [
        Row(
            SECTION,
            f"CPU per typed turn / untyped, {mode}",
            samples.ratio(f"typed_{mode}", f"untyped_{mode}"),
            "x",
            TYPED_TURN,
            "a tool round, then a small JSON answer",
        )
        for mode in ("blocking", "streamed_0kb")
    ]
    for size in (2, 20):
        rows.append(
            Row(
                SECTION,
                f"CPU to stream a {size} KB object / {size} KB of text",
                samples.ratio(f"typed_streamed_{size}kb", f"untyped_streamed_{size}kb"),
                "x",
                LARGE_OBJECT,
                f"{size * _CHUNKS_PER_KB} chunks, partial objects as output_delta events",
            )
        )
    growth = samples.ratio_of_medians("typed_streamed_20kb", "typed_streamed_2kb")
    rows.append(Row(SECTION, "CPU of a 20 KB object / a 2 KB one (linear: about 10)", growth, "x"))
    return rows, samples.by_variant
