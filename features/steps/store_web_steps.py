"""Steps of store.web.feature: the chat router with a store, driven through httpx's ASGI
transport. The caller of the session routes is taken from an `X-Caller` header here, the way an
app's own authentication would name it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
from behave import given, then, when
from behave.runner import Context
from fastapi import APIRouter, FastAPI, Request

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


def _app(context: Context) -> FastAPI:
    async def caller_from_header(request: Request) -> str | None:
        return request.headers.get("x-caller")

    app = FastAPI()
    app.include_router(create_chat_router(lambda: context.web_executor, context.usage.append))
    sessions = APIRouter()
    add_session_routes(sessions, lambda: context.web_executor, caller_from_header)
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
        | {"status": None}
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
