"""`LLMAgent`: a chat model plus tools, run by one tool loop for both blocking and streaming.

`process_message` and `stream_message` are thin: both call `_execute_tool_loop`, which reads as
the five steps of a round (model turn, usage, decide, tools, limits). Every failure inside it is
converted once into `_ToolLoopError`, carrying what was spent; the public methods record that
usage and re-raise the original exception.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, assert_never

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from cleveractors._langchain_private import invoke_reply, stream_reply, streams_inside_ainvoke
from cleveractors._pause import BatchCall, CheckedDecisions, PausedRun, ToolAnswer
from cleveractors.agents._approval import (
    UNAVAILABLE,
    ApprovalGate,
    check_decisions,
    declined,
    edited,
    expired_answer,
    not_run,
)
from cleveractors.agents._bill import Bill, InFlightCall
from cleveractors.agents._loop import (
    EventSink,
    Transcript,
    _CallTools,
    _Finish,
    _ResumeBatch,
    _Run,
    _Step,
    _Synthesize,
    _ToolLoopError,
    _ToolLoopResult,
    decide,
    discard_event,
    tool_call_requests,
)
from cleveractors.agents._model import prepared_model
from cleveractors.agents._pacing import StallWatch
from cleveractors.agents._retry import RetryPolicy, call_with_retries
from cleveractors.agents._toolset import (
    ToolSet,
    answer_call,
    answer_for_person,
    append_answers,
    skip_call,
)
from cleveractors.agents.base import Agent, History, ResultCallback, settle_blocking
from cleveractors.agents.fold import ReplyFold
from cleveractors.agents.stream import EventStream
from cleveractors.agents.tool import ToolCallRequest, ToolOutcome
from cleveractors.approvals import (
    DEFAULT_APPROVAL_TIMEOUT_S,
    ApprovalDecision,
    ApprovalPolicy,
    PendingApproval,
    RecordedDecision,
    call_digest,
)
from cleveractors.config import LLMAgentConfig, McpServer
from cleveractors.errors import ConfigurationError, StoreError, StreamStalledError
from cleveractors.events import (
    OutputPruned,
    RoundStarted,
    SynthesisStarted,
    TextDelta,
    ToolApprovalRequested,
    ToolCallDecided,
    ToolCallRequested,
)
from cleveractors.pricing import CallPricer, ModelPrices
from cleveractors.result import (
    SYNTHESIS_WITHOUT_ANSWER,
    ExecutionResult,
    RunOutcome,
    SynthesisReason,
)
from cleveractors.runs import current_run_id, run_scope
from cleveractors.tokens import count_tokens
from cleveractors.tools import Tool, ToolHandler, tool_from_config
from cleveractors.usage import CallPurpose, CallRecorder

__all__ = ["LLMAgent", "LoopLimits", "RetryPolicy"]

logger = logging.getLogger(__name__)

_SYNTHESIS_PROMPT = (
    "Stop using tools now ({why}). Using only the information gathered above, give your best "
    "complete answer to the user's message: {message!r}. Say plainly if something could not be "
    "found out."
)
_SYNTHESIS_WHY: dict[SynthesisReason, str] = {
    "max_rounds": "the limit of tool rounds for this message is reached",
    "budget": "the token budget for this message is spent",
    "cost_budget": "the cost budget for this message is spent",
    "stuck": "your last reply had neither text nor tool calls",
}
_NO_RETRIES = RetryPolicy()
"""A model built in code keeps its own client's retries; the loop adds none unless asked."""
_CONDENSE_PROMPT = (
    "Condense the following output of the tool {tool!r} to what matters for answering the "
    "user's message {message!r}. Keep facts, numbers and names exactly; drop everything else. "
    "Reply with the condensed output only.\n\n{output}"
)


