"""What sizing each prompt against the context window costs (issue 30, acceptance 2).

    python benchmarks/context_sizing.py     # 100 and 1,000 turns of history

Before every LLM call the loop knows the next prompt's size (`agents._context_window`): the
last call's exact figure plus the count of each message added since. A run's view is opened
once, from the size its session's last run measured (`SizedHistory`); each further call takes
in the round's new messages (the reply with its tool call, the tool's result) and reads the
size. Each sample is the CPU (`time.process_time()`) of one run's sizing divided by its calls:
the view opened, then `ROUNDS` calls each taking in one round. Target: <= 1 ms per call, flat
from 100 to 1,000 turns. Counting the whole history instead (a history nobody measured) is
shown beside it, for comparison. A report, not a test: it always exits 0.
"""

from __future__ import annotations

import statistics
import time

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from report import Row, Target

from cleveractors._compacted import SizedHistory
from cleveractors.agents._context_window import ContextView
from cleveractors.tokens import estimate_prompt_tokens, warm_up

SECTION = "Context sizing"
TARGET = Target(1.0)
HISTORIES = (100, 1000)
ROUNDS = 10
_OUTPUT = "fact about the city, with numbers 12 and 34; " * 40


def _turn(number: int) -> list[BaseMessage]:
    call = {"name": "lookup", "args": {"city": f"city{number}"}, "id": f"call_{number}"}
    return [
        HumanMessage(f"Tell me about city{number}, please, in some detail. " * 3),
        AIMessage("", tool_calls=[call]),
        ToolMessage(_OUTPUT, tool_call_id=f"call_{number}", name="lookup"),
        AIMessage(f"City{number} is pleasant; here is what matters about it. " * 3),
    ]


def _history(turns: int) -> list[BaseMessage]:
    return [message for number in range(turns) for message in _turn(number)]


def _sizing_per_call_s(history: list[BaseMessage], *, is_measured: bool) -> float:
    given = SizedHistory(history, tokens=estimate_prompt_tokens(history)) if is_measured else None
    messages: list[BaseMessage] = [SystemMessage("You help."), *history, HumanMessage("Next?")]
    rounds = [_turn(10_000 + n)[1:3] for n in range(ROUNDS)]
    started = time.process_time()
    view = ContextView(
        messages,
        turn_start=len(messages) - 1,
        has_system_prompt=True,
        budget=10**9,
        overhead=120,
        history_tokens=None if given is None else given.tokens,
    )
    size = view.tokens
    for added in rounds:
        messages.extend(added)
        view.sync(messages)
        size = view.tokens
    elapsed = time.process_time() - started
    assert size > 0
    return elapsed / (ROUNDS + 1)


def measure_context_sizing(repetitions: int) -> tuple[list[Row], dict[str, list[float]]]:
    warm_up()
    rows: list[Row] = []
    samples: dict[str, list[float]] = {}
    for turns in HISTORIES:
        history = _history(turns)
        for is_measured in (True, False):
            key = f"{turns}_{'measured' if is_measured else 'counted'}"
            samples[key] = [
                _sizing_per_call_s(history, is_measured=is_measured) for _ in range(repetitions)
            ]
            value = statistics.median(samples[key]) * 1000
            if is_measured:
                rows.append(
                    Row(
                        SECTION,
                        f"CPU per call, {turns}-turn history",
                        value,
                        "ms",
                        TARGET,
                        f"a run's view opened from the measured size, then {ROUNDS} rounds",
                    )
                )
            else:
                rows.append(
                    Row(
                        SECTION,
                        f"CPU per call, {turns}-turn history counted",
                        value,
                        "ms",
                        None,
                        "the same, counting the whole history once per run (not used)",
                    )
                )
    return rows, samples


if __name__ == "__main__":
    found, _ = measure_context_sizing(20)
    for row in found:
        print(f"{row.measure}: {row.value:.3f} ms ({row.verdict}) {row.detail}")
