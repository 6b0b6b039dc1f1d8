"""`ScriptedOpenAIServer`: an OpenAI-compatible Chat Completions server that replays a script.

For wire-level tests and benchmarks: real HTTP on 127.0.0.1, so the `openai` client and
`ChatOpenAI` run their own parsing of SSE frames, tool-call fragments and the usage chunk.
Each POST to `/v1/chat/completions` is answered with one `ScriptedReply` (in global order, or
the one its conversation so far has come to); the server records the request bodies, what it
billed and when each streamed chunk left, so tests can compare our counts and timings with the
server's. Standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from cleveractors._script import ScriptedReply
from cleveractors.testing._openai_refusals import messages_rejection
from cleveractors.testing._openai_wire import (
    Exchange,
    Piece,
    chunk_payload,
    completion_payload,
    is_chat_request,
    stream_pieces,
    usage_chunk_payload,
    words_sent,
)
from cleveractors.testing.wire import (
    SCRIPT_EXHAUSTED,
    BilledCall,
    BilledTotal,
    Rejection,
    ScriptedWireServer,
    WireHandler,
    conversation_of,
)

__all__ = ["BilledCall", "BilledTotal", "ScriptedOpenAIServer", "conversation_of"]


class _Handler(WireHandler["ScriptedOpenAIServer"]):
    route = "/v1/chat/completions"
    bad_body_message = "Body must be a JSON object with `messages`"

    def accepts(self, body: dict[str, Any]) -> bool:
        return is_chat_request(body)

    def error_payload(self, status: int, message: str, kind: str | None = None) -> dict[str, Any]:
        # A scripted error type is also the code, as OpenAI sends `insufficient_quota`.
        code = None if kind in (None, SCRIPT_EXHAUSTED) else kind
        kind = kind or ("server_error" if status >= 500 else "invalid_request_error")
        return {"error": {"message": message, "type": kind, "code": code}}

    def answer(self, index: int, reply: ScriptedReply, body: dict[str, Any]) -> None:
        exchange = Exchange.of(index, reply, body)
        if exchange.is_streamed:
            self._send_stream(exchange)
        else:
            self._send_completion(exchange)

    def _send_completion(self, exchange: Exchange) -> None:
        owner, reply = self.owner, exchange.reply
        time.sleep(owner.stream_duration(len(stream_pieces(reply, exchange.index)), reply))
        if reply.cut_off_after_chunks is not None:
            owner.bill(exchange.bill(0, completed=False))
            self.drop_connection()
            return
        owner.bill(exchange.bill(exchange.completion_tokens, completed=True))
        self.send_json(HTTPStatus.OK, completion_payload(exchange))

    def _send_stream(self, exchange: Exchange) -> None:
        owner, reply = self.owner, exchange.reply
        pieces = stream_pieces(reply, exchange.index)
        limit = len(pieces) if reply.cut_off_after_chunks is None else reply.cut_off_after_chunks
        sent: list[Piece] = []
        self.start_event_stream()
        try:
            self.write_event(chunk_payload(exchange, {"role": "assistant", "content": ""}))
            for n, piece in enumerate(pieces[:limit]):
                time.sleep(owner.delay_before(n, reply))
                self.write_event(chunk_payload(exchange, piece.delta))
                owner.record_chunk_time(exchange.index)
                sent.append(piece)
        except ConnectionError:
            owner.bill(exchange.bill(words_sent(sent), completed=False))
            raise
        if reply.cut_off_after_chunks is not None:
            owner.bill(exchange.bill(words_sent(sent), completed=False))
            self.drop_connection()
            return
        # Billed before the last frames, so a client that has read [DONE] always finds the record.
        owner.bill(exchange.bill(exchange.completion_tokens, completed=True))
        self.write_event(chunk_payload(exchange, {}, finish_reason=exchange.finish_reason))
        if exchange.include_usage:
            self.write_event(usage_chunk_payload(exchange))
        self.write_chunk(b"data: [DONE]\n\n")
        self.end_event_stream()


class ScriptedOpenAIServer(ScriptedWireServer[BilledCall]):
    """An OpenAI-compatible Chat Completions server on a free local port, replaying a script.

    Each POST to `/v1/chat/completions` is answered with a `ScriptedReply`; a request the script
    has no reply for gets HTTP 422 with the error type `script_exhausted`, saying "script
    exhausted for conversation ..." (it never wraps around, and no client retries a 422).

    Which script, and whose turn it is, depends on how the script is given:

    - a list, by default: one script, replies handed out in the order requests arrive, whatever
      conversation they belong to;
    - a list with `per_conversation=True`: every conversation walks its own copy of the list,
      so concurrent runs each get the whole script. The reply depends on the whole
      conversation so far (every message before the reply): a request whose messages extend
      an earlier request's gets the reply after the one that request got; the same messages
      again get the same reply (another run asking the same), or the next one after a fault
      (`error`, `cut_off_after_chunks`: that is the retry); any other request starts a
      conversation, with the first reply. A conversation whose earlier messages are rewritten
      (pruned, say) starts over;
    - a mapping from a first user message to a list: conversations starting with that message
      walk that list, as above; one not in the mapping gets HTTP 422. Streamed replies send word
    deltas, tool-call fragments (index, id and name on the first fragment only, arguments split
    into `args_chunk_size` pieces) and, when the request asks for it, the usage chunk.

    `first_token_delay_s` is waited before the first content or tool-call chunk and
    `token_interval_s` between the next ones, each plus the reply's `chunk_delay_s`. A blocking
    reply waits as long as its stream would have taken in total.

    A reply with `error` is answered with HTTP `error_status` (500 when not given) and, when it has
    `retry_after`, a `Retry-After` header.

    A reply with `cut_off_after_chunks` drops the connection after that many content/tool chunks
    when streamed, and before any response when blocking, so the client sees a broken connection.

    With `checks_messages=True` the server refuses, as the API does, with HTTP 400
    `invalid_request_error` (recorded, billed nothing, no reply taken), messages whose content
    parts are of a type their role does not take (an Anthropic `thinking` block, say), an
    assistant message whose `tool_calls` are not all answered by the tool messages after it,
    and a tool message answering no call.

    Example:
        with ScriptedOpenAIServer([ScriptedReply(text="Hi there")]) as server:
            client = OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            ...
            assert server.billed_total.completion_tokens == 2

    Args:
        script: The replies, one per request, in order; or one list per first user message.
        per_conversation: With a single list: every conversation walks its own copy.
        first_token_delay_s: Server-wide wait before the first streamed content chunk.
        token_interval_s: Server-wide wait between later streamed content chunks.
        host: Address to bind.
        port: Port to bind; 0 picks a free one.
        checks_messages: Refuse messages the API refuses (see above); off by default.

    Raises:
        OSError: the port cannot be bound (on `start()` or entering the `with`).
        RuntimeError: `start()` on a server already started; `origin` or `base_url` read
            before it started.
    """

    handler = _Handler

    def __init__(
        self,
        script: Sequence[ScriptedReply] | Mapping[str, Sequence[ScriptedReply]],
        *,
        per_conversation: bool = False,
        first_token_delay_s: float = 0.0,
        token_interval_s: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        checks_messages: bool = False,
    ) -> None:
        super().__init__(
            script,
            per_conversation=per_conversation,
            first_token_delay_s=first_token_delay_s,
            token_interval_s=token_interval_s,
            host=host,
            port=port,
        )
        self.checks_messages = checks_messages

    def refusal(self, body: Mapping[str, Any], issued: Mapping[str, str]) -> Rejection | None:
        """The API's 400 for messages it refuses, when `checks_messages` is on."""
        return messages_rejection(body) if self.checks_messages else None

    @property
    def base_url(self) -> str:
        """The OpenAI `base_url` to give a client, e.g. `http://127.0.0.1:54321/v1`."""
        return f"{self.origin}/v1"
