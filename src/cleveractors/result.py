"""What a run produced and spent: `ExecutionResult` and the records it is made of.

The text of a run is made by one rule everywhere (`RunText`). A run writes text in several
rounds: often a sentence before it calls tools ("Let me look that up."), then the answer after
them. `ExecutionResult.text`, the chunks of `execute_stream()`, the CLI, `/chat`,
`/v1/chat/completions` and the chat page all show the same text: every round's text, in order,
the text of a later round set apart from the text before it by `ROUND_SEPARATOR`.
`ExecutionResult.answer` is the last reply's text alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, Self

from langchain_core.messages import BaseMessage
from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    computed_field,
    model_validator,
)

from cleveractors.approvals import PendingApproval
from cleveractors.usage import AgentUsage, LLMCallUsage, TokenUsage

if TYPE_CHECKING:
    from cleveractors.approvals import PausedRun

__all__ = [
    "ROUND_SEPARATOR",
    "SYNTHESIS_WITHOUT_ANSWER",
    "ChildRun",
    "ErrorInfo",
    "ExecutionResult",
    "ResultCallback",
    "ResultStatus",
    "RunOutcome",
    "RunText",
    "SpendLeft",
    "SynthesisReason",
    "ToolCallRecord",
    "ToolCallStatus",
]

SynthesisReason = Literal["max_rounds", "budget", "cost_budget", "stuck", "spend_limit"]
"""Why the loop stopped using tools and asked the model to answer from what it had."""

ToolCallStatus = Literal["ok", "error", "skipped", "declined", "responded"]
"""What became of a call: it ran (`ok` or `error`), an `ends_turn` call kept it from running
(`skipped`), or a person's decision did (`declined`: rejected, expired or superseded;
`responded`: a person's text stood in for the tool's output)."""

ResultStatus = Literal["answered", "failed", "cancelled", "paused"]
"""How a run ended, as `ExecutionResult.status` says it."""

SYNTHESIS_WITHOUT_ANSWER = (
    "[cleveractors: no answer: asked to answer without tools, the model called a tool again]"
)
"""The answer when the synthesis reply holds tool calls (not run) and no text."""


class ErrorInfo(BaseModel):
    """An exception, as a caller or a JSON client can read it."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """The `type` and `message` of `exc`, as a result or a `run_failed` event carries them."""
        return cls(type=type(exc).__name__, message=str(exc))


class SpendLeft(BaseModel):
    """One window of the caller's spend limits, in one unit, as the run left it."""

    model_config = ConfigDict(frozen=True)

    window: str
    """`day`, `month` (calendar, UTC) or `rolling`."""
    unit: Literal["usd", "tokens"]
    limit: Decimal
    spent: Decimal
    """What the window's settled calls cost."""
    reserved: Decimal
    """What the caller's calls in flight reserved (in every window at once)."""
    left: Decimal
    """The limit less spent and reserved (never below 0)."""
    resets_at: datetime | None
    """When the window starts again; None for a rolling window not open now."""
    refused: bool = False
    """True for the window that refused the run's call."""


class ToolCallRecord(BaseModel):
    """One tool call the model asked for, and what became of it."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    """The call's id, as the model gave it (or as the loop made one for a call without)."""
    name: str
    """The tool the model asked for."""
    arguments: dict[str, object] | str
    """The parsed arguments, or the raw text when it was not a JSON object."""
    status: ToolCallStatus
    """What became of the call: `ok`, `error`, `skipped`, `declined` or `responded`."""
    output: str
    """The tool's output, or the error text the model was shown."""
    duration_s: float
    """How long the tool ran (0 for a call that did not run)."""
    round: int
    """The round whose reply asked for the call (1 for the reply to the user's message)."""


class ChildRun(BaseModel):
    """The run of an agent that a run called as a tool; its calls are among the caller's
    `usage_by_call`, under its own `run_id`."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    parent_run_id: str
    agent: str
    """The called agent's name (the tool the model called may be named otherwise)."""
    call_id: str | None
    """The tool call of the parent's model that ran it."""
    status: ResultStatus
    answer: str
    """The answer it gave, which the parent's model read as the tool's output."""
    synthesis_reason: SynthesisReason | None = None
    """Why it answered from what it had (its own limit reached), if it did."""


