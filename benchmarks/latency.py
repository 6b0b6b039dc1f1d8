"""Latency: how soon the answer's first token reaches the caller, streamed and single-chunk.

The scripted server runs in a thread of this process and stamps each chunk it flushes with
`time.perf_counter()`, the clock the caller's timestamps use, so "first token at the caller minus
first token sent" is a direct subtraction. "Final request sent" is when `RoundStarted(round=2)`
reaches the caller: the loop emits it just before the request, and the caller gets it as soon as
the run awaits the network.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from handwritten import HandWrittenLoop, TurnTally
from report import Row, Target, median_ms, spread_ms
from scenario import (
    ANSWER,
    API_KEY_ENV,
    MODEL_NAME,
    USER_MESSAGE,
    WEATHER_SCHEMA,
    lookup_weather,
    openai_actor_config,
    scripted_turn_delay_s,
    turn_script,
)

from cleveractors import ActorExecutor
from cleveractors.events import RoundStarted, RunFinished, TextDelta
from cleveractors.testing import ScriptedOpenAIServer

_CALL_ID = re.compile(r"call_\d+_\d+")
FIRST_TOKEN_DELAY_S = 0.2
TOKEN_INTERVAL_S = 0.005
FIRST_TOKEN_LAG_TARGET = Target(5.0)
SECTION = "Latency"


@dataclass(frozen=True, slots=True)
class LatencySample:
    """One turn, as the caller saw it (seconds)."""

    turn_s: float
    request_to_first_token_s: float | None
    """From the final round's request to the first answer text at the caller (library only)."""
    first_token_lag_s: float | None
    """First answer text at the caller minus when the server sent it (streamed only)."""
    answer_chunks: int
    first_request: int
    """The server's index of the turn's first request."""


@dataclass(frozen=True, slots=True)
class _Probe:
    server: ScriptedOpenAIServer

    def final_request_sent_at(self, request_count_before: int) -> list[float]:
        requests = len(self.server.requests)
        if requests != request_count_before + 2:
            raise RuntimeError(
                f"a one-tool-round turn made {requests - request_count_before} requests, expected 2"
            )
        return self.server.chunk_times[requests - 1]


async def _library_turn(executor: ActorExecutor, probe: _Probe) -> LatencySample:
    before = len(probe.server.requests)
    request_at: float | None = None
    first_at: float | None = None
    chunks = 0
    text = ""
    start = time.perf_counter()
    async with executor.execute_events(USER_MESSAGE) as events:
        async for event in events:
            now = time.perf_counter()
            if isinstance(event, RoundStarted) and event.round == 2:
                request_at = now
            elif isinstance(event, TextDelta):
                first_at = now if first_at is None else first_at
                chunks += 1
            elif isinstance(event, RunFinished):
                text = event.result.text
    turn_s = time.perf_counter() - start
    if text != ANSWER or request_at is None or first_at is None:
        raise RuntimeError(f"unexpected library turn: answer {text!r}")
    sent = probe.final_request_sent_at(before)
    return LatencySample(
        turn_s=turn_s,
        request_to_first_token_s=first_at - request_at,
        first_token_lag_s=first_at - sent[0] if sent else None,
        answer_chunks=chunks,
        first_request=before,
    )


async def _handwritten_turn(loop: HandWrittenLoop, probe: _Probe) -> LatencySample:
    before = len(probe.server.requests)
    tally = TurnTally()
    first_at: float | None = None
    chunks = 0
    start = time.perf_counter()
    async for _text in loop.stream_turn(USER_MESSAGE, tally):
        first_at = time.perf_counter() if first_at is None else first_at
        chunks += 1
    turn_s = time.perf_counter() - start
    if tally.text != ANSWER or first_at is None:
        raise RuntimeError(f"unexpected hand-written turn: answer {tally.text!r}")
    sent = probe.final_request_sent_at(before)
    return LatencySample(
        turn_s=turn_s,
        request_to_first_token_s=None,
        first_token_lag_s=first_at - sent[0],
        answer_chunks=chunks,
        first_request=before,
    )


