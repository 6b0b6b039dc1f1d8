"""The Anthropic Messages API wire format as `ScriptedAnthropicServer` speaks it: the reply type,
request checks (including extended thinking's rule for tool-use turns), message and SSE event
payloads, and what one answered request is billed.

Checked against the official `anthropic` SDK (its stream accumulator and `Message` types) and
langchain-anthropic's stream reader; see `features/testing.anthropic_server.feature`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import NonNegativeInt

from cleveractors._script import (
    ScriptedReply,
    ScriptedToolCall,
    call_arguments_text,
    count_words,
    text_pieces,
)
from cleveractors.testing.wire import BilledCall, WireExchange

__all__ = [
    "AnthropicExchange",
    "BilledAnthropicCall",
    "BlockEvents",
    "ScriptedAnthropicReply",
    "as_anthropic_reply",
    "error_payload",
    "is_messages_request",
    "message_payload",
    "reply_blocks",
    "thinking_tokens",
]


# The `error.type` the API names for each HTTP status it answers with.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class ScriptedAnthropicReply(ScriptedReply):
    """A `ScriptedReply` with what only the Messages API has: thinking, cache-write lifetimes,
    the older usage events, an error event mid-stream. (`error_status` 529 is Anthropic's
    `overloaded_error`; `cache_read_tokens` / `cache_write_tokens` are reported as
    `cache_read_input_tokens` / `cache_creation_input_tokens`, apart from `input_tokens`;
    `reasoning_tokens`, when set, replaces the words of the thinking as `thinking_tokens`.)

    A plain `ScriptedReply` is served too; these fields then keep their defaults.
    """

    thinking: str = ""
    """Text of a `thinking` block sent first, signed by the server; only when the request enables
    thinking, as the API does."""
    redacted_thinking: str = ""
    """`data` of a `redacted_thinking` block sent after the thinking block (thinking enabled)."""
    cache_write_ttl: Literal["5m", "1h"] = "5m"
    """The lifetime of the cache writes, reported in `usage.cache_creation` (priced apart)."""
    usage_in_message_start_only: bool = False
    """Streamed: report the input usage in `message_start` only, and only `output_tokens` in
    `message_delta` (the older event form some providers still send)."""
    error_event_after_chunks: NonNegativeInt | None = None
    """Streamed: after that many content-block events, send `event: error` (overloaded_error) and
    end the stream. Blocking: answer HTTP 529, billing nothing."""

    @property
    def fails(self) -> bool:
        """Whether the reply is a fault (an error, a cut-off, an error event) a client retries."""
        return super().fails or self.error_event_after_chunks is not None


@dataclass(frozen=True)
class BilledAnthropicCall(BilledCall):
    """A `BilledCall` with the prompt's cached parts (both included in `prompt_tokens`; reads are
    also `cached_tokens`) and, as `reasoning_tokens`, the thinking part of the completion that
    `output_tokens_details` reports (0 for a reply that ended early, whose usage the client never
    gets)."""

    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_ttl: str = "5m"


@dataclass(frozen=True)
class BlockEvents:
    """The events of one content block and the text it carries for billing."""

    start: dict[str, Any]
    deltas: tuple[tuple[dict[str, Any], str], ...]
    """Each delta with the text it adds (billed as output)."""
    final: dict[str, Any]
    """The block as a blocking reply carries it."""


def as_anthropic_reply(reply: ScriptedReply) -> ScriptedAnthropicReply:
    if isinstance(reply, ScriptedAnthropicReply):
        return reply
    return ScriptedAnthropicReply(**reply.model_dump())


@dataclass(frozen=True)
class AnthropicExchange(WireExchange):
    """One Messages request being answered, with what its replies need to know."""

    reply: ScriptedAnthropicReply
    is_thinking: bool

    @classmethod
    def of(cls, index: int, reply: ScriptedReply, body: Mapping[str, Any]) -> AnthropicExchange:
        scripted = as_anthropic_reply(reply)
        prompt = request_words(body) if scripted.prompt_tokens is None else scripted.prompt_tokens
        return cls(
            index=index,
            reply=scripted,
            model=scripted.model_name or str(body.get("model", "")),
            prompt_tokens=max(prompt, scripted.cache_read_tokens + scripted.cache_write_tokens),
            is_streamed=bool(body.get("stream")),
            is_thinking=thinking_enabled(body),
        )

    @property
    def message_id(self) -> str:
        return f"msg_scripted_{self.index}"

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.reply.tool_calls else "end_turn"

    def completion_tokens(self, blocks: Sequence[BlockEvents]) -> int:
        if self.reply.completion_tokens is not None:
            return self.reply.completion_tokens
        return sum(_block_words(block) for block in blocks)

    def bill(
        self, completion_tokens: int, *, completed: bool, thinking_tokens: int = 0
    ) -> BilledAnthropicCall:
        billed = self.billed(BilledAnthropicCall, completion_tokens, completed=completed)
        reply = self.reply
        return replace(
            billed,
            cache_read_tokens=reply.cache_read_tokens,
            cached_tokens=reply.cache_read_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            cache_write_ttl=reply.cache_write_ttl,
            reasoning_tokens=thinking_tokens,
        )

    def usage(self, output_tokens: int, thinking_tokens: int | None) -> dict[str, Any]:
        """The `usage` object: `input_tokens` excludes the cached parts, as the API reports it."""
        reply = self.reply
        usage: dict[str, Any] = {
            "input_tokens": self.prompt_tokens - reply.cache_read_tokens - reply.cache_write_tokens,
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "cache_read_input_tokens": reply.cache_read_tokens,
            "cache_creation": {
                f"ephemeral_{ttl}_input_tokens": reply.cache_write_tokens
                * (ttl == reply.cache_write_ttl)
                for ttl in ("5m", "1h")
            },
            "output_tokens": output_tokens,
        }
        if thinking_tokens:
            usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
        return usage


def thinking_enabled(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def is_messages_request(body: object) -> bool:
    """Whether `body` has the shape the reply and the bill are read from."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        return False
    if not isinstance(body.get("max_tokens"), int):
        return False
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    return all(_is_message(message) for message in messages)


