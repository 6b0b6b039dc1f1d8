"""The bill of one run: a usage record per LLM call attempt, priced, estimated where the provider
sent no figures, and handed to the run's recorder (an executor's ledger) as the run goes.

`Bill` alone writes the run's `UsageLedger`. The loop tells it of a call before sending it
(`begin_call`); the bill records the call when its reply is complete (`record_reply`) or bills
it when it is cut off (`bill_interrupted_call`), and hands the records to the recorder
(`flush_calls`) before anything the call leads to runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from langchain_core.messages import AIMessage, BaseMessage

from cleveractors._spend_gate import current_call_spend
from cleveractors.agents._failures import may_have_been_billed
from cleveractors.agents.base import discard_event
from cleveractors.agents.fold import ReplyFold, output_text
from cleveractors.agents.stream import wait_through_cancellation
from cleveractors.errors import ConfigurationError
from cleveractors.events import Event, UsageRecorded
from cleveractors.pricing import CallPricer
from cleveractors.runs import current_run_id
from cleveractors.tokens import count_tokens, estimate_prompt_tokens
from cleveractors.tracing import ChatSpan, RunTrace, current_trace
from cleveractors.usage import (
    AttemptStatus,
    CallPurpose,
    CallRecorder,
    LLMCallUsage,
    TokenUsage,
    UsageLedger,
)

__all__ = ["Bill", "CallOwner", "InFlightCall", "call_reservation"]

# The agent's logger, whichever of its modules writes: users filter on it.
logger = logging.getLogger("cleveractors.agents.llm")


@dataclass(frozen=True, slots=True)
class InFlightCall:
    """An LLM call that has been sent and not yet recorded: billed by estimate if it is cut off."""

    purpose: CallPurpose
    round: int
    attempt: int
    """Which attempt at this LLM call it is, from 1 (see `call_with_retries`)."""
    messages: Sequence[BaseMessage]
    fold: ReplyFold | None
    """The fold of its chunks when the call streams; None for an `ainvoke`."""
    streams_text: bool = False
    """Whether the fold's text goes to the caller as it arrives, a delta per chunk."""
    span: ChatSpan | None = None
    """The attempt's `chat` span, from its sending to its record (the bill starts and ends it)."""
    pricer: CallPricer | None = None
    """The model the call went to, when not the agent's own (a fallback model): it names and
    prices the call."""
    fell_back_from: str | None = None
    """The model this call's model took over from, when it is a fallback's."""
    server: tuple[str, int] | None = None
    """The host and port a fallback model's call goes to (its span says so)."""

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


