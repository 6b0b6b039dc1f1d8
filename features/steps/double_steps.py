"""Steps about the shipped doubles seen from outside: the scripted OpenAI server over real HTTP
on 127.0.0.1, the token counter without tiktoken's encoding, and a chat model that misbehaves.

The server's own records (`requests`, `billed`, `chunk_times`, `request_headers`) are checked
against what the client sent and received, never against figures printed by the server. Words
are counted here with `str.split()`, the rule the scripted doubles document for their billing.

Every step text starts with "the scripted server", "the token counter" or "a chat model that",
so none can shadow the steps of the other modules.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import tiktoken.load
from behave import given, then, when
from behave.runner import Context
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableLambda
from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from cleveractors import ActorExecutor, LLMAgent
from cleveractors import tokens as token_module
from cleveractors.demo import get_weather
from cleveractors.testing import (
    ScriptedChatModel,
    ScriptedOpenAIServer,
    ScriptedReply,
)
from cleveractors.testing.tables import scripted_reply, scripted_tool_calls

_MODEL = "gpt-4o-mini"
_API_KEY = "sk-scripted-test"
_WAIT_STEP_S = 0.01
_MAX_WAIT_S = 5.0
"""Bound on waiting for the server thread's record of a request the client abandoned."""
# tiktoken's cache key for an encoding file is the SHA-1 of the URL it is downloaded from.
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"


@dataclass
class _ClientCall:
    """One chat request made with the `openai` client, and what the client got back."""

    prompt: str
    streamed: bool
    completion: ChatCompletion | None = None
    chunks: list[ChatCompletionChunk] = field(default_factory=list)
    error: Exception | None = None
    request_index: int = -1
    """The request's position in the server's record, from 0."""

    @property
    def text(self) -> str:
        """The reply text the client received (in full, or up to a break)."""
        if self.completion is not None:
            return self.completion.choices[0].message.content or ""
        return "".join(
            chunk.choices[0].delta.content or "" for chunk in self.chunks if chunk.choices
        )

    @property
    def arguments(self) -> list[str]:
        """The tool-call arguments the client received, one text per call."""
        if self.completion is not None:
            calls = self.completion.choices[0].message.tool_calls or []
            # Custom tool calls have no `.function`; the script makes function calls only.
            return [call.function.arguments for call in calls]  # type: ignore[union-attr]
        joined: dict[int, str] = {}
        for chunk in self.chunks:
            for fragment in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                part = fragment.function.arguments if fragment.function else None
                joined[fragment.index] = joined.get(fragment.index, "") + (part or "")
        return [joined[index] for index in sorted(joined)]


def _words(text: str) -> int:
    return len(text.split())


def _server(context: Context, replies: list[ScriptedReply], *, started: bool) -> None:
    context.script = replies
    context.server = ScriptedOpenAIServer(replies)
    context.add_cleanup(context.server.stop)
    context.client_calls = []
    context.http_responses = []
    context.server_error = None
    if started:
        context.server.start()


def _client(context: Context) -> OpenAI:
    client: OpenAI | None = getattr(context, "openai_client", None)
    if client is None:
        client = OpenAI(
            base_url=context.server.base_url,
            api_key=_API_KEY,
            max_retries=0,
            default_headers=getattr(context, "extra_headers", None),
        )
        context.openai_client = client
        context.add_cleanup(client.close)
    return client


def _ask(
    context: Context,
    prompt: str,
    *,
    streamed: bool,
    stream_options: dict[str, bool] | None = None,
    stop_after: int | None = None,
    messages: list[dict[str, Any]] | None = None,
) -> _ClientCall:
    """Send one chat request with the `openai` client: `prompt` as the user's message, unless
    `messages` are given, in which case `prompt` is the text the request should be billed for.
    `stop_after` closes a stream after that many content chunks."""
    call = _ClientCall(prompt=prompt, streamed=streamed)
    sent = messages if messages is not None else [{"role": "user", "content": prompt}]
    client = _client(context)
    try:
        if not streamed:
            call.completion = client.chat.completions.create(model=_MODEL, messages=sent)
        else:
            options = {"stream_options": stream_options} if stream_options is not None else {}
            stream = client.chat.completions.create(
                model=_MODEL, messages=sent, stream=True, **options
            )
            for chunk in stream:
                call.chunks.append(chunk)
                if stop_after is not None and _content_chunks(call) == stop_after:
                    stream.close()
                    break
    except Exception as exc:  # the Then steps say which error the client should have seen
        call.error = exc
    call.request_index = len(context.server.requests) - 1
    context.client_calls.append(call)
    return call


