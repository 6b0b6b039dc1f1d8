"""Steps for the OpenTelemetry traces and metrics of a run: `ChatOpenAI` against a
`ScriptedOpenAIServer`, an executor given the SDK's in-memory span exporter and metric reader."""

from __future__ import annotations

import json
import logging
import os
import random
import subprocess
import sys
import tempfile
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id
from opentelemetry.util.types import Attributes
from sqlalchemy import select, text, update
from support.harness import (
    NAMED_POSITIONS,
    Consumption,
    InSession,
    Stop,
    after_items,
    consume,
    run_guarded,
)

from cleveractors import ActorExecutor, LLMAgent
from cleveractors.store import SqlStore
from cleveractors.store.records import LedgerRow
from cleveractors.store.schema import SCHEMA_VERSION, llm_calls, schema_version
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

_API_KEY_ENV = "CLEVERACTORS_TRACING_TEST_KEY"
# The GenAI metrics conventions' boundaries for the duration, the time to the first chunk and
# the time per output chunk, written out here rather than read from the code under test.
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


class _Lifecycle(SpanProcessor):
    """Counts the starts and ends of every span, by span id: an end that never came or came
    twice shows here (the SDK ignores a second `end()`, so the exporter alone cannot tell)."""

    def __init__(self) -> None:
        self.started: Counter[int] = Counter()
        self.ended: Counter[int] = Counter()

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.started[span.context.span_id] += 1

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.ended[span.context.span_id] += 1


