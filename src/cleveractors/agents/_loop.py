"""The tool loop's private vocabulary: what one round decides, the run's state, and its outcome.

`decide()` is a pure function from a model reply to the next step; `_Run` is the only state that
lives across rounds, made of one owner per concern (the bill, the transcript, the pacing) and the
round counters; `_ToolLoopResult` / `_ToolLoopError` are how a run ends, each with the run's
`ExecutionResult`, built once from its records.

`Transcript` holds the messages the model reads and where this turn's begin. It opens with the
system prompt, the history and the user's message; each round appends the model's reply with tool
calls and one tool message per call. The turn (the user's message onwards, with the answer) is what
a session stores.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from cleveractors._compacted import CompactedHistory
from cleveractors.agents._bill import Bill
from cleveractors.agents._context_window import ContextView
from cleveractors.agents._lineage import Lineage
from cleveractors.agents.base import History, discard_event
from cleveractors.agents.stream import Pacing
from cleveractors.agents.tool import NOT_A_JSON_OBJECT, ToolCallRequest, unnamed_call_id
from cleveractors.context import RunContext
from cleveractors.errors import ConfigurationError
from cleveractors.events import Event, TextDelta
from cleveractors.result import (
    ChildRun,
    ErrorInfo,
    ExecutionResult,
    RunText,
    SynthesisReason,
    ToolCallRecord,
)

if TYPE_CHECKING:
    from cleveractors.agents._output import PartialOutputs, TypedAnswers
    from cleveractors.approvals import CheckedDecisions, PausedRun, PendingApproval

EventSink = Callable[[Event], None]


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


@dataclass(frozen=True, slots=True)
class _TypedAnswer:
    """The reply is meant as the typed answer (its text, or its call of the output tool): check
    it before it is the answer (`agents._output`)."""

    reply: AIMessage


@dataclass(frozen=True, slots=True)
class _ResumeBatch:
    """A resumed run's first step: carry out the decisions on its paused batch."""

    paused: PausedRun
    checked: CheckedDecisions


_Step = _Finish | _CallTools | _Synthesize | _ResumeBatch | _TypedAnswer


def decide(
    reply: AIMessage,
    *,
    tool_rounds_done: int,
    max_tool_rounds: int,
    is_typed: bool = False,
    output_tool: str | None = None,
) -> _Step:
    """The next step after a model reply (the budget is checked before each further round). A
    typed agent's answer (`is_typed`) is a `_TypedAnswer`, and so is any reply calling its
    output tool, whatever else it calls."""
    calls = tool_call_requests(reply)
    if output_tool is not None and any(call.name == output_tool for call in calls):
        return _TypedAnswer(reply)
    if calls:
        if tool_rounds_done >= max_tool_rounds:
            return _Synthesize("max_rounds")
        return _CallTools(_with_call_ids(reply, calls), calls)
    if not reply.text.strip():
        return _Synthesize("stuck")
    return _TypedAnswer(reply) if is_typed else _Finish(reply)


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


