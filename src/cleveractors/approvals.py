"""A person in the loop: which tool calls wait for approval, and the decisions that resume them.

A tool declared with `approval: required` (or named in `LLMAgent(approval=...)`, or judged so by
an approval policy) never runs on the model's word alone. When a reply asks for such a call, the
calls of its batch that need no approval run at once, the gated ones do not, and the run ends
*paused*: `ExecutionResult.status == "paused"`, `pending_approvals` lists each gated call. A
person then decides each one, and `ActorExecutor.execute(Resumption(run_id, decisions))` runs
the run on as a new segment:

    approve   the call runs as the model asked
    edit      the call runs with the reviewer's arguments (checked against the tool's schema;
              the model is told its arguments were changed, and to what)
    reject    the call does not run; the model reads that a person declined it, and why
    respond   the call does not run; the model reads the person's text as the tool's output

A pending call that waits past `approval_timeout_s` is recorded as `expired` and read by the
model as declined; a new message on the session instead of a decision records `superseded`.
Decisions are bound to the arguments they were made on (`digest`), single-use, taken on the
server's records only, and each is kept with who made it and when.

`PausedRun` is what the server keeps of a paused segment: the transcript up to the pause (the
model's reply with the batch of calls last), the answers of the batch's calls that already ran or
were decided, and the calls still waiting for a person. It round-trips through JSON for the store.
`CheckedDecisions` is a resumption's decisions once checked against it: what the agent carries
out.

A run tree pauses as one: an agent called as a tool whose run pauses leaves its call in the
calling run's batch unanswered, and the calling run pauses too, keeping the child's `PausedRun`
under that call's id (`children`). The root's `pending` lists every call that waits, at any
depth, each naming the agents that ask (`agent_path`) and by an id unique in the tree
(`child_call_id`: `call_boss/call_weather`), so decisions name calls by id whatever their
depth; resuming the root resumes each child whose calls were decided, and its answer is the
call's output.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, Self

from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict, messages_to_dict
from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT_S",
    "ApprovalDecision",
    "ApprovalRecord",
    "BatchCall",
    "CheckedDecisions",
    "DecisionKind",
    "PausedRun",
    "PendingApproval",
    "RecordedDecision",
    "ToolAnswer",
    "call_digest",
    "child_call_id",
]

DEFAULT_APPROVAL_TIMEOUT_S = 24 * 60 * 60.0
"""How long a gated call waits for a person by default: a day."""

DecisionKind = Literal["approve", "edit", "reject", "respond"]
"""What a person can decide about a pending call."""

RecordedDecision = Literal["approve", "edit", "reject", "respond", "expired", "superseded"]
"""What became of a pending call, as the audit keeps it: a person's decision, or `expired`
(nobody decided in time) or `superseded` (the user sent a new message instead)."""


_CHILD_CALL_SEPARATOR = "/"


def child_call_id(running: str, call_id: str) -> str:
    """The id by which a run tree's root lists a call that waits in a child run: the id of the
    call that runs the child, then the call's own (`call_boss/call_weather`). Each model names
    its calls on its own, so two agents of a tree may use the same id: this one is unique in
    the tree, at any depth."""
    return f"{running}{_CHILD_CALL_SEPARATOR}{call_id}"


def call_digest(name: str, arguments: dict[str, Any] | str) -> str:
    """The fingerprint of a call's name and arguments: a decision naming it applies to exactly
    these arguments, never to a call that changed since the person looked."""
    canonical = json.dumps([name, arguments], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class PendingApproval(BaseModel):
    """A gated call waiting for a person's decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    name: str
    arguments: dict[str, Any] | str
    """The arguments as the model sent them (the raw text when they were not a JSON object)."""
    digest: str
    """`call_digest(name, arguments)`: give it back with the decision."""
    requested_at: datetime
    expires_at: datetime
    """After this, the call is `expired`: it never runs, and a decision is refused."""
    agent_path: tuple[str, ...] = ()
    """The agents from the root run's down to the one whose call this is, by name (one name for
    the root's own calls; none in a pause kept before run trees could pause)."""