def _content_chunks(call: _ClientCall) -> int:
    return sum(
        1
        for chunk in call.chunks
        if chunk.choices and (chunk.choices[0].delta.content or chunk.choices[0].delta.tool_calls)
    )


def _billed_for(context: Context, call: _ClientCall) -> Any:
    records = [b for b in context.server.billed if b.request_index == call.request_index]
    assert len(records) == 1, f"request {call.request_index} billed {records}"
    return records[0]


def _chat_body(prompt: str) -> dict[str, Any]:
    return {"model": _MODEL, "messages": [{"role": "user", "content": prompt}]}


# -- Given: a scripted server ------------------------------------------------------------------


@given("the scripted server is started with the replies:")
def _given_server_script(context: Context) -> None:
    _server(context, [scripted_reply(row.as_dict()) for row in context.table], started=True)


@given('the scripted server is started with the reply "{text}"')
def _given_server_reply(context: Context, text: str) -> None:
    _server(context, [ScriptedReply(text=text)], started=True)


@given('the scripted server is created with the replies "{first}" and "{second}", not started')
def _given_server_not_started(context: Context, first: str, second: str) -> None:
    _server(context, [ScriptedReply(text=first), ScriptedReply(text=second)], started=False)


@given('the scripted server\'s client sends the header {name} "{value}"')
def _given_extra_header(context: Context, name: str, value: str) -> None:
    context.extra_headers = {name: value}


# -- When: requests over HTTP ------------------------------------------------------------------


@when("the scripted server is sent {method} {path} with the body {body}")
def _when_raw_request(context: Context, method: str, path: str, body: str) -> None:
    origin = context.server.base_url.removesuffix("/v1")
    headers = {"Content-Type": "application/json"}
    response = httpx.request(method, origin + path, content=body.encode(), headers=headers)
    context.http_responses.append(response)


@when("the scripted server is sent GET {path}")
def _when_raw_get(context: Context, path: str) -> None:
    origin = context.server.base_url.removesuffix("/v1")
    context.http_responses.append(httpx.get(origin + path))


@when("the scripted server is sent {count:d} chat request")
@when("the scripted server is sent {count:d} chat requests")
def _when_chat_requests(context: Context, count: int) -> None:
    url = context.server.base_url + "/chat/completions"
    for number in range(count):
        body = _chat_body(f"Question number {number + 1}")
        context.http_responses.append(httpx.post(url, json=body))


@when('the scripted server is given the reply "{text}" and sent 1 chat request')
def _when_replies_added(context: Context, text: str) -> None:
    context.server.add_replies([ScriptedReply(text=text)])
    _when_chat_requests(context, 1)


@when('the scripted server is asked "{prompt}" by the openai client, blocking')
def _when_asked_blocking(context: Context, prompt: str) -> None:
    _ask(context, prompt, streamed=False)


@when('the scripted server is asked "{prompt}" by the openai client, streamed {options}')
def _when_asked_streamed(context: Context, prompt: str, options: str) -> None:
    stream_options = {
        "with include_usage": {"include_usage": True},
        "without stream_options": None,
    }
    assert options in stream_options, f"unknown stream options {options!r}"
    _ask(context, prompt, streamed=True, stream_options=stream_options[options])


@when("the scripted server is sent a message whose content parts are:")
def _when_content_parts(context: Context) -> None:
    parts = [
        {"type": "text", "text": row["text"]}
        if row["type"] == "text"
        else {"type": "image_url", "image_url": {"url": row["text"]}}
        for row in context.table
    ]
    texts = " ".join(row["text"] for row in context.table if row["type"] == "text")
    _ask(context, texts, streamed=False, messages=[{"role": "user", "content": parts}])