@dataclass(frozen=True, slots=True)
class LoopLimits:
    """How far one message may go before the loop asks for a synthesis answer.

    Raises:
        ConfigurationError: `stream_stall_timeout_s` is not positive.
    """

    max_tool_rounds: int = 10
    """Tool rounds a message may take before the model is asked to answer without tools."""
    token_budget: int | None = None
    """Checked before each further round against the tokens of the message's calls so far."""
    tool_output_max_tokens: int | None = None
    """A tool output longer than this is condensed by one LLM call (truncated if that fails)."""
    cost_budget_usd: Decimal | None = None
    """Checked before each further round against the cost of the calls so far, like
    `token_budget`; needs a model with a known price (or `pricing`)."""
    stream_stall_timeout_s: float | None = 120.0
    """A streamed model call that sends no chunk for this long (from the request to its first
    chunk, then between chunks; waiting for a slow consumer does not count) is ended with
    `StreamStalledError`. The loop's own limit replaces the client's per-chunk timeout
    (`ChatOpenAI(stream_chunk_timeout=...)` is turned off); None leaves the client's in charge."""

    def __post_init__(self) -> None:
        stall = self.stream_stall_timeout_s
        if stall is not None and not stall > 0:
            raise ConfigurationError(
                f"LoopLimits: stream_stall_timeout_s must be positive or None, got {stall!r}"
            )


@dataclass(frozen=True, slots=True)
class _BatchOutcome:
    answer: str | None = None
    """The output of an `ends_turn` tool, which is the turn's answer; None to go on."""
    paused: PausedRun | None = None
    """Set when gated calls of the batch wait for a person: the run pauses."""


@dataclass(frozen=True, slots=True)
class _NewMessage:
    """A run that begins with the user's message."""

    message: str
    history: History | None


@dataclass(frozen=True, slots=True)
class _Resumption:
    """A run that goes on from a paused one, with decisions on its gated calls."""

    paused: PausedRun
    checked: CheckedDecisions


_Start = _NewMessage | _Resumption


