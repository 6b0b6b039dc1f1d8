"""Fault-injected conversations, for property tests of billing: generate one, run it, price it.

A `Conversation` is a script for the scripted model plus a fault plan (provider errors, streams
cut off, replies without usage, failing tools, a caller cancelled mid-tool, a consumer that stops
after n events) and the mode it runs in. `conversations()` is its Hypothesis strategy,
`run_conversation()` runs one through `ActorExecutor` and records what happened, and
`expected_bill()` says what that run must report, computed from what the model received and sent,
never from the run's own result:

    run = await run_conversation(conversation)
    assert [call.usage for call in run.result.usage_by_call] == expected_bill(run).usages

The run itself is consumed through the test tree's one harness (`support.harness`). Needs
`hypothesis` (in the `test` extra).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from hypothesis import strategies as st
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.exceptions import ModelConnectionError
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from pydantic import PrivateAttr

from cleveractors.agents import LLMAgent, LoopLimits
from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult
from cleveractors.testing import (
    ScriptedChatModel,
    ScriptedReply,
    ScriptedRequest,
    ScriptedToolCall,
    call_arguments_text,
    completion_words,
    prompt_words,
)
from cleveractors.tokens import count_tokens, estimate_prompt_tokens
from cleveractors.tools import Tool
from cleveractors.usage import CallPurpose, TokenUsage
from support.harness import MODES, Consumption, Mode, Stop, after_items, consume

__all__ = [
    "ConsumerStop",
    "Conversation",
    "ConversationRun",
    "Delivery",
    "ExpectedBill",
    "RecordingChatModel",
    "StopKind",
    "conversations",
    "estimated_cost",
    "expected_bill",
    "run_conversation",
    "unanswered_tool_calls",
]

StopKind = Literal["async with", "break", "cancel task"]
"""How a streaming consumer stops early (of the harness's stop styles): leaves an `async with`
block (which calls `aclose()`), breaks out of `async for` (nothing else), or has its own task
cancelled."""

USER_MESSAGE = "What is the weather in Paris and in Rome?"

SETTLE_ITERATIONS = 16
"""Event-loop iterations after the caller returned within which every task must be done. Python
closes an async generator dropped by a `break` from a task asyncio schedules for the next
iteration, so a run stopped by a plain `break` can only settle promptly after it, not at once."""

_WORDS = ("paris", "rome", "weather", "is", "sunny", "rainy", "today", "and", "the", "answer")
_INVALID_ARGUMENTS = ('{"q": ', "not json", "[1, 2]")
_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "repeat": {"type": "integer", "minimum": 1}},
    "required": ["q"],
    "additionalProperties": False,
}


# -- the conversation --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerStop:
    """A streaming consumer that stops after reading `after_items` events (or text chunks)."""

    after_items: int
    how: StopKind


@dataclass(frozen=True, slots=True)
class Conversation:
    """One generated conversation: the model's script, the fault plan and the mode.

    Tool calls are numbered from 1 in the order they start; `failing_tool_calls` raise, and when
    call `cancel_caller_at_tool_call` starts, the caller's task is cancelled (a client hanging up
    while a tool runs).
    """

    script: tuple[ScriptedReply, ...]
    mode: Mode
    stream_tool_rounds: bool
    limits: LoopLimits
    has_system_prompt: bool
    failing_tool_calls: frozenset[int]
    cancel_caller_at_tool_call: int | None
    consumer_stop: ConsumerStop | None


_words = st.lists(st.sampled_from(_WORDS), max_size=6).map(" ".join)

_arguments: st.SearchStrategy[dict[str, object] | str] = st.one_of(
    st.fixed_dictionaries({"q": st.sampled_from(_WORDS)}, optional={"repeat": st.integers(1, 30)}),
    st.just({"wrong": 1}),  # valid JSON that fails the schema
    st.sampled_from(_INVALID_ARGUMENTS),  # not a JSON object at all
)

# The same tool twice in one reply is normal; "missing" is a tool the agent does not have.
_tool_call = st.builds(
    ScriptedToolCall,
    name=st.sampled_from(["lookup", "fetch", "lookup", "fetch", "finish", "missing"]),
    args=_arguments,
)


@st.composite
def _replies(draw: st.DrawFn, *, calls_tools: bool | None = None) -> ScriptedReply:
    """A reply with tool calls (`calls_tools`), without, or either; with or without a fault."""
    fault = draw(st.sampled_from([None, None, None, None, "error", "cut_off", "omit_usage"]))
    text = draw(_words)
    tool_calls = (
        ()
        if calls_tools is False
        else tuple(draw(st.lists(_tool_call, min_size=1 if calls_tools else 0, max_size=3)))
    )
    # Cut inside the reply, so that the cut happens (before the first chunk only if it has one).
    chunks = len(text.split()) + sum(
        -(-len(call_arguments_text(call)) // ScriptedReply().args_chunk_size) for call in tool_calls
    )
    return ScriptedReply(
        text=text,
        tool_calls=tool_calls,
        prompt_tokens=draw(st.one_of(st.none(), st.integers(0, 400))),
        completion_tokens=draw(st.one_of(st.none(), st.integers(0, 200))),
        error="provider error (HTTP 500)" if fault == "error" else None,
        cut_off_after_chunks=(
            (draw(st.integers(1, chunks - 1)) if chunks > 1 else 0) if fault == "cut_off" else None
        ),
        omit_usage=fault == "omit_usage",
    )


@st.composite
def _consumer_stops(draw: st.DrawFn, mode: Mode) -> ConsumerStop | None:
    if mode == "blocking" or draw(st.booleans()):
        return None
    how: StopKind = draw(st.sampled_from(get_args(StopKind)))
    return ConsumerStop(after_items=draw(st.integers(1, 12)), how=how)


@st.composite
def conversations(draw: st.DrawFn, modes: Sequence[Mode] = MODES) -> Conversation:
    """Conversations of up to 7 LLM calls, with faults, run in one of `modes`."""
    mode = draw(st.sampled_from(modes))
    # Tool rounds, then an answer (empty: "stuck"), then replies for synthesis or pruning calls.
    rounds = draw(st.integers(0, 4))  # drawn apart: lists lean to empty, and we want rounds
    tool_rounds = draw(st.lists(_replies(calls_tools=True), min_size=rounds, max_size=rounds))
    answer = draw(_replies(calls_tools=False))
    spare = draw(st.lists(_replies(), max_size=2))
    return Conversation(
        script=(*tool_rounds, answer, *spare),
        mode=mode,
        stream_tool_rounds=draw(st.sampled_from([True, True, False])),
        limits=LoopLimits(
            max_tool_rounds=draw(st.sampled_from([4, 3, 2, 1])),
            token_budget=draw(st.one_of(st.none(), st.integers(1, 300))),
            tool_output_max_tokens=draw(st.one_of(st.none(), st.integers(4, 60))),
        ),
        has_system_prompt=draw(st.booleans()),
        failing_tool_calls=draw(st.frozensets(st.integers(1, 8), max_size=3)),
        cancel_caller_at_tool_call=draw(st.sampled_from([None] * 6 + [1, 2, 3])),
        consumer_stop=draw(_consumer_stops(mode)),
    )


# -- what the provider did: the scripted model, recording every delivery -----------------------


@dataclass(slots=True)
class Delivery:
    """What the model sent for one request, and what of it reached the caller of the model."""

    streamed: bool
    chunks: list[AIMessageChunk] = field(default_factory=list)
    """Streamed chunks, as yielded (each reaches the loop: nothing awaits in between)."""
    message: AIMessage | None = None
    """The whole reply of a non-streamed call, once the model produced it."""
    handed_over: bool = False
    """A non-streamed reply was returned by `ainvoke()` (langchain-core hands it over a few
    event-loop iterations after the model produced it; a cancellation can land in between)."""
    finished: bool = False
    raised: BaseException | None = None

    @property
    def received(self) -> AIMessage | None:
        """The whole reply of a non-streamed call, if the loop received it."""
        return self.message if self.handed_over else None

    @property
    def has_received_usage(self) -> bool:
        if self.streamed:
            return any(chunk.usage_metadata is not None for chunk in self.chunks)
        return self.received is not None and self.received.usage_metadata is not None


class RecordingChatModel(ScriptedChatModel):
    """`ScriptedChatModel` that also records what it delivered for each request, in order, so a
    test knows what a cut-off or cancelled call had received (the in-process `billed` record)."""

    _deliveries: list[Delivery] = PrivateAttr(default_factory=list)

    @property
    def deliveries(self) -> tuple[Delivery, ...]:
        return tuple(self._deliveries)

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        position = len(self._deliveries)
        try:
            message = await super().ainvoke(input, config, stop=stop, **kwargs)
        except BaseException as exc:  # recorded, then re-raised unchanged
            if position < len(self._deliveries) and self._deliveries[position].raised is None:
                self._deliveries[position].raised = exc
            raise
        self._deliveries[position].handed_over = True
        return message

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        delivery = Delivery(streamed=False)
        self._deliveries.append(delivery)
        try:
            result = await super()._agenerate(messages, stop, run_manager, **kwargs)
        except BaseException as exc:  # recorded, then re-raised unchanged
            delivery.raised = exc
            raise
        delivery.message = cast(AIMessage, result.generations[0].message)
        delivery.finished = True
        return result

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        delivery = Delivery(streamed=True)
        self._deliveries.append(delivery)
        try:
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                delivery.chunks.append(cast(AIMessageChunk, chunk.message))
                yield chunk
        except BaseException as exc:  # recorded, then re-raised unchanged
            delivery.raised = exc
            raise
        delivery.finished = True


# -- the tools: numbered calls, some failing, one possibly cancelling the caller --------------


class _ToolBench:
    """The conversation's three tools: `lookup` (one at a time), `fetch` (concurrent) and
    `finish` (ends the turn). Each call yields to the event loop once, like real I/O would."""

    def __init__(self, conversation: Conversation) -> None:
        self._conversation = conversation
        self.started = 0
        self.caller: asyncio.Task[None] | None = None

    def hand_caller(self, caller: asyncio.Task[None]) -> None:
        """The caller's task, for the call that cancels it."""
        self.caller = caller

    def tools(self) -> list[Tool]:
        return [
            Tool("lookup", "Look something up.", _TOOL_PARAMETERS, self._handler("lookup")),
            Tool(
                "fetch", "Fetch a page.", _TOOL_PARAMETERS, self._handler("fetch"), concurrent=True
            ),
            Tool(
                "finish",
                "Give the answer.",
                _TOOL_PARAMETERS,
                self._handler("finish"),
                ends_turn=True,
            ),
        ]

    def _handler(self, name: str) -> Callable[[dict[str, Any]], Awaitable[object]]:
        async def run(arguments: dict[str, Any]) -> object:
            self.started += 1
            number = self.started
            if number == self._conversation.cancel_caller_at_tool_call and self.caller:
                self.caller.cancel()
            await asyncio.sleep(0)
            if number in self._conversation.failing_tool_calls:
                raise RuntimeError(f"{name} call {number} failed, as planned")
            return " ".join([f"{name} says {arguments['q']}"] * int(arguments.get("repeat", 1)))

        return run


