"""Streamed replies shaped the way LangChain's provider integrations stream them (test machinery).

A `ReplySpec` is what the provider meant to say: thinking with its signature, visible text with
citations, tool calls (arguments valid or broken) and usage. `chunks(spec, shape)` turns it into
the `AIMessageChunk`s `BaseChatModel.astream()` yields for that integration, after
langchain-core's own touches (an `lc_run-` id on chunks without one, the generation info folded
into `response_metadata`, an empty last chunk). The shapes follow the integrations' streaming
code:

- `openai_chat`: langchain-openai, Chat Completions. String content; tool-call fragments with
  `index`, id and name on the first only; finish reason and model on the last choice chunk; a
  usage chunk with input/output token details.
- `openai_responses_v0` / `openai_responses_v1`: langchain-openai with `use_responses_api=True`,
  `output_version="v0"` (reasoning item in `additional_kwargs["reasoning"]`, function-call item
  ids in `additional_kwargs`) or `"responses/v1"` (reasoning, text and function_call items as
  content blocks with `index` keys); usage and metadata on the `response.completed` chunk.
- `anthropic`: langchain-anthropic with tools or thinking. Content-block lists with `index`
  keys: thinking deltas then a signature delta, redacted thinking, text and citations deltas,
  tool_use blocks with `input_json_delta` fragments; stop reason and usage on `message_delta`.
- `google_genai`: langchain-google-genai. Thinking and text blocks, each function call whole in
  one chunk with its thought signature in `additional_kwargs`; usage split across chunks.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st
from langchain_core.messages import AIMessageChunk
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk

Shape = Literal[
    "openai_chat", "openai_responses_v0", "openai_responses_v1", "anthropic", "google_genai"
]
SHAPES: tuple[Shape, ...] = (
    "openai_chat",
    "openai_responses_v0",
    "openai_responses_v1",
    "anthropic",
    "google_genai",
)
RUN_ID = "lc_run--0b5e3a52-5f0c-4cf3-9a59-7d1f0d3b6b11"
"""What langchain-core's `astream` puts on chunks the provider sent without an id."""

_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz .,'\"{}\\é🌧", min_size=0, max_size=12)


@dataclass(frozen=True, slots=True)
class CallSpec:
    call_id: str
    name: str
    argument_pieces: tuple[str, ...]

    @property
    def arguments(self) -> str:
        return "".join(self.argument_pieces)


@dataclass(frozen=True, slots=True)
class ReplySpec:
    """What the provider meant to send, before any integration cut it into chunks."""

    thinking_pieces: tuple[str, ...]
    signature: str
    redacted_thinking: str | None
    text_pieces: tuple[str, ...]
    citation: dict[str, Any] | None
    calls: tuple[CallSpec, ...]
    input_tokens: int
    output_tokens: int
    cache_read: int
    reasoning_tokens: int

    @property
    def text(self) -> str:
        return "".join(self.text_pieces)

    @property
    def thinking(self) -> str:
        return "".join(self.thinking_pieces)

    def usage(self) -> UsageMetadata:
        return UsageMetadata(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.input_tokens + self.output_tokens,
            input_token_details={"cache_read": self.cache_read},
            output_token_details={"reasoning": self.reasoning_tokens},
        )


# -- generating specs ---------------------------------------------------------------------------