@when(
    'the scripted server is asked "{prompt}" after the assistant called {name} with {args}'
    ' and got "{output}"'
)
def _when_asked_after_tool_call(
    context: Context, prompt: str, name: str, args: str, output: str
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
    messages = [
        {"role": "user", "content": "Can you look something up?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": output},
        {"role": "user", "content": prompt},
    ]
    # The assistant message has no text: its arguments are what it costs.
    billed_text = " ".join(["Can you look something up?", args, output, prompt])
    _ask(context, billed_text, streamed=False, messages=messages)


@when("the scripted server is used as a context manager for 1 chat request")
def _when_context_manager(context: Context) -> None:
    with context.server as server:
        body = _chat_body("Hello?")
        context.http_responses.append(httpx.post(server.base_url + "/chat/completions", json=body))


@when('the scripted server is asked "{prompt}" and the client closes the stream after 1 word')
def _when_client_leaves(context: Context, prompt: str) -> None:
    captured = io.StringIO()
    # The handler thread writes any traceback to sys.stderr, whichever thread it runs in.
    with contextlib.redirect_stderr(captured):
        call = _ask(context, prompt, streamed=True, stop_after=1)
        deadline = time.monotonic() + _MAX_WAIT_S
        while not any(b.request_index == call.request_index for b in context.server.billed):
            assert time.monotonic() < deadline, "the server never billed the abandoned stream"
            time.sleep(_WAIT_STEP_S)
    context.server_stderr = captured.getvalue()


@when("the scripted server is started")
def _when_started(context: Context) -> None:
    context.server.start()


@when("the scripted server is started again")
def _when_started_again(context: Context) -> None:
    try:
        context.server.start()
    except RuntimeError as exc:
        context.server_error = exc


@when("the scripted server is stopped twice")
def _when_stopped_twice(context: Context) -> None:
    context.server.stop()
    context.server.stop()


# -- Then: what the client got -----------------------------------------------------------------


@then('the scripted server answered {status:d} with an {kind} saying "{message}"')
@then('the scripted server answered {status:d} with a {kind} saying "{message}"')
def _then_error_answer(context: Context, status: int, kind: str, message: str) -> None:
    response = context.http_responses[-1]
    assert response.status_code == status, f"{response.status_code}: {response.text}"
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error == {"message": message, "type": kind, "code": None}, error


@then('the scripted server answered request {number:d} with "{text}"')
def _then_answered(context: Context, number: int, text: str) -> None:
    response = context.http_responses[number - 1]
    assert response.status_code == 200, f"{response.status_code}: {response.text}"
    assert response.json()["choices"][0]["message"]["content"] == text, response.json()


@then("the scripted server recorded no chat request and billed nothing")
def _then_nothing_recorded(context: Context) -> None:
    server = context.server
    assert server.requests == [], server.requests
    assert server.billed == [], server.billed


@then("the scripted server recorded {count:d} chat request and billed nothing")
def _then_recorded_unbilled(context: Context, count: int) -> None:
    _then_recorded(context, count)
    assert context.server.billed == [], context.server.billed


@then("the scripted server recorded {count:d} chat requests")
def _then_recorded(context: Context, count: int) -> None:
    assert len(context.server.requests) == count, context.server.requests


@then("the scripted server billed only the requests {indexes}")
def _then_billed_requests(context: Context, indexes: str) -> None:
    expected = [int(index) for index in re.split(r",\s*|\s+and\s+", indexes)]
    billed = [call.request_index for call in context.server.billed]
    assert billed == expected, f"billed requests {billed}"


@then("the scripted server's completion has no content and finishes with tool_calls")
def _then_tool_call_completion(context: Context) -> None:
    call = context.client_calls[-1]
    assert call.error is None, repr(call.error)
    choice = call.completion.choices[0]
    assert choice.message.content is None, choice.message
    assert choice.finish_reason == "tool_calls", choice.finish_reason


@then("the scripted server's completion calls {calls}")
def _then_completion_calls(context: Context, calls: str) -> None:
    received = context.client_calls[-1].completion.choices[0].message.tool_calls
    seen = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in received]
    expected = [(call.id, call.name, call.args) for call in scripted_tool_calls(calls)]
    assert seen == expected, seen


@then("the scripted server's completion reports no usage")
def _then_no_usage(context: Context) -> None:
    completion = context.client_calls[-1].completion
    assert completion.usage is None, completion.usage


@then("the scripted server's completion reports the usage it billed")
def _then_usage_billed(context: Context) -> None:
    call = context.client_calls[-1]
    usage, billed = call.completion.usage, _billed_for(context, call)
    assert usage is not None, "the completion reported no usage"
    reported = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
    assert reported == (billed.prompt_tokens, billed.completion_tokens, billed.total_tokens)


