"""Folding a streamed chat-model reply into the `AIMessage` that `ainvoke` gives for it.

For whoever drives a LangChain chat model's `astream()` themselves (a graph node, a custom
loop, a proxy) and wants, at the end of the stream, the same message `ainvoke` would have
returned, which is what `LLMAgent` does with every streamed reply:

```python
fold = ReplyFold()
async for chunk in model.astream(messages):
    print(fold.add(chunk), end="")  # the visible text of the chunk, never thinking
reply = fold.message()  # content blocks, metadata and usage as the integration made them
```

Chunks are not added with `+` one by one (each `+` re-merges everything so far), nor kept until
the end: they are merged a few at a time as they arrive, so a stream's memory grows with its
answer only. Tool-call fragments are grouped by `ToolCallAssembler`,
stricter than langchain-core: by index, then by call id, never by name, and arguments that are not
a JSON object are kept as invalid calls rather than repaired. `output_text` is the text of a reply
a provider bills as output, for estimating a call the provider sent no usage for.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    InvalidToolCall,
    ToolCall,
    ToolCallChunk,
    message_chunk_to_message,
)
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.messages.tool import invalid_tool_call, tool_call

from cleveractors.agents.tool import NOT_A_JSON_OBJECT, unnamed_call_id

__all__ = ["ReplyFold", "ToolCallAssembler", "output_text"]


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
        """Take one fragment (an entry of a chunk's `tool_call_chunks`), in the order streamed."""
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
        a JSON object (kept, so the model is told, never silently dropped).

        A call that never got an id is named by its position (`call_unnamed_0`, ...); an invalid
        call's `error` says why its arguments are unusable."""
        valid: list[ToolCall] = []
        invalid: list[InvalidToolCall] = []
        for call in self._calls:
            call_id = call.call_id or unnamed_call_id(call.position)
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
                    invalid_tool_call(name=name, args=text, id=call_id, error=NOT_A_JSON_OBJECT)
                )
        return valid, invalid


class ReplyFold:
    """Folds a streamed reply as it arrives into the `AIMessage` that `ainvoke` returns for the
    same reply, keeping no list of its chunks.

    Per chunk it reads the chunk's visible text, hands its tool-call fragments to a
    `ToolCallAssembler`, and holds the chunk until `COMPACT_EVERY` have arrived; those are then
    merged into the reply so far. A stream in flight thus holds its answer once and at most
    `COMPACT_EVERY` chunks, however long the answer grows. Merging is langchain-core's own
    `add_ai_message_chunks` (what `ainvoke` does when it streams), in batches rather than one
    pass (the merge is associative), so content blocks (thinking with its signature, redacted
    thinking, reasoning items, citations), `additional_kwargs`, `response_metadata`, the id and
    `usage_metadata` with its token details come out exactly as the provider's integration made
    them. Only tool calls are ours: `ToolCallAssembler` groups their fragments and keeps
    unparseable arguments as invalid calls, where langchain-core would repair them with a lenient
    parser.

    A model whose `astream()` falls back to `ainvoke` yields one whole `AIMessage`; that message
    is the reply as it is.
    """

    COMPACT_EVERY = 16
    """How many chunks are held before they are merged into the reply so far."""

    __slots__ = (
        "_assembler",
        "_chunks_received",
        "_has_usage",
        "_merged",
        "_pending",
        "_whole",
        "first_chunk_at",
    )

    def __init__(self) -> None:
        self._pending: list[AIMessageChunk] = []
        self._merged: AIMessageChunk | None = None
        self._assembler = ToolCallAssembler()
        self._chunks_received = 0
        self._whole: AIMessage | None = None
        self._has_usage = False
        self.first_chunk_at: float | None = None
        """When the first piece arrived (`time.perf_counter()`), for the time to first chunk."""

    def add(self, piece: BaseMessage) -> str:
        """Take one streamed piece; returns the text a reader should see (never thinking).

        Raises:
            TypeError: the piece is not an `AIMessageChunk`, or a whole `AIMessage` came after
                other pieces (or chunks after it).
        """
        reply = self._keep(piece)
        if reply.usage_metadata is not None:
            self._has_usage = True
        content = reply.content
        return content if isinstance(content, str) else reply.text

    def _keep(self, piece: BaseMessage) -> AIMessage:
        if isinstance(piece, AIMessageChunk) and self._whole is None:
            if not self._chunks_received:
                self.first_chunk_at = time.perf_counter()
            self._chunks_received += 1
            for fragment in piece.tool_call_chunks:
                self._assembler.add(fragment)
            pending = self._pending
            pending.append(piece)
            if len(pending) >= self.COMPACT_EVERY:
                self._compact()
            return piece
        if isinstance(piece, AIMessage) and not self.received_any:
            self.first_chunk_at = time.perf_counter()
            self._whole = piece
            return piece
        raise TypeError(
            f"chat model streamed {type(piece).__name__} after {self._received()}; "
            "expected AIMessageChunks, or one whole AIMessage"
        )

    def _compact(self) -> AIMessageChunk:
        """Merge the held chunks into the reply so far; returns it."""
        pending = self._pending
        if self._merged is not None:
            pending.insert(0, self._merged)
        merged = add_ai_message_chunks(*pending)
        self._merged = merged
        self._pending = []
        return merged

    @property
    def received_any(self) -> bool:
        """Something of the reply arrived (so the provider did work for it)."""
        return self._chunks_received > 0 or self._whole is not None

    @property
    def chunks_received(self) -> int:
        """How many streamed pieces arrived so far."""
        return self._chunks_received + (self._whole is not None)

    @property
    def has_usage(self) -> bool:
        """The provider's usage arrived (it may still be busy finishing the stream)."""
        return self._has_usage

    def message(self) -> AIMessage:
        """The reply as `ainvoke` gives it, from what arrived so far (an empty message if
        nothing did); callable at any time, e.g. to bill a stream that was cut off."""
        if self._whole is not None:
            return self._whole
        if not self._chunks_received:
            return AIMessage(content="")
        # A chunk arrived, so it is held (then merged now) or already merged.
        merged = self._merged if self._merged is not None and not self._pending else self._compact()
        valid, invalid = self._assembler.calls()
        reply = cast(AIMessage, message_chunk_to_message(merged))
        return reply.model_copy(update={"tool_calls": valid, "invalid_tool_calls": invalid})

    def _received(self) -> str:
        if self._whole is not None:
            return "a whole AIMessage"
        return f"{self._chunks_received} chunks"


def output_text(message: BaseMessage) -> str:
    """All the text a reply holds that the provider bills as output, thinking included: visible
    text, thinking blocks (Anthropic, Gemini) and reasoning summaries (Responses API). Tool
    arguments are not in it; they are counted from the calls."""
    if isinstance(message.content, str):
        return message.content
    return "".join(_block_text(block) for block in message.content)


def _block_text(block: str | dict[str, Any]) -> str:
    if isinstance(block, str):
        return block
    pieces = [block.get("text"), block.get("thinking")]
    pieces += [item.get("text") for item in block.get("summary") or () if isinstance(item, dict)]
    return "".join(piece for piece in pieces if isinstance(piece, str))
