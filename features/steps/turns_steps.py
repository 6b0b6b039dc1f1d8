"""Steps for the one turn type and its one path (`cleveractors.turns`)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from cleveractors import ActorExecutor, LLMAgent, NewMessage, Resumption, errors
from cleveractors._pause import MemoryPauses
from cleveractors.agents import Agent
from cleveractors.approvals import CheckedDecisions, PausedRun, PendingApproval
from cleveractors.events import TextDelta
from cleveractors.result import ExecutionResult, RunOutcome
from cleveractors.testing import ScriptedChatModel, ScriptedReply

# -- Given ------------------------------------------------------------------------------------


@given('an executor without a store whose model answers "{text}" twice')
def _given_executor(context: Context, text: str) -> None:
    replies = [ScriptedReply(text=text, prompt_tokens=7, completion_tokens=3)] * 2
    context.executor = ActorExecutor(LLMAgent(ScriptedChatModel(replies=replies)))


class _EchoAgent(Agent):
    """An agent of one's own: only `run()`, the one abstract method."""

    name = "echo"

    async def run(
        self, start: str | CheckedDecisions, *, history: Any, sink: Any, **_options: Any
    ) -> RunOutcome:
        assert isinstance(start, str), start
        text = f"echo: {start}"
        sink(TextDelta(round=1, text=text))
        return RunOutcome(ExecutionResult(text=text, answer=text, run_id=_options.get("run_id")))


@given("an agent of my own that implements only run(), echoing the message")
def _given_echo(context: Context) -> None:
    context.agent = _EchoAgent()


# -- When -------------------------------------------------------------------------------------


@when(
    'it is asked "{message}" through process_message, stream_message, and an executor\'s '
    "execute and execute_stream"
)
def _when_echo_everywhere(context: Context, message: str) -> None:
    agent: Agent = context.agent
    executor = ActorExecutor(agent)

    async def ask() -> list[str]:
        blocking = await agent.process_message(message)
        async with agent.stream_message(message) as events:
            streamed = "".join([e.text async for e in events if isinstance(e, TextDelta)])
        executed = await executor.execute(message)
        chunks = [chunk async for chunk in executor.execute_stream(message)]
        return [blocking.text, streamed, executed.text, "".join(chunks)]

    context.answers = asyncio.run(ask())


@when('it is given "{message}" as a str, then as a NewMessage, in {mode} mode')
def _when_given_both(context: Context, message: str, mode: str) -> None:
    executor: ActorExecutor = context.executor

    async def run(turn: str | NewMessage) -> tuple[Any, list[Any], str]:
        events: list[Any] = []
        if mode == "blocking":
            result = await executor.execute(turn, on_event=events.append)
            return result, events, result.text
        if mode == "text":
            chunks = [chunk async for chunk in executor.execute_stream(turn)]
            return executor.last_result, events, "".join(chunks)
        events = [event async for event in executor.execute_events(turn)]
        return executor.last_result, events, executor.last_result.text  # type: ignore[union-attr]

    async def both() -> list[tuple[Any, list[Any], str]]:
        return [await run(message), await run(NewMessage(message))]

    context.both_runs = asyncio.run(both())


@when("an executor is given the number 42 through {entry_point}")
def _when_wrong_type(context: Context, entry_point: str) -> None:
    executor = ActorExecutor(LLMAgent(ScriptedChatModel(replies=[])))
    call = getattr(executor, entry_point)
    context.error = None
    try:
        opened = call(42)
        if asyncio.iscoroutine(opened):
            asyncio.run(opened)
    except errors.CleverActorsError as exc:
        context.error = exc


@when('an executor is given a NewMessage "{message}" with session_id "{session_id}" as a keyword')
def _when_options_with_turn(context: Context, message: str, session_id: str) -> None:
    executor = ActorExecutor(LLMAgent(ScriptedChatModel(replies=[])))
    context.error = None
    try:
        executor.execute_events(NewMessage(message), session_id=session_id)
    except errors.CleverActorsError as exc:
        context.error = exc


