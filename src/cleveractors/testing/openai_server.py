"""`ScriptedOpenAIServer`: an OpenAI-compatible Chat Completions server that replays a script.

For wire-level tests and benchmarks: real HTTP on 127.0.0.1, so the `openai` client and
`ChatOpenAI` run their own parsing of SSE frames, tool-call fragments and the usage chunk.
Each POST to `/v1/chat/completions` consumes one `ScriptedReply` (in global order, or per
conversation); the server records the request bodies, what it billed and when each streamed chunk
left, so tests can compare our counts and timings with the server's. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cleveractors._script import ScriptedReply
from cleveractors.testing._openai_wire import (
    BilledCall,
    BilledTotal,
    Exchange,
    Piece,
    chunk_payload,
    completion_payload,
    is_chat_request,
    stream_pieces,
    usage_chunk_payload,
    words_sent,
)

__all__ = ["BilledCall", "BilledTotal", "ScriptedOpenAIServer", "conversation_of"]

_CHAT_PATH = "/v1/chat/completions"
# serve_forever() only notices shutdown() between polls; the default 0.5 s makes stop() slow.
_POLL_INTERVAL_S = 0.05
# Hundreds of clients connecting at once must queue, not be refused (socketserver's default is 5).
_LISTEN_BACKLOG = 1024


def conversation_of(body: Mapping[str, Any]) -> str:
    """The conversation a chat request belongs to: the text of its first user message (every
    request of a run repeats it; "" when there is none)."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(str(part.get("text", "")) for part in content)
            return str(content or "")
    return ""


class _Scripts:
    """Which reply a request gets: the next of one shared script (global order), or the next of
    its conversation's script, each conversation keeping its own place."""

    def __init__(
        self,
        script: Sequence[ScriptedReply] | Mapping[str, Sequence[ScriptedReply]],
        *,
        per_conversation: bool,
    ) -> None:
        self.by_conversation = isinstance(script, Mapping)
        self.per_conversation = per_conversation or self.by_conversation
        if isinstance(script, Mapping):
            self.scripts = {name: list(replies) for name, replies in script.items()}
        else:
            self.shared = list(script)
        self.positions: dict[str, int] = {}

    def next_reply(self, body: Mapping[str, Any]) -> tuple[ScriptedReply | None, str]:
        """The request's reply, or None and why there is none."""
        key = conversation_of(body) if self.per_conversation else ""
        script = self.scripts.get(key) if self.by_conversation else self.shared
        if script is None:
            return None, f"no script for the conversation {key!r}"
        position = self.positions.get(key, 0)
        if position == len(script):
            where = f", conversation {key!r}" if self.per_conversation else ""
            return None, f"the script is exhausted{where}"
        self.positions[key] = position + 1
        return script[position], ""

    def add(self, replies: Sequence[ScriptedReply]) -> None:
        if self.by_conversation:
            raise TypeError("add_replies() needs a single script, not one per conversation")
        self.shared.extend(replies)


