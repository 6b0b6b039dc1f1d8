"""Token usage: one record per LLM call, totals derived from the records.

Pricing is per request, so calls are never merged into one call-shaped record: `LLMCallUsage`
keeps each call with its purpose, and `UsageLedger` sums them when asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from decimal import Decimal
from typing import Any, Literal

from langchain_core.messages import AIMessage
from pydantic import BaseModel, ConfigDict, computed_field

__all__ = [
    "AgentUsage",
    "AttemptStatus",
    "CallPurpose",
    "CallRecorder",
    "LLMCallUsage",
    "TokenUsage",
    "UsageLedger",
    "last_token_usage_var",
]

CallPurpose = Literal["round", "synthesis", "pruning", "output_retry", "compaction", "guardrail"]
"""Why an LLM call was made: a loop round, the synthesis answer, condensing a tool output,
asking again for a typed answer that failed validation, summarising the oldest turns of a
conversation that outgrew its context budget, or a guardrail's judge."""

AttemptStatus = Literal["ok", "failed", "cancelled"]
"""How one attempt at an LLM call ended: it answered, it failed (and was retried, or its error
reached the caller), or the run was cancelled while it was under way."""


class TokenUsage(BaseModel):
    """Token counts, of one LLM call or summed over several.

    `estimated` is True when any part was estimated (a stream cut off before the provider sent its
    usage, or a provider that reports none), so "the provider sent nothing" is never read as zero.
    The detail counts are parts of the main ones, never added to them: cache reads and writes are
    prompt tokens, reasoning tokens are completion tokens.
    """

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    """Prompt tokens read from the provider's prompt cache (billed at the cache-read price)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's prompt cache (Anthropic bills them above input)."""
    cache_write_1h_tokens: int = 0
    """Of the cache writes, those kept for an hour (Anthropic bills them above 5-minute ones)."""
    reasoning_tokens: int = 0
    """Completion tokens the model spent thinking: billed as output, never shown."""
    estimated: bool = False

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def has_consistent_details(self) -> bool:
        """Whether the detail counts fit inside the totals they are parts of. They may not after
        an estimate replaced an implausible prompt count; such usage cannot be priced."""
        return (
            self.cache_read_tokens + self.cache_write_tokens <= self.prompt_tokens
            and self.cache_write_1h_tokens <= self.cache_write_tokens
            and self.reasoning_tokens <= self.completion_tokens
        )

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_write_1h_tokens=self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            estimated=self.estimated or other.estimated,
        )

    @classmethod
    def from_message(cls, message: AIMessage) -> TokenUsage | None:
        """The provider-reported usage of a reply, or None when the provider reported none."""
        metadata = message.usage_metadata
        if metadata is None:
            return None
        prompt = metadata.get("input_token_details") or {}
        completion = metadata.get("output_token_details") or {}
        return cls(
            prompt_tokens=metadata["input_tokens"],
            completion_tokens=metadata["output_tokens"],
            cache_read_tokens=prompt.get("cache_read") or 0,
            cache_write_tokens=_cache_writes(prompt),
            cache_write_1h_tokens=prompt.get("ephemeral_1h_input_tokens") or 0,
            reasoning_tokens=completion.get("reasoning") or 0,
        )


def _cache_writes(details: Mapping[str, Any]) -> int:
    """langchain-anthropic reports cache writes by lifetime when Anthropic does
    (`ephemeral_5m_input_tokens`, `ephemeral_1h_input_tokens`) and then sets `cache_creation` to 0
    so they are not counted twice."""
    by_lifetime = sum(details.get(key) or 0 for key in _CACHE_WRITE_LIFETIMES)
    return by_lifetime or details.get("cache_creation") or 0


_CACHE_WRITE_LIFETIMES = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")