class _NotingSampler(Sampler):
    """Samples every span, noting the name and attributes each was created with: what a
    sampler deciding by them would be shown."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, dict[str, Any]]] = []

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        self.shown.append((name, dict(attributes or {})))
        return ALWAYS_ON.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        return "NotingSampler"


class _AllLogs(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class _WarningLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# -- Given -------------------------------------------------------------------------------------


@given(
    "a tracer provider and a meter provider that keep what they receive, and a sampler that "
    "notes what it is shown"
)
def _given_providers(context: Context) -> None:
    context.exporter = InMemorySpanExporter()
    context.lifecycle = _Lifecycle()
    context.sampler = _NotingSampler()
    context.tracer_provider = TracerProvider(sampler=context.sampler)
    context.tracer_provider.add_span_processor(context.lifecycle)
    context.tracer_provider.add_span_processor(SimpleSpanProcessor(context.exporter))
    context.metric_reader = InMemoryMetricReader()
    context.meter_provider = MeterProvider(metric_readers=[context.metric_reader])
    context.otel_warnings = _WarningLog()
    otel_logger = logging.getLogger("opentelemetry")
    otel_logger.addHandler(context.otel_warnings)
    context.add_cleanup(otel_logger.removeHandler, context.otel_warnings)


@given('the environment holds {name}="{value}"')
def _given_environment(context: Context, name: str, value: str) -> None:
    os.environ[name] = value


def _lookup_then_answer(*, slow: bool = False) -> list[ScriptedReply]:
    call = ScriptedToolCall(
        name="slow_lookup", id="louvre", args={"query": "Louvre", "seconds": 0.3}
    )
    answer = " ".join(f"fact{n}" for n in range(40))
    return [
        ScriptedReply(text="Let me look that up.", tool_calls=(call,)),
        ScriptedReply(text=answer, chunk_delay_s=0.05 if slow else 0.0),
    ]


def _executor(
    context: Context,
    script: list[ScriptedReply],
    *,
    traced: bool = True,
    records_nothing: bool = False,
    retries: int = 0,
    database: Path | None = None,
    ends_turn: bool = False,
    per_conversation: bool = False,
    limits: dict[str, int] | None = None,
) -> None:
    server = ScriptedOpenAIServer(script, per_conversation=per_conversation)
    server.start()
    context.add_cleanup(server.stop)
    context.server = server
    os.environ[_API_KEY_ENV] = "sk-tracing-test"
    if database is None:
        database = Path(tempfile.mkdtemp(prefix="cleveractors-tracing-")) / "ledger.db"
    config = {
        "name": "museum-guide",
        "agent": {
            "type": "llm",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "base_url": server.base_url,
            "api_key_env": _API_KEY_ENV,
            "system_prompt": "You are a museum guide who knows every room of every museum.",
            "max_retries": retries,
            "retry_backoff_s": 0.01,
            **(limits or {}),
            "tools": [
                {
                    "name": "slow_lookup",
                    "handler": "cleveractors.demo:slow_lookup",
                    "ends_turn": ends_turn,
                }
            ],
        },
        "store": {"url": f"sqlite:///{database}"},
    }
    providers: dict[str, Any] = {}
    if traced:
        providers = {
            "tracer_provider": context.tracer_provider,
            "meter_provider": context.meter_provider,
        }
    if records_nothing:
        providers = {
            "tracer_provider": trace.NoOpTracerProvider(),
            "meter_provider": metrics.NoOpMeterProvider(),
        }
    context.executor = ActorExecutor.from_config(config, **providers)


@given(
    "a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and "
    "whose second answers"
)
def _given_two_rounds(context: Context) -> None:
    _executor(context, _lookup_then_answer())


@given(
    "a traced actor over a scripted OpenAI server whose first reply calls slow_lookup and "
    "whose second answers slowly"
)
def _given_two_rounds_slowly(context: Context) -> None:
    _executor(context, _lookup_then_answer(slow=True))


@given(
    "a traced actor retrying once over a scripted OpenAI server whose first reply is refused "
    "with HTTP {status:d} and whose second answers"
)
def _given_refused_then_answered(context: Context, status: int) -> None:
    script = [ScriptedReply(error="overloaded", error_status=status), ScriptedReply(text="Hi.")]
    _executor(context, script, retries=1)


@given(
    "a traced actor over a scripted OpenAI server whose reply is cut off after {chunks:d} chunks"
)
def _given_cut_off(context: Context, chunks: int) -> None:
    _executor(
        context, [ScriptedReply(text="one two three four five six", cut_off_after_chunks=chunks)]
    )


@given(
    "an actor with a store over a scripted OpenAI server whose first reply calls slow_lookup and "
    "whose second answers, and no tracer provider"
)
def _given_untraced(context: Context) -> None:
    _executor(context, _lookup_then_answer(), traced=False)


@given(
    "an actor with a store over a scripted OpenAI server whose first reply calls slow_lookup and "
    "whose second answers, given providers that record nothing"
)
def _given_no_op_providers(context: Context) -> None:
    # Given providers are used as they are: every span is made, and none records.
    _executor(context, _lookup_then_answer(), traced=False, records_nothing=True)


@given(
    "a traced actor whose slow_lookup ends the turn, over a scripted OpenAI server whose reply "
    "calls it twice"
)
def _given_ends_turn(context: Context) -> None:
    calls = tuple(
        ScriptedToolCall(name="slow_lookup", id=name, args={"query": name, "seconds": 0})
        for name in ("louvre", "orsay")
    )
    _executor(context, [ScriptedReply(tool_calls=calls)], ends_turn=True)


@given(
    "a traced actor over a scripted OpenAI server, each conversation of which calls slow_lookup "
    "and then answers"
)
def _given_per_conversation(context: Context) -> None:
    call = ScriptedToolCall(name="slow_lookup", id="louvre", args={"query": "Louvre", "seconds": 0})
    script = [
        ScriptedReply(text="Let me look that up.", tool_calls=(call,)),
        ScriptedReply(text=" ".join(f"fact{n}" for n in range(12))),
    ]
    _executor(context, script, per_conversation=True)


@given(
    "a traced actor that condenses tool outputs over 1 token and allows 1 tool round, over a "
    "scripted OpenAI server whose model calls slow_lookup twice"
)
def _given_pruning_and_synthesis(context: Context) -> None:
    call = ScriptedToolCall(name="slow_lookup", id="louvre", args={"query": "Louvre", "seconds": 0})
    script = [
        ScriptedReply(tool_calls=(call,)),
        ScriptedReply(text="Louvre: a museum."),
        ScriptedReply(tool_calls=(call,)),
        ScriptedReply(text="The Louvre is a museum in Paris."),
    ]
    _executor(context, script, limits={"tool_output_max_tokens": 1, "max_tool_rounds": 1})


@given("a ledger database at schema version 2, made before spans were recorded")
def _given_old_ledger(context: Context) -> None:
    context.database = Path(tempfile.mkdtemp(prefix="cleveractors-tracing-")) / "old.db"

    async def downgrade() -> None:
        store = SqlStore(f"sqlite+aiosqlite:///{context.database}")
        await store.open()
        async with store.engine.begin() as connection:
            for column in ("trace_id", "span_id"):
                await connection.execute(text(f"ALTER TABLE {llm_calls.name} DROP COLUMN {column}"))
            await connection.execute(update(schema_version).values(version=2))
        await store.aclose()

    run_guarded(downgrade())


@given(
    "a traced actor over a scripted OpenAI server using that ledger, whose first reply calls "
    "slow_lookup and whose second answers"
)
def _given_actor_on_old_ledger(context: Context) -> None:
    _executor(context, _lookup_then_answer(), database=context.database)


class _Escape(BaseException):
    """Not an `Exception`: the loop lets it through, as it does `KeyboardInterrupt`."""


class _EscapingModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "escaping"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise AssertionError("only ainvoke is called")

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        # Raised here: langchain-core's own generate path would turn it into an Exception.
        raise _Escape


@given("a traced actor built in code whose model raises a BaseException of its own")
def _given_escaping_model(context: Context) -> None:
    context.executor = ActorExecutor(
        LLMAgent(_EscapingModel(), name="escaper"),
        tracer_provider=context.tracer_provider,
        meter_provider=context.meter_provider,
    )


# -- When --------------------------------------------------------------------------------------


async def _consume_and_read_ledger(context: Context, consuming: Any) -> Consumption:
    async with context.executor:
        consumed: Consumption = await consuming
        context.ledger = (await context.executor.store.usage()).rows
    return consumed


@when('the actor runs "{message}" in {mode} mode')
def _when_runs(context: Context, message: str, mode: str) -> None:
    consuming = consume(context.executor, message, mode=mode)
    context.outcome = run_guarded(_consume_and_read_ledger(context, consuming))


@when('the actor runs "{message}" in {mode} mode in session "{session_id}"')
def _when_runs_in_session(context: Context, message: str, mode: str, session_id: str) -> None:
    target = InSession(context.executor, session_id)
    consuming = consume(target, message, mode=mode)
    context.outcome = run_guarded(_consume_and_read_ledger(context, consuming))


@when('the actor runs "{message}" in blocking mode, and the BaseException escapes')
def _when_escapes(context: Context, message: str) -> None:
    async def run() -> None:
        try:
            await context.executor.execute(message)
        except _Escape:
            return
        raise AssertionError("the BaseException did not escape")

    run_guarded(run())


@when("{count:d} streamed runs are each stopped after a random number of events")
def _when_random_stops(context: Context, count: int) -> None:
    chooser = random.Random(19)
    everything = _AllLogs()
    logging.getLogger().addHandler(everything)
    context.add_cleanup(logging.getLogger().removeHandler, everything)
    context.all_logs = everything

    async def runs() -> list[Consumption]:
        async with context.executor:
            consumed = []
            for number in range(count):
                stop = Stop("break", at=after_items(chooser.randint(1, 14)))
                message = f"Run {number}: look up the Louvre"
                consumed.append(await consume(context.executor, message, mode="events", stop=stop))
            return consumed

    context.runs = run_guarded(runs())


@when("the traced run is stopped at the {position}")
def _when_stops(context: Context, position: str) -> None:
    stop = Stop("break", at=NAMED_POSITIONS[position])
    consuming = consume(context.executor, "Look up the Louvre", mode="events", stop=stop)
    context.outcome = run_guarded(_consume_and_read_ledger(context, consuming))
    assert context.outcome.stopped_early, context.outcome.events


# -- Then: the tree ----------------------------------------------------------------------------


def _spans(context: Context) -> list[ReadableSpan]:
    return list(context.exporter.get_finished_spans())


def _named(context: Context, prefix: str) -> list[ReadableSpan]:
    # A chat span whose model is unknown is named `chat` alone.
    return [span for span in _spans(context) if f"{span.name} ".startswith(prefix)]


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _result(context: Context) -> Any:
    result = context.outcome.result
    assert result is not None, f"no result: {context.outcome}"
    return result


@then("the traced run answered")
def _then_answered(context: Context) -> None:
    assert _result(context).status == "answered", _result(context).error


@then("the traced run failed")
def _then_failed(context: Context) -> None:
    assert _result(context).status == "failed", _result(context)


@then("the spans are, in the order they ended:")
def _then_tree(context: Context) -> None:
    spans = _spans(context)
    names = {span.context.span_id: span.name for span in spans if span.context is not None}
    seen = [
        {
            "name": span.name,
            "kind": SpanKind(span.kind).name,
            "parent": "(none)" if span.parent is None else names.get(span.parent.span_id, "?"),
        }
        for span in spans
    ]
    expected = [dict(row.as_dict()) for row in context.table]
    assert seen == expected, f"{seen}\n!=\n{expected}"


@then("every span was ended exactly once, and all share one trace")
def _then_ended_once(context: Context) -> None:
    lifecycle = context.lifecycle
    assert lifecycle.started, "no span was started"
    assert lifecycle.started == lifecycle.ended, (lifecycle.started, lifecycle.ended)
    assert set(lifecycle.ended.values()) == {1}, lifecycle.ended
    assert not context.otel_warnings.messages, context.otel_warnings.messages
    traces = {span.context.trace_id for span in _spans(context) if span.context is not None}
    assert len(traces) == 1, traces


@then(
    "the run span has cleveractors.run.outcome \"{outcome}\", the run's id and the run's totals, "
    "and no gen_ai.usage attribute"
)
def _then_run_span(context: Context, outcome: str) -> None:
    (run_span,) = _named(context, "invoke_agent ")
    attributes = _attributes(run_span)
    result = _result(context)
    assert attributes["cleveractors.run.outcome"] == outcome, attributes
    assert attributes["cleveractors.run.id"] == result.run_id, attributes
    assert attributes["gen_ai.agent.name"] == "museum-guide", attributes
    assert attributes["cleveractors.run.prompt_tokens"] == result.prompt_tokens, attributes
    assert attributes["cleveractors.run.completion_tokens"] == result.completion_tokens
    assert Decimal(str(attributes["cleveractors.run.cost_usd"])) == result.cost_usd
    assert "gen_ai.conversation.id" not in attributes, "a session id was invented"
    assert not [key for key in attributes if key.startswith("gen_ai.usage")], attributes
    assert run_span.status.status_code == StatusCode.UNSET, run_span.status


@then(
    'each chat span has gen_ai.operation.name "chat", gen_ai.provider.name "{provider}", '
    'gen_ai.request.model "{model}", gen_ai.request.stream {stream}, the server\'s address '
    "and port, a response model, {response_id} and a finish reason"
)
def _then_chat_attributes(
    context: Context, provider: str, model: str, stream: str, response_id: str
) -> None:
    chats = _named(context, "chat ")
    assert chats, "no chat span"
    for span in chats:
        attributes = _attributes(span)
        assert span.kind == SpanKind.CLIENT, span.kind
        assert attributes["gen_ai.operation.name"] == "chat", attributes
        assert attributes["gen_ai.provider.name"] == provider, attributes
        assert attributes["gen_ai.request.model"] == model, attributes
        assert attributes["gen_ai.request.stream"] is (stream == "true"), attributes
        assert attributes["server.address"] == "127.0.0.1", attributes
        assert f":{attributes['server.port']}/" in context.server.base_url, attributes
        assert str(attributes["gen_ai.response.model"]).startswith(model), attributes
        if response_id == "a response id":
            assert str(attributes["gen_ai.response.id"]).startswith("chatcmpl-"), attributes
        else:
            assert "gen_ai.response.id" not in attributes, attributes
        assert attributes["gen_ai.response.finish_reasons"], attributes


@then(
    'the sampler saw each chat span\'s gen_ai.operation.name "chat", gen_ai.provider.name '
    '"{provider}", gen_ai.request.model "{model}", server address and port before it was created'
)
def _then_sampler_saw(context: Context, provider: str, model: str) -> None:
    shown = [attributes for name, attributes in context.sampler.shown if name.startswith("chat")]
    assert len(shown) == len(_named(context, "chat ")) == 2, context.sampler.shown
    for attributes in shown:
        assert attributes["gen_ai.operation.name"] == "chat", attributes
        assert attributes["gen_ai.provider.name"] == provider, attributes
        assert attributes["gen_ai.request.model"] == model, attributes
        assert attributes["server.address"] == "127.0.0.1", attributes
        assert f":{attributes['server.port']}/" in context.server.base_url, attributes


def _time_to_first_chunk(span: ReadableSpan) -> float:
    """The span's gen_ai.response.time_to_first_chunk, checked against its own duration."""
    value = _attributes(span)["gen_ai.response.time_to_first_chunk"]
    assert span.start_time is not None
    assert span.end_time is not None
    duration = (span.end_time - span.start_time) / 1e9
    assert 0 < value < duration, (value, duration)
    return float(value)


