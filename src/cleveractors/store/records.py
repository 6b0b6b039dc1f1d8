"""What the store gives back: stored turns, ledger rows and usage reports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Literal

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, ConfigDict, computed_field

from cleveractors.approvals import PendingApproval
from cleveractors.usage import AttemptStatus, CallPurpose

__all__ = ["LedgerRow", "RunStatus", "SegmentStatus", "StoredTurn", "UsageReport"]

RunStatus = Literal["running", "ok", "failed", "cancelled", "paused"]
"""A run in the ledger: still going (or its process died), answered, failed, or stopped."""

SegmentStatus = Literal[
    "running", "answered", "failed", "cancelled", "paused", "expired", "resumed", "superseded"
]
"""How a run segment stands for its owner (`SqlStore.run_status`): as the ledger says, or, for
one that paused, whether it still waits for a decision (`paused`), every call it waited on
expired before anyone decided (`expired`: resuming it with no decision lets the model read them
declined), a later segment carried its decisions out (`resumed`), or a new message on its
session declined its calls (`superseded`)."""


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """One whole turn of a session: the user's message, the assistant's tool calls, the tool
    results and the answer, as LangChain messages, in order. A turn that paused for a person
    was made by several run segments: each bills its own calls, the turn is all of them."""

    position: int
    """The turn's place in its session, from 1."""
    run_id: str
    """The turn's last run segment: the one that answered (or, while it waits, that paused)."""
    created_at: datetime
    messages: tuple[BaseMessage, ...]
    segments: tuple[str, ...]
    """Every run segment that made the turn, oldest first; `run_id` is the last."""
    pending: tuple[PendingApproval, ...] = ()
    """The calls the turn waits on; empty once it answered. Only the session's last turn
    waits (`SqlStore.session_turns`); its messages then end with the reply asking for them."""


class LedgerRow(BaseModel):
    """One LLM call as the ledger recorded it, the moment the loop recorded it."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    call_index: int
    session_id: str | None
    caller: str | None
    recorded_at: datetime
    purpose: CallPurpose
    round: int
    attempt: int
    """Which attempt at the call this was, from 1 (the loop's retries are rows too)."""
    status: AttemptStatus
    prompt_tokens: int
    completion_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    estimated: bool
    provider: str | None = None
    model: str | None = None
    """Who answered: the provider-reported model name when given, else the configured one."""
    cost_usd: Decimal | None = None
    cache_savings_usd: Decimal | None = None
    """What the prompt cache saved against the uncached price of the same tokens; None when
    the call had no price."""
    trace_id: str | None = None
    """The trace of the call's `chat` span (hex), when the run was traced."""
    span_id: str | None = None
    """The call's `chat` span (hex): the line of the bill links to its span."""
    parent_run_id: str | None = None
    """The run that called the agent whose run made the call; None for a root run's call."""

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class UsageReport(BaseModel):
    """Ledger rows and their totals. `cost_usd` is None unless every row was priced: a partial
    sum is never passed off as the total."""

    model_config = ConfigDict(frozen=True)

    rows: tuple[LedgerRow, ...]

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def prompt_tokens(self) -> int:
        return sum(row.prompt_tokens for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def completion_tokens(self) -> int:
        return sum(row.completion_tokens for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def estimated(self) -> bool:
        return any(row.estimated for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def cache_read_tokens(self) -> int:
        """Prompt tokens read from the provider's cache (part of `prompt_tokens`)."""
        return sum(row.cache_read_tokens for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def cache_write_tokens(self) -> int:
        """Prompt tokens written to the provider's cache (part of `prompt_tokens`)."""
        return sum(row.cache_write_tokens for row in self.rows)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def cache_hit_rate(self) -> float:
        """The share of `prompt_tokens` read from the cache (0 without any prompt tokens)."""
        return self.cache_read_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def cache_savings_usd(self) -> Decimal | None:
        """What the prompt cache saved; None unless every row's saving is known."""
        savings = [row.cache_savings_usd for row in self.rows]
        if any(saving is None for saving in savings):
            return None
        return sum((saving for saving in savings if saving is not None), Decimal(0))

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def cost_usd(self) -> Decimal | None:
        costs = [row.cost_usd for row in self.rows]
        if any(cost is None for cost in costs):
            return None
        return sum((cost for cost in costs if cost is not None), Decimal(0))
