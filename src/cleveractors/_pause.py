"""A paused run as the server keeps it: everything a later segment needs to go on, on any worker.

`PausedRun` is the transcript up to the pause (the model's reply with the batch of calls last),
the answers of the batch's calls that already ran or were decided, and the calls still waiting
for a person. It round-trips through JSON (`to_json` / `from_json`) for the store, and lives in
a `MemoryPauses` book for an executor without one.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Literal

from langchain_core.messages import BaseMessage, ToolMessage, messages_from_dict, messages_to_dict

from cleveractors.approvals import PendingApproval
from cleveractors.errors import ApprovalConflictError, RunNotFoundError

__all__ = ["BatchCall", "MemoryPauses", "PausedRun", "ToolAnswer"]


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
    """A run segment that paused for a person: what the next segment starts from."""

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

    def pending_call(self, call_id: str) -> PendingApproval | None:
        return next((call for call in self.pending if call.call_id == call_id), None)

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
        return json.dumps(
            {
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
            }
        )

    @classmethod
    def from_json(cls, text: str) -> PausedRun:
        data = json.loads(text)
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


class MemoryPauses:
    """The paused runs of an executor without a store: in this process only, gone with it."""

    MAX_REMEMBERED_RESUMPTIONS = 10_000
    """How many resumed runs are remembered, to answer a repeated decision with a conflict
    rather than "not found"; the oldest are forgotten first."""

    def __init__(self) -> None:
        self._paused: dict[str, PausedRun] = {}
        self._resumed: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        """Resumed run id -> (the segment that resumed it, its caller)."""

    def keep(self, paused: PausedRun) -> None:
        self._paused[paused.run_id] = paused

    def find(self, run_id: str, caller: str | None) -> PausedRun:
        """The paused run, for its own caller only.

        Raises:
            RunNotFoundError: no such paused run for this caller.
            ApprovalConflictError: it was resumed already.
        """
        paused = self._paused.get(run_id)
        resumed_in, owner = self._resumed.get(run_id, (None, None))
        # Only its owner learns that a run was resumed: to anyone else it does not exist.
        if paused is None and resumed_in is not None and owner == caller:
            raise ApprovalConflictError(
                f"run {run_id!r} was already resumed (by run {resumed_in})", run_id=run_id
            )
        if paused is None or paused.caller != caller:
            raise RunNotFoundError(f"no paused run {run_id!r}", run_id=run_id)
        return paused

    def take(self, run_id: str, *, resumed_in: str) -> None:
        """Claim the paused run for one resumption: nothing awaits between a `find` and this,
        so two resumptions in one process cannot both take it."""
        paused = self._paused.pop(run_id)
        self._resumed[run_id] = (resumed_in, paused.caller)
        if len(self._resumed) > self.MAX_REMEMBERED_RESUMPTIONS:
            self._resumed.popitem(last=False)