@then("each chat span has gen_ai.response.time_to_first_chunk, above 0 and below its span")
def _then_first_chunk(context: Context) -> None:
    chats = _named(context, "chat ")
    assert chats, "no chat span"
    for span in chats:
        _time_to_first_chunk(span)


@then("each chat span has no gen_ai.response.time_to_first_chunk")
def _then_no_first_chunk(context: Context) -> None:
    chats = _named(context, "chat ")
    assert chats, "no chat span"
    for span in chats:
        assert "gen_ai.response.time_to_first_chunk" not in _attributes(span), span.attributes


@then('the chat spans are rounds {first:d} and {second:d}, attempt 1, purpose "{purpose}"')
def _then_chat_rounds(context: Context, first: int, second: int, purpose: str) -> None:
    chats = [_attributes(span) for span in _named(context, "chat ")]
    assert [chat["cleveractors.call.round"] for chat in chats] == [first, second], chats
    assert {chat["cleveractors.call.attempt"] for chat in chats} == {1}, chats
    assert {chat["cleveractors.call.purpose"] for chat in chats} == {purpose}, chats


@then("the chat spans are attempts {first:d} and {second:d} of round {round_number:d}")
def _then_chat_attempts(context: Context, first: int, second: int, round_number: int) -> None:
    chats = [_attributes(span) for span in _named(context, "chat ")]
    assert [chat["cleveractors.call.attempt"] for chat in chats] == [first, second], chats
    assert {chat["cleveractors.call.round"] for chat in chats} == {round_number}, chats


