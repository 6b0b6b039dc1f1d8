"""Steps that pin the private langchain-core API `cleveractors._langchain_private` wraps.

They call langchain-core's private methods directly, on real integrations built offline (an API
key that is never sent): what is pinned is langchain-core's behaviour, not ours.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from behave import given, register_type, then, when
from behave.runner import Context
from langchain_anthropic import ChatAnthropic
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.rate_limiters import InMemoryRateLimiter
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from openai.types.chat import ChatCompletion
from pydantic import SecretStr

from cleveractors import LLMAgent
from cleveractors._langchain_private import ChunksAsSent, invoke_reply, stream_reply
from cleveractors.agents.fold import ReplyFold
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

register_type(Json=json.loads)

_INTEGRATIONS: dict[str, type[BaseChatModel]] = {
    "ChatOpenAI": ChatOpenAI,
    "ChatAnthropic": ChatAnthropic,
}
_ANSWERS = {"yes": True, "no": False}
_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _streams_by_itself(model: BaseChatModel, *, with_tools: bool) -> bool:
    """langchain-core's own test in `ainvoke`, given the options bound to the model, as the loop
    applies it."""
    options: dict[str, Any] = {}
    if with_tools:
        bound = model.bind_tools([_TOOL])
        assert isinstance(bound, RunnableBinding), type(bound)
        options = dict(bound.kwargs)
        assert "tools" in options, options
    return model._should_stream(async_api=True, **options)


def _assert_streams(model: BaseChatModel, alone: str, with_tools: str) -> None:
    seen = (
        _streams_by_itself(model, with_tools=False),
        _streams_by_itself(model, with_tools=True),
    )
    assert seen == (_ANSWERS[alone], _ANSWERS[with_tools]), f"streams (alone, with tools): {seen}"


@given("a {integration} built offline with {settings:Json}")
def _given_integration(context: Context, integration: str, settings: dict[str, Any]) -> None:
    context.chat_model = _INTEGRATIONS[integration](api_key="sk-never-sent", **settings)


@when("an LLMAgent is built around it")
def _when_agent_built(context: Context) -> None:
    context.agent = LLMAgent(context.chat_model)


@then('langchain-core traces it as provider "{provider}" and model "{model}"')
def _then_traced(context: Context, provider: str, model: str) -> None:
    traced = context.chat_model._get_ls_params()
    seen = (traced.get("ls_provider"), traced.get("ls_model_name"))
    assert seen == (provider, model), traced


@then("langchain-core's ainvoke streams by itself: {alone}; with tools bound: {with_tools}")
def _then_streams(context: Context, alone: str, with_tools: str) -> None:
    _assert_streams(context.chat_model, alone, with_tools)


@then("the agent runs a copy of it with streamed usage on")
def _then_copy(context: Context) -> None:
    model = context.agent.model
    assert model is not context.chat_model
    assert model.stream_usage is True, model.stream_usage


@then(
    "langchain-core's ainvoke streams by itself for the agent's model: {alone}; "
    "with tools bound: {with_tools}"
)
def _then_agent_streams(context: Context, alone: str, with_tools: str) -> None:
    _assert_streams(context.agent.model, alone, with_tools)


# -- past the callback machinery ----------------------------------------------------------------

_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


class _CountingHandler(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.started = 0
        self.ended = 0

    async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.started += 1

    async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        self.ended += 1


@given(
    "a ChatOpenAI on a scripted OpenAI server that replies {reply:Json}, twice per way of asking"
)
def _given_openai_on_server(context: Context, reply: dict[str, Any]) -> None:
    _given_openai_with(context, {}, reply)


@given(
    "a ChatOpenAI with {settings:Json} on a scripted OpenAI server that replies {reply:Json}, "
    "twice per way of asking"
)
def _given_openai_with(context: Context, settings: dict[str, Any], reply: dict[str, Any]) -> None:
    server = ScriptedOpenAIServer([ScriptedReply.model_validate(reply)] * 8)
    server.start()
    context.add_cleanup(server.stop)
    context.base_url = server.base_url
    context.server = server
    context.handler = None
    context.settings = settings


@when("it is asked twice past ainvoke, with the weather tool bound")
def _when_asked_twice(context: Context) -> None:
    async def ask() -> None:
        bound = _bound_model(context)
        for _ in range(2):
            await invoke_reply(bound, _QUESTION)

    asyncio.run(ask())


@then("the server was asked once")
def _then_asked_once(context: Context) -> None:
    assert len(context.server.requests) == 1, context.server.requests


@given("a callback handler on the model")
def _given_handler(context: Context) -> None:
    context.handler = _CountingHandler()


def _bound_model(context: Context) -> Runnable[Any, Any]:
    """ChatOpenAI on the server with the tool bound, its HTTP client made in the running loop.

    Settings beyond ChatOpenAI's own: `rate_limiter_rps` (an in-memory rate limiter), `cache`
    (`in_memory`), `bound` (options bound after the tool) and `config` (`with_config`)."""
    settings = dict(getattr(context, "settings", {}))
    rps = settings.pop("rate_limiter_rps", None)
    if rps is not None:
        settings["rate_limiter"] = InMemoryRateLimiter(requests_per_second=rps)
    if settings.pop("cache", None) == "in_memory":
        settings["cache"] = InMemoryCache()
    bound_options = settings.pop("bound", {})
    config = settings.pop("config", None)
    model = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=context.base_url,
        api_key=SecretStr("sk-never-checked"),
        max_retries=0,
        stream_usage=True,
        http_async_client=DefaultAsyncHttpxClient(),
        callbacks=None if context.handler is None else [context.handler],
        **settings,
    )
    bound = model.bind_tools([_WEATHER_TOOL])
    if bound_options:
        bound = bound.bind(**bound_options)
    return bound if config is None else bound.with_config(config)


def _without_ids(message: BaseMessage) -> dict[str, Any]:
    dumped = message.model_dump()
    dumped.pop("id", None)
    dumped["response_metadata"].pop("id", None)
    for key in ("tool_calls", "tool_call_chunks", "invalid_tool_calls"):
        for call in dumped.get(key) or ():
            call.pop("id", None)
    return dumped


_QUESTION = [HumanMessage("What's the weather in Paris?")]


@when("it is asked once through ainvoke and once past it, with the weather tool bound")
def _when_invoked_both_ways(context: Context) -> None:
    async def ask() -> tuple[BaseMessage, BaseMessage]:
        bound = _bound_model(context)
        return await bound.ainvoke(_QUESTION), await invoke_reply(bound, _QUESTION)

    context.replies = asyncio.run(ask())


@then("both replies are the same, id aside")
def _then_same_replies(context: Context) -> None:
    public, direct = (_without_ids(reply) for reply in context.replies)
    assert public == direct, f"ainvoke: {public}\npast it: {direct}"


@when("it is asked once through astream and once past it, with the weather tool bound")
def _when_streamed_both_ways(context: Context) -> None:
    async def ask() -> tuple[list[BaseMessage], list[BaseMessage]]:
        bound = _bound_model(context)
        public = [chunk async for chunk in bound.astream(_QUESTION)]
        direct = [chunk async for chunk in stream_reply(bound, _QUESTION)]
        return public, direct

    context.streams = asyncio.run(ask())


@then("both streams send the same chunks, id aside, and fold to the same reply")
def _then_same_streams(context: Context) -> None:
    public, direct = context.streams
    assert [_without_ids(c) for c in public] == [_without_ids(c) for c in direct], (
        f"astream: {public}\npast it: {direct}"
    )
    folds = []
    for chunks in (public, direct):
        fold = ReplyFold()
        for chunk in chunks:
            fold.add(chunk)
        folds.append(_without_ids(fold.message()))
    assert folds[0] == folds[1], folds


@when("it is asked once past ainvoke and once past astream, with the weather tool bound")
def _when_asked_with_handler(context: Context) -> None:
    async def ask() -> None:
        bound = _bound_model(context)
        await invoke_reply(bound, _QUESTION)
        async for _chunk in stream_reply(bound, _QUESTION):
            pass

    asyncio.run(ask())


@then("the handler saw both calls start and end")
def _then_handler_saw(context: Context) -> None:
    assert (context.handler.started, context.handler.ended) == (2, 2), vars(context.handler)


@given("a scripted OpenAI server that replies {reply:Json} to every request")
def _given_server(context: Context, reply: dict[str, Any]) -> None:
    context.server = server = ScriptedOpenAIServer([ScriptedReply.model_validate(reply)] * 3)
    server.start()
    context.add_cleanup(server.stop)


def _completions(context: Context) -> ChunksAsSent:
    client = AsyncOpenAI(base_url=context.server.base_url, api_key="sk-never-checked")
    return ChunksAsSent(client.chat.completions)


@when("the openai SDK streams a reply through ChunksAsSent")
def _when_sdk_streams(context: Context) -> None:
    context.chunks = _stream_through(_completions(context))


@then("a copy of it streams dicts too")
def _then_copy_streams(context: Context) -> None:
    chunks = _stream_through(copy.copy(_completions(context)))
    assert chunks, "the copy streamed nothing"
    assert all(type(chunk) is dict for chunk in chunks), chunks


def _stream_through(completions: ChunksAsSent) -> list[Any]:
    async def ask() -> list[Any]:
        stream = await completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Weather?"}],
            stream=True,
        )
        async with stream:
            return [chunk async for chunk in stream]

    return asyncio.run(ask())


@then('every chunk is a dict, and their text is "{text}"')
def _then_dicts(context: Context, text: str) -> None:
    assert all(type(chunk) is dict for chunk in context.chunks), context.chunks
    seen = "".join(
        choice["delta"].get("content") or ""
        for chunk in context.chunks
        for choice in chunk["choices"]
    )
    assert seen == text, seen


@then("a reply it does not stream is a ChatCompletion as before")
def _then_completion(context: Context) -> None:
    async def ask() -> Any:
        return await _completions(context).create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}]
        )

    completion = asyncio.run(ask())
    assert isinstance(completion, ChatCompletion), type(completion)
