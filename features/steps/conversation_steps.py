"""Steps about `ScriptedOpenAIServer` choosing replies per conversation, over real HTTP on
127.0.0.1 with httpx (and an `openai` actor through `ActorExecutor`). Every step text starts with
"the conversation server", "the conversation", "another conversation", "the other conversation",
"every conversation", "an openai actor ... against the conversation server" or a count of
conversations, so none can shadow the steps of other modules.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import httpx
from behave import given, then, when
from behave.runner import Context

from cleveractors import ActorExecutor
from cleveractors.errors import http_status
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

_TIMEOUT_S = 30.0
_KEY_VARIABLE = "CLEVERACTORS_CONVERSATION_SERVER_KEY"


def _start(context: Context, server: ScriptedOpenAIServer) -> None:
    server.start()
    context.add_cleanup(server.stop)
    context.conversation_server = server
    context.answers = {}


def _ask(context: Context, first_message: str, turn: int, system: str | None = None) -> str:
    """One request of a conversation: its system prompt when given, its first user message,
    then (after the first request) as many assistant and user turns as came before. Returns the
    reply text or the error."""
    messages = [{"role": "system", "content": system}] if system is not None else []
    messages.append({"role": "user", "content": first_message})
    for _ in range(turn):
        messages += [
            {"role": "assistant", "content": "..."},
            {"role": "user", "content": "And then?"},
        ]
    response = httpx.post(
        context.conversation_server.base_url + "/chat/completions",
        json={"model": "m", "messages": messages},
        timeout=_TIMEOUT_S,
    )
    if response.status_code != 200:
        error = response.json()["error"]
        return f'{response.status_code} {error["type"]} saying "{error["message"]}"'
    return f'"{response.json()["choices"][0]["message"]["content"]}"'


def _record(context: Context, first_message: str, answer: str) -> None:
    context.answers.setdefault(first_message, []).append(answer)


@given('the conversation server replies "{first}" then "{second}" to every conversation')
def per_conversation(context: Context, first: str, second: str) -> None:
    script = [ScriptedReply(text=first), ScriptedReply(text=second)]
    _start(context, ScriptedOpenAIServer(script, per_conversation=True))


@given(
    'the conversation server fails with HTTP {status:d} "{error}" then replies "{text}" '
    "to every conversation"
)
def fault_then_reply(context: Context, status: int, error: str, text: str) -> None:
    script = [ScriptedReply(error=error, error_status=status), ScriptedReply(text=text)]
    _start(context, ScriptedOpenAIServer(script, per_conversation=True))


@given(
    "the conversation server replies only with a call of get_weather for Paris "
    "to every conversation"
)
def only_a_tool_call(context: Context) -> None:
    call = ScriptedToolCall(name="get_weather", args={"city": "Paris"})
    _start(
        context, ScriptedOpenAIServer([ScriptedReply(tool_calls=(call,))], per_conversation=True)
    )


@given('the conversation server replies "{first}" then "{second}" in the order requests arrive')
def global_order(context: Context, first: str, second: str) -> None:
    _start(context, ScriptedOpenAIServer([ScriptedReply(text=first), ScriptedReply(text=second)]))


@given("the conversation server has the scripts:")
def scripts_by_message(context: Context) -> None:
    scripts = {
        row["first message"]: [
            ScriptedReply(text=text.strip()) for text in row["replies"].split(";")
        ]
        for row in context.table
    }
    _start(context, ScriptedOpenAIServer(scripts))


@when("{count:d} conversations send their first request at once")
def many_first(context: Context, count: int) -> None:
    context.conversations = [f"Question {n}?" for n in range(count)]
    _ask_all(context, turn=0)


@when("the {count:d} conversations send their second request at once")
def many_second(context: Context, count: int) -> None:
    assert len(context.conversations) == count
    _ask_all(context, turn=1)


def _ask_all(context: Context, *, turn: int) -> None:
    with ThreadPoolExecutor(len(context.conversations)) as pool:
        answers = list(pool.map(lambda m: _ask(context, m, turn), context.conversations))
    context.last_answers = answers


@when('the conversation "{first_message}" sends {count:d} request')
@when('the conversation "{first_message}" sends {count:d} requests')
def one_conversation(context: Context, first_message: str, count: int) -> None:
    for turn in range(count):
        _record(context, first_message, _ask(context, first_message, turn))


@when('another conversation "{first_message}" sends {count:d} requests')
def another_conversation(context: Context, first_message: str, count: int) -> None:
    for turn in range(count):
        _record(context, f"another {first_message}", _ask(context, first_message, turn))


@when(
    'the conversation under the system prompt "{system}" sends {count:d} request starting '
    '"{first_message}"'
)
@when(
    'the conversation under the system prompt "{system}" sends {count:d} requests starting '
    '"{first_message}"'
)
def under_system_prompt(context: Context, system: str, count: int, first_message: str) -> None:
    for turn in range(count):
        _record(context, f"under {system}", _ask(context, first_message, turn, system))


@when('the conversation "{first_message}" repeats its first request {count:d} times')
def repeated_request(context: Context, first_message: str, count: int) -> None:
    for _ in range(count):
        _record(context, first_message, _ask(context, first_message, 0))


@given(
    "an openai actor with the tool get_weather, retrying failed calls twice, "
    "against the conversation server"
)
def actor_against_server(context: Context) -> None:
    os.environ[_KEY_VARIABLE] = "sk-scripted"
    context.add_cleanup(os.environ.pop, _KEY_VARIABLE, None)
    context.conversation_actor = {
        "name": "weather",
        "agent": {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "base_url": context.conversation_server.base_url,
            "api_key_env": _KEY_VARIABLE,
            "max_retries": 2,
            "tools": [{"name": "get_weather", "handler": "cleveractors.demo:get_weather"}],
        },
    }


@when('the conversation server\'s actor is asked "{message}"')
def actor_asked(context: Context, message: str) -> None:
    async def run() -> None:
        async with ActorExecutor.from_config(context.conversation_actor) as executor:
            await executor.execute(message)

    context.actor_error = None
    try:
        asyncio.run(run())
    except Exception as exc:  # the provider's error, re-raised as the run's failure
        context.actor_error = exc


@then('the conversation server\'s actor failed with HTTP {status:d} saying "{fragment}"')
def actor_failed(context: Context, status: int, fragment: str) -> None:
    error = context.actor_error
    assert error is not None, "the run succeeded"
    assert http_status(error) == status, f"{type(error).__name__}: {error}"
    assert fragment in str(error), str(error)


@then("the conversation server received {count:d} requests: the tool round and the exhausted one")
def received(context: Context, count: int) -> None:
    received = len(context.conversation_server.requests)
    assert received == count, f"received {received} requests"


@then('the other conversation "{first_message}" was answered {answers}')
def other_answered(context: Context, first_message: str, answers: str) -> None:
    conversation_answered(context, f"another {first_message}", answers)


@then('the conversation under "{system}" was answered {answers}')
def under_answered(context: Context, system: str, answers: str) -> None:
    conversation_answered(context, f"under {system}", answers)


@then('every conversation was answered "{text}"')
def every_answered(context: Context, text: str) -> None:
    wrong = [answer for answer in context.last_answers if answer != f'"{text}"']
    assert not wrong, f"{len(wrong)} conversations got another answer: {wrong[:3]}"


@then("the conversation server billed {count:d} replies")
def billed_replies(context: Context, count: int) -> None:
    billed = context.conversation_server.billed
    assert len(billed) == count, f"billed {len(billed)} replies"


@then('the conversation "{first_message}" was answered {answers}')
def conversation_answered(context: Context, first_message: str, answers: str) -> None:
    got = context.answers.get(first_message, [])
    expected = answers.replace(" and then ", ", ")
    assert ", ".join(got) == expected, f"answered {', '.join(got)}"
