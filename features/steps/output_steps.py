"""Steps about typed answers (`output_type`, `output_schema`): in process with the scripted model,
and over the real wires with `ChatOpenAI` and `ChatAnthropic` against the scripted servers on
127.0.0.1. Every step text names "typed", so none can shadow the steps of other modules.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml
from behave import given, then, when
from behave.runner import Context
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from typer.testing import CliRunner
from typing_extensions import TypedDict  # pydantic needs its TypedDict on Python < 3.12

from cleveractors import ActorExecutor, LLMAgent, LoopLimits, NewMessage
from cleveractors.cli import app as cli_app
from cleveractors.errors import ConfigurationError, OutputValidationError
from cleveractors.output import ModelRetry
from cleveractors.testing import (
    ScriptedAnthropicServer,
    ScriptedChatModel,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)
from cleveractors.web import create_app

_TIMEOUT_S = 30.0


class City(BaseModel):
    name: str
    temp_c: int


@dataclass
class CityRecord:
    name: str
    temp_c: int


class CityDict(TypedDict):
    name: str
    temp_c: int


_TYPES: dict[str, object] = {
    "a pydantic model": City,
    "a dataclass": CityRecord,
    "a TypedDict": CityDict,
    "int": int,
    "list[str]": list[str],
    "list[City]": list[City],
    "a dict": dict,
}


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"12 C and rain in {city}"


def _reply(line: str, mode: str) -> ScriptedReply:
    """`call NAME {args}`, `text TEXT`, or `answer {json}` (the output tool's call in tool mode,
    else the text); several calls of one reply are set apart by ` ; `."""
    if " ; " in line:
        parts = [_reply(part, mode) for part in line.split(" ; ")]
        return ScriptedReply(tool_calls=tuple(call for part in parts for call in part.tool_calls))
    kind, _, rest = line.partition(" ")
    if kind == "call":
        name, _, args = rest.partition(" ")
        call = ScriptedToolCall(name=name, args=json.loads(args) if args else {})
        return ScriptedReply(tool_calls=(call,))
    if kind == "answer" and mode == "tool":
        call = ScriptedToolCall(name="final_result", args=json.loads(rest))
        return ScriptedReply(tool_calls=(call,))
    if kind in ("answer", "text"):
        return ScriptedReply(text=rest)
    raise ValueError(f"unknown scripted reply {line!r}")


def _replies(context: Context, mode: str) -> list[ScriptedReply]:
    return [_reply(row["reply"], mode) for row in context.table]


def _run(context: Context, executor: ActorExecutor, message: str, *hows: str) -> None:
    """Run the message once per `how` (`blocking` or `streamed`), all in one event loop (a
    client's connections belong to the loop that made them)."""

    async def run_one(how: str) -> None:
        try:
            if how == "streamed":
                stream = executor.execute_stream(message)
                async for _ in stream:
                    pass
            else:
                await executor.execute(message)
        except Exception as exc:  # the Then steps read it
            context.typed_error = exc
        context.typed_results.append(executor.last_result)
        if how == "blocking":
            context.typed_blocking_requests = len(
                getattr(context, "typed_server", ()) and context.typed_server.requests
            )

    async def run() -> None:
        for how in hows:
            await run_one(how)

    context.typed_error = None
    asyncio.run(asyncio.wait_for(run(), _TIMEOUT_S))


def _agent(context: Context, model: BaseChatModel, **options: Any) -> None:
    context.typed_executor = ActorExecutor(LLMAgent(model, **options))
    context.typed_results = []


# -- in process ---------------------------------------------------------------------------------


@given("a typed agent whose output type is {kind}, in {mode} mode, whose model replies")
def typed_agent_of_kind(context: Context, kind: str, mode: str) -> None:
    context.typed_model = ScriptedChatModel(replies=_replies(context, mode), replay_per_run=True)
    _agent(context, context.typed_model, output_type=_TYPES[kind], output_mode=mode)


@given("a typed agent in {mode} mode with the tool get_weather, {options}, whose model replies")
def typed_agent_with_tool(context: Context, mode: str, options: str) -> None:
    context.typed_model = ScriptedChatModel(replies=_replies(context, mode), replay_per_run=True)
    _agent(context, context.typed_model, tools=[get_weather], output_mode=mode, **_options(options))


@given("a typed agent in {mode} mode checked by {validator}, whose model replies")
def typed_agent_with_validator(context: Context, mode: str, validator: str) -> None:
    context.typed_model = ScriptedChatModel(replies=_replies(context, mode), replay_per_run=True)
    _agent(
        context,
        context.typed_model,
        output_type=City,
        output_mode=mode,
        output_validators=[_VALIDATORS[validator]],
    )


def _not_below_zero(city: City) -> None:
    if city.temp_c < -50:
        raise ModelRetry(f"{city.temp_c} C is too cold for {city.name}; check the tool again")


async def _capitalised(city: City) -> City:
    await asyncio.sleep(0)
    if city.name != city.name.capitalize():
        raise ModelRetry("capitalise the name")
    return city.model_copy(update={"name": city.name + "!"})


_VALIDATORS = {"a sync validator": _not_below_zero, "an async validator": _capitalised}


def _options(options: str) -> dict[str, Any]:
    """`output type City`, `token budget N`, `N output retries`, `max N tool rounds`, ..."""
    found: dict[str, Any] = {"output_type": NotedCity if "with notes" in options else City}
    limits: dict[str, Any] = {}
    if match := re.search(r"token budget (\d+)", options):
        limits["token_budget"] = int(match.group(1))
    if match := re.search(r"max (\d+) tool rounds?", options):
        limits["max_tool_rounds"] = int(match.group(1))
    if match := re.search(r"(\d+) output retr", options):
        found["output_retries"] = int(match.group(1))
    if limits:
        found["limits"] = LoopLimits(**limits)
    return found


@when('the typed agent is asked "{message}" {how}')
def typed_agent_asked(context: Context, message: str, how: str) -> None:
    _run(context, context.typed_executor, message, how)


@when("the typed agent is built with {problem}")
def typed_agent_built_wrong(context: Context, problem: str) -> None:
    options: dict[str, Any] = {
        "both an output type and a schema": {
            "output_type": City,
            "output_schema": {"type": "object"},
        },
        "validators but no output type": {"output_validators": [_not_below_zero]},
        "an output type pydantic cannot describe": {"output_type": object()},
        "an invalid output schema": {"output_schema": {"type": "objekt"}},
        "-1 output retries": {"output_type": City, "output_retries": -1},
        "the output mode json": {"output_type": City, "output_mode": "json"},
    }[problem]
    try:
        LLMAgent(ScriptedChatModel(replies=[]), **options)
    except ConfigurationError as exc:
        context.typed_error = exc
    else:
        context.typed_error = None


@then('the typed agent was refused with a ConfigurationError saying "{text}"')
def typed_refused(context: Context, text: str) -> None:
    assert isinstance(context.typed_error, ConfigurationError), context.typed_error
    assert text in str(context.typed_error), str(context.typed_error)


@then("the typed output is {expected}")
def typed_output(context: Context, expected: str) -> None:
    assert context.typed_error is None, repr(context.typed_error)
    result = context.typed_results[-1]
    assert repr(result.output) == expected, repr(result.output)


@then("the typed result's text is '{text}'")
def typed_text(context: Context, text: str) -> None:
    assert context.typed_results[-1].text == text, repr(context.typed_results[-1].text)


@then("the typed run's billed calls are {purposes}")
def typed_purposes(context: Context, purposes: str) -> None:
    result = context.typed_results[-1]
    got = ", ".join(call.purpose for call in result.usage_by_call)
    assert got == purposes, got


@then('the typed model was asked again with "{text}"')
def typed_asked_again(context: Context, text: str) -> None:
    last = context.typed_model.requests[-1].messages
    said = [m.text for m in last if isinstance(m, HumanMessage | ToolMessage)]
    assert any(text in piece for piece in said), said


@then("the typed model's last request forced the tool {name}")
def typed_forced(context: Context, name: str) -> None:
    request = context.typed_model.requests[-1]
    assert request.tool_choice == name, request.tool_choice
    assert name in request.tool_names, request.tool_names


@then("the typed run's synthesis reason is {reason}")
def typed_synthesis(context: Context, reason: str) -> None:
    assert context.typed_results[-1].synthesis_reason == reason


@then("the typed model's first request holds the schema in its system prompt")
def typed_prompted(context: Context) -> None:
    first = context.typed_model.requests[0].messages[0]
    assert isinstance(first, SystemMessage), first
    assert '"temp_c"' in first.text, first.text
    assert "JSON Schema" in first.text, first.text


@then('the typed run failed with OutputValidationError saying "{text}"')
def typed_failed(context: Context, text: str) -> None:
    error = context.typed_error
    assert isinstance(error, OutputValidationError), repr(error)
    assert any(text in line for line in error.errors), error.errors
    context.typed_failure = error


@then("the typed error keeps the last raw text '{raw}' and the usage of {count:d} calls")
def typed_failure_usage(context: Context, raw: str, count: int) -> None:
    error: OutputValidationError = context.typed_failure
    assert error.raw_text == raw, error.raw_text
    assert len(error.usage_by_call) == count, error.usage_by_call
    result = context.typed_results[-1]
    assert error.usage == result.usage, (error.usage, result.usage)
    assert result.output is None
    assert result.error is not None


# -- over the wire ------------------------------------------------------------------------------


@given("a {provider} typed actor in {mode} mode, {options}, whose server replies")
def typed_wire_actor(context: Context, provider: str, mode: str, options: str) -> None:
    replies = _replies(context, mode)
    if provider == "openai":
        server: ScriptedOpenAIServer | ScriptedAnthropicServer = ScriptedOpenAIServer(
            replies, per_conversation=True
        )
        server.start()
        model: BaseChatModel = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test", max_retries=0
        )
    else:
        server = ScriptedAnthropicServer(replies, per_conversation=True)
        server.start()
        model = ChatAnthropic(  # type: ignore[call-arg]  # the integration's own aliases
            model="claude-sonnet-4-5", base_url=server.base_url, api_key="sk-test", max_retries=0
        )
    context.add_cleanup(server.stop)
    context.typed_server = server
    tools = [get_weather] if "the tool get_weather" in options else []
    _agent(context, model, tools=tools, output_mode=mode, **_options(options))