@then(
    'the tool span has gen_ai.tool.name "{name}", gen_ai.tool.call.id "{call_id}" and '
    'gen_ai.tool.type "{kind}"'
)
def _then_tool_span(context: Context, name: str, call_id: str, kind: str) -> None:
    (span,) = _named(context, "execute_tool ")
    attributes = _attributes(span)
    assert attributes["gen_ai.tool.name"] == name, attributes
    assert attributes["gen_ai.tool.call.id"] == call_id, attributes
    assert attributes["gen_ai.tool.type"] == kind, attributes
    assert span.status.status_code == StatusCode.UNSET, span.status


def _chat_span(context: Context, number: int) -> ReadableSpan:
    chats = _named(context, "chat ")
    assert len(chats) >= number, f"{len(chats)} chat spans"
    return chats[number - 1]


@then(
    'chat span {number:d} ended with status ERROR, error.type "{kind}" and finish reason '
    '"{finish}", {prompt:d} input and {completion:d} output tokens'
)
def _then_chat_refused(
    context: Context, number: int, kind: str, finish: str, prompt: int, completion: int
) -> None:
    span = _chat_span(context, number)
    attributes = _attributes(span)
    assert span.status.status_code == StatusCode.ERROR, span.status
    assert attributes["error.type"] == kind, attributes
    assert attributes["gen_ai.response.finish_reasons"] == (finish,), attributes
    assert attributes["gen_ai.usage.input_tokens"] == prompt, attributes
    assert attributes["gen_ai.usage.output_tokens"] == completion, attributes


