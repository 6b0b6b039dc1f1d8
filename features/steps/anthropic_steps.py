"""Steps about `ScriptedAnthropicServer` seen through the official `anthropic` SDK, raw HTTP and
langchain-anthropic's `ChatAnthropic`.

Expected messages are built here from the scenario's script table, never from the server's
payloads; the server's own record (`requests`, `billed`) is what usage is compared with. Words
are counted with `str.split()`, the rule the scripted doubles document for their billing.

Every step text starts with "the Anthropic server", "the SDK", "the two SDK", "ChatAnthropic",
"every event", "the events", "message_start", "each tool_use", "the thinking block" or
"scripting the Anthropic server", so none shadows the steps of the other modules.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
from anthropic.types import Message
from behave import given, then, when
from behave.runner import Context
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage

from cleveractors.testing import (
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
    ScriptedReply,
    ScriptedToolCall,
)
from cleveractors.testing.tables import scripted_tool_calls

_MODEL = "claude-sonnet-4-5"
_API_KEY = "sk-ant-scripted-test"
_MAX_TOKENS = 2048
_WAIT_STEP_S = 0.01
_MAX_WAIT_S = 5.0
"""Bound on waiting for the server thread's record of a request the client abandoned."""
_THINKING = {"type": "enabled", "budget_tokens": 1024}
_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def _words(text: str) -> int:
    return len(text.split())


def _reply_of(row: dict[str, str]) -> ScriptedAnthropicReply:
    return ScriptedAnthropicReply(
        thinking=row["thinking"],
        redacted_thinking=row["redacted"],
        text=row["text"],
        tool_calls=scripted_tool_calls(row["tool calls"]),
        cache_read_tokens=int(row["cache read"]),
        cache_write_tokens=int(row["cache write"]),
        args_chunk_size=6,
    )


def _serve(context: Context, replies: list[ScriptedReply]) -> None:
    previous: ScriptedAnthropicServer | None = getattr(context, "anthropic_server", None)
    if previous is not None:
        previous.stop()
    context.anthropic_server = ScriptedAnthropicServer(replies)
    context.anthropic_server.start()
    context.add_cleanup(context.anthropic_server.stop)


def _request(prompt: str, *, thinking: bool) -> dict[str, Any]:
    request: dict[str, Any] = {
        "model": _MODEL,
        "max_tokens": _MAX_TOKENS,
        "messages": [{"role": "user", "content": prompt}],
        "tools": _TOOLS,
    }
    if thinking:
        request["thinking"] = _THINKING
    return request


def _sync_client(context: Context) -> anthropic.Anthropic:
    client = anthropic.Anthropic(
        base_url=context.anthropic_server.base_url, api_key=_API_KEY, max_retries=0
    )
    context.add_cleanup(client.close)
    return client


def _async_client(context: Context) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=context.anthropic_server.base_url, api_key=_API_KEY, max_retries=0
    )


def _sync_streaming(context: Context, request: dict[str, Any]) -> Message:
    with _sync_client(context).messages.stream(**request) as stream:
        return stream.get_final_message()


def _sync_blocking(context: Context, request: dict[str, Any]) -> Message:
    return _sync_client(context).messages.create(**request)


def _async_streaming(context: Context, request: dict[str, Any]) -> Message:
    async def run() -> Message:
        async with _async_client(context) as client, client.messages.stream(**request) as stream:
            return await stream.get_final_message()

    return asyncio.run(run())


def _async_blocking(context: Context, request: dict[str, Any]) -> Message:
    async def run() -> Message:
        async with _async_client(context) as client:
            return await client.messages.create(**request)

    return asyncio.run(run())


_CLIENTS: dict[str, Callable[[Context, dict[str, Any]], Message]] = {
    "sync streaming": _sync_streaming,
    "async streaming": _async_streaming,
    "sync blocking": _sync_blocking,
    "async blocking": _async_blocking,
}