@when('the typed actor is asked "{message}" {how}')
def typed_wire_asked(context: Context, message: str, how: str) -> None:
    _run(context, context.typed_executor, message, *how.split(", then "))


@then("both typed runs answered {expected} with the billed calls {purposes}")
def typed_both_answered(context: Context, expected: str, purposes: str) -> None:
    assert context.typed_error is None, repr(context.typed_error)
    for result in context.typed_results:
        assert repr(result.output) == expected, repr(result.output)
        got = ", ".join(call.purpose for call in result.usage_by_call)
        assert got == purposes, got


@then("the typed server got the same requests from both runs, asking {how}")
def typed_same_requests(context: Context, how: str) -> None:
    requests = context.typed_server.requests
    split = context.typed_blocking_requests
    blocking, streamed = requests[:split], requests[split:]
    assert [_unstreamed(body) for body in blocking] == [_unstreamed(body) for body in streamed]
    for body in requests:
        _asks(body, how)


def _unstreamed(body: dict[str, Any]) -> object:
    """The request without what streaming changes, and without the call ids the server made
    (it numbers them by request)."""
    kept = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
    return _without_ids(kept)


def _without_ids(value: object) -> object:
    if isinstance(value, dict):
        return {
            key: _without_ids(item)
            for key, item in value.items()
            if key not in ("id", "tool_call_id", "tool_use_id")
        }
    if isinstance(value, list):
        return [_without_ids(item) for item in value]
    return value