class ApprovalDecision(BaseModel):
    """A person's decision on one pending call; the same JSON on HTTP.

    Raises:
        pydantic.ValidationError: an unknown field (a tool's name among them: an edit cannot
            switch tools), `arguments` on anything but an edit, `output` on anything but a
            respond, or an edit without arguments / a respond without output.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    decision: DecisionKind
    digest: str | None = None
    """When given, it must be the pending call's `digest`."""
    arguments: dict[str, Any] | None = None
    """An edit's new arguments, checked against the tool's schema."""
    reason: str | None = None
    """Why: the model reads a rejection's reason; kept in the audit for every kind."""
    output: str | None = None
    """A respond's text, given to the model as the tool's output."""

    @model_validator(mode="after")
    def _fields_fit_the_decision(self) -> Self:
        if (self.decision == "edit") != (self.arguments is not None):
            raise ValueError("arguments are given with an edit, and only with an edit")
        if (self.decision == "respond") != (self.output is not None):
            raise ValueError("output is given with a respond, and only with a respond")
        return self


class ApprovalRecord(BaseModel):
    """One decision as the audit keeps it: who decided what, when, about which call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    """The run segment that paused for the call."""
    session_id: str | None
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    decision: RecordedDecision
    decided_by: str | None
    """The caller the server authenticated (never a name from a request body); None for a
    decision nobody made (`expired`) or an executor without callers."""
    decided_at: datetime
    edited_arguments: dict[str, Any] | None = None
    reason: str | None = None
    output: str | None = None
    resumed_in: str | None = None
    """The segment that carried the decision out."""


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What the model reads for one call of the batch: its tool message's content and status."""

    content: str
    status: Literal["success", "error"] = "success"


@dataclass(frozen=True, slots=True)
class BatchCall:
    """One call of the paused batch, in the model's order; `answer` is None while it waits."""

    call_id: str
    name: str
    arguments: dict[str, Any] | str
    answer: ToolAnswer | None = None

    def tool_message(self) -> ToolMessage:
        answer = self.answer if self.answer is not None else ToolAnswer("", "error")
        return ToolMessage(
            content=answer.content, tool_call_id=self.call_id, name=self.name, status=answer.status
        )


