"""The tool set of one agent: its own tools and its MCP servers' tools, bound to its model.

Binding converts every schema, so it is done once, and again only when an MCP server's list of
tools changes (`sync`, before each round). The set also keeps the dispatcher that runs a batch of
calls against the current tools.

Step 4 of a round, running a batch of tool calls and writing their outcomes down, lives here too:
`ToolDispatcher` runs the calls in the model's order (consecutive `concurrent` calls together,
an `ends_turn` call stopping the batch); `answer_call` and `skip_call` put each call's outcome in
the transcript the model reads next and in the run's records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from cleveractors.agents._decisions import edited
from cleveractors.agents._loop import _Run
from cleveractors.agents.tool import ToolAgent, ToolCallRequest, ToolOutcome
from cleveractors.approvals import ToolAnswer
from cleveractors.config import McpServer
from cleveractors.errors import ConfigurationError
from cleveractors.events import (
    ToolCallFinished,
    ToolCallRequested,
    ToolCallSkipped,
    ToolCallStarted,
)
from cleveractors.providers.tool_choice import bind_tools_forbidding_calls
from cleveractors.result import ToolCallRecord, ToolCallStatus
from cleveractors.runs import current_run_id
from cleveractors.tools import Tool, ToolHandler, as_tool
from cleveractors.tools.mcp import McpToolbox
from cleveractors.tracing import current_trace

if TYPE_CHECKING:
    from cleveractors.approvals import PausedRun

__all__ = [
    "BatchOutcome",
    "Dispatched",
    "Prune",
    "ToolDispatcher",
    "ToolSet",
    "answer_call",
    "answer_calls",
    "answer_for_person",
    "append_answers",
    "is_declared_gated",
    "open_batch",
    "run_batch",
    "skip_call",
]


class ToolSet:
    """The tools an agent offers its model.

    Attributes:
        tools: The tools by name, the agent's own first.
        dispatcher: Runs a batch of calls against `tools`.
        model_with_tools: The model with every tool bound (a round's request).
        model_declaring_tools: The model with the tools declared and calling them forbidden,
            in the provider's own words (a synthesis request whose transcript holds tool calls).

    Raises:
        ConfigurationError: two of the agent's own tools share a name.
    """

    __slots__ = (
        "_agent_name",
        "_mcp",
        "_mcp_version",
        "_model",
        "_own_tools",
        "_provider",
        "_tool_schemas",
        "dispatcher",
        "model_declaring_tools",
        "model_with_tools",
        "tools",
    )

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[Tool | BaseTool | ToolHandler],
        *,
        agent_name: str,
        provider: str | None,
        mcp_servers: Sequence[McpServer] = (),
        tool_schemas: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = list,
    ) -> None:
        self._model = model
        self._tool_schemas = tool_schemas
        """The schemas as bound: where prompt caching marks the last one."""
        self._agent_name = agent_name
        self._provider = provider
        self._own_tools: dict[str, Tool] = {}
        for candidate in tools:
            tool = as_tool(candidate)
            if tool.name in self._own_tools:
                raise ConfigurationError(f"agent {agent_name!r}: two tools are named {tool.name!r}")
            self._own_tools[tool.name] = tool
        self._mcp = (
            McpToolbox(mcp_servers, agent_name=agent_name, other_tools=self._own_tools)
            if mcp_servers
            else None
        )
        self._mcp_version = 0
        self._bind(self._own_tools)

    async def sync(self) -> None:
        """Bind the MCP servers' tools when they are new or changed (connecting them first).

        Raises:
            McpServerError: a server cannot be reached or does not offer an allowed tool.
            ConfigurationError: an MCP tool's name collides with another tool's.
        """
        if self._mcp is None:
            return
        mcp_tools, version = await self._mcp.current_tools()  # names checked by the toolbox
        if version == self._mcp_version:
            return
        self._bind(self._own_tools | {tool.name: tool for tool in mcp_tools})
        self._mcp_version = version

    def add(self, tool: Tool) -> None:
        """Offer one more of the agent's own tools (a handoff added after the agent was made),
        whose name no tool has."""
        others = {name: each for name, each in self.tools.items() if name not in self._own_tools}
        self._own_tools[tool.name] = tool
        self._bind(self._own_tools | others)

    @property
    def open_mcp_servers(self) -> tuple[str, ...]:
        """The names of the MCP servers connected (or connecting) now."""
        return () if self._mcp is None else self._mcp.open_servers

    async def aclose(self) -> None:
        """Close the MCP sessions (stdio servers are terminated); a later `sync` reopens them."""
        if self._mcp is not None:
            await self._mcp.aclose()

    def _bind(self, tools: dict[str, Tool]) -> None:
        self.tools = tools
        self.dispatcher = ToolDispatcher(tools, agent_name=self._agent_name)
        schemas = self._tool_schemas([tool.openai_schema() for tool in tools.values()])
        model = self._model
        self.model_with_tools: Runnable[LanguageModelInput, Any] = (
            model.bind_tools(schemas) if tools else model
        )
        self.model_declaring_tools: Runnable[LanguageModelInput, Any] = (
            bind_tools_forbidding_calls(model, schemas, provider=self._provider) if tools else model
        )


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
        if run.listens:
            run.sink(ToolCallStarted(round=run.round, call_id=call.call_id, name=call.name))
        agent = ToolAgent(
            self._tools.get(call.name),
            agent_name=self._agent_name,
            available=self._available,
            context=run.context,
        )
        outcome = await agent.run(call)
        if outcome.paused is not None:
            return outcome  # no answer yet: the run pauses, and the call ends when it resumes
        # Recorded as soon as it ran: a run cancelled later in the batch still reports it.
        _record(
            run,
            call,
            status="error" if outcome.error else "ok",
            output=outcome.output,
            duration_s=outcome.duration_s,
        )
        if run.listens:
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


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """How a batch of tool calls ended."""

    answer: str | None = None
    """The output of an `ends_turn` tool, which is the turn's answer; None to go on."""
    paused: PausedRun | None = None
    """Set when gated calls of the batch wait for a person: the run pauses."""


Prune = Callable[[_Run, ToolCallRequest, ToolOutcome], Awaitable[str]]
"""The output the model reads of a call that ran (condensed when it is too long)."""


def is_declared_gated(tool: Tool | None) -> bool:
    """Whether the tool itself says its calls wait for a person (`approval: required`)."""
    return tool is not None and tool.needs_approval


def open_batch(
    run: _Run, reply: AIMessage, calls: Sequence[ToolCallRequest], *, agent_name: str
) -> None:
    """A reply's batch begins: a tool round, the reply in the transcript, each call announced."""
    run.tool_rounds += 1
    run.transcript.append(reply)
    for call in calls if run.listens else ():
        run.sink(
            ToolCallRequested(
                round=run.round, call_id=call.call_id, name=call.name, arguments=call.arguments
            )
        )
    if len(calls) > 1:
        logger.info(
            "agent %s, run %s: %d tool calls in one reply: %s",
            agent_name,
            current_run_id(),
            len(calls),
            ", ".join(call.name for call in calls),
        )


async def answer_calls(
    run: _Run,
    calls: Sequence[ToolCallRequest],
    ready: Sequence[ToolCallRequest],
    answers: dict[str, ToolAnswer],
    *,
    dispatcher: ToolDispatcher,
    prune: Prune,
    agent_name: str,
    edits: Mapping[str, Mapping[str, object]] | None = None,
    children: dict[str, PausedRun] | None = None,
) -> str | None:
    """Run the `ready` calls of a batch and put their answers in `answers` (or, for an agent
    called as a tool whose run paused, its pause in `children`). When an `ends_turn` call ended
    the batch, the calls left are skipped, the whole batch answered in the transcript, and the
    call's output (the turn's answer) returned; else None."""
    if children is None:
        children = {}
    dispatched = await dispatcher.dispatch(run, ready)
    for call, outcome in dispatched.ran:
        if outcome.paused is not None:
            children[call.call_id] = outcome.paused
            continue
        output = await prune(run, call, outcome)
        if edits and (arguments := edits.get(call.call_id)) is not None:
            output = edited(arguments, output)
        answers[call.call_id] = answer_call(run, call, outcome, output)
    if dispatched.ender is None:
        return None
    ender_call, ender_outcome = dispatched.ender
    for call in calls:
        if call.call_id not in answers:
            answers[call.call_id] = skip_call(run, call, ended_by=ender_call, agent_name=agent_name)
    append_answers(run, calls, answers)
    run.show_text(ender_outcome.output)
    return ender_outcome.output


async def run_batch(
    run: _Run,
    reply: AIMessage,
    calls: Sequence[ToolCallRequest],
    *,
    toolset: ToolSet,
    prune: Prune,
    agent_name: str,
) -> BatchOutcome:
    """Answer a reply's batch of which no call waits for a person: every call runs."""
    open_batch(run, reply, calls, agent_name=agent_name)
    answers: dict[str, ToolAnswer] = {}
    ended = await answer_calls(
        run,
        calls,
        calls,
        answers,
        dispatcher=toolset.dispatcher,
        prune=prune,
        agent_name=agent_name,
    )
    if ended is not None:
        return BatchOutcome(answer=ended)
    append_answers(run, calls, answers)
    return BatchOutcome()


def answer_call(run: _Run, call: ToolCallRequest, outcome: ToolOutcome, content: str) -> ToolAnswer:
    """A call's answer, as the model will read it; `content` is the output, or its condensed
    (or annotated) form, which then replaces the output in the call's record."""
    if content != outcome.output:
        _replace_output(run, call, content)
    return ToolAnswer(content, "error" if outcome.error else "success")


def skip_call(
    run: _Run, call: ToolCallRequest, *, ended_by: ToolCallRequest, agent_name: str
) -> ToolAnswer:
    """Answer a call that an earlier `ends_turn` call kept from running, so the transcript stays
    valid (every call id answered once)."""
    logger.info(
        "agent %s, run %s: skipped tool %s (call %s): %s (call %s) ended the turn",
        agent_name,
        current_run_id(),
        call.name,
        call.call_id,
        ended_by.name,
        ended_by.call_id,
    )
    reason = _SKIPPED.format(tool=ended_by.name, call_id=ended_by.call_id)
    _record(run, call, status="skipped", output=reason, duration_s=0.0)
    if (run_trace := current_trace()) is not None:
        run_trace.skipped_tool(call.name, call.call_id)
    run.sink(ToolCallSkipped(round=run.round, call_id=call.call_id, name=call.name, reason=reason))
    return ToolAnswer(reason)


def answer_for_person(run: _Run, call: ToolCallRequest, answer: ToolAnswer) -> ToolAnswer:
    """Record a gated call that a person's decision (or the lack of one) answered without
    running it: declined (an error the model reads) or responded (a person's text)."""
    status: ToolCallStatus = "declined" if answer.status == "error" else "responded"
    _record(run, call, status=status, output=answer.content, duration_s=0.0)
    return answer


def append_answers(
    run: _Run, calls: Sequence[ToolCallRequest], answers: Mapping[str, ToolAnswer]
) -> None:
    """Put a whole batch's answers in the transcript, in the model's order."""
    for call in calls:
        answer = answers[call.call_id]
        run.transcript.append(
            ToolMessage(
                content=answer.content,
                tool_call_id=call.call_id,
                name=call.name,
                status=answer.status,
            )
        )


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