def _asks(body: dict[str, Any], how: str) -> None:
    tools = [tool.get("name") or tool["function"]["name"] for tool in body.get("tools", ())]
    if how == "with response_format json_schema, strict":
        schema = body["response_format"]["json_schema"]
        assert schema["strict"] is True, schema
        assert schema["name"] == "City", schema
        assert schema["schema"]["additionalProperties"] is False, schema
    elif how == "with output_config.format json_schema":
        assert body["output_config"]["format"]["type"] == "json_schema", body
    elif how == "with the tool final_result":
        assert tools == ["get_weather", "final_result"], tools
    elif how == "with the schema in the system prompt":
        system = body.get("system") or body["messages"][0]["content"]
        assert "JSON Schema" in json.dumps(system), system
        assert "response_format" not in body, body
        assert "output_config" not in body, body
    else:
        raise ValueError(how)


@then("the typed server billed the same {count:d} calls as the run")
def typed_server_billed(context: Context, count: int) -> None:
    billed = context.typed_server.billed
    assert len(billed) == count, billed
    result = context.typed_results[-1]
    calls = (
        result.usage_by_call if context.typed_error is None else context.typed_error.usage_by_call
    )
    assert [(c.usage.prompt_tokens, c.usage.completion_tokens) for c in calls] == [
        (b.prompt_tokens, b.completion_tokens) for b in billed
    ], (calls, billed)