@dataclass(frozen=True, slots=True)
class PausedRun:
    """A run segment that paused for a person: what the next segment starts from
    (`ActorExecutor.paused_run()` reads it; its `pending` calls wait for decisions)."""

    run_id: str
    messages: tuple[BaseMessage, ...]
    """The transcript up to the pause; its last message is the reply holding the batch."""
    turn_start: int
    user_message: str
    round: int
    tool_rounds: int
    batch: tuple[BatchCall, ...]
    pending: tuple[PendingApproval, ...]
    session_id: str | None = None
    caller: str | None = None
    spent_tokens: int = 0
    """Tokens of every segment of the run so far: the token budget spans the whole run."""
    spent_cost_usd: Decimal = field(default=Decimal(0))
    max_output_tokens: int | None = None
    agent: str | None = None
    """The actor whose agent paused (after a handoff, the one it went to): it resumes there."""
    children: Mapping[str, PausedRun] = field(default_factory=dict)
    """The paused runs of the agents this run called as tools, by the id of the call that runs
    each: those calls of the batch wait for their child to answer. `pending` lists the
    children's waiting calls too."""

    def pending_call(self, call_id: str) -> PendingApproval | None:
        return next((call for call in self.pending if call.call_id == call_id), None)

    @property
    def own_pending(self) -> tuple[PendingApproval, ...]:
        """The calls of this run's own batch that wait for a person (not its children's)."""
        return tuple(call for call in self.pending if self.child_of(call.call_id) is None)

    def child_of(self, call_id: str) -> tuple[str, str] | None:
        """For the id of a call that waits in a child run (`child_call_id`): the id of the call
        that runs the child, and the call's id in the child's own pause; None for a call of this
        run's own batch, or no such call."""
        running, separator, inner = call_id.partition(_CHILD_CALL_SEPARATOR)
        if not separator or running not in self.children:
            return None
        return running, inner

    def with_answers(self, answers: dict[str, ToolAnswer]) -> tuple[BatchCall, ...]:
        """The batch with `answers` (by call id) filled in."""
        return tuple(
            replace(call, answer=answers[call.call_id]) if call.call_id in answers else call
            for call in self.batch
        )

    def turn_messages(self, answers: dict[str, ToolAnswer]) -> list[BaseMessage]:
        """The turn so far as a session stores it, every call of the batch answered (the
        pending ones by `answers`): valid history for any provider."""
        batch = self.with_answers(answers)
        return [*self.messages[self.turn_start :], *(call.tool_message() for call in batch)]

    def to_json(self) -> str:
        return json.dumps(self._to_dict())

    @classmethod
    def from_json(cls, text: str) -> PausedRun:
        return cls._from_dict(json.loads(text))

    def _to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "messages": messages_to_dict(list(self.messages)),
            "turn_start": self.turn_start,
            "user_message": self.user_message,
            "round": self.round,
            "tool_rounds": self.tool_rounds,
            "batch": [_batch_call_json(call) for call in self.batch],
            "pending": [call.model_dump(mode="json") for call in self.pending],
            "session_id": self.session_id,
            "caller": self.caller,
            "spent_tokens": self.spent_tokens,
            "spent_cost_usd": str(self.spent_cost_usd),
            "max_output_tokens": self.max_output_tokens,
            "agent": self.agent,
            "children": {call_id: child._to_dict() for call_id, child in self.children.items()},
        }

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> PausedRun:
        return cls(
            run_id=data["run_id"],
            messages=tuple(messages_from_dict(data["messages"])),
            turn_start=data["turn_start"],
            user_message=data["user_message"],
            round=data["round"],
            tool_rounds=data["tool_rounds"],
            batch=tuple(_batch_call(entry) for entry in data["batch"]),
            pending=tuple(PendingApproval.model_validate(entry) for entry in data["pending"]),
            session_id=data["session_id"],
            caller=data["caller"],
            spent_tokens=data["spent_tokens"],
            spent_cost_usd=Decimal(data["spent_cost_usd"]),
            max_output_tokens=data["max_output_tokens"],
            agent=data.get("agent"),  # a pause kept before handoffs names none
            # A pause kept before run trees could pause has no children.
            children={
                call_id: cls._from_dict(child)
                for call_id, child in data.get("children", {}).items()
            },
        )


def _batch_call_json(call: BatchCall) -> dict[str, Any]:
    answer = None if call.answer is None else [call.answer.content, call.answer.status]
    return {
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
        "answer": answer,
    }


def _batch_call(entry: dict[str, Any]) -> BatchCall:
    answer = entry["answer"]
    return BatchCall(
        call_id=entry["call_id"],
        name=entry["name"],
        arguments=entry["arguments"],
        answer=None if answer is None else ToolAnswer(answer[0], answer[1]),
    )


@dataclass(frozen=True, slots=True)
class CheckedDecisions:
    """A resumption's decisions, checked against its paused run (`LLMAgent.check_decisions`):
    what each pending call becomes. What an agent's `run()` starts a resumed segment from."""

    paused: PausedRun
    """The paused segment the decisions are on."""
    decided: dict[str, ApprovalDecision]
    """The decisions, by call id."""
    expired: tuple[PendingApproval, ...]
    """The pending calls that waited too long without a decision."""
    waiting: tuple[PendingApproval, ...]
    """The pending calls still undecided (the run pauses again for them)."""
    children: Mapping[str, CheckedDecisions] = field(default_factory=dict)
    """The decisions on the calls of the paused children, by the id of the call that runs each
    child: those children resume. A child none of whose calls was decided (or expired) is not
    here: it keeps waiting."""

    def all_decided(self) -> dict[str, ApprovalDecision]:
        """The decisions on the calls of the whole run tree, by the call ids the root lists."""
        decided = dict(self.decided)
        for running, child in self.children.items():
            for call_id, decision in child.all_decided().items():
                decided[child_call_id(running, call_id)] = decision
        return decided

    def all_expired(self) -> tuple[PendingApproval, ...]:
        """The calls of the whole run tree that expired without a decision, as the root lists
        them."""
        below = (
            call.model_copy(update={"call_id": child_call_id(running, call.call_id)})
            for running, child in self.children.items()
            for call in child.all_expired()
        )
        return (*self.expired, *below)
