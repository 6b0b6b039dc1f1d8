"""What calling an agent as a tool costs in CPU (issue 29: <= 1.10x).

Each repetition runs, blocking and in process (`ScriptedChatModel`: no network), three turns:

- *parent alone*: the parent's model calls a plain tool that returns the child's answer, then
  answers (two LLM calls, one tool call);
- *child alone*: the child's model answers the message (one LLM call);
- *delegated*: the same parent whose tool is the child agent (`LLMAgent.as_tool()`): the
  child's turn runs inside the parent's tool call, as a child run billed in the parent's totals.

The ratio is the median CPU time (`time.process_time()`) of the delegated turn over the median
of the two turns run separately, each repetition's turns run one after another so that load
from other processes on a shared machine falls on all three.
"""

from __future__ import annotations

import gc
import statistics
import time

from report import Row, Target

from cleveractors import ActorExecutor, LLMAgent, tool_from_callable
from cleveractors.testing import ScriptedChatModel, ScriptedReply, ScriptedToolCall

SECTION = "Agents as tools (model in process)"
RATIO_TARGET = Target(1.10)
_WARMUP = 5
_ANSWER = "It rains in Paris."


def _parent_replies(turns: int) -> list[ScriptedReply]:
    call = ScriptedToolCall(name="researcher", args={"message": "Weather in Paris?"}, id="c1")
    one = [
        ScriptedReply(tool_calls=(call,), prompt_tokens=20, completion_tokens=5),
        ScriptedReply(text="The researcher says it rains.", prompt_tokens=40, completion_tokens=6),
    ]
    return one * turns


def _child_replies(turns: int) -> list[ScriptedReply]:
    return [ScriptedReply(text=_ANSWER, prompt_tokens=10, completion_tokens=4)] * turns


async def _researcher(message: str) -> str:
    """Ask the researcher."""
    return _ANSWER


async def measure_delegation(runs: int) -> tuple[list[Row], dict[str, list[float]]]:
    turns = runs + _WARMUP
    child = LLMAgent(ScriptedChatModel(replies=_child_replies(2 * turns)), name="researcher")
    delegating = ActorExecutor(
        LLMAgent(
            ScriptedChatModel(replies=_parent_replies(turns)),
            name="boss",
            tools=[child.as_tool()],
        )
    )
    alone = ActorExecutor(
        LLMAgent(
            ScriptedChatModel(replies=_parent_replies(turns)),
            name="boss",
            tools=[tool_from_callable(_researcher, name="researcher")],
        )
    )
    child_alone = ActorExecutor(child)
    samples: dict[str, list[float]] = {"parent_cpu_s": [], "child_cpu_s": [], "delegated_cpu_s": []}
    for repetition in range(turns):
        gc.collect()
        started = time.process_time()
        result = await delegating.execute("Weather?")
        delegated = time.process_time() - started
        gc.collect()
        started = time.process_time()
        await alone.execute("Weather?")
        parent = time.process_time() - started
        gc.collect()
        started = time.process_time()
        await child_alone.execute("Weather in Paris?")
        child_cpu = time.process_time() - started
        assert result.llm_calls == 3, result
        assert len(result.child_runs) == 1, result
        if repetition < _WARMUP:
            continue
        samples["parent_cpu_s"].append(parent)
        samples["child_cpu_s"].append(child_cpu)
        samples["delegated_cpu_s"].append(delegated)
    return _rows(samples), samples


def _rows(samples: dict[str, list[float]]) -> list[Row]:
    separate = statistics.median(
        parent + child
        for parent, child in zip(samples["parent_cpu_s"], samples["child_cpu_s"], strict=True)
    )
    delegated = statistics.median(samples["delegated_cpu_s"])
    return [
        Row(
            SECTION,
            "CPU of a turn that delegates once / the parent and child turns run separately",
            delegated / separate,
            "x",
            RATIO_TARGET,
            f"delegated p50 {delegated * 1000:.2f} ms; separately p50 {separate * 1000:.2f} ms",
        )
    ]