@then('chat span {number:d} is an ERROR with error.type "{kind}"')
def _then_chat_error(context: Context, number: int, kind: str) -> None:
    span = _chat_span(context, number)
    assert span.status.status_code == StatusCode.ERROR, span.status
    assert _attributes(span)["error.type"] == kind, span.attributes


@then("the chat spans' purposes are round, pruning, round, synthesis, each a child of the run span")
def _then_purposes(context: Context) -> None:
    (run_span,) = _named(context, "invoke_agent ")
    chats = _named(context, "chat ")
    purposes = [_attributes(span)["cleveractors.call.purpose"] for span in chats]
    assert purposes == ["round", "pruning", "round", "synthesis"], purposes
    assert run_span.context is not None
    for span in chats:
        assert span.parent is not None, span.name
        assert span.parent.span_id == run_span.context.span_id, span.parent


@then("chat span {number:d} ended with status UNSET")
def _then_chat_ok(context: Context, number: int) -> None:
    span = _chat_span(context, number)
    assert span.status.status_code == StatusCode.UNSET, span.status
    assert "error.type" not in _attributes(span)


@then("chat span {number:d} ended with status ERROR and its usage flagged estimated")
def _then_chat_estimated(context: Context, number: int) -> None:
    span = _chat_span(context, number)
    attributes = _attributes(span)
    assert span.status.status_code == StatusCode.ERROR, span.status
    assert attributes["error.type"], attributes
    assert attributes["cleveractors.usage.estimated"] is True, attributes
    assert attributes["gen_ai.usage.input_tokens"] > 0, attributes
    assert attributes["gen_ai.usage.output_tokens"] > 0, attributes