def _send(context: Context, client: str, request: dict[str, Any]) -> None:
    context.sdk_request = request
    context.sdk_error = None
    try:
        context.sdk_messages.append(_CLIENTS[client](context, request))
    # Exception, not AnthropicError: a stream dropped mid-body surfaces as the HTTP library's own
    # RemoteProtocolError, unwrapped by the SDK.
    except Exception as error:
        context.sdk_error = error


def _message(context: Context) -> Message:
    assert context.sdk_error is None, f"the SDK failed: {context.sdk_error!r}"
    message: Message = context.sdk_messages[-1]
    return message


def _echo_request(context: Context, change: str) -> dict[str, Any]:
    """The last request, followed by the SDK's message (changed as told) and the tool results."""
    assistant = _message(context).model_dump(exclude_none=True)
    content: list[dict[str, Any]] = assistant["content"]
    if change == "without thinking blocks":
        content = [block for block in content if "thinking" not in block["type"]]
    elif change == "with the thinking edited":
        content[0]["thinking"] += " And Berlin."
    elif change == "with another signature":
        content[0]["signature"] = "sig_made_up_by_the_client"
    elif change == "with the redacted data edited":
        content[1]["data"] += "X"
    elif change == "without declaring the tools":
        request = {k: v for k, v in context.sdk_request.items() if k != "tools"}
        context.sdk_request = request
    results = [
        {"type": "tool_result", "tool_use_id": block["id"], "content": "sunny"}
        for block in content
        if block["type"] == "tool_use"
    ]
    messages = [
        *context.sdk_request["messages"],
        {"role": "assistant", "content": content},
        {"role": "user", "content": results},
    ]
    return {**context.sdk_request, "messages": messages}


