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
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from functools import partial
from typing import Any, Literal, assert_never

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from cleveractors._compacted import SizedHistory
from cleveractors._langchain_private import invoke_reply, stream_reply, streams_inside_ainvoke
from cleveractors.agents._approval import ApprovalGate, ApprovalPolicy, ToolBatches
from cleveractors.agents._bill import Bill, CallOwner, InFlightCall, call_reservation
from cleveractors.agents._compaction import (
    COMPACT_TO_SHARE,
    CompactionReason,
    compact,
    is_context_overflow,
    summary_prompt,
)
from cleveractors.agents._context_window import (
    ContextView,
    budget_of,
    tool_schema_tokens,
    window_of,
)
from cleveractors.agents._decisions import check_decisions
from cleveractors.agents._delegate import (
    agent_tool,
    check_children,
    close_called_agents,
    enter_run,
    is_agent_tool,
    leave_run,
    lineage_of,
)
from cleveractors.agents._fallback import (
    Binding,
    FallbackModel,
    ModelChain,
    ModelChoice,
    call_with_fallbacks,
)
from cleveractors.agents._guardrails import Guardrails
from cleveractors.agents._handoff import Handoffs, hand_over, handoff_tool_name
from cleveractors.agents._lineage import DEFAULT_MAX_AGENT_DEPTH
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
from cleveractors.agents._output import PartialOutputs, TypedAnswers
from cleveractors.agents._retry import RetryPolicy
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
from cleveractors.config import (
    AgentToolConfig,
    FallbackPolicy,
    LLMAgentConfig,
    McpServer,
    PromptCacheMode,
    PromptCacheTTL,
    ToolConfig,
)
from cleveractors.context import RunContext
from cleveractors.errors import (
    ConfigurationError,
    ContextWindowExceededError,
    SpendLimitExceeded,
    StoreError,
    StreamStalledError,
)
from cleveractors.events import OutputPruned, RoundStarted, SynthesisStarted, TextDelta
from cleveractors.guardrails import GuardrailCheck, InputGuardrail, OutputGuardrail
from cleveractors.output import OutputMode, OutputValidator
from cleveractors.pricing import ModelPrices
from cleveractors.result import (
    SYNTHESIS_WITHOUT_ANSWER,
    RunOutcome,
    SynthesisReason,
)
from cleveractors.runs import current_run_id, run_scope
from cleveractors.tokens import count_message_tokens, count_tokens
from cleveractors.tools import Tool, ToolHandler, tool_from_config
from cleveractors.usage import CallPurpose, CallRecorder