# -- running a conversation --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConversationRun:
    """Everything a property needs about one run, recorded from outside the run."""

    conversation: Conversation
    consumed: Consumption
    """What the caller saw and the run left behind, settled within `SETTLE_ITERATIONS`."""
    requests: tuple[ScriptedRequest, ...]
    deliveries: tuple[Delivery, ...]

    @property
    def result(self) -> ExecutionResult | None:
        """`executor.last_result` once the run settled."""
        return self.consumed.last_result


async def run_conversation(conversation: Conversation) -> ConversationRun:
    """Run one conversation through `ActorExecutor` in its mode, with its faults; record it all."""
    model = RecordingChatModel(replies=list(conversation.script))
    bench = _ToolBench(conversation)
    agent = LLMAgent(
        model,
        tools=bench.tools(),
        system_prompt="You are a weather assistant." if conversation.has_system_prompt else None,
        limits=conversation.limits,
        stream_tool_rounds=conversation.stream_tool_rounds,
    )
    stop = conversation.consumer_stop
    consumed = await consume(
        ActorExecutor(agent),
        USER_MESSAGE,
        mode=conversation.mode,
        stop=None if stop is None else Stop(stop.how, at=after_items(stop.after_items)),
        settle_iterations=SETTLE_ITERATIONS,
        cancel_tasks_left=True,
        on_caller=bench.hand_caller,
    )
    return ConversationRun(
        conversation=conversation,
        consumed=consumed,
        requests=model.requests,
        deliveries=model.deliveries,
    )


