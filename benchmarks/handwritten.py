"""The baseline: a careful hand-written `ChatOpenAI` tool loop, with no library in between.

Careful means: the client is built and `bind_tools` called once; a streamed round keeps its chunks
in a list and folds them once, at the end, with `add_ai_message_chunks` (adding chunks with `+`
one by one re-merges everything so far, which is quadratic); usage is summed as a billing product
has to. It does none of what the library adds (argument validation, timeouts, events, records).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

ToolFunction = Callable[..., Awaitable[str]]
Fold = Literal["once", "each_chunk"]


@dataclass(slots=True)
class TurnTally:
    """What a hand-written turn made and spent."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    text: str = ""

    def count(self, reply: AIMessage) -> None:
        self.llm_calls += 1
        if reply.usage_metadata is not None:
            self.prompt_tokens += reply.usage_metadata["input_tokens"]
            self.completion_tokens += reply.usage_metadata["output_tokens"]


class HandWrittenLoop:
    """One client, tools bound once; `run_turn` blocks, `stream_turn` yields text as it comes."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        tools: Mapping[str, ToolFunction],
        schemas: Sequence[dict[str, Any]],
        timeout_s: float | None = None,
    ) -> None:
        client = ChatOpenAI(
            model=model,
            base_url=base_url,
            api_key=SecretStr(api_key),
            max_retries=0,
            timeout=timeout_s,  # None: the client's defaults
            stream_usage=True,  # as the library does: a custom base_url gets no usage otherwise
        )
        self._model = client.bind_tools(list(schemas))
        self._tools = tools

    async def run_turn(self, message: str) -> TurnTally:
        tally = TurnTally()
        messages: list[BaseMessage] = [HumanMessage(message)]
        while True:
            reply = await self._model.ainvoke(messages)
            tally.count(reply)
            if not reply.tool_calls:
                tally.text = reply.text
                return tally
            messages.append(reply)
            messages.extend(await self._run_tools(reply))

    async def stream_turn(
        self, message: str, tally: TurnTally, *, fold: Fold = "once"
    ) -> AsyncIterator[str]:
        """Yield the text as it streams. `fold="each_chunk"` adds chunks with `+` as they come, as
        LangChain's docs show: the common way, measured for reference only."""
        messages: list[BaseMessage] = [HumanMessage(message)]
        while True:
            folder = _FoldOnce() if fold == "once" else _FoldEachChunk()
            async for chunk in self._model.astream(messages):
                # Typed as AIMessage by `bind_tools`; a stream yields AIMessageChunks.
                folder.add(cast(AIMessageChunk, chunk))
                if text := chunk.text:
                    yield text
            reply = folder.message()
            tally.count(reply)
            if not reply.tool_calls:
                tally.text = reply.text
                return
            messages.append(reply)
            messages.extend(await self._run_tools(reply))

    async def _run_tools(self, reply: AIMessage) -> list[ToolMessage]:
        results = []
        for call in reply.tool_calls:
            output = await self._tools[call["name"]](**call["args"])
            results.append(ToolMessage(output, tool_call_id=call["id"], name=call["name"]))
        return results


class _FoldOnce:
    __slots__ = ("_chunks",)

    def __init__(self) -> None:
        self._chunks: list[AIMessageChunk] = []

    def add(self, chunk: AIMessageChunk) -> None:
        self._chunks.append(chunk)

    def message(self) -> AIMessageChunk:
        return add_ai_message_chunks(self._chunks[0], *self._chunks[1:])


class _FoldEachChunk:
    __slots__ = ("_reply",)

    def __init__(self) -> None:
        self._reply: AIMessageChunk | None = None

    def add(self, chunk: AIMessageChunk) -> None:
        self._reply = chunk if self._reply is None else self._reply + chunk

    def message(self) -> AIMessageChunk:
        assert self._reply is not None, "the stream was empty"
        return self._reply