__all__ = ["FallbackModel", "LLMAgent", "LoopLimits", "RetryPolicy"]

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
    "spend_limit": "the spend limit leaves no room for more tool rounds",
}
_KEPT_SCHEMAS = 64
"""Output schemas of runs (requests' `response_format`) whose checked form an agent keeps."""
_Shape = Callable[
    [BaseChatModel, Runnable[LanguageModelInput, Any]], Runnable[LanguageModelInput, Any]
]
"""How a typed answer's request is made of the model and its tools as bound (`TypedAnswers`)."""
_NO_RETRIES = RetryPolicy()
_FALLBACK_POLICY = FallbackPolicy()
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
    max_agent_depth: int = DEFAULT_MAX_AGENT_DEPTH
    """How deep agents called as tools may nest under this agent's run (its own run is at
    depth 0); a call deeper is refused with an error its model reads."""
    stream_stall_timeout_s: float | None = 120.0
    """A streamed model call that sends no chunk for this long (from the request to its first
    chunk, then between chunks; waiting for a slow consumer does not count) is ended with
    `StreamStalledError`. The loop's own limit replaces the client's per-chunk timeout
    (`ChatOpenAI(stream_chunk_timeout=...)` is turned off); None leaves the client's in charge."""
    context_window: int | None = None
    """The model's input limit in tokens; None reads the model's LangChain profile
    (`max_input_tokens`). Unknown for both: the prompt is sent as it is (a provider that refuses
    it as too long still gets one compaction and one retry)."""
    context_budget: int | None = None
    """Compact before a call whose prompt would pass this; default 75% of the window."""

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
        prompt_cache: `auto` places prompt-cache breakpoints (Anthropic) or sends a
            `prompt_cache_key` (OpenAI), see docs/caching.md; `off` sends neither.
        prompt_cache_ttl: The lifetime of Anthropic's breakpoints, `5m` or `1h`.
        approval: Which tool calls wait for a person (`cleveractors.approvals`), on top of the
            tools declared `needs_approval`: tool names, or a policy callable
            `(ToolCallRequest) -> bool | Awaitable[bool]` returning True for a call that needs
            one (a policy that raises, or gets arguments it cannot read, means it does).
        approval_timeout_s: How long a gated call waits for a decision before it expires.
        compaction_model: The model that summarises the oldest turns when the conversation
            outgrows its context budget; the agent's own model when omitted.
        fallback_models: Models that take over, in order, when the model fails: chat models,
            or `FallbackModel`s naming their provider, prices or retries. See `fallback`.
        fallback: When the fallback models take over (at once on the errors it lists as
            immediate, else once a model's retries are spent) and whether a session stays on
            the model that answered (`sticky="session"`).
        handoffs: Agents the model may hand the conversation to, each offered as a tool
            `transfer_to_<name>`; `add_handoff()` adds one later (an agent that hands back).
        input_guardrails: Checks of the user's message before (or beside) the first model call:
            `InputGuardrail`s, or bare check functions. See `cleveractors.guardrails`.
        output_guardrails: Checks of the final answer: `OutputGuardrail`s, or bare check
            functions. A tripped guardrail ends the run with `GuardrailTripped`.
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
            model whose price is unknown, `approval` names a tool the agent does not have,
            a handoff goes to the agent itself or to two agents of one name, the output
            type or schema cannot be used, or two guardrails of one stage share a name.
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
        compaction_model: BaseChatModel | None = None,
        fallback_models: Sequence[BaseChatModel | FallbackModel] = (),
        fallback: FallbackPolicy = _FALLBACK_POLICY,
        prompt_cache: PromptCacheMode = "auto",
        prompt_cache_ttl: PromptCacheTTL = "5m",
        handoffs: Sequence[LLMAgent] = (),
        input_guardrails: Sequence[InputGuardrail | GuardrailCheck] = (),
        output_guardrails: Sequence[OutputGuardrail | GuardrailCheck] = (),
        output_type: object | None = None,
        output_schema: Mapping[str, Any] | None = None,
        output_mode: OutputMode = "auto",
        output_retries: int = 1,
        output_validators: Sequence[OutputValidator] = (),
    ) -> None:
        self.name = name
        self._guardrails = Guardrails(input_guardrails, output_guardrails, agent_name=name)
        # Each model's provider is resolved here, once: it names and prices the calls, and it
        # chooses the words of the synthesis request's tool_choice.
        self._models = ModelChain.of(
            [FallbackModel(model, provider, model_name, pricing), *fallback_models],
            fallback,
            agent_name=name,
            retry=retry,
            has_stall_limit=limits.stream_stall_timeout_s is not None,
            needs_price=limits.cost_budget_usd is not None,
            prompt_cache=prompt_cache,
            prompt_cache_ttl=prompt_cache_ttl,
        )
        own = self._models.choices[0]
        self.model, self.pricer = own.model, own.pricer
        caching = own.caching
        self.system_prompt = system_prompt
        self.limits = limits
        self.context_window = window = window_of(model, limits.context_window)
        self.context_budget = budget_of(window, limits.context_budget)
        self._compaction_models = (
            self._models
            if compaction_model is None
            else ModelChain.of(
                [compaction_model],
                FallbackPolicy(),
                agent_name=name,
                retry=retry,
                has_stall_limit=limits.stream_stall_timeout_s is not None,
                needs_price=False,
            )
        )
        """The models that summarise old turns: the agent's own (with its fallbacks), unless
        a `compaction_model` is given."""
        self._declared: tuple[tuple[str, ...], int] = ((), 0)
        """The tool names last declared, and what their declarations add to a request."""
        self.stream_tool_rounds = stream_tool_rounds
        self.retry = retry
        self.handoffs: Handoffs[LLMAgent] = Handoffs(name)
        """The agents this one may hand the conversation to."""
        self._toolset = ToolSet(
            self.model,
            [*tools, *(self.handoffs.add(target) for target in handoffs)],
            agent_name=name,
            provider=self.pricer.provider,
            mcp_servers=mcp_servers,
            tool_schemas=caching.tool_schemas,
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

    def add_handoff(self, target: LLMAgent, *, description: str | None = None) -> None:
        """Let the model hand the conversation to `target` (a tool `transfer_to_<name>`, whose
        description ends with `description`): the rest of the run, and a stored session's
        later turns, run on `target` until it hands the conversation on. Two agents may hand
        back to each other.

        Raises:
            ConfigurationError: `target` is this agent, or has the name of a target offered
                already, or its tool's name is taken by another tool.
        """
        name = handoff_tool_name(target.name)
        if name in self.tools:
            raise ConfigurationError(f"agent {self.name!r}: two tools are named {name!r}")
        self._toolset.add(self.handoffs.add(target, description=description))

    def handoff_agent(self, name: str) -> LLMAgent | None:
        """The agent named `name` among those the conversation can reach from this one by
        handoffs (this one included), or None."""
        return next((agent for agent in self._reachable() if agent.name == name), None)

    def _reachable(self) -> Iterator[LLMAgent]:
        """This agent, then every agent its handoffs reach, each once."""
        seen: set[str] = set()
        waiting: list[LLMAgent] = [self]
        while waiting:
            agent = waiting.pop(0)
            if agent.name not in seen:
                seen.add(agent.name)
                yield agent
                waiting.extend(agent.handoffs.agents)

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
        for agent in self._reachable():  # the agents of its handoffs too
            await agent._toolset.sync()

    @property
    def open_mcp_servers(self) -> tuple[str, ...]:
        """The names of the MCP servers connected (or connecting) now, its handoffs' too."""
        return tuple(
            name for agent in self._reachable() for name in agent._toolset.open_mcp_servers
        )

    async def aclose(self) -> None:
        """Close the MCP sessions (stdio servers are terminated), its handoffs' agents' and
        the agents' it calls as tools too; a later run reopens them."""
        for agent in self._reachable():
            await agent._toolset.aclose()
            await close_called_agents(agent._toolset.tools.values())

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a tool another agent's model can call with a `message`: the call runs
        this agent's whole turn, as a child run of the caller's (its own run id, its tokens in
        the caller's totals, its events inside the caller's), and its answer is the output.

        Args:
            name: The tool's name; the agent's name when omitted.
            description: What the calling model reads about the tool.

        Raises:
            ConfigurationError: the name is not a valid tool name.
        """
        return agent_tool(self, name=name, description=description)

    @classmethod
    def from_config(
        cls,
        config: LLMAgentConfig,
        *,
        model: BaseChatModel,
        tools: Sequence[Tool] | None = None,
        name: str = "assistant",
        fallback_models: Sequence[BaseChatModel] = (),
        input_guardrails: Sequence[InputGuardrail] = (),
        output_guardrails: Sequence[OutputGuardrail] = (),
        compaction_model: BaseChatModel | None = None,
    ) -> LLMAgent:
        """Build the agent an actor config describes, around a ready chat model.

        `tools` are the config's tools already built (`tool_from_config`); built here if omitted.
        `fallback_models` are the chat models of `config.fallback_models`, in order;
        `compaction_model` is the chat model of the config's `compaction_model`, if it names one;
        the guardrails are those of `config.input_guardrails` and `config.output_guardrails`.
        """
        if tools is None:
            tools = [_built(tool) for tool in config.tools]
        return cls(
            model,
            tools=tools,
            name=name,
            system_prompt=config.system_prompt,
            limits=LoopLimits(
                max_tool_rounds=config.max_tool_rounds,
                token_budget=config.token_budget,
                tool_output_max_tokens=config.tool_output_max_tokens,
                cost_budget_usd=config.cost_budget_usd,
                stream_stall_timeout_s=config.stream_stall_timeout_s,
                max_agent_depth=config.max_agent_depth,
                context_window=config.context_window,
                context_budget=config.context_budget,
            ),
            stream_tool_rounds=config.stream_tool_rounds,
            provider=config.provider,
            model_name=config.model,
            pricing=config.pricing,
            retry=RetryPolicy(max_retries=config.max_retries, backoff_s=config.retry_backoff_s),
            mcp_servers=config.mcp_servers,
            approval_timeout_s=config.approval_timeout_s,
            compaction_model=compaction_model,
            fallback_models=[
                FallbackModel(
                    chat_model,
                    provider=entry.provider,
                    model_name=entry.model,
                    pricing=entry.pricing,
                    retry=RetryPolicy(
                        max_retries=config.max_retries
                        if entry.max_retries is None
                        else entry.max_retries,
                        backoff_s=config.retry_backoff_s,
                    ),
                )
                for entry, chat_model in zip(config.fallback_models, fallback_models, strict=True)
            ],
            fallback=config.fallback,
            prompt_cache=config.prompt_cache,
            prompt_cache_ttl=config.prompt_cache_ttl,
            output_schema=config.output_schema,
            output_mode=config.output_mode,
            output_retries=config.output_retries,
            input_guardrails=input_guardrails,
            output_guardrails=output_guardrails,
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
        context: RunContext[Any] | None = None,
        session_id: str | None = None,
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
                    context=context
                    or RunContext(
                        run_id=scope.id, actor=self.name, deps=None, session_id=session_id
                    ),
                    session_id=session_id,
                    output_schema=output_schema,
                )
            except _ToolLoopError as failure:
                return RunOutcome(failure.result, failure.cause, failure.turn)
            return RunOutcome(
                finished.result,
                turn=finished.turn,
                pause=finished.paused,
                compacted=finished.compacted,
            )

    def check_decisions(
        self, paused: PausedRun, decisions: Sequence[ApprovalDecision], *, now: datetime
    ) -> CheckedDecisions:
        """Check decisions on a run this agent paused against its tools (see `Agent`).

        Raises:
            ApprovalError: the subclass naming the decision that does not fit.
        """
        paused_on = self.handoff_agent(paused.agent) if paused.agent is not None else None
        tools = (paused_on or self).tools  # a run paused after a handoff waits on its target
        return check_decisions(
            paused, decisions, tools, now=now, check_child=check_children(paused, tools, now=now)
        )

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
        context: RunContext[Any],
        session_id: str | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> _ToolLoopResult:
        guards = self._guardrails.for_run(sink)
        sink = guards.sink  # holds the answer's text while an output guardrail says so
        limits = self.limits
        lineage, parent = lineage_of(
            run_id,
            agent_name=self.name,
            recorder=on_call,
            max_depth=limits.max_agent_depth,
            token_budget=limits.token_budget,
            cost_budget_usd=limits.cost_budget_usd,
        )
        bill = Bill(
            self.pricer,
            sink=sink,
            recorder=on_call,
            # A root run's records name no run: its result does (and its ledger rows).
            owner=CallOwner(self.name, None if parent is None else run_id, lineage.parent_run_id),
            parent=None if parent is None else parent.bill,
        )
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
            context=replace(context, _ledger=bill.ledger),
            max_output_tokens=_output_cap(self.model, max_output_tokens),
            can_pause=can_pause,
            session_id=session_id,
            agent_name=self.name,
            lineage=lineage,
            typed=typed,
            partials=partials,
        )
        agent = self  # a handoff passes the run on to another agent: the rounds are its own
        calling = enter_run(run)
        try:
            step = self._first_step(run, start, history)
            transcript = run.transcript
            run.models.position = self._models.first_position(
                transcript.messages, transcript.turn_start
            )
            while True:
                if step is None and run.round == 0:
                    step = await guards.first_round(run, agent._next_round)
                elif step is None:
                    step = await agent._next_round(run)
                match step:
                    case _Finish(message=answer):
                        return await guards.finish(run, answer)
                    case _Synthesize(reason=reason):
                        return await guards.finish(run, await agent._synthesize(run, reason))
                    case _TypedAnswer(reply=reply):
                        return await guards.finish(run, await agent._settle(run, reply))
                    case _CallTools(reply=tool_reply, calls=calls) if agent._may_wait(calls):
                        batch = await agent._batches.run(run, tool_reply, calls)
                    case _CallTools(reply=tool_reply, calls=calls):
                        batch = await run_batch(
                            run,
                            tool_reply,
                            calls,
                            toolset=agent._toolset,
                            prune=agent._prune,
                            agent_name=agent.name,
                        )
                    case _ResumeBatch(checked=checked):
                        batch = await agent._batches.resume(run, checked)
                    case _:
                        assert_never(step)
                if batch.answer is not None:
                    answer = await agent._settle(run, AIMessage(content=batch.answer))
                    return await guards.finish(run, answer)
                if batch.paused is not None:
                    guards.release()
                    return run.paused(batch.paused)
                ran_before = step.paused.batch if isinstance(step, _ResumeBatch) else ()
                if handoff := agent.handoffs.taken(run, ran_before):
                    agent = hand_over(run, agent, *handoff)
                    run.lineage = run.lineage.under_budgets(
                        agent.limits.token_budget, agent.limits.cost_budget_usd
                    )
                    run.models.position = 0  # the target starts on its own model
                if spent := agent._budget_spent(run):
                    return await guards.finish(run, await agent._synthesize(run, spent))
                step = None
        except (Exception, asyncio.CancelledError) as exc:
            bill.bill_interrupted_call(exc)
            await bill.flush_calls_on_failure()
            raise run.error(exc) from exc
        finally:
            leave_run(calling)

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
            is_declared_gated(tools.get(call.name)) or is_agent_tool(tools.get(call.name))
            for call in calls
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
            if isinstance(history, SizedHistory):
                run.history_tokens = history.tokens
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

    async def _next_round(self, run: _Run) -> _Step:
        """The next round; a caller's spend limit reached after tool rounds asks for a
        synthesis answer instead (a run refused before any tool round stops with the error)."""
        try:
            return await self._round(run)
        except SpendLimitExceeded:
            if run.tool_rounds == 0:
                raise
            return _Synthesize(reason="spend_limit")

    def first_call_reservation(
        self,
        start: str | CheckedDecisions,
        history: History | None,
        *,
        max_output_tokens: int | None,
        is_strict: bool,
    ) -> tuple[int, Decimal | None]:
        """What a run's first call will reserve against spend limits, in tokens and USD, for
        the turn's admission (a paused run's, from the messages it paused with).

        Raises:
            ConfigurationError: strict limits for a model with no cap on its output.
        """
        if isinstance(start, CheckedDecisions):
            messages: Sequence[BaseMessage] = start.paused.messages
        else:
            messages = Transcript.of(start, history, system_prompt=self.system_prompt).messages
        return call_reservation(
            self.pricer,
            messages,
            output_cap=self._call_output_cap(_output_cap(self.model, max_output_tokens)),
            is_strict=is_strict,
        )

    def _call_output_cap(self, run_cap: int | None) -> int | None:
        """The most output tokens one call of a run may take: the run's cap, else the model's."""
        own = getattr(self.model, "max_tokens", None)
        return run_cap or (own if isinstance(own, int) and own > 0 else None)

    async def _round(self, run: _Run) -> _Step:
        """Ask the model (with the tools bound) and decide what its reply asks for."""
        await self._toolset.sync()
        run.round += 1
        if run.listens:
            run.sink(RoundStarted(round=run.round))
        typed, tools = run.typed, self.tools
        reply = await self._model_turn(
            run,
            "round",
            "tools",
            shape=None if typed is None else partial(typed.round_model, tools=tools),
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
        binding: Binding,
        shape: _Shape | None = None,
        *,
        may_call_tools: bool,
        messages: Sequence[BaseMessage] | None = None,
        tail: Sequence[BaseMessage] = (),
    ) -> AIMessage:
        """Ask the model, retrying as its retry policy allows and falling back to the next
        model as `self._models` says; every attempt's usage is recorded. Without `messages` it
        is sent the transcript (compacted to fit its context budget) and then `tail`; a refusal
        as too long compacts it once and retries once."""
        if messages is not None:
            models = self._compaction_models if purpose == "compaction" else self._models
            reply = await self._attempts(
                run, purpose, binding, models, messages, may_call_tools, shape=shape
            )
        else:
            tail_tokens = sum(count_message_tokens(message) for message in tail)
            fitted = await self._fitted(run, tail_tokens)
            sent = [*fitted, *tail] if tail else fitted
            try:
                reply = await self._attempts(
                    run, purpose, binding, self._models, sent, may_call_tools, shape=shape
                )
            except Exception as exc:
                if not is_context_overflow(exc):
                    raise
                reply = await self._retry_compacted(
                    run, purpose, binding, tail, may_call_tools, exc, shape=shape
                )
            if run.window is not None:
                run.window.calibrate_from(run.bill.ledger.calls[-1], extra=tail_tokens)
        await run.bill.flush_calls()  # the ledger has the call before any tool of its round runs
        return reply

    async def _attempts(
        self,
        run: _Run,
        purpose: CallPurpose,
        binding: Binding,
        models: ModelChain,
        sent: Sequence[BaseMessage],
        may_call_tools: bool,
        made: int = 0,
        *,
        shape: _Shape | None,
    ) -> AIMessage:
        """One LLM call, in as many attempts as the models' retries and fallbacks allow (`made`
        already), each request shaped by `shape` if any (a typed answer's). Caching sees the
        run's view of what it sends as the stable part."""
        transcript, view = run.transcript, run.window
        kept, history_end = (
            (transcript.messages, transcript.turn_start)
            if view is None
            else (view.sent, view.turn_start)
        )
        key = run.session_id or self.name

        def attempt(
            choice: ModelChoice, number: int, fell_back_from: str | None
        ) -> Awaitable[AIMessage]:
            bound = choice.bound(binding, self._toolset)
            model, request = choice.caching.request(
                bound if shape is None else shape(choice.model, bound),
                models.messages_for(choice, sent),
                purpose=purpose,
                kept=kept,
                history_end=history_end,
                key=key,
            )
            return self._model_attempt(
                run,
                purpose,
                choice,
                model,
                request,
                may_call_tools=may_call_tools,
                attempt=made + number,
                fell_back_from=fell_back_from,
            )

        return await call_with_fallbacks(run, models, attempt)

    # -- the context window --------------------------------------------------------------------

    async def _fitted(self, run: _Run, tail_tokens: int) -> list[BaseMessage]:
        """The transcript as the model is sent it next: compacted first when it (and
        `tail_tokens` after it) would pass the context budget. Unmanaged without a budget."""
        view = run.window
        if view is None:
            if self.context_budget is None:
                return run.transcript.messages
            view = run.window = self._open_view(run)
        view.sync(run.transcript.messages)
        budget = view.budget
        if budget is not None and view.tokens + tail_tokens > budget:
            await self._compact(run, view, "budget")
        return view.sent

    def _open_view(self, run: _Run) -> ContextView:
        """The run's view of what it sends, each message counted once (the system prompt and
        the tool declarations too)."""
        transcript = run.transcript
        messages = transcript.messages
        return ContextView(
            messages,
            turn_start=transcript.turn_start,
            has_system_prompt=bool(messages) and isinstance(messages[0], SystemMessage),
            budget=self.context_budget,
            overhead=self._declaration_tokens(),
            history_tokens=run.history_tokens,
        )

    def _declaration_tokens(self) -> int:
        """What the tool declarations add to every request, counted again only when the tools
        change (an MCP server's come and go)."""
        tools = self.tools
        names, tokens = self._declared
        if names != tuple(tools):
            names = tuple(tools)
            tokens = tool_schema_tokens(tool.openai_schema() for tool in tools.values())
            self._declared = (names, tokens)
        return tokens

    async def _compact(self, run: _Run, view: ContextView, reason: CompactionReason) -> bool:
        """Compact what the run sends; whether anything could be."""
        room = max(64, int((view.budget or view.tokens) * COMPACT_TO_SHARE) // 8)

        async def summarize(messages: list[BaseMessage]) -> str:
            prompt = summary_prompt(messages, max_words=room * 3 // 4)
            reply = await self._model_turn(
                run, "compaction", "plain", may_call_tools=False, messages=prompt
            )
            return reply.text

        event = await compact(view, round=run.round, reason=reason, summarize=summarize)
        if event is None:
            return False
        logger.info(
            "agent %s, run %s: context compacted (%s) from %d to %d tokens",
            self.name,
            current_run_id(),
            reason,
            event.tokens_before,
            event.tokens_after,
        )
        run.sink(event)
        return True

    async def _retry_compacted(
        self,
        run: _Run,
        purpose: CallPurpose,
        binding: Binding,
        tail: Sequence[BaseMessage],
        may_call_tools: bool,
        refusal: Exception,
        *,
        shape: _Shape | None,
    ) -> AIMessage:
        """The provider refused the prompt as too long: compact once, retry once; refused
        again (or nothing left to compact), the run fails with `ContextWindowExceededError`."""
        made = run.bill.ledger.calls[-1].attempt
        await run.bill.flush_calls()
        view = run.window = run.window or self._open_view(run)
        view.sync(run.transcript.messages)
        try:
            is_compacted = await self._compact(run, view, "context_length_error")
        except Exception as exc:
            if is_context_overflow(exc):  # the summarising request did not fit either
                raise ContextWindowExceededError(
                    model=self.pricer.model, prompt_tokens=view.tokens
                ) from exc
            raise
        if not is_compacted:
            raise ContextWindowExceededError(
                model=self.pricer.model, prompt_tokens=view.tokens
            ) from refusal
        try:
            return await self._attempts(
                run,
                purpose,
                binding,
                self._models,
                [*view.sent, *tail],
                may_call_tools,
                made,
                shape=shape,
            )
        except Exception as again:
            if is_context_overflow(again):
                raise ContextWindowExceededError(
                    model=self.pricer.model, prompt_tokens=view.tokens
                ) from again
            raise

    async def _model_attempt(
        self,
        run: _Run,
        purpose: CallPurpose,
        choice: ModelChoice,
        model: Runnable[LanguageModelInput, Any],
        sent: Sequence[BaseMessage],
        *,
        may_call_tools: bool,
        attempt: int,
        fell_back_from: str | None = None,
    ) -> AIMessage:
        """Ask the model once and record the usage. Streams when the run streams (text deltas
        as they come) and whenever `ainvoke` would stream anyway: then our own fold, not
        langchain-core's, makes the reply, so a cut-off is billed and broken tool arguments stay
        broken in both modes."""
        await run.pacing.checkpoint()
        if run.max_output_tokens is not None:
            model = model.bind(max_tokens=run.max_output_tokens)
        # A condensed tool output or a summary is for the model, never for the user's screen.
        is_for_model = purpose in ("pruning", "compaction")
        shows_text = run.streaming and not is_for_model
        streams_to_caller = shows_text and (self.stream_tool_rounds or not may_call_tools)
        streams = streams_to_caller or streams_inside_ainvoke(choice.model, model)
        fold = ReplyFold() if streams else None
        await run.bill.reserve(
            sent, output_cap=self._call_output_cap(run.max_output_tokens), pricer=choice.pricer
        )
        run.bill.begin_call(
            InFlightCall(
                purpose,
                run.round,
                attempt,
                sent,
                fold,
                streams_text=streams_to_caller,
                pricer=choice.pricer,
                fell_back_from=fell_back_from,
                server=choice.server,
            )
        )
        if fold is not None:
            reply = await self._stream_reply(
                model, sent, fold, run, shows_text=streams_to_caller, model_name=choice.pricer.model
            )
        else:
            reply = _as_ai_message(await invoke_reply(model, sent))
        if streams_to_caller:
            run.shown.add(run.round, reply.text)  # its deltas are out already
        elif not is_for_model:
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
        model_name: str | None,
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
                    limit_s, model=model_name, chunks_received=fold.chunks_received
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
                run, "pruning", "plain", may_call_tools=False, messages=[HumanMessage(prompt)]
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
        tokens, cost = run.lineage.token_budget, run.lineage.cost_budget_usd
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
                run, "synthesis", *self._final_request(run, typed), may_call_tools=False
            )
            return await self._settle(run, reply)
        declares_tools = bool(self.tools) and transcript.holds_tool_calls
        reply = await self._model_turn(
            run,
            "synthesis",
            "declaring_tools" if declares_tools else "plain",
            may_call_tools=False,
            tail=(HumanMessage(prompt),),
        )
        return self._ignore_tool_calls(run, reply)

    def _final_request(self, run: _Run, typed: TypedAnswers) -> tuple[Binding, _Shape]:
        """A typed agent's last request (a synthesis, a retry): the typed answer, no tool call
        (the tools declared where the transcript holds tool calls, as an untyped one)."""
        declares_tools = bool(self.tools) and run.transcript.holds_tool_calls
        binding: Binding = "declaring_tools" if declares_tools else "plain"
        return binding, partial(typed.final_model, tools=self.tools)

    async def _settle(self, run: _Run, reply: AIMessage) -> AIMessage:
        """The answer: the reply itself, or, for a typed agent, its checked typed answer (asked
        again, each retry billed as `output_retry`, while it fails and retries are left)."""
        typed = run.typed
        if typed is None:
            return reply

        def ask_again() -> Awaitable[AIMessage]:
            return self._model_turn(
                run, "output_retry", *self._final_request(run, typed), may_call_tools=False
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


def _built(tool: ToolConfig | AgentToolConfig) -> Tool:
    if isinstance(tool, AgentToolConfig):
        raise ConfigurationError(
            f"agent.tools: the actor {tool.agent!r} called as a tool is built from its file by "
            "ActorExecutor.from_config; in code, pass its agent's as_tool() in tools"
        )
    return tool_from_config(tool)


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