class Transcript:
    """The messages of one run. Made per run, never shared.

    Attributes:
        messages: Everything the model is sent next, in order.
        user_message: The text of the user's message that began the turn.
    """

    __slots__ = ("_turn_start", "messages", "user_message")

    def __init__(
        self, messages: Iterable[BaseMessage] = (), *, user_message: str = "", turn_start: int = 0
    ) -> None:
        self.messages = list(messages)
        self.user_message = user_message
        self._turn_start = turn_start
        """Where this turn's messages begin in `messages` (the user's message)."""

    @classmethod
    def of(cls, message: str, history: History | None, *, system_prompt: str | None) -> Transcript:
        """The transcript a run begins with.

        Raises:
            ConfigurationError: the message is not a non-empty string, or the history is not a
                list of chat turns.
        """
        if not isinstance(message, str) or not message.strip():
            raise ConfigurationError(f"message must be a non-empty string, got {message!r}")
        if isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Iterable | None):
            raise ConfigurationError(
                f"history must be a list of chat turns, got {type(history).__name__}"
            )
        messages: list[BaseMessage] = []
        if system_prompt:
            messages.append(SystemMessage(system_prompt))
        for position, turn in enumerate(history or ()):
            try:
                messages.extend(convert_to_messages([turn]))
            except (ValueError, TypeError, NotImplementedError) as exc:
                raise ConfigurationError(f"history[{position}] is not a chat turn: {exc}") from None
        messages.append(HumanMessage(message))
        return cls(messages, user_message=message, turn_start=len(messages) - 1)

    @property
    def holds_tool_calls(self) -> bool:
        """Whether any message is a tool call or its answer (which providers accept only while
        the request declares tools)."""
        return any(
            isinstance(message, ToolMessage)
            or (
                isinstance(message, AIMessage)
                and bool(message.tool_calls or message.invalid_tool_calls)
            )
            for message in self.messages
        )

    @property
    def turn_start(self) -> int:
        """Where this turn's messages begin in `messages` (the user's message)."""
        return self._turn_start

    def append(self, message: BaseMessage) -> None:
        self.messages.append(message)

    def replace_system_prompt(self, old: str | None, new: str | None) -> None:
        """Put `new` where the transcript's system prompt `old` stood (a handoff: the agent
        that takes the conversation over speaks in its own voice); the turn stays as it is."""
        messages = self.messages
        if old and messages and isinstance(messages[0], SystemMessage):
            del messages[0]
            self._turn_start -= 1
        if new:
            messages.insert(0, SystemMessage(new))
            self._turn_start += 1

    def answered_turn(self) -> tuple[BaseMessage, ...]:
        """The turn so far, up to the first reply whose calls are not all answered: valid
        history for any provider, though the turn has no answer."""
        turn = self.messages[self._turn_start :]
        for position, message in enumerate(turn):
            if isinstance(message, AIMessage):
                sent = [*message.tool_calls, *message.invalid_tool_calls]
                answered = {m.tool_call_id for m in turn[position:] if isinstance(m, ToolMessage)}
                if not {call["id"] for call in sent} <= answered:
                    return tuple(turn[:position])
        return tuple(turn)

    def turn(self, answer: AIMessage) -> tuple[BaseMessage, ...]:
        """The turn as a session stores it: the user's message, tool calls and results, answer."""
        return (*self.messages[self._turn_start :], answer)


@dataclass(slots=True)
class ModelTrail:
    """Which of the agent's models a run asks (0 its own, then its fallbacks), which answered
    last, and the models it fell back from, in order."""

    position: int = 0
    answered_by: str | None = None
    fell_back_from: tuple[str, ...] = ()

    def fell_back(self, model: str | None, *, to: int) -> None:
        if model is not None and model not in self.fell_back_from:
            self.fell_back_from += (model,)
        self.position = to

    def answered(self, position: int, model: str | None) -> None:
        self.position, self.answered_by = position, model


