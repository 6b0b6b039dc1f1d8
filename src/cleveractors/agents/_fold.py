"""Folding a streamed reply into one `AIMessage`, once, at the end of the stream.

Chunks are not added with `+` one by one (each `+` re-merges everything so far); text pieces are
kept in a list and tool-call fragments grouped by `ToolCallAssembler`, then joined once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    InvalidToolCall,
    ToolCall,
    ToolCallChunk,
)
from langchain_core.messages.ai import UsageMetadata, add_usage
from langchain_core.messages.tool import invalid_tool_call, tool_call

__all__ = ["ReplyFold", "ToolCallAssembler"]


@dataclass(slots=True)
class _PartialCall:
    position: int
    index: int | None
    call_id: str | None
    name: str | None
    argument_pieces: list[str] = field(default_factory=list)


class ToolCallAssembler:
    """Groups streamed tool-call fragments into calls by index, then by call id; never by name.

    The same tool called twice in one reply is normal, so a name says nothing about which call a
    fragment belongs to. A fragment with neither index nor id continues the latest call (some
    OpenAI-compatible servers send only the first fragment's id); a known index arriving with a
    new id starts a new call (some servers reuse index 0 for every call).
    """

    __slots__ = ("_by_id", "_by_index", "_calls")

    def __init__(self) -> None:
        self._calls: list[_PartialCall] = []
        self._by_index: dict[int, _PartialCall] = {}
        self._by_id: dict[str, _PartialCall] = {}

    def add(self, fragment: ToolCallChunk) -> None:
        call = self._call_for(fragment)
        if call.call_id is None and fragment["id"]:
            call.call_id = fragment["id"]
            self._by_id[call.call_id] = call
        if call.name is None and fragment["name"]:
            call.name = fragment["name"]
        if fragment["args"]:
            call.argument_pieces.append(fragment["args"])

    def _call_for(self, fragment: ToolCallChunk) -> _PartialCall:
        index, call_id = fragment["index"], fragment["id"]
        known = self._by_index.get(index) if index is not None else None
        if known is not None and (not call_id or known.call_id in (None, call_id)):
            return known
        if call_id and call_id in self._by_id:
            return self._by_id[call_id]
        if index is None and not call_id and self._calls:
            return self._calls[-1]
        call = _PartialCall(position=len(self._calls), index=index, call_id=None, name=None)
        self._calls.append(call)
        if index is not None:
            self._by_index[index] = call
        return call

    def calls(self) -> tuple[list[ToolCall], list[InvalidToolCall]]:
        """The assembled calls, in the order they began: parsed, and those whose arguments are not
        a JSON object (kept, so the model is told, never silently dropped)."""
        valid: list[ToolCall] = []
        invalid: list[InvalidToolCall] = []
        for call in self._calls:
            call_id = call.call_id or f"call_unnamed_{call.position}"
            name = call.name or ""
            text = "".join(call.argument_pieces)
            try:
                arguments = json.loads(text) if text.strip() else {}
            except json.JSONDecodeError as exc:
                invalid.append(invalid_tool_call(name=name, args=text, id=call_id, error=str(exc)))
                continue
            if isinstance(arguments, dict):
                valid.append(tool_call(name=name, args=arguments, id=call_id))
            else:
                invalid.append(
                    invalid_tool_call(
                        name=name, args=text, id=call_id, error="arguments are not a JSON object"
                    )
                )
        return valid, invalid


class ReplyFold:
    """Collects a streamed reply's chunks and builds the `AIMessage` that `ainvoke` would return."""

    __slots__ = ("_id", "_text_pieces", "_tool_calls", "_usage", "received_any")

    def __init__(self) -> None:
        self._text_pieces: list[str] = []
        self._tool_calls = ToolCallAssembler()
        self._usage: UsageMetadata | None = None
        self._id: str | None = None
        self.received_any = False

    def add(self, chunk: AIMessageChunk) -> str:
        """Take one chunk; returns its text (empty when it carries none)."""
        self.received_any = True
        content = chunk.content
        text = content if isinstance(content, str) else chunk.text
        if text:
            self._text_pieces.append(text)
        for fragment in chunk.tool_call_chunks:
            self._tool_calls.add(fragment)
        if chunk.usage_metadata is not None:
            # Providers may split usage over several chunks; LangChain adds them, and so do we.
            self._usage = add_usage(self._usage, chunk.usage_metadata)
        if self._id is None and chunk.id is not None:
            self._id = chunk.id
        return text

    @property
    def text(self) -> str:
        return "".join(self._text_pieces)

    @property
    def has_usage(self) -> bool:
        """The provider's usage arrived (it may still be busy finishing the stream)."""
        return self._usage is not None

    def message(self) -> AIMessage:
        valid, invalid = self._tool_calls.calls()
        return AIMessage(
            content=self.text,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            usage_metadata=self._usage,
            id=self._id,
        )