@when('a Resumption of "{run_id}" is made with the decision {decision}')
def _when_bad_resumption(context: Context, run_id: str, decision: str) -> None:
    context.error = None
    try:
        Resumption(run_id, [json.loads(decision)])
    except errors.CleverActorsError as exc:
        context.error = exc


@when('a Resumption of "{run_id}" is made with the decisions {decisions}')
def _when_decisions_not_a_list(context: Context, run_id: str, decisions: str) -> None:
    context.error = None
    try:
        Resumption(run_id, json.loads(decisions))
    except errors.CleverActorsError as exc:
        context.error = exc


@when('a NewMessage "{message}" is made with a history and the session "{session_id}"')
def _when_bad_message(context: Context, message: str, session_id: str) -> None:
    context.error = None
    try:
        NewMessage(message, [{"role": "user", "content": "earlier"}], session_id=session_id)
    except errors.CleverActorsError as exc:
        context.error = exc


@when("the shop's pending calls have expired")
def _when_expired(context: Context) -> None:
    expires_at = max(call.expires_at for call in context.shop.last.pending_approvals)
    wait_s = (expires_at - datetime.now(UTC)).total_seconds()
    # Waiting on the clock itself: the condition is that the expiry time has passed.
    context.shop_loop.run_until_complete(asyncio.sleep(max(wait_s, 0) + 0.01))


@when("the first paused segment is resumed with an approval of r1, and the model fails")
def _when_resumed_into_failure(context: Context) -> None:
    shop = context.shop
    executor = shop.executor()
    paused = shop.paused_segment("first")
    resumption = Resumption(paused.run_id, [{"call_id": "r1", "decision": "approve"}])
    context.error = None
    try:
        context.shop_loop.run_until_complete(executor.execute(resumption))
    except Exception as exc:  # the model's own error, unchanged
        context.error = exc
    context.failed_result = executor.last_result


@when("a book of paused runs is kept {expired:d} pauses that expired and {waiting:d} that waits")
def _when_book(context: Context, expired: int, waiting: int) -> None:
    book = MemoryPauses()
    now = datetime.now(UTC)
    for number in range(expired):
        book.keep(_paused(f"expired-{number}", now - timedelta(seconds=1)))
    for number in range(waiting):
        book.keep(_paused(f"waiting-{number}", now + timedelta(hours=1)))
    context.book = book


@when("the book is kept {before:d} pauses that are resumed before they expire, and {after:d} after")
def _when_book_resumed(context: Context, before: int, after: int) -> None:
    book: MemoryPauses = context.book
    now = datetime.now(UTC)
    for number in range(before):
        book.keep(_paused(f"resumed-{number}", now + timedelta(hours=1)))
        book.take(f"resumed-{number}", resumed_in=f"segment-{number}")
    for number in range(after):  # resumed once its time was up, before anything swept it
        book.keep(_paused(f"late-{number}", now - timedelta(seconds=1)))
        book.take(f"late-{number}", resumed_in=f"late-segment-{number}")


def _paused(run_id: str, expires_at: datetime) -> PausedRun:
    pending = PendingApproval(
        call_id="c1",
        name="refund",
        arguments={},
        digest="d",
        requested_at=expires_at - timedelta(seconds=1),
        expires_at=expires_at,
    )
    return PausedRun(
        run_id=run_id,
        messages=(HumanMessage("refund"),),
        turn_start=0,
        user_message="refund",
        round=1,
        tool_rounds=1,
        batch=(),
        pending=(pending,),
    )


# -- Then -------------------------------------------------------------------------------------


@then('both runs answered "{text}" with the same events and the same usage')
def _then_same_runs(context: Context, text: str) -> None:
    (first, first_events, first_text), (second, second_events, second_text) = context.both_runs
    assert first_text == second_text == text, (first_text, second_text)
    assert first.status == second.status == "answered", (first, second)
    assert first.usage == second.usage, (first.usage, second.usage)
    assert first.run_id != second.run_id, "each turn is its own run"

    def shape(events: list[Any]) -> list[Any]:
        return [event.model_dump(exclude={"run_id", "result"}) for event in events]

    assert shape(first_events) == shape(second_events), (first_events, second_events)