@then('the typed retry request told the model "{text}"')
def typed_retry_told(context: Context, text: str) -> None:
    last = context.typed_server.requests[-1]
    assert text in json.dumps(last["messages"]), last["messages"]


# -- actor files --------------------------------------------------------------------------------


@given("a typed actor file")
def typed_actor_file(context: Context) -> None:
    context.typed_source = yaml.safe_load(context.text)


@when('the typed actor file is asked "{message}" {how}')
def typed_file_asked(context: Context, message: str, how: str) -> None:
    try:
        executor = ActorExecutor.from_config(context.typed_source)
    except ConfigurationError as exc:
        context.typed_error = exc
        return
    context.typed_results = []
    _run(context, executor, message, how)


# -- the OpenAI endpoint ------------------------------------------------------------------------

_BASE_URL = "http://127.0.0.1:8000"


@given("a typed web app whose stub actor replies")
def typed_web_app(context: Context) -> None:
    _typed_web_app(context, typed=False)


@given("a typed web app whose stub actor, typed by City, replies")
def typed_web_app_of_city(context: Context) -> None:
    _typed_web_app(context, typed=True)


def _typed_web_app(context: Context, *, typed: bool) -> None:
    script = [{"text": row["reply"]} for row in context.table]
    agent: dict[str, Any] = {"provider": "stub", "output_mode": "native", "script": script}
    if typed:
        agent["output_schema"] = City.model_json_schema()
    executor = ActorExecutor.from_config({"name": "typed-web", "agent": agent})
    context.typed_app = create_app(executor)
    context.typed_executor = executor


def _with_openai_client(
    context: Context, call: Callable[[openai.AsyncOpenAI], Awaitable[Any]]
) -> None:
    async def exchange() -> None:
        transport = httpx.ASGITransport(app=context.typed_app)
        async with httpx.AsyncClient(transport=transport, base_url=_BASE_URL) as http_client:
            client = openai.AsyncOpenAI(
                base_url=f"{_BASE_URL}/v1",
                api_key="sk-test",
                http_client=http_client,
                max_retries=0,
            )
            try:
                context.typed_reply = await call(client)
            except openai.APIStatusError as error:
                context.typed_error = error

    context.typed_error = None
    asyncio.run(asyncio.wait_for(exchange(), _TIMEOUT_S))


_MESSAGES: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]


@when("the openai SDK parses the typed web app's answer as City, {how}")
def typed_web_parse(context: Context, how: str) -> None:
    async def parse(client: openai.AsyncOpenAI) -> object:
        if how == "blocking":
            completion = await client.chat.completions.parse(
                model="typed-web", messages=_MESSAGES, response_format=City
            )
            return completion.choices[0].message.parsed
        async with client.chat.completions.stream(
            model="typed-web", messages=_MESSAGES, response_format=City
        ) as stream:
            final = await stream.get_final_completion()
        return final.choices[0].message.parsed

    _with_openai_client(context, parse)


@when("the openai SDK asks the typed web app with the response_format {response_format}")
def typed_web_create(context: Context, response_format: str) -> None:
    async def create(client: openai.AsyncOpenAI) -> object:
        completion = await client.chat.completions.create(
            model="typed-web", messages=_MESSAGES, response_format=json.loads(response_format)
        )
        return completion.choices[0].message.content

    _with_openai_client(context, create)


@then("the typed web app's answer is {expected}")
def typed_web_answer(context: Context, expected: str) -> None:
    assert context.typed_error is None, repr(context.typed_error)
    assert repr(context.typed_reply) == expected, repr(context.typed_reply)


