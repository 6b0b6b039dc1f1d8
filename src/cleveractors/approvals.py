"""A person in the loop: which tool calls wait for approval, and the decisions that resume them.

A tool declared with `approval: required` (or named in `LLMAgent(approval=...)`, or judged so by
an approval policy) never runs on the model's word alone. When a reply asks for such a call, the
calls of its batch that need no approval run at once, the gated ones do not, and the run ends
*paused*: `ExecutionResult.status == "paused"`, `pending_approvals` lists each gated call. A
person then decides each one, and `ActorExecutor.resume(run_id, decisions)` runs the run on as a
new segment:

    approve   the call runs as the model asked
    edit      the call runs with the reviewer's arguments (checked against the tool's schema;
              the model is told its arguments were changed, and to what)
    reject    the call does not run; the model reads that a person declined it, and why
    respond   the call does not run; the model reads the person's text as the tool's output

A pending call that waits past `approval_timeout_s` is recorded as `expired` and read by the
model as declined; a new message on the session instead of a decision records `superseded`.
Decisions are bound to the arguments they were made on (`digest`), single-use, taken on the
server's records only, and each is kept with who made it and when.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, model_validator

if TYPE_CHECKING:
    from cleveractors.agents.tool import ToolCallRequest

__all__ = [
    "DEFAULT_APPROVAL_TIMEOUT_S",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalRecord",
    "DecisionKind",
    "PendingApproval",
    "RecordedDecision",
    "call_digest",
]

DEFAULT_APPROVAL_TIMEOUT_S = 24 * 60 * 60.0
"""How long a gated call waits for a person by default: a day."""

DecisionKind = Literal["approve", "edit", "reject", "respond"]
"""What a person can decide about a pending call."""

RecordedDecision = Literal["approve", "edit", "reject", "respond", "expired", "superseded"]
"""What became of a pending call, as the audit keeps it: a person's decision, or `expired`
(nobody decided in time) or `superseded` (the user sent a new message instead)."""

ApprovalPolicy = Callable[["ToolCallRequest"], bool | Awaitable[bool]]
"""Decides per call whether a person must approve it (True) or it may run at once (False), for
rules by argument ("refunds over 50 EUR"). It may be async. A policy that raises is read as True:
a call whose rule cannot be checked waits for a person."""


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
