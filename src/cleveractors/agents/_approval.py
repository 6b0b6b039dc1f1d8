"""Which calls wait for a person, and whether decisions fit the calls they name.

`ApprovalGate` says which calls of a batch are gated: a tool declared so (`Tool.needs_approval`,
from `approval: required` in config or an MCP server's rule), a name in `LLMAgent(approval=...)`,
or a policy that says so. It fails closed: a policy that raises, or a call whose arguments it
could not read, waits for a person.

`ToolBatches` answers a reply's batch of calls: the ungated calls run, the gated ones pause the
run (or are declined where nobody can approve them); on resuming, it carries out the decisions
(checked by `agents._decisions`). A batch none of whose calls can wait for a person (no rule
set, no tool declared so) never comes here: `agents._toolset.run_batch` runs it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from langchain_core.messages import AIMessage

from cleveractors.agents._decisions import (
    UNAVAILABLE,
    declined,
    expired_answer,
    not_run,
)
from cleveractors.agents._loop import _Run
from cleveractors.agents._toolset import (
    BatchOutcome,
    Prune,
    ToolSet,
    answer_calls,
    answer_for_person,
    append_answers,
    is_declared_gated,
    open_batch,
)
from cleveractors.agents.tool import ToolCallRequest
from cleveractors.approvals import (
    BatchCall,
    CheckedDecisions,
    PausedRun,
    PendingApproval,
    RecordedDecision,
    ToolAnswer,
    call_digest,
    child_call_id,
)
from cleveractors.errors import (
    ConfigurationError,
)
from cleveractors.events import ToolApprovalRequested, ToolCallDecided
from cleveractors.runs import current_run_id
from cleveractors.tools import Tool

__all__ = [
    "ApprovalGate",
    "ApprovalPolicy",
    "ToolBatches",
]

logger = logging.getLogger(__name__)

ApprovalPolicy = Callable[[ToolCallRequest], bool | Awaitable[bool]]
"""Decides per call whether a person must approve it (True) or it may run at once (False), for
rules by argument ("refunds over 50 EUR"). It may be async. A policy that raises is read as True:
a call whose rule cannot be checked waits for a person."""


class ApprovalGate:
    """Says which calls of a batch must wait for a person.

    Raises:
        ConfigurationError: `approval` is neither tool names nor a callable, or names a tool the
            agent does not have.
    """

    def __init__(
        self,
        approval: Sequence[str] | ApprovalPolicy | None,
        *,
        timeout_s: float,
        tools: Mapping[str, Tool],
        agent_name: str,
        has_mcp_servers: bool = False,
    ) -> None:
        if not timeout_s > 0:
            raise ConfigurationError(
                f"agent {agent_name!r}: approval_timeout_s must be positive, got {timeout_s!r}"
            )
        self.timeout_s = timeout_s
        self._agent_name = agent_name
        self._policy: ApprovalPolicy | None = None
        self._names: frozenset[str] = frozenset()
        self.has_rules = False
        """Whether tool names or a policy gate calls; when not, only the tools' own
        `needs_approval` does."""
        if callable(approval):
            self._policy = approval
            self.has_rules = True
        elif approval is not None:
            if isinstance(approval, str):
                raise ConfigurationError(
                    f"agent {agent_name!r}: approval must be a list of tool names or a policy "
                    f"callable, not the string {approval!r}"
                )
            self._names = frozenset(approval)
            self.has_rules = bool(self._names)
            if not has_mcp_servers:  # else the servers' tools are known once they are open
                self._check_names(tools)

    async def gated(
        self, calls: Sequence[ToolCallRequest], tools: Mapping[str, Tool]
    ) -> list[ToolCallRequest]:
        """The calls that must wait for a person, in the model's order.

        Raises:
            ConfigurationError: `approval` names a tool the agent does not offer (a misspelt
                name must not let the tool run unapproved).
        """
        if not self.has_rules:  # only the tools' own declarations
            return [call for call in calls if is_declared_gated(tools.get(call.name))]
        self._check_names(tools)
        return [call for call in calls if await self._needs_approval(call, tools.get(call.name))]

    def _check_names(self, tools: Mapping[str, Tool]) -> None:
        if unknown := sorted(self._names - tools.keys()):
            raise ConfigurationError(
                f"agent {self._agent_name!r}: approval names tools it does not have: "
                f"{', '.join(unknown)}"
            )

    async def _needs_approval(self, call: ToolCallRequest, tool: Tool | None) -> bool:
        if tool is None:
            return False  # no such tool: the call fails on its own, nothing would run
        if tool.needs_approval or call.name in self._names:
            return True
        if self._policy is None:
            return False
        if not isinstance(call.arguments, dict):
            return True  # arguments the policy cannot read: a person looks
        try:
            verdict = self._policy(call)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            logger.warning(
                "agent %s: the approval policy failed on %s (call %s): %r; it waits for a person",
                self._agent_name,
                call.name,
                call.call_id,
                exc,
            )
            return True
        return verdict is not False


class ToolBatches:
    """Answers the batches of calls of one agent's replies: each call run, or gated and
    waiting for a person (the run pauses), or carried out as a person decided on resuming."""

    def __init__(
        self, toolset: ToolSet, gate: ApprovalGate, *, prune: Prune, agent_name: str
    ) -> None:
        self._toolset = toolset
        self._gate = gate
        self._prune = prune
        self._agent_name = agent_name

    async def run(
        self, run: _Run, reply: AIMessage, calls: Sequence[ToolCallRequest]
    ) -> BatchOutcome:
        """Run a reply's batch: the calls that need no person run at once; the gated ones wait
        (the run pauses) or, where nobody can approve them, are declined."""
        open_batch(run, reply, calls, agent_name=self._agent_name)
        gated = await self._gate.gated(calls, self._toolset.tools)
        answers: dict[str, ToolAnswer] = {}
        waiting: list[PendingApproval] = []
        for call in gated:
            if run.can_pause:
                waiting.append(self._pending(run, call))
            else:
                answers[call.call_id] = answer_for_person(
                    run, call, not_run(call.name, UNAVAILABLE)
                )
        gated_ids = {call.call_id for call in gated}
        ready = [call for call in calls if call.call_id not in gated_ids]
        return await self._answer_batch(run, calls, ready, answers, waiting=waiting)

    async def resume(self, run: _Run, checked: CheckedDecisions) -> BatchOutcome:
        """Carry out the decisions on a paused batch: approved and edited calls run (in the
        model's order), the others are answered as the person (or the clock) decided; a call
        that ran before the pause never runs again."""
        await self._toolset.sync()  # another worker's first run: its MCP tools are not bound yet
        paused = checked.paused
        answers = {call.call_id: call.answer for call in paused.batch if call.answer is not None}
        ready: list[ToolCallRequest] = [
            ToolCallRequest(call.call_id, call.name, call.arguments)
            for call in paused.batch
            if call.call_id in checked.children
        ]
        run.resuming = dict(checked.children)  # what the agents called as tools resume from
        edits: dict[str, Mapping[str, object]] = {}
        expired = {call.call_id for call in checked.expired}
        for pending in paused.own_pending:
            call = ToolCallRequest(pending.call_id, pending.name, pending.arguments)
            decision = checked.decided.get(pending.call_id)
            if decision is None:
                if pending.call_id in expired:
                    self._decided(run, pending, "expired", None)
                    answers[call.call_id] = answer_for_person(
                        run, call, expired_answer(pending, self._gate.timeout_s)
                    )
                continue
            self._decided(run, pending, decision.decision, decision.reason)
            match decision.decision:
                case "approve":
                    ready.append(call)
                case "edit":
                    arguments = dict(decision.arguments or {})
                    ready.append(ToolCallRequest(call.call_id, call.name, arguments))
                    edits[call.call_id] = arguments
                case "reject":
                    answers[call.call_id] = answer_for_person(
                        run, call, declined(call.name, decision.reason)
                    )
                case "respond":
                    answers[call.call_id] = answer_for_person(
                        run, call, ToolAnswer(decision.output or "")
                    )
        calls = [ToolCallRequest(call.call_id, call.name, call.arguments) for call in paused.batch]
        order = [call.call_id for call in calls]
        ready.sort(key=lambda call: order.index(call.call_id))  # the model's order
        still = {
            running: child
            for running, child in paused.children.items()
            if running not in checked.children
        }
        return await self._answer_batch(
            run, calls, ready, answers, waiting=list(checked.waiting), edits=edits, children=still
        )

    async def _answer_batch(
        self,
        run: _Run,
        calls: Sequence[ToolCallRequest],
        ready: Sequence[ToolCallRequest],
        answers: dict[str, ToolAnswer],
        *,
        waiting: Sequence[PendingApproval],
        edits: Mapping[str, Mapping[str, object]] | None = None,
        children: Mapping[str, PausedRun] | None = None,
    ) -> BatchOutcome:
        """Run the `ready` calls and answer the batch: in full, in the model's order, when no
        call waits for a person (here or in a child run); otherwise the run pauses with what
        it has."""
        paused_children = dict(children or {})
        ended = await answer_calls(
            run,
            calls,
            ready,
            answers,
            dispatcher=self._toolset.dispatcher,
            prune=self._prune,
            agent_name=self._agent_name,
            edits=edits,
            children=paused_children,
        )
        if ended is not None:
            return BatchOutcome(answer=ended)
        if waiting or paused_children:
            return BatchOutcome(paused=self._pause(run, calls, answers, waiting, paused_children))
        append_answers(run, calls, answers)
        return BatchOutcome()

    def _pending(self, run: _Run, call: ToolCallRequest) -> PendingApproval:
        now = datetime.now(UTC)
        return PendingApproval(
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            digest=call_digest(call.name, call.arguments),
            requested_at=now,
            expires_at=now + timedelta(seconds=self._gate.timeout_s),
            agent_path=run.lineage.path,
        )

    def _pause(
        self,
        run: _Run,
        calls: Sequence[ToolCallRequest],
        answers: Mapping[str, ToolAnswer],
        waiting: Sequence[PendingApproval],
        children: Mapping[str, PausedRun],
    ) -> PausedRun:
        """What a later segment needs to go on: the transcript (the batch's reply last), the
        answers so far, the calls that wait (its own, then its children's). Each of its own
        waiting calls is announced (a child announced its own)."""
        for pending in waiting:
            run.sink(
                ToolApprovalRequested(
                    round=run.round,
                    call_id=pending.call_id,
                    name=pending.name,
                    arguments=pending.arguments,
                    digest=pending.digest,
                    expires_at=pending.expires_at,
                )
            )
        logger.info(
            "agent %s, run %s: paused for approval of %s",
            self._agent_name,
            current_run_id(),
            ", ".join(
                f"{pending.name} (call {pending.call_id})"
                for pending in (
                    *waiting,
                    *_pending_below(children),
                )
            ),
        )
        transcript = run.transcript
        return PausedRun(
            run_id=run.run_id,
            messages=tuple(transcript.messages),
            turn_start=transcript.turn_start,
            user_message=transcript.user_message,
            round=run.round,
            tool_rounds=run.tool_rounds,
            batch=tuple(
                BatchCall(call.call_id, call.name, call.arguments, answers.get(call.call_id))
                for call in calls
            ),
            pending=(*waiting, *_pending_below(children)),
            children=dict(children),
            spent_tokens=run.spent_tokens,
            spent_cost_usd=run.spent_cost_usd,
            max_output_tokens=run.max_output_tokens,
            agent=run.agent_name,
        )

    @staticmethod
    def _decided(
        run: _Run, pending: PendingApproval, decision: RecordedDecision, reason: str | None
    ) -> None:
        run.sink(
            ToolCallDecided(
                round=run.round,
                call_id=pending.call_id,
                name=pending.name,
                decision=decision,
                reason=reason,
            )
        )


def _pending_below(children: Mapping[str, PausedRun]) -> list[PendingApproval]:
    """The calls that wait in the children, by the ids the calling run lists them under."""
    return [
        call.model_copy(update={"call_id": child_call_id(running, call.call_id)})
        for running, child in children.items()
        for call in child.pending
    ]
