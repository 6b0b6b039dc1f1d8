"""Token usage: one record per LLM call, totals derived from the records.

Pricing is per request, so calls are never merged into one call-shaped record: `LLMCallUsage`
keeps each call with its purpose, and `UsageLedger` sums them when asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Literal

from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, computed_field

__all__ = [
    "AttemptStatus",
    "CallPurpose",
    "CallRecorder",
    "LLMCallUsage",
    "TokenUsage",
    "UsageLedger",
    "last_token_usage_var",
]

CallPurpose = Literal["round", "synthesis", "pruning"]
"""Why an LLM call was made: a loop round, the synthesis answer, or condensing a tool output."""

AttemptStatus = Literal["ok", "failed", "cancelled"]
"""How one attempt at an LLM call ended: it answered, it failed (and was retried, or its error
reached the caller), or the run was cancelled while it was under way."""


class TokenUsage(BaseModel):
    """Token counts, of one LLM call or summed over several.

    `estimated` is True when any part was estimated (a stream cut off before the provider sent its
    usage, or a provider that reports none), so "the provider sent nothing" is never read as zero.
    """

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            estimated=self.estimated or other.estimated,
        )

    @classmethod
    def from_message(cls, message: AIMessage) -> TokenUsage | None:
        """The provider-reported usage of a reply, or None when the provider reported none."""
        metadata = message.usage_metadata
        if metadata is None:
            return None
        return cls(
            prompt_tokens=metadata["input_tokens"], completion_tokens=metadata["output_tokens"]
        )


class LLMCallUsage(BaseModel):
    """What one LLM call cost, and why it was made."""

    model_config = ConfigDict(frozen=True)

    index: int
    """Position of the call in the run, from 1."""
    purpose: CallPurpose
    round: int
    """The tool-loop round the call belongs to, from 1."""
    usage: TokenUsage
    attempt: int = 1
    """Which attempt at this call the record is, from 1: the loop's retries are records too."""
    status: AttemptStatus = "ok"
    """`ok`, `failed` or `cancelled`. A failed attempt refused with an HTTP error status costs 0
    (the provider did no work); one that may have been billed (cut off, timed out, dropped after
    sending) carries an estimate, flagged `estimated`."""


class UsageLedger:
    """The LLM calls of one run, in the order they were made. Never shared between runs."""

    __slots__ = ("_calls", "_total")

    def __init__(self) -> None:
        self._calls: list[LLMCallUsage] = []
        self._total = TokenUsage()

    def record(
        self,
        *,
        purpose: CallPurpose,
        round: int,
        usage: TokenUsage,
        attempt: int = 1,
        status: AttemptStatus = "ok",
    ) -> LLMCallUsage:
        call = LLMCallUsage(
            index=len(self._calls) + 1,
            purpose=purpose,
            round=round,
            usage=usage,
            attempt=attempt,
            status=status,
        )
        self._calls.append(call)
        self._total += usage
        return call

    @property
    def calls(self) -> tuple[LLMCallUsage, ...]:
        return tuple(self._calls)

    @property
    def total(self) -> TokenUsage:
        """The sum over the calls, kept as they are recorded (read on every round)."""
        return self._total


CallRecorder = Callable[[LLMCallUsage], Awaitable[None]]
"""Awaited with each LLM call's record as soon as the call ends, before any tool of its round
runs (a ledger writes it there). A failing recorder fails the run."""


last_token_usage_var: ContextVar[TokenUsage | None] = ContextVar(
    "cleveractors_last_token_usage", default=None
)
"""The total usage of the latest run in this context: set on success and on every failure path."""
