"""The HTTP core of the scripted servers, for serving a wire protocol of your own in tests.

`ScriptedOpenAIServer` and `ScriptedAnthropicServer` are each a `ScriptedWireServer` answering
through a `WireHandler` subclass that knows only its protocol: the path it serves, which bodies
it accepts, its error format and how it answers a scripted reply. Everything else lives here:

- real HTTP/1.1 on 127.0.0.1 (a free port unless told) from a daemon thread, with a listen
  backlog deep enough for hundreds of clients connecting at once; `stop()` also drops open
  keep-alive connections, so no pooled client connection is answered after it;
- the JSON body of each POST; 404 for any other path or method and 400 for a body the protocol
  does not accept, both in the protocol's error format;
- the script: each request takes the next `ScriptedReply`, of one shared script or of its
  conversation's own (by the conversation so far); a request the script has no reply for is
  answered HTTP 422 `script_exhausted` naming its conversation and the request (no client
  retries a 422), and a reply with `error` answers its `error_status` and `retry_after`;
- the records: request bodies and headers, what each request was billed, and what replies
  issued that later requests must echo unchanged;
- JSON replies, SSE events over chunked transfer encoding, and a dropped connection.

Built on the standard library's `http.server`. A sketch of a server for another protocol:

    class EchoHandler(WireHandler["EchoServer"]):
        route = "/v1/echo"
        bad_body_message = "Body must be a JSON object with `text`"

        def accepts(self, body: dict[str, Any]) -> bool:
            return isinstance(body.get("text"), str)

        def error_payload(
            self, status: int, message: str, kind: str | None = None
        ) -> dict[str, Any]:
            return {"error": message, "type": kind or "error"}

        def answer(self, index: int, reply: ScriptedReply, body: dict[str, Any]) -> None:
            self.owner.bill(BilledCall(index, 1, 1, streamed=False, completed=True))
            self.send_json(HTTPStatus.OK, {"text": reply.text})

    class EchoServer(ScriptedWireServer[BilledCall]):
        handler = EchoHandler
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
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from cleveractors._script import ScriptedReply, delay_before_chunk
from cleveractors.testing._wire_records import (
    SCRIPT_EXHAUSTED,
    BilledCall,
    BilledT,
    BilledTotal,
    Rejection,
    WireExchange,
)
from cleveractors.testing._wire_script import Script, conversation_of

__all__ = [
    "SCRIPT_EXHAUSTED",
    "BilledCall",
    "BilledTotal",
    "Rejection",
    "ScriptedWireServer",
    "WireExchange",
    "WireHandler",
    "conversation_of",
]

# serve_forever() only notices shutdown() between polls; the default 0.5 s makes stop() slow.
_POLL_INTERVAL_S = 0.05
# Hundreds of clients connecting at once must queue, not be refused (socketserver's default is 5).
_LISTEN_BACKLOG = 1024


ServerT = TypeVar("ServerT", bound="ScriptedWireServer[Any]")


class ScriptedWireServer(Generic[BilledT]):
    """A scripted HTTP server on a free local port; its `handler` class speaks the protocol.

    Which script, and whose turn it is, depends on how the script is given: a list hands its
    replies out in the order requests arrive; a list with `per_conversation=True` gives every
    conversation its own copy, each request the reply its whole conversation so far has come
    to (`ScriptedOpenAIServer` spells the rule out); a mapping from a first user message
    (`conversation_of`) to a list gives that list to the conversations that start with it. The
    script never wraps around: a request it has no reply for gets HTTP 422 `script_exhausted`.

    Args:
        script: The replies, one per request, in order; or one list per first user message.
        per_conversation: With a single list: every conversation walks its own copy.
        first_token_delay_s: Server-wide wait before the first streamed chunk (`delay_before`).
        token_interval_s: Server-wide wait between later streamed chunks.
        host: Address to bind.
        port: Port to bind; 0 picks a free one.

    Raises:
        OSError: the port cannot be bound (on `start()` or entering the `with`).
        RuntimeError: `start()` on a server already started; `origin` read before it started.
        TypeError: `add_replies()` on a server with one script per conversation.
    """

    handler: ClassVar[type[WireHandler[Any]]]
    """The `WireHandler` subclass that answers each connection: a subclass sets it."""

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
        for replies in script.values() if isinstance(script, Mapping) else (script,):
            self.check_replies(replies)
        self._script = Script(script, per_conversation=per_conversation)
        self._first_token_delay_s = first_token_delay_s
        self._token_interval_s = token_interval_s
        self._address = (host, port)
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._billed: list[BilledT] = []
        self._chunk_times: dict[int, list[float]] = {}
        self._issued: dict[str, str] = {}
        self._connections: set[socket.socket] = set()
        self._http: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the port and serve in a daemon thread."""
        if self._http is not None:
            raise RuntimeError(f"{type(self).__name__} is already started")
        self._http = _HTTPServer(self._address, self.handler, owner=self)
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

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        """Scheme, address and port, e.g. `http://127.0.0.1:54321`."""
        if self._http is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return f"http://{self._address[0]}:{self._http.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests received on the protocol's route (rejected ones
        too), in order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The HTTP headers of those requests, in order, names lower-cased (HTTP header names
        are case-insensitive): e.g. `server.request_headers[0]["authorization"]`."""
        with self._lock:
            return [dict(headers) for headers in self._request_headers]

    @property
    def billed(self) -> list[BilledT]:
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
        """Per request, the `time.perf_counter()` at which each streamed content chunk was
        flushed: the chunks `delay_before` paces (content and tool-call deltas, content-block
        events), not the frames around them."""
        with self._lock:
            return [list(self._chunk_times.get(n, ())) for n in range(len(self._requests))]

    def add_replies(self, replies: Sequence[ScriptedReply]) -> None:
        """Append replies to the end of the script (a single script only; with
        `per_conversation`, every conversation's copy gets them)."""
        self.check_replies(replies)
        with self._lock:
            self._script.add(replies)

    def check_replies(self, replies: Sequence[ScriptedReply]) -> None:
        """Raise `ValueError` for a reply the protocol cannot serve, when the script is given
        or extended. Override for the protocol's rules; accepts every reply here."""

    def bill(self, call: BilledT) -> None:
        """Record what a request was billed: the handler calls it once per reply it answers."""
        with self._lock:
            self._billed.append(call)

    def record_chunk_time(self, index: int) -> None:
        """Note that a content chunk of request `index` was just flushed: the handler calls it."""
        with self._lock:
            self._chunk_times.setdefault(index, []).append(time.perf_counter())

    def issue(self, echoed: Mapping[str, str]) -> None:
        """Remember what a reply sent that later requests must echo unchanged (a thinking
        block's signature and its text, say); `refusal` is given all of it."""
        with self._lock:
            self._issued.update(echoed)

    def refusal(self, body: Mapping[str, Any], issued: Mapping[str, str]) -> Rejection | None:
        """The API's refusal of a request it reads but does not accept, or None to answer it
        with the next reply. Override for the protocol's rules; accepts everything here."""
        return None

    def delay_before(self, chunk: int, reply: ScriptedReply) -> float:
        """How long to wait before streamed chunk number `chunk` (from 0) of `reply`."""
        base = self._first_token_delay_s if chunk == 0 else self._token_interval_s
        return base + delay_before_chunk(reply, chunk)

    def stream_duration(self, chunks: int, reply: ScriptedReply) -> float:
        """How long streaming `chunks` chunks of `reply` waits in total (at least one chunk's
        delay), which a blocking reply waits before it is sent."""
        return sum(self.delay_before(n, reply) for n in range(max(chunks, 1)))

    def _receive(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, ScriptedReply | Rejection]:
        """Record a request and take its reply, or the error it gets instead."""
        with self._lock:
            index = len(self._requests)
            self._requests.append(body)
            self._request_headers.append(headers)
            rejection = self.refusal(body, self._issued)
            if rejection is not None:
                return index, rejection
            reply = self._script.next_reply(body)
            if isinstance(reply, str):
                message = f"{type(self).__name__}: {reply} (request {index})"
                return index, Rejection(HTTPStatus.UNPROCESSABLE_ENTITY, message, SCRIPT_EXHAUSTED)
            return index, reply

    def _track(self, connection: socket.socket, *, is_open: bool) -> None:
        with self._lock:
            if is_open:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = _LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[WireHandler[Any]],
        *,
        owner: ScriptedWireServer[Any],
    ) -> None:
        super().__init__(address, handler)
        self.owner = owner

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client going away (or stop() dropping it) is expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class WireHandler(BaseHTTPRequestHandler, Generic[ServerT]):
    """Answers one wire protocol for a `ScriptedWireServer`: subclass it per protocol.

    A subclass sets `route` and `bad_body_message` and implements `accepts`, `error_payload`
    and `answer`; this class does the rest (see the module docstring). `answer` writes with
    `send_json`, or `start_event_stream`, `write_event` and `end_event_stream`, or ends with
    `drop_connection`, and calls `owner.bill` for what it answered.
    """

    protocol_version = "HTTP/1.1"
    # Small writes (headers, then body; one SSE event each) must not wait for delayed ACKs:
    # with Nagle on, every loopback request paid ~44 ms.
    disable_nagle_algorithm = True

    route: ClassVar[str]
    """The one path the protocol serves POSTs on, e.g. `/v1/chat/completions`."""
    bad_body_message: ClassVar[str]
    """The 400's message for a body that is not JSON or that `accepts` refuses."""
    event_field: ClassVar[str | None] = None
    """The payload field each SSE frame names in an `event:` line; None for `data:` lines only."""
    response_headers: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Headers every response carries, sent after `Content-Type`."""
    retry_after_header: ClassVar[str] = "Retry-After"
    """How the protocol spells the header of a scripted `retry_after`."""

    server: _HTTPServer

    @property
    def owner(self) -> ServerT:
        """The scripted server this handler answers for."""
        return cast(ServerT, self.server.owner)

    def accepts(self, body: dict[str, Any]) -> bool:
        """Whether `body` has the shape the reply and the bill are read from; anything else is
        a 400, not a handler crash that drops the connection after taking a reply."""
        raise NotImplementedError

    def error_payload(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        """The protocol's JSON error body for `status`, with the error type `kind` when given."""
        raise NotImplementedError

    def answer(self, index: int, reply: ScriptedReply, body: dict[str, Any]) -> None:
        """Answer request number `index` (from 0) with its scripted `reply`."""
        raise NotImplementedError

    def send_rejection(self, rejection: Rejection) -> None:
        """Answer a request with a `Rejection` (a refusal, or the script exhausted)."""
        self.send_json(
            rejection.status,
            self.error_payload(rejection.status, rejection.message, rejection.kind),
        )

    def send_api_error(
        self, status: int, message: str, *, retry_after: str | None = None, kind: str | None = None
    ) -> None:
        """Answer with the protocol's error body (of type `kind` when given) and, when given,
        its retry-after header."""
        headers = () if retry_after is None else ((self.retry_after_header, retry_after),)
        self.send_json(status, self.error_payload(status, message, kind), headers)

    def send_json(
        self, status: int, payload: dict[str, Any], headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Answer with a JSON body, then `headers` after the framing ones."""
        data = json.dumps(payload).encode()
        self._send_headers(status, "application/json", ("Content-Length", str(len(data))), headers)
        self.wfile.write(data)
        self.wfile.flush()

    def start_event_stream(self) -> None:
        """Answer 200 with an SSE stream in chunked transfer encoding."""
        self._send_headers(HTTPStatus.OK, "text/event-stream", ("Transfer-Encoding", "chunked"))

    def write_event(self, payload: dict[str, Any]) -> None:
        """Send one SSE event: `data:` the JSON payload, after `event:` its `event_field`."""
        data = f"data: {json.dumps(payload)}\n\n"
        if self.event_field is not None:
            data = f"event: {payload[self.event_field]}\n{data}"
        self.write_chunk(data.encode())

    def write_chunk(self, data: bytes) -> None:
        """Send `data` as one chunk of the stream, now."""
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_event_stream(self) -> None:
        """End the stream with the zero-length chunk."""
        self.write_chunk(b"")

    def drop_connection(self) -> None:
        """Cut the connection with no (more) response, as when a provider's connection dies
        mid-reply: without the zero-length chunk the client sees a broken connection."""
        self.close_connection = True
        _drop(self.connection)

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection, is_open=True)

    def finish(self) -> None:
        self.owner._track(self.connection, is_open=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_api_error(HTTPStatus.NOT_FOUND, f"No route for GET {self.path}")

    def do_POST(self) -> None:
        try:
            self._answer_post()
        except ConnectionError:
            self.close_connection = True

    def _answer_post(self) -> None:
        body = self._read_json()
        if self.path != self.route:
            self.send_api_error(HTTPStatus.NOT_FOUND, f"No route for POST {self.path}")
        elif body is None or not self.accepts(body):
            self.send_api_error(HTTPStatus.BAD_REQUEST, self.bad_body_message)
        else:
            self._answer_request(body)

    def _read_json(self) -> dict[str, Any] | None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    def _answer_request(self, body: dict[str, Any]) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        index, reply = self.owner._receive(body, headers)
        if isinstance(reply, Rejection):
            self.send_rejection(reply)
        elif reply.error is not None:
            # Not an HTTPStatus: 529 (Anthropic's overloaded) has none.
            status = reply.error_status or HTTPStatus.INTERNAL_SERVER_ERROR
            self.send_api_error(
                status, reply.error, retry_after=reply.retry_after, kind=reply.error_type
            )
        else:
            self.answer(index, reply, body)

    def _send_headers(
        self,
        status: int,
        content_type: str,
        framing: tuple[str, str],
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (*self.response_headers, framing, *headers):
            self.send_header(name, value)
        self.end_headers()


def _drop(connection: socket.socket) -> None:
    # OSError: the peer may have closed it already.
    with contextlib.suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)
