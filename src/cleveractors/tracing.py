"""OpenTelemetry traces and metrics of every run, in the GenAI semantic conventions (v1.41).

    invoke_agent {actor}          INTERNAL  one per run (`_turn_path.run_turn` starts and ends it)
    +- chat {model}               CLIENT    one per LLM call attempt (the bill: sent -> recorded)
    +- execute_tool {tool}        INTERNAL  one per tool call (`ToolAgent.run`)
       +- invoke_agent {agent}    INTERNAL  the run of an agent called as a tool, its own
                                            chat and tool spans below it (`agents._delegate`)

The library depends on `opentelemetry-api` only: with no SDK configured every span is a
non-recording one and no attribute is built. The chat spans carry each attempt's usage exactly as
its ledger row does (the same record), and the run span carries the run's totals under
`cleveractors.run.*`, never `gen_ai.usage.*`, so a backend that sums spans counts each token once.

Spans are started with their parent given explicitly (`context=`), never made current: the run
runs in its own task and streams to a consumer, and a context attached across that boundary is
the "Failed to detach context" of other instrumentations.

Message content (prompts, replies, tool arguments and results) is off by default;
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true`, `span_only`, `span_and_event`)
turns it on, each value capped at `CLEVERACTORS_OTEL_CONTENT_MAX_BYTES` (64 KiB by default).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from cleveractors._otel_attributes import gen_ai_provider, reply_id, server_of, set_usage
from cleveractors._otel_content import (
    CONTENT_MAX_BYTES_ENV,
    CONTENT_MODE_ENV,
    ContentCapture,
    as_json,
    finish_reason,
    set_input_content,
    set_output_content,
)
from cleveractors._otel_metrics import CallMetrics
from cleveractors.errors import ToolExecutionError, http_status

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage

    from cleveractors.usage import LLMCallUsage

__all__ = [
    "CONTENT_MAX_BYTES_ENV",
    "CONTENT_MODE_ENV",
    "ChatSpan",
    "ContentCapture",
    "GuardrailSpan",
    "RunTrace",
    "Telemetry",
    "ToolSpan",
    "current_trace",
    "current_trace_var",
]


def _records_nothing(tracers: trace.TracerProvider, meters: metrics.MeterProvider) -> bool:
    """Whether both global providers are the API's own stand-ins: its proxies (no SDK set yet)
    or its no-ops. The metrics proxy's class is private to the API, so it is told by name."""
    no_tracer = isinstance(tracers, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    no_meter = isinstance(meters, metrics.NoOpMeterProvider) or (
        type(meters).__name__ == "_ProxyMeterProvider"
    )
    return no_tracer and no_meter


class Telemetry:
    """The tracer, the meter's instruments and the content setting of one executor.

    Args:
        actor_name: The actor's name (`invoke_agent {actor_name}`, `gen_ai.agent.name`).
        tracer_provider: Where spans go; the global provider when None.
        meter_provider: Where metrics go; the global provider when None.
        content: Whether content is captured; read from the environment when None.
        chat_model: The agent's chat model, read once for the server its calls go to
            (`server.address`, `server.port`).
    """

    __slots__ = ("_is_given", "_metrics", "actor_name", "content", "server", "tracer")

    def __init__(
        self,
        actor_name: str,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        content: ContentCapture | None = None,
        chat_model: object = None,
    ) -> None:
        self.actor_name = actor_name
        self._is_given = tracer_provider is not None or meter_provider is not None
        self.server = server_of(chat_model)
        self.tracer = trace.get_tracer("cleveractors", tracer_provider=tracer_provider)
        meter = metrics.get_meter("cleveractors", meter_provider=meter_provider)
        self.content = ContentCapture.from_env() if content is None else content
        self._metrics = CallMetrics(meter)

    @property
    def is_live(self) -> bool:
        """Whether a span or a metric could be recorded: providers were given, or an SDK is a
        global provider (read per run: an app may set it after building the executor). When not,
        a run makes no span and records nothing: even the API's no-ops cost a blocking turn
        about 1% of its CPU."""
        if self._is_given:
            return True
        return not _records_nothing(trace.get_tracer_provider(), metrics.get_meter_provider())

    def count_spend_refusal(self) -> None:
        """A run of this actor refused or stopped by a caller's spend limit."""
        self._metrics.count_spend_refusal(self.actor_name)

    def start_run(
        self,
        run_id: str,
        session_id: str | None,
        *,
        agent_name: str | None = None,
        parent: Span | None = None,
        parent_run_id: str | None = None,
    ) -> RunTrace:
        """Start the run's span; the caller ends it (`RunTrace.end`) on every path. The run of
        an agent called as a tool (`agent_name`, another than the actor's) is a child of the
        `execute_tool` span of its call (`parent`)."""
        name = self.actor_name if agent_name is None else agent_name
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "cleveractors.run.id": run_id,
        }
        if session_id is not None:
            attributes["gen_ai.conversation.id"] = session_id
        if parent_run_id is not None:
            attributes["cleveractors.run.parent_id"] = parent_run_id
        context = None if parent is None else trace.set_span_in_context(parent)
        span = self.tracer.start_span(
            f"invoke_agent {name}", context, kind=SpanKind.INTERNAL, attributes=attributes
        )
        return RunTrace(self, span)

    def _record_call(self, chat: ChatSpan, record: LLMCallUsage, error_type: str | None) -> None:
        """The call's metrics: low-cardinality attributes only (no run, session or user)."""
        attributes: dict[str, str] = {"gen_ai.operation.name": "chat"}
        if chat.provider is not None:
            attributes["gen_ai.provider.name"] = chat.provider
        if chat.request_model is not None:
            attributes["gen_ai.request.model"] = chat.request_model
        if record.model is not None:
            attributes["gen_ai.response.model"] = record.model
        if error_type is not None:
            attributes["error.type"] = error_type
        self._metrics.record(
            record,
            attributes,
            started=chat.started,
            ended=time.perf_counter(),
            first_chunk_at=chat.first_chunk_at,
            chunks=chat.chunks,
        )


