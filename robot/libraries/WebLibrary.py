"""Keywords for the web suites: serve an actor over HTTP and talk to it as real clients do.

Servers are real processes on 127.0.0.1 (`cleveractors serve`, or uvicorn with the test app of
`web_usage_app.py`); clients are httpx (the `/chat` SSE stream), the official `openai` client,
LangChain's `ChatOpenAI` and headless Chromium (registered with SeleniumLibrary).

What a response should contain is read from the actor's YAML script (`Scripted Turn`), never copied
from an earlier response.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn
from support.billing import billing_problems, requests_of_conversation
from support.harness import Stop, after_items, consume, run_guarded

from cleveractors import TokenUsage
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

_LIBRARIES = Path(__file__).parent
_FEATURES = _LIBRARIES.parent.parent / "features"
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 15.0
_CLIENT_TIMEOUT_S = 30.0
_CHROMIUM = "/usr/bin/chromium"
_CHROMEDRIVER = "/usr/bin/chromedriver"
_API_KEYS_VARIABLE = "CLEVERACTORS_TEST_API_KEYS"
_PROVIDER_KEY_VARIABLE = "CLEVERACTORS_TEST_PROVIDER_KEY"
_SMALL_RECEIVE_BUFFER = 4096
_CALLER_HEADER = "X-Test-Caller"
# How long the scripted server may take to bill the requests of clients that left: its handler
# threads only notice when they next write, and a loaded machine runs them late.
_SERVER_SETTLE_TIMEOUT_S = 30.0


@dataclass
class ChatStream:
    """What a `/chat` client read: the SSE messages, as (event name, parsed data) pairs."""

    frames: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [data for _, data in self.frames]

    @property
    def kinds(self) -> list[str]:
        """The event kinds in order, a run of text deltas counted once."""
        kinds: list[str] = []
        for _, data in self.frames:
            if not (data["kind"] == "text_delta" and kinds and kinds[-1] == "text_delta"):
                kinds.append(data["kind"])
        return kinds

    @property
    def last(self) -> dict[str, Any]:
        return self.frames[-1][1]

    def text_of_round(self, round_number: int) -> str:
        return "".join(
            data["text"]
            for _, data in self.frames
            if data["kind"] == "text_delta" and data["round"] == round_number
        )


@dataclass
class _Server:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    base_url: str


@library(scope="SUITE", auto_keywords=False)
class WebLibrary:
    """Serve actors, talk to them over HTTP, and read what their scripts say they should answer."""

    def __init__(self) -> None:
        self._servers: list[_Server] = []
        self._profile_dirs: list[tempfile.TemporaryDirectory[str]] = []
        self._scripted_servers: list[ScriptedOpenAIServer] = []
        self._silent_readers: list[socket.socket] = []

    # -- servers -----------------------------------------------------------------------------

    @keyword
    def start_actor_server(self, actor: str, *options: str, api_keys: str | None = None) -> str:
        """Run `cleveractors serve ACTOR --host 127.0.0.1 --port <free port> [OPTIONS]`; return its
        base URL once it answers. API_KEYS (comma-separated) are handed to it through an
        environment variable and `--api-keys-env`."""
        port = _free_port()
        command = [
            str(Path(sys.executable).with_name("cleveractors")),
            "serve",
            actor,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *options,
        ]
        environment = os.environ.copy()
        if api_keys is not None:
            environment[_API_KEYS_VARIABLE] = api_keys
            command += ["--api-keys-env", _API_KEYS_VARIABLE]
        return self._start(Path(actor).stem, command, port, environment)

    @keyword
    def start_usage_recording_server(
        self,
        actor: str,
        usage_file: str,
        send_timeout_s: float | None = None,
        callers: bool = False,
    ) -> str:
        """Serve ACTOR with `create_app(on_usage=...)` appending each result to USAGE_FILE as a
        JSON line (`web_usage_app.py`, run by uvicorn); return its base URL. SEND_TIMEOUT_S, when
        given, is the app's `send_timeout_s`. With CALLERS, each request names its caller in a
        header (as `Send Concurrent Chats` does) and each line holds the caller and the prompt
        the estimate rule gives for each call's messages."""
        port = _free_port()
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "web_usage_app:create_usage_app",
            "--app-dir",
            str(_LIBRARIES),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        environment = os.environ.copy()
        environment["CLEVERACTORS_WEB_ACTOR"] = actor
        environment["CLEVERACTORS_WEB_USAGE_FILE"] = usage_file
        if send_timeout_s is not None:
            environment["CLEVERACTORS_WEB_SEND_TIMEOUT_S"] = str(send_timeout_s)
        if callers:
            environment["CLEVERACTORS_WEB_CALLER_HEADER"] = _CALLER_HEADER
            paths = [str(_FEATURES), environment.get("PYTHONPATH", "")]
            environment["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
        return self._start(f"{Path(actor).stem}-usage", command, port, environment)

    @keyword
    def stop_servers(self) -> None:
        """Stop every server this suite started, and log their output."""
        while self._silent_readers:
            self._silent_readers.pop().close()
        while self._scripted_servers:
            self._scripted_servers.pop().stop()
        while self._servers:
            server = self._servers.pop()
            # SIGINT, not SIGTERM: after its graceful shutdown uvicorn re-raises the signal it
            # caught, and SIGTERM's default action ends the process before atexit handlers run,
            # so coverage would lose the server's data. SIGINT ends it with KeyboardInterrupt.
            server.process.send_signal(signal.SIGINT)
            try:
                server.process.wait(timeout=_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                server.process.kill()
                server.process.wait()
                logger.warn(f"server {server.name} did not stop on SIGINT; killed")
            logger.info(f"{server.name} output:\n{server.log_path.read_text(errors='replace')}")

    def _start(self, name: str, command: list[str], port: int, env: dict[str, str]) -> str:
        log_dir = Path(BuiltIn().get_variable_value("${OUTPUT DIR}")) / "servers"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{name}-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        base_url = f"http://127.0.0.1:{port}"
        self._servers.append(_Server(name, process, log_path, base_url))
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {process.returncode}:\n{log_path.read_text()}"
                )
            try:
                if httpx.get(base_url + "/", timeout=1.0).status_code == 200:
                    return base_url
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not answer within {_READY_TIMEOUT_S:g}s")

    # -- what the script says ----------------------------------------------------------------

    @keyword
    def scripted_turn(self, actor: str) -> dict[str, Any]:
        """The first turn of ACTOR's stub script: its replies up to the first one without tool
        calls. Returns `calls` (the tokens of each reply that is billed, i.e. has no scripted
        error), their sums `prompt_tokens`, `completion_tokens` and `total_tokens`, `texts` (the
        billed replies' texts), `answer` (the last reply's text) and `error` (its scripted
        error, or None)."""
        script = yaml.safe_load(Path(actor).read_text(encoding="utf-8"))["agent"]["script"]
        turn = []
        for reply in script:
            turn.append(reply)
            if not reply.get("tool_calls"):
                break
        calls = [
            {
                "prompt_tokens": reply["prompt_tokens"],
                "completion_tokens": reply["completion_tokens"],
                "total_tokens": reply["prompt_tokens"] + reply["completion_tokens"],
                "cache_read_tokens": reply.get("cache_read_tokens", 0),
                "reasoning_tokens": reply.get("reasoning_tokens", 0),
            }
            for reply in turn
            if reply.get("error") is None
        ]
        return {
            "calls": calls,
            "prompt_tokens": sum(call["prompt_tokens"] for call in calls),
            "completion_tokens": sum(call["completion_tokens"] for call in calls),
            "total_tokens": sum(call["total_tokens"] for call in calls),
            "cache_read_tokens": sum(call["cache_read_tokens"] for call in calls),
            "reasoning_tokens": sum(call["reasoning_tokens"] for call in calls),
            "texts": [reply.get("text", "") for reply in turn if reply.get("error") is None],
            "answer": turn[-1].get("text", ""),
            "error": turn[-1].get("error"),
        }

    @keyword
    def default_body_limit(self) -> int:
        """`create_app()`'s default `max_body_bytes`, which `cleveractors serve` uses."""
        from cleveractors.web import create_app

        return int(inspect.signature(create_app).parameters["max_body_bytes"].default)

    # -- /chat -------------------------------------------------------------------------------

    @keyword
    def send_chat_message(
        self, base_url: str, message: str, history: list[dict[str, str]] | None = None
    ) -> ChatStream:
        """POST the message to `/chat` and read the whole SSE stream."""
        stream = ChatStream()
        body = {"message": message, "history": history or []}
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/chat", json=body) as response,
        ):
            response.raise_for_status()
            for name, data in _sse_messages(response.iter_lines()):
                stream.frames.append((name, json.loads(data)))
        logger.info(f"event kinds: {stream.kinds}")
        return stream

    @keyword
    def send_chat_message_and_hang_up(
        self, base_url: str, message: str, answer_words: int
    ) -> ChatStream:
        """POST to `/chat`, read until ANSWER_WORDS words of the answer (the text of a round after
        a tool call) have arrived, then close the connection mid-answer."""
        stream = ChatStream()
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/chat", json={"message": message}) as response,
        ):
            response.raise_for_status()
            for name, data in _sse_messages(response.iter_lines()):
                stream.frames.append((name, json.loads(data)))
                after_tools = "tool_call_finished" in stream.kinds
                if after_tools and stream.kinds[-1] == "text_delta":
                    round_number = stream.last["round"]
                    if len(stream.text_of_round(round_number).split()) >= int(answer_words):
                        break
        logger.info(f"hung up after: {stream.kinds}")
        return stream

    @keyword
    def event_names_should_match_their_kinds(self, stream: ChatStream) -> None:
        """Every SSE message is named (`event:`) by the `kind` in its data."""
        for name, data in stream.frames:
            if name != data["kind"]:
                raise AssertionError(f"SSE event {name!r} carries a {data['kind']!r} event")

    @keyword
    def event_kinds_should_be(self, stream: ChatStream, *kinds: str) -> None:
        """The stream's event kinds, a run of text deltas written once, are exactly KINDS."""
        if stream.kinds != list(kinds):
            raise AssertionError(f"event kinds\n  were {stream.kinds}\n  not  {list(kinds)}")

    @keyword
    def events_of_kind(self, stream: ChatStream, kind: str) -> list[dict[str, Any]]:
        return [event for event in stream.events if event["kind"] == kind]

    @keyword
    def streamed_text_of_round(self, stream: ChatStream, round_number: int) -> str:
        return stream.text_of_round(int(round_number))

    @keyword
    def usage_should_match_script(self, usage: dict[str, Any], turn: dict[str, Any]) -> None:
        """USAGE (a result, a usage record or an OpenAI `usage`) has the turn's token counts,
        the cached and reasoning ones included (where OpenAI puts them, for an OpenAI `usage`)."""
        details = usage
        if "prompt_tokens_details" in usage:
            details = {
                "cache_read_tokens": usage["prompt_tokens_details"]["cached_tokens"],
                "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"],
            }
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if usage[name] != turn[name]:
                raise AssertionError(f"{name} is {usage[name]}, the script bills {turn[name]}")
        for name in ("cache_read_tokens", "reasoning_tokens"):
            if details[name] != turn[name]:
                raise AssertionError(f"{name} is {details[name]}, the script bills {turn[name]}")

    # -- OpenAI-compatible clients -----------------------------------------------------------

    @keyword
    def ask_with_openai_client(self, base_url: str, message: str, **options: Any) -> dict[str, Any]:
        """A non-streamed completion from the official `openai` client, with OPTIONS (e.g.
        `max_tokens`) added to the request; returns the completion as a dict."""
        with _openai_client(base_url) as client:
            completion = client.chat.completions.create(
                model="web-actor",
                messages=[
                    {"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": message},
                ],
                temperature=0.2,
                **options,
            )
        return completion.model_dump()

    @keyword
    def stream_with_openai_client(
        self,
        base_url: str,
        message: str | list[dict[str, str]],
        include_usage: bool = True,
        **extra: Any,
    ) -> dict[str, Any]:
        """A streamed completion from the official `openai` client. MESSAGE is the user's
        content: text, or a list of content parts. Returns `content` (the deltas joined),
        `deltas`, `finish_reasons`, `usage` (from the usage chunk, None if none came) and
        `usage_chunk_choices` (that chunk's choices). EXTRA is added to the request."""
        options = {"stream_options": {"include_usage": True}} if include_usage else {}
        options.update(extra)
        content, finish_reasons, deltas = "", [], 0
        usage: dict[str, Any] | None = None
        usage_chunk_choices: list[Any] | None = None
        with _openai_client(base_url) as client:
            for chunk in client.chat.completions.create(
                model="web-actor",
                messages=[{"role": "user", "content": message}],
                stream=True,
                **options,
            ):
                if chunk.usage is not None:
                    usage, usage_chunk_choices = chunk.usage.model_dump(), chunk.choices
                for choice in chunk.choices:
                    if choice.delta.content:
                        content += choice.delta.content
                        deltas += 1
                    if choice.finish_reason is not None:
                        finish_reasons.append(choice.finish_reason)
        return {
            "content": content,
            "deltas": deltas,
            "finish_reasons": finish_reasons,
            "usage": usage,
            "usage_chunk_choices": usage_chunk_choices,
        }

    @keyword
    def openai_conversation_as_actor_turn(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """How the server reads an OpenAI `messages` list: returns the actor's `message` and
        `history`."""
        from cleveractors.web.openai_compat import ChatCompletionRequest

        request = ChatCompletionRequest.model_validate({"model": "m", "messages": messages})
        return {"message": request.message, "history": request.history}

    @keyword
    def openai_client_error(self, base_url: str, message: str, stream: bool = False) -> dict:
        """Ask (or stream) with the `openai` client, expecting it to raise; returns the error's
        `type` (class name), `status` (HTTP status, None for an in-stream error), `message`,
        and `content` received before it."""
        import openai

        content = ""
        with _openai_client(base_url) as client:
            try:
                reply = client.chat.completions.create(
                    model="web-actor",
                    messages=[{"role": "user", "content": message}],
                    stream=stream,
                )
                for chunk in reply if stream else ():
                    content += "".join(choice.delta.content or "" for choice in chunk.choices)
            except openai.APIError as error:
                # `body` is the `error` object of the response or of the in-stream error frame.
                detail = error.body if isinstance(error.body, dict) else {}
                return {
                    "type": type(error).__name__,
                    "status": getattr(error, "status_code", None),
                    "message": detail.get("message"),
                    "code": detail.get("code"),
                    "content": content,
                }
        raise AssertionError("the openai client did not raise")

    @keyword
    def list_models_with_openai_client(self, base_url: str) -> list[dict[str, Any]]:
        """`client.models.list()` from the official `openai` client; returns the models as dicts."""
        with _openai_client(base_url) as client:
            return [model.model_dump() for model in client.models.list()]

    @keyword
    def retrieve_model_with_openai_client(self, base_url: str, model_id: str) -> dict[str, Any]:
        """`client.models.retrieve(MODEL_ID)`; returns the model, or the error's `type`,
        `status` and `message` when the client raises."""
        import openai

        with _openai_client(base_url) as client:
            try:
                return client.models.retrieve(model_id).model_dump()
            except openai.APIStatusError as error:
                detail = error.body if isinstance(error.body, dict) else {}
                return {
                    "type": type(error).__name__,
                    "status": error.status_code,
                    "message": detail.get("message"),
                }

    @keyword
    def openai_client_error_with_key(self, base_url: str, call: str, key: str) -> dict[str, Any]:
        """Make CALL (`chat.completions.create`, `models.list` or `models.retrieve`) with the
        official `openai` client sending API KEY, expecting it to raise; returns the error's
        `type`, `status`, `message` (the client's own) and `body` (the error object it read)."""
        import openai

        client = openai.OpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)
        calls = {
            "chat.completions.create": lambda: client.chat.completions.create(
                model="web-actor", messages=[{"role": "user", "content": "Hi"}]
            ),
            "models.list": lambda: client.models.list(),
            "models.retrieve": lambda: client.models.retrieve("web-actor"),
        }
        with client:
            try:
                calls[call]()
            except openai.APIStatusError as error:
                return {
                    "type": type(error).__name__,
                    "status": error.status_code,
                    "message": error.message,
                    "body": error.body,
                }
        raise AssertionError(f"the openai client's {call} was answered")

    @keyword
    def openai_client_error_for_field(self, base_url: str, field: str, value: Any) -> dict:
        """Ask with the `openai` client, sending FIELD=VALUE too, expecting it to raise; returns
        the error's `type`, `status`, `param` and `message`."""
        import openai

        with _openai_client(base_url) as client:
            try:
                client.chat.completions.create(
                    model="web-actor",
                    messages=[{"role": "user", "content": "Hi"}],
                    **{field: value},
                )
            except openai.APIStatusError as error:
                detail = error.body if isinstance(error.body, dict) else {}
                return {
                    "type": type(error).__name__,
                    "status": error.status_code,
                    "param": detail.get("param"),
                    "message": detail.get("message"),
                }
        raise AssertionError(f"the openai client did not raise for {field}={value!r}")

    @keyword
    def server_log_should_contain_line(self, base_url: str, pattern: str) -> str:
        """The output of the server at BASE_URL has a line matching the regular expression
        PATTERN (searched); returns that line."""
        server = next(server for server in self._servers if server.base_url == base_url)
        deadline = time.monotonic() + 10.0
        while True:
            lines = server.log_path.read_text(errors="replace").splitlines()
            found = [line for line in lines if re.search(pattern, line)]
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                raise AssertionError(f"no line matches {pattern!r} in:\n" + "\n".join(lines))
            time.sleep(0.1)

    @keyword
    def ask_with_langchain(self, base_url: str, message: str) -> dict[str, Any]:
        """`ChatOpenAI.invoke()` against the server; returns `content` and `usage_metadata`."""
        reply = _chat_openai(base_url).invoke(message)
        return {"content": reply.content, "usage_metadata": dict(reply.usage_metadata or {})}

    @keyword
    def stream_with_langchain(self, base_url: str, message: str) -> dict[str, Any]:
        """`ChatOpenAI.stream()` (with `stream_usage=True`), chunks folded with `+`; returns
        `content`, `chunks` and `usage_metadata`."""
        folded, chunks = None, 0
        for chunk in _chat_openai(base_url, stream_usage=True).stream(message):
            folded = chunk if folded is None else folded + chunk
            chunks += 1
        assert folded is not None, "ChatOpenAI.stream() yielded nothing"
        return {
            "content": folded.content,
            "chunks": chunks,
            "usage_metadata": dict(folded.usage_metadata or {}),
        }

    # -- plain HTTP --------------------------------------------------------------------------

    @keyword
    def get_from_server(self, url: str) -> dict[str, Any]:
        """GET URL; returns `status` and `content_type` (without parameters)."""
        response = httpx.get(url, timeout=_CLIENT_TIMEOUT_S)
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        return {"status": response.status_code, "content_type": content_type}

    @keyword
    def post_raw_body(self, url: str, body: str) -> dict[str, Any]:
        """POST BODY as-is (JSON content type); returns `status` and `body` (JSON or text)."""
        response = httpx.post(
            url,
            content=body.encode(),
            headers={"Content-Type": "application/json"},
            timeout=_CLIENT_TIMEOUT_S,
        )
        return _summary(response)

    @keyword
    def post_body_of_size(self, url: str, size: int, chunked: bool = False) -> dict[str, Any]:
        """POST a body of SIZE bytes that is not valid JSON; `chunked` sends it without a
        Content-Length, so the server must count what arrives. Returns `status` and `body`."""
        payload = b"x" * int(size)
        content: Any = iter([payload[i : i + 65536] for i in range(0, len(payload), 65536)])
        response = httpx.post(
            url,
            content=content if chunked else payload,
            headers={"Content-Type": "application/json"},
            timeout=_CLIENT_TIMEOUT_S,
        )
        return _summary(response)

    @keyword
    def response_should_be_refused(
        self, response: dict[str, Any], status: int, *message_parts: str
    ) -> None:
        """RESPONSE has STATUS and a message (`detail`, or OpenAI's `error.message`) naming each
        of MESSAGE_PARTS, and no stack trace."""
        if response["status"] != int(status):
            raise AssertionError(f"status {response['status']}, not {status}: {response['body']}")
        body = response["body"]
        if not isinstance(body, dict):
            raise AssertionError(f"the refusal is not JSON: {body!r}")
        message = body["error"]["message"] if "error" in body else body["detail"]
        if not isinstance(message, str) or not message:
            raise AssertionError(f"the refusal has no message: {body}")
        for part in message_parts:
            if part not in message:
                raise AssertionError(f"{part!r} is not in the message {message!r}")
        if "Traceback" in json.dumps(body):
            raise AssertionError(f"the refusal shows a stack trace: {body}")

    # -- on_usage ----------------------------------------------------------------------------

    @keyword
    def wait_for_usage_lines(
        self, usage_file: str, count: int, timeout: float = 15.0
    ) -> list[dict[str, Any]]:
        """Wait (at most TIMEOUT seconds) until USAGE_FILE holds COUNT lines; return them parsed.
        Fails at once if it holds more."""
        count, deadline = int(count), time.monotonic() + float(timeout)
        while True:
            lines = _usage_lines(usage_file)
            if len(lines) > count:
                raise AssertionError(f"on_usage was called {len(lines)} times, not {count}")
            if len(lines) == count:
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"on_usage was called {len(lines)} times, not {count}")
            time.sleep(0.05)

    @keyword
    def count_usage_lines(self, usage_file: str) -> int:
        return len(_usage_lines(usage_file))

    @keyword
    def usage_lines_should_stay(self, usage_file: str, count: int, seconds: float = 1.0) -> None:
        """USAGE_FILE still holds exactly COUNT lines after SECONDS: no late second report."""
        time.sleep(float(seconds))
        lines = _usage_lines(usage_file)
        if len(lines) != int(count):
            raise AssertionError(f"on_usage was called {len(lines)} times, not {count}")

    # -- who may call, and what they learn -------------------------------------------------

    @keyword
    def post_chat_message_as(
        self,
        url: str,
        key: str | None = None,
        host: str | None = None,
        content_type: str = "application/json",
        message: str = "What's the weather in Paris?",
        stream: bool = False,
    ) -> dict[str, Any]:
        """POST a message to URL (a `/chat` body, or a Chat Completions body for
        `/v1/chat/completions`, streamed when STREAM) with the bearer KEY, the Host header HOST
        and CONTENT_TYPE. Returns `status`, `body` (JSON or text), `text` (the raw body) and
        `request_id` (the `X-Request-ID` header)."""
        if url.endswith("/chat"):
            body: dict[str, Any] = {"message": message}
        else:
            body = {"model": "m", "messages": [{"role": "user", "content": message}]}
            body["stream"] = bool(stream)
        headers = {"Content-Type": content_type}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        if host is not None:
            headers["Host"] = host
        response = httpx.post(
            url, content=json.dumps(body).encode(), headers=headers, timeout=_CLIENT_TIMEOUT_S
        )
        summary = _summary(response)
        summary["text"] = response.text
        summary["request_id"] = response.headers.get("x-request-id")
        return summary

    @keyword
    def status_of_get(self, url: str) -> int:
        """The HTTP status of GET URL."""
        return httpx.get(url, timeout=_CLIENT_TIMEOUT_S).status_code

    @keyword
    def server_log_should_contain(self, base_url: str, *texts: str) -> None:
        """The output of the server at BASE_URL has a line holding all of TEXTS."""
        server = next(server for server in self._servers if server.base_url == base_url)
        deadline = time.monotonic() + 5.0
        while True:
            lines = server.log_path.read_text(errors="replace").splitlines()
            if any(all(text in line for text in texts) for line in lines):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"no line of the server log holds all of {texts}")
            time.sleep(0.05)

    @keyword
    def serve_should_refuse_to_start(self, actor: str, *options: str) -> str:
        """Run `cleveractors serve ACTOR OPTIONS`, expecting it to exit with status 2 before it
        listens; returns what it wrote to stderr."""
        command = [str(Path(sys.executable).with_name("cleveractors")), "serve", actor, *options]
        environment = {**os.environ, "COLUMNS": "200"}
        environment.pop(_API_KEYS_VARIABLE, None)
        try:
            finished = subprocess.run(
                command, capture_output=True, text=True, timeout=60, env=environment
            )
        except subprocess.TimeoutExpired:
            raise AssertionError("serve started instead of refusing") from None
        if finished.returncode != 2:
            raise AssertionError(f"serve exited {finished.returncode}:\n{finished.stderr}")
        return finished.stderr

    # -- readers that stop reading, and clients that leave --------------------------------

    @keyword
    def write_long_answer_actor(self, path: str, words: int, word_length: int) -> str:
        """Write an actor (stub provider, as JSON) whose every answer is WORDS words of
        WORD_LENGTH letters, streamed a word every 2 ms; returns PATH."""
        answer = {
            "text": " ".join("w" * word_length for _ in range(words)),
            "chunk_delay_s": 0.002,
            "prompt_tokens": 10,
            "completion_tokens": words,
        }
        config = {
            "name": "web-long-answer",
            "agent": {"type": "llm", "provider": "stub", "script": [answer] * 3},
        }
        Path(path).write_text(json.dumps(config), encoding="utf-8")
        return path

    @keyword
    def send_chat_message_and_read_nothing(self, base_url: str, message: str) -> None:
        """POST MESSAGE to `/chat` from a socket with a small receive buffer, then never read
        from it (it stays open until `Stop Servers`), as a stalled client does."""
        port = int(base_url.rsplit(":", 1)[1])
        reader = socket.socket()
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SMALL_RECEIVE_BUFFER)
        reader.connect(("127.0.0.1", port))
        self._silent_readers.append(reader)
        reader.sendall(_raw_post(port, "/chat", {"message": message}))

    @keyword
    def ask_for_a_completion_and_leave(self, base_url: str, message: str, after_s: float) -> None:
        """POST a non-streamed Chat Completions request, wait AFTER_S seconds (the run is
        going), then close the connection without reading the answer."""
        port = int(base_url.rsplit(":", 1)[1])
        body = {"model": "m", "messages": [{"role": "user", "content": message}]}
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(_raw_post(port, "/v1/chat/completions", body))
            time.sleep(float(after_s))

    # -- many clients at once over the real wire -------------------------------------------

    @keyword
    def start_scripted_lookup_server(self, lookup_s: float) -> str:
        """A `ScriptedOpenAIServer` on 127.0.0.1 where every conversation walks its own copy of
        a two-call script: a `slow_lookup` tool call taking LOOKUP_S seconds, then an answer.
        Returns its `base_url`."""
        lookup = ScriptedToolCall(
            name="slow_lookup", args={"query": "weather", "seconds": lookup_s}
        )
        return self._start_scripted_server(
            [
                ScriptedReply(tool_calls=(lookup,)),
                ScriptedReply(
                    text="It is sunny and mild today, with a light breeze from the west."
                ),
            ]
        )

    def _start_scripted_server(self, script: list[ScriptedReply]) -> str:
        server = ScriptedOpenAIServer(script, per_conversation=True)
        server.start()
        self._scripted_servers.append(server)
        return server.base_url

    @keyword
    def scripted_server_requests_should_cap_output(self, cap: str, last: int) -> None:
        """The LAST requests the latest scripted server received each ask for at most CAP
        output tokens as ChatOpenAI sends it (`max_completion_tokens`, never the deprecated
        `max_tokens`); CAP `none` means they ask for no cap at all."""
        requests = self._scripted_servers[-1].requests[-int(last) :]
        if len(requests) != int(last):
            raise AssertionError(f"the server received {len(requests)} requests, not {last}")
        expected = None if cap == "none" else int(cap)
        for number, body in enumerate(requests, start=1):
            sent = (body.get("max_completion_tokens"), body.get("max_tokens"))
            logger.info(f"request {number}: max_completion_tokens, max_tokens = {sent}")
            if sent != (expected, None):
                raise AssertionError(f"request {number} of {last} sent {sent}, not {expected}")

    @keyword
    def write_actor_over_the_wire(self, path: str, base_url: str, lookup_tool: bool = False) -> str:
        """Write an actor (provider `openai`, i.e. ChatOpenAI) against the scripted server at
        BASE_URL, with the `slow_lookup` tool when LOOKUP_TOOL; returns PATH."""
        os.environ[_PROVIDER_KEY_VARIABLE] = "sk-scripted"
        tool = {
            "name": "slow_lookup",
            "description": "Look something up; takes a while.",
            "handler": "cleveractors.demo:slow_lookup",
        }
        config = {
            "name": "web-actor-over-the-wire",
            "agent": {
                "type": "llm",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": base_url,
                "api_key_env": _PROVIDER_KEY_VARIABLE,
                "max_retries": 0,
                "tools": [tool] if lookup_tool else [],
            },
        }
        Path(path).write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    @keyword
    def send_concurrent_chats(self, base_url: str, count: int, hang_ups: int) -> dict[str, int]:
        """Send COUNT `/chat` requests at once, each a conversation of its own (`_storm_message`)
        naming its caller (its number) in a header; HANG_UPS of them, chosen at random, hang up
        when their tool call starts. Returns how many `finished` (read `run_finished`),
        `hung_up`, and `failed` (anything else)."""
        count, chosen = int(count), random.sample(range(int(count)), int(hang_ups))
        hang_up = set(chosen)

        async def chat(client: httpx.AsyncClient, number: int) -> str:
            body = {"message": _storm_message(str(number))}
            headers = {_CALLER_HEADER: str(number)}
            async with client.stream(
                "POST", f"{base_url}/chat", json=body, headers=headers
            ) as response:
                async for line in response.aiter_lines():
                    if number in hang_up and line == "event: tool_call_started":
                        return "hung_up"
                    if line == "event: run_finished":
                        return "finished"
            return "failed"

        async def storm() -> list[str]:
            limits = httpx.Limits(max_connections=count, max_keepalive_connections=0)
            async with httpx.AsyncClient(timeout=_CLIENT_TIMEOUT_S * 4, limits=limits) as client:
                return await asyncio.gather(*(chat(client, n) for n in range(count)))

        outcomes = asyncio.run(storm())
        counts = {name: outcomes.count(name) for name in ("finished", "hung_up", "failed")}
        logger.info(f"{counts}; hung up: {sorted(hang_up)}")
        return counts

    @keyword
    def every_call_should_be_billed_as_the_scripted_server_billed_it(
        self, usage_file: str, callers: int
    ) -> None:
        """USAGE_FILE holds one result per caller 0 .. CALLERS - 1, and every call of each keeps
        the billing rule (`support.billing.billing_problems`) against what the latest scripted
        server billed for that caller's requests: exact calls as billed, call for call;
        estimated ones flagged, with the prompt the estimate rule gives for their messages.
        Waits first until the server has billed every request it received."""
        server = self._scripted_servers[-1]
        settle = time.monotonic() + _SERVER_SETTLE_TIMEOUT_S
        while len(server.billed) < len(server.requests) and time.monotonic() < settle:
            time.sleep(0.05)
        lines = _usage_lines(usage_file)
        seen = sorted(int(line["caller"]) for line in lines)
        if seen != list(range(int(callers))):
            raise AssertionError(f"results were reported for callers {seen}")
        requests, billed = server.requests, server.billed
        problems: list[str] = []
        for line in lines:
            calls = [TokenUsage.model_validate(c["usage"]) for c in line["usage_by_call"]]
            conversation = _storm_message(line["caller"])
            on_server = requests_of_conversation(requests, billed, conversation)
            found = billing_problems(calls, on_server, line["sent_prompt_tokens"])
            problems.extend(f"caller {line['caller']}, {problem}" for problem in found)
        estimated = sum(c["usage"]["estimated"] for line in lines for c in line["usage_by_call"])
        logger.info(f"{estimated} calls estimated; the server billed {server.billed_total}")
        if problems:
            raise AssertionError("\n".join(problems))

    # -- the event stream under anyio cancellation -----------------------------------------

    @keyword
    def consume_events_until_an_anyio_scope_is_cancelled(
        self, actor: str, message: str, events: int
    ) -> dict[str, Any]:
        """Read ACTOR's `execute_events(MESSAGE)` inside an anyio cancel scope, as Starlette and
        sse-starlette run a response body, and cancel the scope after EVENTS events (a client
        hanging up). Returns what the consumer saw when its reading ended: `result_settled` (the
        run's result was set) and `runs_still_running` (tasks of the run not finished)."""
        from cleveractors import ActorExecutor

        stop = Stop("cancel scope", at=after_items(int(events)))
        executor = ActorExecutor.from_config(actor)
        consumed = run_guarded(consume(executor, message, mode="events", stop=stop))
        seen = {
            "result_settled": consumed.last_result_on_return is not None,
            "runs_still_running": len(consumed.tasks_pending_on_return),
        }
        logger.info(f"when the consumer's reading ended: {seen}")
        return seen

    # -- the chat page -----------------------------------------------------------------------

    @keyword
    def open_chat_page_in_chromium(self, url: str) -> None:
        """Open URL in headless Chromium (Debian's, never a downloaded one) and hand the browser
        to SeleniumLibrary, whose keywords then drive it."""
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        self._profile_dirs.append(profile)
        options = webdriver.ChromeOptions()
        options.binary_location = _CHROMIUM
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1000,860",
            f"--user-data-dir={profile.name}",
        ):
            options.add_argument(argument)
        # An explicit driver path: Selenium Manager must never try to download one.
        driver = webdriver.Chrome(service=Service(executable_path=_CHROMEDRIVER), options=options)
        BuiltIn().get_library_instance("SeleniumLibrary").register_driver(driver, "chat-page")
        driver.get(url)

    @keyword
    def answer_should_stream_in(self, timeout: float = 20.0) -> str:
        """Wait until the current turn shows part of its answer, and check the turn was still
        running then (the answer is rendered as it streams, not at the end). Returns that
        partial answer."""
        driver = BuiltIn().get_library_instance("SeleniumLibrary").driver
        deadline = time.monotonic() + float(timeout)
        while time.monotonic() < deadline:
            state, answer = driver.execute_script(
                "const turn = document.getElementById('current-turn');"
                "return [turn && turn.dataset.state,"
                " (document.getElementById('answer') || {}).textContent || ''];"
            )
            if answer:
                if state != "running":
                    raise AssertionError(f"the answer appeared only when the turn was {state}")
                return str(answer)
            time.sleep(0.05)
        raise AssertionError(f"no answer text within {timeout}s")

    @keyword
    def rendered_turn(self) -> dict[str, Any]:
        """The current turn as the page drew it: the HTML of its question, answer, tool cards
        (each card's duration left out: a stored turn keeps none), notice, error and token
        line."""
        driver = BuiltIn().get_library_instance("SeleniumLibrary").driver
        drawn: dict[str, Any] = driver.execute_script(
            "const turn = document.getElementById('current-turn').cloneNode(true);"
            "turn.querySelectorAll('.tool-duration').forEach((span) => span.replaceChildren());"
            "const html = (selector) => turn.querySelector(selector).outerHTML;"
            "return {question: html('.question'), answer: html('.answer'),"
            " tools: html('.tools'), notice: html('.notice'), error: html('.error'),"
            " usage: html('.usage')};"
        )
        logger.info(json.dumps(drawn, indent=2))
        return drawn

    @keyword
    def remove_browser_profiles(self) -> None:
        while self._profile_dirs:
            self._profile_dirs.pop().cleanup()


def _raw_post(port: int, path: str, body: dict[str, Any]) -> bytes:
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _sse_messages(lines: Any) -> Any:
    """(event name, data) per SSE message; comments (keep-alive pings) are skipped."""
    name, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))


def _openai_client(base_url: str) -> Any:
    import openai

    # No retries: a 502 must reach the test, not be retried into the next scripted turn.
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)


def _chat_openai(base_url: str, *, stream_usage: bool = False) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="web-actor",
        base_url=f"{base_url}/v1",
        api_key="x",
        max_retries=0,
        stream_usage=stream_usage,
    )


def _summary(response: httpx.Response) -> dict[str, Any]:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return {"status": response.status_code, "body": body}


def _storm_message(caller: str) -> str:
    """The message caller CALLER sends: a conversation of its own on the scripted server."""
    return f"What is the weather like for caller {caller}?"


def _usage_lines(usage_file: str) -> list[dict[str, Any]]:
    path = Path(usage_file)
    if not path.exists():
        return []
    # A long result may be caught half-written: only lines with their newline are complete.
    *complete, _partial = path.read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in complete]
