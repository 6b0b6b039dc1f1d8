"""Agents as tools: a tool whose call runs another agent's whole turn, its answer the output.

The called agent runs through its own `run` (so its own `_execute_tool_loop`) as a child run
with its own id, inside the tool call of the run that called it (its parent):

- its calls are recorded by its own bill, under its run id and its parent's, handed to the
  tree's recorder (the root run's ledger) and adopted by every bill above it, so each run's
  totals and budgets include the runs below it;
- its budgets are its agent's, never more than what its parent has left;
- its events reach the parent's sink wrapped in `AgentEvent` (the agent path), and its
  `invoke_agent` span is a child of the call's `execute_tool` span;
- cancelling the parent cancels it where it stands (its calls billed on the way out); a run
  deeper than `max_agent_depth` is refused with an error the calling model reads.

A running `_execute_tool_loop` is the *calling run* of the tools it runs (`enter_run`); the
agent tool hands the child its lineage by the child's run id (`handed_down`), so a run that a
tool starts by other means stays a root run.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from cleveractors.agents._decisions import ChildCheck
from cleveractors.agents._lineage import Lineage
from cleveractors.agents._loop import EventSink, _Run
from cleveractors.agents.base import History, discard_event
from cleveractors.agents.tool import ToolPaused, current_call_var
from cleveractors.approvals import ApprovalDecision, CheckedDecisions, PausedRun
from cleveractors.context import RunContext
from cleveractors.errors import ConfigurationError, ExecutionError, InvalidDecisionError
from cleveractors.events import AgentEvent, Event
from cleveractors.result import ChildRun, RunOutcome
from cleveractors.runs import new_run_id
from cleveractors.tools import Tool
from cleveractors.tracing import RunTrace, current_trace, current_trace_var
from cleveractors.usage import CallRecorder

__all__ = [
    "RunsTurns",
    "agent_tool",
    "check_children",
    "close_called_agents",
    "enter_run",
    "is_agent_tool",
    "leave_run",
    "lineage_of",
]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "What to ask the agent, in full."}},
    "required": ["message"],
    "additionalProperties": False,
}


class RunsTurns(Protocol):
    """An agent that can be called as a tool (`Agent.run`)."""

    name: str

    async def run(
        self,
        start: str | CheckedDecisions,
        *,
        history: History | None,
        sink: Callable[[Event], None],
        streaming: bool,
        on_call: CallRecorder | None = None,
        run_id: str | None = None,
        can_pause: bool = True,
        context: RunContext[Any] | None = None,
    ) -> RunOutcome: ...

    def check_decisions(
        self, paused: PausedRun, decisions: Sequence[ApprovalDecision], *, now: datetime
    ) -> CheckedDecisions: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _HandedDown:
    """What the agent tool gives the child run it starts, by that run's id."""

    run_id: str
    parent: _Run
    agent_name: str


_calling_run: ContextVar[_Run | None] = ContextVar("cleveractors_calling_run", default=None)
_handed_down: ContextVar[_HandedDown | None] = ContextVar("cleveractors_handed_down", default=None)


def enter_run(run: _Run) -> Token[_Run | None]:
    """From now until `leave_run`, `run` is the calling run of the tools it runs."""
    return _calling_run.set(run)


def leave_run(entered: Token[_Run | None]) -> None:
    _calling_run.reset(entered)


def lineage_of(
    run_id: str,
    *,
    agent_name: str,
    recorder: CallRecorder | None,
    max_depth: int,
    token_budget: int | None,
    cost_budget_usd: Decimal | None,
) -> tuple[Lineage, _Run | None]:
    """The lineage of run `run_id` of agent `agent_name`, and its parent run if an agent tool
    started it: a root run's is its agent's own; a child's inherits the path, the recorder,
    the depth limit and what is left of the budgets."""
    handed = _handed_down.get()
    if handed is None or handed.run_id != run_id:
        lineage = Lineage(
            path=(agent_name,),
            recorder=recorder,
            max_depth=max_depth,
            token_budget=token_budget,
            cost_budget_usd=cost_budget_usd,
        )
        return lineage, None
    parent = handed.parent
    above = parent.lineage
    lineage = Lineage(
        path=(*above.path, agent_name),
        parent_run_id=parent.run_id,
        recorder=above.recorder,
        max_depth=min(above.max_depth, max_depth),
        token_cap=_left(above.token_budget, parent.spent_tokens),
        cost_cap_usd=_left(above.cost_budget_usd, parent.spent_cost_usd),
    ).under_budgets(token_budget, cost_budget_usd)
    return lineage, parent


def agent_tool(
    agent: RunsTurns, *, name: str | None = None, description: str | None = None
) -> Tool:
    """A tool that runs `agent`'s whole turn on the calling model's `message` (see the module).

    Raises:
        ConfigurationError: the tool's name (the agent's, when not given) is not a valid tool
            name.
    """
    tool_name = agent.name if name is None else name
    if not _TOOL_NAME.match(tool_name):
        raise ConfigurationError(
            f"agent {agent.name!r} as a tool: name {tool_name!r} is not a valid tool name "
            "(1 to 64 letters, digits, '_' or '-'); give one with name="
        )

    return Tool(
        name=tool_name,
        description=description or f"Ask the agent {agent.name!r}; it answers in full.",
        parameters=_MESSAGE_SCHEMA,
        run=_AgentCall(agent),
        source=f"agent {agent.name!r}",
    )


