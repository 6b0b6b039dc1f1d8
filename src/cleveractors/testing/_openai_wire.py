"""The OpenAI Chat Completions wire format as `ScriptedOpenAIServer` speaks it: request checks,
completion and chunk payloads, and what one answered request is billed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cleveractors._script import (
    ScriptedReply,
    ScriptedToolCall,
    call_arguments_text,
    completion_words,
    count_words,
    prompt_words,
    text_pieces,
)
from cleveractors.testing.wire import BilledCall, WireExchange

__all__ = [
    "Exchange",
    "Piece",
    "chunk_payload",
    "completion_payload",
    "is_chat_request",
    "stream_pieces",
    "usage_chunk_payload",
    "usage_payload",
    "words_sent",
]


@dataclass(frozen=True)
class Piece:
    """One streamed content or tool-call chunk: its delta, and the text it carries for billing."""

    delta: dict[str, Any]
    source: int | None
    """The tool call the text belongs to, or None for the message text."""
    text: str


@dataclass(frozen=True)
class Exchange(WireExchange):
    """One chat request being answered, with what its replies need to know."""

    include_usage: bool

    @classmethod
    def of(cls, index: int, reply: ScriptedReply, body: dict[str, Any]) -> Exchange:
        prompt = reply.prompt_tokens
        stream_options = body.get("stream_options") or {}
        return cls(
            index=index,
            reply=reply,
            model=reply.model_name or str(body.get("model", "")),
            prompt_tokens=prompt_words(body["messages"]) if prompt is None else prompt,
            is_streamed=bool(body.get("stream")),
            include_usage=bool(stream_options.get("include_usage")) and not reply.omit_usage,
        )

    def bill(self, completion_tokens: int, *, completed: bool) -> BilledCall:
        billed = self.billed(BilledCall, completion_tokens, completed=completed)
        reasoning = self.reply.reasoning_tokens if completed else 0
        return replace(
            billed, cached_tokens=self.reply.cache_read_tokens, reasoning_tokens=reasoning
        )

    @property
    def completion_tokens(self) -> int:
        reply = self.reply
        return (
            completion_words(reply) if reply.completion_tokens is None else reply.completion_tokens
        )

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.reply.tool_calls else "stop"


def is_chat_request(body: object) -> bool:
    """Whether `body` has the shape the reply and the bill are read from; anything else is a 400,
    not a handler crash that drops the connection after taking a reply."""
    if not isinstance(body, dict) or not isinstance(body.get("stream_options") or {}, dict):
        return False
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return False
    for message in messages:
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            return False
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("function", {}), dict):
                return False
    return True


def _call_id(call: ScriptedToolCall, request_index: int, position: int) -> str:
    return call.id if call.id is not None else f"call_{request_index}_{position}"


def stream_pieces(reply: ScriptedReply, request_index: int) -> list[Piece]:
    """The content and tool-call chunks of a streamed reply, in order."""
    pieces = [Piece({"content": word}, None, word) for word in text_pieces(reply.text)]
    size = reply.args_chunk_size
    for i, call in enumerate(reply.tool_calls):
        function = {"name": call.name, "arguments": ""}
        first = {"index": i, "id": _call_id(call, request_index, i), "type": "function"}
        pieces.append(Piece({"tool_calls": [{**first, "function": function}]}, i, ""))
        arguments = call_arguments_text(call)
        for start in range(0, len(arguments), size):
            part = arguments[start : start + size]
            fragment = {"index": i, "function": {"arguments": part}}
            pieces.append(Piece({"tool_calls": [fragment]}, i, part))
    return pieces


def words_sent(sent: Sequence[Piece]) -> int:
    # Joined per source first: argument pieces are cut mid-word.
    sources = {piece.source for piece in sent}
    texts = ("".join(p.text for p in sent if p.source == source) for source in sources)
    return sum(count_words(text) for text in texts)


def usage_payload(exchange: Exchange) -> dict[str, Any]:
    prompt, completion = exchange.prompt_tokens, exchange.completion_tokens
    total = prompt + completion
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total,
    }
    reply = exchange.reply
    if reply.cache_read_tokens or reply.reasoning_tokens:  # as OpenAI reports them
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cache_read_tokens}
        usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    return usage


def _envelope(exchange: Exchange, kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-scripted-{exchange.index}",
        "object": kind,
        "created": int(time.time()),
        "model": exchange.model,
    }


def completion_payload(exchange: Exchange) -> dict[str, Any]:
    reply = exchange.reply
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if not reply.text and reply.tool_calls else reply.text,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(call, exchange.index, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call_arguments_text(call)},
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    choice = {"index": 0, "message": message, "finish_reason": exchange.finish_reason}
    completion = {**_envelope(exchange, "chat.completion"), "choices": [choice]}
    if not reply.omit_usage:
        completion["usage"] = usage_payload(exchange)
    return completion


def chunk_payload(
    exchange: Exchange, delta: dict[str, Any], *, finish_reason: str | None = None
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    chunk = {**_envelope(exchange, "chat.completion.chunk"), "choices": [choice]}
    if exchange.include_usage:
        # OpenAI sends `"usage": null` on every chunk but the last when usage is requested.
        chunk["usage"] = None
    return chunk


def usage_chunk_payload(exchange: Exchange) -> dict[str, Any]:
    return {
        **_envelope(exchange, "chat.completion.chunk"),
        "choices": [],
        "usage": usage_payload(exchange),
    }