# -- the expected bill -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExpectedBill:
    """What each request the model received must cost, in order: one record per request (an
    attempt refused before any output is a record too, costing 0)."""

    requests: tuple[ScriptedRequest, ...]
    costs: tuple[TokenUsage, ...]

    @property
    def usages(self) -> tuple[TokenUsage, ...]:
        """The calls' usage, in order: one per request."""
        return self.costs

    @property
    def purposes(self) -> tuple[CallPurpose, ...]:
        return tuple(_purpose(request) for request in self.requests)

    def spent_before(self, position: int) -> TokenUsage:
        """What the requests before `position` (from 0) cost together."""
        return sum(self.costs[:position], TokenUsage())


def expected_bill(run: ConversationRun) -> ExpectedBill:
    """Price every request the model received, from the script and what the model delivered.

    Every request is an attempt, and every attempt a record. A completed call costs what the
    script says (or the words of the request and reply, as the scripted model counts them),
    except that a report of 0 prompt tokens is implausible and the prompt is estimated (flagged);
    a completed call without usage, a stream cut off (even before its first chunk: the request got
    past sending) and a call cancelled in flight cost an estimate of what was sent and received;
    a call refused before any output (a provider error, the script running out) costs 0.
    """
    script = run.conversation.script
    costs = tuple(
        _call_cost(request, delivery, script[position] if position < len(script) else None)
        for position, (request, delivery) in enumerate(
            zip(run.requests, run.deliveries, strict=True)
        )
    )
    return ExpectedBill(requests=run.requests, costs=costs)