class ExecutionResult(BaseModel):
    """The outcome of one message: the answer, what ran, and every token spent.

    It stores the records (`usage_by_call`, `tool_calls`); every total is derived from them, so a
    total can never disagree with the calls it sums. On failure `error` is set and the records
    hold everything spent before the failure.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    """Everything the user saw: every round's text, rounds set apart by a blank line (the rule
    of `RunText`, the same as the joined chunks of `execute_stream()`)."""
    usage_by_call: tuple[LLMCallUsage, ...] = ()
    """One record per LLM call the run made (rounds, retries, synthesis, pruning), in order:
    what every total sums, and what to bill."""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    """Every tool call the model asked for, in the model's order within each round."""
    rounds: int = 0
    """How many times the model was asked with tools bound (1 for a plain answer)."""
    synthesis_reason: SynthesisReason | None = None
    """Why the loop stopped using tools and asked for an answer from what it had, if it did."""
    synthesis_ignored_tool_calls: tuple[str, ...] = ()
    """Names of the tools the model called in its synthesis reply, where calling was forbidden:
    none of them ran. The answer is the reply's text, or `SYNTHESIS_WITHOUT_ANSWER`."""
    error: ErrorInfo | None = None
    """The failure, when the run failed or was cancelled: its type and message."""
    cancelled: bool = False
    """True when the run was stopped (a consumer that left, a cancelled task)."""
    answer: str = ""
    """The last reply's text alone (the answer after the tool rounds); empty when the run failed."""
    output: Any = None
    """The validated object of an agent with an output type (`LLMAgent(output_type=...)`: an
    instance of that type; an actor file's `output_schema`: the parsed JSON); None otherwise.
    `text` keeps the raw text the model sent."""
    run_id: str | None = None
    """The run's one id: the ledger's rows, the store's `runs` row, the session's turn, the log
    lines, the `RunStarted` event and the `X-Run-Id` header carry the same. None only for a run
    an agent ran outside an executor before it began."""
    replayed: bool = False
    """True when this is the stored result of an earlier run, returned again for a repeated
    idempotency key: nothing ran and nothing was billed for it (bill the original only)."""
    pending_approvals: tuple[PendingApproval, ...] = ()
    """The gated tool calls this run paused for (`status == "paused"`), in the model's order;
    resume the run with decisions on them (`ActorExecutor.resume`)."""
    spend_left: tuple[SpendLeft, ...] = ()
    """The caller's spend limits after the run (`spend_limits`): spent, reserved and left per
    window; empty when the caller has none."""
    resumed_from: str | None = None
    """The id of the paused run segment this one resumed; its own records are this segment's
    alone (no token is counted in two segments)."""
    model: str | None = None
    """The model (as configured) that answered the run's last LLM call; None when none did."""
    fell_back_from: tuple[str, ...] = ()
    """The models that failed before another took over, in the order they failed (see
    `fallback_models`); empty when no model fell back."""
    active_agent: str | None = None
    """The actor whose agent the run ended on: its own, or the one a handoff passed the
    conversation to (a stored session's next turn runs there). None for an agent that is not
    an `LLMAgent`."""
    parent_run_id: str | None = None
    """The run that called this run's agent as a tool; None for a run nobody called."""
    child_runs: tuple[ChildRun, ...] = ()
    """The runs of the agents this run called as tools (theirs nested in their own result
    only); their calls are in `usage_by_call` and every total."""

    @property
    def status(self) -> ResultStatus:
        """How the run ended: `answered`, `failed`, `cancelled`, or `paused` for a person's
        decisions (`pending_approvals`)."""
        if self.cancelled:
            return "cancelled"
        if self.error is not None:
            return "failed"
        return "paused" if self.pending_approvals else "answered"

    @property
    def usage(self) -> TokenUsage:
        """The sum over every call."""
        return sum((call.usage for call in self.usage_by_call), TokenUsage())

    @property
    def usage_by_agent(self) -> dict[str, AgentUsage]:
        """The run's calls summed per agent (`LLMCallUsage.agent`; "" for calls that name none),
        in the order each agent first called: they add up to the run's totals."""
        calls_by_agent: dict[str, list[LLMCallUsage]] = {}
        for call in self.usage_by_call:
            calls_by_agent.setdefault(call.agent or "", []).append(call)
        return {agent: _agent_usage(calls) for agent, calls in calls_by_agent.items()}

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented computed_field idiom
    @property
    def prompt_tokens(self) -> int:
        """Input tokens over every call (cached ones included)."""
        return self.usage.prompt_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def completion_tokens(self) -> int:
        """Output tokens over every call (reasoning ones included)."""
        return self.usage.completion_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def total_tokens(self) -> int:
        """`prompt_tokens` plus `completion_tokens`."""
        return self.usage.total_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def cache_read_tokens(self) -> int:
        """Prompt tokens read from the provider's cache (part of `prompt_tokens`)."""
        return self.usage.cache_read_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def cache_write_tokens(self) -> int:
        """Prompt tokens written to the provider's cache (part of `prompt_tokens`)."""
        return self.usage.cache_write_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def cache_hit_rate(self) -> float:
        """The share of `prompt_tokens` read from the provider's cache (0 to 1; 0 without any
        prompt tokens)."""
        usage = self.usage
        return usage.cache_read_tokens / usage.prompt_tokens if usage.prompt_tokens else 0.0

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def cache_savings_usd(self) -> Decimal | None:
        """What the prompt cache saved, in US dollars, against the uncached price of the same
        tokens (cache writes, priced above input, count against it); None unless every call
        was priced, as `cost_usd`."""
        if self.unpriced_calls:
            return None
        return sum(
            (call.cache_savings_usd or Decimal(0) for call in self.usage_by_call), Decimal(0)
        )

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def reasoning_tokens(self) -> int:
        """Completion tokens spent reasoning (part of `completion_tokens`)."""
        return self.usage.reasoning_tokens

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def usage_estimated(self) -> bool:
        """True when any call's usage was estimated (cut off, or not plausibly reported)."""
        return self.usage.estimated

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def llm_calls(self) -> int:
        """How many LLM calls the run made (each retry attempt is one)."""
        return len(self.usage_by_call)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def unpriced_calls(self) -> tuple[int, ...]:
        """The `index` of every call whose model has no known price."""
        return tuple(call.index for call in self.usage_by_call if call.cost_usd is None)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def cost_usd(self) -> Decimal | None:
        """What the run cost in US dollars; None unless every call was priced (never a partial
        sum passed off as the total: see `unpriced_calls`)."""
        if self.unpriced_calls:
            return None
        return sum((call.cost_usd or Decimal(0) for call in self.usage_by_call), Decimal(0))

    @computed_field  # type: ignore[prop-decorator]  # pydantic's computed_field idiom
    @property
    def budget_exhausted(self) -> bool:
        """True when the token or cost budget ended the tool rounds."""
        return self.synthesis_reason in ("budget", "cost_budget")

    @property
    def is_success(self) -> bool:
        return self.error is None

    @model_validator(mode="wrap")
    @classmethod
    def _derived_keys_agree(cls, data: object, build: ModelWrapValidatorHandler[Self]) -> Self:
        """A dumped result loads back (its derived keys are checked, not stored); a derived key
        that disagrees with the records, e.g. `prompt_tokens` given without `usage_by_call`, is
        an error rather than a result that silently bills zero."""
        if not isinstance(data, Mapping):
            return build(data)
        derived = cls.model_computed_fields.keys() & data.keys()
        if not derived:  # a result being built, not a dumped one loaded back
            return build(data)
        result = build({key: value for key, value in data.items() if key not in derived})
        as_python = result.model_dump(include=set(derived))
        as_json = result.model_dump(mode="json", include=set(derived))
        for key in sorted(derived):
            if data[key] not in (as_python[key], as_json[key]):
                raise ValueError(
                    f"{key} is derived from usage_by_call ({as_python[key]!r}), "
                    f"not given ({data[key]!r})"
                )
        return result


