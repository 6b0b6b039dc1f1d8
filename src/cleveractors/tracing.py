"""OpenTelemetry traces and metrics of every run, in the GenAI semantic conventions (v1.41).

    invoke_agent {actor}          INTERNAL  one per run (`turns.run_turn` starts and ends it)
    +- chat {model}               CLIENT    one per LLM call attempt (the bill: sent -> recorded)
    +- execute_tool {tool}        INTERNAL  one per tool call (`ToolAgent.run`)

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

import json
import os
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from cleveractors.errors import ToolExecutionError, http_status

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage

    from cleveractors.usage import LLMCallUsage

__all__ = [
    "CONTENT_MAX_BYTES_ENV",
    "CONTENT_MODE_ENV",
    "ChatSpan",
    "ContentCapture",
    "RunTrace",
    "Telemetry",
    "ToolSpan",
    "current_trace",
    "current_trace_var",
]

CONTENT_MODE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_MAX_BYTES_ENV = "CLEVERACTORS_OTEL_CONTENT_MAX_BYTES"
_SPAN_CONTENT_MODES = frozenset({"true", "1", "span_only", "span_and_event"})
_DEFAULT_CONTENT_MAX_BYTES = 64 * 1024

# The conventions' advisory bucket boundaries (gen_ai metrics, v1.41): the duration's are also
# those of the time to the first chunk and of the time per output chunk.
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip

# LangChain's provider names where the conventions spell them otherwise.
_PROVIDER_NAMES = {
    "google_genai": "gcp.gen_ai",
    "google_vertexai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "azure_openai": "azure.ai.openai",
    "mistralai": "mistral_ai",
}


@dataclass(frozen=True, slots=True)
class ContentCapture:
    """Whether message content goes on spans, and how much of each value."""

    enabled: bool = False
    max_bytes: int = _DEFAULT_CONTENT_MAX_BYTES

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ContentCapture:
        env = os.environ if environ is None else environ
        mode = env.get(CONTENT_MODE_ENV, "").strip().lower()
        raw_cap = env.get(CONTENT_MAX_BYTES_ENV, "").strip()
        cap = int(raw_cap) if raw_cap.isdigit() and int(raw_cap) > 0 else _DEFAULT_CONTENT_MAX_BYTES
        return cls(enabled=mode in _SPAN_CONTENT_MODES, max_bytes=cap)

    def capped(self, value: str) -> str:
        """`value`, cut to `max_bytes` of UTF-8 with the cut marked, so a backend never drops
        the span (and its usage) for its size."""
        data = value.encode()
        if len(data) <= self.max_bytes:
            return value
        kept = data[: self.max_bytes].decode(errors="ignore")
        return f"{kept}...[truncated {len(data) - len(kept.encode())} bytes]"


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

    __slots__ = (
        "_cost",
        "_duration",
        "_first_chunk",
        "_is_given",
        "_per_chunk",
        "_tokens",
        "actor_name",
        "content",
        "server",
        "tracer",
    )

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
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk of a streamed response",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._per_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_per_output_chunk",
            unit="s",
            description="Mean time between the chunks of a streamed response after the first",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )
        self._cost = meter.create_counter(
            "cleveractors.client.cost", unit="USD", description="Cost of the LLM calls"
        )

    @property
    def is_live(self) -> bool:
        """Whether a span or a metric could be recorded: providers were given, or an SDK is a
        global provider (read per run: an app may set it after building the executor). When not,
        a run makes no span and records nothing: even the API's no-ops cost a blocking turn
        about 1% of its CPU."""
        if self._is_given:
            return True
        return not _records_nothing(trace.get_tracer_provider(), metrics.get_meter_provider())

    def start_run(self, run_id: str, session_id: str | None) -> RunTrace:
        """Start the run's span; the caller ends it (`RunTrace.end`) on every path."""
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.actor_name,
            "cleveractors.run.id": run_id,
        }
        if session_id is not None:
            attributes["gen_ai.conversation.id"] = session_id
        span = self.tracer.start_span(
            f"invoke_agent {self.actor_name}", kind=SpanKind.INTERNAL, attributes=attributes
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
        ended = time.perf_counter()
        self._duration.record(ended - chat.started, attributes)
        self._tokens.record(
            record.usage.prompt_tokens, {**attributes, "gen_ai.token.type": "input"}
        )
        self._tokens.record(
            record.usage.completion_tokens, {**attributes, "gen_ai.token.type": "output"}
        )
        first = chat.first_chunk_at
        if first is not None:
            self._first_chunk.record(first - chat.started, attributes)
            if chat.chunks > 1:  # once per call, the mean: no work per chunk
                self._per_chunk.record((ended - first) / (chat.chunks - 1), attributes)
        if record.cost_usd is not None:
            self._cost.add(float(record.cost_usd), attributes)


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
    ) -> ChatSpan:
        """Start the span of one LLM call attempt, as it is sent. The attributes the conventions
        call relevant to sampling (operation, provider, model, server) are given at creation, so
        a sampler can decide by them."""
        name = "chat" if request_model is None else f"chat {request_model}"
        provider_name = None if provider is None else _PROVIDER_NAMES.get(provider, provider)
        attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
        if provider_name is not None:
            attributes["gen_ai.provider.name"] = provider_name
        if request_model is not None:
            attributes["gen_ai.request.model"] = request_model
        if (server := self.telemetry.server) is not None:
            attributes["server.address"], attributes["server.port"] = server
        attributes["gen_ai.request.stream"] = stream
        attributes["cleveractors.call.purpose"] = purpose
        attributes["cleveractors.call.round"] = round
        attributes["cleveractors.call.attempt"] = attempt
        span = self._child(name, SpanKind.CLIENT, attributes)
        if span.is_recording() and self.telemetry.content.enabled:
            _set_input_content(span, messages, self.telemetry.content)
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
            span.set_attribute("gen_ai.tool.call.arguments", content.capped(_json(arguments)))
        return ToolSpan(self, span)

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
            _set_usage(span, record)
            metadata = {} if reply is None else reply.response_metadata
            if record.model is not None:
                span.set_attribute("gen_ai.response.model", record.model)
            response_id = _response_id(reply, metadata)
            if response_id is not None:
                span.set_attribute("gen_ai.response.id", response_id)
            finish = "error" if failure is not None else _finish_reason(metadata)
            if finish is not None:
                span.set_attribute("gen_ai.response.finish_reasons", (finish,))
            if self.first_chunk_at is not None:
                span.set_attribute(
                    "gen_ai.response.time_to_first_chunk", self.first_chunk_at - self.started
                )
            if reply is not None and telemetry.content.enabled:
                _set_output_content(span, reply, telemetry.content)
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