def _call_cost(
    request: ScriptedRequest, delivery: Delivery, reply: ScriptedReply | None
) -> TokenUsage:
    if reply is None or reply.error is not None:
        return TokenUsage()
    if delivery.has_received_usage:
        messages = convert_to_openai_messages(list(request.messages))
        prompt = prompt_words(messages) if reply.prompt_tokens is None else reply.prompt_tokens
        return TokenUsage(
            prompt_tokens=prompt or estimate_prompt_tokens(request.messages),
            completion_tokens=(
                completion_words(reply)
                if reply.completion_tokens is None
                else reply.completion_tokens
            ),
            estimated=prompt == 0,
        )
    # From here on the loop never had the provider's figures: an estimate, if the provider did
    # any work (it answered, or streamed something, or the stream was cut, or the call was
    # cancelled after it arrived).
    cut_or_cancelled = isinstance(delivery.raised, ModelConnectionError | asyncio.CancelledError)
    if delivery.finished or delivery.chunks or cut_or_cancelled:
        return estimated_cost(request, delivery)
    return TokenUsage()


def estimated_cost(request: ScriptedRequest, delivery: Delivery) -> TokenUsage:
    """The documented estimate of a call: the request's tokens as OpenAI counts them, and the
    tokens of the text and arguments the loop received (parsed arguments counted in their Python
    form, as the loop holds them; arguments that are not a JSON object, as raw text)."""
    received = _received(delivery)
    completion = count_tokens(received.text)
    for text in received.arguments:
        completion += count_tokens(_arguments_as_counted(text))
    return TokenUsage(
        prompt_tokens=estimate_prompt_tokens(request.messages),
        completion_tokens=completion,
        estimated=True,
    )


def _purpose(request: ScriptedRequest) -> CallPurpose:
    """Rounds are sent with the tools callable; a pruning call is one message (the output to
    condense); a synthesis call is the whole transcript and a last request, with the tools
    declared and calling them forbidden (or none, when no tool was called)."""
    if request.may_call_tools:
        return "round"
    return "pruning" if len(request.messages) == 1 else "synthesis"


@dataclass(frozen=True, slots=True)
class _Received:
    text: str
    arguments: tuple[str, ...]
    """Each tool call's argument text, as received."""


def _received(delivery: Delivery) -> _Received:
    """What the caller had received of the reply: its text, and each tool call's argument text
    (stream fragments joined by their index: the scripted model sends an index on every one)."""
    if not delivery.streamed:
        message = delivery.received
        if message is None:
            return _Received("", ())
        arguments = [json.dumps(call["args"]) for call in message.tool_calls]
        arguments += [call["args"] or "" for call in message.invalid_tool_calls]
        return _Received(message.text, tuple(arguments))
    by_index: dict[int, str] = {}
    for chunk in delivery.chunks:
        for fragment in chunk.tool_call_chunks:
            index = fragment["index"] if fragment["index"] is not None else -1
            by_index[index] = by_index.get(index, "") + (fragment["args"] or "")
    text = "".join(chunk.text for chunk in delivery.chunks)
    return _Received(text, tuple(by_index.values()))


def _arguments_as_counted(text: str) -> str:
    try:
        parsed = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return text
    return str(parsed) if isinstance(parsed, dict) else text


# -- reading transcripts -----------------------------------------------------------------------


def unanswered_tool_calls(messages: Sequence[BaseMessage]) -> list[str]:
    """Problems with the tool calls of a transcript: each call id of an assistant message must be
    answered by exactly one `ToolMessage` right after it, and no `ToolMessage` may answer
    anything else."""
    problems: list[str] = []
    position = 0
    while position < len(messages):
        message = messages[position]
        position += 1
        if isinstance(message, ToolMessage):
            problems.append(f"tool message for {message.tool_call_id} answers no call")
            continue
        if not isinstance(message, AIMessage):
            continue
        asked = [call["id"] for call in message.tool_calls]
        asked += [call["id"] for call in message.invalid_tool_calls]
        answered: list[str] = []
        while position < len(messages) and isinstance(messages[position], ToolMessage):
            answered.append(cast(ToolMessage, messages[position]).tool_call_id)
            position += 1
        if sorted(str(call_id) for call_id in asked) != sorted(answered):
            problems.append(f"calls {asked} answered by {answered}")
    return problems