@then("the scripted server billed the words of the request and of the reply received")
def _then_billed_words(context: Context) -> None:
    call = context.client_calls[-1]
    assert call.error is None, repr(call.error)
    billed = _billed_for(context, call)
    received = _words(call.text) + sum(_words(arguments) for arguments in call.arguments)
    assert billed.prompt_tokens == _words(call.prompt), billed
    assert billed.completion_tokens == received, f"{billed} for {call.text!r} {call.arguments}"
    assert billed.total_tokens == billed.prompt_tokens + billed.completion_tokens
    assert (billed.streamed, billed.completed) == (call.streamed, True), billed


@then('the scripted server\'s stream carried "{text}" word by word, ending with {reason}')
def _then_stream_text(context: Context, text: str, reason: str) -> None:
    call = context.client_calls[-1]
    assert call.error is None, repr(call.error)
    deltas = [c.choices[0].delta.content for c in call.chunks if c.choices]
    assert [d for d in deltas if d] == re.findall(r"\s*\S+", text), deltas
    finishes = [c.choices[0].finish_reason for c in call.chunks if c.choices]
    assert finishes[-1] == reason, finishes
    assert not any(finishes[:-1]), finishes


@then("the scripted server's stream ended with the usage it billed")
def _then_stream_usage(context: Context) -> None:
    call = context.client_calls[-1]
    last, billed = call.chunks[-1], _billed_for(context, call)
    assert last.choices == [], last
    assert last.usage is not None, last
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        billed.prompt_tokens,
        billed.completion_tokens,
    )
    assert all(chunk.usage is None for chunk in call.chunks[:-1])


@then("the scripted server's stream carried no usage")
def _then_stream_no_usage(context: Context) -> None:
    chunks = context.client_calls[-1].chunks
    assert all(chunk.choices for chunk in chunks), "a usage-only chunk was sent"
    assert all(chunk.usage is None for chunk in chunks), [chunk.usage for chunk in chunks]


@then('the scripted server\'s client failed with {error_type} saying "{message}"')
def _then_client_failed_saying(context: Context, error_type: str, message: str) -> None:
    _then_client_failed(context, error_type)
    error = context.client_calls[-1].error
    assert message in str(error), str(error)


@then("the scripted server's client failed with {error_type}")
def _then_client_failed(context: Context, error_type: str) -> None:
    error = context.client_calls[-1].error
    assert error is not None, "the request succeeded"
    assert type(error).__name__ == error_type, repr(error)


@then("the scripted server's client received the first {count:d} words before the break")
def _then_received_before_break(context: Context, count: int) -> None:
    call = context.client_calls[-1]
    scripted = context.script[call.request_index].text
    assert call.text == "".join(re.findall(r"\s*\S+", scripted)[:count]), call.text


@then("the scripted server billed the prompt in full and the words received, as not completed")
def _then_billed_cut_off(context: Context) -> None:
    call = context.client_calls[-1]
    billed = _billed_for(context, call)
    assert billed.prompt_tokens == _words(call.prompt), billed
    assert billed.completion_tokens == _words(call.text), f"{billed} for {call.text!r}"
    assert (billed.streamed, billed.completed) == (call.streamed, False), billed


@then(
    "the scripted server billed the prompt in full and, as not completed, at least the words"
    " the client read but fewer than the reply's"
)
def _then_billed_abandoned(context: Context) -> None:
    call = context.client_calls[-1]
    billed = _billed_for(context, call)
    scripted = context.script[call.request_index].text
    assert billed.prompt_tokens == _words(call.prompt), billed
    assert _words(call.text) <= billed.completion_tokens < _words(scripted), billed
    assert (billed.streamed, billed.completed) == (True, False), billed


@then("the scripted server printed no traceback")
def _then_no_traceback(context: Context) -> None:
    assert "Traceback" not in context.server_stderr, context.server_stderr


@then("the scripted server timed each content and tool-call chunk the client received, in order")
def _then_chunk_times(context: Context) -> None:
    call = next(call for call in context.client_calls if call.streamed)
    times = context.server.chunk_times[call.request_index]
    assert len(times) == _content_chunks(call), f"{len(times)} times, {_content_chunks(call)}"
    assert times == sorted(times), times


