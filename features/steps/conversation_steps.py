"""Steps about `ScriptedOpenAIServer` choosing replies per conversation, over real HTTP on
127.0.0.1 with httpx. Every step text starts with "the conversation server", "the conversation",
"every conversation" or a count of conversations, so none can shadow the steps of other modules.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from behave import given, then, when
from behave.runner import Context

from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

_TIMEOUT_S = 30.0


def _start(context: Context, server: ScriptedOpenAIServer) -> None:
    server.start()
    context.add_cleanup(server.stop)
    context.conversation_server = server
    context.answers = {}


def _ask(context: Context, first_message: str, turn: int) -> str:
    """One request of a conversation: its first user message, then (after the first request)
    as many assistant and user turns as came before. Returns the reply text or the error."""
    messages = [{"role": "user", "content": first_message}]
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
        return f'{response.status_code} saying "{response.json()["error"]["message"]}"'
    return f'"{response.json()["choices"][0]["message"]["content"]}"'


def _record(context: Context, first_message: str, answer: str) -> None:
    context.answers.setdefault(first_message, []).append(answer)


@given('the conversation server replies "{first}" then "{second}" to every conversation')
def per_conversation(context: Context, first: str, second: str) -> None:
    script = [ScriptedReply(text=first), ScriptedReply(text=second)]
    _start(context, ScriptedOpenAIServer(script, per_conversation=True))


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
