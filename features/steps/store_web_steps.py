"""Steps of store.web.feature: the chat router with a store, driven through httpx's ASGI
transport. The caller of the session routes is taken from an `X-Caller` header here, the way an
app's own authentication would name it; so is the chat routes' caller, when a scenario says the app
authenticates. A request "of another worker" is served by a fresh executor on the same database,
as a retry reaching another process would be."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from behave import given, then, when
from behave.runner import Context
from fastapi import APIRouter, FastAPI, Request
from support.harness import wait_until

from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult
from cleveractors.web import create_chat_router
from cleveractors.web.sessions import add_session_routes

_LOOKUP = {
    "text": "Looking.",
    "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "w1"}],
    "prompt_tokens": 40,
    "completion_tokens": 12,
}
_ANSWER = {"text": "Sunny in Paris.", "prompt_tokens": 70, "completion_tokens": 5}


def _executor(context: Context) -> ActorExecutor:
    return ActorExecutor.from_config(context.web_actor)


def _app(context: Context, executor: ActorExecutor | None = None) -> FastAPI:
    """The app, serving EXECUTOR (else the scenario's current `web_executor`)."""

    async def caller_from_header(request: Request) -> str | None:
        return request.headers.get("x-caller")

    def serving() -> ActorExecutor:
        return executor or context.web_executor

    app = FastAPI()
    authenticate = caller_from_header if getattr(context, "authenticates", False) else None
    app.include_router(create_chat_router(serving, context.usage.append, authenticate=authenticate))
    sessions = APIRouter()
    add_session_routes(sessions, serving, caller_from_header)
    app.include_router(sessions, prefix="/as-caller")
    return app


def _request(context: Context, method: str, path: str, **options: Any) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=_app(context))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.request(method, path, **options)

    context.response = asyncio.run(send())
    return context.response


def _last_event(response: httpx.Response) -> dict[str, Any]:
    data = [
        line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data:")
    ]
    event: dict[str, Any] = json.loads(data[-1])
    return event


@given("a web actor that looks the weather up, then answers, with a fresh sqlite store")
def web_actor(context: Context) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-web-store-"))
    context.web_actor = {
        "name": "web-weather",
        "agent": {
            "type": "llm",
            "provider": "stub",
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Current weather in a city.",
                    "handler": "cleveractors.demo:get_weather",
                }
            ],
            "script": [_LOOKUP, _ANSWER] * 4,
        },
        "store": {"url": f"sqlite:///{folder / 'web.db'}"},
    }
    context.web_executor = _executor(context)
    context.usage: list[ExecutionResult] = []
    context.chats: list[dict[str, Any]] = []
    context.keyed: list[tuple[ActorExecutor, _Answer]] = []


@given("the web actor has no store")
def no_store(context: Context) -> None:
    context.web_actor = {key: value for key, value in context.web_actor.items() if key != "store"}
    context.web_executor = _executor(context)


@given('caller "{caller}" chatted "{message}" on session "{session_id}"')
def caller_chatted(context: Context, caller: str, message: str, session_id: str) -> None:
    result = asyncio.run(
        context.web_executor.execute(message, session_id=session_id, caller=caller)
    )
    assert result.error is None, result.error


@given('caller "{caller}" started session "{session_id}" with a run that failed')
def caller_run_failed(context: Context, caller: str, session_id: str) -> None:
    refused = {"text": "", "error": "the request is malformed", "error_status": 400}
    actor = context.web_actor | {"agent": context.web_actor["agent"] | {"script": [refused]}}
    executor = ActorExecutor.from_config(actor)

    async def ask() -> None:
        async with executor:
            await executor.execute("Weather?", session_id=session_id, caller=caller)

    with contextlib.suppress(Exception):  # the model's refusal, as scripted
        asyncio.run(ask())
    result = executor.last_result
    assert result is not None, "the run kept no result"
    assert result.error is not None, f"the run did not fail: {result}"


@when('the client chats "{message}" on session "{session_id}"')
def chat_on_session(context: Context, message: str, session_id: str) -> None:
    response = _request(
        context, "POST", "/chat", json={"message": message, "session_id": session_id}
    )
    assert response.status_code == 200, response.text
    context.chats.append(_last_event(response))


