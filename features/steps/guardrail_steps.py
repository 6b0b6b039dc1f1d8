"""Steps for guardrails: the actor's guardrails as config entries (functions of
`support.guardrail_checks`, or a judge actor file beside the actor's), the run over the real wire
(`ChatOpenAI` against a `ScriptedOpenAIServer`) and over HTTP (the web app's routes)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import yaml
from behave import given, then, when
from behave.runner import Context
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_openai import ChatOpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support import guardrail_checks
from support.harness import consume, run_guarded

from cleveractors import (
    ActorExecutor,
    ConfigurationError,
    GuardrailTripped,
    InputGuardrail,
    LLMAgent,
    OutputGuardrail,
)
from cleveractors.events import OutputRetracted, TextDelta
from cleveractors.store import SqlStore
from cleveractors.testing import ScriptedChatModel, ScriptedOpenAIServer, ScriptedReply
from cleveractors.web import create_app

_CHECKS = "support.guardrail_checks"
_API_KEY_ENV = "CLEVERACTORS_GUARDRAIL_TEST_KEY"
_OPTIONS = {"in parallel": "run_in_parallel", "held": "hold_until_checked"}


def _folder(context: Context) -> Path:
    folder: Path | None = getattr(context, "guardrail_folder", None)
    if folder is None:
        folder = context.guardrail_folder = Path(tempfile.mkdtemp(prefix="guardrails-"))
        context.add_cleanup(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _saved_actor(context: Context) -> Path:
    path = _folder(context) / "actor.yaml"
    plain = json.loads(json.dumps(context.actor, default=_plain))
    path.write_text(yaml.safe_dump(plain), encoding="utf-8")
    return path


def _plain(value: Any) -> Any:
    """A scripted reply as the actor file writes it."""
    return value.model_dump(mode="json", exclude_defaults=True)


# -- Given -------------------------------------------------------------------------------------


@given("the actor has these guardrails:")
def _given_guardrails(context: Context) -> None:
    agent = context.actor["agent"]
    for row in context.table:
        entry: dict[str, Any] = {"function": f"{_CHECKS}:{row['function']}"}
        if row.get("name"):
            entry["name"] = row["name"]
        if row.get("option"):
            entry[_OPTIONS[row["option"]]] = True
        agent.setdefault(f"{row['stage']}_guardrails", []).append(entry)


@given("the actor's runs are traced into memory")
def _given_traced(context: Context) -> None:
    context.spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(context.spans))
    context.executor = ActorExecutor.from_config(context.actor, tracer_provider=provider)


@given('the actor\'s answer is judged by "{file}", an actor whose model replies "{verdict}"')
def _given_judge(context: Context, file: str, verdict: str) -> None:
    _judged_by(context, file, {"text": verdict})


@given('the actor\'s answer is judged by "{file}", an actor whose model fails with "{error}"')
def _given_failing_judge(context: Context, file: str, error: str) -> None:
    _judged_by(context, file, {"error": error, "error_status": 500})


def _judged_by(context: Context, file: str, reply: dict[str, Any]) -> None:
    judge = {
        "name": "tone-judge",
        "agent": {
            "provider": "stub",
            "system_prompt": "You judge the tone of answers.",
            "max_retries": 0,
            "script": [reply],
        },
    }
    (_folder(context) / file).write_text(yaml.safe_dump(judge), encoding="utf-8")
    context.actor["agent"]["output_guardrails"] = [{"judge": file}]
    context.executor = ActorExecutor.from_config(_saved_actor(context))


@given("the module {module} beside the actor file holds this guardrail:")
def _given_module_beside(context: Context, module: str) -> None:
    (_folder(context) / f"{module}.py").write_text(context.text, encoding="utf-8")


@given("a scripted OpenAI server streaming a long answer slowly, asked by ChatOpenAI")
def _given_slow_server(context: Context) -> None:
    words = " ".join(f"word{n}" for n in range(200))
    server = ScriptedOpenAIServer([ScriptedReply(text=words, chunk_delay_s=0.05)])
    server.start()
    context.add_cleanup(server.stop)
    context.server = server


@given(
    "an actor over that wire whose input guardrail trips beside the model call, storing to SQLite"
)
def _given_wire_actor(context: Context) -> None:
    os.environ[_API_KEY_ENV] = "sk-guardrail-test"
    model = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=context.server.base_url,
        api_key=os.environ[_API_KEY_ENV],  # type: ignore[arg-type]  # pydantic SecretStr accepts str
        stream_usage=True,
        max_retries=0,
        callbacks=[_FirstToken()],
    )
    guard = InputGuardrail(guardrail_checks.trip_once_model_streams, run_in_parallel=True)
    context.store_url = f"sqlite:///{_folder(context) / 'store.db'}"
    context.executor = ActorExecutor(
        LLMAgent(model, name="wire-actor", input_guardrails=[guard]),
        store=SqlStore(context.store_url),
    )


class _FirstToken(AsyncCallbackHandler):
    """Tells the guardrail that the model call is under way: its first token arrived."""

    async def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        guardrail_checks.model_streaming.set()


@given('an actor built in code whose typed answer is "{reply}", checked by too_hot')
def _given_typed_actor(context: Context, reply: str) -> None:
    agent = LLMAgent(
        ScriptedChatModel(replies=[ScriptedReply(text=reply)]),
        output_type=guardrail_checks.Weather,
        output_mode="prompted",
        output_guardrails=[guardrail_checks.too_hot],
    )
    context.executor = ActorExecutor(agent)


# -- When --------------------------------------------------------------------------------------


_JUDGES: dict[str, dict[str, Any]] = {
    "judge.yaml": {"name": "j", "agent": {"provider": "stub", "script": [{"text": "PASS"}]}},
    "self_judge.yaml": {
        "name": "s",
        "agent": {
            "provider": "stub",
            "script": [{"text": "PASS"}],
            "output_guardrails": [{"judge": "self_judge.yaml"}],
        },
    },
    "broken.yaml": {"name": "b", "agent": {"provider": "nobody"}},
}
"""The judge files beside the actor: a valid one, one that judges with itself, an invalid one."""


@when("the actor file is loaded with this {stage} guardrail entry: {entry}")
def _when_loaded(context: Context, stage: str, entry: str) -> None:
    for file, judge in _JUDGES.items():
        (_folder(context) / file).write_text(yaml.safe_dump(judge), encoding="utf-8")
    given = json.loads(entry)
    context.actor["agent"][f"{stage}_guardrails"] = given if isinstance(given, list) else [given]
    try:
        ActorExecutor.from_config(_saved_actor(context))
    except ConfigurationError as exc:
        context.load_error = exc
    else:
        context.load_error = None


def _two_named_alike() -> object:
    check = guardrail_checks.always_pass
    return LLMAgent(ScriptedChatModel(replies=[]), input_guardrails=[check, check])


_MADE_IN_CODE: dict[str, Callable[[], object]] = {
    "InputGuardrail()": lambda: InputGuardrail(),
    "OutputGuardrail(42)": lambda: OutputGuardrail(42),  # type: ignore[arg-type]  # on purpose
    "an LLMAgent with always_pass twice": _two_named_alike,
}


@when("a guardrail is made in code as {what}")
def _when_made(context: Context, what: str) -> None:
    try:
        _MADE_IN_CODE[what]()
    except ConfigurationError as exc:
        context.load_error = exc
    else:
        context.load_error = None


@when('the actor, loaded from its file, is asked "{message}" in {mode} mode')
def _when_file_asked(context: Context, message: str, mode: str) -> None:
    context.executor = ActorExecutor.from_config(_saved_actor(context))
    context.execute_steps(f'When the actor is asked "{message}" in {mode} mode')


@when('the typed actor is asked "{message}" with the deps {deps}')
def _when_asked_with_deps(context: Context, message: str, deps: str) -> None:
    executor: ActorExecutor = context.executor

    async def ask() -> Any:
        try:
            return await executor.execute(message, deps=json.loads(deps)), None
        except GuardrailTripped as tripped:
            return executor.last_result, tripped

    result, error = asyncio.run(ask())
    context.outcome = SimpleNamespace(result=result, error=error, events=[])


@when('the wire actor is asked "{message}" in events mode')
def _when_wire_asked(context: Context, message: str) -> None:
    async def ask() -> Any:
        guardrail_checks.model_streaming = asyncio.Event()
        return await consume(context.executor, message, mode="events")

    context.outcome = run_guarded(ask())


@when('the web app serving the actor is sent "{message}" to {path}')
def _when_http(context: Context, message: str, path: str) -> None:
    executor = ActorExecutor.from_config(context.actor)
    route = path.removesuffix(", streamed")
    if route == "/chat":
        body: dict[str, Any] = {"message": message}
    elif route == "/ai-sdk":
        parts = [{"type": "text", "text": message}]
        body = {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": parts}]}
    elif route == "/ag-ui":
        messages = [{"id": "m1", "role": "user", "content": message}]
        body = {"threadId": "t1", "runId": "r1", "messages": messages}
    else:
        body = {
            "model": context.actor["name"],
            "messages": [{"role": "user", "content": message}],
            "stream": path.endswith("streamed"),
        }

    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(executor))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post(route, json=body)

    context.response = asyncio.run(exchange())


# -- Then --------------------------------------------------------------------------------------


def _tripped(context: Context) -> GuardrailTripped:
    error = context.outcome.error
    assert isinstance(error, GuardrailTripped), f"not a tripwire: {error!r}"
    return error


@then('the run ended with GuardrailTripped: the {stage} guardrail "{name}", because "{reason}"')
def _then_tripped(context: Context, stage: str, name: str, reason: str) -> None:
    error = _tripped(context)
    assert (error.stage, error.guardrail, error.reason) == (stage, name, reason), vars(error)
    result = context.outcome.result
    assert result is not None, context.outcome
    assert result.error is not None, result
    assert result.error.type == "GuardrailTripped", result.error


@then("the answer is the object {expected}")
def _then_object(context: Context, expected: str) -> None:
    assert context.outcome.error is None, context.outcome.error
    assert context.outcome.result.output.model_dump() == json.loads(expected)


@then("the run's calls are billed as: {calls}")
def _then_calls(context: Context, calls: str) -> None:
    result = context.outcome.result
    seen = ", ".join(f"{call.purpose} {call.status}" for call in result.usage_by_call)
    assert seen == calls, seen
    assert result.total_tokens == sum(c.usage.total_tokens for c in result.usage_by_call), result


@then("nothing was billed")
def _then_nothing_billed(context: Context) -> None:
    assert context.outcome.result.usage_by_call == (), context.outcome.result


@then("no text reached the caller")
def _then_no_text(context: Context) -> None:
    events = context.outcome.events
    assert not any(isinstance(event, TextDelta) for event in events), events


@then('text reached the caller, then output_retracted names "{name}" and "{reason}"')
def _then_retracted(context: Context, name: str, reason: str) -> None:
    events = context.outcome.events
    kinds = [event.kind for event in events]
    assert "text_delta" in kinds, kinds
    assert "output_retracted" in kinds, kinds
    assert kinds.index("text_delta") < kinds.index("output_retracted"), kinds
    (retracted,) = [event for event in events if isinstance(event, OutputRetracted)]
    assert (retracted.guardrail, retracted.reason) == (name, reason), retracted


@then("no output_retracted event was sent")
def _then_not_retracted(context: Context) -> None:
    kinds = [event.kind for event in context.outcome.events]
    assert "output_retracted" not in kinds, kinds


@then("the text reached the caller after the model's call was billed")
def _then_text_after_billing(context: Context) -> None:
    kinds = [event.kind for event in context.outcome.events]
    assert "text_delta" in kinds, kinds
    assert kinds.index("usage_recorded") < kinds.index("text_delta"), kinds


@then('making it failed with a ConfigurationError saying "{text}"')
@then('loading failed with a ConfigurationError saying "{text}"')
def _then_load_failed(context: Context, text: str) -> None:
    error = context.load_error
    assert error is not None, "the actor loaded"
    assert text in str(error), str(error)


@then("the run's trace holds a span per guardrail with its verdict:")
def _then_spans(context: Context) -> None:
    spans = {span.name: span for span in context.spans.get_finished_spans()}
    for row in context.table:
        span = spans.get(f"guardrail {row['guardrail']}")
        assert span is not None, sorted(spans)
        attributes = span.attributes or {}
        assert attributes["cleveractors.guardrail.stage"] == row["stage"], attributes
        assert str(attributes["cleveractors.guardrail.tripped"]) == row["tripped"], attributes
        assert attributes.get("cleveractors.guardrail.reason", "") == row["reason"], attributes
        run_span = next(s for s in spans.values() if s.name.startswith("invoke_agent"))
        assert span.parent is not None, span
        assert span.parent.span_id == run_span.context.span_id, span.parent


@then('the span "{name}" records the error {error_type}')
def _then_span_error(context: Context, name: str, error_type: str) -> None:
    (span,) = [span for span in context.spans.get_finished_spans() if span.name == name]
    attributes = span.attributes or {}
    assert attributes["error.type"] == error_type, attributes
    assert "cleveractors.guardrail.tripped" not in attributes, attributes


@then('a log line says "{text}"')
def _then_logged(context: Context, text: str) -> None:
    lines = [record.getMessage() for record in context.log_records]
    assert any(text in line for line in lines), lines


@then("the store's ledger holds the cancelled call, its tokens estimated, under the run's id")
def _then_ledger(context: Context) -> None:
    result = context.outcome.result
    (call,) = result.usage_by_call
    assert (call.purpose, call.status) == ("round", "cancelled"), call
    assert call.usage.estimated, call.usage
    assert call.usage.prompt_tokens > 0, call.usage

    async def rows() -> Any:
        async with SqlStore(context.store_url) as store:
            return (await store.usage()).rows

    (row,) = asyncio.run(rows())
    assert (row.run_id, row.status, row.purpose) == (result.run_id, "cancelled", "round"), row
    assert row.prompt_tokens == call.usage.prompt_tokens, row


@then("the server stopped streaming before the end of the answer")
def _then_cut_off(context: Context) -> None:
    result = context.outcome.result
    (call,) = result.usage_by_call
    assert call.usage.completion_tokens < 200, call.usage


@then('the web app answered {status:d} with the GuardrailTripped reason "{reason}"')
def _then_http_refused(context: Context, status: int, reason: str) -> None:
    response = context.response
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error", error
    assert error["code"] == "GuardrailTripped", error
    assert reason in error["message"], error


@then('the /chat stream ended with run_failed naming the guardrail "{name}", and no text')
def _then_chat_failed(context: Context, name: str) -> None:
    response = context.response
    assert response.status_code == 200, response.text
    frames = _sse_frames(response.text)
    kinds = [kind for kind, _ in frames]
    assert "text_delta" not in kinds, kinds
    assert "output_retracted" not in kinds, kinds
    assert kinds[-1] == "run_failed", kinds
    error = frames[-1][1]["error"]
    assert error["type"] == "GuardrailTripped", error
    assert name in error["message"], error
    assert frames[-1][1]["result"]["llm_calls"] == 1, frames[-1][1]["result"]


@then('the {route} stream ended with its error event naming "{reason}", and no text')
def _then_protocol_failed(context: Context, route: str, reason: str) -> None:
    text = context.response.text
    assert context.response.status_code == 200, text
    assert "GuardrailTripped" in text, text
    assert reason in text, text
    assert "It is sunny" not in text, text


def _sse_frames(text: str) -> list[tuple[str, dict[str, Any]]]:
    frames: list[tuple[str, dict[str, Any]]] = []
    kind = ""
    for line in text.splitlines():
        if line.startswith("event:"):
            kind = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            frames.append((kind, json.loads(line.removeprefix("data:"))))
    return frames
