"""Message content on GenAI spans: whether it is captured, how much of each value, and the
conventions' shape of a message (`gen_ai.input.messages`, `gen_ai.output.messages`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Span

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, BaseMessage

__all__ = [
    "CONTENT_MAX_BYTES_ENV",
    "CONTENT_MODE_ENV",
    "ContentCapture",
    "as_json",
    "finish_reason",
    "set_input_content",
    "set_output_content",
]

CONTENT_MODE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
CONTENT_MAX_BYTES_ENV = "CLEVERACTORS_OTEL_CONTENT_MAX_BYTES"
_SPAN_CONTENT_MODES = frozenset({"true", "1", "span_only", "span_and_event"})
_DEFAULT_CONTENT_MAX_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class ContentCapture:
    """Whether message content goes on spans, and how much of each value."""

    enabled: bool = False
    max_bytes: int = _DEFAULT_CONTENT_MAX_BYTES

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ContentCapture:
        env = os.environ if environ is None else environ
        mode = env.get(CONTENT_MODE_ENV, "").strip().lower()
        raw_cap = env.get(CONTENT_MAX_BYTES_ENV, "").strip()
        cap = int(raw_cap) if raw_cap.isdigit() and int(raw_cap) > 0 else _DEFAULT_CONTENT_MAX_BYTES
        return cls(enabled=mode in _SPAN_CONTENT_MODES, max_bytes=cap)

    def capped(self, value: str) -> str:
        """`value`, cut to `max_bytes` of UTF-8 with the cut marked, so a backend never drops
        the span (and its usage) for its size."""
        data = value.encode()
        if len(data) <= self.max_bytes:
            return value
        kept = data[: self.max_bytes].decode(errors="ignore")
        return f"{kept}...[truncated {len(data) - len(kept.encode())} bytes]"


def finish_reason(metadata: Mapping[str, Any]) -> str | None:
    """The provider's finish reason (OpenAI `finish_reason`, Anthropic `stop_reason`, Gemini
    `finish_reason`)."""
    for key in ("finish_reason", "stop_reason"):
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value.lower()
    return None


def set_input_content(span: Span, messages: Sequence[BaseMessage], content: ContentCapture) -> None:
    system = [_text_part(message) for message in messages if message.type == "system"]
    others = [_message(message) for message in messages if message.type != "system"]
    if system:
        span.set_attribute("gen_ai.system_instructions", content.capped(as_json(system)))
    span.set_attribute("gen_ai.input.messages", content.capped(as_json(others)))


def set_output_content(span: Span, reply: AIMessage, content: ContentCapture) -> None:
    output = {**_message(reply), "finish_reason": finish_reason(reply.response_metadata)}
    span.set_attribute("gen_ai.output.messages", content.capped(as_json([output])))


_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def _message(message: BaseMessage) -> dict[str, Any]:
    """A message in the conventions' shape: a role and its parts."""
    parts: list[dict[str, Any]] = []
    if message.text:
        parts.append(_text_part(message))
    for call in getattr(message, "tool_calls", ()):
        parts.append(
            {"type": "tool_call", "id": call["id"], "name": call["name"], "arguments": call["args"]}
        )
    if message.type == "tool":
        parts = [
            {
                "type": "tool_call_response",
                "id": getattr(message, "tool_call_id", None),
                "response": message.text,
            }
        ]
    return {"role": _ROLES.get(message.type, message.type), "parts": parts}


def _text_part(message: BaseMessage) -> dict[str, Any]:
    return {"type": "text", "content": message.text}


def as_json(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)
