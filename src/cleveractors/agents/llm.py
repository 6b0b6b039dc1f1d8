"""`LLMAgent`: a chat model plus tools, run by one tool loop for both blocking and streaming.

`process_message` and `stream_message` (`Agent`'s, made of `run`) are thin: both come to
`_execute_tool_loop`, which reads as the five steps of a round (model turn, usage, decide, tools,
limits). Every failure inside it is converted once into `_ToolLoopError`, carrying what was
spent; `run` makes it the outcome, and the public methods record that usage and re-raise the
original exception. A batch of tool calls, and the pause for a person's approval, are
`ToolBatches`' (`agents._approval`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal, assert_never

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from cleveractors._langchain_private import invoke_reply, stream_reply, streams_inside_ainvoke
from cleveractors.agents._approval import ApprovalGate, ApprovalPolicy, ToolBatches
from cleveractors.agents._bill import Bill, InFlightCall
from cleveractors.agents._checks import check_chat_model
from cleveractors.agents._decisions import check_decisions
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
    _TypedAnswer,
    decide,
    tool_call_requests,
)
from cleveractors.agents._model import prepared_model
from cleveractors.agents._output import PartialOutputs, TypedAnswers
from cleveractors.agents._retry import RetryPolicy, call_with_retries
from cleveractors.agents._toolset import ToolSet, is_declared_gated, run_batch
from cleveractors.agents.base import Agent, History, discard_event
from cleveractors.agents.fold import ReplyFold
from cleveractors.agents.stream import StallWatch
from cleveractors.agents.tool import ToolCallRequest, ToolOutcome
from cleveractors.approvals import (
    DEFAULT_APPROVAL_TIMEOUT_S,
    ApprovalDecision,
    CheckedDecisions,
    PausedRun,
)
from cleveractors.config import LLMAgentConfig, McpServer
from cleveractors.errors import ConfigurationError, StoreError, StreamStalledError
from cleveractors.events import OutputPruned, RoundStarted, SynthesisStarted, TextDelta
from cleveractors.output import OutputMode, OutputValidator
from cleveractors.pricing import CallPricer, ModelPrices
from cleveractors.result import (
    SYNTHESIS_WITHOUT_ANSWER,
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
_KEPT_SCHEMAS = 64
"""Output schemas of runs (requests' `response_format`) whose checked form an agent keeps."""
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
        output_type: The type of the answer (a pydantic model, a dataclass, a `TypedDict` or a
            scalar type): `ExecutionResult.output` is then a validated instance of it
            (`docs/output.md`).
        output_schema: A JSON Schema for the answer instead of a type: `output` is the parsed JSON.
        output_mode: How the model is asked for the typed answer (`cleveractors.output`).
        output_retries: How many times an answer that fails validation is sent back.
        output_validators: Functions (sync or async) taking the object, returning it (or None
            to keep it), or raising `ModelRetry` to ask the model again.

    Raises:
        ConfigurationError: two tools share a name, `limits.cost_budget_usd` is set for a
            model whose price is unknown, `approval` names a tool the agent does not have, or
            the output type or schema cannot be used.
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
        output_type: object | None = None,
        output_schema: Mapping[str, Any] | None = None,
        output_mode: OutputMode = "auto",
        output_retries: int = 1,
        output_validators: Sequence[OutputValidator] = (),
    ) -> None:
        check_chat_model(model, agent_name=name)
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
        self._gate = gate = ApprovalGate(
            approval,
            timeout_s=approval_timeout_s,
            tools=self._toolset.tools,
            agent_name=name,
            has_mcp_servers=bool(mcp_servers),
        )
        self._batches = ToolBatches(self._toolset, gate, prune=self._prune, agent_name=name)
        self._output_mode, self._output_retries = output_mode, output_retries
        self._typed_by_schema: dict[str, TypedAnswers | None] = {}
        """The typed answers of the latest runs' own schemas, by the schema's JSON."""
        self._typed = TypedAnswers.of(
            model,
            output_type=output_type,
            output_schema=output_schema,
            mode=output_mode,
            retries=output_retries,
            validators=output_validators,
            agent_name=name,
        )

    @property
    def answer_shape(self) -> Literal["text", "object", "wrapped"]:
        """How the agent answers: in text; with a typed object, as its JSON (`object`); or with
        a typed value that is no JSON object (a scalar, a list), which the model sends as
        `{"response": <value>}` (`wrapped`)."""
        if self._typed is None:
            return "text"
        return "wrapped" if self._typed.is_wrapped else "object"

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
            output_schema=config.output_schema,
            output_mode=config.output_mode,
            output_retries=config.output_retries,
        )

    # -- public: the one run both modes are made of ------------------------------------------

    async def run(
        self,
        start: str | CheckedDecisions,
        *,
        history: History | None,
        sink: EventSink,
        streaming: bool,
        on_call: CallRecorder | None = None,
        run_id: str | None = None,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
        output_schema: Mapping[str, Any] | None = None,
    ) -> RunOutcome:
        """Run the message (or carry out the checked decisions on a paused run) once as run
        `run_id`, its events into `sink`; never raises for a failed run (the outcome carries the
        result and the error). See `Agent.run`. `process_message` and `stream_message` are made
        of it, and so is every run of an executor."""
        with run_scope(run_id) as scope:
            try:
                finished = await self._execute_tool_loop(
                    start,
                    history,
                    sink,
                    streaming=streaming,
                    on_call=on_call,
                    run_id=scope.id,
                    max_output_tokens=max_output_tokens,
                    can_pause=can_pause,
                    output_schema=output_schema,
                )
            except _ToolLoopError as failure:
                return RunOutcome(failure.result, failure.cause, failure.turn)
            return RunOutcome(finished.result, turn=finished.turn, pause=finished.paused)

    def check_decisions(
        self, paused: PausedRun, decisions: Sequence[ApprovalDecision], *, now: datetime
    ) -> CheckedDecisions:
        """Check decisions on a run this agent paused against its tools (see `Agent`).

        Raises:
            ApprovalError: the subclass naming the decision that does not fit.
        """
        return check_decisions(paused, decisions, self.tools, now=now)

    # -- the loop ------------------------------------------------------------------------------

    async def _execute_tool_loop(
        self,
        start: str | CheckedDecisions,
        history: History | None,
        sink: EventSink,
        *,
        streaming: bool,
        on_call: CallRecorder | None,
        run_id: str,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
        output_schema: Mapping[str, Any] | None = None,
    ) -> _ToolLoopResult:
        bill = Bill(self.pricer, sink=sink, recorder=on_call)
        typed = self._typed if output_schema is None else self._typed_by(output_schema)
        partials = None
        if typed is not None and streaming and sink is not discard_event:
            sink = partials = PartialOutputs(
                sink, is_wrapped=typed.is_wrapped, reads_calls=typed.mode == "tool"
            )
        run = _Run(
            run_id=run_id,
            sink=sink,
            streaming=streaming,
            bill=bill,
            max_output_tokens=_output_cap(self.model, max_output_tokens),
            can_pause=can_pause,
            typed=typed,
            partials=partials,
        )
        try:
            step = self._first_step(run, start, history)
            while True:
                if step is None:
                    step = await self._round(run)
                match step:
                    case _Finish(message=answer):
                        return run.result(answer)
                    case _Synthesize(reason=reason):
                        return run.result(await self._synthesize(run, reason))
                    case _TypedAnswer(reply=reply):
                        return run.result(await self._settle(run, reply))
                    case _CallTools(reply=tool_reply, calls=calls) if self._may_wait(calls):
                        batch = await self._batches.run(run, tool_reply, calls)
                    case _CallTools(reply=tool_reply, calls=calls):
                        batch = await run_batch(
                            run,
                            tool_reply,
                            calls,
                            toolset=self._toolset,
                            prune=self._prune,
                            agent_name=self.name,
                        )
                    case _ResumeBatch(checked=checked):
                        batch = await self._batches.resume(run, checked)
                    case _:
                        assert_never(step)
                if batch.answer is not None:
                    return run.result(await self._settle(run, AIMessage(content=batch.answer)))
                if batch.paused is not None:
                    return run.paused(batch.paused)
                if spent := self._budget_spent(run):
                    return run.result(await self._synthesize(run, spent))
                step = None
        except (Exception, asyncio.CancelledError) as exc:
            bill.bill_interrupted_call(exc)
            await bill.flush_calls_on_failure()
            raise run.error(exc) from exc

    def _typed_by(self, output_schema: Mapping[str, Any]) -> TypedAnswers | None:
        """A run's own output schema (a request's `response_format`), in the agent's mode; the
        latest ones kept, since checking a schema costs milliseconds and clients repeat theirs."""
        key = json.dumps(output_schema, sort_keys=True)
        cached = self._typed_by_schema.pop(key, None)
        if cached is None:
            cached = TypedAnswers.of(
                self.model,
                output_type=None,
                output_schema=output_schema,
                mode=self._output_mode,
                retries=self._output_retries,
                validators=(),
                agent_name=self.name,
            )
        self._typed_by_schema[key] = cached  # the most recently used last
        if len(self._typed_by_schema) > _KEPT_SCHEMAS:
            del self._typed_by_schema[next(iter(self._typed_by_schema))]
        return cached

    def _may_wait(self, calls: Sequence[ToolCallRequest]) -> bool:
        """Whether a call of the batch may wait for a person: else the batch simply runs,
        without the approval gate."""
        tools = self._toolset.tools
        return self._gate.has_rules or any(
            is_declared_gated(tools.get(call.name)) for call in calls
        )

    def _first_step(
        self, run: _Run, start: str | CheckedDecisions, history: History | None
    ) -> _Step | None:
        """Where the run begins: the model is asked about the user's message (None), or a
        paused run's decisions are carried out."""
        if not isinstance(start, CheckedDecisions):
            system_prompt = self.system_prompt
            if run.typed is not None:
                system_prompt = run.typed.system_prompt(system_prompt)
            run.transcript = Transcript.of(start, history, system_prompt=system_prompt)
            return None
        paused = start.paused
        run.transcript = Transcript(
            paused.messages, user_message=paused.user_message, turn_start=paused.turn_start
        )
        run.round, run.tool_rounds = paused.round, paused.tool_rounds
        run.resumed_from = paused.run_id
        run.spent_tokens_before = paused.spent_tokens
        run.spent_cost_before = paused.spent_cost_usd
        return _ResumeBatch(paused, start)

    async def _round(self, run: _Run) -> _Step:
        """Ask the model (with the tools bound) and decide what its reply asks for."""
        await self._toolset.sync()
        run.round += 1
        if run.listens:
            run.sink(RoundStarted(round=run.round))
        typed, model = run.typed, self._toolset.model_with_tools
        if typed is not None:
            model = typed.round_model(self.model, self.tools, model)
        reply = await self._model_turn(
            run,
            "round",
            model,
            may_call_tools=bool(self.tools) or (typed is not None and typed.mode == "tool"),
        )
        return decide(
            reply,
            tool_rounds_done=run.tool_rounds,
            max_tool_rounds=self.limits.max_tool_rounds,
            is_typed=typed is not None,
            output_tool=None if typed is None else typed.output_tool,
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
        partials = run.partials if shows_text else None
        try:
            async for piece in stream_reply(model, messages):
                if (text := fold.add(piece)) and shows_text:
                    sink(TextDelta(round=round_number, text=text))
                if partials is not None:
                    partials.add_calls(piece, round_number)
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
        if (typed := run.typed) is not None:
            # Kept in the transcript: a retry of the typed answer reads what was asked.
            transcript.append(HumanMessage(prompt))
            reply = await self._model_turn(
                run, "synthesis", self._final_model(run, typed), may_call_tools=False
            )
            return await self._settle(run, reply)
        messages = [*transcript.messages, HumanMessage(prompt)]
        declares_tools = bool(self.tools) and transcript.holds_tool_calls
        model = self._toolset.model_declaring_tools if declares_tools else self.model
        reply = await self._model_turn(
            run, "synthesis", model, may_call_tools=False, messages=messages
        )
        return self._ignore_tool_calls(run, reply)

    def _final_model(self, run: _Run, typed: TypedAnswers) -> Runnable[LanguageModelInput, Any]:
        """A typed agent's last request (a synthesis, a retry): the typed answer, no tool."""
        declares_tools = bool(self.tools) and run.transcript.holds_tool_calls
        declaring = self._toolset.model_declaring_tools if declares_tools else self.model
        return typed.final_model(self.model, self.tools, declaring)

    async def _settle(self, run: _Run, reply: AIMessage) -> AIMessage:
        """The answer: the reply itself, or, for a typed agent, its checked typed answer (asked
        again, each retry billed as `output_retry`, while it fails and retries are left)."""
        typed = run.typed
        if typed is None:
            return reply

        def ask_again() -> Awaitable[AIMessage]:
            return self._model_turn(
                run, "output_retry", self._final_model(run, typed), may_call_tools=False
            )

        answer, run.output = await typed.settle(
            reply,
            ask_again=ask_again,
            remember=run.transcript.append,
            show_text=run.show_text,
            spent=lambda: run.bill.ledger.calls,
            partials=run.partials,
        )
        return answer

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
