"""Steps for `LLMAgent`'s check of the model it is given."""

from __future__ import annotations

import asyncio
from typing import Any

from behave import then, when
from behave.runner import Context
from pydantic import BaseModel

from cleveractors import LLMAgent
from cleveractors.demo import get_weather
from cleveractors.errors import ConfigurationError
from cleveractors.testing import ScriptedChatModel, ScriptedReply


class _Weather(BaseModel):
    city: str
    celsius: int


def _scripted() -> ScriptedChatModel:
    return ScriptedChatModel(replies=[ScriptedReply(text="Hello.")])


_GIVEN: dict[str, Any] = {
    "a chat model's with_structured_output(a pydantic model)": lambda: (
        _scripted().with_structured_output(_Weather)
    ),
    "a chat model with tools bound": lambda: _scripted().bind_tools([get_weather]),
    'the model name "gpt-4o-mini"': lambda: "gpt-4o-mini",
    "None": lambda: None,
    "a scripted chat model": _scripted,
}


@when('an LLMAgent named "{name}" is built from {given}')
def _when_built(context: Context, name: str, given: str) -> None:
    context.agent, context.error, context.agent_name = None, None, name
    context.given = _GIVEN[given]()
    try:
        context.agent = LLMAgent(context.given, name=name)
    except ConfigurationError as exc:
        context.error = exc


@then("building failed with a ConfigurationError naming the agent and the type it was given")
def _then_refused(context: Context) -> None:
    assert context.agent is None, "the agent was built"
    assert isinstance(context.error, ConfigurationError), repr(context.error)
    kind = type(context.given)
    message = str(context.error)
    assert message.startswith(f"agent {context.agent_name!r}: "), message
    assert f"not {kind.__module__}.{kind.__qualname__}" in message, message


@then('the error says "{text}"')
def _then_says(context: Context, text: str) -> None:
    assert text in str(context.error), str(context.error)


@then('the agent answers "{answer}" to "{message}"')
def _then_answers(context: Context, answer: str, message: str) -> None:
    assert context.error is None, context.error
    result = asyncio.run(context.agent.process_message(message))
    assert result.answer == answer, result