@st.composite
def _pieces(draw: st.DrawFn, text: str) -> tuple[str, ...]:
    """`text` cut at random places (empty pieces included: providers send those too)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=4)))
    bounds = [0, *cuts, len(text)]
    return tuple(text[start:end] for start, end in itertools.pairwise(bounds))


_ARGUMENTS = st.one_of(
    st.dictionaries(
        st.sampled_from(["city", "query", "days", "unit"]),
        st.one_of(_WORDS, st.integers(-5, 500), st.booleans()),
        max_size=3,
    ).map(json.dumps),
    st.sampled_from(
        [
            "",
            '{"city": "Paris", "oops": ',  # cut off: langchain-core would repair it
            '{"city": "Par',
            '["Paris"]',  # JSON, but not an object
            "null",
            '{"city": "Paris"}}',
        ]
    ),
)


@st.composite
def _call(draw: st.DrawFn, position: int) -> CallSpec:
    arguments = draw(_ARGUMENTS)
    return CallSpec(
        call_id=f"call_{position}_{draw(st.integers(0, 999))}",
        # The same tool twice in one reply is normal: names say nothing about grouping.
        name=draw(st.sampled_from(["get_weather", "get_time"])),
        argument_pieces=draw(_pieces(arguments)),
    )


@st.composite
def reply_specs(draw: st.DrawFn, *, valid_arguments_only: bool = False) -> ReplySpec:
    count = draw(st.integers(0, 3))
    calls = tuple(draw(_call(position)) for position in range(count))
    if valid_arguments_only:
        calls = tuple(call for call in calls if _is_json_object(call.arguments))
    output = draw(st.integers(0, 400))
    return ReplySpec(
        thinking_pieces=draw(st.one_of(st.just(()), _WORDS.flatmap(_pieces))),
        signature=draw(st.sampled_from(["", "EqQBCkgIARABGAIiQL2xsig==", "c2lnbmF0dXJl"])),
        redacted_thinking=draw(st.one_of(st.none(), st.just("EmwKAhgBEgy3va3pzix/LafPsn4a"))),
        text_pieces=draw(_WORDS.flatmap(_pieces)),
        citation=draw(
            st.one_of(
                st.none(),
                st.just(
                    {
                        "type": "char_location",
                        "cited_text": "Paris is rainy.",
                        "document_index": 0,
                        "start_char_index": 0,
                        "end_char_index": 15,
                    }
                ),
            )
        ),
        calls=calls,
        input_tokens=draw(st.integers(1, 5000)),
        output_tokens=output,
        cache_read=draw(st.integers(0, 100)),
        reasoning_tokens=draw(st.integers(0, output)),
    )


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict) or not text.strip()
    except json.JSONDecodeError:
        return False


# -- cutting a spec into an integration's chunks ------------------------------------------------


def integration_chunks(spec: ReplySpec, shape: Shape) -> list[AIMessageChunk]:
    """The chunks the integration `shape`'s own `_astream` yields for `spec`."""
    return list(_BUILDERS[shape](spec))


def chunks(spec: ReplySpec, shape: Shape) -> list[AIMessageChunk]:
    """The chunks `BaseChatModel.astream()` yields for `spec` through the integration `shape`."""
    made = integration_chunks(spec, shape)
    for chunk in made:
        if chunk.id is None:
            chunk.id = RUN_ID
    if made and made[-1].chunk_position != "last":
        empty: str | list[str | dict[Any, Any]] = "" if isinstance(made[-1].content, str) else []
        made.append(AIMessageChunk(content=empty, chunk_position="last", id=RUN_ID))
    return made


def _openai_chat(spec: ReplySpec) -> Iterator[AIMessageChunk]:
    provider = {"model_provider": "openai"}
    chunk_id = "chatcmpl-C2x9Kd"
    yield AIMessageChunk(content="", id=chunk_id, response_metadata=dict(provider))
    for piece in spec.text_pieces:
        yield AIMessageChunk(content=piece, id=chunk_id, response_metadata=dict(provider))
    for index, call in enumerate(spec.calls):
        for number, piece in enumerate(call.argument_pieces):
            first = number == 0
            yield AIMessageChunk(
                content="",
                id=chunk_id,
                response_metadata=dict(provider),
                tool_call_chunks=[
                    tool_call_chunk(
                        name=call.name if first else None,
                        args=piece,
                        id=call.call_id if first else None,
                        index=index,
                    )
                ],
            )
    yield AIMessageChunk(
        content="",
        id=chunk_id,
        response_metadata={
            "finish_reason": "tool_calls" if spec.calls else "stop",
            "model_name": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_560af6e559",
            "service_tier": "default",
            **provider,
        },
    )
    usage = spec.usage()
    usage["input_token_details"] = {"audio": 0, "cache_read": spec.cache_read}
    usage["output_token_details"] = {"audio": 0, "reasoning": spec.reasoning_tokens}
    yield AIMessageChunk(
        content="", id=chunk_id, usage_metadata=usage, response_metadata=dict(provider)
    )