class Bill:
    """Every LLM call of one run, as usage records. Made per run, never shared.

    Attributes:
        pricer: Names and prices the calls.
        agent: The actor whose agent makes the calls now, on each record.
        ledger: The records so far (read, never written, by anyone else).
        in_flight: The call sent and not yet recorded, if any.
    """

    __slots__ = (
        "_flushing",
        "_owner",
        "_parent",
        "_recorded",
        "_recorder",
        "_sink",
        "_spend",
        "_trace",
        "in_flight",
        "ledger",
        "pricer",
    )

    def __init__(
        self,
        pricer: CallPricer,
        *,
        sink: Callable[[Event], None],
        recorder: CallRecorder | None,
        owner: CallOwner | None = None,
        parent: Bill | None = None,
    ) -> None:
        self.pricer = pricer
        self._owner = owner or CallOwner()
        """Who the run's own records name: the agent, the run and the run that called it."""
        self._parent = parent
        """The bill of the run that called this one as a tool: every record is its too."""
        self.ledger = UsageLedger()
        self.in_flight: InFlightCall | None = None
        self._sink = None if sink is discard_event else sink
        """None when nobody reads the run's events: no `UsageRecorded` is made."""
        self._recorder = recorder
        self._recorded = 0
        """How many of the ledger's calls the recorder has been given."""
        self._flushing = asyncio.Lock()
        """Held while handing calls to the recorder: a guardrail's judge flushes its calls
        beside the model call's flush, and each call must be handed over once."""
        self._trace: RunTrace | None = current_trace()
        """The run's trace, when an executor traces it: each attempt is a span of it."""
        self._spend = current_call_spend.get()
        """The caller's spend limits, when it has any: each attempt reserves before it is sent."""

    @property
    def agent(self) -> str | None:
        """The actor whose agent makes the calls now, named on each record."""
        return self._owner.agent

    @agent.setter
    def agent(self, name: str | None) -> None:
        """A handoff passes the run to another actor: its calls from now on name that one."""
        self._owner = dataclasses.replace(self._owner, agent=name)

    async def reserve(
        self,
        messages: Sequence[BaseMessage],
        *,
        output_cap: int | None,
        pricer: CallPricer | None = None,
    ) -> None:
        """Reserve what the next call may cost against the caller's spend limits, if any, at the
        prices of the model it goes to (`pricer`: a fallback's own; by default the agent's).

        Raises:
            SpendLimitExceeded: no room is left for it; nothing is sent or billed.
        """
        spend = self._spend
        if spend is None:
            return
        tokens, cost = call_reservation(
            pricer or self.pricer, messages, output_cap=output_cap, is_strict=spend.is_strict
        )
        await spend.reserve(len(self.ledger.calls) + 1, tokens=tokens, cost_usd=cost)

    def begin_call(self, call: InFlightCall) -> None:
        """A call is about to be sent: from now on it is billed, whatever becomes of it (and
        traced: its span starts here and ends with its record)."""
        if self._trace is not None:
            call = replace(call, span=self._start_span(self._trace, call))
        self.in_flight = call

    def _start_span(self, run_trace: RunTrace, call: InFlightCall) -> ChatSpan:
        pricer = call.pricer or self.pricer
        return run_trace.start_chat(
            provider=pricer.provider,
            request_model=pricer.model,
            purpose=call.purpose,
            round=call.round,
            attempt=call.attempt,
            stream=call.fold is not None,
            messages=call.messages,
            fell_back_from=call.fell_back_from,
            server=call.server,
        )

    def record_reply(self, reply: AIMessage) -> None:
        """Record the call in flight, completed by `reply`."""
        call = self.in_flight
        if call is None:
            raise RuntimeError("a reply was recorded for no call in flight")
        self._record(call, self._reported_usage(call, reply), reply, status="ok", cause=None)

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
        fold = call.fold
        if fold is not None and fold.has_usage:
            # The provider's figures arrived before the cut: exact, never an estimate.
            reply = fold.message()
            self._record(call, self._reported_usage(call, reply), reply, status=status, cause=cause)
        elif (fold is not None and fold.received_any) or may_have_been_billed(cause):
            partial = fold.message() if fold is not None else None
            usage = _estimate(call.messages, partial)
            self._record(call, usage, partial, status=status, cause=cause)
        else:
            self._record(call, TokenUsage(), None, status=status, cause=cause)

    def adopt(self, call: LLMCallUsage) -> None:
        """A call of a run this run called (its own bill hands it to the recorder): part of
        this run's totals and budgets, and of its caller's."""
        self.ledger.adopt(call)
        if self._parent is not None:
            self._parent.adopt(call)

    def record_judged_call(self, call: LLMCallUsage, *, round: int) -> None:
        """Bill a call another agent made for this run (a guardrail's judge), as it recorded
        it: its usage, model and price, under purpose `guardrail`."""
        record = self.ledger.record(
            purpose="guardrail",
            round=round,
            usage=call.usage,
            provider=call.provider,
            model=call.model,
            cost_usd=call.cost_usd,
            cache_savings_usd=call.cache_savings_usd,
            attempt=call.attempt,
            status=call.status,
            trace_id=call.trace_id,
            span_id=call.span_id,
            agent=call.agent,
            run_id=self._owner.run_id,
            parent_run_id=self._owner.parent_run_id,
        )
        if self._parent is not None:
            self._parent.adopt(record)
        if self._sink is not None:
            self._sink(UsageRecorded(call=record, total=self.ledger.total))

    async def flush_calls(self) -> None:
        """Hand the recorder every call recorded since the last flush (a called run's calls
        were handed over by its own bill)."""
        if self._recorder is None:
            return
        own = self._owner.run_id
        async with self._flushing:
            for call in self.ledger.calls[self._recorded :]:
                if call.run_id == own:
                    await self._recorder(call)
                self._recorded += 1

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
            logger.warning(
                "run %s: recording the calls of its failure failed: %r", current_run_id(), exc
            )

    def _reported_usage(self, call: InFlightCall, reply: AIMessage) -> TokenUsage:
        """The provider's figures when plausible, else an estimate."""
        reported = TokenUsage.from_message(reply)
        if reported is not None and reported.prompt_tokens != 0:
            return reported
        estimate = _estimate(call.messages, reply)
        _warn_implausible(call.pricer or self.pricer, reply, reported)
        return estimate if reported is None else _with_estimated_prompt(reported, estimate)

    def _record(
        self,
        call: InFlightCall,
        usage: TokenUsage,
        reply: AIMessage | None,
        *,
        status: AttemptStatus,
        cause: BaseException | None,
    ) -> None:
        pricer = call.pricer or self.pricer
        model = answering_model(reply, pricer.model)
        span = call.span
        trace_id, span_id = (None, None) if span is None else span.ids
        cost = pricer.cost(usage, model) if pricer.can_price else None
        record = self.ledger.record(
            purpose=call.purpose,
            round=call.round,
            usage=usage,
            attempt=call.attempt,
            status=status,
            provider=pricer.provider,
            model=model,
            cost_usd=cost,
            cache_savings_usd=pricer.cache_savings(usage, model, cost),
            trace_id=trace_id,
            span_id=span_id,
            agent=self._owner.agent,
            run_id=self._owner.run_id,
            parent_run_id=self._owner.parent_run_id,
        )
        if self._parent is not None:
            self._parent.adopt(record)
        self.in_flight = None
        if span is not None:
            if call.fold is not None:
                span.first_chunk_at = call.fold.first_chunk_at
                span.chunks = call.fold.chunks_received
            span.end(record, reply, cause)
        if self._sink is not None:
            self._sink(UsageRecorded(call=record, total=self.ledger.total))