@then("the scripted server timed no chunk for the blocking request")
def _then_no_chunk_times(context: Context) -> None:
    call = next(call for call in context.client_calls if not call.streamed)
    assert context.server.chunk_times[call.request_index] == []


@then('the scripted server saw the header {name} "{value}"')
def _then_header(context: Context, name: str, value: str) -> None:
    headers = context.server.request_headers[-1]
    assert headers.get(name) == value, headers


@then("the scripted server saw every header name in lower case")
def _then_lower_case_headers(context: Context) -> None:
    for headers in context.server.request_headers:
        assert all(name == name.lower() for name in headers), list(headers)


@then("the scripted server's billed total adds up its calls and the words of every exchange")
def _then_billed_total(context: Context) -> None:
    server, calls = context.server, context.client_calls
    total, billed = server.billed_total, server.billed
    assert len(billed) == len(calls), billed
    assert total.prompt_tokens == sum(call.prompt_tokens for call in billed)
    assert total.completion_tokens == sum(call.completion_tokens for call in billed)
    assert total.total_tokens == sum(call.total_tokens for call in billed)
    assert total.prompt_tokens == sum(_words(call.prompt) for call in calls), total
    assert total.completion_tokens == sum(_words(call.text) for call in calls), total


@then('the scripted server\'s base_url fails with RuntimeError "{message}"')
def _then_base_url_fails(context: Context, message: str) -> None:
    error: RuntimeError | None = None
    try:
        url = context.server.base_url
    except RuntimeError as exc:
        error = exc
    assert error is not None, f"base_url gave {url!r}"
    assert str(error) == message, str(error)


@then("the scripted server's base_url is an http URL on 127.0.0.1 ending in /v1")
def _then_base_url(context: Context) -> None:
    url = context.server.base_url
    match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/v1", url)
    assert match is not None, url
    assert int(match[1]) > 0, url


@then('the scripted server refused with RuntimeError "{message}"')
def _then_refused(context: Context, message: str) -> None:
    assert isinstance(context.server_error, RuntimeError), context.server_error
    assert str(context.server_error) == message, str(context.server_error)


@then("the scripted server's client got {count:d} answer before it failed with {error_type}")
def _then_answers_then_failure(context: Context, count: int, error_type: str) -> None:
    calls = context.client_calls
    assert [call.error is None for call in calls] == [True] * count + [False], calls
    assert type(calls[-1].error).__name__ == error_type, repr(calls[-1].error)
    assert len(context.server.requests) == count, "a request reached the stopped server"


@then("the scripted server billed the words of the text parts only")
def _then_parts_billed(context: Context) -> None:
    call = context.client_calls[-1]
    assert call.error is None, repr(call.error)
    billed = _billed_for(context, call)
    assert billed.prompt_tokens == _words(call.prompt), (billed, call.prompt)


# -- the token counter -------------------------------------------------------------------------


def _use_cache_dir(context: Context, value: str) -> None:
    """Point tiktoken's cache at `value` for this scenario only, with the counter reloaded."""
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")

    def restore() -> None:
        if saved is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved
        # Back to the encoding (or none) the rest of the suite found, from the cache only.
        token_module.reload_encoding()

    context.add_cleanup(restore)
    os.environ["TIKTOKEN_CACHE_DIR"] = value
    token_module.reload_encoding()


def _empty_folder(context: Context) -> str:
    folder = tempfile.mkdtemp(prefix="tiktoken-cache-")
    context.add_cleanup(shutil.rmtree, folder)
    return folder


@given("the token counter has an empty cache folder")
def _given_empty_cache(context: Context) -> None:
    _use_cache_dir(context, _empty_folder(context))


@given("the token counter has caching turned off")
def _given_caching_off(context: Context) -> None:
    # tiktoken reads an empty TIKTOKEN_CACHE_DIR as "do not cache": it would download every time.
    _use_cache_dir(context, "")


def _block_downloads(context: Context) -> None:
    """Make any download tiktoken attempts fail at once, and record it, so no scenario can
    reach the network (tiktoken fetches a cached file again when it cannot use it)."""
    context.downloads = []
    fetch = tiktoken.load.read_file

    def refuse(blobpath: str) -> bytes:
        context.downloads.append(blobpath)
        raise ConnectionError(f"the scenario refused to download {blobpath}")

    tiktoken.load.read_file = refuse
    context.add_cleanup(setattr, tiktoken.load, "read_file", fetch)