@dataclass(slots=True)
class _Run:
    """Everything one run keeps across rounds. Made per call, never shared."""

    run_id: str
    sink: EventSink
    streaming: bool
    bill: Bill
    """The usage records of the run's LLM calls, and their flushing to the recorder."""
    context: RunContext[Any]
    """Who the run is for and the application's deps: what its tools' `RunContext` parameters
    receive (its usage reads `bill` live), and what a run the run starts inherits."""
    transcript: Transcript = field(default_factory=Transcript)
    """What the model reads; filled in by the run's first step."""
    pacing: Pacing = field(default_factory=Pacing)
    """Where the run stops or waits for its consumer."""
    tool_records: list[ToolCallRecord] = field(default_factory=list)
    round: int = 0
    tool_rounds: int = 0
    synthesis_reason: SynthesisReason | None = None
    synthesis_ignored_tool_calls: tuple[str, ...] = ()
    shown: RunText = field(default_factory=RunText)
    """The text the user sees, whether or not the run streams: `ExecutionResult.text`."""
    max_output_tokens: int | None = None
    """This run's cap on each LLM call's output, bound on the model for every call."""
    can_pause: bool = True
    """False where nobody can approve a call (the OpenAI endpoint): gated calls are declined."""
    resumed_from: str | None = None
    """The paused segment this run resumes."""
    agent_name: str | None = None
    """The actor whose agent runs the loop now (a handoff changes it)."""
    session_id: str | None = None
    """The session the run answers in, if any (its prompt-cache key on OpenAI)."""
    pending: tuple[PendingApproval, ...] = ()
    """The calls this run paused for, once it pauses."""
    spent_tokens_before: int = 0
    """What the run's earlier segments spent: its budgets span every segment."""
    spent_cost_before: Decimal = field(default=Decimal(0))
    window: ContextView | None = None
    """What the model is sent and its size, once the run manages its context window."""
    history_tokens: int | None = None
    """The size of the history the run was given, when the run that left it measured it."""
    models: ModelTrail = field(default_factory=ModelTrail)
    """Which model the run asks, and which answered (fallback models)."""
    lineage: Lineage = field(default_factory=lambda: Lineage(path=("assistant",)))
    """Where the run stands in its run tree, and the budgets it has (agents as tools)."""
    resuming: dict[str, CheckedDecisions] = field(default_factory=dict)
    """The decisions that the paused runs of agents this run called as tools resume with, by
    the id of the call that runs each (a resumed batch's)."""
    child_runs: list[ChildRun] = field(default_factory=list)
    """The runs of the agents this run called as tools, in the order they ended."""
    typed: TypedAnswers | None = None
    """How this run's answer is typed: the agent's output type, or the request's schema."""
    partials: PartialOutputs | None = None
    """A streamed typed run's sink, adding the partial objects (`OutputDelta`)."""
    output: object = None
    """The typed answer, once validated."""
    listens: bool = field(init=False)
    """Whether anyone reads the run's events: when not (`discard_event`), none is made."""

    def __post_init__(self) -> None:
        self.listens = self.sink is not discard_event

    @property
    def spent_tokens(self) -> int:
        return self.spent_tokens_before + self.bill.ledger.total.total_tokens

    @property
    def spent_cost_usd(self) -> Decimal:
        return self.spent_cost_before + self.bill.ledger.cost_spent_usd

    def show_text(self, text: str) -> None:
        """Text the user sees (a reply's, or an `ends_turn` tool's output): one event (a
        blocking run's sink sees each reply's text in its place among the tool events), and
        part of the result's text."""
        if text and self.listens:
            self.sink(TextDelta(round=self.round, text=text))
        self.shown.add(self.round, text)

    def result(self, message: AIMessage) -> _ToolLoopResult:
        return _ToolLoopResult(
            message=message,
            result=self._execution_result(text=self.shown.text, answer=message.text),
            turn=self.transcript.turn(message),
            compacted=(
                None
                if self.window is None
                else self.window.compacted(self.transcript.messages, message)
            ),
        )

    def paused(self, pause: PausedRun) -> _ToolLoopResult:
        """The run waits for a person: no answer yet, the calls it waits for on the result."""
        self.pending = pause.pending
        return _ToolLoopResult(
            message=AIMessage(content=""),
            result=self._execution_result(text=self.shown.text),
            paused=pause,
        )

    def error(self, cause: BaseException) -> _ToolLoopError:
        # A resumed segment's turn holds tool calls a person approved and that ran: a session
        # keeps what of it is whole, so the conversation does not forget what was done.
        kept = self.transcript.answered_turn() if self.resumed_from is not None else ()
        return _ToolLoopError(cause, self._execution_result(text="", error=cause), kept)

    def _execution_result(
        self, *, text: str, answer: str = "", error: BaseException | None = None
    ) -> ExecutionResult:
        return ExecutionResult(
            run_id=self.run_id,
            text=text,
            answer=answer,
            output=self.output if error is None else None,
            usage_by_call=self.bill.ledger.calls,
            tool_calls=tuple(self.tool_records),
            rounds=self.round,
            synthesis_reason=self.synthesis_reason,
            synthesis_ignored_tool_calls=self.synthesis_ignored_tool_calls,
            error=None if error is None else _error_info(error),
            cancelled=isinstance(error, asyncio.CancelledError),
            pending_approvals=self.pending if error is None else (),
            resumed_from=self.resumed_from,
            model=self.models.answered_by,
            fell_back_from=self.models.fell_back_from,
            active_agent=self.agent_name,
            parent_run_id=self.lineage.parent_run_id,
            child_runs=tuple(self.child_runs),
        )


def _error_info(error: BaseException) -> ErrorInfo:
    if isinstance(error, asyncio.CancelledError):
        return ErrorInfo(type="CancelledError", message="the run was cancelled")
    return ErrorInfo.from_exception(error)


# -- how a run ends ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ToolLoopResult:
    """A finished run: the final message, and the result with everything spent."""

    message: AIMessage
    result: ExecutionResult
    turn: tuple[BaseMessage, ...] = ()
    """The turn as the transcript holds it: the user's message, tool calls and results, answer."""
    paused: PausedRun | None = None
    """Set when the run waits for a person: what its resumption starts from."""
    compacted: CompactedHistory | None = None
    """How the run compacted the history it was given, for its session to keep."""


class _ToolLoopError(Exception):
    """A run failed: `cause` is the original exception, `result` what was spent before it."""

    def __init__(
        self,
        cause: BaseException,
        result: ExecutionResult,
        turn: tuple[BaseMessage, ...] = (),
    ) -> None:
        super().__init__(f"tool loop failed: {type(cause).__name__}: {cause}")
        self.cause = cause
        self.result = result
        self.turn = turn
        """What a session keeps of the failed turn: none, or its whole rounds."""
