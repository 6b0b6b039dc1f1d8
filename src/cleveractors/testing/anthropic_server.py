"""`ScriptedAnthropicServer`: an Anthropic Messages API server that replays a script.

The Anthropic counterpart of `ScriptedOpenAIServer`, for wire-level tests of `ChatAnthropic` (or
the `anthropic` SDK): real HTTP on 127.0.0.1 and SSE framed as the API streams it, so the client
runs its own parsing of content blocks, partial tool input, thinking signatures and usage. Each
POST to `/v1/messages` consumes one `ScriptedReply` (or `ScriptedAnthropicReply`); the server
records request bodies and headers and what it billed, including the prompt's cached parts.
Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from cleveractors._script import ScriptedReply, count_words
from cleveractors.testing._anthropic_refusals import request_rejection
from cleveractors.testing._anthropic_wire import (
    AnthropicExchange,
    BilledAnthropicCall,
    BlockEvents,
    ScriptedAnthropicReply,
    error_payload,
    is_messages_request,
    message_payload,
    reply_blocks,
    thinking_tokens,
)
from cleveractors.testing.wire import Rejection, ScriptedWireServer, WireHandler

__all__ = ["BilledAnthropicCall", "ScriptedAnthropicReply", "ScriptedAnthropicServer"]

_OVERLOADED = "Overloaded"


class _Handler(WireHandler["ScriptedAnthropicServer"]):
    route = "/v1/messages"
    bad_body_message = "Body must be a JSON object with `model`, `max_tokens` and `messages`"
    event_field = "type"
    response_headers = (("request-id", "req_scripted"),)
    retry_after_header = "retry-after"

    def accepts(self, body: dict[str, Any]) -> bool:
        return is_messages_request(body)

    def error_payload(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        return error_payload(status, message, kind)

    def answer(self, index: int, reply: ScriptedReply, body: dict[str, Any]) -> None:
        exchange = AnthropicExchange.of(index, reply, body)
        blocks = reply_blocks(exchange, args_chunk_size=reply.args_chunk_size)
        if exchange.is_streamed:
            self._send_stream(exchange, blocks)
        else:
            self._send_message(exchange, blocks)

    def _send_message(self, exchange: AnthropicExchange, blocks: list[BlockEvents]) -> None:
        owner, reply = self.owner, exchange.reply
        events = sum(len(block.deltas) + 2 for block in blocks)
        time.sleep(owner.stream_duration(events, reply))
        if reply.cut_off_after_chunks is not None:
            owner.bill(exchange.bill(0, completed=False))
            self.drop_connection()
        elif reply.error_event_after_chunks is not None:
            self.send_api_error(529, _OVERLOADED)
        else:
            owner.issue(dict(_signatures(blocks)))
            output = exchange.completion_tokens(blocks)
            thinking = thinking_tokens(reply, blocks)
            owner.bill(exchange.bill(output, completed=True, thinking_tokens=thinking))
            self.send_json(HTTPStatus.OK, message_payload(exchange, blocks))

    def _send_stream(self, exchange: AnthropicExchange, blocks: list[BlockEvents]) -> None:
        owner, reply = self.owner, exchange.reply
        stop_after = _stop_after(reply)
        self.start_event_stream()
        start = {"type": "message_start", "message": message_payload(exchange, [], content=False)}
        self.write_event(start)
        self.write_event({"type": "ping"})
        events = _content_events(blocks)
        sent = events if stop_after is None else events[:stop_after]
        for number, event in enumerate(sent):
            time.sleep(owner.delay_before(number, reply))
            try:
                self.write_event(event.payload)
                owner.record_chunk_time(exchange.index)
            except ConnectionError:
                # The client went away: the prompt and the words it was sent are billed.
                owner.bill(exchange.bill(_words_sent(sent[:number]), completed=False))
                raise
        if stop_after is None:
            self._finish_stream(exchange, blocks)
        else:
            self._end_early(exchange, sent)

    def _finish_stream(self, exchange: AnthropicExchange, blocks: list[BlockEvents]) -> None:
        owner = self.owner
        owner.issue(dict(_signatures(blocks)))
        output = exchange.completion_tokens(blocks)
        thinking = thinking_tokens(exchange.reply, blocks)
        # Billed before the last events, so a client that has read message_stop finds the record.
        owner.bill(exchange.bill(output, completed=True, thinking_tokens=thinking))
        delta = {"stop_reason": exchange.stop_reason, "stop_sequence": None}
        usage = exchange.usage(output, thinking)
        if exchange.reply.usage_in_message_start_only:
            usage = {"output_tokens": output}
        self.write_event({"type": "message_delta", "delta": delta, "usage": usage})
        self.write_event({"type": "message_stop"})
        self.end_event_stream()

    def _end_early(self, exchange: AnthropicExchange, sent: list[_ContentEvent]) -> None:
        """Cut the connection, or send `event: error`, after the events already sent."""
        self.owner.bill(exchange.bill(_words_sent(sent), completed=False))
        if exchange.reply.cut_off_after_chunks is not None:
            self.drop_connection()
            return
        self.write_event(error_payload(529, _OVERLOADED))
        self.end_event_stream()


class ScriptedAnthropicServer(ScriptedWireServer[BilledAnthropicCall]):
    """An Anthropic Messages API server on a free local port, replaying a script.

    The script is given as to `ScriptedOpenAIServer`, which spells the rules out: a list hands
    its replies out in the order requests arrive; a list with `per_conversation=True` gives
    every conversation its own copy, each request the reply its conversation so far (the
    top-level `system` and every message) has come to; a mapping from a first user message to
    a list gives that list to the conversations that start with it. A request the script has no
    reply for gets HTTP 422 `script_exhausted` (it never wraps around, and no client retries it).
    Streamed replies send the events the API sends: `message_start` (input usage, cache reads and
    writes), `ping`, per content block `content_block_start` / `content_block_delta` /
    `content_block_stop` (`thinking_delta` and `signature_delta`, `text_delta` per word,
    `input_json_delta` split into `args_chunk_size` pieces), `message_delta` (stop reason,
    cumulative usage) and `message_stop`.

    Thinking and redacted-thinking blocks are sent only when the request enables thinking, as
    the API does, and each thinking block is signed. As the API does, the server answers HTTP
    400 `invalid_request_error` (recorded, billed nothing, no reply consumed) to a thinking
    request whose tool-use turn does not start with its thinking block or changed a signed
    block, to a request holding `tool_use` / `tool_result` blocks without declaring tools, and
    to one with more than four `cache_control` breakpoints.

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
        script: The replies, one per request, in order; or one list per first user message.
        per_conversation: With a single list: every conversation walks its own copy.
        first_token_delay_s: Server-wide wait before the first content-block event.
        token_interval_s: Server-wide wait between later content-block events.
        host: Address to bind.
        port: Port to bind; 0 picks a free one.

    Raises:
        ValueError: a reply sets `omit_usage` (the Messages API always reports usage).
        OSError: the port cannot be bound (on `start()` or entering the `with`).
        RuntimeError: `start()` on a server already started; `origin` or `base_url` read
            before it started.
    """

    handler = _Handler

    @property
    def base_url(self) -> str:
        """The `base_url` to give `ChatAnthropic` or `anthropic.Anthropic`, without `/v1`."""
        return self.origin

    @property
    def replies_left(self) -> int:
        """How many replies of a list handed out in arrival order no request has consumed yet.

        Raises:
            TypeError: the script is per conversation (`per_conversation`, or a mapping), where
                each conversation has its own count.
        """
        with self._lock:
            if self._script.per_conversation:
                raise TypeError("replies_left needs a script handed out in arrival order")
            return self._script.left()

    def check_replies(self, replies: Sequence[ScriptedReply]) -> None:
        """Refuse `omit_usage`: the Messages API always reports usage."""
        for reply in replies:
            if reply.omit_usage:
                raise ValueError("the Messages API always reports usage: omit_usage is not served")

    def refusal(self, body: Mapping[str, Any], issued: Mapping[str, str]) -> Rejection | None:
        """The API's 400 for a well-formed request it refuses (see `request_rejection`)."""
        return request_rejection(body, issued)


def _signatures(blocks: Sequence[BlockEvents]) -> Iterator[tuple[str, str]]:
    """The thinking signatures (and redacted data) sent, each with the text an echo must keep."""
    for block in blocks:
        if block.final["type"] == "thinking":
            yield block.final["signature"], block.final["thinking"]
        elif block.final["type"] == "redacted_thinking":
            yield block.final["data"], block.final["data"]


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
