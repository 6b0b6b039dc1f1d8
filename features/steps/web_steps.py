"""Steps about the web app seen from an HTTP client: `create_app()` driven in-process through
httpx's ASGI transport (the same requests a real server receives, without a socket).

The app is built by the first When step from what the Given steps set up, so Givens only
describe the world. Every step text starts with "the web app", "on_usage" or "making an API key
check", so none can shadow the steps of the other modules.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from behave import given, then, when
from behave.runner import Context
from fastapi import HTTPException
from starlette.requests import Request
from support.context_tools import Shop

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.web import api_key_authenticator, create_app, current_caller
from cleveractors.web.router import DEFAULT_MAX_HISTORY_TURNS, DEFAULT_MAX_TURN_CHARS
from cleveractors.web.security import Authenticate, DepsFactory, bearer_token

_BASE_URL = "http://127.0.0.1:8000"
_REPLIES = 6
_NONE = "(none)"
"""A table cell for "no such header" (or no keys)."""
"""Scripted replies per actor: more than any scenario sends."""


@dataclass
class _WebWorld:
    """What the Given steps set up, and what the app reported."""

    actor_name: str = "web-actor"
    script: list[dict[str, Any]] = field(default_factory=list)
    authenticate: Authenticate | None = None
    allowed_hosts: list[str] = field(default_factory=lambda: ["127.0.0.1", "localhost", "[::1]"])
    cors_origins: list[str] = field(default_factory=list)
    docs: bool = False
    max_body_bytes: int = 1_000_000
    max_history_turns: int = DEFAULT_MAX_HISTORY_TURNS
    max_turn_chars: int = DEFAULT_MAX_TURN_CHARS
    usage: list[tuple[str | None, ExecutionResult]] = field(default_factory=list)
    responses: list[httpx.Response] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    deps: DepsFactory | None = None

    def app(self) -> Any:
        executor = ActorExecutor.from_config(
            {
                "name": self.actor_name,
                "agent": {
                    "type": "llm",
                    "provider": "stub",
                    "max_retries": 0,  # a scripted failure reaches the client, not retried
                    "script": self.script,
                    "tools": self.tools,
                },
            }
        )

        def record_usage(result: ExecutionResult) -> None:
            self.usage.append((current_caller(), result))

        return create_app(
            executor,
            on_usage=record_usage,
            max_body_bytes=self.max_body_bytes,
            authenticate=self.authenticate,
            allowed_hosts=self.allowed_hosts,
            cors_origins=self.cors_origins,
            docs=self.docs,
            max_history_turns=self.max_history_turns,
            max_turn_chars=self.max_turn_chars,
            deps=self.deps,
        )


def _world(context: Context) -> _WebWorld:
    world: _WebWorld | None = getattr(context, "web", None)
    if world is None:
        world = context.web = _WebWorld()
    return world


def _send(context: Context, method: str, path: str, **options: Any) -> httpx.Response:
    world = _world(context)
    headers = {"host": options.pop("host")} if "host" in options else {}
    headers.update(options.pop("headers", {}))

    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=world.app())
        async with httpx.AsyncClient(transport=transport, base_url=_BASE_URL) as client:
            return await client.request(method, path, headers=headers, **options)

    response = asyncio.run(exchange())
    world.responses.append(response)
    return response


def _message_body(path: str, message: str, history: list[dict[str, str]]) -> dict[str, Any]:
    if path == "/chat":
        return {"message": message, "history": history}
    return {
        "model": "web-actor",
        "messages": [*history, {"role": "user", "content": message}],
        "stream": path.endswith("streamed"),
        "stream_options": {"include_usage": True},
    }


def _post_message(
    context: Context, path: str, *, headers: dict[str, str] | None = None, **options: Any
) -> httpx.Response:
    route = path.split(",")[0]
    body = options.pop("body", None) or _message_body(path, "Hi", [])
    return _send(context, "POST", route, json=body, headers=headers or {}, **options)


def _history(turns: int, characters: int) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[n % 2], "content": "x" * characters} for n in range(turns)]


def _last(context: Context) -> httpx.Response:
    return _world(context).responses[-1]


# -- the world -----------------------------------------------------------------------------------


@given('the web app serves an actor answering "{text}"')
def serve_answering(context: Context, text: str) -> None:
    reply = {"text": text, "prompt_tokens": 11, "completion_tokens": 3}
    _world(context).script = [reply] * _REPLIES


@given('the web app serves an actor named "{name}" answering "{text}"')
def serve_named(context: Context, name: str, text: str) -> None:
    serve_answering(context, text)
    _world(context).actor_name = name


@given('the web app serves an actor whose model fails with "{message}"')
def serve_failing(context: Context, message: str) -> None:
    _world(context).script = [{"error": message}] * _REPLIES


@given('the web app requires the API keys "{keys}"')
def require_keys(context: Context, keys: str) -> None:
    _world(context).authenticate = api_key_authenticator(keys.split(","))


@given('the web app authenticates with an async check that knows the token "{token}" as "{who}"')
def async_check(context: Context, token: str, who: str) -> None:
    async def authenticate(request: Request) -> str | None:
        await asyncio.sleep(0)
        return who if bearer_token(request) == token else None

    _world(context).authenticate = authenticate


@given('the web app\'s check forbids every caller with "{message}"')
def check_forbids(context: Context, message: str) -> None:
    def authenticate(request: Request) -> str | None:
        raise HTTPException(403, message)

    _world(context).authenticate = authenticate


@given('the web app also answers the host "{host}"')
def also_answers(context: Context, host: str) -> None:
    _world(context).allowed_hosts.append(host)


@given('the web app lets the origin "{origin}" call it')
def lets_origin(context: Context, origin: str) -> None:
    _world(context).cors_origins.append(origin)


@given("the web app serves its docs")
def serves_docs(context: Context) -> None:
    _world(context).docs = True


@given("the web app limits history to {turns:d} turns of {characters:d} characters")
def limits_history(context: Context, turns: int, characters: int) -> None:
    world = _world(context)
    world.max_history_turns, world.max_turn_chars = turns, characters


@given("the web app accepts bodies of {size:d} bytes")
def accepts_bodies(context: Context, size: int) -> None:
    _world(context).max_body_bytes = size


@given("the web app's actor calls my_orders, its deps built per request from the X-Shop header")
def deps_per_request(context: Context) -> None:
    world = _world(context)
    world.tools = [{"name": "my_orders", "handler": "support.context_tools:my_orders"}]
    world.script = [
        {"tool_calls": [{"name": "my_orders", "args": {"status": "open"}}]},
        {"text": "Done."},
    ]

    async def deps(request: Request, caller: str | None) -> Shop:
        await asyncio.sleep(0)
        return Shop(owner=f"{request.headers['x-shop']} for {caller}")

    world.deps = deps


# -- requests ------------------------------------------------------------------------------------


@when('the web app is sent a message to {path} with the key "{key}" and the X-Shop "{shop}"')
def message_with_shop(context: Context, path: str, key: str, shop: str) -> None:
    _post_message(context, path, headers={"authorization": f"Bearer {key}", "x-shop": shop})


@when('the web app is sent a message to {path} with the key "{key}"')
def message_with_key(context: Context, path: str, key: str) -> None:
    headers = {} if key == _NONE else {"authorization": f"Bearer {key}"}
    _post_message(context, path, headers=headers)


@when('the web app is sent a message to {path} for the host "{host}"')
def message_for_host(context: Context, path: str, host: str) -> None:
    _post_message(context, path, host=host)


@when("the web app is sent a message to {path}")
def message_to(context: Context, path: str) -> None:
    _post_message(context, path)


@when('the web app is sent a JSON message to {path} typed "{content_type}"')
def typed_message(context: Context, path: str, content_type: str) -> None:
    body = json.dumps(_message_body(path, "Hi", [])).encode()
    headers = {} if content_type == _NONE else {"content-type": content_type}
    _send(context, "POST", path, content=body, headers=headers)


@when(
    "the web app is sent a message of {length:d} characters to {path} "
    "with {turns:d} history turns of {characters:d} characters"
)
def long_conversation(
    context: Context, length: int, path: str, turns: int, characters: int
) -> None:
    body = _message_body(path, "x" * length, _history(turns, characters))
    _post_message(context, path, body=body)


@when('the web app\'s chat page is asked for with the host "{host}"')
def page_for_host(context: Context, host: str) -> None:
    _send(context, "GET", "/", host=host)


@when('the web app is sent a CORS preflight from "{origin}"')
def preflight(context: Context, origin: str) -> None:
    headers = {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    _send(context, "OPTIONS", "/chat", headers=headers)


@when("the web app is asked for /docs, /redoc and /openapi.json")
def asks_docs(context: Context) -> None:
    for path in ("/docs", "/redoc", "/openapi.json"):
        _send(context, "GET", path)


@when('the openai client calls {call} with the key "{key}"')
def openai_client_calls(context: Context, call: str, key: str) -> None:
    """Call the official `openai` client's CALL (`models.list`, ...) against the app, and keep
    what it raised and the response it read."""
    world = _world(context)

    async def exchange() -> None:
        transport = httpx.ASGITransport(app=world.app())
        async with httpx.AsyncClient(transport=transport, base_url=_BASE_URL) as http_client:
            client = openai.AsyncOpenAI(
                base_url=f"{_BASE_URL}/v1", api_key=key, http_client=http_client, max_retries=0
            )
            try:
                await _OPENAI_CALLS[call](client)
            except openai.APIStatusError as error:
                context.openai_error = error
                world.responses.append(error.response)
                return
            raise AssertionError(f"{call} was answered")

    asyncio.run(exchange())


_OPENAI_CALLS: dict[str, Callable[[openai.AsyncOpenAI], Awaitable[object]]] = {
    "chat.completions.create": lambda client: client.chat.completions.create(
        model="web-actor", messages=[{"role": "user", "content": "Hi"}]
    ),
    "models.list": lambda client: client.models.list(),
    "models.retrieve": lambda client: client.models.retrieve("web-actor"),
}


@when("the web app is asked for {path} with {method}")
def asks_with_method(context: Context, path: str, method: str) -> None:
    _send(context, method, path)


@when("the web app is asked for {path}")
def asks_for(context: Context, path: str) -> None:
    _send(context, "GET", path)


# -- outcomes ------------------------------------------------------------------------------------


@then("the web app answered {status:d}")
def answered(context: Context, status: int) -> None:
    response = _last(context)
    assert response.status_code == status, f"{response.status_code}, not {status}: {response.text}"


@then("the web app answered each with {status:d}")
def answered_each(context: Context, status: int) -> None:
    codes = [response.status_code for response in _world(context).responses]
    assert codes == [status] * len(codes), f"answered {codes}"


@then('the web app\'s refusal says "{text}"')
def refusal_says(context: Context, text: str) -> None:
    body = _last(context).json()
    message = body["error"]["message"] if "error" in body else body["detail"]
    assert text in message, f"{text!r} is not in {message!r}"


@then('the openai client raised {error_type} saying "{text}"')
def openai_raised(context: Context, error_type: str, text: str) -> None:
    error = context.openai_error
    assert type(error).__name__ == error_type, f"it raised {type(error).__name__}: {error}"
    assert text in error.message, f"{text!r} is not in {error.message!r}"
    assert isinstance(error.body, dict), f"the body it read is {error.body!r}"
    assert text in error.body["message"], f"{text!r} is not in {error.body!r}"


@then('the openai client read the code "{code}" and the type "{error_type}"')
def openai_read_code(context: Context, code: str, error_type: str) -> None:
    error = context.openai_error
    assert (error.code, error.type) == (code, error_type), f"it read {error.code!r}, {error.type!r}"


@then("the web app's refusal is in OpenAI's error format")
def openai_format(context: Context) -> None:
    body = _last(context).json()
    assert list(body) == ["error"], f"the body is {body}"
    assert set(body["error"]) == {"message", "type", "param", "code"}, f"the error is {body}"
    assert body["error"]["message"], f"the error has no message: {body}"


@then("the web app's refusal is exactly {body}")
def refusal_is(context: Context, body: str) -> None:
    assert _last(context).json() == json.loads(body), f"the body is {_last(context).text}"


@then("the web app asked for a bearer token")
def asked_bearer(context: Context) -> None:
    assert _last(context).headers.get("www-authenticate") == "Bearer", _last(context).headers


@then("the web app ran nothing")
def ran_nothing(context: Context) -> None:
    assert _world(context).usage == [], f"on_usage heard of {_world(context).usage}"


@then('the web app\'s answer says "{text}"')
def answer_says(context: Context, text: str) -> None:
    response = _last(context)
    if response.headers["content-type"].startswith("text/event-stream"):
        finished = [e for e in _sse_data(response) if e.get("kind") == "run_finished"]
        answer = finished[0]["result"]["text"]
    else:
        answer = response.json()["choices"][0]["message"]["content"]
    assert answer == text, f"answered {answer!r}"


@then('on_usage heard once, from the caller "{caller}"')
def usage_once(context: Context, caller: str) -> None:
    usage = _world(context).usage
    assert len(usage) == 1, f"on_usage was called {len(usage)} times"
    assert str(usage[0][0]) == caller, f"on_usage heard the caller {usage[0][0]!r}"


@then('making an API key check of "{keys}" fails with ValueError "{message}"')
def key_check_fails(context: Context, keys: str, message: str) -> None:
    try:
        api_key_authenticator([] if keys == _NONE else keys.split(","))
    except ValueError as error:
        raised = str(error)
    else:
        raise AssertionError("no ValueError")
    assert raised == message, raised


@then('the web app\'s run for the caller "{caller}" read the deps "{owner}"')
def run_read_deps(context: Context, caller: str, owner: str) -> None:
    results = [result for who, result in _world(context).usage if who == caller]
    assert len(results) == 1, _world(context).usage
    outputs = [call.output for call in results[0].tool_calls]
    assert outputs == [f"{owner} has 2 open orders"], outputs


@then("the web app allowed no origin")
def no_origin(context: Context) -> None:
    headers = _last(context).headers
    assert "access-control-allow-origin" not in headers, dict(headers)


@then('the web app allowed the origin "{origin}"')
def allowed_origin(context: Context, origin: str) -> None:
    response = _last(context)
    assert response.status_code == 200, response.text
    assert response.headers.get("access-control-allow-origin") == origin, dict(response.headers)


@then("the web app's response names the error {error_type} and the request id")
def names_error(context: Context, error_type: str) -> None:
    response = _last(context)
    request_id = response.headers["x-request-id"]
    errors = _errors_in(response)
    assert errors, f"no error in {response.text}"
    for error in errors:
        assert error_type in (error.get("type"), error.get("code")), error
        assert request_id in error["message"], error
    context.web_request_id = request_id


@then('the web app\'s response does not contain "{text}"')
def does_not_contain(context: Context, text: str) -> None:
    assert text not in _last(context).text, _last(context).text


@then('the web app logged "{text}" with the request id')
def logged_with_id(context: Context, text: str) -> None:
    lines = [record.getMessage() for record in context.log_records]
    matching = [line for line in lines if text in line and context.web_request_id in line]
    assert matching, f"no log line has {text!r} and the request id: {lines}"


@then('the web app\'s page shows "{shown}" and no "{absent}"')
def page_shows(context: Context, shown: str, absent: str) -> None:
    page = _last(context).text
    assert shown in page, page
    assert absent not in page, page


@then("the web app's page lists POST /chat and POST /v1/chat/completions")
def page_lists(context: Context) -> None:
    page = _last(context).text
    for path in ("/chat", "/v1/chat/completions"):
        assert f"<td>POST</td><td><code>{path}</code></td>" in page, page


@then('the web app\'s page has the title "{title}"')
def page_title(context: Context, title: str) -> None:
    found = re.search(r"<title>(.*?)</title>", _last(context).text, re.S)
    assert found is not None, "the page has no title"
    assert found.group(1) == title, found.group(1)


@then("the web app's page loads nothing from another site")
def loads_nothing(context: Context) -> None:
    sources = re.findall(r"""(?:src|href)\s*=\s*["']?([^"' >]+)""", _last(context).text)
    foreign = [source for source in sources if "//" in source]
    assert not foreign, f"loads {foreign}"


def _sse_data(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:") and line.strip() != "data: [DONE]"
    ]


def _errors_in(response: httpx.Response) -> list[dict[str, Any]]:
    """Every error object a response carries: the body's, the in-stream frame's, or a
    `run_failed` event's (its error, and its result's)."""
    if not response.headers["content-type"].startswith("text/event-stream"):
        return [response.json()["error"]]
    errors: list[dict[str, Any]] = []
    for data in _sse_data(response):
        if "error" in data and data.get("kind") != "run_finished":
            errors.append(data["error"])
        if data.get("kind") == "run_failed":
            errors.append(data["result"]["error"])
    return errors


@then(
    "the web app's serve command defaults to {turns:d} turns, {characters:d} characters "
    "and a {seconds:d} second send timeout"
)
def serve_defaults(context: Context, turns: int, characters: int, seconds: int) -> None:
    from cleveractors.cli import serve
    from cleveractors.web.router import DEFAULT_SEND_TIMEOUT_S

    options = inspect.signature(serve).parameters
    defaults = {
        name: options[name].default
        for name in ("max_history_turns", "max_turn_chars", "send_timeout_s")
    }
    expected = {
        "max_history_turns": DEFAULT_MAX_HISTORY_TURNS,
        "max_turn_chars": DEFAULT_MAX_TURN_CHARS,
        "send_timeout_s": DEFAULT_SEND_TIMEOUT_S,
    }
    assert defaults == expected, f"serve: {defaults}, router: {expected}"
    assert (turns, characters, seconds) == tuple(expected.values()), expected