def _is_message(message: object) -> bool:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in content
    )


def request_words(body: Mapping[str, Any]) -> int:
    """What the server bills as prompt: the words of the system prompt and of every block."""
    return _words_in(body.get("system")) + sum(
        _words_in(message.get("content")) for message in body["messages"]
    )


def _words_in(content: object) -> int:
    if isinstance(content, str):
        return count_words(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for block in (block for block in content if isinstance(block, dict)):
        if block.get("type") == "tool_use":
            total += count_words(json.dumps(block.get("input", {})))
        for key in ("text", "thinking", "content"):
            total += _words_in(block.get(key))
    return total


def _block_words(block: BlockEvents) -> int:
    # Joined first: argument pieces are cut mid-word.
    return count_words("".join(text for _, text in block.deltas))


def signature_of(exchange_index: int, thinking: str) -> str:
    """The signature the server issues for a thinking block (opaque, as the API's)."""
    digest = hashlib.sha256(f"{exchange_index}:{thinking}".encode()).hexdigest()
    return f"sig_scripted_{exchange_index}_{digest[:24]}"


def _tool_use_id(call: ScriptedToolCall, exchange_index: int, position: int) -> str:
    return call.id if call.id is not None else f"toolu_scripted_{exchange_index}_{position}"


def reply_blocks(exchange: AnthropicExchange, *, args_chunk_size: int) -> list[BlockEvents]:
    """The content blocks of the reply, in order: thinking, redacted thinking, text, tool uses."""
    reply, blocks = exchange.reply, []
    if exchange.is_thinking and reply.thinking:
        blocks.append(_thinking_block(exchange))
    if exchange.is_thinking and reply.redacted_thinking:
        block = {"type": "redacted_thinking", "data": reply.redacted_thinking}
        blocks.append(BlockEvents(start=block, deltas=(), final=block))
    if reply.text:
        pieces = text_pieces(reply.text)
        deltas = tuple(({"type": "text_delta", "text": piece}, piece) for piece in pieces)
        final = {"type": "text", "text": reply.text}
        blocks.append(BlockEvents(start={"type": "text", "text": ""}, deltas=deltas, final=final))
    for position, call in enumerate(reply.tool_calls):
        blocks.append(_tool_use_block(call, exchange.index, position, args_chunk_size))
    return blocks


def _thinking_block(exchange: AnthropicExchange) -> BlockEvents:
    thinking = exchange.reply.thinking
    signature = signature_of(exchange.index, thinking)
    deltas: list[tuple[dict[str, Any], str]] = [
        ({"type": "thinking_delta", "thinking": piece}, piece) for piece in text_pieces(thinking)
    ]
    deltas.append(({"type": "signature_delta", "signature": signature}, ""))
    return BlockEvents(
        start={"type": "thinking", "thinking": "", "signature": ""},
        deltas=tuple(deltas),
        final={"type": "thinking", "thinking": thinking, "signature": signature},
    )


def _tool_use_block(
    call: ScriptedToolCall, exchange_index: int, position: int, size: int
) -> BlockEvents:
    block_id = _tool_use_id(call, exchange_index, position)
    arguments = call_arguments_text(call)
    # The API opens every tool_use block with an empty input_json_delta.
    pieces = ["", *(arguments[start : start + size] for start in range(0, len(arguments), size))]
    deltas = tuple(({"type": "input_json_delta", "partial_json": p}, p) for p in pieces)
    try:
        final_input: object = json.loads(arguments)
    except ValueError:
        final_input = arguments
    return BlockEvents(
        start={"type": "tool_use", "id": block_id, "name": call.name, "input": {}},
        deltas=deltas,
        final={"type": "tool_use", "id": block_id, "name": call.name, "input": final_input},
    )


def thinking_tokens(reply: ScriptedReply, blocks: Sequence[BlockEvents]) -> int:
    """The thinking part of the output: as scripted, else the words of the thinking sent."""
    thinking = (block for block in blocks if block.start["type"] == "thinking")
    return reply.reasoning_tokens or sum(_block_words(block) for block in thinking)


def message_payload(
    exchange: AnthropicExchange, blocks: Sequence[BlockEvents], *, content: bool = True
) -> dict[str, Any]:
    """The `Message` object: the blocking reply, or (`content=False`) `message_start`'s message."""
    if content:
        output = exchange.completion_tokens(blocks)
        usage = exchange.usage(output, thinking_tokens(exchange.reply, blocks))
    else:
        usage = exchange.usage(1, None)
    return {
        "id": exchange.message_id,
        "type": "message",
        "role": "assistant",
        "model": exchange.model,
        "content": [block.final for block in blocks] if content else [],
        "stop_reason": exchange.stop_reason if content else None,
        "stop_sequence": None,
        "usage": usage,
    }


def error_payload(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    kind = kind or _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
