"""`ScriptedAnthropicServer`: an Anthropic Messages API server that replays a script.

The Anthropic counterpart of `ScriptedOpenAIServer`, for wire-level tests of `ChatAnthropic` (or
the `anthropic` SDK): real HTTP on 127.0.0.1 and SSE framed as the API streams it, so the client
runs its own parsing of content blocks, partial tool input, thinking signatures and usage. Each
POST to `/v1/messages` consumes one `ScriptedReply` (or `ScriptedAnthropicReply`); the server
records request bodies and headers and what it billed, including the prompt's cached parts.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cleveractors._script import ScriptedReply, count_words
from cleveractors.testing._anthropic_wire import (
    AnthropicExchange,
    BilledAnthropicCall,
    BlockEvents,
    RequestRejection,
    ScriptedAnthropicReply,
    error_payload,
    is_messages_request,
    message_payload,
    reply_blocks,
    request_rejection,
    thinking_tokens,
)
from cleveractors.testing._openai_wire import BilledTotal

__all__ = ["BilledAnthropicCall", "ScriptedAnthropicReply", "ScriptedAnthropicServer"]

_MESSAGES_PATH = "/v1/messages"
# serve_forever() only notices shutdown() between polls; the default 0.5 s makes stop() slow.
_POLL_INTERVAL_S = 0.05
_OVERLOADED = "Overloaded"


class ScriptedAnthropicServer:
    """An Anthropic Messages API server on a free local port, replaying a script.

    Each POST to `/v1/messages` consumes the next reply; once the script is exhausted every
    request gets HTTP 500 (it never wraps around). Streamed replies send the events the API
    sends: `message_start` (input usage, cache reads and writes), `ping`, per content block
    `content_block_start` / `content_block_delta` / `content_block_stop` (`thinking_delta` and
    `signature_delta`, `text_delta` per word, `input_json_delta` split into `args_chunk_size`
    pieces), `message_delta` (stop reason, cumulative usage) and `message_stop`.

    Thinking and redacted-thinking blocks are sent only when the request enables thinking, as
    the API does, and each thinking block is signed. As the API does, the server answers HTTP
    400 `invalid_request_error` (recorded, billed nothing, no reply consumed) to a thinking
    request whose tool-use turn does not start with its thinking block or changed a signed
    block, and to a request holding `tool_use` / `tool_result` blocks without declaring tools.

    Faults: `error` answers with `error_status` (500 without one; 529 is `overloaded_error`)
    and `retry_after` as its `retry-after` header;
    `error_event_after_chunks` sends `event: error` mid-stream; `cut_off_after_chunks` drops the
    connection after that many content-block events (before any response when blocking). A cut
    or failed stream bills the prompt and the words actually sent. Tool arguments scripted as
    text that is not JSON are streamed as written; a blocking reply carries them as a string in
    `input` (the API never does: script broken arguments for streams).

    Example:
        with ScriptedAnthropicServer([ScriptedReply(text="Hi there")]) as server:
            model = ChatAnthropic(model="claude-sonnet-4-5", base_url=server.base_url,
                                  api_key="x", max_retries=0)
            ...
            assert server.billed_total.completion_tokens == 2

    Args:
        script: The replies, one per request, in order.
        first_token_delay_s: Server-wide wait before the first content-block event.
        token_interval_s: Server-wide wait between later content-block events.
        host: Address to bind.
        port: Port to bind; 0 picks a free one.
    """

    def __init__(
        self,
        script: Sequence[ScriptedReply],
        *,
        first_token_delay_s: float = 0.0,
        token_interval_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._script: list[ScriptedReply] = []
        self._next_reply = 0
        self._first_token_delay_s = first_token_delay_s
        self._token_interval_s = token_interval_s
        self._address = (host, port)
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._billed: list[BilledAnthropicCall] = []
        self._issued: dict[str, str] = {}
        self._connections: set[socket.socket] = set()
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.add_replies(script)

    def start(self) -> None:
        """Bind the port and serve in a daemon thread."""
        if self._http is not None:
            raise RuntimeError("ScriptedAnthropicServer is already started")
        self._http = _HTTPServer(self._address, _Handler)
        self._http.owner = self
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(_POLL_INTERVAL_S,), daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving, drop open connections and close the socket. Safe to call twice."""
        http, thread = self._http, self._thread
        if http is None or thread is None:
            return
        http.shutdown()
        # Keep-alive connections outlive shutdown(): drop them, or a pooled client connection
        # would still be answered by its handler thread.
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            _drop(connection)
        http.server_close()
        thread.join()
        self._http = self._thread = None

    def __enter__(self) -> ScriptedAnthropicServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The `base_url` to give `ChatAnthropic` or `anthropic.Anthropic`, without `/v1`."""
        if self._http is None:
            raise RuntimeError("ScriptedAnthropicServer is not started")
        return f"http://{self._address[0]}:{self._http.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the Messages requests received (rejected ones too), in order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The HTTP headers of those requests, names lower-cased: the API key arrives as
        `x-api-key` or, from recent `anthropic` SDKs, `authorization: Bearer ...`."""
        with self._lock:
            return [dict(headers) for headers in self._request_headers]

    @property
    def billed(self) -> list[BilledAnthropicCall]:
        """What was billed, one record per request that got a reply, in order."""
        with self._lock:
            return list(self._billed)

    @property
    def billed_total(self) -> BilledTotal:
        """The prompt (cached parts included) and completion tokens billed, summed."""
        billed = self.billed
        return BilledTotal(
            prompt_tokens=sum(call.prompt_tokens for call in billed),
            completion_tokens=sum(call.completion_tokens for call in billed),
        )

    @property
    def replies_left(self) -> int:
        """How many scripted replies no request has consumed yet."""
        with self._lock:
            return len(self._script) - self._next_reply

    def add_replies(self, replies: Sequence[ScriptedReply]) -> None:
        """Append replies to the end of the script."""
        for reply in replies:
            if reply.omit_usage:
                raise ValueError("the Messages API always reports usage: omit_usage is not served")
        with self._lock:
            self._script.extend(replies)

    def _receive(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, ScriptedReply | RequestRejection | None]:
        """Record a request and take its reply: the API's refusal, or None once the script is
        exhausted."""
        with self._lock:
            index = len(self._requests)
            self._requests.append(body)
            self._request_headers.append(headers)
            rejection = request_rejection(body, self._issued)
            if rejection is not None:
                return index, rejection
            if self._next_reply == len(self._script):
                return index, None
            self._next_reply += 1
            return index, self._script[self._next_reply - 1]

    def _issue(self, blocks: Sequence[BlockEvents]) -> None:
        """Remember the thinking signatures (and redacted data) sent, to check them when echoed."""
        with self._lock:
            for block in blocks:
                if block.final["type"] == "thinking":
                    self._issued[block.final["signature"]] = block.final["thinking"]
                elif block.final["type"] == "redacted_thinking":
                    self._issued[block.final["data"]] = block.final["data"]

    def _bill(self, call: BilledAnthropicCall) -> None:
        with self._lock:
            self._billed.append(call)

    def _track(self, connection: socket.socket, *, is_open: bool) -> None:
        with self._lock:
            if is_open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _delay_before(self, event: int, reply: ScriptedReply) -> float:
        base = self._first_token_delay_s if event == 0 else self._token_interval_s
        return base + reply.chunk_delay_s


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedAnthropicServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client going away (or stop() dropping it) is expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One small write per SSE event: without this, delayed ACKs cost ~40 ms per request.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, is_open=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, is_open=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send_error(HTTPStatus.NOT_FOUND, f"No route for GET {self.path}")

    def do_POST(self) -> None:
        try:
            self._answer_post()
        except ConnectionError:
            self.close_connection = True

    def _answer_post(self) -> None:
        body = self._read_json()
        if self.path != _MESSAGES_PATH:
            self._send_error(HTTPStatus.NOT_FOUND, f"No route for POST {self.path}")
        elif body is None:
            message = "Body must be a JSON object with `model`, `max_tokens` and `messages`"
            self._send_error(HTTPStatus.BAD_REQUEST, message)
        else:
            self._answer_messages(body)

    def _read_json(self) -> dict[str, Any] | None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return None
        return body if is_messages_request(body) else None

    def _answer_messages(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        headers = {name.lower(): value for name, value in self.headers.items()}
        index, reply = owner._receive(body, headers)
        if isinstance(reply, RequestRejection):
            self._send_error(reply.status, reply.message)
        elif reply is None:
            message = f"ScriptedAnthropicServer: the script is exhausted (request {index})"
            self._send_error(HTTPStatus.INTERNAL_SERVER_ERROR, message)
        elif reply.error is not None:
            # Not an HTTPStatus: 529 (overloaded) is Anthropic's own.
            status = reply.error_status or HTTPStatus.INTERNAL_SERVER_ERROR
            self._send_error(status, reply.error, retry_after=reply.retry_after)
        else:
            exchange = AnthropicExchange.of(index, reply, body)
            blocks = reply_blocks(exchange, args_chunk_size=reply.args_chunk_size)
            if exchange.is_streamed:
                self._send_stream(exchange, blocks)
            else:
                self._send_message(exchange, blocks)

    def _send_message(self, exchange: AnthropicExchange, blocks: list[BlockEvents]) -> None:
        owner, reply = self.server.owner, exchange.reply
        events = sum(len(block.deltas) + 2 for block in blocks)
        time.sleep(sum(owner._delay_before(n, reply) for n in range(max(events, 1))))
        if reply.cut_off_after_chunks is not None:
            owner._bill(exchange.bill(0, completed=False))
            self._drop_connection()
        elif reply.error_event_after_chunks is not None:
            self._send_error(529, _OVERLOADED)
        else:
            owner._issue(blocks)
            output = exchange.completion_tokens(blocks)
            thinking = thinking_tokens(reply, blocks)
            owner._bill(exchange.bill(output, completed=True, thinking_tokens=thinking))
            self._send_json(HTTPStatus.OK, message_payload(exchange, blocks))

    def _send_stream(self, exchange: AnthropicExchange, blocks: list[BlockEvents]) -> None:
        owner, reply = self.server.owner, exchange.reply
        stop_after = _stop_after(reply)
        self._send_headers(HTTPStatus.OK, "text/event-stream", ("Transfer-Encoding", "chunked"))
        start = {"type": "message_start", "message": message_payload(exchange, [], content=False)}
        self._write_event(start)
        self._write_event({"type": "ping"})
        events = _content_events(blocks)
        sent = events if stop_after is None else events[:stop_after]
        for number, event in enumerate(sent):
            time.sleep(owner._delay_before(number, reply))
            try:
                self._write_event(event.payload)
            except ConnectionError:
                # The client went away: the prompt and the words it was sent are billed.
                owner._bill(exchange.bill(_words_sent(sent[:number]), completed=False))
                raise
        if stop_after is None:
            self._finish_stream(exchange, blocks)
        else:
            self._end_early(exchange, sent)

    def _finish_stream(self, exchange: AnthropicExchange, blocks: list[BlockEvents]) -> None:
        owner = self.server.owner
        owner._issue(blocks)
        output = exchange.completion_tokens(blocks)
        thinking = thinking_tokens(exchange.reply, blocks)
        # Billed before the last events, so a client that has read message_stop finds the record.
        owner._bill(exchange.bill(output, completed=True, thinking_tokens=thinking))
        delta = {"stop_reason": exchange.stop_reason, "stop_sequence": None}
        usage = exchange.usage(output, thinking)
        if exchange.reply.usage_in_message_start_only:
            usage = {"output_tokens": output}
        self._write_event({"type": "message_delta", "delta": delta, "usage": usage})
        self._write_event({"type": "message_stop"})
        self._write_chunk(b"")

    def _end_early(self, exchange: AnthropicExchange, sent: list[_ContentEvent]) -> None:
        """Cut the connection, or send `event: error`, after the events already sent."""
        owner = self.server.owner
        owner._bill(exchange.bill(_words_sent(sent), completed=False))
        if exchange.reply.cut_off_after_chunks is not None:
            self._drop_connection()
            return
        self._write_event(error_payload(529, _OVERLOADED))
        self._write_chunk(b"")

    def _send_headers(
        self,
        status: int,
        content_type: str,
        framing: tuple[str, str],
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("request-id", "req_scripted")
        self.send_header(*framing)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def _write_event(self, payload: dict[str, Any]) -> None:
        frame = f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n"
        self._write_chunk(frame.encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop_connection(self) -> None:
        # Without the zero-length chunk (or any response at all), the client sees a broken
        # connection, as when a provider's connection dies mid-reply.
        self.close_connection = True
        _drop(self.connection)

    def _send_error(self, status: int, message: str, *, retry_after: str | None = None) -> None:
        headers = () if retry_after is None else (("retry-after", retry_after),)
        self._send_json(status, error_payload(status, message), headers)

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        data = json.dumps(payload).encode()
        framing = ("Content-Length", str(len(data)))
        self._send_headers(status, "application/json", framing, headers)
        self.wfile.write(data)
        self.wfile.flush()


def _stop_after(reply: ScriptedReply) -> int | None:
    """After how many content-block events the stream ends early (cut off or error event)."""
    if reply.cut_off_after_chunks is not None:
        return reply.cut_off_after_chunks
    if isinstance(reply, ScriptedAnthropicReply):
        return reply.error_event_after_chunks
    return None


@dataclass(frozen=True)
class _ContentEvent:
    payload: dict[str, Any]
    block: int
    text: str
    """The output text the event carries (billed when sent)."""


def _content_events(blocks: Sequence[BlockEvents]) -> list[_ContentEvent]:
    """Every content-block event in order: start, deltas, stop of each block."""
    events: list[_ContentEvent] = []
    for index, block in enumerate(blocks):
        start = {"type": "content_block_start", "index": index, "content_block": block.start}
        events.append(_ContentEvent(start, index, ""))
        for delta, text in block.deltas:
            payload = {"type": "content_block_delta", "index": index, "delta": delta}
            events.append(_ContentEvent(payload, index, text))
        events.append(_ContentEvent({"type": "content_block_stop", "index": index}, index, ""))
    return events


def _words_sent(sent: Sequence[_ContentEvent]) -> int:
    # Joined per block first: argument pieces are cut mid-word.
    blocks = {event.block for event in sent}
    return sum(count_words("".join(e.text for e in sent if e.block == b)) for b in blocks)


def _drop(connection: socket.socket) -> None:
    # OSError: the peer may have closed it already.
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