def _responses_blocks(spec: ReplySpec) -> Iterator[tuple[list[dict[str, Any]], list[Any]]]:
    """The content blocks and tool-call fragments of each Responses API stream event, in the
    `responses/v1` form (what langchain-openai builds before any v0 conversion)."""
    index = 0
    reasoning_id = "rs_68af4030592c81938ec0a5fbab4a3e9f"
    if spec.thinking_pieces:
        yield [{"type": "reasoning", "id": reasoning_id, "summary": [], "index": index}], []
        yield (
            [
                {
                    "type": "reasoning",
                    "id": reasoning_id,
                    "summary": [{"index": 0, "type": "summary_text", "text": ""}],
                    "index": index,
                }
            ],
            [],
        )
        for piece in spec.thinking_pieces:
            summary = [{"index": 0, "type": "summary_text", "text": piece}]
            yield [{"type": "reasoning", "summary": summary, "index": index}], []
        if spec.signature:
            yield (
                [
                    {
                        "type": "reasoning",
                        "id": reasoning_id,
                        "summary": [],
                        "encrypted_content": spec.signature,
                        "index": index,
                    }
                ],
                [],
            )
        index += 1
    if spec.text_pieces:
        for piece in spec.text_pieces:
            yield [{"type": "text", "text": piece, "index": index}], []
        if spec.citation is not None:
            annotation = {"type": "citation", "title": "Weather", "url": "https://example.org"}
            yield [{"type": "text", "annotations": [annotation], "index": index}], []
        yield [{"type": "text", "text": "", "id": "msg_68af40", "index": index}], []
        index += 1
    for call in spec.calls:
        item = f"fc_{call.call_id}"
        yield (
            [
                {
                    "type": "function_call",
                    "name": call.name,
                    "arguments": "",
                    "call_id": call.call_id,
                    "id": item,
                    "index": index,
                }
            ],
            [tool_call_chunk(name=call.name, args="", id=call.call_id, index=index)],
        )
        for piece in call.argument_pieces:
            yield (
                [{"type": "function_call", "arguments": piece, "index": index}],
                [tool_call_chunk(args=piece, index=index, id=None, name=None)],
            )
        index += 1


def _openai_responses(spec: ReplySpec, *, v0: bool) -> Iterator[AIMessageChunk]:
    provider = {"model_provider": "openai"}
    response_id = "resp_68af4030592c8193"
    yield AIMessageChunk(
        content=[], id=response_id, response_metadata={"id": response_id, **provider}
    )
    for blocks, fragments in _responses_blocks(spec):
        chunk = AIMessageChunk(
            content=blocks, tool_call_chunks=fragments, response_metadata=dict(provider)
        )
        yield _as_responses_v0(chunk) if v0 else chunk
    yield AIMessageChunk(
        content=[],
        usage_metadata=spec.usage(),
        response_metadata={
            "model_name": "o4-mini-2025-04-16",
            "status": "completed",
            "service_tier": "default",
            **provider,
        },
        chunk_position="last",
    )


def _as_responses_v0(chunk: AIMessageChunk) -> AIMessageChunk:
    """langchain-openai's `_convert_to_v03_ai_message`, for the block kinds generated here."""
    content: list[str | dict[Any, Any]] = []
    extra: dict[str, Any] = {}
    message_id = None
    for block in chunk.content:
        assert isinstance(block, dict)
        kind = block["type"]
        if kind == "reasoning":
            extra["reasoning"] = {key: value for key, value in block.items() if key != "index"}
        elif kind == "function_call":
            if block.get("call_id") and block.get("id"):
                extra["__openai_function_call_ids__"] = {block["call_id"]: block["id"]}
        else:
            message_id = block.get("id", message_id)
            content.append({key: value for key, value in block.items() if key != "id"})
    return AIMessageChunk(
        content=content,
        additional_kwargs=extra,
        tool_call_chunks=chunk.tool_call_chunks,
        response_metadata=chunk.response_metadata,
        id=message_id,
    )