@then('the typed web app refused it with 400 naming the param "{param}"')
def typed_web_refused(context: Context, param: str) -> None:
    error = context.typed_error
    assert isinstance(error, openai.BadRequestError), repr(error)
    body = error.body
    assert isinstance(body, dict), body
    assert body["param"] == param, body
    assert body["type"] == "invalid_request_error", body
    assert param in body["message"], body


# -- the command line ---------------------------------------------------------------------------


@when('the typed actor file is given to "cleveractors {command}"')
def typed_file_command(context: Context, command: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="typed-cli-"))
    context.add_cleanup(shutil.rmtree, folder, ignore_errors=True)
    actor = folder / "actor.yaml"
    actor.write_text(yaml.safe_dump(context.typed_source), encoding="utf-8")
    name, *options = command.split()
    arguments = [name, str(actor)]
    if name == "run":
        arguments.append("Where?")
    context.typed_command = CliRunner().invoke(cli_app, [*arguments, *options])


@then("the typed command printed the output {expected}")
def typed_command_output(context: Context, expected: str) -> None:
    completed = context.typed_command
    assert completed.exit_code == 0, (completed.exit_code, completed.output)
    assert json.loads(completed.stdout)["output"] == json.loads(expected), completed.stdout


@then('the typed command failed saying "{text}"')
def typed_command_failed(context: Context, text: str) -> None:
    completed = context.typed_command
    assert completed.exit_code != 0, completed.output
    assert text in completed.output, completed.output


# -- partial objects ----------------------------------------------------------------------------


@given("a typed agent in {mode} mode whose model streams a City with {count:d} notes")
def typed_agent_streaming_notes(context: Context, mode: str, count: int) -> None:
    notes = [f"note {n} about the rain" for n in range(count)]
    answer = {"name": "Paris", "temp_c": 12, "notes": notes}
    reply = _reply(f"answer {json.dumps(answer)}", mode)
    if mode == "prompted":
        reply = ScriptedReply(text=f"```json\n{reply.text}\n```")
    context.typed_model = ScriptedChatModel(replies=[reply])
    _agent(context, context.typed_model, output_type=NotedCity, output_mode=mode)


class NotedCity(BaseModel):
    name: str
    temp_c: int
    notes: list[str]


@when('the typed agent\'s events are read for "{message}"')
def typed_events_read(context: Context, message: str) -> None:
    async def read() -> list[Any]:
        return [event async for event in context.typed_executor.execute_events(message)]

    events = asyncio.run(asyncio.wait_for(read(), _TIMEOUT_S))
    context.typed_deltas = [event for event in events if event.kind == "output_delta"]
    context.typed_results.append(context.typed_executor.last_result)


@then("the typed run streamed at least {count:d} partial objects, each extending the one before")
def typed_partials_grow(context: Context, count: int) -> None:
    deltas = context.typed_deltas
    partial = [delta for delta in deltas if not delta.is_final]
    assert len(partial) >= count, [delta.output for delta in deltas]
    for before, after in itertools.pairwise(delta.output for delta in deltas):
        assert _extends(before, after), (before, after)


@then("the typed run's last output delta is its output, and the only final one")
def typed_last_delta(context: Context) -> None:
    deltas = context.typed_deltas
    assert [delta.is_final for delta in deltas].count(True) == 1, deltas
    assert deltas[-1].is_final, deltas[-1]
    assert deltas[-1].output == to_jsonable_python(context.typed_results[-1].output), deltas[-1]