async def measure_latency(turns: int) -> tuple[list[Row], dict[str, list[dict[str, object]]]]:
    """Run `turns` turns of each variant, interleaved, against a server with provider delays."""
    variants = ("streamed", "single_chunk", "handwritten_streamed")
    script = turn_script() * (turns * len(variants) + 1)
    server = ScriptedOpenAIServer(
        script, first_token_delay_s=FIRST_TOKEN_DELAY_S, token_interval_s=TOKEN_INTERVAL_S
    )
    with server:
        probe = _Probe(server)
        streamed = ActorExecutor.from_config(openai_actor_config(server.base_url))
        single = ActorExecutor.from_config(
            openai_actor_config(server.base_url, stream_tool_rounds=False)
        )
        handwritten = HandWrittenLoop(
            base_url=server.base_url,
            api_key=os.environ[API_KEY_ENV],
            model=MODEL_NAME,
            tools={"lookup_weather": lookup_weather},
            schemas=[WEATHER_SCHEMA],
        )
        runners: dict[str, Callable[[], Awaitable[LatencySample]]] = {
            "streamed": lambda: _library_turn(streamed, probe),
            "single_chunk": lambda: _library_turn(single, probe),
            "handwritten_streamed": lambda: _handwritten_turn(handwritten, probe),
        }
        await runners["streamed"]()  # warm-up: connection pool, imports, lazy caches
        samples: dict[str, list[LatencySample]] = {name: [] for name in variants}
        for _ in range(turns):
            for name in variants:
                samples[name].append(await runners[name]())
        _check_same_requests(
            server,
            samples["streamed"][0].first_request,
            samples["handwritten_streamed"][0].first_request,
        )
    raw = {name: [asdict(sample) for sample in runs] for name, runs in samples.items()}
    return _rows(samples), raw


def _check_same_requests(server: ScriptedOpenAIServer, ours: int, theirs: int) -> None:
    """The library and the hand-written loop must ask the server the same thing, or the
    comparisons (here and in the CPU section) would compare different work."""
    bodies = server.requests
    for offset in range(2):
        mine, baseline = (_without_call_ids(bodies[first + offset]) for first in (ours, theirs))
        if mine != baseline:
            raise RuntimeError(f"request {offset + 1} of a turn differs:\n{mine}\n{baseline}")


def _without_call_ids(body: dict[str, Any]) -> str:
    # Call ids differ by design: the server numbers them per request.
    return _CALL_ID.sub("call_id", json.dumps(body, sort_keys=True))


def _rows(samples: dict[str, list[LatencySample]]) -> list[Row]:
    streamed, single = samples["streamed"], samples["single_chunk"]
    handwritten = samples["handwritten_streamed"]
    lags = [s.first_token_lag_s for s in streamed if s.first_token_lag_s is not None]
    hand_lags = [s.first_token_lag_s for s in handwritten if s.first_token_lag_s is not None]
    chunks = _median_chunks(streamed)
    floor_ms = 1000 * scripted_turn_delay_s(
        first_token_delay_s=FIRST_TOKEN_DELAY_S, token_interval_s=TOKEN_INTERVAL_S
    )
    floor = f"the server's own waits: {floor_ms:.0f} ms"
    return [
        Row(
            SECTION,
            "Streamed: first answer token at caller after the server sent it",
            median_ms(lags),
            "ms",
            FIRST_TOKEN_LAG_TARGET,
            f"median of {len(lags)} turns; {spread_ms(lags)}",
        ),
        Row(
            SECTION,
            "Streamed: final request sent → first answer token at caller",
            median_ms(_request_to_first(streamed)),
            "ms",
            detail=f"server: {FIRST_TOKEN_DELAY_S * 1000:.0f} ms to first token; "
            f"answer in {chunks} chunks",
        ),
        Row(
            SECTION,
            "Streamed: whole turn",
            median_ms([s.turn_s for s in streamed]),
            "ms",
            detail=f"{spread_ms([s.turn_s for s in streamed])}; {floor}",
        ),
        Row(
            SECTION,
            "Single-chunk (`stream_tool_rounds: false`): final request sent → answer",
            median_ms(_request_to_first(single)),
            "ms",
            detail=f"answer in {_median_chunks(single)} chunk(s): waits for the whole reply",
        ),
        Row(
            SECTION,
            "Single-chunk: whole turn",
            median_ms([s.turn_s for s in single]),
            "ms",
            detail=f"{spread_ms([s.turn_s for s in single])}; {floor}",
        ),
        Row(
            SECTION,
            "Reference: hand-written `astream` loop, first token after server sent it",
            median_ms(hand_lags),
            "ms",
            detail=spread_ms(hand_lags),
        ),
    ]


def _request_to_first(samples: list[LatencySample]) -> list[float]:
    return [s.request_to_first_token_s for s in samples if s.request_to_first_token_s is not None]


def _median_chunks(samples: list[LatencySample]) -> int:
    return sorted(s.answer_chunks for s in samples)[len(samples) // 2]