@then(
    'the run span ended with status ERROR, cleveractors.run.outcome "{outcome}" and an error.type'
)
def _then_run_error(context: Context, outcome: str) -> None:
    (span,) = _named(context, "invoke_agent ")
    attributes = _attributes(span)
    assert span.status.status_code == StatusCode.ERROR, span.status
    assert attributes["cleveractors.run.outcome"] == outcome, attributes
    assert attributes["error.type"], attributes


@then('the run span has gen_ai.conversation.id "{session_id}"')
def _then_conversation(context: Context, session_id: str) -> None:
    (run_span,) = _named(context, "invoke_agent ")
    assert _attributes(run_span)["gen_ai.conversation.id"] == session_id, run_span.attributes


@then('the tool span ended with status ERROR and error.type "{kind}"')
def _then_tool_error(context: Context, kind: str) -> None:
    (span,) = _named(context, "execute_tool ")
    assert span.status.status_code == StatusCode.ERROR, span.status
    assert _attributes(span)["error.type"] == kind, span.attributes


@then(
    "tool span {first:d} ended with status UNSET and tool span {second:d} with status ERROR and "
    'error.type "{kind}"'
)
def _then_tool_statuses(context: Context, first: int, second: int, kind: str) -> None:
    tools = _named(context, "execute_tool ")
    assert len(tools) == 2, [span.name for span in tools]
    assert tools[first - 1].status.status_code == StatusCode.UNSET, tools[first - 1].status
    skipped = tools[second - 1]
    assert skipped.status.status_code == StatusCode.ERROR, skipped.status
    assert _attributes(skipped)["error.type"] == kind, skipped.attributes
    assert _attributes(skipped)["gen_ai.tool.call.id"] == "orsay", skipped.attributes


@then("every span was ended exactly once, in one trace per run")
def _then_ended_once_per_run(context: Context) -> None:
    lifecycle = context.lifecycle
    assert lifecycle.started == lifecycle.ended, (lifecycle.started, lifecycle.ended)
    assert set(lifecycle.ended.values()) == {1}, lifecycle.ended
    assert not context.otel_warnings.messages, context.otel_warnings.messages
    runs = _named(context, "invoke_agent ")
    assert len(runs) == len(context.runs), len(runs)
    assert len({span.context.trace_id for span in runs if span.context is not None}) == len(runs)


@then("nothing was logged about a context that could not be detached")
def _then_no_detach(context: Context) -> None:
    detached = [line for line in context.all_logs.messages if "detach" in line.lower()]
    assert not detached, detached


@then("each run's chat spans' usage equals its result's")
def _then_usage_per_run(context: Context) -> None:
    trace_of = {
        _attributes(span)["cleveractors.run.id"]: span.context.trace_id
        for span in _named(context, "invoke_agent ")
        if span.context is not None
    }
    for consumed in context.runs:
        result = consumed.result
        assert result is not None, consumed
        trace_id = trace_of[result.run_id]
        chats = [
            span
            for span in _named(context, "chat ")
            if span.context is not None and span.context.trace_id == trace_id
        ]
        usage = [_span_usage(span)[:2] for span in chats]
        records = [(c.usage.prompt_tokens, c.usage.completion_tokens) for c in result.usage_by_call]
        assert usage == records, (result.run_id, usage, records)


@then("the ledger database is at the current schema version")
def _then_current_schema(context: Context) -> None:
    async def read() -> int:
        store = SqlStore(f"sqlite+aiosqlite:///{context.database}")
        await store.open()
        try:
            async with store.engine.connect() as connection:
                version = await connection.execute(select(schema_version.c.version))
                return int(version.scalar_one())
        finally:
            await store.aclose()

    assert run_guarded(read()) == SCHEMA_VERSION


