"""Typed events of a run, for UIs and SSE: one frozen pydantic model per kind.

`Event` is a discriminated union on `kind`; `event_adapter` validates and serialises any of them:

    >>> event_adapter.dump_json(TextDelta(round=1, text="Hi"))
    b'{"kind":"text_delta","round":1,"text":"Hi"}'

A run an executor drives emits, in order: `RunStarted` (its id, once the run is open: the
session claimed, the idempotency key checked), `RoundStarted`, then per round the `TextDelta`s and
one `UsageRecorded` (a failed attempt that the loop retries adds its `UsageRecorded` and a
`CallRetrying` first), `ToolCallRequested` for each call, then `ToolCallStarted` /
`ToolCallFinished` (or `ToolCallSkipped`, `OutputPruned`) per call; `SynthesisStarted` when a limit
is hit; last `RunFinished` or `RunFailed`. A run that waits for a person emits
`ToolApprovalRequested` for each gated call and ends with `RunPaused`; the segment that resumes
it starts with `RunStarted(resumed_from=...)` and a `ToolCallDecided` per decided call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cleveractors.approvals import RecordedDecision
from cleveractors.result import ErrorInfo, ExecutionResult, SynthesisReason
from cleveractors.usage import LLMCallUsage, TokenUsage

__all__ = [
    "CallRetrying",
    "Event",
    "OutputDelta",
    "OutputPruned",
    "RoundStarted",
    "RunFailed",
    "RunFinished",
    "RunPaused",
    "RunStarted",
    "SynthesisStarted",
    "TextDelta",
    "ToolApprovalRequested",
    "ToolCallDecided",
    "ToolCallFinished",
    "ToolCallRequested",
    "ToolCallSkipped",
    "ToolCallStarted",
    "UsageRecorded",
    "event_adapter",
]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)


class RunStarted(_Event):
    """The run is open: its one id (the result's, the ledger's, the `X-Run-Id` header's), the
    session it holds, and whether it replays a run already answered for the same idempotency key
    (then the stored answer follows as one text delta, and nothing is run or billed again)."""

    kind: Literal["run_started"] = "run_started"
    run_id: str
    session_id: str | None = None
    replayed: bool = False
    resumed_from: str | None = None
    """The paused run segment this one resumes, when it resumes one."""


class RoundStarted(_Event):
    """The model is about to be asked (round 1 is the user's message)."""

    kind: Literal["round_started"] = "round_started"
    round: int


class TextDelta(_Event):
    """A piece of the model's text, as the provider sent it."""

    kind: Literal["text_delta"] = "text_delta"
    round: int
    text: str


class OutputDelta(_Event):
    """The typed answer so far, as JSON data (a streamed run of a typed actor): a partial parse
    of the object (the answer's text, or the output tool's arguments) while it streams, each
    one extending the one before within an attempt; the last is the validated object, equal to
    `ExecutionResult.output` dumped as JSON. A retry of an invalid answer starts its object
    again (`attempt`)."""

    kind: Literal["output_delta"] = "output_delta"
    round: int
    attempt: int
    """Which attempt at the typed answer this is, from 1."""
    output: Any
    is_final: bool = False
    """True for the validated object."""


class UsageRecorded(_Event):
    """An LLM call finished (or was cut off) and its tokens were recorded."""

    kind: Literal["usage_recorded"] = "usage_recorded"
    call: LLMCallUsage
    total: TokenUsage


class CallRetrying(_Event):
    """An LLM call failed in a way a second try may fix; the loop waits `delay_s`, then makes
    attempt number `attempt` (from 2). The failed attempt's `UsageRecorded` came just before."""

    kind: Literal["call_retrying"] = "call_retrying"
    round: int
    attempt: int
    reason: str
    """Why the previous attempt failed, e.g. `HTTP 503` or `ModelConnectionError: ...`."""
    delay_s: float
    """How long the loop waits before the attempt: the provider's `Retry-After` when it sent
    one, otherwise exponential backoff with jitter."""


class ToolCallRequested(_Event):
    """The model asked for a tool call in round `round`: its `call_id`, the tool's `name` and
    `arguments` (raw text when not a JSON object); the call then starts, waits for a person
    (`tool_approval_requested`), is skipped after an `ends_turn` tool, or fails."""

    kind: Literal["tool_call_requested"] = "tool_call_requested"
    round: int
    call_id: str
    name: str
    arguments: dict[str, object] | str


class ToolCallStarted(_Event):
    """A tool call of round `round` began to run (a batch's concurrent calls start together);
    `tool_call_finished` follows with the same `call_id`."""

    kind: Literal["tool_call_started"] = "tool_call_started"
    round: int
    call_id: str
    name: str


class ToolCallFinished(_Event):
    """A tool call ended: `error` is set when it failed (the model is shown that error)."""

    kind: Literal["tool_call_finished"] = "tool_call_finished"
    round: int
    call_id: str
    name: str
    output: str | None
    error: str | None
    duration_s: float


class ToolCallSkipped(_Event):
    """A call was not run because an earlier `ends_turn` tool of its batch ended the turn."""

    kind: Literal["tool_call_skipped"] = "tool_call_skipped"
    round: int
    call_id: str
    name: str
    reason: str


class OutputPruned(_Event):
    """A tool output over `tool_output_max_tokens` was condensed (or truncated, if that failed)."""

    kind: Literal["output_pruned"] = "output_pruned"
    call_id: str
    name: str
    method: Literal["condensed", "truncated"]
    original_tokens: int


class SynthesisStarted(_Event):
    """A limit was reached; the model is asked to answer from what it has, without tools."""

    kind: Literal["synthesis_started"] = "synthesis_started"
    reason: SynthesisReason


class ToolApprovalRequested(_Event):
    """A call the model asked for waits for a person's decision; it has not run. The run ends
    paused once its other calls have run (`RunPaused`)."""

    kind: Literal["tool_approval_requested"] = "tool_approval_requested"
    round: int
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    digest: str
    """Give it back with the decision: it binds the decision to these arguments."""
    expires_at: datetime


class ToolCallDecided(_Event):
    """A resumed run carries out a decision on a gated call (or records that nobody made one in
    time: `expired`). An approved or edited call then runs (`ToolCallStarted`)."""

    kind: Literal["tool_call_decided"] = "tool_call_decided"
    round: int
    call_id: str
    name: str
    decision: RecordedDecision
    reason: str | None = None


class RunFinished(_Event):
    """The run answered: the last event of a run that succeeded; `result` is its
    `ExecutionResult` (the stream's `result`)."""

    kind: Literal["run_finished"] = "run_finished"
    result: ExecutionResult


class RunPaused(_Event):
    """The run waits for decisions on `result.pending_approvals`; `result` is this segment's,
    with every token it spent (billed once: a resumption reports only its own)."""

    kind: Literal["run_paused"] = "run_paused"
    result: ExecutionResult


class RunFailed(_Event):
    """The run failed; `result` holds the usage spent before the failure."""

    kind: Literal["run_failed"] = "run_failed"
    error: ErrorInfo
    result: ExecutionResult


Event = Annotated[
    RunStarted
    | RoundStarted
    | TextDelta
    | OutputDelta
    | UsageRecorded
    | CallRetrying
    | ToolCallRequested
    | ToolApprovalRequested
    | ToolCallDecided
    | ToolCallStarted
    | ToolCallFinished
    | ToolCallSkipped
    | OutputPruned
    | SynthesisStarted
    | RunFinished
    | RunPaused
    | RunFailed,
    Field(discriminator="kind"),
]
"""Any event of a run: the union of the event classes, told apart by `kind`; validate or
serialise one with `event_adapter`."""

event_adapter: TypeAdapter[Event] = TypeAdapter(Event)
"""The `TypeAdapter` of `Event`: `validate_python` / `validate_json` give the class its `kind`
names, `dump_json` serialises one (as the web routes do). Raises `pydantic.ValidationError` for
an unknown `kind` or a bad field."""
