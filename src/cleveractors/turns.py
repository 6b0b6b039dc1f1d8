"""Turns: what a caller asks of an executor.

    Turn = NewMessage | Resumption       a user's message, or decisions on a paused run

Every turn takes one path (`cleveractors._turn_path.run_turn`): begin, run, settle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError

from cleveractors.agents.base import History
from cleveractors.approvals import ApprovalDecision
from cleveractors.errors import ConfigurationError, InvalidDecisionError

__all__ = ["NewMessage", "Resumption", "Turn"]


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A user's message, and where its conversation lives: a turn that begins a run. A plain
    `str` given to `ActorExecutor.execute()` (or `execute_events()`, `execute_stream()`) is a
    `NewMessage` of it.

    Raises:
        ConfigurationError: `history` given with a `session_id` (the session holds the
            history), or a `max_output_tokens` under 1.
    """

    message: str
    history: History | None = None
    """Earlier turns, when the executor keeps no session for them."""
    session_id: str | None = None
    """Continue (or start) this stored session; needs a store."""
    caller: str | None = None
    """Whose session it is: another caller's session does not exist for them."""
    idempotency_key: str | None = None
    """With a store: a request sent again under the same key (by the same caller, with the same
    message, history and session) is answered by the first run's stored result."""
    max_output_tokens: int | None = None
    """A cap on the output of each of the run's LLM calls (never above the model's own)."""
    can_pause: bool = True
    """False where nobody can approve a tool call: gated calls are declined, never run."""
    output_schema: Mapping[str, Any] | None = None
    """A JSON Schema this turn's answer must match (`ExecutionResult.output` is the parsed
    JSON), instead of the agent's own output type; `/v1/chat/completions` sets it from
    `response_format`."""

    def __post_init__(self) -> None:
        if self.session_id is not None and self.history:
            raise ConfigurationError(
                "history cannot be given with session_id: the session holds the history"
            )
        cap = self.max_output_tokens
        if cap is not None and cap < 1:
            raise ConfigurationError(
                f"max_output_tokens must be a positive number of tokens, not {cap}"
            )


@dataclass(frozen=True, slots=True)
class Resumption:
    """A person's decisions on the pending calls of the paused run segment `run_id`: a turn
    that goes on with it (`cleveractors.approvals`). The decisions are `ApprovalDecision`s or
    their JSON form as dicts, kept as `ApprovalDecision`s.

    The resumption is a new run segment, with its own id (`resumed_from` names the paused one),
    its own ledger rows and result. Approved and edited calls run; when every call of the batch
    has an answer the model is asked again; while some still wait, the run pauses again, to be
    resumed by the new segment's id.

    Raises:
        InvalidDecisionError: a decision that is not one (an unknown field, a missing one).
    """

    run_id: str
    """The paused segment's id (`result.run_id` of the paused result)."""
    decisions: Sequence[ApprovalDecision | Mapping[str, Any]]
    """A decision per pending call decided now; calls left out keep waiting."""
    caller: str | None = None
    """Who decides: the run's own caller only (the audit records them)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "decisions", _as_decisions(self.run_id, self.decisions))

    @property
    def decided(self) -> tuple[ApprovalDecision, ...]:
        """The decisions as models, whichever form they were given in."""
        return cast(tuple[ApprovalDecision, ...], self.decisions)


Turn = NewMessage | Resumption
"""What a caller asks of an executor: a new message, or decisions that resume a paused run."""


def _as_decisions(
    run_id: str, decisions: Sequence[ApprovalDecision | Mapping[str, Any]]
) -> tuple[ApprovalDecision, ...]:
    """The decisions as models; one that is not a decision is refused, its problem named.

    Raises:
        InvalidDecisionError: a decision with an unknown or a missing field.
    """
    if isinstance(decisions, str | bytes | Mapping):
        raise InvalidDecisionError(
            f"decisions must be a list of decisions, not {type(decisions).__name__}",
            run_id=run_id,
        )
    checked: list[ApprovalDecision] = []
    for position, decision in enumerate(decisions):
        if isinstance(decision, ApprovalDecision):
            checked.append(decision)
            continue
        try:
            checked.append(ApprovalDecision.model_validate(decision))
        except ValidationError as exc:
            call_id = decision.get("call_id") if isinstance(decision, Mapping) else None
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'decision'}: {error['msg']}"
                for error in exc.errors()
            )
            raise InvalidDecisionError(
                f"decisions[{position}] is not a decision: {problems}",
                run_id=run_id,
                call_id=call_id if isinstance(call_id, str) else None,
            ) from None
    return tuple(checked)
