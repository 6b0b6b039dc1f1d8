"""Steps for the scripted OpenAI server's checks of the messages it is sent."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from behave import given, then, when
from behave.runner import Context

from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply


def _server(context: Context, text: str, *, checks_messages: bool) -> None:
    server = ScriptedOpenAIServer([ScriptedReply(text=text)], checks_messages=checks_messages)
    server.start()
    context.add_cleanup(server.stop)
    context.checked_server = server


@given('a scripted OpenAI server checking messages, answering "{text}"')
def _given_checking(context: Context, text: str) -> None:
    _server(context, text, checks_messages=True)


@given('a scripted OpenAI server answering "{text}"')
def _given_plain(context: Context, text: str) -> None:
    _server(context, text, checks_messages=False)


@when("it is sent the messages {messages:Json}")
def _when_sent(context: Context, messages: Any) -> None:
    body = json.dumps({"model": "gpt-4o-mini", "messages": messages}).encode()
    request = urllib.request.Request(
        f"{context.checked_server.base_url}/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            context.reply = (response.status, json.loads(response.read()))
    except urllib.error.HTTPError as error:
        context.reply = (error.code, json.loads(error.read()))


@then('it refuses with HTTP 400 saying "{saying}"')
def _then_refused(context: Context, saying: str) -> None:
    status, payload = context.reply
    assert status == 400, context.reply
    assert payload["error"]["type"] == "invalid_request_error", payload
    assert saying in payload["error"]["message"], payload


@then("no reply was taken")
def _then_no_reply_taken(context: Context) -> None:
    server = context.checked_server
    assert server.billed == [], server.billed
    assert len(server.requests) == 1, server.requests


@then('it answers "{text}"')
def _then_answers(context: Context, text: str) -> None:
    status, payload = context.reply
    assert status == 200, context.reply
    assert payload["choices"][0]["message"]["content"] == text, payload