@when('the client posts to /chat a session id "{session_id}" and a history')
def chat_with_history(context: Context, session_id: str) -> None:
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    body = {"message": "Weather?", "session_id": session_id, "history": history}
    _request(context, "POST", "/chat", json=body)


@when('the client posts to /chat a session id "{session_id}" and no history')
def chat_without_store(context: Context, session_id: str) -> None:
    _request(context, "POST", "/chat", json={"message": "Weather?", "session_id": session_id})


@when('the client reads session "{session_id}"')
def client_reads(context: Context, session_id: str) -> None:
    _request(context, "GET", f"/sessions/{session_id}")


@when('caller "{caller}" reads session "{session_id}"')
def caller_reads(context: Context, caller: str, session_id: str) -> None:
    _request(context, "GET", f"/as-caller/sessions/{session_id}", headers={"X-Caller": caller})


@when('caller "{caller}" deletes session "{session_id}"')
def caller_deletes(context: Context, caller: str, session_id: str) -> None:
    _request(context, "DELETE", f"/as-caller/sessions/{session_id}", headers={"X-Caller": caller})


@then("both chats finished")
def both_finished(context: Context) -> None:
    assert [chat["kind"] for chat in context.chats] == ["run_finished", "run_finished"]


@then('GET /sessions/s-1 shows the turns "{first}" and "{second}"')
def shows_turns(context: Context, first: str, second: str) -> None:
    response = _request(context, "GET", "/sessions/s-1")
    assert response.status_code == 200, response.text
    context.turns = response.json()["turns"]
    questions = [turn["messages"][0] for turn in context.turns]
    assert questions == [
        {"role": "user", "content": content, "tool_calls": [], "tool_call_id": None, "name": None}
        | {"status": None, "decision": None, "reason": None}
        for content in (first, second)
    ], questions
    assert [turn["position"] for turn in context.turns] == [1, 2]


@then("each turn shows the get_weather call, its result and the answer")
def shows_tool_calls(context: Context) -> None:
    for turn in context.turns:
        _user, call, result, answer = turn["messages"]
        assert call["role"] == "assistant", call
        assert call["tool_calls"] == [
            {"id": "w1", "name": "get_weather", "arguments": {"city": "Paris"}}
        ], call
        assert (result["role"], result["tool_call_id"], result["name"], result["status"]) == (
            "tool",
            "w1",
            "get_weather",
            "success",
        ), result
        assert "Paris" in result["content"], result
        assert (answer["role"], answer["content"]) == ("assistant", _ANSWER["text"]), answer


@then('on_usage was called once per chat, with the tokens the ledger holds for session "{sid}"')
def usage_matches_ledger(context: Context, sid: str) -> None:
    async def ledger_total() -> int:
        async with ActorExecutor.from_config(context.web_actor) as executor:
            assert executor.store is not None
            return (await executor.store.usage(session_id=sid)).total_tokens

    assert len(context.usage) == len(context.chats) == 2
    billed = sum(result.total_tokens for result in context.usage)
    scripted = 2 * sum(
        int(reply["prompt_tokens"]) + int(reply["completion_tokens"])
        for reply in (_LOOKUP, _ANSWER)
    )
    assert billed == scripted == asyncio.run(ledger_total()), (billed, scripted)


@then("each turn holds the text its run showed and the usage on_usage heard for that run")
def turns_hold_usage(context: Context) -> None:
    results = {result.run_id: result for result in context.usage}
    for turn in context.turns:
        result = results[turn["run_id"]]
        assert turn["text"] == result.text == "Looking.\n\nSunny in Paris.", turn["text"]
        expected = {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.total_tokens,
            "estimated": result.usage_estimated,
            "llm_calls": result.llm_calls,
            "cost_usd": None if result.cost_usd is None else str(result.cost_usd),
        }
        assert turn["usage"] == expected, f"{turn['usage']} is not {expected}"


@then("the response is {status:d}")
def response_status(context: Context, status: int) -> None:
    assert context.response.status_code == status, context.response.text