# Where LangChain's integrations keep the URL they send to, and their default when unset.
_BASE_URL_FIELDS = ("openai_api_base", "anthropic_api_url", "base_url")
_DEFAULT_URLS = {
    "ChatOpenAI": "https://api.openai.com",
    "ChatAnthropic": "https://api.anthropic.com",
}


def server_of(chat_model: object) -> tuple[str, int] | None:
    """The host and port a chat model's calls go to, when its integration says."""
    url: object = None
    for field in _BASE_URL_FIELDS:
        url = getattr(chat_model, field, None)
        if url:
            break
    if not url:
        url = _DEFAULT_URLS.get(type(chat_model).__name__)
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


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


def _set_usage(span: Span, record: LLMCallUsage) -> None:
    usage = record.usage
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)
    span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens)
    span.set_attribute("cleveractors.usage.estimated", usage.estimated)
    if record.cost_usd is not None:
        span.set_attribute("cleveractors.cost.usd", float(record.cost_usd))


def _response_id(reply: AIMessage | None, metadata: Mapping[str, Any]) -> str | None:
    """The provider's id of the reply: in its metadata (a whole reply), or as the message's id
    (a streamed one: the chunks carry it). Never one LangChain made up (`run-...`, `lc_...`)."""
    candidate = metadata.get("id")
    if not isinstance(candidate, str) or not candidate:
        candidate = None if reply is None else reply.id
    if not candidate or candidate.startswith(("run-", "lc_")):
        return None
    return candidate


def _finish_reason(metadata: Mapping[str, Any]) -> str | None:
    """The provider's finish reason (OpenAI `finish_reason`, Anthropic `stop_reason`, Gemini
    `finish_reason`)."""
    for key in ("finish_reason", "stop_reason"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value.lower()
    return None


def _set_input_content(
    span: Span, messages: Sequence[BaseMessage], content: ContentCapture
) -> None:
    system = [_text_part(message) for message in messages if message.type == "system"]
    others = [_message(message) for message in messages if message.type != "system"]
    if system:
        span.set_attribute("gen_ai.system_instructions", content.capped(_json(system)))
    span.set_attribute("gen_ai.input.messages", content.capped(_json(others)))


def _set_output_content(span: Span, reply: AIMessage, content: ContentCapture) -> None:
    output = {**_message(reply), "finish_reason": _finish_reason(reply.response_metadata)}
    span.set_attribute("gen_ai.output.messages", content.capped(_json([output])))


_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _message(message: BaseMessage) -> dict[str, Any]:
    """A message in the conventions' shape: a role and its parts."""
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append(_text_part(message))
    for call in getattr(message, "tool_calls", ()):
        parts.append(
            {"type": "tool_call", "id": call["id"], "name": call["name"], "arguments": call["args"]}
        )
    if message.type == "tool":
        parts = [
            {
                "type": "tool_call_response",
                "id": getattr(message, "tool_call_id", None),
                "response": message.text,
            }
        ]
    return {"role": _ROLES.get(message.type, message.type), "parts": parts}


def _text_part(message: BaseMessage) -> dict[str, Any]:
    return {"type": "text", "content": message.text}


def _json(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def _records_nothing(tracers: trace.TracerProvider, meters: metrics.MeterProvider) -> bool:
    """Whether both global providers are the API's own stand-ins: its proxies (no SDK set yet)
    or its no-ops. The metrics proxy's class is private to the API, so it is told by name."""
    no_tracer = isinstance(tracers, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
    no_meter = isinstance(meters, metrics.NoOpMeterProvider) or (
        type(meters).__name__ == "_ProxyMeterProvider"
    )
    return no_tracer and no_meter