class LLMCallUsage(BaseModel):
    """What one LLM call cost, who answered it, and why it was made."""

    model_config = ConfigDict(frozen=True)

    index: int
    """Position of the call in the run, from 1."""
    purpose: CallPurpose
    round: int
    """The tool-loop round the call belongs to, from 1."""
    usage: TokenUsage
    provider: str | None = None
    """The LangChain provider name (`openai`, `anthropic`, `google_genai`, ...), when known."""
    model: str | None = None
    """The model the provider says answered (e.g. a dated snapshot), else the one configured."""
    cost_usd: Decimal | None = None
    """The call's price in US dollars, or None when the model's prices are unknown."""
    cache_savings_usd: Decimal | None = None
    """What the prompt cache saved against the uncached price of the same tokens (below zero
    when cache writes cost more than the reads saved); None when the call has no price."""
    attempt: int = 1
    """Which attempt at this call the record is, from 1: the loop's retries are records too."""
    status: AttemptStatus = "ok"
    """`ok`, `failed` or `cancelled`. A failed attempt refused with an HTTP error status costs 0
    (the provider did no work); one that may have been billed (cut off, timed out, dropped after
    sending) carries an estimate, flagged `estimated`."""
    trace_id: str | None = None
    """The trace of the call's `chat` span (32 hex digits), when a tracer recorded one."""
    span_id: str | None = None
    """The call's `chat` span (16 hex digits), so a line of the bill links to its trace."""
    agent: str | None = None
    """The actor name of the agent that made the call (after a handoff, the one it went to; a
    parent's or one it called as a tool)."""
    run_id: str | None = None
    """The child run that made the call, when an agent called as a tool made it; None for a
    call of the root run itself (whose id is its result's `run_id`, and its ledger rows')."""
    parent_run_id: str | None = None
    """The run that called the agent whose run made the call; None for a run nobody called."""


class AgentUsage(BaseModel):
    """What one agent of a run tree spent: a part of the run's totals
    (`ExecutionResult.usage_by_agent`)."""

    model_config = ConfigDict(frozen=True)

    usage: TokenUsage
    cost_usd: Decimal | None
    """None unless every one of the agent's calls was priced."""
    llm_calls: int


class UsageLedger:
    """The LLM calls of one run, in the order they were made. Never shared between runs."""

    __slots__ = ("_calls", "_cost", "_own", "_total")

    def __init__(self) -> None:
        self._calls: list[LLMCallUsage] = []
        self._own = 0
        """How many of the calls this run made itself (the others' runs were called by it)."""
        self._total = TokenUsage()
        self._cost = Decimal(0)

    def record(
        self,
        *,
        purpose: CallPurpose,
        round: int,
        usage: TokenUsage,
        provider: str | None = None,
        model: str | None = None,
        cost_usd: Decimal | None = None,
        attempt: int = 1,
        status: AttemptStatus = "ok",
        trace_id: str | None = None,
        span_id: str | None = None,
        cache_savings_usd: Decimal | None = None,
        agent: str | None = None,
        run_id: str | None = None,
        parent_run_id: str | None = None,
    ) -> LLMCallUsage:
        call = LLMCallUsage(
            index=self._own + 1,
            purpose=purpose,
            round=round,
            usage=usage,
            provider=provider,
            model=model,
            cost_usd=cost_usd,
            cache_savings_usd=cache_savings_usd,
            attempt=attempt,
            status=status,
            trace_id=trace_id,
            span_id=span_id,
            agent=agent,
            run_id=run_id,
            parent_run_id=parent_run_id,
        )
        self._own += 1
        self.adopt(call)
        return call

    def adopt(self, call: LLMCallUsage) -> None:
        """Add a call as it was recorded (by this run, or by a run it called: its index is its
        own run's)."""
        self._calls.append(call)
        self._total += call.usage
        self._cost += call.cost_usd or 0

    @property
    def calls(self) -> tuple[LLMCallUsage, ...]:
        return tuple(self._calls)

    @property
    def total(self) -> TokenUsage:
        """The sum over the calls, kept as they are recorded (read on every round)."""
        return self._total

    @property
    def cost_spent_usd(self) -> Decimal:
        """The cost of the calls that could be priced (what a cost budget is checked against)."""
        return self._cost


CallRecorder = Callable[[LLMCallUsage], Awaitable[None]]
"""Awaited with each LLM call's record as soon as the call ends, before any tool of its round
runs (a ledger writes it there). A failing recorder fails the run."""


last_token_usage_var: ContextVar[TokenUsage | None] = ContextVar(
    "cleveractors_last_token_usage", default=None
)
"""The total usage of the latest run in this context: set on success and on every failure path."""
