"""The tool loop's private vocabulary: what one round decides, the run's state, and its outcome.

`decide()` is a pure function from a model reply to the next step; `_Run` is the only state that
lives across rounds; `_ToolLoopResult` / `_ToolLoopError` are how a run ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage

from cleveractors.agents._failures import may_have_been_billed
from cleveractors.agents.fold import ReplyFold, output_text
from cleveractors.agents.stream import current_consumer_room, wait_through_cancellation
from cleveractors.agents.text import RunText
from cleveractors.agents.tool import NOT_A_JSON_OBJECT, ToolCallRequest, unnamed_call_id
from cleveractors.events import Event, TextDelta, UsageRecorded
from cleveractors.pricing import CallPricer
from cleveractors.result import ErrorInfo, ExecutionResult, SynthesisReason, ToolCallRecord
from cleveractors.tokens import count_tokens, estimate_prompt_tokens
from cleveractors.usage import (
    AttemptStatus,
    CallPurpose,
    CallRecorder,
    LLMCallUsage,
    TokenUsage,
    UsageLedger,
)

EventSink = Callable[[Event], None]

logger = logging.getLogger("cleveractors.agents.llm")


def discard_event(event: Event) -> None:
    """The sink of a blocking run: nobody listens."""


# -- what a round decides ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Finish:
    """The reply is the answer."""

    message: AIMessage


@dataclass(frozen=True, slots=True)
class _CallTools:
    """Run this batch of calls, then ask the model again."""

    reply: AIMessage
    calls: tuple[ToolCallRequest, ...]


@dataclass(frozen=True, slots=True)
class _Synthesize:
    """Stop using tools; ask the model to answer from what it has."""

    reason: SynthesisReason


_Step = _Finish | _CallTools | _Synthesize


def decide(reply: AIMessage, *, tool_rounds_done: int, max_tool_rounds: int) -> _Step:
    """The next step after a model reply (the budget is checked before each further round)."""
    calls = tool_call_requests(reply)
    if calls:
        if tool_rounds_done >= max_tool_rounds:
            return _Synthesize("max_rounds")
        return _CallTools(_with_call_ids(reply, calls), calls)
    if not reply.text.strip():
        return _Synthesize("stuck")
    return _Finish(reply)


def tool_call_requests(reply: AIMessage) -> tuple[ToolCallRequest, ...]:
    """Every call of a reply, parsed ones first (in the model's order), then unparseable ones."""
    parsed = tuple(
        ToolCallRequest(
            call_id=call["id"] or unnamed_call_id(position),
            name=call["name"],
            arguments=call["args"],
        )
        for position, call in enumerate(reply.tool_calls)
    )
    unparsed = tuple(
        ToolCallRequest(
            call_id=call["id"] or unnamed_call_id(len(parsed) + position),
            name=call["name"] or "",
            arguments=call["args"] or "",
            parse_error=_json_problem(call["args"] or ""),
        )
        for position, call in enumerate(reply.invalid_tool_calls)
    )
    return parsed + unparsed


def _with_call_ids(reply: AIMessage, calls: Sequence[ToolCallRequest]) -> AIMessage:
    """The reply as the transcript must carry it: each call with the id its answer names."""
    sent = [*reply.tool_calls, *reply.invalid_tool_calls]
    if all(call["id"] for call in sent):
        return reply
    ids = iter(request.call_id for request in calls)
    return reply.model_copy(
        update={
            "tool_calls": [{**call, "id": next(ids)} for call in reply.tool_calls],
            "invalid_tool_calls": [{**call, "id": next(ids)} for call in reply.invalid_tool_calls],
        }
    )


def _json_problem(text: str) -> str:
    """Why raw arguments are unusable, in our own words: providers word it differently (or not at
    all), and the model should read the same error whichever way the reply arrived."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return str(exc)
    return NOT_A_JSON_OBJECT


# -- the run's state ---------------------------------------------------------------------------


@dataclass(slots=True)
class _InFlightCall:
    """An LLM call that has been sent and not yet recorded: billed by estimate if it is cut off."""

    purpose: CallPurpose
    messages: Sequence[BaseMessage]
    fold: ReplyFold | None
    streams_text: bool = False
    """Whether the fold's text goes to the caller as it arrives, a delta per chunk."""

    @property
    def has_shown_text(self) -> bool:
        """Whether the caller saw any of this call's text, which a retry cannot take back.

        Read from the fold when the call fails, so the chunks carry no bookkeeping. A call that
        does not stream to the caller shows its text only once its reply is complete; what can
        still fail after that is a stop, which is never retried."""
        fold = self.fold
        return (
            self.streams_text
            and fold is not None
            and fold.received_any
            and bool(fold.message().text)
        )


@dataclass(slots=True)
class _Run:
    """Everything one run keeps across rounds. Made per call, never shared."""

    messages: list[BaseMessage]
    user_message: str
    sink: EventSink
    streaming: bool
    pricer: CallPricer = field(default_factory=lambda: CallPricer(provider=None, model=None))
    ledger: UsageLedger = field(default_factory=UsageLedger)
    tool_records: list[ToolCallRecord] = field(default_factory=list)
    round: int = 0
    tool_rounds: int = 0
    synthesis_reason: SynthesisReason | None = None
    synthesis_ignored_tool_calls: tuple[str, ...] = ()
    in_flight: _InFlightCall | None = None
    attempt: int = 1
    """Which attempt at the LLM call under way this is, from 1 (set by `call_with_retries`)."""
    shown: RunText = field(default_factory=RunText)
    """The text the user sees, whether or not the run streams: `ExecutionResult.text`."""
    recorder: CallRecorder | None = None
    recorded: int = 0
    """How many of the ledger's calls the recorder has been given."""
    turn_start: int = 0
    """Where this turn's messages begin in `messages` (the user's message)."""
    max_output_tokens: int | None = None
    """This run's cap on each LLM call's output, bound on the model for every call."""
    _task: asyncio.Task[object] | None = field(default_factory=asyncio.current_task, init=False)
    _cancels_at_start: int = field(default=0, init=False)
    _room: asyncio.Event | None = field(default=None, init=False)
    """Set while the consumer of the stream this run works for has room for more events."""
    is_waiting_for_room: bool = field(default=False, init=False)
    """The run is waiting for its consumer to catch up (which a stall watch does not count)."""

    def __post_init__(self) -> None:
        if self._task is not None:
            self._cancels_at_start = self._task.cancelling()
        self._room = current_consumer_room()

    @property
    def is_stop_requested(self) -> bool:
        """Whether the run's task was asked to cancel since the run began, whatever became of
        the CancelledError (see `checkpoint`)."""
        return self._task is not None and self._task.cancelling() > self._cancels_at_start

    async def checkpoint(self) -> None:
        """Where the run may stop or wait: before and after each model call, after each streamed
        chunk, before each tool.

        A run whose task was asked to cancel ends here even if a library swallowed the
        CancelledError: Python 3.11's `asyncio.wait_for`, through which langchain-openai reads
        every chunk, does when the chunk completes as the cancellation arrives. The task's
        cancel count, not the exception, records the request (as for `asyncio.timeout()`).
        Then a streamed run waits while its consumer is behind."""
        if self.is_stop_requested:
            raise asyncio.CancelledError
        if self._room is not None and not self._room.is_set():
            self.is_waiting_for_room = True
            try:
                await self._room.wait()
            finally:
                self.is_waiting_for_room = False

    async def flush_calls(self) -> None:
        """Hand the recorder every call recorded since the last flush."""
        if self.recorder is None:
            return
        for call in self.ledger.calls[self.recorded :]:
            await self.recorder(call)
            self.recorded += 1

    async def flush_calls_on_failure(self) -> None:
        """On the way out of a failed or cancelled run, hand the recorder the calls that ended
        it. The run's own failure is what the caller hears of: a recorder failing now is logged,
        not raised in its place."""
        flushing = asyncio.ensure_future(self.flush_calls())
        try:
            await wait_through_cancellation(flushing)
        except asyncio.CancelledError:
            pass  # the run is being cancelled already; that is what it reports
        except Exception as exc:
            logger.warning("recording the calls of a failed run failed: %r", exc)

    def record_usage(
        self,
        purpose: CallPurpose,
        usage: TokenUsage,
        reply: AIMessage | None = None,
        *,
        status: AttemptStatus = "ok",
    ) -> None:
        model = self.pricer.answering_model(reply)
        call = self.ledger.record(
            purpose=purpose,
            round=self.round,
            usage=usage,
            attempt=self.attempt,
            status=status,
            provider=self.pricer.provider,
            model=model,
            cost_usd=self.pricer.cost(usage, model),
        )
        self.in_flight = None
        self.sink(UsageRecorded(call=call, total=self.ledger.total))

    def record_reply(
        self,
        purpose: CallPurpose,
        reply: AIMessage,
        sent: Sequence[BaseMessage],
        *,
        status: AttemptStatus = "ok",
    ) -> None:
        """Record a completed call: the provider's figures when plausible, else an estimate."""
        reported = TokenUsage.from_message(reply)
        if reported is None or reported.prompt_tokens == 0:
            estimate = _estimate(sent, reply)
            _warn_implausible(self.pricer, reply, reported)
            reported = estimate if reported is None else _with_estimated_prompt(reported, estimate)
        self.record_usage(purpose, reported, reply, status=status)

    def bill_interrupted_call(self, cause: BaseException) -> None:
        """Record an in-flight call that failed or was cut off (every attempt is a record). The
        provider's figures if they arrived before the cut; an estimate if the provider did work
        for it (it streamed something, or the attempt got past sending: cancelled, timed out,
        dropped); 0 if it was refused before any output (an HTTP error status)."""
        call = self.in_flight
        if call is None:
            return
        status: AttemptStatus = (
            "cancelled" if isinstance(cause, asyncio.CancelledError) else "failed"
        )
        if call.fold is not None and call.fold.has_usage:
            # The provider's figures arrived before the cut: exact, never an estimate.
            self.record_reply(call.purpose, call.fold.message(), call.messages, status=status)
            return
        received = call.fold is not None and call.fold.received_any
        if received or may_have_been_billed(cause):
            partial = call.fold.message() if call.fold is not None else None
            estimate = _estimate(call.messages, partial)
            self.record_usage(call.purpose, estimate, partial, status=status)
        else:
            self.record_usage(call.purpose, TokenUsage(), status=status)

    def show_text(self, text: str) -> None:
        """Text the user sees (a reply's, or an `ends_turn` tool's output): streamed by a
        streaming run, and part of the result's text either way."""
        if self.streaming and text:
            self.sink(TextDelta(round=self.round, text=text))
        self.shown.add(self.round, text)

    def result(self, message: AIMessage) -> _ToolLoopResult:
        turn = (*self.messages[self.turn_start :], message)
        return _ToolLoopResult(
            message=message, progress=self._progress(), text=self.shown.text, turn=turn
        )

    def error(self, cause: BaseException) -> _ToolLoopError:
        return _ToolLoopError(cause, self._progress())

    def _progress(self) -> _RunProgress:
        return _RunProgress(
            calls=self.ledger.calls,
            tool_records=tuple(self.tool_records),
            rounds=self.round,
            synthesis_reason=self.synthesis_reason,
            synthesis_ignored_tool_calls=self.synthesis_ignored_tool_calls,
        )


def _estimate(messages: Sequence[BaseMessage], reply: AIMessage | None) -> TokenUsage:
    """The documented estimate of a call the provider gave no figures for: the prompt from the
    messages sent, the completion from the reply received so far, thinking included."""
    completion = 0
    if reply is not None:
        completion += count_tokens(output_text(reply))
        completion += sum(count_tokens(str(call["args"])) for call in reply.tool_calls)
        completion += sum(count_tokens(call["args"] or "") for call in reply.invalid_tool_calls)
    return TokenUsage(
        prompt_tokens=estimate_prompt_tokens(messages),
        completion_tokens=completion,
        estimated=True,
    )


def _with_estimated_prompt(reported: TokenUsage, estimate: TokenUsage) -> TokenUsage:
    """A report of 0 prompt tokens for a non-empty prompt (langchain-anthropic reads input usage
    only from `message_delta`, which older event forms leave at 0): keep what the provider did
    report, estimate the prompt, flag it."""
    return reported.model_copy(update={"prompt_tokens": estimate.prompt_tokens, "estimated": True})


_warned_models: set[tuple[str | None, str | None]] = set()
_warned_lock = threading.Lock()


def _warn_implausible(pricer: CallPricer, reply: AIMessage, reported: TokenUsage | None) -> None:
    """Log once per provider and model in this process: a provider that reports no usage does so
    on every call, and one line says it as well as a thousand."""
    model = pricer.answering_model(reply)
    with _warned_lock:
        if (pricer.provider, model) in _warned_models:
            return
        _warned_models.add((pricer.provider, model))
    problem = "no usage" if reported is None else "0 prompt tokens for a non-empty prompt"
    logger.warning(
        "provider %s, model %s reported %s; billing an estimate (flagged estimated)",
        pricer.provider,
        model,
        problem,
    )


# -- how a run ends ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _RunProgress:
    """What a run did and spent, up to its end or its failure."""

    calls: tuple[LLMCallUsage, ...]
    tool_records: tuple[ToolCallRecord, ...]
    rounds: int
    synthesis_reason: SynthesisReason | None
    synthesis_ignored_tool_calls: tuple[str, ...]

    def execution_result(
        self, *, text: str, answer: str = "", error: BaseException | None = None
    ) -> ExecutionResult:
        return ExecutionResult(
            text=text,
            answer=answer,
            usage_by_call=self.calls,
            tool_calls=self.tool_records,
            rounds=self.rounds,
            synthesis_reason=self.synthesis_reason,
            synthesis_ignored_tool_calls=self.synthesis_ignored_tool_calls,
            error=None if error is None else _error_info(error),
            cancelled=isinstance(error, asyncio.CancelledError),
        )


def _error_info(error: BaseException) -> ErrorInfo:
    if isinstance(error, asyncio.CancelledError):
        return ErrorInfo(type="CancelledError", message="the run was cancelled")
    return ErrorInfo.from_exception(error)


@dataclass(frozen=True, slots=True)
class _ToolLoopResult:
    """A finished run: the final message and everything spent."""

    message: AIMessage
    progress: _RunProgress
    text: str
    """Everything the user saw, by the rule of `cleveractors.agents.text`."""
    turn: tuple[BaseMessage, ...] = ()
    """The turn as the transcript holds it: the user's message, tool calls and results, answer."""

    def execution_result(self) -> ExecutionResult:
        return self.progress.execution_result(text=self.text, answer=self.message.text)


class _ToolLoopError(Exception):
    """A run failed: `cause` is the original exception, `progress` what was spent before it."""

    def __init__(self, cause: BaseException, progress: _RunProgress) -> None:
        super().__init__(f"tool loop failed: {type(cause).__name__}: {cause}")
        self.cause = cause
        self.progress = progress

    def execution_result(self) -> ExecutionResult:
        return self.progress.execution_result(text="", error=self.cause)