def call_reservation(
    pricer: CallPricer,
    messages: Sequence[BaseMessage],
    *,
    output_cap: int | None,
    is_strict: bool,
) -> tuple[int, Decimal | None]:
    """What a call reserves, in tokens and USD: its prompt as estimated, plus (strict) its
    output cap, at the model's price.

    Raises:
        ConfigurationError: strict limits for a model with no cap on its output.
    """
    output = 0
    if is_strict:
        if output_cap is None:
            raise ConfigurationError(
                "spend_limits.strict: each call reserves its output cap, and the model has "
                "none; set agent.model_options.max_tokens"
            )
        output = output_cap
    usage = TokenUsage(
        prompt_tokens=estimate_prompt_tokens(messages), completion_tokens=output, estimated=True
    )
    cost = pricer.cost(usage, pricer.model) if pricer.can_price else None
    return usage.total_tokens, cost


@dataclass(frozen=True, slots=True)
class CallOwner:
    """Who a run's records name: its agent, its run and the run that called it, if any."""

    agent: str | None = None
    run_id: str | None = None
    parent_run_id: str | None = None


def answering_model(reply: AIMessage | None, configured: str | None) -> str | None:
    """The model the provider reports in the reply, else the configured one. The key differs
    per integration: `model_name` (OpenAI, Google), `model` (Anthropic, Ollama)."""
    metadata = reply.response_metadata if reply is not None else {}
    for key in ("model_name", "model"):
        reported = metadata.get(key)
        if isinstance(reported, str) and reported:
            return reported
    return configured


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
    model = answering_model(reply, pricer.model)
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
