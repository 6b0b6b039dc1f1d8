"""Steps of web.ui_protocols.feature: `POST /ai-sdk` and `POST /ag-ui` of `create_app()`, driven
in process through httpx's ASGI transport, or, to hang up after a given frame, by calling the
app's ASGI interface directly (the client's disconnect is the `http.disconnect` it receives).

Every step text starts with "the frontend", "on_usage heard of", "the UI message stream", "the
AG-UI stream" or "the session", so none can shadow the steps of other modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, HumanMessage

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.web import api_key_authenticator, create_app

_BASE_URL = "http://127.0.0.1:8000"
_LOOKUP = {
    "text": "Let me look.",
    "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_paris"}],
    "prompt_tokens": 30,
    "completion_tokens": 8,
}
_ANSWER = {"text": "Rain in Paris today.", "prompt_tokens": 55, "completion_tokens": 6}
_FAILURE = {"error": "the model provider is overloaded"}
_FORECAST = {
    "city": "Paris",
    "summary": "Light rain in the morning, clearing by the afternoon; take an umbrella.",
    "hours": [{"hour": hour, "note": f"{hour % 4} mm of rain"} for hour in range(8, 20)],
}
_FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "summary": {"type": "string"},
        "hours": {"type": "array", "items": {"type": "object", "required": ["hour", "note"]}},
    },
    "required": ["city", "summary", "hours"],
}


@dataclass
class _FrontendWorld:
    script: list[dict[str, Any]] = field(default_factory=lambda: [_LOOKUP, _ANSWER])
    store_url: str | None = None
    keys: list[str] | None = None
    output_schema: dict[str, Any] | None = None
    without_ag_ui: bool = False
    executor: ActorExecutor | None = None
    usage: list[ExecutionResult] = field(default_factory=list)
    responses: list[httpx.Response] = field(default_factory=list)
    hung_up: list[tuple[int, int]] = field(default_factory=list)
    """Per stopped request: (frames read before hanging up, frames of the whole answer)."""

    def serving(self) -> ActorExecutor:
        if self.executor is None:
            actor: dict[str, Any] = {
                "name": "frontend-weather",
                "agent": {
                    "type": "llm",
                    "provider": "stub",
                    "max_retries": 0,
                    "tools": [
                        {
                            "name": "get_weather",
                            "description": "Current weather in a city.",
                            "handler": "cleveractors.demo:get_weather",
                        }
                    ],
                    "script": self.script,
                },
            }
            if self.output_schema is not None:
                actor["agent"] |= {"output_schema": self.output_schema, "output_mode": "native"}
            if self.store_url is not None:
                actor["store"] = {"url": self.store_url}
            self.executor = ActorExecutor.from_config(actor)
        return self.executor

    def app(self) -> Any:
        authenticate = None if self.keys is None else api_key_authenticator(self.keys)
        with _ag_ui_hidden(self.without_ag_ui):
            return create_app(self.serving(), on_usage=self.usage.append, authenticate=authenticate)


_OUR_AG_UI_MODULE = "cleveractors.web.ag_ui"


class _Hidden:
    """`import ag_ui` fails while this is entered, as without the extra (and our module that
    imports it is imported afresh)."""

    def __enter__(self) -> None:
        self._saved = {name: module for name, module in sys.modules.items() if _is_ag_ui(name)}
        for name in self._saved:
            del sys.modules[name]
        sys.modules["ag_ui"] = None  # type: ignore[assignment]  # Python's "not importable"

    def __exit__(self, *_: object) -> None:
        for name in [name for name in sys.modules if _is_ag_ui(name)]:
            del sys.modules[name]
        sys.modules.update(self._saved)


def _is_ag_ui(name: str) -> bool:
    return name == "ag_ui" or name.startswith(("ag_ui.", _OUR_AG_UI_MODULE))


def _ag_ui_hidden(hidden: bool) -> Any:
    return _Hidden() if hidden else contextlib.nullcontext()


def _world(context: Context) -> _FrontendWorld:
    world: _FrontendWorld | None = getattr(context, "frontend", None)
    if world is None:
        world = context.frontend = _FrontendWorld()
    return world


def _conversation_body(route: str, texts: list[str], chat_id: str = "chat-1") -> dict[str, Any]:
    roles = ["user" if n % 2 == 0 else "assistant" for n in range(len(texts))]
    if route == "/ai-sdk":
        # An assistant message as useChat keeps it: step, reasoning and data parts beside its
        # text, which carry nothing for the actor's turn.
        beside = [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Hm."},
            {"type": "data-x", "data": 1},
        ]
        messages = [
            {
                "id": f"m{n}",
                "role": role,
                "parts": [*(beside if role == "assistant" else []), {"type": "text", "text": text}],
            }
            for n, (role, text) in enumerate(zip(roles, texts, strict=True))
        ]
        return {"id": chat_id, "messages": messages, "trigger": "submit-message"}
    messages = [
        {"id": f"m{n}", "role": role, "content": text}
        for n, (role, text) in enumerate(zip(roles, texts, strict=True))
    ]
    return {"threadId": chat_id, "runId": "client-run", "messages": messages}


def _send(context: Context, route: str, **options: Any) -> httpx.Response:
    world = _world(context)

    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=world.app())
        async with httpx.AsyncClient(transport=transport, base_url=_BASE_URL) as client:
            return await client.post(route, **options)

    response = asyncio.run(exchange())
    world.responses.append(response)
    return response


def _last(context: Context) -> httpx.Response:
    return _world(context).responses[-1]


def _data(response: httpx.Response) -> list[Any]:
    """The SSE data of RESPONSE, parsed (`[DONE]` kept as the string)."""
    frames = [
        line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")
    ]
    return [frame if frame == "[DONE]" else json.loads(frame) for frame in frames]


# -- the world -----------------------------------------------------------------------------------


@given("the frontend actor looks the weather up, then answers")
def actor_looks_up(context: Context) -> None:
    context.frontend = _FrontendWorld()


@given("the frontend actor answers with a forecast, its first one without the city")
def actor_answers_typed(context: Context) -> None:
    world = _world(context)
    invalid = {key: value for key, value in _FORECAST.items() if key != "city"}
    world.script = [{"text": json.dumps(invalid)}, {"text": json.dumps(_FORECAST)}]
    world.output_schema = _FORECAST_SCHEMA


@given("the frontend actor's model fails after the lookup")
def actor_fails(context: Context) -> None:
    _world(context).script = [_LOOKUP, _FAILURE]


@given("the frontend actor keeps sessions in a fresh sqlite store")
def actor_keeps_sessions(context: Context) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-frontends-"))
    _world(context).store_url = f"sqlite:///{folder / 'sessions.db'}"


@given('the frontend routes require the API key "{key}"')
def require_key(context: Context, key: str) -> None:
    _world(context).keys = [key]


@given("the frontend app is built without the ag_ui package")
def without_ag_ui(context: Context) -> None:
    _world(context).without_ag_ui = True


# -- requests ------------------------------------------------------------------------------------


@when("the frontend route {route:S} is sent the body {body}")
def sent_body(context: Context, route: str, body: str) -> None:
    _send(context, route, content=body.encode(), headers={"content-type": "application/json"})


@when("the frontend route {route:S} is sent a message")
def sent_message(context: Context, route: str) -> None:
    _send(context, route, json=_conversation_body(route, ["Weather in Paris?"]))


@when("the frontend route {route:S} is sent a message without a key")
def sent_without_key(context: Context, route: str) -> None:
    sent_message(context, route)


@when('the frontend route {route:S} is sent a message typed "{content_type}" with the key "{key}"')
def sent_typed(context: Context, route: str, content_type: str, key: str) -> None:
    body = json.dumps(_conversation_body(route, ["Weather in Paris?"])).encode()
    headers = {"content-type": content_type, "authorization": f"Bearer {key}"}
    _send(context, route, content=body, headers=headers)


@when('the frontend route {route:S} is sent a message with the key "{key}"')
def sent_with_key(context: Context, route: str, key: str) -> None:
    body = _conversation_body(route, ["Weather in Paris?"])
    _send(context, route, json=body, headers={"authorization": f"Bearer {key}"})


@when('the frontend route {route:S} is sent the conversation "{first}" / "{second}" / "{third}"')
def sent_conversation(context: Context, route: str, first: str, second: str, third: str) -> None:
    _send(context, route, json=_conversation_body(route, [first, second, third]))


@when(
    'the frontend route {route:S} is sent, as chat "{chat_id}", '
    'the conversation "{first}" / "{second}" / "{third}"'
)
def sent_conversation_as(
    context: Context, route: str, chat_id: str, first: str, second: str, third: str
) -> None:
    _send(context, route, json=_conversation_body(route, [first, second, third], chat_id))


@when("the frontend route {route:S} is hung up on after each frame of its answer in turn")
def hung_up_after_each_frame(context: Context, route: str) -> None:
    world = _world(context)
    body = json.dumps(_conversation_body(route, ["Weather in Paris?"])).encode()
    whole = len(asyncio.run(_frames_until_hang_up(world.app(), route, body, None)))
    world.usage.clear()
    for frames in range(1, whole + 1):
        asyncio.run(_frames_until_hang_up(world.app(), route, body, frames))
        world.hung_up.append((frames, whole))


async def _frames_until_hang_up(
    app: Any, route: str, body: bytes, frames: int | None
) -> list[bytes]:
    """The body messages APP sends for a POST of BODY to ROUTE, the client hanging up once it
    has read FRAMES of them (never, for None)."""
    received: list[bytes] = []
    hang_up = asyncio.Event()
    requests = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def receive() -> dict[str, Any]:
        if (request := next(requests, None)) is not None:
            return request
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            received.append(message["body"])
            if frames is not None and len(received) >= frames:
                hang_up.set()
        if message["type"] == "http.response.body" and not message.get("more_body"):
            hang_up.set()  # the response is complete: the server then sees the disconnect

    await app(_scope(route, body), receive, send)
    return received


def _scope(route: str, body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


# -- outcomes ------------------------------------------------------------------------------------


@then('the frontend route answered {status:d} saying "{says}"')
def answered_saying(context: Context, status: int, says: str) -> None:
    response = _last(context)
    assert response.status_code == status, f"{response.status_code}, not {status}: {response.text}"
    detail = response.json()["detail"]
    assert says in detail, f"{says!r} is not in {detail!r}"
    assert "Traceback" not in detail, detail


@then("the frontend route answered 200 with the run's id in X-Run-Id")
def answered_with_run_id(context: Context) -> None:
    response = _last(context)
    assert response.status_code == 200, f"{response.status_code}: {response.text}"
    run_id = response.headers["x-run-id"]
    assert run_id in response.text, f"the stream does not name the run {run_id}"
    assert _world(context).usage[-1].run_id == run_id, "on_usage heard of another run"


@then("on_usage heard of no frontend run")
def heard_of_none(context: Context) -> None:
    assert _world(context).usage == [], f"on_usage heard of {_world(context).usage}"


@then("on_usage heard of {count:d} frontend run")
def heard_of_count(context: Context, count: int) -> None:
    usage = _world(context).usage
    assert len(usage) == count, f"on_usage was called {len(usage)} times, not {count}"


@then('the frontend actor was asked "{message}" after "{first}" and "{second}"')
def asked_after(context: Context, message: str, first: str, second: str) -> None:
    asked = _first_request_messages(context)
    said = [(type(each).__name__, _text(each)) for each in asked if not _is_system(each)]
    expected = [("HumanMessage", first), ("AIMessage", second), ("HumanMessage", message)]
    assert said == expected, f"the model was asked {said}"


@then('the frontend actor was asked "{message}" after "{first}" and its answer, from the session')
def asked_after_session(context: Context, message: str, first: str) -> None:
    world = _world(context)
    model = world.serving().agent.model  # type: ignore[attr-defined]
    asked = model.requests[-2].messages  # the second run's first call
    humans = [_text(each) for each in asked if isinstance(each, HumanMessage)]
    assert humans == [first, message], f"the model was asked {humans}: not the session's history"
    answers = [_text(each) for each in asked if isinstance(each, AIMessage)]
    assert answers[-1] == _ANSWER["text"], f"the session's answer was not sent: {answers}"


@then('the session "{session_id}" holds {count:d} turns')
def session_holds(context: Context, session_id: str, count: int) -> None:
    store = _world(context).serving().store
    assert store is not None
    turns = asyncio.run(store.history(session_id))
    assert len(turns) == count, f"the session holds {len(turns)} turns"


@then("the UI message stream starts with the run's id and ends with its usage, then [DONE]")
def ui_stream_starts_and_ends(context: Context) -> None:
    response = _last(context)
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1", response.headers
    frames = _data(response)
    run_id = response.headers["x-run-id"]
    assert frames[0] == {
        "type": "start",
        "messageId": run_id,
        "messageMetadata": {"run_id": run_id},
    }
    assert frames[-1] == "[DONE]", frames[-1]
    finish = frames[-2]
    assert finish["type"] == "finish", finish
    assert finish["finishReason"] == "stop", finish
    usage = finish["messageMetadata"]["usage"]
    spent = _world(context).usage[-1]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (
        spent.prompt_tokens,
        spent.completion_tokens,
        spent.total_tokens,
    ), f"the stream told {usage}, on_usage heard {spent.usage}"
    assert usage["details"]["llm_calls"] == 2, usage


@then("the UI message stream has no cost, since the model is unpriced")
def ui_stream_no_cost(context: Context) -> None:
    finish = _data(_last(context))[-2]
    assert "cost_usd" not in finish["messageMetadata"], finish


@then("the AG-UI stream starts with the run's id and ends with its usage")
def ag_ui_stream_starts_and_ends(context: Context) -> None:
    response = _last(context)
    frames = _data(response)
    run_id = response.headers["x-run-id"]
    assert frames[0] == {"type": "RUN_STARTED", "threadId": "chat-1", "runId": run_id}, frames[0]
    finished = frames[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    spent = _world(context).usage[-1]
    told = sum(entry["inputTokens"] for entry in finished["usage"])
    assert told == spent.prompt_tokens, (
        f"the stream told {told} prompt tokens, not {spent.prompt_tokens}"
    )
    assert finished["metadata"] == {"cleveractors": {"run_id": run_id}}, finished


@then('the frontend stream tells "{told}" and not "{hidden}"')
def stream_tells(context: Context, told: str, hidden: str) -> None:
    response = _last(context)
    assert response.status_code == 200, response.text
    frames = [frame for frame in _data(response) if isinstance(frame, dict)]
    failures = [f for f in frames if f.get("type") in ("error", "RUN_ERROR")]
    assert len(failures) == 1, f"the failure was told {len(failures)} times: {frames}"
    text = failures[0].get("errorText") or failures[0].get("message")
    assert told in text, text
    assert hidden not in text, text
    spent = _world(context).usage[-1]
    if failures[0]["type"] == "RUN_ERROR":
        assert failures[0]["code"] == "ModelAPIError", failures[0]
        assert sum(e["inputTokens"] for e in failures[0]["usage"]) == spent.prompt_tokens
    else:
        finish = frames[-1]
        assert finish["finishReason"] == "error", finish
        assert finish["messageMetadata"]["usage"]["prompt_tokens"] == spent.prompt_tokens


@then("the UI message stream sent the forecast as data-output parts under the id {run}-output")
def ui_stream_data_output(context: Context, run: str) -> None:
    chunks = [chunk for chunk in _data(_last(context)) if isinstance(chunk, dict)]
    parts = [chunk for chunk in chunks if chunk["type"] == "data-output"]
    run_id = chunks[0]["messageMetadata"]["run_id"]
    assert run == "<run id>", run
    assert len(parts) >= 4, parts
    assert {part["id"] for part in parts} == {f"{run_id}-output"}, parts
    assert parts[-1]["data"] == _FORECAST, parts[-1]
    assert any("city" not in part["data"] for part in parts), "the invalid attempt was not sent"


@then("the AG-UI state, a snapshot per attempt and the patches between applied, is the forecast")
def ag_ui_state_patched(context: Context) -> None:
    events = _data(_last(context))
    states: list[list[Any]] = []  # per attempt, the state after each event
    for event in events:
        if event["type"] == "STATE_SNAPSHOT":
            states.append([event["snapshot"]])
        elif event["type"] == "STATE_DELTA":
            states[-1].append(jsonpatch.apply_patch(states[-1][-1], event["delta"]))
    assert len(states) == 2, states
    assert "city" not in states[0][-1]["output"], states[0]
    assert states[-1][-1] == {"output": _FORECAST}, states[-1][-1]
    assert len(states[-1]) >= 3, states[-1]
    types = [event["type"] for event in events]
    assert types.index("STATE_SNAPSHOT") < types.index("STATE_DELTA") < types.index("RUN_FINISHED")


@then("on_usage heard of each of those runs exactly once")
def heard_each_once(context: Context) -> None:
    world = _world(context)
    assert len(world.usage) == len(world.hung_up), (
        f"{len(world.hung_up)} requests, on_usage heard {len(world.usage)} times"
    )
    run_ids = [result.run_id for result in world.usage]
    assert len(set(run_ids)) == len(run_ids), f"a run was reported twice: {run_ids}"


@then(
    "each run stopped before its last frame was cancelled, "
    "and the others answered with the script's usage"
)
def stopped_cancelled(context: Context) -> None:
    world = _world(context)
    scripted = sum(reply["prompt_tokens"] for reply in world.script)
    answered = 0
    for (frames, whole), result in zip(world.hung_up, world.usage, strict=True):
        if result.cancelled:
            assert frames < whole, f"stopped after all {whole} frames, yet cancelled"
            continue
        answered += 1
        assert result.status == "answered", result
        assert result.prompt_tokens == scripted, f"{result.prompt_tokens} prompt tokens"
    assert answered >= 1, "no run answered, even when the client read every frame"
    assert answered < len(world.hung_up), "no hang-up stopped a run: the test proves nothing"


def _first_request_messages(context: Context) -> tuple[Any, ...]:
    model = _world(context).serving().agent.model  # type: ignore[attr-defined]
    return tuple(model.requests[0].messages)


def _is_system(message: Any) -> bool:
    return type(message).__name__ == "SystemMessage"


def _text(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))