@then('the response is {status:d} naming "{name}"')
def response_names(context: Context, status: int, name: str) -> None:
    assert context.response.status_code == status, context.response.text
    assert name in context.response.json()["detail"], context.response.json()


@then("the response is 200 with no turns")
def response_without_turns(context: Context) -> None:
    assert context.response.status_code == 200, context.response.text
    assert context.response.json()["turns"] == [], context.response.json()


def _body(route: str, message: str) -> tuple[str, dict[str, Any]]:
    if route.startswith("/chat"):
        body: dict[str, Any] = {"message": message}
        if " on session " in route:
            body["session_id"] = route.split('"')[1]
        return "/chat", body
    messages = [{"role": "user", "content": message}]
    return "/v1/chat/completions", {
        "model": "web-weather",
        "messages": messages,
        "stream": route.endswith("streamed"),
    }


@when('the client asks "{message}" through {route}')
def ask_through(context: Context, message: str, route: str) -> None:
    path, body = _body(route, message)
    response = _request(context, "POST", path, json=body)
    assert response.status_code == 200, response.text


@then("the response's X-Run-Id is the run id on_usage heard, and the ledger's rows carry it")
def run_id_header(context: Context) -> None:
    async def ledger_run_ids() -> set[str]:
        async with ActorExecutor.from_config(context.web_actor) as executor:
            assert executor.store is not None
            return {row.run_id for row in (await executor.store.usage()).rows}

    run_id = context.response.headers["x-run-id"]
    (result,) = context.usage
    assert result.run_id == run_id, (result.run_id, run_id)
    assert asyncio.run(ledger_run_ids()) == {run_id}


# -- Idempotency-Key -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    """What a response under an Idempotency-Key told its client, whatever the route."""

    route: str
    response: httpx.Response
    text: str = ""
    usage: tuple[int, int] | None = None
    """(prompt, completion) tokens, as the route reports them."""
    replayed: bool | None = None
    """/chat only: the `replayed` flag of `run_started`."""
    kinds: tuple[str, ...] = ()
    deltas: tuple[str, ...] = ()
    failed: bool = False
    """The run failed, told in-band (a 200 stream ending in its error)."""

    @property
    def run_id(self) -> str | None:
        return self.response.headers.get("x-run-id")


def _sse_data(response: httpx.Response) -> list[str]:
    return [
        line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data:")
    ]


def _answer(route: str, response: httpx.Response) -> _Answer:
    if response.status_code != 200:
        return _Answer(route, response)
    if route.startswith("/chat"):
        events = [json.loads(data) for data in _sse_data(response)]
        result = events[-1]["result"]
        if events[-1]["kind"] == "run_failed":
            return _Answer(route, response, failed=True)
        # The deltas of each round, as they streamed; the text is the result's, as the
        # completions routes join the rounds (a replay sends that text as one delta).
        return _Answer(
            route,
            response,
            text=result["text"],
            deltas=tuple(event["text"] for event in events if event["kind"] == "text_delta"),
            usage=(result["prompt_tokens"], result["completion_tokens"]),
            replayed=events[0].get("replayed"),
            kinds=tuple(event["kind"] for event in events),
        )
    if route.endswith("streamed"):
        chunks = [json.loads(data) for data in _sse_data(response) if data != "[DONE]"]
        if "error" in chunks[-1]:
            return _Answer(route, response, failed=True)
        pieces = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
        (usage,) = [chunk["usage"] for chunk in chunks if chunk.get("usage")]
        return _Answer(
            route, response, "".join(pieces), (usage["prompt_tokens"], usage["completion_tokens"])
        )
    completion = response.json()
    usage = completion["usage"]
    return _Answer(
        route,
        response,
        completion["choices"][0]["message"]["content"],
        (usage["prompt_tokens"], usage["completion_tokens"]),
    )


