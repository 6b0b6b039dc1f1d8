"""The script a scripted model or scripted server replays: one `ScriptedReply` per LLM call.

Shared by `ScriptedChatModel` (in process), the `stub` provider (from YAML: `ScriptedReply` is
the schema of an agent config's `script`) and the scripted servers (over HTTP), so one script
means the same thing everywhere. Private: it sits below `config` so that the library never
imports `cleveractors.testing`, which re-exports these names for users.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

__all__ = [
    "ScriptedReply",
    "ScriptedToolCall",
    "call_arguments_text",
    "completion_words",
    "count_words",
    "prompt_words",
    "text_pieces",
]

_WORD = re.compile(r"\S+")
_TEXT_PIECE = re.compile(r"\s*\S+(?:\s+$)?|\s+$")


def count_words(text: str) -> int:
    """The scripted doubles' tokenizer: one token per whitespace-separated word."""
    return len(_WORD.findall(text))


def text_pieces(text: str) -> list[str]:
    """How the scripted doubles stream a text: word pieces that keep their leading whitespace,
    and trailing whitespace on the last piece, so joining them gives back the text exactly."""
    return _TEXT_PIECE.findall(text)


class ScriptedToolCall(BaseModel):
    """A tool call the scripted model (or a scripted server) makes in a `ScriptedReply`: the
    tool's name and its arguments, streamed in pieces of the reply's `args_chunk_size`.

    Raises:
        pydantic.ValidationError: an unknown field, or arguments neither an object nor text.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    args: dict[str, object] | str = Field(default_factory=dict)
    """Arguments as an object, or raw argument text (which may be invalid JSON, on purpose)."""
    id: str | None = None
    """The call id; when omitted, one is made from the call's position (`call_<n>_<i>`)."""


class ScriptedReply(BaseModel):
    """One reply of the scripted model: text and/or tool calls, with the usage it reports.

    `prompt_tokens` / `completion_tokens` left as None are counted from the words of the request
    and of the reply, like a real provider's tokenizer would, so different requests cost different
    amounts. `error` makes the call fail before any output (as HTTP `error_status`, sending
    `retry_after` as its `Retry-After` header, when given); `cut_off_after_chunks` makes a streamed
    call fail after that many chunks, before the usage chunk; `omit_usage` makes it report none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    prompt_tokens: NonNegativeInt | None = None
    completion_tokens: NonNegativeInt | None = None
    error: str | None = None
    error_status: int | None = Field(default=None, ge=400, le=599)
    """The HTTP status of `error`; without one, the scripted model raises langchain-core's
    `ModelAPIError` and the scripted server answers 500."""
    retry_after: str | None = None
    """The `Retry-After` header sent with `error`: seconds, or an HTTP date."""
    error_type: str | None = None
    """The error body's type (and OpenAI's `code`) sent with `error`, e.g. `insufficient_quota`;
    by default the protocol's usual one for the status."""
    cut_off_after_chunks: NonNegativeInt | None = None
    omit_usage: bool = False
    cache_read_tokens: NonNegativeInt = 0
    """Of the prompt tokens, how many the provider reports read from its cache."""
    cache_write_tokens: NonNegativeInt = 0
    """Of the prompt tokens, how many the provider reports written to its cache."""
    reasoning_tokens: NonNegativeInt = 0
    """Of the completion tokens, how many the provider reports spent reasoning."""
    model_name: str | None = None
    """The model the reply says answered (providers report a dated snapshot); by default the
    scripted model reports none and the server echoes the requested one."""
    chunk_delay_s: float = Field(default=0.0, ge=0)
    """Pause before each streamed chunk (and before a blocking reply), to make timing visible."""
    stall_s: float = Field(default=0.0, ge=0)
    """A further pause before streamed chunk number `stall_after_chunks`: a stream that stalls."""
    stall_after_chunks: NonNegativeInt = 0
    args_chunk_size: PositiveInt = 8
    """Streamed tool-call arguments are split into pieces of this many characters."""

    @property
    def fails(self) -> bool:
        """Whether the reply is a fault (an error, a cut-off) a client would retry."""
        return self.error is not None or self.cut_off_after_chunks is not None


def delay_before_chunk(reply: ScriptedReply, chunk: int) -> float:
    """How long `reply` pauses before its streamed chunk number `chunk` (from 0)."""
    stall = reply.stall_s if chunk == reply.stall_after_chunks else 0.0
    return reply.chunk_delay_s + stall


def prompt_words(messages: Sequence[Mapping[str, Any]]) -> int:
    """What the scripted doubles bill for a request: the words of every message in OpenAI format.

    Counts each message's text content (a string, or the `text` of its content parts) and the
    arguments of an assistant message's tool calls, so the model and the server bill alike.
    """
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += count_words(content)
        elif isinstance(content, list):
            total += sum(
                count_words(str(part.get("text", ""))) for part in content if isinstance(part, dict)
            )
        for call in message.get("tool_calls") or ():
            total += count_words(str(call.get("function", {}).get("arguments", "")))
    return total


def completion_words(reply: ScriptedReply) -> int:
    """What the scripted doubles bill for a reply: the words of its text and tool-call arguments."""
    return count_words(reply.text) + sum(
        count_words(call_arguments_text(call)) for call in reply.tool_calls
    )


def call_arguments_text(call: ScriptedToolCall) -> str:
    """The arguments of a scripted call as the wire carries them: JSON text, or the raw string."""
    return call.args if isinstance(call.args, str) else json.dumps(call.args)
