"""Whether decisions fit the calls they name, and what the model reads of a call a person (or
the clock) decided on without running it.

`check_decisions` checks a resumption's decisions against the paused run before anything runs,
and says what each pending call becomes; `declined`, `not_run`, `edited` and `expired_answer`
are the texts the model reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from cleveractors.approvals import (
    ApprovalDecision,
    CheckedDecisions,
    PausedRun,
    PendingApproval,
    ToolAnswer,
)
from cleveractors.errors import ApprovalConflictError, ApprovalExpiredError, InvalidDecisionError
from cleveractors.tools import Tool

__all__ = [
    "SUPERSEDED",
    "UNAVAILABLE",
    "ChildCheck",
    "check_decisions",
    "declined",
    "edited",
    "expired_answer",
    "not_run",
]

SUPERSEDED = "the user sent a new message instead of deciding on it"
UNAVAILABLE = "it needs a person's approval, which is not available on this endpoint"
_EXPIRED = "nobody approved it within {seconds:g} seconds"

ChildCheck = Callable[[str, PausedRun, Sequence[ApprovalDecision]], CheckedDecisions]
"""Checks the decisions on a paused child run's calls against the tools of the agent that runs
it: given the id of the call that runs the child, its pause, and the decisions."""


def declined(name: str, reason: str | None) -> ToolAnswer:
    """What the model reads for a call a person rejected: an error naming why, and not to ask
    again (a bare refusal makes models re-issue the same call)."""
    because = f" ({reason})" if reason else ""
    return ToolAnswer(
        f"Not run: a person declined this call to {name!r}{because}. Do not retry it unless "
        "the user asks for it again.",
        "error",
    )


def not_run(name: str, why: str) -> ToolAnswer:
    """What the model reads for a gated call nobody decided on: why it did not run."""
    return ToolAnswer(
        f"Not run: the call to {name!r} was declined because {why}. Do not retry it unless the "
        "user asks for it again.",
        "error",
    )


def edited(arguments: Mapping[str, object], output: str) -> str:
    """An edited call's output, headed by what the reviewer changed, so the model knows."""
    shown = json.dumps(arguments, sort_keys=True)
    return f"[A reviewer changed this call's arguments to {shown} before it ran.]\n{output}"


def check_decisions(
    paused: PausedRun,
    decisions: Sequence[ApprovalDecision],
    tools: Mapping[str, Tool],
    *,
    now: datetime,
    check_child: ChildCheck,
) -> CheckedDecisions:
    """Check every decision against the paused run; nothing is applied when one is wrong. A
    decision on a call of a paused child run (at any depth) is checked by `check_child`, against
    the tools of the agent that asked; a child with no decision (and no expired call) keeps
    waiting.

    Raises:
        InvalidDecisionError: an unknown call id, a digest of other arguments, edited arguments
            that fail the tool's schema, or no decision while no call has expired.
        ApprovalConflictError: two decisions for one call.
        ApprovalExpiredError: a decision for a call that expired.
    """
    run_id = paused.run_id
    own: list[ApprovalDecision] = []
    below: dict[str, list[ApprovalDecision]] = {}
    for decision in decisions:
        child_call = paused.child_of(decision.call_id)
        if child_call is None:
            own.append(decision)
        else:  # the child's own pause names the call by its own id
            running, inner = child_call
            below.setdefault(running, []).append(decision.model_copy(update={"call_id": inner}))
    children = _checked_children(paused, below, now=now, check_child=check_child)
    decided: dict[str, ApprovalDecision] = {}
    for decision in own:
        call = paused.pending_call(decision.call_id)
        if call is None:
            raise InvalidDecisionError(
                f"run {run_id!r} has no pending call {decision.call_id!r}",
                run_id=run_id,
                call_id=decision.call_id,
            )
        if decision.call_id in decided:
            raise ApprovalConflictError(
                f"call {call.call_id!r} of run {run_id!r} has two decisions",
                run_id=run_id,
                call_id=call.call_id,
            )
        if call.expires_at <= now:
            raise ApprovalExpiredError(
                f"call {call.call_id!r} ({call.name}) of run {run_id!r} expired at "
                f"{call.expires_at.isoformat()}: it was not run",
                run_id=run_id,
                call_id=call.call_id,
            )
        if decision.digest is not None and decision.digest != call.digest:
            raise InvalidDecisionError(
                f"the decision on call {call.call_id!r} of run {run_id!r} was made on other "
                "arguments (its digest does not match): look at the call again",
                run_id=run_id,
                call_id=call.call_id,
            )
        if decision.decision == "edit":
            _check_edit(run_id, call, decision, tools.get(call.name))
        decided[decision.call_id] = decision
    undecided = [call for call in paused.own_pending if call.call_id not in decided]
    expired = tuple(call for call in undecided if call.expires_at <= now)
    if not decided and not expired and not children:
        raise InvalidDecisionError(
            f"no decision was given for run {run_id!r}, whose calls wait for one", run_id=run_id
        )
    waiting = tuple(call for call in undecided if call.expires_at > now)
    return CheckedDecisions(paused, decided, expired, waiting, children)


def _checked_children(
    paused: PausedRun,
    below: Mapping[str, Sequence[ApprovalDecision]],
    *,
    now: datetime,
    check_child: ChildCheck,
) -> dict[str, CheckedDecisions]:
    """The decisions on each child that resumes: one with a decision or an expired call."""
    children: dict[str, CheckedDecisions] = {}
    for running, child in paused.children.items():
        decisions = below.get(running, ())
        if not decisions and all(call.expires_at > now for call in child.pending):
            continue  # nothing to carry out: the child keeps waiting
        children[running] = check_child(running, child, decisions)
    return children


def _check_edit(
    run_id: str, call: PendingApproval, decision: ApprovalDecision, tool: Tool | None
) -> None:
    if tool is None:
        raise InvalidDecisionError(
            f"call {call.call_id!r} of run {run_id!r}: tool {call.name!r} is no longer offered",
            run_id=run_id,
            call_id=call.call_id,
        )
    problem = next(iter(tool.validator.iter_errors(decision.arguments)), None)
    if problem is not None:
        where = "/".join(str(part) for part in problem.absolute_path) or "(the arguments)"
        raise InvalidDecisionError(
            f"the edited arguments of call {call.call_id!r} ({call.name}) of run {run_id!r} "
            f"fail the tool's schema at {where}: {problem.message}",
            run_id=run_id,
            call_id=call.call_id,
        )


def expired_answer(call: PendingApproval, timeout_s: float) -> ToolAnswer:
    """What the model reads for a call that nobody decided in time."""
    return not_run(call.name, _EXPIRED.format(seconds=timeout_s))