class RunTrace:
    """The trace of one run: its span, the parent of its chat and tool spans."""

    __slots__ = ("_context", "_ended", "_open", "span", "telemetry")

    def __init__(self, telemetry: Telemetry, span: Span) -> None:
        self.telemetry = telemetry
        self.span = span
        self._context: Context = trace.set_span_in_context(span)
        self._ended = False
        self._open: set[Span] = set()
        """Child spans started and not yet ended: the run's end ends any an escaping
        exception (one the loop does not catch) left open."""

    def start_chat(
        self,
        *,
        provider: str | None,
        request_model: str | None,
        purpose: str,
        round: int,
        attempt: int,
        stream: bool,
        messages: Sequence[BaseMessage],
        fell_back_from: str | None = None,
        server: tuple[str, int] | None = None,
    ) -> ChatSpan:
        """Start the span of one LLM call attempt, as it is sent. The attributes the conventions
        call relevant to sampling (operation, provider, model, server) are given at creation, so
        a sampler can decide by them. `server` is where a fallback model's call goes, when not
        to the agent's model's server."""
        name = "chat" if request_model is None else f"chat {request_model}"
        provider_name = None if provider is None else gen_ai_provider(provider)
        attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
        if provider_name is not None:
            attributes["gen_ai.provider.name"] = provider_name
        if request_model is not None:
            attributes["gen_ai.request.model"] = request_model
        if (server := server or self.telemetry.server) is not None:
            attributes["server.address"], attributes["server.port"] = server
        attributes["gen_ai.request.stream"] = stream
        attributes["cleveractors.call.purpose"] = purpose
        attributes["cleveractors.call.round"] = round
        attributes["cleveractors.call.attempt"] = attempt
        if fell_back_from is not None:
            attributes["cleveractors.call.fell_back_from"] = fell_back_from
        span = self._child(name, SpanKind.CLIENT, attributes)
        if span.is_recording() and self.telemetry.content.enabled:
            set_input_content(span, messages, self.telemetry.content)
        return ChatSpan(self, span, provider_name, request_model, time.perf_counter())

    def start_tool(
        self, name: str, call_id: str, arguments: object, *, source: str | None = None
    ) -> ToolSpan:
        """Start the span of one tool call, as it runs. `source` names where a tool that is not
        a Python function comes from (``mcp server 'files'``)."""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if source is not None and source != "python":
            attributes["cleveractors.tool.source"] = source
        span = self._child(f"execute_tool {name}", SpanKind.INTERNAL, attributes)
        content = self.telemetry.content
        if span.is_recording() and content.enabled and arguments is not None:
            span.set_attribute("gen_ai.tool.call.arguments", content.capped(as_json(arguments)))
        return ToolSpan(self, span)

    def start_guardrail(self, name: str, stage: str) -> GuardrailSpan:
        """Start the span of one guardrail's check (a judge's chat spans are its siblings)."""
        attributes: dict[str, AttributeValue] = {
            "cleveractors.guardrail.name": name,
            "cleveractors.guardrail.stage": stage,
        }
        return GuardrailSpan(self, self._child(f"guardrail {name}", SpanKind.INTERNAL, attributes))

    def skipped_tool(self, name: str, call_id: str) -> None:
        """The span of a call an earlier `ends_turn` call kept from running: an ERROR
        `skipped`, so it is never mistaken for one that ran."""
        tool = self.start_tool(name, call_id, None)
        if tool.span.is_recording():
            _set_error(tool.span, "skipped")
        tool.end(None, None)

    def _child(self, name: str, kind: SpanKind, attributes: dict[str, AttributeValue]) -> Span:
        span = self.telemetry.tracer.start_span(
            name, self._context, kind=kind, attributes=attributes
        )
        if span.is_recording():
            self._open.add(span)
        return span

    def _ended_child(self, span: Span) -> None:
        self._open.discard(span)

    def end(
        self,
        status: str,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        cost_usd: Decimal | None,
        error: BaseException | None,
    ) -> None:
        """End the run's span with its outcome and totals; a second call does nothing."""
        if self._ended:
            return
        self._ended = True
        for child in tuple(self._open):
            _set_error(child, "run ended" if error is None else error_type(error))
            child.end()
        self._open.clear()
        span = self.span
        if span.is_recording():
            span.set_attribute("cleveractors.run.outcome", status)
            span.set_attribute("cleveractors.run.prompt_tokens", prompt_tokens)
            span.set_attribute("cleveractors.run.completion_tokens", completion_tokens)
            if cost_usd is not None:
                span.set_attribute("cleveractors.run.cost_usd", float(cost_usd))
            if status not in _GOOD_OUTCOMES:
                _set_error(span, error_type(error) if error is not None else status)
        span.end()


