"""Steps about streams: the chunks and events a caller saw, tool-call reassembly from fragments,
and the scripted chat model's own streaming.

A fragment sequence is written in one cell: fragments separated by " ; ", each
`index:id:name:arguments` (any part may be empty; the arguments are the rest of the fragment).
Assembled calls are written `id name {"arguments"}`, or `id name !raw text` for a call whose
arguments are not a JSON object.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import typing
from functools import reduce
from operator import add

from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessageChunk
from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk
from support.harness import Consumption, run_guarded

from cleveractors import ActorExecutor
from cleveractors import events as event_module
from cleveractors.agents.fold import ReplyFold, ToolCallAssembler
from cleveractors.agents.stream import ROUND_SEPARATOR
from cleveractors.errors import ScriptExhaustedError
from cleveractors.events import (
    Event,
    RunFailed,
    RunFinished,
    TextDelta,
    UsageRecorded,
    event_adapter,
)
from cleveractors.testing import ScriptedChatModel
from cleveractors.testing.tables import scripted_reply

_WORD = re.compile(r"\s*\S+")
_SNAKE_CASE = re.compile(r"[a-z]+(?:_[a-z]+)*")
_PROMPT = "Hello there, model"


def _fragments(cell: str) -> list[ToolCallChunk]:
    fragments = []
    for written in cell.split(" ; "):
        if written.strip() in ("", "(none)"):
            continue
        index, call_id, name, args = written.split(":", 3)
        fragments.append(
            tool_call_chunk(
                index=int(index) if index else None,
                id=call_id or None,
                name=name or None,
                args=args or None,
            )
        )
    return fragments


def _kinds(events: list[Event]) -> list[str]:
    """Event kinds in order, a run of text deltas counted once."""
    kinds: list[str] = []
    for event in events:
        if not (event.kind == "text_delta" and kinds and kinds[-1] == "text_delta"):
            kinds.append(event.kind)
    return kinds


# -- Then: chunks ------------------------------------------------------------------------------


@then("the stream yielded the text of every reply, word by word")
def _then_word_by_word(context: Context) -> None:
    expected: list[str] = []
    for request, reply in zip(context.model.requests, context.model.replies, strict=False):
        pieces = _WORD.findall(reply.text) if request.streamed else []
        if pieces and expected and context.outcome.mode == "text":
            # execute_stream() sets a later round's text apart; events carry the provider's text
            pieces[0] = ROUND_SEPARATOR + pieces[0]
        expected.extend(pieces)
    assert len(expected) > 2, "the script must give several words to stream"
    assert context.outcome.chunks == expected, f"chunks: {context.outcome.chunks}"


@then('the stream yielded one chunk: "{text}"')
def _then_one_chunk(context: Context, text: str) -> None:
    assert context.outcome.chunks == [text], f"chunks: {context.outcome.chunks}"


@then('the stream yielded the chunks "{first}" and "{second}"')
def _then_two_chunks(context: Context, first: str, second: str) -> None:
    expected = [first, second.replace("\\n", "\n")]
    assert context.outcome.chunks == expected, f"chunks: {context.outcome.chunks}"


@then('the user was never shown "{text}"')
def _then_not_shown(context: Context, text: str) -> None:
    assert context.outcome.chunks, "nothing was streamed"
    assert text not in "".join(context.outcome.chunks), context.outcome.chunks


@then("the blocking and the streamed run report the same tokens and calls")
def _then_same_counts(context: Context) -> None:
    blocking, streamed = context.outcomes
    fields = ("prompt_tokens", "completion_tokens", "llm_calls", "usage_by_call", "text")
    for name in fields:
        assert getattr(blocking.result, name) == getattr(streamed.result, name), name


# -- When: a blocking run watched -------------------------------------------------------------


@when('the actor is asked "{message}" blocking, watching its events')
def _when_blocking_watched(context: Context, message: str) -> None:
    executor = ActorExecutor.from_config(context.actor)
    context.model = executor.agent.model
    seen: list[Event] = []

    async def ask() -> Consumption:
        result = await executor.execute(message, on_event=seen.append)
        chunks = [event.text for event in seen if isinstance(event, TextDelta)]
        return Consumption("blocking", result=result, events=seen, chunks=chunks)

    context.outcome = run_guarded(ask())


# -- Then: events ------------------------------------------------------------------------------


@then("the event kinds are, a run of text deltas counted once:")
def _then_kinds(context: Context) -> None:
    expected = [row["kind"] for row in context.table]
    assert _kinds(context.outcome.events) == expected, _kinds(context.outcome.events)


@then("every event survives a JSON round trip through event_adapter")
def _then_round_trip(context: Context) -> None:
    assert context.outcome.events, "no events"
    for event in context.outcome.events:
        wire = event_adapter.dump_json(event)
        assert json.loads(wire)["kind"] == event.kind
        assert event_adapter.validate_json(wire) == event, wire


@then("the usage_recorded events carry each call and the running total")
def _then_running_total(context: Context) -> None:
    recorded = [e for e in context.outcome.events if isinstance(e, UsageRecorded)]
    assert [event.call for event in recorded] == list(context.outcome.result.usage_by_call)
    running = 0
    for event in recorded:
        running += event.call.usage.total_tokens
        assert event.total.total_tokens == running, event


@then("the last event is run_finished with the run's result")
def _then_run_finished(context: Context) -> None:
    last = context.outcome.events[-1]
    assert isinstance(last, RunFinished), last
    assert last.result == context.outcome.result


@then("the last event is run_failed with the error {error_type} and the usage so far")
def _then_run_failed(context: Context, error_type: str) -> None:
    last = context.outcome.events[-1]
    assert isinstance(last, RunFailed), last
    assert last.error.type == error_type, last.error
    assert last.result == context.outcome.last_result
    assert last.result.llm_calls > 0, last.result
    assert last.result.total_tokens > 0, last.result


@then("the {kind} event for {call_id} carries:")
def _then_event_fields(context: Context, kind: str, call_id: str) -> None:
    matches = [
        event
        for event in context.outcome.events
        if event.kind == kind and getattr(event, "call_id", None) == call_id
    ]
    assert len(matches) == 1, matches
    for row in context.table:
        value = getattr(matches[0], row["field"])
        assert str(value) == row["value"], f"{row['field']}: {value!r}"


@then("the tool_call_finished event for {call_id} reports a duration")
def _then_duration(context: Context, call_id: str) -> None:
    finished = next(
        e for e in context.outcome.events if e.kind == "tool_call_finished" and e.call_id == call_id
    )
    record = next(r for r in context.outcome.result.tool_calls if r.call_id == call_id)
    assert finished.duration_s == record.duration_s > 0, (finished, record)


@then('the synthesis_started event gives the reason "{reason}" before the last round\'s usage')
def _then_synthesis_event(context: Context, reason: str) -> None:
    kinds = [event.kind for event in context.outcome.events]
    position = kinds.index("synthesis_started")
    assert context.outcome.events[position].reason == reason
    assert kinds[position + 1 :].count("usage_recorded") == 1, kinds


# -- the event classes themselves --------------------------------------------------------------


@when("the event classes of cleveractors.events are listed")
def _when_event_classes(context: Context) -> None:
    union = typing.get_args(Event)[0]
    context.event_classes = typing.get_args(union)


@then("each has a snake_case kind, written once, and is exported")
def _then_kinds_unique(context: Context) -> None:
    kinds = [cls.model_fields["kind"].default for cls in context.event_classes]
    assert len(kinds) >= 11, kinds
    assert len(set(kinds)) == len(kinds), kinds
    for kind in kinds:
        assert _SNAKE_CASE.fullmatch(kind), kind
    for cls in context.event_classes:
        assert cls.__name__ in event_module.__all__, cls.__name__
        assert typing.get_args(cls.model_fields["kind"].annotation) == (
            cls.model_fields["kind"].default,
        )


@when("one event stream is iterated twice")
def _when_iterated_twice(context: Context) -> None:
    async def read_twice() -> BaseException | None:
        events = ActorExecutor.from_config(context.actor).execute_events("Hello?")
        async with events:
            aiter(events)
            try:
                aiter(events)
            except RuntimeError as exc:
                return exc
        return None

    context.error = asyncio.run(read_twice())


@then('the second iteration fails with RuntimeError "{text}"')
def _then_second_iteration_fails(context: Context, text: str) -> None:
    assert isinstance(context.error, RuntimeError), context.error
    assert text in str(context.error), str(context.error)


# -- Then: the consumer stopping early ---------------------------------------------------------


@then("no task is left running")
def _then_no_task(context: Context) -> None:
    assert not context.outcome.tasks_left, context.outcome.tasks_left


@then("nothing was logged at ERROR")
def _then_no_error_logged(context: Context) -> None:
    errors = [r.getMessage() for r in context.log_records if r.levelno >= logging.ERROR]
    assert not errors, errors


@then("the consumer's task ended cancelled")
def _then_consumer_cancelled(context: Context) -> None:
    assert isinstance(context.outcome.error, asyncio.CancelledError), context.outcome.error


# -- reassembly of tool-call fragments ---------------------------------------------------------


@given("the tool-call fragments {fragments}")
def _given_fragments(context: Context, fragments: str) -> None:
    context.fragments = _fragments(fragments)


@when("the fragments are assembled")
def _when_assembled(context: Context) -> None:
    assembler = ToolCallAssembler()
    for fragment in context.fragments:
        assembler.add(fragment)
    context.assembled = assembler.calls()


@then("the assembled calls are {calls}")
def _then_assembled(context: Context, calls: str) -> None:
    valid, invalid = context.assembled
    expected_valid, expected_invalid = [], []
    for written in calls.split(" ; "):
        if written.strip() in ("", "(none)"):
            continue
        call_id, name, arguments = written.split(" ", 2)
        if arguments.startswith("!"):
            expected_invalid.append((call_id, name, arguments[1:]))
        else:
            expected_valid.append((call_id, name, json.loads(arguments)))
    assert [(c["id"], c["name"], c["args"]) for c in valid] == expected_valid, valid
    assert [(c["id"], c["name"], c["args"]) for c in invalid] == expected_invalid, invalid


@given("a streamed reply whose text, tool-call fragments and usage arrive over several chunks")
def _given_chunks(context: Context) -> None:
    context.chunks = [
        AIMessageChunk(content="", id="chatcmpl-7"),
        AIMessageChunk(content="Let me"),
        AIMessageChunk(content=" check."),
        AIMessageChunk(
            content="",
            tool_call_chunks=[tool_call_chunk(name="get_weather", args='{"ci', id="w1", index=0)],
        ),
        AIMessageChunk(
            content="", tool_call_chunks=[tool_call_chunk(args='ty": "Oslo"}', index=0)]
        ),
        AIMessageChunk(
            content="",
            usage_metadata={"input_tokens": 12, "output_tokens": 5, "total_tokens": 17},
        ),
        AIMessageChunk(
            content="",
            usage_metadata={"input_tokens": 0, "output_tokens": 2, "total_tokens": 2},
        ),
    ]


@when("the chunks are folded")
def _when_folded(context: Context) -> None:
    fold = ReplyFold()
    context.texts = [fold.add(chunk) for chunk in context.chunks]
    context.folded = fold.message()


@then("the folded message is what adding the chunks with + gives")
def _then_fold_matches_langchain(context: Context) -> None:
    added = reduce(add, context.chunks)
    folded = context.folded
    assert folded.content == added.content
    assert folded.tool_calls == added.tool_calls, folded.tool_calls
    assert folded.usage_metadata == added.usage_metadata, folded.usage_metadata
    assert folded.id == added.id
    assert "".join(context.texts) == added.content


# -- the scripted chat model -------------------------------------------------------------------


@given("a scripted model with the replies:")
def _given_scripted_model(context: Context) -> None:
    replies = [scripted_reply(row.as_dict()) for row in context.table]
    context.model = ScriptedChatModel(replies=replies)


@when("the scripted model is invoked {count:d} time without tools")
@when("the scripted model is invoked {count:d} times without tools")
def _when_invoked(context: Context, count: int) -> None:
    context.replies, context.error = [], None
    for _ in range(count):
        try:
            context.replies.append(context.model.invoke(_PROMPT))
        except ScriptExhaustedError as exc:
            context.error = exc


@when("the scripted model is streamed synchronously, with the tool get_weather bound")
def _when_streamed_sync(context: Context) -> None:
    from cleveractors.demo import get_weather

    bound = context.model.bind_tools([get_weather])
    context.chunks = list(bound.stream("Weather in Paris?"))


@then("the call after the last reply fails with ScriptExhaustedError naming call {number:d}")
def _then_exhausted(context: Context, number: int) -> None:
    assert isinstance(context.error, ScriptExhaustedError), context.error
    assert f"call {number}" in str(context.error), str(context.error)


@then("assert_consumed passes")
def _then_consumed_passes(context: Context) -> None:
    context.model.assert_consumed()
    assert context.model.remaining == 0


@then('assert_consumed fails saying "{text}"')
def _then_consumed_fails(context: Context, text: str) -> None:
    try:
        context.model.assert_consumed()
    except AssertionError as exc:
        message = str(exc)
    else:
        raise AssertionError("assert_consumed passed with replies left")
    assert text in message, message


@then("the replies were {texts}")
def _then_reply_texts(context: Context, texts: str) -> None:
    assert [reply.text for reply in context.replies] == texts.split(" ; ")


@then("each reply reports the words of the request and of the reply as its usage")
def _then_word_usage(context: Context) -> None:
    for reply in context.replies:
        usage = reply.usage_metadata
        assert usage["input_tokens"] == len(_PROMPT.split())
        assert usage["output_tokens"] == len(reply.text.split())


@then("the chunks carry the text word by word, then each call's fragments, then the usage")
def _then_chunk_shape(context: Context) -> None:
    chunks = context.chunks
    texts = [chunk.content for chunk in chunks if chunk.content]
    assert texts == _WORD.findall(context.model.replies[0].text), texts
    fragments = [fragment for chunk in chunks for fragment in chunk.tool_call_chunks]
    assert len(fragments) > 1, "the arguments should be split across fragments"
    assert fragments[0]["id"] == "call_1_0", fragments[0]
    assert fragments[0]["name"] == "get_weather", fragments[0]
    assert all(f["id"] is None and f["name"] is None for f in fragments[1:]), fragments
    assert "".join(f["args"] for f in fragments) == '{"city": "Paris"}'
    assert chunks[-1].usage_metadata is not None
    assert all(chunk.usage_metadata is None for chunk in chunks[:-1])
    assert context.model.requests[0].tool_names == ("get_weather",)
    assert context.model.requests[0].streamed
