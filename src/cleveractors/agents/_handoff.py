"""Handoffs: an agent may pass the conversation to another actor's agent.

Each target is offered to the model as a tool, `transfer_to_<name>` with a `reason`. When the
model calls one (and it succeeds), the loop goes on with the target (`hand_over`): its system
prompt in place of the first agent's, its tools, its model, its price and its limits, with the
conversation so far, in the same run (one bill, one round count, one budget). The first such
call of a batch wins: the others are answered like it, and change nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from cleveractors.agents._loop import _Run
from cleveractors.agents.tool import ToolCallRequest
from cleveractors.approvals import BatchCall
from cleveractors.config import HANDOFF_TOOL_PREFIX
from cleveractors.errors import ConfigurationError
from cleveractors.events import HandoffOccurred
from cleveractors.pricing import CallPricer
from cleveractors.tools import Tool

__all__ = ["Handoffs", "hand_over", "handoff_tool_name"]

logger = logging.getLogger("cleveractors.agents.llm")

_NOT_IN_A_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_TOOL_NAME = 64  # OpenAI's limit, the strictest of the providers'
_REASON_SCHEMA: Mapping[str, object] = {
    "type": "object",
    "properties": {
        "reason": {
            "type": "string",
            "description": "Why the conversation goes over, for the agent that takes it.",
        }
    },
    "required": ["reason"],
    "additionalProperties": False,
}


class HandoffAgent(Protocol):
    """What a handoff needs of an agent (an `LLMAgent`)."""

    @property
    def name(self) -> str: ...

    @property
    def system_prompt(self) -> str | None: ...

    @property
    def pricer(self) -> CallPricer: ...


A = TypeVar("A", bound=HandoffAgent)


def handoff_tool_name(agent_name: str) -> str:
    """The tool that hands the conversation to `agent_name`: `transfer_to_<name>`, the name
    reduced to the characters every provider accepts in a tool name."""
    cleaned = _NOT_IN_A_TOOL_NAME.sub("_", agent_name).strip("_") or "agent"
    return (HANDOFF_TOOL_PREFIX + cleaned)[:_MAX_TOOL_NAME]


@dataclass(frozen=True, slots=True)
class _Target(Generic[A]):
    agent: A
    tool: Tool


class Handoffs(Generic[A]):
    """The agents one agent may hand the conversation to, each behind its tool."""

    __slots__ = ("_owner", "_targets")

    def __init__(self, owner: str) -> None:
        self._owner = owner
        self._targets: dict[str, _Target[A]] = {}
        """By tool name."""

    def add(self, target: A, *, description: str | None = None) -> Tool:
        """Offer `target`; returns its tool, for the agent to bind.

        Raises:
            ConfigurationError: `target` is the agent itself, or another target of the same
                name (or tool name) is offered already.
        """
        if target.name == self._owner:
            raise ConfigurationError(
                f"agent {self._owner!r}: handoffs: an agent cannot hand off to itself "
                f"(or to another agent named {target.name!r})"
            )
        name = handoff_tool_name(target.name)
        if name in self._targets:
            raise ConfigurationError(
                f"agent {self._owner!r}: handoffs: {target.name!r} and "
                f"{self._targets[name].agent.name!r} would both be offered as tool {name!r}"
            )
        tool = Tool(
            name=name,
            description=_tool_description(target.name, description),
            parameters=_REASON_SCHEMA,
            run=_transferred(target.name),
            source=f"handoff to {target.name!r}",
        )
        self._targets[name] = _Target(target, tool)
        return tool

    @property
    def agents(self) -> tuple[A, ...]:
        """The targets, in the order they were offered."""
        return tuple(target.agent for target in self._targets.values())

    def taken(
        self, run: _Run, ran_before: Sequence[BatchCall] = ()
    ) -> tuple[ToolCallRequest, A] | None:
        """The first call of the round's batch that handed the conversation over (its tool ran
        and succeeded), with the agent it went to; None when no call did. `ran_before`: the
        calls of a resumed batch that ran before it paused."""
        if not self._targets:
            return None
        for earlier in ran_before:
            target = self._targets.get(earlier.name)
            answer = earlier.answer
            if target is not None and answer is not None and answer.status == "success":
                request = ToolCallRequest(earlier.call_id, earlier.name, earlier.arguments)
                return request, target.agent
        for record in run.tool_records:
            target = self._targets.get(record.name)
            if target is not None and record.round == run.round and record.status == "ok":
                call = ToolCallRequest(record.call_id, record.name, record.arguments)
                return call, target.agent
        return None


def hand_over(run: _Run, source: HandoffAgent, call: ToolCallRequest, target: A) -> A:
    """The run goes on with `target`: its system prompt in the transcript, its price and name
    on the calls to come. Said once, to the events and the log."""
    run.transcript.replace_system_prompt(source.system_prompt, target.system_prompt)
    run.bill.pricer = target.pricer
    run.bill.agent = run.agent_name = target.name
    run.context = replace(run.context, actor=target.name)
    reason = call.arguments.get("reason", "") if isinstance(call.arguments, dict) else ""
    run.sink(
        HandoffOccurred(
            round=run.round,
            call_id=call.call_id,
            from_agent=source.name,
            to_agent=target.name,
            reason=str(reason),
        )
    )
    logger.info(
        "run %s: agent %s handed the conversation to %s (call %s)",
        run.run_id,
        source.name,
        target.name,
        call.call_id,
    )
    return target


def _tool_description(name: str, description: str | None) -> str:
    what = f" {description.strip()}" if description and description.strip() else ""
    return (
        f"Hand the conversation over to the agent {name!r}, which answers the user from here "
        f"on.{what}"
    )


def _transferred(name: str) -> _Transfer:
    return _Transfer(f"The conversation is handed over to {name!r}.")


@dataclass(frozen=True, slots=True)
class _Transfer:
    """A handoff tool's run: it only says so; the loop does the handing over."""

    output: str

    async def __call__(self, arguments: dict[str, object]) -> object:
        return self.output