@then('it fails with {kind} naming "{words}"')
def _then_fails(context: Context, kind: str, words: str) -> None:
    error = context.error
    assert error is not None, "nothing failed"
    assert type(error).__name__ == kind, (type(error).__name__, error)
    assert words in str(error), str(error)


@then('each answered "{text}"')
def _then_each(context: Context, text: str) -> None:
    assert context.answers == [text] * 4, context.answers


@then("the shop's executor keeps {count:d} paused {noun}")
def _then_kept(context: Context, count: int, noun: str) -> None:
    assert len(context.shop.executor()._pauses) == count


@then('reading the shop\'s paused run fails with {kind} naming "{words}"')
def _then_read_fails(context: Context, kind: str, words: str) -> None:
    paused = context.shop.last
    try:
        context.shop_loop.run_until_complete(context.shop.executor().paused_run(paused.run_id))
    except errors.ApprovalError as exc:
        context.error = exc
    else:
        raise AssertionError("the paused run was still there")
    _then_fails(context, kind, words)


@then("the book holds {count:d} paused run")
def _then_book_holds(context: Context, count: int) -> None:
    assert len(context.book) == count, len(context.book)


@then("the book remembers at most {count:d} ended pauses, and its expiry queue stays short")
def _then_book_bounded(context: Context, count: int) -> None:
    book: MemoryPauses = context.book
    assert count == book.MAX_REMEMBERED_ENDINGS
    assert len(book._ended) == count, len(book._ended)
    assert len(book._expiries) <= 2 * len(book) + 64, len(book._expiries)


@then("a pause resumed before it expired is refused with ApprovalConflictError")
def _then_book_resumed(context: Context) -> None:
    refused: errors.ApprovalError | None = None
    try:
        context.book.find("resumed-299", None)
    except errors.ApprovalConflictError as exc:
        refused = exc
    assert refused is not None, "a resumed pause was found"
    assert not isinstance(refused, errors.ApprovalExpiredError), refused
    assert "already resumed (by run segment-299)" in str(refused), refused


@then("a pause that expired is refused with ApprovalExpiredError, the waiting one is found")
def _then_book_answers(context: Context) -> None:
    book: MemoryPauses = context.book
    refused: errors.ApprovalError | None = None
    try:
        book.find("expired-11999", None)
    except errors.ApprovalExpiredError as exc:
        refused = exc
    assert refused is not None, "an expired pause was found"
    assert "expired at" in str(refused), refused
    assert book.find("waiting-0", None).run_id == "waiting-0"


@then('the resumed segment failed with "{words}", its tools having run')
def _then_resumed_failed(context: Context, words: str) -> None:
    result = context.failed_result
    assert context.error is not None, "the resumed segment did not fail"
    assert words in str(context.error), context.error
    assert result is not None, "no result"
    assert result.status == "failed", result
    assert result.resumed_from == context.shop.paused_segment("first").run_id, result
    assert [name for name, _ in context.shop.ran] == ["lookup", "refund"], context.shop.ran


@then('the shop\'s session history is "{message}", then the calls {call_ids} with their results')
def _then_history_kept(context: Context, message: str, call_ids: str) -> None:
    shop = context.shop
    store = shop.executor().store
    turns = context.shop_loop.run_until_complete(store.history(shop.session_id))
    messages = [message for turn in turns for message in turn.messages]
    assert isinstance(messages[0], HumanMessage), messages
    assert messages[0].content == message, messages
    assert isinstance(messages[1], AIMessage), messages
    ids = call_ids.split(", ")
    assert [call["id"] for call in messages[1].tool_calls] == ids, messages[1]
    answers = messages[2:]
    assert all(isinstance(answer, ToolMessage) for answer in answers), answers
    assert [answer.tool_call_id for answer in answers] == ids, answers
    assert "refunded 30 on A1" in str(answers[-1].content), answers[-1]