def _agent_usage(calls: list[LLMCallUsage]) -> AgentUsage:
    costs = [call.cost_usd for call in calls]
    return AgentUsage(
        usage=sum((call.usage for call in calls), TokenUsage()),
        cost_usd=None if None in costs else sum((cost or Decimal(0) for cost in costs), Decimal(0)),
        llm_calls=len(calls),
    )


ResultCallback = Callable[[ExecutionResult], None]
"""Called once per run with its final result, also when the run failed or was cancelled: the
hook for billing, used by agents, the executor and the web app alike."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended: its result, the exception to raise if it failed, and, if it answered,
    the turn as the transcript holds it (the user's message, tool calls and results, answer);
    if it paused, the pause."""

    result: ExecutionResult
    error: BaseException | None = None
    turn: tuple[BaseMessage, ...] = ()
    pause: PausedRun | None = None
    """Set when the run waits for a person (`result.status == "paused"`): what resuming it
    starts from, for the executor to keep."""


ROUND_SEPARATOR = "\n\n"
"""What goes between the text of two rounds (e.g. before the answer after tools)."""


class RunText:
    """Collects a run's text, piece by piece, as it is shown (streamed or not)."""

    __slots__ = ("_pieces", "_round")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._round: int | None = None

    @property
    def text(self) -> str:
        """Everything added so far, joined by the rule."""
        return "".join(self._pieces)

    def add(self, round_number: int, text: str) -> str:
        """Take the next piece of a round's text; returns it as it is shown: after a separator
        when it begins a new round's text. An empty piece adds nothing."""
        if not text:
            return ""
        if self._round is not None and round_number != self._round:
            text = ROUND_SEPARATOR + text
        self._round = round_number
        self._pieces.append(text)
        return text