class ScriptedOpenAIServer:
    """An OpenAI-compatible Chat Completions server on a free local port, replaying a script.

    Each POST to `/v1/chat/completions` consumes the next `ScriptedReply`; once the script is
    exhausted every request gets HTTP 500 (it never wraps around).

    Which script, and whose turn it is, depends on how the script is given:

    - a list, by default: one script, replies handed out in the order requests arrive, whatever
      conversation they belong to;
    - a list with `per_conversation=True`: every conversation walks its own copy of the list,
      so concurrent runs each get the whole script. A conversation is identified by its first
      user message (`conversation_of`): give concurrent runs different first messages;
    - a mapping from a first user message to a list: that conversation walks that list; a
      conversation not in the mapping gets HTTP 500. Streamed replies send word
    deltas, tool-call fragments (index, id and name on the first fragment only, arguments split
    into `args_chunk_size` pieces) and, when the request asks for it, the usage chunk.

    `first_token_delay_s` is waited before the first content or tool-call chunk and
    `token_interval_s` between the next ones, each plus the reply's `chunk_delay_s`. A blocking
    reply waits as long as its stream would have taken in total.

    A reply with `error` is answered with HTTP `error_status` (500 when not given) and, when it has
    `retry_after`, a `Retry-After` header.

    A reply with `cut_off_after_chunks` drops the connection after that many content/tool chunks
    when streamed, and before any response when blocking, so the client sees a broken connection.

    Example:
        with ScriptedOpenAIServer([ScriptedReply(text="Hi there")]) as server:
            client = OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            ...
            assert server.billed_total.completion_tokens == 2

    Args:
        script: The replies, one per request, in order; or one list per conversation, keyed by
            the conversation's first user message.
        per_conversation: With a single list: every conversation walks its own copy.
        first_token_delay_s: Server-wide wait before the first streamed content chunk.
        token_interval_s: Server-wide wait between later streamed content chunks.
        host: Address to bind.
        port: Port to bind; 0 picks a free one.
    """

    def __init__(
        self,
        script: Sequence[ScriptedReply] | Mapping[str, Sequence[ScriptedReply]],
        *,
        per_conversation: bool = False,
        first_token_delay_s: float = 0.0,
        token_interval_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._scripts = _Scripts(script, per_conversation=per_conversation)
        self._first_token_delay_s = first_token_delay_s
        self._token_interval_s = token_interval_s
        self._address = (host, port)
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._billed: list[BilledCall] = []
        self._chunk_times: list[list[float]] = []
        self._connections: set[socket.socket] = set()
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the port and serve in a daemon thread."""
        if self._http is not None:
            raise RuntimeError("ScriptedOpenAIServer is already started")
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
        # Keep-alive connections outlive shutdown(); without this a pooled client connection
        # would still be answered by its handler thread after stop().
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            _drop(connection)
        http.server_close()
        thread.join()
        self._http = self._thread = None

    def __enter__(self) -> ScriptedOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The OpenAI `base_url` to give a client, e.g. `http://127.0.0.1:54321/v1`."""
        if self._http is None:
            raise RuntimeError("ScriptedOpenAIServer is not started")
        return f"http://{self._address[0]}:{self._http.server_address[1]}/v1"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat requests received, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The HTTP headers of the chat requests received, in order, names lower-cased (HTTP header
        names are case-insensitive): e.g. `server.request_headers[0]["authorization"]`."""
        with self._lock:
            return [dict(headers) for headers in self._request_headers]

    @property
    def billed(self) -> list[BilledCall]:
        """What was billed, one record per request that got a reply, in order."""
        with self._lock:
            return list(self._billed)

    @property
    def billed_total(self) -> BilledTotal:
        """The prompt and completion tokens billed, summed over every request."""
        billed = self.billed
        return BilledTotal(
            prompt_tokens=sum(call.prompt_tokens for call in billed),
            completion_tokens=sum(call.completion_tokens for call in billed),
        )

    @property
    def chunk_times(self) -> list[list[float]]:
        """Per request, the `time.perf_counter()` at which each content/tool chunk was flushed."""
        with self._lock:
            return [list(times) for times in self._chunk_times]

    def add_replies(self, replies: Sequence[ScriptedReply]) -> None:
        """Append replies to the end of the script (a single script only; with
        `per_conversation`, every conversation's copy gets them)."""
        with self._lock:
            self._scripts.add(replies)

    def _receive(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, ScriptedReply | None, str]:
        """Record a request and take its reply; None and the reason when there is none."""
        with self._lock:
            index = len(self._requests)
            self._requests.append(body)
            self._request_headers.append(headers)
            self._chunk_times.append([])
            reply, reason = self._scripts.next_reply(body)
            return index, reply, reason

    def _record_chunk_time(self, index: int) -> None:
        with self._lock:
            self._chunk_times[index].append(time.perf_counter())

    def _bill(self, call: BilledCall) -> None:
        with self._lock:
            self._billed.append(call)

    def _track(self, connection: socket.socket, *, is_open: bool) -> None:
        with self._lock:
            if is_open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _delay_before(self, chunk: int, reply: ScriptedReply) -> float:
        """How long to wait before content/tool chunk number `chunk` (from 0)."""
        base = self._first_token_delay_s if chunk == 0 else self._token_interval_s
        return base + reply.chunk_delay_s


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = _LISTEN_BACKLOG
    owner: ScriptedOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client going away (or stop() dropping it) is expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Small writes (headers, then body; one SSE event each) must not wait for delayed ACKs:
    # with Nagle on, every loopback request paid ~44 ms.
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
        if self.path != _CHAT_PATH:
            self._send_error(HTTPStatus.NOT_FOUND, f"No route for POST {self.path}")
        elif body is None:
            self._send_error(HTTPStatus.BAD_REQUEST, "Body must be a JSON object with `messages`")
        else:
            self._answer_chat(body)

    def _read_json(self) -> dict[str, Any] | None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return None
        return body if is_chat_request(body) else None

    def _answer_chat(self, body: dict[str, Any]) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        index, reply, reason = self.server.owner._receive(body, headers)
        if reply is None:
            message = f"ScriptedOpenAIServer: {reason} (request {index})"
            self._send_error(HTTPStatus.INTERNAL_SERVER_ERROR, message, kind="server_error")
            return
        if reply.error is not None:
            self._send_scripted_error(reply, reply.error)
            return
        exchange = Exchange.of(index, reply, body)
        if exchange.is_streamed:
            self._send_stream(exchange)
        else:
            self._send_completion(exchange)

    def _send_completion(self, exchange: Exchange) -> None:
        owner, reply = self.server.owner, exchange.reply
        chunks = len(stream_pieces(reply, exchange.index))
        time.sleep(sum(owner._delay_before(n, reply) for n in range(max(chunks, 1))))
        if reply.cut_off_after_chunks is not None:
            owner._bill(exchange.bill(0, completed=False))
            self._drop_connection()
            return
        owner._bill(exchange.bill(exchange.completion_tokens, completed=True))
        self._send_json(HTTPStatus.OK, completion_payload(exchange))

    def _send_stream(self, exchange: Exchange) -> None:
        owner, reply = self.server.owner, exchange.reply
        pieces = stream_pieces(reply, exchange.index)
        limit = len(pieces) if reply.cut_off_after_chunks is None else reply.cut_off_after_chunks
        sent: list[Piece] = []
        self._send_headers(HTTPStatus.OK, "text/event-stream", ("Transfer-Encoding", "chunked"))
        try:
            self._write_event(chunk_payload(exchange, {"role": "assistant", "content": ""}))
            for n, piece in enumerate(pieces[:limit]):
                time.sleep(owner._delay_before(n, reply))
                self._write_event(chunk_payload(exchange, piece.delta))
                owner._record_chunk_time(exchange.index)
                sent.append(piece)
        except ConnectionError:
            owner._bill(exchange.bill(words_sent(sent), completed=False))
            raise
        if reply.cut_off_after_chunks is not None:
            owner._bill(exchange.bill(words_sent(sent), completed=False))
            self._drop_connection()
            return
        # Billed before the last frames, so a client that has read [DONE] always finds the record.
        owner._bill(exchange.bill(exchange.completion_tokens, completed=True))
        self._write_event(chunk_payload(exchange, {}, finish_reason=exchange.finish_reason))
        if exchange.include_usage:
            self._write_event(usage_chunk_payload(exchange))
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")

    def _send_headers(
        self, status: HTTPStatus, content_type: str, framing: tuple[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header(*framing)
        self.end_headers()

    def _write_event(self, payload: dict[str, Any]) -> None:
        self._write_chunk(f"data: {json.dumps(payload)}\n\n".encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop_connection(self) -> None:
        # Without the zero-length chunk (or any response at all), the client sees a broken
        # connection, as when a provider's connection dies mid-reply.
        self.close_connection = True
        _drop(self.connection)

    def _send_error(
        self,
        status: HTTPStatus,
        message: str,
        *,
        kind: str = "invalid_request_error",
        extra_headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        error = {"message": message, "type": kind, "code": None}
        self._send_json(status, {"error": error}, extra_headers)

    def _send_scripted_error(self, reply: ScriptedReply, message: str) -> None:
        status = HTTPStatus(reply.error_status or HTTPStatus.INTERNAL_SERVER_ERROR)
        retry_after = () if reply.retry_after is None else (("Retry-After", reply.retry_after),)
        kind = "server_error" if status >= 500 else "invalid_request_error"
        self._send_error(status, message, kind=kind, extra_headers=retry_after)

    def _send_json(
        self,
        status: HTTPStatus,
        payload: dict[str, Any],
        extra_headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in extra_headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _drop(connection: socket.socket) -> None:
    # OSError: the peer may have closed it already.
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
