"""Step 4 of a round: running a batch of tool calls and writing their outcomes down.

`ToolDispatcher` runs the calls in the model's order (consecutive `concurrent` calls together,
an `ends_turn` call stopping the batch); `answer_call` and `skip_call` put each call's outcome in
the transcript the model reads next and in the run's records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import ToolMessage

from cleveractors.agents._loop import _Run
from cleveractors.agents.tool import ToolAgent, ToolCallRequest, ToolOutcome
from cleveractors.events import ToolCallFinished, ToolCallSkipped, ToolCallStarted
from cleveractors.result import ToolCallRecord, ToolCallStatus
from cleveractors.tools import Tool

__all__ = ["Dispatched", "ToolDispatcher", "answer_call", "skip_call"]

logger = logging.getLogger(__name__)

_SKIPPED = "Not run: tool {tool!r} (call {call_id}) ended the turn before this call."

_Ran = tuple[ToolCallRequest, ToolOutcome]


@dataclass(frozen=True, slots=True)
class Dispatched:
    """What a batch did: the calls that ran (a prefix of the batch, in model order) and the
    `ends_turn` call that ended it early, if one did."""

    ran: list[_Ran]
    ender: _Ran | None


class ToolDispatcher:
    """Runs the tool calls of one reply, each through a fresh `ToolAgent`."""

    def __init__(self, tools: Mapping[str, Tool], *, agent_name: str) -> None:
        self._tools = tools
        self._agent_name = agent_name
        self._available = tuple(tools)

    async def dispatch(self, run: _Run, calls: Sequence[ToolCallRequest]) -> Dispatched:
        """Run the batch group by group, in model order, until an `ends_turn` call succeeds."""
        ran: list[_Ran] = []
        for group in self._groups(calls):
            outcomes = await self._run_group(run, group)
            _put_in_model_order(run, group)
            for call, outcome in zip(group, outcomes, strict=True):
                ran.append((call, outcome))
                if outcome.error is None and self._ends_turn(call):
                    return Dispatched(ran, (call, outcome))
        return Dispatched(ran, None)

    def _groups(self, calls: Sequence[ToolCallRequest]) -> list[list[ToolCallRequest]]:
        """Split a batch, in order, into runs of consecutive concurrent calls and single calls."""
        groups: list[list[ToolCallRequest]] = []
        for call in calls:
            if groups and self._is_concurrent(call) and self._is_concurrent(groups[-1][0]):
                groups[-1].append(call)
            else:
                groups.append([call])
        return groups

    def _is_concurrent(self, call: ToolCallRequest) -> bool:
        tool = self._tools.get(call.name)
        return tool is not None and tool.concurrent

    def _ends_turn(self, call: ToolCallRequest) -> bool:
        tool = self._tools.get(call.name)
        return tool is not None and tool.ends_turn

    async def _run_group(self, run: _Run, group: list[ToolCallRequest]) -> list[ToolOutcome]:
        if len(group) == 1:
            return [await self._run_call(run, group[0])]
        async with asyncio.TaskGroup() as tasks:
            running = [tasks.create_task(self._run_call(run, call)) for call in group]
        return [task.result() for task in running]

    async def _run_call(self, run: _Run, call: ToolCallRequest) -> ToolOutcome:
        await run.pacing.checkpoint()  # no tool starts once the run is stopped
        run.sink(ToolCallStarted(round=run.round, call_id=call.call_id, name=call.name))
        agent = ToolAgent(
            self._tools.get(call.name), agent_name=self._agent_name, available=self._available
        )
        outcome = await agent.run(call)
        # Recorded as soon as it ran: a run cancelled later in the batch still reports it.
        _record(
            run,
            call,
            status="error" if outcome.error else "ok",
            output=outcome.output,
            duration_s=outcome.duration_s,
        )
        run.sink(
            ToolCallFinished(
                round=run.round,
                call_id=call.call_id,
                name=call.name,
                output=None if outcome.error else outcome.output,
                error=None if outcome.error is None else str(outcome.error),
                duration_s=outcome.duration_s,
            )
        )
        return outcome


def answer_call(run: _Run, call: ToolCallRequest, outcome: ToolOutcome, content: str) -> None:
    """Put a call's outcome in the transcript; `content` is what the model reads (the output,
    or its condensed form, which then replaces the output in the call's record)."""
    run.transcript.append(
        ToolMessage(
            content=content,
            tool_call_id=call.call_id,
            name=call.name,
            status="error" if outcome.error else "success",
        )
    )
    if content != outcome.output:
        _replace_output(run, call, content)


def skip_call(
    run: _Run, call: ToolCallRequest, *, ended_by: ToolCallRequest, agent_name: str
) -> None:
    """Answer a call that an earlier `ends_turn` call kept from running, so the transcript stays
    valid (every call id answered once)."""
    logger.info(
        "agent %s: skipped tool %s (call %s): %s (call %s) ended the turn",
        agent_name,
        call.name,
        call.call_id,
        ended_by.name,
        ended_by.call_id,
    )
    reason = _SKIPPED.format(tool=ended_by.name, call_id=ended_by.call_id)
    run.transcript.append(ToolMessage(content=reason, tool_call_id=call.call_id, name=call.name))
    _record(run, call, status="skipped", output=reason, duration_s=0.0)
    run.sink(ToolCallSkipped(round=run.round, call_id=call.call_id, name=call.name, reason=reason))


def _put_in_model_order(run: _Run, group: list[ToolCallRequest]) -> None:
    """Concurrent calls were recorded as they finished; put the group's records in model order."""
    if len(group) < 2:
        return
    order = {call.call_id: index for index, call in enumerate(group)}
    finished = run.tool_records[-len(group) :]
    run.tool_records[-len(group) :] = sorted(finished, key=lambda record: order[record.call_id])


def _replace_output(run: _Run, call: ToolCallRequest, output: str) -> None:
    """Record what the model read instead of the raw output (a condensed tool output)."""
    for position in range(len(run.tool_records) - 1, -1, -1):
        record = run.tool_records[position]
        if record.call_id == call.call_id and record.round == run.round:
            run.tool_records[position] = record.model_copy(update={"output": output})
            return


def _record(
    run: _Run, call: ToolCallRequest, *, status: ToolCallStatus, output: str, duration_s: float
) -> None:
    run.tool_records.append(
        ToolCallRecord(
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            status=status,
            output=output,
            duration_s=duration_s,
            round=run.round,
        )
    )