def _sse_events(body: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in filter(None, body.split("\n\n")):
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


# -- Given ------------------------------------------------------------------------------------


@given("the Anthropic server is started with the replies:")
def _given_script(context: Context) -> None:
    context.scripted = [_reply_of(row.as_dict()) for row in context.table]
    context.sdk_messages = []
    _serve(context, list(context.scripted))


@given("the Anthropic server is given the same reply again")
def _given_same_reply(context: Context) -> None:
    context.anthropic_server.add_replies(context.scripted)


@given('the Anthropic server is given the reply "{text}"')
def _given_reply(context: Context, text: str) -> None:
    context.anthropic_server.add_replies([ScriptedReply(text=text)])


@given("the Anthropic server's script starts with an overloaded reply")
def _given_overloaded(context: Context) -> None:
    overloaded = ScriptedAnthropicReply(error="Overloaded", error_status=529, retry_after="7")
    _serve(context, [overloaded, *context.scripted])


@given(
    'the Anthropic server\'s script starts with the text "{text}" and an error event after '
    "{count:d} events"
)
def _given_error_event(context: Context, text: str, count: int) -> None:
    failing = ScriptedAnthropicReply(text=text, error_event_after_chunks=count)
    _serve(context, [failing, *context.scripted])


@given(
    'the Anthropic server\'s script starts with the text "{text}" cut off after {count:d} events'
)
def _given_cut_off(context: Context, text: str, count: int) -> None:
    _serve(context, [ScriptedReply(text=text, cut_off_after_chunks=count), *context.scripted])


@given(
    'the Anthropic server\'s script starts with the text "{text}" billed as {prompt:d} prompt and '
    "{completion:d} completion tokens"
)
def _given_scripted_tokens(context: Context, text: str, prompt: int, completion: int) -> None:
    reply = ScriptedReply(text=text, prompt_tokens=prompt, completion_tokens=completion)
    _serve(context, [reply, *context.scripted])


@given('the Anthropic server streams slowly, its script starting with the text "{text}"')
def _given_slow(context: Context, text: str) -> None:
    context.anthropic_server.stop()
    context.anthropic_server = ScriptedAnthropicServer(
        [ScriptedReply(text=text)], token_interval_s=0.05
    )
    context.anthropic_server.start()
    context.add_cleanup(context.anthropic_server.stop)


@given("the Anthropic server's script starts with a call of get_weather with the arguments {raw}")
def _given_raw_arguments(context: Context, raw: str) -> None:
    reply = ScriptedReply(tool_calls=(ScriptedToolCall(name="get_weather", args=raw),))
    context.raw_arguments = raw
    _serve(context, [reply, reply])


@given(
    'the Anthropic server\'s script starts with the text "{text}" as model {model}, {write:d} '
    "tokens written to the {ttl} cache, input usage in message_start only"
)
def _given_details(context: Context, text: str, model: str, write: int, ttl: str) -> None:
    reply = ScriptedAnthropicReply(
        text=text,
        model_name=model,
        cache_write_tokens=write,
        cache_write_ttl=ttl,
        usage_in_message_start_only=True,
    )
    # Twice: once for the SDK, once read as raw events.
    _serve(context, [reply, reply])


# -- When -------------------------------------------------------------------------------------


@when('the Anthropic server is asked "{prompt}" by the {client} client with thinking {state}')
def _when_asked(context: Context, prompt: str, client: str, state: str) -> None:
    _send(context, client, _request(prompt, thinking=state == "on"))


@when("the SDK message is sent back with the tool results, {change}")
def _when_echoed(context: Context, change: str) -> None:
    _send(context, "sync blocking", _echo_request(context, change))


@when("the Anthropic server is sent a streamed request with thinking on over plain HTTP")
def _when_raw_stream(context: Context) -> None:
    body = {**_request("Weather in Paris and Rome?", thinking=True), "stream": True}
    url = f"{context.anthropic_server.base_url}/v1/messages"
    response = httpx.post(url, json=body, headers={"x-api-key": _API_KEY})
    assert response.status_code == 200, response.text
    context.raw_events = _sse_events(response.text)


@when("the Anthropic server is sent POST {path} with the body {body}")
def _when_raw_post(context: Context, path: str, body: str) -> None:
    url = f"{context.anthropic_server.base_url}{path}"
    context.raw_response = httpx.post(url, content=body.encode())


@when("the Anthropic server is sent GET {path}")
def _when_raw_get(context: Context, path: str) -> None:
    context.raw_response = httpx.get(f"{context.anthropic_server.base_url}{path}")


@when(
    'the Anthropic server is given the reply "{text}" and asked twice by the sync blocking client'
)
def _when_asked_twice(context: Context, text: str) -> None:
    _serve(context, [ScriptedReply(text=text), ScriptedReply(text=text)])
    for prompt in ("Hi", "Hi again, server"):
        _send(context, "sync blocking", _request(prompt, thinking=False))


@when(
    'the Anthropic server is asked "{prompt}" over plain HTTP and the client leaves after '
    "{count:d} text deltas"
)
def _when_client_leaves(context: Context, prompt: str, count: int) -> None:
    body = {**_request(prompt, thinking=False), "stream": True}
    url = f"{context.anthropic_server.base_url}/v1/messages"
    deltas = 0
    with httpx.stream("POST", url, json=body) as response:
        for line in response.iter_lines():
            deltas += '"text_delta"' in line
            if deltas == count:
                break
    server = context.anthropic_server
    deadline = time.monotonic() + _MAX_WAIT_S
    while not server.billed and time.monotonic() < deadline:
        time.sleep(_WAIT_STEP_S)


@when(
    "the Anthropic server is sent the same blocking request twice over plain HTTP, streamed then "
    "blocking"
)
def _when_raw_both(context: Context) -> None:
    url = f"{context.anthropic_server.base_url}/v1/messages"
    body = _request("Weather in Paris?", thinking=False)
    streamed = httpx.post(url, json={**body, "stream": True})
    context.raw_events = _sse_events(streamed.text)
    context.raw_response = httpx.post(url, json=body)


@when('ChatAnthropic asks the Anthropic server "{prompt}" with thinking on, {mode}')
def _when_chat_anthropic(context: Context, prompt: str, mode: str) -> None:
    model = ChatAnthropic(
        model=_MODEL,
        base_url=context.anthropic_server.base_url,
        api_key=_API_KEY,
        max_retries=0,
        max_tokens=_MAX_TOKENS,
        thinking=_THINKING,
    )

    async def run() -> AIMessage:
        if mode == "invoked":
            return await model.ainvoke(prompt)
        chunks = [chunk async for chunk in model.astream(prompt)]
        folded = chunks[0]
        for chunk in chunks[1:]:
            folded += chunk
        return folded

    context.chat_reply = asyncio.run(run())


# -- Then -------------------------------------------------------------------------------------


@then('the SDK message starts with a signed thinking block saying "{thinking}"')
def _then_thinking_first(context: Context, thinking: str) -> None:
    first = _message(context).content[0]
    assert first.type == "thinking", first
    assert first.thinking == thinking, first.thinking
    # The signature is opaque; what matters is that the server accepts it back (another
    # scenario), and that it is not empty.
    assert first.signature, "the thinking block has no signature"


@then('the SDK message then has the redacted thinking "{data}" and the text "{text}"')
def _then_redacted_and_text(context: Context, data: str, text: str) -> None:
    second, third = _message(context).content[1:3]
    assert (second.type, second.data) == ("redacted_thinking", data), second
    assert (third.type, third.text) == ("text", text), third


@then("the SDK message calls {calls}")
def _then_calls(context: Context, calls: str) -> None:
    expected = [(c.id, c.name, c.args) for c in scripted_tool_calls(calls)]
    blocks = [b for b in _message(context).content if b.type == "tool_use"]
    assert [(b.id, b.name, b.input) for b in blocks] == expected, blocks


@then("the SDK message stopped for {reason}")
def _then_stop_reason(context: Context, reason: str) -> None:
    assert _message(context).stop_reason == reason, _message(context).stop_reason


@then(
    "the SDK message's usage is what the server billed, {read:d} read from and {write:d} "
    "written to the cache"
)
def _then_usage_billed(context: Context, read: int, write: int) -> None:
    usage = _message(context).usage
    billed = context.anthropic_server.billed[-1]
    prompt = _words(context.sdk_request["messages"][0]["content"])
    reply = context.scripted[0]
    calls = " ".join(json.dumps(call.args) for call in reply.tool_calls)
    output = _words(f"{reply.thinking} {reply.text} {calls}")
    assert (billed.prompt_tokens, billed.completion_tokens) == (prompt, output), billed
    assert (billed.cache_read_tokens, billed.cache_write_tokens) == (read, write), billed
    assert billed.cached_tokens == read, billed
    reported = (
        usage.input_tokens,
        usage.cache_read_input_tokens,
        usage.cache_creation_input_tokens,
        usage.output_tokens,
    )
    assert reported == (prompt - read - write, read, write, output), usage


@then("the SDK message reports the words of its thinking as thinking tokens")
def _then_thinking_tokens(context: Context) -> None:
    details = _message(context).usage.output_tokens_details
    assert details is not None, "no output_tokens_details"
    assert details.thinking_tokens == _words(context.scripted[0].thinking), details
    billed = context.anthropic_server.billed[-1]
    assert billed.reasoning_tokens == details.thinking_tokens, billed


@then("the two SDK messages are equal apart from their ids and signatures")
def _then_same_messages(context: Context) -> None:
    streamed, blocking = (m.model_dump() for m in context.sdk_messages[-2:])
    for message in (streamed, blocking):
        message.pop("id")
        message["content"][0].pop("signature")
    assert streamed == blocking, (streamed, blocking)


@then("every event's name is the type of its data")
def _then_event_names(context: Context) -> None:
    mismatched = [(name, data["type"]) for name, data in context.raw_events if name != data["type"]]
    assert not mismatched, mismatched


@then(
    "the events are message_start, ping, then start, deltas and stop per block, message_delta, "
    "message_stop"
)
def _then_event_order(context: Context) -> None:
    names = [name for name, _ in context.raw_events]
    assert names[:2] == ["message_start", "ping"], names
    assert names[-2:] == ["message_delta", "message_stop"], names
    blocks = [data for name, data in context.raw_events[2:-2]]
    index = -1
    for event in blocks:
        if event["type"] == "content_block_start":
            index += 1
        assert event["index"] == index, (event, index)
    starts = [e for e in blocks if e["type"] == "content_block_start"]
    stops = [e for e in blocks if e["type"] == "content_block_stop"]
    assert len(starts) == len(stops) == 5, names
    delta = context.raw_events[-2][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}, delta


@then("message_start reports the input usage with the cache parts and no content")
def _then_message_start(context: Context) -> None:
    message = context.raw_events[0][1]["message"]
    assert (message["content"], message["stop_reason"]) == ([], None), message
    usage = message["usage"]
    prompt = _words("Weather in Paris and Rome?")
    expected = {
        "input_tokens": prompt - 5,
        "cache_read_input_tokens": 3,
        "cache_creation_input_tokens": 2,
    }
    assert {key: usage[key] for key in expected} == expected, usage
    final = context.raw_events[-2][1]["usage"]
    assert {key: final[key] for key in expected} == expected, final


@then(
    "each tool_use block starts with empty input and an empty input_json_delta, then its "
    "arguments in several pieces"
)
def _then_tool_use_framing(context: Context) -> None:
    events = [data for _, data in context.raw_events]
    tool_blocks = [
        e["index"]
        for e in events
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"
    ]
    assert len(tool_blocks) == 2, events
    for index, call in zip(tool_blocks, context.scripted[0].tool_calls, strict=True):
        start = next(
            e for e in events if e["type"] == "content_block_start" and e["index"] == index
        )
        assert start["content_block"]["input"] == {}, start
        pieces = [
            e["delta"]["partial_json"]
            for e in events
            if e["type"] == "content_block_delta" and e["index"] == index
        ]
        assert pieces[0] == "", pieces
        assert len(pieces) > 2, pieces
        assert json.loads("".join(pieces)) == call.args, pieces


@then("the thinking block's signature arrives in a signature_delta after its thinking_deltas")
def _then_signature_delta(context: Context) -> None:
    deltas = [
        data["delta"]
        for name, data in context.raw_events
        if name == "content_block_delta" and data["index"] == 0
    ]
    kinds = [delta["type"] for delta in deltas]
    assert kinds[-1] == "signature_delta", kinds
    assert set(kinds[:-1]) == {"thinking_delta"}, kinds
    thinking = "".join(delta["thinking"] for delta in deltas[:-1])
    assert thinking == context.scripted[0].thinking, thinking
    assert len(deltas) > 2, "the thinking text came in one delta"


@then("the Anthropic server timed each content-block event it sent, in order")
def _then_event_times(context: Context) -> None:
    sent = [name for name, _ in context.raw_events if name.startswith("content_block_")]
    times = context.anthropic_server.chunk_times[-1]
    assert len(times) == len(sent), (times, sent)
    assert times == sorted(times), times


@then("the SDK message's blocks are {kinds}")
def _then_block_kinds(context: Context, kinds: str) -> None:
    actual = [block.type for block in _message(context).content]
    assert actual == kinds.split(", "), actual


@then('the Anthropic server answered "{text}"')
def _then_answered(context: Context, text: str) -> None:
    message = _message(context)
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", text)]


@then('the SDK client failed with {kind}, an {error_type} saying "{message}"')
@then('the SDK client failed with {kind}, a {error_type} saying "{message}"')
def _then_sdk_error_body(context: Context, kind: str, error_type: str, message: str) -> None:
    error = context.sdk_error
    assert type(error).__name__ == kind, repr(error)
    body = error.body
    assert body["type"] == "error", body
    assert body["error"]["type"] == error_type, body
    assert body["error"]["message"].startswith(message), body


@then("the SDK's error carried the header retry-after: {value}")
def _then_retry_after(context: Context, value: str) -> None:
    assert context.sdk_error.response.headers.get("retry-after") == value, context.sdk_error


@then(
    "the SDK message names the model {model}, its cache writes are {write:d} for {ttl}, and "
    "message_delta reported only the output tokens"
)
def _then_details(context: Context, model: str, write: int, ttl: str) -> None:
    message = _message(context)
    billed = context.anthropic_server.billed[0]
    assert (message.model, billed.model) == (model, model), (message.model, billed)
    usage = message.usage
    # The SDK keeps message_start's input usage when message_delta brings none.
    assert usage.input_tokens == billed.prompt_tokens - write, usage
    assert usage.cache_creation_input_tokens == write, usage
    creation = usage.cache_creation
    assert creation is not None, usage
    by_ttl = {"5m": creation.ephemeral_5m_input_tokens, "1h": creation.ephemeral_1h_input_tokens}
    assert by_ttl == {"5m": write * (ttl == "5m"), "1h": write * (ttl == "1h")}, creation
    assert (billed.cache_write_tokens, billed.cache_write_ttl) == (write, ttl), billed
    delta = context.raw_events[-2][1]
    assert delta["usage"] == {"output_tokens": billed.completion_tokens}, delta


@then("the SDK client failed with {kind}")
def _then_sdk_error(context: Context, kind: str) -> None:
    assert type(context.sdk_error).__name__ == kind, repr(context.sdk_error)


@then(
    "the Anthropic server recorded {requests:d} requests, billed {billed:d} and still holds its "
    "reply"
)
def _then_record(context: Context, requests: int, billed: int) -> None:
    server = context.anthropic_server
    assert len(server.requests) == requests, server.requests
    assert len(server.billed) == billed, server.billed
    assert server.replies_left == 1, server.replies_left


@then("the Anthropic server billed nothing")
def _then_billed_nothing(context: Context) -> None:
    assert context.anthropic_server.billed == [], context.anthropic_server.billed


@then(
    "the Anthropic server billed {prompt:d} prompt and {completion:d} completion tokens, "
    "not completed"
)
def _then_billed_partial(context: Context, prompt: int, completion: int) -> None:
    (billed,) = context.anthropic_server.billed
    actual = (billed.prompt_tokens, billed.completion_tokens, billed.completed)
    assert actual == (prompt, completion, False), billed


@then(
    "the Anthropic server billed {prompt:d} prompt and {completion:d} completion tokens, completed"
)
def _then_billed_completed(context: Context, prompt: int, completion: int) -> None:
    billed = context.anthropic_server.billed[0]
    actual = (billed.prompt_tokens, billed.completion_tokens, billed.completed)
    assert actual == (prompt, completion, True), billed
    usage = _message(context).usage
    assert (usage.input_tokens, usage.output_tokens) == (prompt, completion), usage


@then(
    "the Anthropic server billed {prompt:d} prompt and at least {completion:d} completion tokens, "
    "not completed"
)
def _then_billed_left(context: Context, prompt: int, completion: int) -> None:
    (billed,) = context.anthropic_server.billed
    assert (billed.prompt_tokens, billed.completed) == (prompt, False), billed
    # The server may have written a word or two more before it noticed the client had gone.
    assert completion <= billed.completion_tokens < 8, billed


@then("the Anthropic server received the API key on both requests")
def _then_api_key(context: Context) -> None:
    # `x-api-key` as the API documents it, or a bearer token as recent SDKs send it.
    keys = [
        headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        for headers in context.anthropic_server.request_headers
    ]
    assert keys == [_API_KEY, _API_KEY], keys


@then("the Anthropic server's billed total is the sum of its {count:d} bills")
def _then_billed_total(context: Context, count: int) -> None:
    server = context.anthropic_server
    billed = server.billed
    assert len(billed) == count, billed
    expected = (_words("Hi") + _words("Hi again, server"), 2 * _words("Sunny in both."))
    total = server.billed_total
    assert (total.prompt_tokens, total.completion_tokens) == expected, total
    assert [b.prompt_tokens for b in billed] == [1, 3], billed


@then("the streamed tool_use input is {raw} and the blocking one is that text as a string")
def _then_raw_arguments(context: Context, raw: str) -> None:
    pieces = [
        data["delta"]["partial_json"]
        for name, data in context.raw_events
        if name == "content_block_delta"
    ]
    assert "".join(pieces) == raw, pieces
    (block,) = context.raw_response.json()["content"]
    assert block["input"] == raw, block


@then(
    "the Anthropic server refuses a second start and a base_url before its start, and stops twice"
)
def _then_lifecycle(context: Context) -> None:
    server = ScriptedAnthropicServer([ScriptedReply(text="Hi")])
    _should_raise(lambda: server.base_url, "ScriptedAnthropicServer is not started")
    with server:
        _should_raise(server.start, "ScriptedAnthropicServer is already started")
        assert server.base_url.startswith("http://127.0.0.1:"), server.base_url
    server.stop()
    _should_raise(lambda: server.base_url, "ScriptedAnthropicServer is not started")


def _should_raise(action: Callable[[], object], message: str) -> None:
    error: RuntimeError | None = None
    try:
        action()
    except RuntimeError as raised:
        error = raised
    assert error is not None, f"expected RuntimeError({message!r})"
    assert str(error) == message, error


@then(
    "the Anthropic server answered {status:d} with an invalid_request_error or not_found_error "
    'saying "{message}"'
)
def _then_raw_error(context: Context, status: int, message: str) -> None:
    response = context.raw_response
    kind = {400: "invalid_request_error", 404: "not_found_error"}[status]
    assert response.status_code == status, response.text
    assert response.json() == {"type": "error", "error": {"type": kind, "message": message}}


@then('scripting the Anthropic server with a reply without usage fails with "{message}"')
def _then_omit_usage_refused(context: Context, message: str) -> None:
    error: ValueError | None = None
    try:
        ScriptedAnthropicServer([ScriptedReply(text="Hi", omit_usage=True)])
    except ValueError as raised:
        error = raised
    assert error is not None, "a reply without usage was accepted"
    assert str(error) == message, error


@then(
    "ChatAnthropic's usage is what the server billed, {read:d} read from the cache and {write:d} "
    "written to it for 5 minutes"
)
def _then_chat_usage(context: Context, read: int, write: int) -> None:
    usage = context.chat_reply.usage_metadata
    billed = context.anthropic_server.billed[-1]
    assert usage is not None, "no usage_metadata"
    assert usage["input_tokens"] == billed.prompt_tokens, (usage, billed)
    assert usage["output_tokens"] == billed.completion_tokens, (usage, billed)
    details = usage.get("input_token_details", {})
    assert details.get("cache_read") == read, details
    # The API reports writes by lifetime too; langchain-anthropic then counts them there only.
    assert details.get("ephemeral_5m_input_tokens") == write, details
    assert details.get("cache_creation") == 0, details


@then(
    "ChatAnthropic's reply keeps the thinking block with its signature and calls get_weather twice"
)
def _then_chat_reply(context: Context) -> None:
    reply = context.chat_reply
    first = reply.content[0]
    assert isinstance(first, dict), reply.content
    assert first["type"] == "thinking", reply.content
    assert first["thinking"] == context.scripted[0].thinking, first
    assert first["signature"], first
    assert [call["name"] for call in reply.tool_calls] == ["get_weather", "get_weather"]
    assert [call["args"] for call in reply.tool_calls] == [
        call.args for call in context.scripted[0].tool_calls
    ]