# -- Then: the bill ----------------------------------------------------------------------------


def _span_usage(span: ReadableSpan) -> tuple[int, int, int, int, bool]:
    attributes = _attributes(span)
    return (
        attributes["gen_ai.usage.input_tokens"],
        attributes["gen_ai.usage.output_tokens"],
        attributes["gen_ai.usage.cache_read.input_tokens"],
        attributes["gen_ai.usage.reasoning.output_tokens"],
        attributes["cleveractors.usage.estimated"],
    )


@then("the chat spans' usage and cost equal the result's calls and totals")
def _then_usage_agrees(context: Context) -> None:
    result = _result(context)
    chats = _named(context, "chat ")
    records = [
        (
            call.usage.prompt_tokens,
            call.usage.completion_tokens,
            call.usage.cache_read_tokens,
            call.usage.reasoning_tokens,
            call.usage.estimated,
        )
        for call in result.usage_by_call
    ]
    assert [_span_usage(span) for span in chats] == records, (chats, records)
    assert sum(_attributes(span)["gen_ai.usage.input_tokens"] for span in chats) == (
        result.prompt_tokens
    )
    assert sum(_attributes(span)["gen_ai.usage.output_tokens"] for span in chats) == (
        result.completion_tokens
    )
    costs = [_attributes(span).get("cleveractors.cost.usd") for span in chats]
    expected = [
        None if call.cost_usd is None else float(call.cost_usd) for call in result.usage_by_call
    ]
    assert costs == expected, (costs, expected)
    ledger: tuple[LedgerRow, ...] = context.ledger
    assert [(row.prompt_tokens, row.completion_tokens) for row in ledger] == [
        record[:2] for record in records
    ], ledger


@then("each ledger row names the trace and the span of its chat span")
def _then_ledger_links(context: Context) -> None:
    chats = _named(context, "chat ")
    ids = [
        (format_trace_id(span.context.trace_id), format_span_id(span.context.span_id))
        for span in chats
        if span.context is not None
    ]
    rows = [(row.trace_id, row.span_id) for row in context.ledger]
    assert rows == ids, (rows, ids)
    calls = [(call.trace_id, call.span_id) for call in _result(context).usage_by_call]
    assert calls == ids, (calls, ids)


@then("the ledger rows name no trace and no span")
def _then_ledger_unlinked(context: Context) -> None:
    assert context.ledger, "no ledger rows"
    assert all(row.trace_id is None and row.span_id is None for row in context.ledger)


# -- Then: content -----------------------------------------------------------------------------


@then(
    "no span has gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions "
    "or tool arguments and results"
)
def _then_no_content(context: Context) -> None:
    for span in _spans(context):
        present = [key for key in _CONTENT_KEYS if key in _attributes(span)]
        assert not present, (span.name, present)


@then(
    'chat span {number:d} has gen_ai.input.messages naming "{word}" and gen_ai.output.messages '
    'naming "{tool}"'
)
def _then_content(context: Context, number: int, word: str, tool: str) -> None:
    attributes = _attributes(_chat_span(context, number))
    assert word in attributes["gen_ai.input.messages"], attributes
    assert tool in attributes["gen_ai.output.messages"], attributes


@then("chat span {number:d} has gen_ai.system_instructions")
def _then_system(context: Context, number: int) -> None:
    attributes = _attributes(_chat_span(context, number))
    assert "museum guide" in attributes["gen_ai.system_instructions"], attributes


@then("the tool span has its arguments and its result")
def _then_tool_content(context: Context) -> None:
    (span,) = _named(context, "execute_tool ")
    attributes = _attributes(span)
    assert "Louvre" in attributes["gen_ai.tool.call.arguments"], attributes
    assert attributes["gen_ai.tool.call.result"], attributes


@then("every content attribute is at most {size:d} bytes and more than that is marked truncated")
def _then_capped(context: Context, size: int) -> None:
    truncated = 0
    for span in _spans(context):
        for key in _CONTENT_KEYS:
            value = _attributes(span).get(key)
            if value is None:
                continue
            kept, _, marker = str(value).partition("...[truncated ")
            assert len(kept.encode()) <= size, (key, value)
            truncated += bool(marker)
    assert truncated, "nothing was long enough to be truncated"