def _anthropic(spec: ReplySpec) -> Iterator[AIMessageChunk]:
    provider = {"model_provider": "anthropic"}
    yield AIMessageChunk(
        content=[], response_metadata={"model_name": "claude-sonnet-4-5-20250929", **provider}
    )
    index = 0
    if spec.thinking_pieces or spec.signature:
        for piece in spec.thinking_pieces:
            block = {"type": "thinking", "thinking": piece, "index": index}
            yield AIMessageChunk(content=[block], response_metadata=dict(provider))
        signature = {
            "type": "thinking",
            "signature": spec.signature,
            "thinking": "",
            "index": index,
        }
        yield AIMessageChunk(content=[signature], response_metadata=dict(provider))
        index += 1
    if spec.redacted_thinking is not None:
        block = {"type": "redacted_thinking", "data": spec.redacted_thinking, "index": index}
        yield AIMessageChunk(content=[block], response_metadata=dict(provider))
        index += 1
    if spec.text_pieces:
        for piece in spec.text_pieces:
            block = {"type": "text", "text": piece, "index": index}
            yield AIMessageChunk(content=[block], response_metadata=dict(provider))
        if spec.citation is not None:
            block = {"type": "text", "citations": [spec.citation], "index": index}
            yield AIMessageChunk(content=[block], response_metadata=dict(provider))
        index += 1
    for call in spec.calls:
        start = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
        yield AIMessageChunk(
            content=[{**start, "index": index}],
            tool_call_chunks=[
                tool_call_chunk(name=call.name, args="", id=call.call_id, index=index)
            ],
            response_metadata=dict(provider),
        )
        for piece in call.argument_pieces:
            delta = {"type": "input_json_delta", "partial_json": piece, "index": index}
            yield AIMessageChunk(
                content=[delta],
                tool_call_chunks=[tool_call_chunk(args=piece, index=index, id=None, name=None)],
                response_metadata=dict(provider),
            )
        index += 1
    usage = spec.usage()
    usage["input_token_details"] = {
        "cache_read": spec.cache_read,
        "cache_creation": 0,
        "ephemeral_5m_input_tokens": 0,
        "ephemeral_1h_input_tokens": 0,
    }
    yield AIMessageChunk(
        content=[],
        usage_metadata=usage,
        response_metadata={
            "stop_reason": "tool_use" if spec.calls else "end_turn",
            "stop_sequence": None,
            **provider,
        },
        chunk_position="last",
    )


def _google_genai(spec: ReplySpec) -> Iterator[AIMessageChunk]:
    metadata = {"model_provider": "google_genai"}
    index = 0
    usage = spec.usage()
    # Gemini reports usage on every chunk; the integration sends the difference to the last.
    first_usage = UsageMetadata(
        input_tokens=spec.input_tokens, output_tokens=0, total_tokens=spec.input_tokens
    )
    rest_usage = UsageMetadata(
        input_tokens=0,
        output_tokens=spec.output_tokens,
        total_tokens=spec.output_tokens,
        input_token_details=usage.get("input_token_details", {}),
        output_token_details=usage.get("output_token_details", {}),
    )
    first = True
    if spec.thinking_pieces:
        for piece in spec.thinking_pieces:
            block = {"type": "thinking", "thinking": piece, "index": index}
            yield AIMessageChunk(
                content=[block],
                response_metadata=dict(metadata),
                usage_metadata=first_usage if first else None,
            )
            first = False
        index += 1
    for piece in spec.text_pieces:
        block: dict[str, Any] = {"type": "text", "text": piece, "index": index}
        if spec.signature:
            block["extras"] = {"signature": spec.signature}
        yield AIMessageChunk(
            content=[block],
            response_metadata=dict(metadata),
            usage_metadata=first_usage if first else None,
        )
        first = False
    if spec.text_pieces:
        index += 1
    for call in spec.calls:
        extra: dict[str, Any] = {"function_call": {"name": call.name, "arguments": call.arguments}}
        if spec.signature:
            extra["__gemini_function_call_thought_signatures__"] = {call.call_id: spec.signature}
        yield AIMessageChunk(
            content=[],
            additional_kwargs=extra,
            tool_call_chunks=[
                tool_call_chunk(name=call.name, args=call.arguments, id=call.call_id, index=index)
            ],
            response_metadata=dict(metadata),
            usage_metadata=first_usage if first else None,
        )
        first = False
        index += 1
    yield AIMessageChunk(
        content=[],
        usage_metadata=first_usage if first else rest_usage,
        response_metadata={
            "finish_reason": "STOP",
            "model_name": "gemini-3-pro-preview",
            "safety_ratings": [],
            **metadata,
        },
    )
    if first:  # everything came in one chunk: the output usage follows on its own
        yield AIMessageChunk(content=[], usage_metadata=rest_usage, response_metadata=metadata)


_BUILDERS: dict[Shape, Callable[[ReplySpec], Iterator[AIMessageChunk]]] = {
    "openai_chat": _openai_chat,
    "openai_responses_v0": lambda spec: _openai_responses(spec, v0=True),
    "openai_responses_v1": lambda spec: _openai_responses(spec, v0=False),
    "anthropic": _anthropic,
    "google_genai": _google_genai,
}
