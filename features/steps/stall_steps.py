"""Steps for the loop's stall limit on streamed model calls: the setting, what a stalled call
left behind, and which per-chunk timeout the chat model's client is left with."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import AsyncIterator
from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from support.harness import (
    ChunkCounter,
    Stop,
    after_text,
    consume,
    read_slowly,
    run_guarded,
)

from cleveractors import ActorExecutor, ConfigurationError, LLMAgent, LoopLimits
from cleveractors.agents.stream import MAX_BUFFERED_EVENTS
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply
from cleveractors.tokens import count_tokens

_WORD = re.compile(r"\s*\S+")
"""How the scripted model streams text: a chunk per word, with the space before it."""
_NEVER_S = 20.0
"""Longer than any stall limit here: a wait that only a stop or the limit ends."""


@given("the actor ends a streamed call after {seconds:g} s without a chunk")
def _given_stall_limit(context: Context, seconds: float) -> None:
    context.actor["agent"]["stream_stall_timeout_s"] = seconds


@then("the stalled call's completion is the estimate of the text streamed before the stall")
def _then_stalled_completion(context: Context) -> None:
    call = context.outcome.result.usage_by_call[-1]
    reply = context.model.replies[call.index - 1]
    assert reply.stall_s > 0, "that call was not scripted to stall"
    received = "".join(_WORD.findall(reply.text)[: reply.stall_after_chunks])
    assert received, "the script must stream some text before the stall"
    assert call.usage.completion_tokens == count_tokens(received), (call, received)
    assert call.usage.estimated, call


@then("the reply came in chunks whose pauses add up to more than the stall limit")
def _then_longer_than_limit(context: Context) -> None:
    limit = context.actor["agent"]["stream_stall_timeout_s"]
    delay = context.model.replies[0].chunk_delay_s
    chunks = len(context.outcome.chunks)
    assert chunks > 1, f"the reply came in {chunks} chunk"
    assert chunks * delay > limit, f"{chunks} chunks {delay} s apart fit in {limit} s"


@when(
    "an agent is built in code around ChatOpenAI(stream_chunk_timeout={client:g}) "
    "with the loop's stall limit {limit}"
)
def _when_agent_around_chat_openai(context: Context, client: float, limit: str) -> None:
    model = ChatOpenAI(
        model="gpt-4o-mini",
        api_key="sk-unused",  # type: ignore[arg-type]  # pydantic coerces it to a SecretStr
        base_url="http://127.0.0.1:9/v1",
        stream_chunk_timeout=client,
    )
    stall = None if limit == "None" else float(limit)
    context.agent = LLMAgent(model, limits=LoopLimits(stream_stall_timeout_s=stall))


@when("an actor config with provider openai is loaded")
def _when_openai_actor_loaded(context: Context) -> None:
    os.environ["CLEVERACTORS_TEST_KEY"] = "sk-unused"
    agent = context.actor["agent"]
    del agent["script"]
    agent.update(
        provider="openai",
        model="gpt-4o-mini",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="CLEVERACTORS_TEST_KEY",
    )
    context.agent = ActorExecutor.from_config(context.actor).agent


@then("the agent's ChatOpenAI has stream_chunk_timeout {value}")
def _then_client_chunk_timeout(context: Context, value: str) -> None:
    model = context.agent.model
    assert isinstance(model, ChatOpenAI), model
    expected = None if value == "None" else float(value)
    assert model.stream_chunk_timeout == expected, model.stream_chunk_timeout


@when("LoopLimits is made with stream_stall_timeout_s = {value:g}")
def _when_bad_stall_limit(context: Context, value: float) -> None:
    try:
        LoopLimits(stream_stall_timeout_s=value)
    except ConfigurationError as exc:
        context.policy_error = exc
    else:
        context.policy_error = None


class _StallingModel(BaseChatModel):
    """Streams one chunk, then nothing, and swallows the first cancellation it gets, as a
    library may (Python 3.11's `asyncio.wait_for` could lose a stop that way)."""

    @property
    def _llm_type(self) -> str:
        return "stalling"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("this model only streams")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        yield ChatGenerationChunk(message=AIMessageChunk(content="Paris"))
        with contextlib.suppress(asyncio.CancelledError):  # the stop is lost here
            await asyncio.sleep(_NEVER_S)
        await asyncio.sleep(_NEVER_S)


@when(
    "the caller stops a run whose model stalls and swallows the stop, "
    "with a {seconds:g} s stall limit"
)
def _when_stop_swallowed(context: Context, seconds: float) -> None:
    agent = LLMAgent(_StallingModel(), limits=LoopLimits(stream_stall_timeout_s=seconds))
    stop = Stop("cancel task", at=after_text("Paris"))
    reading = consume(ActorExecutor(agent), "Weather in Paris?", mode="events", stop=stop)
    context.outcome = run_guarded(reading)


@then("the stopped run and its call are marked cancelled, not stalled")
def _then_cancelled_not_stalled(context: Context) -> None:
    assert not context.outcome.tasks_left, context.outcome.tasks_left
    result = context.outcome.result
    assert result is not None, "no result was settled"
    assert result.error is not None, result
    assert result.error.type == "CancelledError", result.error
    assert result.cancelled, result
    statuses = [call.status for call in result.usage_by_call]
    assert statuses == ["cancelled"], statuses


@given("the actor's model answers in {words:d} words at once")
def _given_long_answer(context: Context, words: int) -> None:
    context.actor["agent"]["script"] = [ScriptedReply(text=" ".join(["rain"] * words))]


@when("a caller reads one event, then nothing for {seconds:g} s, then the rest")
def _when_slow_reader(context: Context, seconds: float) -> None:
    executor = ActorExecutor.from_config(context.actor)
    # The run is held back once its buffer is full: `RoundStarted`, then the chunks (the reader
    # took `RunStarted`).
    counter = ChunkCounter(signal_at=MAX_BUFFERED_EVENTS - 1)
    executor.agent.model.callbacks = [counter]
    reading = read_slowly(
        executor.execute_events, "Weather in Paris?", counter=counter, stall_s=seconds
    )
    context.outcome, _chunks = run_guarded(reading)


@then("the reader got the whole answer of {words:d} words from one call")
def _then_whole_answer(context: Context, words: int) -> None:
    result = context.outcome.result
    assert result.error is None, result.error
    assert len(result.text.split()) == words, result.text
    assert result.llm_calls == 1, result.usage_by_call


@when(
    "an agent built in code around ChatOpenAI(stream_chunk_timeout={client:g}), without the "
    "loop's stall limit, streams a reply that stalls for {seconds:g} s"
)
def _when_client_timeout_rules(context: Context, client: float, seconds: float) -> None:
    reply = ScriptedReply(text="Paris: 18 C and light rain.", stall_after_chunks=2, stall_s=seconds)
    server = ScriptedOpenAIServer([reply])
    server.start()
    try:
        model = ChatOpenAI(
            model="gpt-4o-mini",
            api_key="sk-unused",  # type: ignore[arg-type]  # pydantic coerces it to a SecretStr
            base_url=server.base_url,
            max_retries=0,
            stream_chunk_timeout=client,
        )
        agent = LLMAgent(model, limits=LoopLimits(stream_stall_timeout_s=None))
        reading = consume(ActorExecutor(agent), "Weather in Paris?", mode="events")
        context.outcome = run_guarded(reading)
    finally:
        server.stop()