# -- Then: metrics -----------------------------------------------------------------------------


def _points(context: Context, name: str) -> list[Any]:
    data = context.metric_reader.get_metrics_data()
    points: list[Any] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    points += list(metric.data.data_points)
    return points


@then("the metric {name} has {count:d} measurements with the conventions' buckets")
def _then_histogram(context: Context, name: str, count: int) -> None:
    points = _points(context, name)
    assert sum(point.count for point in points) == count, points
    for point in points:
        assert tuple(point.explicit_bounds) == _DURATION_BUCKETS, point.explicit_bounds


@then(
    "the metric gen_ai.client.operation.time_to_first_chunk sums to the chat spans' "
    "gen_ai.response.time_to_first_chunk"
)
def _then_first_chunk_metric(context: Context) -> None:
    points = _points(context, "gen_ai.client.operation.time_to_first_chunk")
    spans = sum(_time_to_first_chunk(span) for span in _named(context, "chat "))
    assert abs(sum(point.sum for point in points) - spans) < 1e-9, (points, spans)


@then("the metric {name} has {count:d} measurements")
def _then_measurements(context: Context, name: str, count: int) -> None:
    points = _points(context, name)
    assert sum(point.count for point in points) == count, points


@then(
    "the metric gen_ai.client.token.usage sums to the result's prompt tokens as input and its "
    "completion tokens as output"
)
def _then_token_metric(context: Context) -> None:
    by_type: Counter[str] = Counter()
    for point in _points(context, "gen_ai.client.token.usage"):
        by_type[point.attributes["gen_ai.token.type"]] += point.sum
        assert tuple(point.explicit_bounds)[:3] == (1, 4, 16), point.explicit_bounds
    result = _result(context)
    assert by_type == {"input": result.prompt_tokens, "output": result.completion_tokens}


@then("the metric cleveractors.client.cost sums to the result's cost")
def _then_cost_metric(context: Context) -> None:
    total = sum(point.value for point in _points(context, "cleveractors.client.cost"))
    assert abs(total - float(_result(context).cost_usd)) < 1e-12, total


@then("no metric attribute names a run, a session or a user")
def _then_low_cardinality(context: Context) -> None:
    allowed = {
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.token.type",
        "error.type",
    }
    names = [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.time_to_first_chunk",
        "cleveractors.client.cost",
    ]
    for name in names:
        for point in _points(context, name):
            extra = set(point.attributes) - allowed
            assert not extra, (name, extra)
            values = json.dumps(dict(point.attributes))
            assert _result(context).run_id not in values, values


_GLOBAL_PROVIDER_PROGRAM = """
import asyncio, json
from opentelemetry import metrics, trace
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from cleveractors import ActorExecutor

actor = {"name": "global", "agent": {"provider": "stub", "script": [{"text": "Hi."}]}}
executor = ActorExecutor.from_config(actor)
spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
if WHICH == "tracer provider":
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(provider)
else:
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
asyncio.run(executor.execute("Hello"))
data = reader.get_metrics_data() if WHICH == "meter provider" else None
scopes = [sm for rm in (data.resource_metrics if data else ()) for sm in rm.scope_metrics]
names = sorted({m.name for sm in scopes for m in sm.metrics})
print(json.dumps({"spans": sorted(s.name for s in spans.get_finished_spans()), "metrics": names}))
"""


@when(
    "a fresh interpreter builds a stub executor, then sets the SDK's {provider} as the global "
    "one, and runs it"
)
def _when_global_provider(context: Context, provider: str) -> None:
    program = f"WHICH = {provider!r}\n" + _GLOBAL_PROVIDER_PROGRAM
    ran = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    context.fresh_recorded = json.loads(ran.stdout.strip().splitlines()[-1])


@then("that interpreter recorded the run's invoke_agent and chat spans")
def _then_global_spans(context: Context) -> None:
    assert context.fresh_recorded["spans"] == ["chat scripted", "invoke_agent global"], (
        context.fresh_recorded
    )


@then("that interpreter recorded the token usage metric and no span")
def _then_global_metrics(context: Context) -> None:
    assert "gen_ai.client.token.usage" in context.fresh_recorded["metrics"], context.fresh_recorded
    assert context.fresh_recorded["spans"] == [], context.fresh_recorded
