"""`Agent`: what an executor can run, blocking or streaming.

A subclass implements one method, `run()`: a start (the user's message, or a paused run with
the decisions on it checked) to an outcome, its events into a sink. `process_message()` and
`stream_message()` are made of it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from cleveractors.agents.stream import EventStream
from cleveractors.context import RunContext
from cleveractors.errors import RunNotFoundError
from cleveractors.events import Event
from cleveractors.result import ExecutionResult, ResultCallback, RunOutcome
from cleveractors.usage import CallRecorder, last_token_usage_var

if TYPE_CHECKING:
    from cleveractors.approvals import ApprovalDecision, CheckedDecisions, PausedRun

__all__ = ["Agent", "History", "ResultCallback", "discard_event", "settle_blocking"]

History = Sequence[BaseMessage | dict[str, object]]
"""Prior chat turns: LangChain messages, or `{"role": ..., "content": ...}` dicts."""


class Agent(ABC):
    """What an `ActorExecutor` runs: one user message to an answer, blocking or streaming.

    `LLMAgent` is the one agent the library ships; subclass this to put something else behind
    an executor (the CLI, the web app and the store then work unchanged). A subclass implements
    `run()`, which never raises for a failed run (its outcome carries the error); the two public
    entry points are built on it, and `open()` and `aclose()` are hooks for what it holds. An
    agent that pauses for approvals also overrides `check_decisions()`.
    """

    name: str

    @abstractmethod
    async def run(
        self,
        start: str | CheckedDecisions,
        *,
        history: History | None,
        sink: Callable[[Event], None],
        streaming: bool,
        on_call: CallRecorder | None = None,
        run_id: str | None = None,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
        context: RunContext[Any] | None = None,
        session_id: str | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> RunOutcome:
        """Run once as run `run_id` (a new id when None), its events into `sink`. Never raises
        for a failed run: the outcome carries the result (with the run's id) and the error.
        What `process_message` and `stream_message` are made of, and what an executor drives.

        Args:
            start: The user's message; or a paused run with the decisions on it checked
                (`check_decisions()`), which the run carries out as a new segment.
            history: Earlier turns before the message (None for a resumed run).
            sink: Where the run's events go, as they happen.
            streaming: Whether the model is streamed (text deltas as they come).
            on_call: Told each LLM call's usage as the call ends.
            run_id: The run's id, when the caller made it already.
            max_output_tokens: A cap on the output of each LLM call of this run (never above
                the model's own cap); None leaves the model's.
            can_pause: False declines the calls that need a person's approval instead of
                pausing the run for them.
            context: Who the run is for and the application's `deps`, for the tools' `RunContext`
                parameters (its `run_id` is the run's); None for a context of the run's id alone.
            session_id: The session the run answers in, if any (an LLM agent's prompt-cache
                key).
            output_schema: A JSON Schema this run's answer must match (`ExecutionResult.output`
                is then the parsed JSON), instead of the agent's own output type.
        """

    async def process_message(
        self,
        message: str,
        *,
        history: History | None = None,
        on_result: ResultCallback | None = None,
        on_call: CallRecorder | None = None,
    ) -> ExecutionResult:
        """Run the message to its answer, blocking.

        Raises:
            ConfigurationError: the message or history is malformed.
            Exception: whatever failed the run (a model's error, a `StoreError`, ...), unchanged,
                after the usage spent was recorded (`last_token_usage_var`, `on_result`).
            asyncio.CancelledError: the caller cancelled the run, after its usage was recorded.
        """
        outcome = await self.run(
            message, history=history, sink=discard_event, streaming=False, on_call=on_call
        )
        return settle_blocking(outcome, on_result)

    def stream_message(
        self,
        message: str,
        *,
        history: History | None = None,
        on_result: ResultCallback | None = None,
        on_call: CallRecorder | None = None,
    ) -> EventStream:
        """Run the message, yielding its events as they happen (text deltas as the provider
        sends them); nothing runs until the stream is read. A failed run ends the stream with
        a `run_failed` event, it does not raise."""

        def run(sink: Callable[[Event], None]) -> Awaitable[RunOutcome]:
            return self.run(message, history=history, sink=sink, streaming=True, on_call=on_call)

        return EventStream(run, on_result=on_result)

    async def open(self) -> None:  # noqa: B027 (a hook: most agents hold nothing to open)
        """Acquire what the agent holds for its life (e.g. MCP sessions); a no-op by default."""

    async def aclose(self) -> None:  # noqa: B027 (a hook: most agents hold nothing to close)
        """Release what `open()` or a run acquired; a no-op by default."""

    def check_decisions(
        self, paused: PausedRun, decisions: Sequence[ApprovalDecision], *, now: datetime
    ) -> CheckedDecisions:
        """Check decisions on a run this agent paused, before anything runs: what `run()`
        starts the resumed segment from.

        Raises:
            ApprovalError: the subclass naming what does not fit. An agent that never pauses
                has no paused runs (`RunNotFoundError`).
        """
        raise RunNotFoundError(f"no paused run {paused.run_id!r}", run_id=paused.run_id)


def discard_event(event: Event) -> None:
    """The sink of a blocking run: nobody listens (a run given it makes no event)."""


def settle_blocking(outcome: RunOutcome, on_result: ResultCallback | None) -> ExecutionResult:
    """How a blocking run ends: its usage in the caller's context, the callback told, then the
    result returned or the run's error raised."""
    last_token_usage_var.set(outcome.result.usage)
    if on_result is not None:
        on_result(outcome.result)
    if outcome.error is not None:
        raise outcome.error
    return outcome.result
