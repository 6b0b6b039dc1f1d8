"""Steps that pin the private langchain-core API `cleveractors._langchain_private` wraps.

They call langchain-core's private methods directly, on real integrations built offline (an API
key that is never sent): what is pinned is langchain-core's behaviour, not ours.
"""

from __future__ import annotations

import json
from typing import Any

from behave import given, register_type, then, when
from behave.runner import Context
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding
from langchain_openai import ChatOpenAI

from cleveractors import LLMAgent

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
