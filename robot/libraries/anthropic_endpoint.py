"""A minimal scripted Anthropic Messages endpoint on 127.0.0.1, for `provider: anthropic` tests.

`POST /v1/messages` answers each request with the next `ScriptedReply`, as JSON or as the SSE
events the real API streams (message_start, content_block_start/delta/stop with `text_delta` and
`input_json_delta`, message_delta with the usage, message_stop). A reply's `prompt_tokens` is the
whole prompt; like the real API, `input_tokens` on the wire is only its uncached part, beside
`cache_read_input_tokens` and `cache_creation_input_tokens`. It records every request body and
what it billed. Cache writes are also reported by lifetime (`cache_creation`), all with
`cache_ttl` ("5m" or "1h"). With `usage_in_message_start_only`, the stream reports the input usage
only in `message_start` (the older event form), as some providers still do.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cleveractors.testing.script import ScriptedReply, call_arguments_text

_ARGS_PIECE = 7  # input_json_delta pieces, split mid-token on purpose


@dataclass(frozen=True)
class AnthropicBill:
    """What the endpoint billed for one request, as its usage reported it."""

    input_tokens: int
    """The uncached part of the prompt."""
    cache_read_tokens: int
    cache_write_tokens: int
    output_tokens: int
    model: str
    cache_ttl: str = "5m"

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


class ScriptedAnthropicEndpoint:
    """Serves `replies` in order; `requests` and `billed` record what happened."""

    def __init__(
        self,
        replies: Sequence[ScriptedReply],
        *,
        usage_in_message_start_only: bool = False,
        cache_ttl: str = "5m",
    ) -> None:
        self._replies = list(replies)
        self.usage_in_message_start_only = usage_in_message_start_only
        self.cache_ttl = cache_ttl
        self.requests: list[dict[str, Any]] = []
        self.billed: list[AnthropicBill] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def take(self, body: dict[str, Any]) -> tuple[ScriptedReply, AnthropicBill]:
        with self._lock:
            self.requests.append(body)
            reply = self._replies[len(self.requests) - 1]
            bill = AnthropicBill(
                input_tokens=(reply.prompt_tokens or 0)
                - reply.cache_read_tokens
                - reply.cache_write_tokens,
                cache_read_tokens=reply.cache_read_tokens,
                cache_write_tokens=reply.cache_write_tokens,
                output_tokens=reply.completion_tokens or 0,
                model=reply.model_name or str(body.get("model", "")),
                cache_ttl=self.cache_ttl,
            )
            self.billed.append(bill)
        return reply, bill


def _usage(bill: AnthropicBill, *, with_input: bool = True) -> dict[str, Any]:
    usage: dict[str, Any] = {"output_tokens": bill.output_tokens}
    if with_input:
        usage |= {
            "input_tokens": bill.input_tokens,
            "cache_read_input_tokens": bill.cache_read_tokens,
            "cache_creation_input_tokens": bill.cache_write_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": bill.cache_write_tokens * (bill.cache_ttl == "5m"),
                "ephemeral_1h_input_tokens": bill.cache_write_tokens * (bill.cache_ttl == "1h"),
            },
        }
    return usage


def _blocks(reply: ScriptedReply, number: int) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    for position, call in enumerate(reply.tool_calls):
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id or f"toolu_{number}_{position}",
                "name": call.name,
                "input": call.args if isinstance(call.args, dict) else {},
            }
        )
    return blocks


def _stop_reason(reply: ScriptedReply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _message(reply: ScriptedReply, bill: AnthropicBill, number: int) -> dict[str, Any]:
    return {
        "id": f"msg_scripted_{number}",
        "type": "message",
        "role": "assistant",
        "model": bill.model,
        "content": _blocks(reply, number),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(bill),
    }


def _events(
    reply: ScriptedReply, bill: AnthropicBill, number: int, *, start_only: bool
) -> list[tuple[str, dict[str, Any]]]:
    start = {**_message(reply, bill, number), "content": [], "stop_reason": None}
    start["usage"] = {**_usage(bill), "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    for index, block in enumerate(_blocks(reply, number)):
        if block["type"] == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": word} for word in _words(block["text"])]
        else:
            opened = {**block, "input": {}}
            arguments = call_arguments_text(reply.tool_calls[index - bool(reply.text)])
            deltas = [
                {"type": "input_json_delta", "partial_json": arguments[i : i + _ARGS_PIECE]}
                for i in range(0, len(arguments), _ARGS_PIECE)
            ]
        events.append(("content_block_start", {"index": index, "content_block": opened}))
        events += [("content_block_delta", {"index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"index": index}))
    delta = {"stop_reason": _stop_reason(reply), "stop_sequence": None}
    usage = _usage(bill, with_input=not start_only)
    events += [("message_delta", {"delta": delta, "usage": usage}), ("message_stop", {})]
    return events


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [word if i == 0 else " " + word for i, word in enumerate(words)]


def _handler_for(endpoint: ScriptedAnthropicEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads the record, not the log."""

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/messages":
                self._send(404, "application/json", b'{"type": "error"}')
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            reply, bill = endpoint.take(body)
            number = len(endpoint.requests)
            if not body.get("stream"):
                payload = json.dumps(_message(reply, bill, number)).encode()
                self._send(200, "application/json", payload)
                return
            start_only = endpoint.usage_in_message_start_only
            frames = b"".join(
                f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()
                for kind, data in _events(reply, bill, number, start_only=start_only)
            )
            self._send(200, "text/event-stream", frames)

        def _send(self, status: int, content_type: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
