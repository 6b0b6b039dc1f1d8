"""Steps measuring what a stream in flight holds (tracemalloc), with a chat model that streams its
whole answer and then waits at a gate before its closing usage chunk."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from support.harness import run_guarded

from cleveractors.agents.llm import LLMAgent
from cleveractors.events import RunFinished, TextDelta

_KB = 1024
_PROMPT_TOKENS = 7


class _GatedChatModel(BaseChatModel):
    """Streams `chunks` text chunks of `chunk_size` characters, then waits until `gate` is set
    before its closing chunk (the usage): a stream held in flight with its whole answer sent."""

    chunks: int
    chunk_size: int
    gate: Any
    """An `asyncio.Event`, shared by every copy of the model."""

    @property
    def _llm_type(self) -> str:
        return "gated-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("the gated model only streams")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        piece = "x" * (self.chunk_size - 1) + " "
        for _ in range(self.chunks):
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        await self.gate.wait()
        usage = {
            "input_tokens": _PROMPT_TOKENS,
            "output_tokens": self.chunks,
            "total_tokens": _PROMPT_TOKENS + self.chunks,
        }
        yield ChatGenerationChunk(
            message=AIMessageChunk(content="", usage_metadata=usage, chunk_position="last")
        )


_GatedChatModel.model_rebuild(_types_namespace={"Any": Any})


def _size_kb(text: str) -> int:
    number, unit = text.split()
    assert unit == "KB", f"sizes are given in KB, not {unit!r}"
    return int(number) * _KB


@given("streamed answers of {small} and of {large} in chunks of {chunk:d} characters")
def _given_answers(context: Context, small: str, large: str, chunk: int) -> None:
    context.answer_sizes = (_size_kb(small), _size_kb(large))
    context.chunk_size = chunk


async def _held_in_flight(streams: int, answer: int, chunk_size: int) -> tuple[float, list[Any]]:
    """Memory per stream (bytes over what was traced before) while `streams` streams each hold
    their whole `answer`; then lets them finish. Returns it and the streams' last events."""
    gate = asyncio.Event()
    chunks = answer // chunk_size
    model = _GatedChatModel(chunks=chunks, chunk_size=chunk_size, gate=gate)
    agents = [LLMAgent(model) for _ in range(streams)]
    arrived = 0
    all_arrived = asyncio.Event()

    async def read(agent: LLMAgent) -> Any:
        nonlocal arrived
        deltas = 0
        last = None
        async with agent.stream_message("Write at length.") as events:
            async for event in events:
                last = event
                if isinstance(event, TextDelta):
                    deltas += 1
                    if deltas == chunks:
                        arrived += 1
                        if arrived == streams:
                            all_arrived.set()
        return last

    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        readers = [asyncio.create_task(read(agent)) for agent in agents]
        await asyncio.wait_for(all_arrived.wait(), timeout=120)
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    gate.set()
    ends = await asyncio.wait_for(asyncio.gather(*readers), timeout=120)
    return (held - before) / streams, ends


@when("{streams:d} streams of each size are held in flight once their whole answer has arrived")
def _when_held(context: Context, streams: int) -> None:
    context.per_stream = {}
    context.ends = {}
    # A first round warms what is made once per process (caches, lazy imports), unmeasured.
    run_guarded(_held_in_flight(streams, min(context.answer_sizes), context.chunk_size))
    for answer in context.answer_sizes:
        per_stream, ends = run_guarded(_held_in_flight(streams, answer, context.chunk_size))
        context.per_stream[answer] = per_stream
        context.ends[answer] = ends


@then("memory per stream grows with the answer by less than {bound} beyond the answer's own length")
def _then_flat(context: Context, bound: str) -> None:
    small, large = context.answer_sizes
    growth = context.per_stream[large] - context.per_stream[small]
    beyond = growth - (large - small)
    assert beyond < _size_kb(bound), (
        f"memory per stream: {context.per_stream[small] / _KB:.0f} KB with a {small // _KB} KB "
        f"answer, {context.per_stream[large] / _KB:.0f} KB with {large // _KB} KB: "
        f"{beyond / _KB:.0f} KB beyond the answer's growth (bound {bound})"
    )


@then("every stream then finishes with its whole answer and the model's usage")
def _then_finished(context: Context) -> None:
    for answer, ends in context.ends.items():
        chunks = answer // context.chunk_size
        for end in ends:
            assert isinstance(end, RunFinished), f"a stream ended with {end!r}"
            result = end.result
            assert len(result.text) == chunks * context.chunk_size, len(result.text)
            assert (result.prompt_tokens, result.completion_tokens) == (_PROMPT_TOKENS, chunks)
            assert not result.usage.estimated
