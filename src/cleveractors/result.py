"""What a run produced and spent: `ExecutionResult` and the records it is made of."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from cleveractors.usage import LLMCallUsage, TokenUsage

__all__ = [
    "SYNTHESIS_WITHOUT_ANSWER",
    "ErrorInfo",
    "ExecutionResult",
    "SynthesisReason",
    "ToolCallRecord",
    "ToolCallStatus",
]

SynthesisReason = Literal["max_rounds", "budget", "stuck"]
"""Why the loop stopped using tools and asked the model to answer from what it had."""

ToolCallStatus = Literal["ok", "error", "skipped"]

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
        return cls(type=type(exc).__name__, message=str(exc))


class ToolCallRecord(BaseModel):
    """One tool call the model asked for, and what became of it."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    name: str
    arguments: dict[str, object] | str
    """The parsed arguments, or the raw text when it was not a JSON object."""
    status: ToolCallStatus
    output: str
    """The tool's output, or the error text the model was shown."""
    duration_s: float
    round: int


class ExecutionResult(BaseModel):
    """The outcome of one message: the answer, what ran, and every token spent.

    On failure `error` is set and the counts hold everything spent before the failure.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    usage_estimated: bool
    """True when any call's usage was estimated (cut off before the provider reported it)."""
    llm_calls: int
    usage_by_call: tuple[LLMCallUsage, ...] = ()
    tool_calls: tuple[ToolCallRecord, ...] = ()
    rounds: int = 0
    synthesis_reason: SynthesisReason | None = None
    synthesis_ignored_tool_calls: tuple[str, ...] = ()
    """Names of the tools the model called in its synthesis reply, where calling was forbidden:
    none of them ran. The answer is the reply's text, or `SYNTHESIS_WITHOUT_ANSWER`."""
    budget_exhausted: bool = False
    error: ErrorInfo | None = None
    cancelled: bool = False

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            estimated=self.usage_estimated,
        )

    @property
    def is_success(self) -> bool:
        return self.error is None