def _keyed_request(
    route: str, message: str, key: str
) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The path, body and headers of asking MESSAGE through ROUTE under KEY."""
    path, body = _body(route, message)
    if route.endswith("streamed"):
        body["stream_options"] = {"include_usage": True}
    return path, body, {"Idempotency-Key": key}


def _ask_under_key(
    context: Context,
    key: str,
    message: str,
    route: str,
    *,
    another_worker: bool = False,
    caller: str | None = None,
) -> None:
    if another_worker:
        context.web_executor = _executor(context)
    path, body, headers = _keyed_request(route, message, key)
    if caller is not None:
        headers["X-Caller"] = caller
    response = _request(context, "POST", path, json=body, headers=headers)
    context.keyed.append((context.web_executor, _answer(route, response)))


@given("the web actor answers slowly")
def web_actor_slow(context: Context) -> None:
    agent = context.web_actor["agent"]
    slow = {**_ANSWER, "chunk_delay_s": 0.3}
    context.web_actor = context.web_actor | {"agent": agent | {"script": [_LOOKUP, slow] * 4}}
    context.web_executor = _executor(context)


@given("the first worker's model refuses every request")
def first_worker_refuses(context: Context) -> None:
    refused = {"text": "", "error": "the request is malformed", "error_status": 400}
    agent = context.web_actor["agent"] | {"script": [refused] * 4}
    # Only this worker's: the next worker is made from the web actor, whose model answers.
    context.web_executor = ActorExecutor.from_config(context.web_actor | {"agent": agent})


@when(
    'while a worker answers "{message}" under key "{key}" through /chat, another worker is '
    "asked the same through {route}"
)
def asked_while_first_runs(context: Context, message: str, key: str, route: str) -> None:
    first, second = context.web_executor, _executor(context)

    async def both() -> tuple[httpx.Response, httpx.Response]:
        async with (
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=_app(context, first)), base_url="http://first"
            ) as first_client,
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=_app(context, second)), base_url="http://second"
            ) as second_client,
        ):
            path, body, headers = _keyed_request("/chat", message, key)
            going = asyncio.create_task(first_client.post(path, json=body, headers=headers))
            assert await wait_until(lambda: bool(first.agent.model.requests)), "never asked"
            path, body, headers = _keyed_request(route, message, key)
            meanwhile = await second_client.post(path, json=body, headers=headers)
            return await going, meanwhile

    going, meanwhile = asyncio.run(both())
    context.keyed += [(first, _answer("/chat", going)), (second, _answer(route, meanwhile))]


@given("the web app authenticates its callers by their X-Caller header")
def app_authenticates(context: Context) -> None:
    context.authenticates = True


@when('under key "{key}" the client asks "{message}" through {route}')
def client_asks_under_key(context: Context, key: str, message: str, route: str) -> None:
    _ask_under_key(context, key, message, route)


@when('under a key of {length:d} characters the client asks "{message}" through {route}')
def client_asks_under_sized_key(context: Context, length: int, message: str, route: str) -> None:
    _ask_under_key(context, "k" * length, message, route)


@when('under key "{key}" another worker is asked "{message}" through {route}')
def another_worker_asked_under_key(context: Context, key: str, message: str, route: str) -> None:
    _ask_under_key(context, key, message, route, another_worker=True)


@when('under key "{key}" caller "{caller}" asks "{message}" through {route}')
def caller_asks_under_key(
    context: Context, key: str, caller: str, message: str, route: str
) -> None:
    _ask_under_key(context, key, message, route, caller=caller)


@when('under key "{key}" caller "{caller}" asks another worker "{message}" through {route}')
def caller_asks_another_worker(
    context: Context, key: str, caller: str, message: str, route: str
) -> None:
    _ask_under_key(context, key, message, route, another_worker=True, caller=caller)


def _first_and_second_answers(
    context: Context, *, first_failed: bool = False
) -> tuple[_Answer, _Answer]:
    (_first_executor, first), (_second_executor, second), *_later = context.keyed
    if not first_failed:
        assert first.response.status_code == 200, first.response.text
        assert not first.failed, first.response.text
    return first, second


@then("the first response told the failure")
def first_failed(context: Context) -> None:
    first, _second = _first_and_second_answers(context, first_failed=True)
    assert first.failed or first.response.status_code == 502, first.response.text
    assert first.run_id is not None, first.response.headers


@then("the second response is 200 and replays the first: the same X-Run-Id, text and usage")
def second_replays_first(context: Context) -> None:
    first, second = _first_and_second_answers(context)
    assert second.response.status_code == 200, second.response.text
    assert first.run_id is not None
    assert second.run_id == first.run_id, (second.run_id, first.run_id)
    assert (second.text, second.usage) == (first.text, first.usage), (second, first)
    assert first.text == f"{_LOOKUP['text']}\n\n{_ANSWER['text']}", first.text
    if first.route.startswith("/chat"):
        assert first.replayed is False, first
        assert second.replayed is True, second
        assert second.kinds == ("run_started", "text_delta", "run_finished"), second.kinds
        assert second.deltas == (first.text,), second.deltas


@then("on_usage heard of the first run only")
def usage_heard_first_only(context: Context) -> None:
    first, _second = _first_and_second_answers(context)
    assert [result.run_id for result in context.usage] == [first.run_id], context.usage


@then("the second request's worker never asked its model")
def second_worker_never_asked(context: Context) -> None:
    (first_executor, _first), (second_executor, _second) = context.keyed
    assert first_executor is not second_executor
    requests = second_executor.agent.model.requests
    assert len(requests) == 0, requests


@then("the web actor's model was never asked")
def web_model_never_asked(context: Context) -> None:
    requests = context.web_executor.agent.model.requests
    assert len(requests) == 0, requests
    assert context.usage == [], context.usage


@then("the ledger holds the calls of the first response's run, and no other")
def ledger_holds_first_run(context: Context) -> None:
    async def ledger_run_ids() -> list[str]:
        async with ActorExecutor.from_config(context.web_actor) as executor:
            assert executor.store is not None
            return [row.run_id for row in (await executor.store.usage()).rows]

    first, _second = _first_and_second_answers(context)
    assert asyncio.run(ledger_run_ids()) == [first.run_id] * 2  # the lookup, then the answer


def _refusal_message(answer: _Answer) -> str:
    """The message of a refusal in the route's own format: /chat's `detail`, OpenAI's `error`."""
    problem = answer.response.json()
    if answer.route.startswith("/chat"):
        assert set(problem) == {"detail"}, problem
        message: str = problem["detail"]
        return message
    assert set(problem) == {"error"}, problem
    error = problem["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "Idempotency-Key"), error
    message = error["message"]
    return message


@then('the second response is {status:d} naming "{name}" in the format of {route}')
def second_refused(context: Context, status: int, name: str, route: str) -> None:
    _first, second = _first_and_second_answers(context)
    assert second.route == route
    assert second.response.status_code == status, second.response.text
    assert name in _refusal_message(second), second.response.text
    assert second.run_id is None, second.response.headers


@then('the response is 422 naming "{name}" and "{fix}" in the format of {route}')
def response_refused(context: Context, name: str, fix: str, route: str) -> None:
    (_executor, answer), *_later = context.keyed
    assert answer.route == route
    assert answer.response.status_code == 422, answer.response.text
    message = _refusal_message(answer)
    assert name in message, message
    assert fix in message, message


@then("the second response is 200 with a run of its own, billed on its own")
def second_ran_on_its_own(context: Context) -> None:
    first, second = _first_and_second_answers(context, first_failed=True)
    assert second.response.status_code == 200, second.response.text
    assert not second.failed, second.response.text
    assert second.replayed is not True, second
    assert second.run_id not in (None, first.run_id), (second.run_id, first.run_id)
    assert second.text == f"{_LOOKUP['text']}\n\n{_ANSWER['text']}", second.text
    assert [result.run_id for result in context.usage] == [first.run_id, second.run_id]


@then("the last response is 200 and replays the {which} response's run")
def last_replays(context: Context, which: str) -> None:
    replayed = context.keyed[["first", "second"].index(which)][1]
    last = context.keyed[-1][1]
    assert last.response.status_code == 200, last.response.text
    assert (last.run_id, last.text) == (replayed.run_id, replayed.text), (last, replayed)
    assert last.replayed is not False, last  # /chat says so in run_started
    assert len(context.usage) == 2, context.usage  # the replay was billed as its first run
