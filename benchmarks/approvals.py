"""What pausing for a person and resuming cost beyond the LLM calls, on SQLite (issue 18:
<= 5 ms p50 each).

Every sample is a stored turn on a SQLite file (WAL) with a session, the model in process
(`ScriptedChatModel`: no network, the same one-call reply each time), so what differs between
two kinds of segment is the library's own work:

- *plain*: a new message the model answers in one LLM call (begin the run, load the history, one
  call, append the turn): the reference;
- *paused*: a new message whose one LLM call asks for a gated `refund` beside an ungated
  `lookup`: the lookup runs, the gate is checked, the pause and its approval rows are written;
- *resumed*: the refund approved: the pause is read and claimed (the decision recorded), the
  refund runs, one LLM call, the whole turn appended.

Pause added = the median, over the repetitions, of (paused - plain); resume added likewise, each
segment paired with the reference turn run just before it, so that load from other processes
on a shared machine falls on both. The CPU time added (`time.process_time()`) is shown beside.
"""

from __future__ import annotations

import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from report import Row, Target, median_ms, spread_ms

from cleveractors import ActorExecutor, LLMAgent, Resumption, tool_from_callable
from cleveractors.store import SqlStore
from cleveractors.testing import ScriptedChatModel, ScriptedReply, ScriptedToolCall

SECTION = "Approvals (SQLite)"
ADDED_TARGET = Target(5.0)
_WARMUP = 5


def _lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: 2 items"


def _refund(order: str, amount: float) -> str:
    """Refund an amount on an order."""
    return f"refunded {amount:g} on {order}"


def _replies(turns: int) -> list[ScriptedReply]:
    """Per repetition: the session's opening answer, the plain answer, the batch that pauses,
    the answer after the resume."""
    batch = (
        ScriptedToolCall(name="lookup", args={"order": "A1"}, id="l1"),
        ScriptedToolCall(name="refund", args={"order": "A1", "amount": 30}, id="r1"),
    )
    one = [
        ScriptedReply(text="Hello.", prompt_tokens=10, completion_tokens=1),
        ScriptedReply(text="Nothing to refund.", prompt_tokens=20, completion_tokens=4),
        ScriptedReply(tool_calls=batch, prompt_tokens=20, completion_tokens=5),
        ScriptedReply(text="Refunded.", prompt_tokens=40, completion_tokens=2),
    ]
    return one * turns


@dataclass(frozen=True, slots=True)
class _Clock:
    wall: float
    cpu: float

    @classmethod
    def now(cls) -> _Clock:
        return cls(time.perf_counter(), time.process_time())

    def since(self, start: _Clock) -> tuple[float, float]:
        return self.wall - start.wall, self.cpu - start.cpu


async def measure_approvals(runs: int) -> tuple[list[Row], dict[str, list[float]]]:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-bench-approvals-"))
    model = ScriptedChatModel(replies=_replies(runs + _WARMUP))
    agent = LLMAgent(
        model,
        tools=[
            tool_from_callable(_lookup, name="lookup"),
            tool_from_callable(_refund, name="refund", needs_approval=True),
        ],
    )
    samples: dict[str, list[float]] = {
        f"{kind}_{clock}": [] for kind in ("plain", "paused", "resumed") for clock in ("s", "cpu_s")
    }
    async with ActorExecutor(agent, store=SqlStore(f"sqlite:///{folder / 'bench.db'}")) as ex:
        for repetition in range(runs + _WARMUP):
            session = f"bench-{repetition}"
            await ex.execute("Hello", session_id=session)  # every measured turn has history
            gc.collect()
            started = _Clock.now()
            await ex.execute("Anything to refund?", session_id=session)
            plain = _Clock.now().since(started)
            started = _Clock.now()
            paused_result = await ex.execute("Refund A1", session_id=session)
            paused = _Clock.now().since(started)
            assert paused_result.status == "paused", paused_result
            started = _Clock.now()
            resumed_result = await ex.execute(
                Resumption(paused_result.run_id, [{"call_id": "r1", "decision": "approve"}])
            )
            resumed = _Clock.now().since(started)
            assert resumed_result.status == "answered", resumed_result
            if repetition < _WARMUP:
                continue
            for kind, (wall, cpu) in (("plain", plain), ("paused", paused), ("resumed", resumed)):
                samples[f"{kind}_s"].append(wall)
                samples[f"{kind}_cpu_s"].append(cpu)
    model.assert_consumed()
    return _rows(samples), samples


def _added(samples: dict[str, list[float]], kind: str, clock: str) -> list[float]:
    """Per repetition, the segment's time less the reference turn's just before it (paired, so
    a busy moment on a shared machine falls on both)."""
    return [
        segment - plain
        for segment, plain in zip(
            samples[f"{kind}_{clock}"], samples[f"plain_{clock}"], strict=True
        )
    ]


def _rows(samples: dict[str, list[float]]) -> list[Row]:
    rows = [
        Row(
            SECTION,
            "A stored one-call turn (reference)",
            median_ms(samples["plain_s"]),
            "ms",
            None,
            f"CPU p50 {median_ms(samples['plain_cpu_s']):.2f} ms; {spread_ms(samples['plain_s'])}",
        )
    ]
    for kind, verb in (("paused", "Pausing"), ("resumed", "Resuming")):
        wall = _added(samples, kind, "s")
        cpu = _added(samples, kind, "cpu_s")
        rows.append(
            Row(
                SECTION,
                f"{verb} adds (the {kind} segment less the reference, paired)",
                median_ms(wall),
                "ms",
                ADDED_TARGET,
                f"CPU added p50 {median_ms(cpu):.2f} ms; {kind} segment p50 "
                f"{median_ms(samples[kind + '_s']):.2f} ms; {spread_ms(wall)}",
            )
        )
    return rows