@given("the token counter finds a folder under o200k_base's cache key, with downloads blocked")
def _given_unreadable_cache_entry(context: Context) -> None:
    _block_downloads(context)
    folder = _empty_folder(context)
    os.mkdir(os.path.join(folder, hashlib.sha1(_ENCODING_URL.encode()).hexdigest()))
    _use_cache_dir(context, folder)


@given(
    "the token counter finds a damaged o200k_base file in its cache folder, with downloads blocked"
)
def _given_damaged_cache_file(context: Context) -> None:
    _block_downloads(context)
    folder = _empty_folder(context)
    context.cache_file = os.path.join(folder, hashlib.sha1(_ENCODING_URL.encode()).hexdigest())
    with open(context.cache_file, "wb") as damaged:
        damaged.write(b"not an encoding")
    _use_cache_dir(context, folder)


@then("the token counter left the damaged file in its cache folder")
def _then_file_kept(context: Context) -> None:
    with open(context.cache_file, "rb") as kept:
        assert kept.read() == b"not an encoding"


@then("the token counter downloaded nothing")
def _then_no_download(context: Context) -> None:
    assert context.downloads == [], context.downloads


@then("the token counter counts an empty text as 0 tokens")
def _then_empty_text(context: Context) -> None:
    assert token_module.count_tokens("") == 0


@then("the token counter counts each text as a quarter of its characters, rounded up:")
def _then_quarter(context: Context) -> None:
    for row in context.table:
        text = row["text"]
        counted = token_module.count_tokens(text)
        assert counted == math.ceil(len(text) / 4), f"{text!r}: {counted} tokens"


@then('the token counter logged at {level} that it estimates, saying "{text}"')
def _then_counter_logged(context: Context, level: str, text: str) -> None:
    lines = [
        record
        for record in context.log_records
        if record.name == token_module.__name__ and record.levelname == level
    ]
    assert len(lines) == 1, [record.getMessage() for record in lines]
    message = lines[0].getMessage()
    assert text in message, message
    assert "estimating 4 chars per token" in message, message


_CONVERSATION = [
    SystemMessage("You are a weather assistant."),
    HumanMessage("What is the weather in Paris?"),
]


@when("the token counter estimates a conversation whose assistant message calls {name} with {args}")
def _when_estimate(context: Context, name: str, args: str) -> None:
    context.arguments = json.loads(args)
    call = {"name": name, "args": context.arguments, "id": "call_1", "type": "tool_call"}
    with_call: list[BaseMessage] = [
        *_CONVERSATION,
        AIMessage("", tool_calls=[call]),
        ToolMessage("Sunny, 24 C", tool_call_id="call_1"),
    ]
    without_call = [*with_call[:2], AIMessage(""), with_call[3]]
    context.messages = with_call
    context.estimates = [
        token_module.estimate_prompt_tokens(messages) for messages in (with_call, without_call)
    ]


@then(
    "the token counter's estimate exceeds the same conversation without the call by the arguments"
)
def _then_estimate_counts_arguments(context: Context) -> None:
    with_call, without_call = context.estimates
    arguments = token_module.count_tokens(json.dumps(context.arguments))
    assert arguments > 0
    assert with_call - without_call == arguments, (with_call, without_call, arguments)


@then("the token counter's estimate is each message's text plus {framing:d} tokens, plus {reply:d}")
def _then_estimate_framing(context: Context, framing: int, reply: int) -> None:
    texts = [message.text for message in context.messages]
    arguments = json.dumps(context.arguments)
    expected = reply + sum(framing + math.ceil(len(text) / 4) for text in texts)
    expected += math.ceil(len(arguments) / 4)
    assert context.estimates[0] == expected, (context.estimates[0], expected)


# -- a chat model that misbehaves --------------------------------------------------------------


class _PlainTextModel(ScriptedChatModel):
    """A chat model whose tool-bound runnable answers with a string, not an AIMessage."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        return RunnableLambda(lambda _: "plain text")


@given(
    "a chat model that answers with plain text instead of an AIMessage, given the tool get_weather"
)
def _given_plain_text_model(context: Context) -> None:
    agent = LLMAgent(
        _PlainTextModel(replies=[]),
        tools=[get_weather],
        stream_tool_rounds=False,
    )
    context.executor = ActorExecutor(agent)