class LLMAgent(Agent):
    """A chat model with tools.

    Args:
        model: Any LangChain chat model (for example `ChatOpenAI`, or `ScriptedChatModel`).
        tools: `Tool`s, LangChain tools or plain callables (sync or async).
        name: Used in logs and results.
        system_prompt: Sent first in every conversation.
        limits: Round, token-budget and pruning limits, and the stall limit of a streamed call.
        stream_tool_rounds: Stream every round with tools bound (the default). False runs rounds
            with `ainvoke()` and streams the final answer as one chunk, for providers that cannot
            stream tool calls.
        retry: The loop's retries of a failed LLM call, each attempt billed and evented. Off by
            default: a model built in code keeps its own client's retries, which the loop cannot
            see or bill; turn those off (e.g. `ChatOpenAI(max_retries=0)`) when you turn these on.
        mcp_servers: MCP servers whose tools join `tools` (needs ``cleveractors[mcp]``). They are
            connected by `open()` (an executor's `async with`) or by the first run, and stay
            connected until `aclose()`.
        provider: LangChain's provider name (`openai`, `anthropic`, ...) for usage records, prices
            and the words of the synthesis request's tool_choice; read from the model (its
            `ls_provider`) when omitted.
        model_name: The model's name for usage records and prices; read from the model when
            omitted.
        pricing: Your own prices, instead of genai-prices' table.
        approval: Which tool calls wait for a person (`cleveractors.approvals`), on top of the
            tools declared `needs_approval`: tool names, or a policy callable
            `(ToolCallRequest) -> bool | Awaitable[bool]` returning True for a call that needs
            one (a policy that raises, or gets arguments it cannot read, means it does).
        approval_timeout_s: How long a gated call waits for a decision before it expires.

    Raises:
        ConfigurationError: two tools share a name, `limits.cost_budget_usd` is set for a
            model whose price is unknown, or `approval` names a tool the agent does not have.
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        tools: Sequence[Tool | BaseTool | ToolHandler] = (),
        name: str = "assistant",
        system_prompt: str | None = None,
        limits: LoopLimits = LoopLimits(),
        stream_tool_rounds: bool = True,
        provider: str | None = None,
        model_name: str | None = None,
        pricing: ModelPrices | None = None,
        retry: RetryPolicy = _NO_RETRIES,
        mcp_servers: Sequence[McpServer] = (),
        approval: Sequence[str] | ApprovalPolicy | None = None,
        approval_timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S,
    ) -> None:
        self.name = name
        self.model = model = prepared_model(
            model, has_stall_limit=limits.stream_stall_timeout_s is not None
        )
        # The provider is resolved here, once: it names and prices the calls, and it chooses the
        # words of the synthesis request's tool_choice.
        self.pricer = CallPricer.of(model, provider=provider, model=model_name, override=pricing)
        if limits.cost_budget_usd is not None and not self.pricer.is_priceable:
            raise ConfigurationError(
                f"agent.cost_budget_usd: agent {name!r} has a cost budget, but model "
                f"{self.pricer.model!r} of provider {self.pricer.provider!r} has no known price; "
                "set agent.pricing (input_per_mtok, output_per_mtok)"
            )
        self.system_prompt = system_prompt
        self.limits = limits
        self.stream_tool_rounds = stream_tool_rounds
        self.retry = retry
        self._toolset = ToolSet(
            model,
            tools,
            agent_name=name,
            provider=self.pricer.provider,
            mcp_servers=mcp_servers,
        )
        self._gate = ApprovalGate(
            approval,
            timeout_s=approval_timeout_s,
            tools=self._toolset.tools,
            agent_name=name,
            has_mcp_servers=bool(mcp_servers),
        )

    @property
    def tools(self) -> dict[str, Tool]:
        """The agent's tools by name: its own, then its MCP servers' (once connected)."""
        return self._toolset.tools

    async def open(self) -> None:
        """Connect the MCP servers and fetch their tools (also done by the first run).

        Raises:
            McpServerError: a server cannot be reached or does not offer an allowed tool.
            ConfigurationError: an MCP tool's name collides with another tool's.
        """
        await self._toolset.sync()

    @property
    def open_mcp_servers(self) -> tuple[str, ...]:
        """The names of the MCP servers connected (or connecting) now."""
        return self._toolset.open_mcp_servers

    async def aclose(self) -> None:
        """Close the MCP sessions (stdio servers are terminated); a later run reopens them."""
        await self._toolset.aclose()

    @classmethod
    def from_config(
        cls,
        config: LLMAgentConfig,
        *,
        model: BaseChatModel,
        tools: Sequence[Tool] | None = None,
        name: str = "assistant",
    ) -> LLMAgent:
        """Build the agent an actor config describes, around a ready chat model.

        `tools` are the config's tools already built (`tool_from_config`); built here if omitted.
        """
        return cls(
            model,
            tools=[tool_from_config(tool) for tool in config.tools] if tools is None else tools,
            name=name,
            system_prompt=config.system_prompt,
            limits=LoopLimits(
                max_tool_rounds=config.max_tool_rounds,
                token_budget=config.token_budget,
                tool_output_max_tokens=config.tool_output_max_tokens,
                cost_budget_usd=config.cost_budget_usd,
                stream_stall_timeout_s=config.stream_stall_timeout_s,
            ),
            stream_tool_rounds=config.stream_tool_rounds,
            provider=config.provider,
            model_name=config.model,
            pricing=config.pricing,
            retry=RetryPolicy(max_retries=config.max_retries, backoff_s=config.retry_backoff_s),
            mcp_servers=config.mcp_servers,
            approval_timeout_s=config.approval_timeout_s,
        )

    # -- public: both modes are this thin ------------------------------------------------------

    async def process_message(
        self,
        message: str,
        *,
        history: History | None = None,
        on_result: ResultCallback | None = None,
        on_call: CallRecorder | None = None,
    ) -> ExecutionResult:
        """Run a message to its answer, blocking.

        Raises:
            ConfigurationError: the message or history is malformed.
            Exception: whatever the model raised (e.g. langchain-core's `ModelError` family),
                unchanged, after the usage spent before it was recorded.
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
        """Run a message, streaming its events (text deltas as the provider sends them)."""

        def run(sink: EventSink) -> Awaitable[RunOutcome]:
            return self.run(message, history=history, sink=sink, streaming=True, on_call=on_call)

        return EventStream(run, on_result=on_result)

    async def run(
        self,
        message: str,
        *,
        history: History | None,
        sink: EventSink,
        streaming: bool,
        on_call: CallRecorder | None = None,
        run_id: str | None = None,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
    ) -> RunOutcome:
        """Run the message once as run `run_id`, its events into `sink`; never raises for a
        failed run (the outcome carries the result and the error). See `Agent.run`."""
        return await self._run(
            _NewMessage(message, history),
            sink,
            streaming=streaming,
            on_call=on_call,
            run_id=run_id,
            max_output_tokens=max_output_tokens,
            can_pause=can_pause,
        )

    def check_decisions(
        self, paused: PausedRun, decisions: Sequence[ApprovalDecision], *, now: datetime
    ) -> CheckedDecisions:
        """Check decisions on a run this agent paused against its tools (see `Agent`).

        Raises:
            ApprovalError: the subclass naming the decision that does not fit.
        """
        return check_decisions(paused, decisions, self.tools, now=now)

    async def resume(
        self,
        paused: PausedRun,
        checked: CheckedDecisions,
        *,
        sink: EventSink,
        streaming: bool,
        on_call: CallRecorder | None = None,
        run_id: str | None = None,
    ) -> RunOutcome:
        """Go on with a paused run as segment `run_id`, carrying out `checked` (see `Agent`)."""
        return await self._run(
            _Resumption(paused, checked),
            sink,
            streaming=streaming,
            on_call=on_call,
            run_id=run_id,
            max_output_tokens=paused.max_output_tokens,
            can_pause=True,
        )

    async def _run(
        self,
        start: _Start,
        sink: EventSink,
        *,
        streaming: bool,
        on_call: CallRecorder | None,
        run_id: str | None,
        max_output_tokens: int | None,
        can_pause: bool,
    ) -> RunOutcome:
        with run_scope(run_id) as scope:
            try:
                finished = await self._execute_tool_loop(
                    start,
                    sink,
                    streaming=streaming,
                    on_call=on_call,
                    run_id=scope.id,
                    max_output_tokens=max_output_tokens,
                    can_pause=can_pause,
                )
            except _ToolLoopError as failure:
                return RunOutcome(failure.result, failure.cause)
            return RunOutcome(finished.result, turn=finished.turn, pause=finished.paused)

    # -- the loop ------------------------------------------------------------------------------

    async def _execute_tool_loop(
        self,
        start: _Start,
        sink: EventSink,
        *,
        streaming: bool,
        on_call: CallRecorder | None,
        run_id: str,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
    ) -> _ToolLoopResult:
        bill = Bill(self.pricer, sink=sink, recorder=on_call)
        run = _Run(
            run_id=run_id,
            sink=sink,
            streaming=streaming,
            bill=bill,
            max_output_tokens=_output_cap(self.model, max_output_tokens),
            can_pause=can_pause,
        )
        try:
            step = self._first_step(run, start)
            while True:
                if step is None:
                    step = await self._round(run)
                match step:
                    case _Finish(message=answer):
                        return run.result(answer)
                    case _Synthesize(reason=reason):
                        return run.result(await self._synthesize(run, reason))
                    case _CallTools(reply=tool_reply, calls=calls):
                        batch = await self._run_tool_batch(run, tool_reply, calls)
                    case _ResumeBatch(paused=paused, checked=checked):
                        batch = await self._resume_batch(run, paused, checked)
                    case _:
                        assert_never(step)
                if batch.answer is not None:
                    return run.result(AIMessage(content=batch.answer))
                if batch.paused is not None:
                    return run.paused(batch.paused)
                if spent := self._budget_spent(run):
                    return run.result(await self._synthesize(run, spent))
                step = None
        except (Exception, asyncio.CancelledError) as exc:
            bill.bill_interrupted_call(exc)
            await bill.flush_calls_on_failure()
            raise run.error(exc) from exc

    def _first_step(self, run: _Run, start: _Start) -> _Step | None:
        """Where the run begins: the model is asked about the user's message (None), or a
        paused run's decisions are carried out."""
        if isinstance(start, _NewMessage):
            run.transcript = Transcript.of(
                start.message, start.history, system_prompt=self.system_prompt
            )
            return None
        paused = start.paused
        run.transcript = Transcript(
            paused.messages, user_message=paused.user_message, turn_start=paused.turn_start
        )
        run.round, run.tool_rounds = paused.round, paused.tool_rounds
        run.resumed_from = paused.run_id
        run.spent_tokens_before = paused.spent_tokens
        run.spent_cost_before = paused.spent_cost_usd
        return _ResumeBatch(paused, start.checked)

    async def _round(self, run: _Run) -> _Step:
        """Ask the model (with the tools bound) and decide what its reply asks for."""
        await self._toolset.sync()
        run.round += 1
        run.sink(RoundStarted(round=run.round))
        reply = await self._model_turn(
            run, "round", self._toolset.model_with_tools, may_call_tools=bool(self.tools)
        )
        return decide(
            reply, tool_rounds_done=run.tool_rounds, max_tool_rounds=self.limits.max_tool_rounds
        )

    # -- step 1 and 2: the model turn and its usage --------------------------------------------

    async def _model_turn(
        self,
        run: _Run,
        purpose: CallPurpose,
        model: Runnable[LanguageModelInput, Any],
        *,
        may_call_tools: bool,
        messages: Sequence[BaseMessage] | None = None,
    ) -> AIMessage:
        """Ask the model, retrying as `self.retry` allows; every attempt's usage is recorded."""
        sent = run.transcript.messages if messages is None else messages

        def attempt(number: int) -> Awaitable[AIMessage]:
            return self._model_attempt(
                run, purpose, model, sent, may_call_tools=may_call_tools, attempt=number
            )

        reply = await call_with_retries(run, self.retry, attempt)
        await run.bill.flush_calls()  # the ledger has the call before any tool of its round runs
        return reply

    async def _model_attempt(
        self,
        run: _Run,
        purpose: CallPurpose,
        model: Runnable[LanguageModelInput, Any],
        sent: Sequence[BaseMessage],
        *,
        may_call_tools: bool,
        attempt: int,
    ) -> AIMessage:
        """Ask the model once and record the usage. Streams when the run streams (text deltas
        as they come) and whenever `ainvoke` would stream anyway: then our own fold, not
        langchain-core's, makes the reply, so a cut-off is billed and broken tool arguments stay
        broken in both modes."""
        await run.pacing.checkpoint()
        if run.max_output_tokens is not None:
            model = model.bind(max_tokens=run.max_output_tokens)
        # A condensed tool output is for the model, never for the user's screen.
        shows_text = run.streaming and purpose != "pruning"
        streams_to_caller = shows_text and (self.stream_tool_rounds or not may_call_tools)
        streams = streams_to_caller or streams_inside_ainvoke(self.model, model)
        fold = ReplyFold() if streams else None
        run.bill.begin_call(
            InFlightCall(purpose, run.round, attempt, sent, fold, streams_text=streams_to_caller)
        )
        if fold is not None:
            reply = await self._stream_reply(model, sent, fold, run, shows_text=streams_to_caller)
        else:
            reply = _as_ai_message(await invoke_reply(model, sent))
        if streams_to_caller:
            run.shown.add(run.round, reply.text)  # its deltas are out already
        elif purpose != "pruning":
            run.show_text(reply.text)
        run.bill.record_reply(reply)
        await run.pacing.checkpoint()
        return reply

    async def _stream_reply(
        self,
        model: Runnable[LanguageModelInput, Any],
        messages: Sequence[BaseMessage],
        fold: ReplyFold,
        run: _Run,
        *,
        shows_text: bool,
    ) -> AIMessage:
        """Read the stream, a text delta per chunk, under the stall limit (one timer per call:
        a chunk only stamps the time the reader goes back to waiting)."""
        sink, round_number = run.sink, run.round
        limit_s = self.limits.stream_stall_timeout_s
        pacing = run.pacing
        watch = StallWatch(limit_s, is_paused=lambda: pacing.is_waiting_for_room)
        clock = watch.clock
        try:
            async for piece in stream_reply(model, messages):
                if (text := fold.add(piece)) and shows_text:
                    sink(TextDelta(round=round_number, text=text))
                await pacing.checkpoint()
                watch.waiting_since = clock()
        except asyncio.CancelledError as exc:
            if watch.close() and not pacing.is_stop_requested and limit_s is not None:
                raise StreamStalledError(
                    limit_s, model=self.pricer.model, chunks_received=fold.chunks_received
                ) from exc
            raise
        finally:
            watch.close()
        return fold.message()

    # -- step 4: tools -------------------------------------------------------------------------

    async def _run_tool_batch(
        self, run: _Run, reply: AIMessage, calls: Sequence[ToolCallRequest]
    ) -> _BatchOutcome:
        run.tool_rounds += 1
        run.transcript.append(reply)
        for call in calls:
            run.sink(
                ToolCallRequested(
                    round=run.round, call_id=call.call_id, name=call.name, arguments=call.arguments
                )
            )
        if len(calls) > 1:
            logger.info(
                "agent %s, run %s: %d tool calls in one reply: %s",
                self.name,
                current_run_id(),
                len(calls),
                ", ".join(call.name for call in calls),
            )
        gated = await self._gate.gated(calls, self.tools)
        answers: dict[str, ToolAnswer] = {}
        waiting: list[PendingApproval] = []
        for call in gated:
            if run.can_pause:
                waiting.append(self._pending(call))
            else:
                answers[call.call_id] = answer_for_person(
                    run, call, not_run(call.name, UNAVAILABLE)
                )
        gated_ids = {call.call_id for call in gated}
        ready = [call for call in calls if call.call_id not in gated_ids]
        return await self._answer_batch(run, calls, ready, answers, waiting=waiting)

    async def _resume_batch(
        self, run: _Run, paused: PausedRun, checked: CheckedDecisions
    ) -> _BatchOutcome:
        """Carry out the decisions on a paused batch: approved and edited calls run (in the
        model's order), the others are answered as the person (or the clock) decided; a call
        that ran before the pause never runs again."""
        await self._toolset.sync()  # another worker's first run: its MCP tools are not bound yet
        answers = {call.call_id: call.answer for call in paused.batch if call.answer is not None}
        ready: list[ToolCallRequest] = []
        edits: dict[str, Mapping[str, object]] = {}
        expired = {call.call_id for call in checked.expired}
        for pending in paused.pending:
            call = ToolCallRequest(pending.call_id, pending.name, pending.arguments)
            decision = checked.decided.get(pending.call_id)
            if decision is None:
                if pending.call_id in expired:
                    self._decided(run, pending, "expired", None)
                    answers[call.call_id] = answer_for_person(
                        run, call, expired_answer(pending, self._gate.timeout_s)
                    )
                continue
            self._decided(run, pending, decision.decision, decision.reason)
            match decision.decision:
                case "approve":
                    ready.append(call)
                case "edit":
                    arguments = dict(decision.arguments or {})
                    ready.append(ToolCallRequest(call.call_id, call.name, arguments))
                    edits[call.call_id] = arguments
                case "reject":
                    answers[call.call_id] = answer_for_person(
                        run, call, declined(call.name, decision.reason)
                    )
                case "respond":
                    answers[call.call_id] = answer_for_person(
                        run, call, ToolAnswer(decision.output or "")
                    )
        calls = [ToolCallRequest(call.call_id, call.name, call.arguments) for call in paused.batch]
        return await self._answer_batch(
            run, calls, ready, answers, waiting=list(checked.waiting), edits=edits
        )

    async def _answer_batch(
        self,
        run: _Run,
        calls: Sequence[ToolCallRequest],
        ready: Sequence[ToolCallRequest],
        answers: dict[str, ToolAnswer],
        *,
        waiting: Sequence[PendingApproval],
        edits: Mapping[str, Mapping[str, object]] | None = None,
    ) -> _BatchOutcome:
        """Run the `ready` calls and answer the batch: in full, in the model's order, when no
        call waits for a person; otherwise the run pauses with what it has."""
        dispatched = await self._toolset.dispatcher.dispatch(run, ready)
        for call, outcome in dispatched.ran:
            output = await self._prune(run, call, outcome)
            if edits and (arguments := edits.get(call.call_id)) is not None:
                output = edited(arguments, output)
            answers[call.call_id] = answer_call(run, call, outcome, output)
        if dispatched.ender is not None:
            ender_call, ender_outcome = dispatched.ender
            for call in calls:
                if call.call_id not in answers:
                    answers[call.call_id] = skip_call(
                        run, call, ended_by=ender_call, agent_name=self.name
                    )
            append_answers(run, calls, answers)
            run.show_text(ender_outcome.output)
            return _BatchOutcome(answer=ender_outcome.output)
        if waiting:
            return _BatchOutcome(paused=self._pause(run, calls, answers, waiting))
        append_answers(run, calls, answers)
        return _BatchOutcome()

    def _pending(self, call: ToolCallRequest) -> PendingApproval:
        now = datetime.now(UTC)
        return PendingApproval(
            call_id=call.call_id,
            name=call.name,
            arguments=call.arguments,
            digest=call_digest(call.name, call.arguments),
            requested_at=now,
            expires_at=now + timedelta(seconds=self._gate.timeout_s),
        )

    def _pause(
        self,
        run: _Run,
        calls: Sequence[ToolCallRequest],
        answers: Mapping[str, ToolAnswer],
        waiting: Sequence[PendingApproval],
    ) -> PausedRun:
        """What a later segment needs to go on: the transcript (the batch's reply last), the
        answers so far, the calls that wait. Each waiting call is announced."""
        for pending in waiting:
            run.sink(
                ToolApprovalRequested(
                    round=run.round,
                    call_id=pending.call_id,
                    name=pending.name,
                    arguments=pending.arguments,
                    digest=pending.digest,
                    expires_at=pending.expires_at,
                )
            )
        logger.info(
            "agent %s, run %s: paused for approval of %s",
            self.name,
            current_run_id(),
            ", ".join(f"{pending.name} (call {pending.call_id})" for pending in waiting),
        )
        transcript = run.transcript
        return PausedRun(
            run_id=run.run_id,
            messages=tuple(transcript.messages),
            turn_start=transcript.turn_start,
            user_message=transcript.user_message,
            round=run.round,
            tool_rounds=run.tool_rounds,
            batch=tuple(
                BatchCall(call.call_id, call.name, call.arguments, answers.get(call.call_id))
                for call in calls
            ),
            pending=tuple(waiting),
            spent_tokens=run.spent_tokens,
            spent_cost_usd=run.spent_cost_usd,
            max_output_tokens=run.max_output_tokens,
        )

    @staticmethod
    def _decided(
        run: _Run, pending: PendingApproval, decision: RecordedDecision, reason: str | None
    ) -> None:
        run.sink(
            ToolCallDecided(
                round=run.round,
                call_id=pending.call_id,
                name=pending.name,
                decision=decision,
                reason=reason,
            )
        )

    async def _prune(self, run: _Run, call: ToolCallRequest, outcome: ToolOutcome) -> str:
        """The output the model will read: condensed by one LLM call when it is over the limit,
        truncated with a visible marker when that call fails."""
        limit = self.limits.tool_output_max_tokens
        if limit is None or outcome.error is not None:
            return outcome.output
        size = count_tokens(outcome.output)
        if size <= limit:
            return outcome.output
        prompt = _CONDENSE_PROMPT.format(
            tool=call.name, message=run.transcript.user_message, output=outcome.output
        )
        try:
            condensed = await self._model_turn(
                run, "pruning", self.model, may_call_tools=False, messages=[HumanMessage(prompt)]
            )
        except StoreError:
            raise  # the ledger failed, not the condensing: the run must fail, loudly
        except Exception as exc:  # a failed condensing call must not cost the turn its answer
            run.bill.bill_interrupted_call(exc)
            await run.bill.flush_calls()
            logger.warning(
                "agent %s, run %s: condensing output of %s (call %s) failed (%s); truncating",
                self.name,
                current_run_id(),
                call.name,
                call.call_id,
                exc,
            )
            run.sink(
                OutputPruned(
                    call_id=call.call_id, name=call.name, method="truncated", original_tokens=size
                )
            )
            return _truncate(outcome.output, limit, size)
        run.sink(
            OutputPruned(
                call_id=call.call_id, name=call.name, method="condensed", original_tokens=size
            )
        )
        return condensed.text

    # -- step 5: limits ------------------------------------------------------------------------

    def _budget_spent(self, run: _Run) -> SynthesisReason | None:
        """Which budget, if any, the calls so far have reached."""
        tokens, cost = self.limits.token_budget, self.limits.cost_budget_usd
        if tokens is not None and run.spent_tokens >= tokens:
            return "budget"
        if cost is not None and run.spent_cost_usd >= cost:
            return "cost_budget"
        return None

    async def _synthesize(self, run: _Run, reason: SynthesisReason) -> AIMessage:
        """Ask for an answer from what the transcript holds. The tools stay declared when it
        holds tool calls (providers reject tool blocks without them), with calling forbidden; a
        call the model makes anyway is not run."""
        run.synthesis_reason = reason
        run.sink(SynthesisStarted(reason=reason))
        transcript = run.transcript
        prompt = _SYNTHESIS_PROMPT.format(
            why=_SYNTHESIS_WHY[reason], message=transcript.user_message
        )
        messages = [*transcript.messages, HumanMessage(prompt)]
        declares_tools = bool(self.tools) and transcript.holds_tool_calls
        model = self._toolset.model_declaring_tools if declares_tools else self.model
        reply = await self._model_turn(
            run, "synthesis", model, may_call_tools=False, messages=messages
        )
        return self._ignore_tool_calls(run, reply)

    def _ignore_tool_calls(self, run: _Run, reply: AIMessage) -> AIMessage:
        ignored = tuple(call.name for call in tool_call_requests(reply))
        if not ignored:
            return reply
        run.synthesis_ignored_tool_calls = ignored
        logger.warning(
            "agent %s, run %s: the synthesis reply called %s though tools were forbidden; not run",
            self.name,
            current_run_id(),
            ", ".join(ignored),
        )
        if reply.text.strip():
            return AIMessage(content=reply.text)
        run.show_text(SYNTHESIS_WITHOUT_ANSWER)
        return AIMessage(content=SYNTHESIS_WITHOUT_ANSWER)


def _output_cap(model: BaseChatModel, requested: int | None) -> int | None:
    """A run's cap on each call's output: the one requested, but never above the model's own
    `max_tokens` (the operator's limit holds). `max_tokens` is LangChain's common name for it:
    ChatOpenAI sends it as `max_completion_tokens`, ChatAnthropic as `max_tokens`."""
    if requested is None:
        return None
    own = getattr(model, "max_tokens", None)
    return min(requested, own) if isinstance(own, int) and own > 0 else requested


def _as_ai_message(reply: object) -> AIMessage:
    if isinstance(reply, AIMessage):
        return reply
    raise TypeError(f"chat model returned {type(reply).__name__}, not an AIMessage")


def _truncate(output: str, limit: int, size: int) -> str:
    kept = output[: max(1, len(output) * limit // size)]
    return f"{kept}\n[cleveractors: output truncated from {size} to about {limit} tokens]"