def _extends(before: object, after: object) -> bool:
    """Whether `after` holds everything `before` does (a string may have grown at its end)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return all(key in after and _extends(value, after[key]) for key, value in before.items())
    if isinstance(before, list) and isinstance(after, list):
        return len(before) <= len(after) and all(map(_extends, before, after))
    if isinstance(before, str) and isinstance(after, str):
        return after.startswith(before)
    return before == after


@when('the typed web app\'s /chat is asked "{message}"')
def typed_web_chat(context: Context, message: str) -> None:
    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=context.typed_app)
        async with httpx.AsyncClient(transport=transport, base_url=_BASE_URL) as client:
            return await client.post("/chat", json={"message": message})

    response = asyncio.run(asyncio.wait_for(exchange(), _TIMEOUT_S))
    assert response.status_code == 200, response.text
    context.typed_chat_events = [
        (block.split("\n")[0].removeprefix("event: "), block)
        for block in response.text.split("\n\n")
        if block.startswith("event: ")
    ]


@then("the typed /chat stream sent output_delta events, the last final with {expected}")
def typed_chat_deltas(context: Context, expected: str) -> None:
    deltas = [
        json.loads(block.split("data: ", 1)[1])
        for kind, block in context.typed_chat_events
        if kind == "output_delta"
    ]
    assert deltas, context.typed_chat_events
    assert deltas[-1]["is_final"] is True, deltas[-1]
    assert deltas[-1]["output"] == json.loads(expected), deltas[-1]
    kinds = [kind for kind, _ in context.typed_chat_events]
    assert kinds.index("output_delta") < kinds.index("run_finished"), kinds


# -- the Responses API --------------------------------------------------------------------------


@given("a typed agent on ChatOpenAI's Responses API, in {mode} mode, whose API answers '{text}'")
def typed_responses_agent(context: Context, mode: str, text: str) -> None:
    """The openai SDK's own HTTP client, its transport answering every request (a Responses API
    `response` holding `text`) and keeping each request's body."""
    context.typed_bodies = []

    def answer(request: httpx.Request) -> httpx.Response:
        context.typed_bodies.append(json.loads(request.content))
        message = {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        usage = {
            "input_tokens": 5,
            "output_tokens": 3,
            "total_tokens": 8,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        response = {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "gpt-4o-mini",
            "output": [message],
            "usage": usage,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
        return httpx.Response(200, json=response)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    context.add_cleanup(lambda: asyncio.run(client.aclose()))
    model = ChatOpenAI(
        model="gpt-4o-mini",
        api_key="sk-test",
        base_url="http://127.0.0.1:9/v1",
        use_responses_api=True,
        max_retries=0,
        http_async_client=client,
    )
    _agent(context, model, output_type=City, output_mode=mode)


@then("the typed Responses API request asked for text.format json_schema {name}, strict")
def typed_responses_format(context: Context, name: str) -> None:
    text_format = context.typed_bodies[0]["text"]["format"]
    assert text_format["type"] == "json_schema", text_format
    assert text_format["name"] == name, text_format
    assert text_format["strict"] is True, text_format


@when("the typed agent is asked {count:d} times, each turn typed by a schema of its own")
def typed_turns_own_schemas(context: Context, count: int) -> None:
    """Turn n requires the key `field_<n % count>`; the last turn repeats the first's schema."""

    model = ScriptedChatModel(replies=context.typed_model.replies)  # one script for every turn
    executor = ActorExecutor(LLMAgent(model, output_mode="native"))

    async def run() -> list[object]:
        outputs = []
        for n in [*range(count), 0]:
            schema = {
                "type": "object",
                "properties": {f"field_{n}": {"type": "integer"}},
                "required": [f"field_{n}"],
            }
            turn = NewMessage("Which field?", output_schema=schema)
            outputs.append((await executor.execute(turn)).output)
        return outputs

    context.typed_outputs = asyncio.run(asyncio.wait_for(run(), _TIMEOUT_S))


@then("every typed turn answered in its own schema")
def typed_turns_answered(context: Context) -> None:
    outputs = context.typed_outputs
    expected = [{f"field_{n}": n} for n in range(len(outputs) - 1)] + [{"field_0": 0}]
    assert outputs == expected, outputs[:3]


# -- spans --------------------------------------------------------------------------------------


@when('the typed agent, its spans kept, is asked "{message}"')
def typed_asked_traced(context: Context, message: str) -> None:
    context.typed_exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(context.typed_exporter))
    executor = ActorExecutor(context.typed_executor.agent, tracer_provider=provider)
    _run(context, executor, message, "blocking")


@then("the typed run's chat spans' purposes are {purposes}")
def typed_span_purposes(context: Context, purposes: str) -> None:
    spans = context.typed_exporter.get_finished_spans()
    chats = [
        dict(span.attributes or {})
        for span in sorted(spans, key=lambda span: span.start_time or 0)
        if dict(span.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]
    got = ", ".join(str(chat["cleveractors.call.purpose"]) for chat in chats)
    assert got == purposes, got
