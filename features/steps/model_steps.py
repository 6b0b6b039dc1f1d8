"""Steps that give the actor a chat model with particular streaming behaviour (issue 7).

`the actor's model is built with <setting>` makes `agent_steps` build the executor in code
(`support.shaped_models.executor_with_model`), around a `StreamingScriptedChatModel` with that
setting and the scenario's script.
"""

from __future__ import annotations

from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from support.fold_shapes import CallSpec, ReplySpec
from support.shaped_models import ShapedChatModel, StreamingScriptedChatModel

from cleveractors import ActorExecutor, LLMAgent, LoopLimits, demo
from cleveractors.agents.fold import ReplyFold, output_text
from cleveractors.testing.tables import scripted_reply
from cleveractors.tokens import count_tokens, estimate_prompt_tokens

_SETTINGS: dict[str, dict[str, Any]] = {
    "disable_streaming=True": {"disable_streaming": True},
    'disable_streaming="tool_calling"': {"disable_streaming": "tool_calling"},
    "streaming=True": {"streaming": True},
    "a bind_tools refusing tool_choice": {"refuses_tool_choice": True},
}

_THINKING = ReplySpec(
    thinking_pieces=("The user wants ", "the weather; ", "I should call get_weather."),
    signature="EqQBCkgIARABGAIiQL2xsigSIGNATURE==",
    redacted_thinking="EmwKAhgBEgy3va3pzix/LafPsn4a",
    text_pieces=("Let me ", "check."),
    citation=None,
    calls=(CallSpec("toolu_01", "get_weather", ('{"city": ', '"Paris"}')),),
    input_tokens=120,
    output_tokens=45,
    cache_read=0,
    reasoning_tokens=30,
)
_ANSWER = ReplySpec(
    thinking_pieces=("It rains.",),
    signature="EqQBCkgIARABGAIiQANSWER==",
    redacted_thinking=None,
    text_pieces=("Paris: 18 C ", "and light rain."),
    citation=None,
    calls=(),
    input_tokens=190,
    output_tokens=20,
    cache_read=100,
    reasoning_tokens=5,
)


@given("the actor's model is built with {setting}")
def _given_model_setting(context: Context, setting: str) -> None:
    context.model_settings = _SETTINGS[setting]


_NAMED_PROVIDERS: dict[str, str | None] = {
    'provider="anthropic"': "anthropic",
    'provider="openai"': "openai",
    "no provider": None,
}


@given(
    "an agent built in code with the demo tool get_weather, at most 1 tool round and {named}, "
    "around a model traced as {traced} that replies:"
)
def _given_code_agent(context: Context, named: str, traced: str) -> None:
    replies = [scripted_reply(row.as_dict()) for row in context.table]
    model = StreamingScriptedChatModel(replies=replies, provider=traced)
    agent = LLMAgent(
        model,
        tools=[demo.get_weather],
        limits=LoopLimits(max_tool_rounds=1),
        provider=_NAMED_PROVIDERS[named],
    )
    context.executor = ActorExecutor(agent)


@given("the actor's model streams like langchain-anthropic: it thinks, calls get_weather, answers")
def _given_anthropic_shaped(context: Context) -> None:
    model = ShapedChatModel(replies=[_THINKING, _ANSWER], shape="anthropic")
    context.executor = ActorExecutor(LLMAgent(model, tools=[demo.get_weather]))


@given("the actor's model streams like langchain-anthropic and is cut off after {count:d} chunks")
def _given_anthropic_cut_off(context: Context, count: int) -> None:
    model = ShapedChatModel(replies=[_THINKING], shape="anthropic", cut_off_after_chunks=count)
    context.executor = ActorExecutor(LLMAgent(model, tools=[demo.get_weather]))


@then("the cut-off call's completion is the estimate of the thinking and text streamed before it")
def _then_thinking_estimated(context: Context) -> None:
    model: ShapedChatModel = context.model
    assert model.cut_off_after_chunks is not None
    received = model.reply_chunks(1)[: model.cut_off_after_chunks]
    written = "".join(output_text(chunk) for chunk in received)
    assert _THINKING.thinking in written, "the script must stream its thinking before the cut"
    call = context.outcome.result.usage_by_call[-1]
    assert call.usage.estimated, call
    assert call.usage.prompt_tokens == estimate_prompt_tokens(model.requests[-1]), call
    assert call.usage.completion_tokens == count_tokens(written), (call, written)


@then("the model's request 2 carries its first reply exactly as ainvoke returns it")
def _then_reply_as_ainvoke(context: Context) -> None:
    model: ShapedChatModel = context.model
    sent = model.requests[1]
    assert isinstance(sent[-1], ToolMessage), sent[-1]
    reply = sent[-2]
    assert reply == model.provider_reply(1), f"sent {reply!r}\nainvoke {model.provider_reply(1)!r}"


@then("that reply starts with its thinking block and exact signature, then the redacted thinking")
def _then_thinking_first(context: Context) -> None:
    reply = context.model.requests[1][-2]
    assert isinstance(reply, AIMessage)
    thinking, redacted = reply.content[0], reply.content[1]
    assert isinstance(thinking, dict)
    assert isinstance(redacted, dict)
    assert thinking["type"] == "thinking", thinking
    assert thinking["thinking"] == _THINKING.thinking, thinking
    assert thinking["signature"] == _THINKING.signature, thinking
    assert redacted["type"] == "redacted_thinking", redacted
    assert redacted["data"] == _THINKING.redacted_thinking, redacted


_PIECES = {
    "a chunk": lambda: AIMessageChunk(content="Hello"),
    "a whole AIMessage": lambda: AIMessage(content="Hello"),
}


@when("a stream of {pieces} is folded")
def _when_mixed_stream_folded(context: Context, pieces: str) -> None:
    fold = ReplyFold()
    context.fold_error = None
    try:
        for piece in pieces.split(", then "):
            fold.add(_PIECES[piece]())
    except TypeError as exc:
        context.fold_error = exc


@then('folding fails with TypeError "{message}"')
def _then_fold_refused(context: Context, message: str) -> None:
    assert isinstance(context.fold_error, TypeError), context.fold_error
    assert str(context.fold_error) == message, str(context.fold_error)