@dataclass(frozen=True, slots=True)
class _AgentCall:
    """How an agent's tool runs: the agent's turn on the message."""

    agent: RunsTurns

    async def __call__(self, arguments: dict[str, Any]) -> str:
        return await _run_child(self.agent, str(arguments["message"]))


async def close_called_agents(tools: Iterable[Tool]) -> None:
    """Close what the agents behind these tools hold open (their MCP sessions)."""
    for tool in tools:
        if isinstance(tool.run, _AgentCall):
            await tool.run.agent.aclose()


async def _run_child(agent: RunsTurns, message: str) -> str:
    """Run the agent's turn as a child of the calling run (a root run when there is none)."""
    parent = _calling_run.get()
    if parent is None:
        outcome = await agent.run(message, history=None, sink=discard_event, streaming=False)
        return _answer(agent, outcome)
    above = parent.lineage
    if above.depth + 1 > above.max_depth:
        raise ExecutionError(
            f"agent {agent.name!r} not called: agents may call agents {above.max_depth} deep "
            f"(max_agent_depth), and {' > '.join(above.path)} is at that depth already; "
            "answer without it"
        )
    running = current_call_var.get()
    call_id = None if running is None else running.call.call_id
    # A child that paused resumes with its decisions (its message is in its transcript).
    start: str | CheckedDecisions = message
    if call_id is not None and call_id in parent.resuming:
        start = parent.resuming.pop(call_id)
    run_id = new_run_id()
    child_trace = _child_trace(run_id, agent.name, parent.run_id)
    handed = _handed_down.set(_HandedDown(run_id, parent, agent.name))
    traced = None if child_trace is None else current_trace_var.set(child_trace)
    try:
        outcome = await agent.run(
            start,
            history=None,
            sink=_child_sink(parent, (*above.path, agent.name), run_id, call_id),
            streaming=parent.streaming,
            on_call=above.recorder,
            run_id=run_id,
            can_pause=parent.can_pause,  # its calls that need a person pause the tree
            # The child serves the same caller: the parent's session, caller and deps.
            context=replace(parent.context, run_id=run_id, actor=agent.name),
        )
    finally:
        if traced is not None:
            current_trace_var.reset(traced)
        _handed_down.reset(handed)
    result = outcome.result
    if child_trace is not None:
        child_trace.end(
            result.status,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cost_usd=result.cost_usd,
            error=outcome.error,
        )
    parent.child_runs.append(
        ChildRun(
            run_id=run_id,
            parent_run_id=parent.run_id,
            agent=agent.name,
            call_id=call_id,
            status=result.status,
            answer=result.answer,
            synthesis_reason=result.synthesis_reason,
        )
    )
    if outcome.pause is not None:
        raise ToolPaused(outcome.pause)
    return _answer(agent, outcome)


def check_children(paused: PausedRun, tools: Mapping[str, Tool], *, now: datetime) -> ChildCheck:
    """How the decisions on `paused`'s children are checked: each against the agent its call
    runs (which checks its own children the same way)."""

    def check(
        running: str, child: PausedRun, decisions: Sequence[ApprovalDecision]
    ) -> CheckedDecisions:
        name = next(call.name for call in paused.batch if call.call_id == running)
        tool = tools.get(name)
        if tool is None or not isinstance(tool.run, _AgentCall):
            raise InvalidDecisionError(
                f"call {running!r} of run {paused.run_id!r}: agent tool {name!r} is no longer "
                "offered",
                run_id=paused.run_id,
                call_id=running,
            )
        return tool.run.agent.check_decisions(child, decisions, now=now)

    return check


def is_agent_tool(tool: Tool | None) -> bool:
    """Whether the tool runs an agent (whose run may pause for a person)."""
    return tool is not None and isinstance(tool.run, _AgentCall)


def _answer(agent: RunsTurns, outcome: RunOutcome) -> str:
    """The child's answer; its failure raised as the calling model should read it (a
    cancellation goes on up: the parent is being cancelled)."""
    error = outcome.error
    if isinstance(error, asyncio.CancelledError):
        raise error
    if error is not None:
        raise ExecutionError(
            f"agent {agent.name!r} failed: {type(error).__name__}: {error}"
        ) from error
    return outcome.result.answer


def _child_trace(run_id: str, agent_name: str, parent_run_id: str) -> RunTrace | None:
    """The child run's `invoke_agent` span, under its call's `execute_tool` span."""
    above = current_trace()
    if above is None:
        return None
    running = current_call_var.get()
    tool_span = None if running is None or running.span is None else running.span.span
    return above.telemetry.start_run(
        run_id,
        None,
        agent_name=agent_name,
        parent=tool_span or above.span,
        parent_run_id=parent_run_id,
    )


def _child_sink(parent: _Run, path: tuple[str, ...], run_id: str, call_id: str | None) -> EventSink:
    """The child's events, each wrapped once with the child's path (a grandchild's, wrapped
    by the grandchild's own sink, pass up as they are)."""
    if not parent.listens:
        return discard_event
    outer = parent.sink

    def sink(event: Event) -> None:
        if isinstance(event, AgentEvent):
            outer(event)
        else:
            wrapped = AgentEvent(
                agent_path=path,
                run_id=run_id,
                call_id=call_id,
                event=event,
            )
            outer(wrapped)

    return sink


_Amount = TypeVar("_Amount", int, Decimal)


def _left(budget: _Amount | None, spent: _Amount) -> _Amount | None:
    """What is left of a budget (never below nothing)."""
    return None if budget is None else budget - min(spent, budget)