_GOOD_OUTCOMES = frozenset({"answered", "paused"})
"""Run outcomes that are no error: a paused run waits for a person, as it was built to."""


@dataclass(slots=True)
class ChatSpan:
    """The span of one LLM call attempt, carried on the call in flight until it is recorded."""

    run: RunTrace
    span: Span
    provider: str | None
    request_model: str | None
    started: float
    first_chunk_at: float | None = None
    """When the first chunk of a streamed reply arrived (`time.perf_counter()`)."""
    chunks: int = 0
    """How many chunks a streamed reply had."""
    ended: bool = False

    @property
    def ids(self) -> tuple[str | None, str | None]:
        """The trace id and span id, as hex, for the ledger row; None when not sampled."""
        context = self.span.get_span_context()
        if not context.is_valid:
            return None, None
        return trace.format_trace_id(context.trace_id), trace.format_span_id(context.span_id)

    def end(
        self,
        record: LLMCallUsage,
        reply: AIMessage | None,
        cause: BaseException | None,
    ) -> None:
        """End the span with the call's record (its usage is the ledger's), once."""
        if self.ended:
            return
        self.ended = True
        telemetry = self.run.telemetry
        failure = None if cause is None else error_type(cause)
        span = self.span
        if span.is_recording():
            set_usage(span, record)
            metadata = {} if reply is None else reply.response_metadata
            if record.model is not None:
                span.set_attribute("gen_ai.response.model", record.model)
            response_id = reply_id(reply, metadata)
            if response_id is not None:
                span.set_attribute("gen_ai.response.id", response_id)
            finish = "error" if failure is not None else finish_reason(metadata)
            if finish is not None:
                span.set_attribute("gen_ai.response.finish_reasons", (finish,))
            if self.first_chunk_at is not None:
                span.set_attribute(
                    "gen_ai.response.time_to_first_chunk", self.first_chunk_at - self.started
                )
            if reply is not None and telemetry.content.enabled:
                set_output_content(span, reply, telemetry.content)
            if failure is not None:
                _set_error(span, failure)
            self.run._ended_child(span)
        span.end()
        telemetry._record_call(self, record, failure)


@dataclass(slots=True)
class ToolSpan:
    """The span of one tool call."""

    run: RunTrace
    span: Span
    ended: bool = False

    def end(self, output: str | None, error: BaseException | None) -> None:
        """End the span with the call's output or failure, once."""
        if self.ended:
            return
        self.ended = True
        span = self.span
        if span.is_recording():
            content = self.run.telemetry.content
            if output is not None and content.enabled:
                span.set_attribute("gen_ai.tool.call.result", content.capped(output))
            if error is not None:
                _set_error(span, error_type(error))
            self.run._ended_child(span)
        span.end()


@dataclass(slots=True)
class GuardrailSpan:
    """The span of one guardrail's check: its verdict, or the failure of the check itself."""

    run: RunTrace
    span: Span

    def end(self, *, tripped: bool | None, reason: str, error: BaseException | None) -> None:
        span = self.span
        if span.is_recording():
            if tripped is not None:
                span.set_attribute("cleveractors.guardrail.tripped", tripped)
                if tripped:
                    span.set_attribute("cleveractors.guardrail.reason", reason)
                    _set_error(span, "GuardrailTripped")
            if error is not None:
                _set_error(span, error_type(error))
            self.run._ended_child(span)
        span.end()


current_trace_var: ContextVar[RunTrace | None] = ContextVar(
    "cleveractors_current_trace", default=None
)
"""The trace of the run the current code belongs to (set by the executor's path for the run's
own task); None outside an executor's run, where nothing is traced."""


def current_trace() -> RunTrace | None:
    return current_trace_var.get()


def error_type(error: BaseException) -> str:
    """`error.type`, low-cardinality: the HTTP status a provider refused with (as the HTTP
    conventions spell it, `503`), else the exception's class; for a tool's failure the cause it
    reports (a timeout is `TimeoutError`)."""
    status = http_status(error)
    if status is not None:
        return str(status)
    cause = error.__cause__ or error.__context__
    if isinstance(error, ToolExecutionError) and cause is not None:
        return type(cause).__qualname__
    return type(error).__qualname__


def _set_error(span: Span, kind: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))
