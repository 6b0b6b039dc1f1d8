"""Steps about tool calls that wait for a person: pausing, deciding, resuming (issue 18).

The world is a shop (`support.approvals.Shop`): `lookup` needs no approval, `refund` and
`send_mail` do (declared on the tools, named in `LLMAgent(approval=...)`, or judged by a
policy); each tool counts its calls. Every step of a scenario runs on one event loop, so the
executors' stores stay open between steps.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tempfile
import threading
from collections.abc import Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from behave import given, then, when
from behave.runner import Context
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from support.approvals import HOLD_LIMIT_S, ResumeTarget, Shop, decision_of
from support.harness import NAMED_POSITIONS, Stop, consume

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent, Resumption, demo, errors
from cleveractors.events import Event, RunPaused
from cleveractors.testing import (
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
    ScriptedChatModel,
    ScriptedOpenAIServer,
)
from cleveractors.testing.tables import scripted_reply

T = TypeVar("T")


# -- the world --------------------------------------------------------------------------------


def _shop(context: Context) -> Shop:
    shop: Shop | None = getattr(context, "shop", None)
    if shop is None:
        shop = context.shop = Shop()
        loop = asyncio.new_event_loop()
        context.shop_loop = loop

        def close() -> None:
            loop.run_until_complete(shop.close())
            loop.close()

        context.add_cleanup(close)
    return shop


def _on_loop(context: Context, work: Coroutine[Any, Any, T]) -> T:
    _shop(context)
    loop: asyncio.AbstractEventLoop = context.shop_loop
    return loop.run_until_complete(work)


async def _segment(shop: Shop, executor: ActorExecutor, mode: str, run: Any) -> None:
    """Run one segment (`run(on_event)` blocking, or an event stream), keeping its result and
    events, or the error that refused it."""
    events: list[Event] = []
    try:
        if mode == "blocking":
            result: ExecutionResult = await run(events.append)
        elif mode == "text":
            shop.chunks.append([chunk async for chunk in run(None)])
            assert executor.last_result is not None
            result = executor.last_result
        else:
            async for event in run(None):
                events.append(event)
            assert executor.last_result is not None
            result = executor.last_result
    except errors.CleverActorsError as exc:
        shop.error = exc
        shop.events.append(events)
        return
    shop.events.append(events)
    if result.error is not None and result.error.type.startswith("Approval"):
        shop.error = _refusal_of(result)
        return
    if result.error is not None and result.error.type in (
        "InvalidDecisionError",
        "RunNotFoundError",
    ):
        shop.error = _refusal_of(result)
        return
    shop.results.append(result)


def _refusal_of(result: ExecutionResult) -> errors.ApprovalError:
    """A streamed refusal (`RunFailed`) as the error `resume()` would have raised."""
    assert result.error is not None
    kind = getattr(errors, result.error.type)
    refused: errors.ApprovalError = kind(result.error.message, run_id=result.run_id)
    return refused


def _message_run(shop: Shop, executor: ActorExecutor, message: str, mode: str) -> Any:
    session = shop.session_id
    if mode == "blocking":
        return lambda on_event: executor.execute(message, session_id=session, on_event=on_event)
    if mode == "text":
        return lambda _: executor.execute_stream(message, session_id=session)
    return lambda _: executor.execute_events(message, session_id=session)


def _resume_run(executor: ActorExecutor, run_id: str, decisions: Any, mode: str) -> Any:
    if mode == "blocking":
        return lambda on_event: executor.execute(Resumption(run_id, decisions), on_event=on_event)
    if mode == "text":
        return lambda _: executor.execute_stream(Resumption(run_id, decisions))
    return lambda _: executor.execute_events(Resumption(run_id, decisions))


def _decisions(context: Context, paused: ExecutionResult) -> list[dict[str, Any]]:
    return [decision_of(row.as_dict(), paused) for row in context.table]


# -- Given ------------------------------------------------------------------------------------


@given("a shop whose model replies")
def _given_shop(context: Context) -> None:
    _shop(context).replies = [scripted_reply(row.as_dict()) for row in context.table]


@given("the shop gates its calls by {gating}")
def _given_gating(context: Context, gating: str) -> None:
    _shop(context).gating = gating


@given("the shop keeps its runs in {where}")
def _given_store(context: Context, where: str) -> None:
    shop = _shop(context)
    shop.session_id = "shop-session"
    if where == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-approvals-"))
        shop.store_url = f"sqlite:///{folder / 'store.db'}"
    elif where == "postgresql":
        shop.store_url = str(context.postgres.new_database())
    else:
        assert where == "memory", where
        shop.session_id = None


@given("the shop's approvals expire after {seconds:g} seconds")
def _given_timeout(context: Context, seconds: float) -> None:
    _shop(context).timeout_s = seconds


@given("the shop also has the MCP test server, its approval {rule}")
def _given_mcp(context: Context, rule: str) -> None:
    _shop(context).mcp_approval = "required" if rule == "required" else tuple(json.loads(rule))


# -- When -------------------------------------------------------------------------------------


@when('the shop is asked "{message}" in {mode} mode')
def _when_asked(context: Context, message: str, mode: str) -> None:
    shop = _shop(context)
    executor = _on_loop(context, _opened(shop))
    _on_loop(context, _segment(shop, executor, mode, _message_run(shop, executor, message, mode)))


@when('the shop is asked "{message}" where nobody can approve, in {mode} mode')
def _when_asked_unpausable(context: Context, message: str, mode: str) -> None:
    shop = _shop(context)
    executor = _on_loop(context, _opened(shop))

    def run(on_event: Any) -> Any:
        if mode == "blocking":
            return executor.execute(message, can_pause=False, on_event=on_event)
        return executor.execute_events(message, can_pause=False)

    _on_loop(context, _segment(shop, executor, mode, run))


async def _opened(shop: Shop) -> ActorExecutor:
    executor = shop.executor()
    if executor.store is not None:
        await executor.store.open()
    return executor


@when("the {which} paused segment is resumed in {mode} mode with")
def _when_resumed(context: Context, which: str, mode: str) -> None:
    shop = _shop(context)
    paused = shop.paused_segment(which)
    executor = shop.executor()
    run = _resume_run(executor, paused.run_id, _decisions(context, paused), mode)
    shop.error = None
    _on_loop(context, _segment(shop, executor, mode, run))


@when("the latest paused segment is resumed in {mode} mode with no decision")
def _when_resumed_empty(context: Context, mode: str) -> None:
    shop = _shop(context)
    paused = shop.paused_segment("latest")
    executor = shop.executor()
    shop.error = None
    _on_loop(
        context, _segment(shop, executor, mode, _resume_run(executor, paused.run_id, [], mode))
    )


@when("the shop waits {seconds:g} seconds")
def _when_waits(context: Context, seconds: float) -> None:
    _on_loop(context, asyncio.sleep(seconds))


@when('the caller "{caller}" resumes the latest paused segment with')
def _when_other_caller(context: Context, caller: str) -> None:
    shop = _shop(context)
    paused = shop.paused_segment("latest")
    executor = shop.executor()
    decisions = _decisions(context, paused)
    shop.error = None

    def run(on_event: Any) -> Any:
        return executor.execute(Resumption(paused.run_id, decisions, caller), on_event=on_event)

    _on_loop(context, _segment(shop, executor, "blocking", run))


@when("another executor on the same database resumes the latest paused segment with")
def _when_other_worker(context: Context) -> None:
    shop = _shop(context)
    paused = shop.paused_segment("latest")
    for executor in shop.executors:
        _on_loop(context, executor.aclose())
    shop.executors.clear()
    executor = shop.executor()  # a fresh store and agent, as after a restart
    run = _resume_run(executor, paused.run_id, _decisions(context, paused), "blocking")
    _on_loop(context, _segment(shop, executor, "blocking", run))


@when("two executors on the same database resume the latest paused segment at once with")
def _when_two_workers(context: Context) -> None:
    shop = _shop(context)
    paused = shop.paused_segment("latest")
    decisions = _decisions(context, paused)
    workers = [shop.executor(), shop.another_executor()]
    shop.executors.append(workers[1])

    async def race() -> list[BaseException | ExecutionResult]:
        for worker in workers:
            assert worker.store is not None
            await worker.store.open()
        return list(
            await asyncio.gather(
                *(worker.execute(Resumption(paused.run_id, decisions)) for worker in workers),
                return_exceptions=True,
            )
        )

    context.race = _on_loop(context, race())
    shop.results.extend(r for r in context.race if isinstance(r, ExecutionResult))


@when(
    "two executors resume the latest paused segment, the second reading the pause just before "
    "the first claims it, with"
)
def _when_interleaved_workers(context: Context) -> None:
    """Worker B reads the pause while it still waits; worker A then claims it and runs the slow
    refund, holding the session; only then does B go on (to take the session)."""
    shop = _shop(context)
    paused = shop.paused_segment("latest")
    decisions = _decisions(context, paused)
    shop.refund_released = threading.Event()
    first, second = shop.executor(), shop.another_executor()
    shop.executors.append(second)
    assert second.store is not None
    read = second.store.paused_run

    has_read = asyncio.Event()

    async def read_then_wait(run_id: str, *, caller: str | None = None) -> Any:
        pause = await read(run_id, caller=caller)
        has_read.set()
        # until A has claimed it and holds the session (the refund runs in a worker thread)
        await asyncio.to_thread(shop.refund_started.wait, HOLD_LIMIT_S)
        return pause

    second.store.paused_run = read_then_wait  # type: ignore[method-assign]  # the interleaving

    async def race() -> list[BaseException | ExecutionResult]:
        later = asyncio.ensure_future(second.execute(Resumption(paused.run_id, decisions)))
        await asyncio.wait_for(has_read.wait(), timeout=HOLD_LIMIT_S)
        sooner = asyncio.ensure_future(first.execute(Resumption(paused.run_id, decisions)))
        lost = await asyncio.gather(later, return_exceptions=True)
        assert shop.refund_released is not None
        shop.refund_released.set()
        return [*(await asyncio.gather(sooner, return_exceptions=True)), *lost]

    context.race = _on_loop(context, race())
    shop.results.extend(r for r in context.race if isinstance(r, ExecutionResult))


@when('a new message "{message}" is sent on the shop\'s session in {mode} mode')
def _when_new_message(context: Context, message: str, mode: str) -> None:
    _when_asked(context, message, mode)


@when("the resumed segment is stopped by {style} at {position}")
def _when_stopped(context: Context, style: str, position: str) -> None:
    shop = _shop(context)
    paused = shop.paused_segment("latest")
    decisions = _decisions(context, paused)
    executor = shop.executor()
    target = ResumeTarget(executor, paused.run_id, tuple(_as_models(decisions)))
    where = _DECIDED if position == "decided" else NAMED_POSITIONS[position]
    stop = Stop(style, at=where)  # type: ignore[arg-type]  # the style comes from the table
    context.consumed = _on_loop(context, consume(target, "", mode="events", stop=stop))
    assert executor.last_result is not None, "the stopped segment left no result"
    shop.results.append(executor.last_result)


def _DECIDED(items: Sequence[Any]) -> bool:
    """Right after the resumed segment's first `tool_call_decided` event."""
    return bool(items) and getattr(items[-1], "kind", None) == "tool_call_decided"


def _as_models(decisions: list[dict[str, Any]]) -> list[Any]:
    from cleveractors.approvals import ApprovalDecision

    return [ApprovalDecision.model_validate(decision) for decision in decisions]


# -- Then: the pause --------------------------------------------------------------------------


@then("the shop's run is {status}")
def _then_status(context: Context, status: str) -> None:
    shop = _shop(context)
    assert shop.error is None, f"refused: {shop.error!r}"
    assert shop.last.status == status, (shop.last.status, shop.last.error)


@then('the shop\'s run waits for "{call_ids}"')
def _then_pending(context: Context, call_ids: str) -> None:
    result = _shop(context).last
    pending = [(call.call_id, call.name) for call in result.pending_approvals]
    assert [call_id for call_id, _ in pending] == call_ids.split(", "), pending
    for call in result.pending_approvals:
        assert call.expires_at > call.requested_at, call


@then('the segment\'s approval events are "{kinds}"')
def _then_events(context: Context, kinds: str) -> None:
    """Events of the approval kinds, each with its call id; `run_paused` / `run_finished` only
    in events mode (a blocking caller gets the result instead of the terminal event)."""
    shop = _shop(context)
    expected = kinds.split(", ")
    blocking = not any(e.kind in ("run_paused", "run_finished") for e in shop.events[-1])
    if blocking:
        expected = [kind for kind in expected if kind not in ("run_paused", "run_finished")]
    seen = [_shown(event) for event in shop.events[-1] if _shown(event) is not None]
    assert seen == expected, seen


def _shown(event: Event) -> str | None:
    if event.kind in ("tool_approval_requested", "tool_call_decided"):
        decision = getattr(event, "decision", None)
        suffix = f" {decision}" if decision else ""
        return f"{event.kind} {event.call_id}{suffix}"
    if event.kind == "run_started":
        resumed = event.resumed_from
        return "run_started resumed" if resumed else "run_started"
    if event.kind in ("run_paused", "run_finished", "run_failed"):
        return event.kind
    return None


@then("the paused event's result is the paused result")
def _then_paused_event(context: Context) -> None:
    shop = _shop(context)
    terminal = shop.events[-1][-1]
    if isinstance(terminal, RunPaused):
        assert terminal.result == shop.last, (terminal.result, shop.last)
    else:  # blocking: the result came back instead
        assert shop.last.status == "paused"


@then('the tools ran "{calls}"')
def _then_ran(context: Context, calls: str) -> None:
    shop = _shop(context)
    ran = [f"{name} {json.dumps(arguments, sort_keys=True)}" for name, arguments in shop.ran]
    expected = [] if calls == "nothing" else calls.split(" ; ")
    assert ran == expected, ran


@then('the tools ran at most "{calls}"')
def _then_ran_at_most(context: Context, calls: str) -> None:
    shop = _shop(context)
    ran = [f"{name} {json.dumps(arguments, sort_keys=True)}" for name, arguments in shop.ran]
    expected = calls.split(" ; ")
    assert ran == expected[: len(ran)], ran


@then('the text streamed was "{first}", then "{second}"')
def _then_text_chunks(context: Context, first: str, second: str) -> None:
    chunks = _shop(context).chunks
    shown = [" ".join(chunk.strip() for chunk in segment) for segment in chunks]
    assert shown == [first.replace("nothing", ""), second], shown


@then("the shop's model was asked {count:d} times")
def _then_asked(context: Context, count: int) -> None:
    model = _shop(context).model
    assert model is not None
    assert len(model.requests) == count, [len(r.messages) for r in model.requests]


# -- Then: what the model reads ---------------------------------------------------------------


@then("the model's last request ends with these tool results")
def _then_tool_results(context: Context) -> None:
    """One request, the batch's reply then each call's result in the model's order: `call`,
    `status` (success or error) and words the content `says` (a `|`-separated list)."""
    model = _shop(context).model
    assert model is not None
    messages = model.requests[-1].messages
    rows = list(context.table)
    tail = messages[-len(rows) :]
    before = messages[-len(rows) - 1]
    assert isinstance(before, AIMessage), before
    assert before.tool_calls, before
    assert [call["id"] for call in before.tool_calls] == [row["call"] for row in rows]
    for message, row in zip(tail, rows, strict=True):
        assert isinstance(message, ToolMessage), message
        assert message.tool_call_id == row["call"], (message.tool_call_id, row["call"])
        assert message.status == row["status"], (message.status, message.content)
        for words in row["says"].split(" | "):
            assert words in str(message.content), (words, message.content)


@then("the model's last request holds the declined calls, then the new message")
def _then_superseded_request(context: Context) -> None:
    model = _shop(context).model
    assert model is not None
    messages = model.requests[-1].messages
    assert isinstance(messages[-1], HumanMessage), messages[-1]
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    replies = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    asked = [call["id"] for reply in replies for call in reply.tool_calls]
    assert [m.tool_call_id for m in answers] == asked, (asked, answers)
    index = {id(m): i for i, m in enumerate(messages)}
    for reply in replies:
        after = messages[index[id(reply)] + 1 : index[id(reply)] + 1 + len(reply.tool_calls)]
        assert [m.tool_call_id for m in after] == [c["id"] for c in reply.tool_calls], after
    declined = [m for m in answers if m.status == "error"]
    assert declined, answers
    assert all("new message" in str(m.content) for m in declined), declined


# -- Then: refusals ---------------------------------------------------------------------------


@then('resuming is refused with {kind} naming "{words}"')
def _then_refused(context: Context, kind: str, words: str) -> None:
    error = _shop(context).error
    assert error is not None, "the resumption was not refused"
    assert type(error).__name__ == kind, (type(error).__name__, error)
    assert isinstance(error, errors.ExecutionError)
    assert words in str(error), str(error)


@then("nothing of the refused resumption ran or was billed")
def _then_refusal_harmless(context: Context) -> None:
    shop = _shop(context)
    events = shop.events[-1]
    assert not any(e.kind in ("tool_call_started", "usage_recorded") for e in events), events


# -- Then: bills ------------------------------------------------------------------------------


@then("each segment billed exactly its own model calls, none twice")
def _then_billed(context: Context) -> None:
    """The script's usage, reply by reply, is split over the segments in order: every reply
    billed once, in the segment that asked for it."""
    shop = _shop(context)
    scripted = [(reply.prompt_tokens, reply.completion_tokens) for reply in shop.replies]
    billed = [
        (call.usage.prompt_tokens, call.usage.completion_tokens)
        for result in shop.results
        for call in result.usage_by_call
    ]
    assert billed == scripted[: len(billed)], (billed, scripted)
    asked = shop.model.requests if shop.model is not None else ()
    assert len(billed) == len(asked), (billed, len(asked))
    for result in shop.results:
        assert result.prompt_tokens == sum(c.usage.prompt_tokens for c in result.usage_by_call)


@then("each segment after the first resumed the one before it")
def _then_linked(context: Context) -> None:
    results = _shop(context).results
    assert results[0].resumed_from is None
    for earlier, later in itertools.pairwise(results):
        assert later.resumed_from == earlier.run_id, (later.resumed_from, earlier.run_id)
        assert later.run_id != earlier.run_id


@then("the store's ledger holds each segment's calls under its own run id")
def _then_ledger(context: Context) -> None:
    shop = _shop(context)
    store = shop.executor().store
    assert store is not None
    report = _on_loop(context, store.usage(session_id=shop.session_id))
    by_run: dict[str, list[tuple[int, int]]] = {}
    for row in report.rows:
        by_run.setdefault(row.run_id, []).append((row.prompt_tokens, row.completion_tokens))
    expected = {
        result.run_id: [
            (c.usage.prompt_tokens, c.usage.completion_tokens) for c in result.usage_by_call
        ]
        for result in shop.results
        if result.usage_by_call
    }
    assert by_run == expected, (by_run, expected)


@then("the store's run rows say {statuses}")
def _then_run_rows(context: Context, statuses: str) -> None:
    from sqlalchemy import select

    from cleveractors.store.schema import runs

    shop = _shop(context)
    store = shop.executor().store
    assert store is not None

    async def read() -> dict[str, str]:
        async with store.engine.connect() as connection:
            rows = await connection.execute(select(runs.c.run_id, runs.c.status))
            return {row.run_id: row.status for row in rows}

    by_run = _on_loop(context, read())
    assert [by_run[result.run_id] for result in shop.results] == statuses.split(", "), by_run


# -- Then: the audit --------------------------------------------------------------------------


@then("the audit of the shop's session lists")
def _then_audit(context: Context) -> None:
    """The audit rows, oldest first: `segment` (1 is the first paused one), `call`,
    `decision`, `resumed in` (the segment that carried it out, or `-`), `reason`, `edited`."""
    shop = _shop(context)
    store = shop.executor().store
    assert store is not None
    records = _on_loop(context, store.approvals(session_id=shop.session_id))
    number = {result.run_id: str(index) for index, result in enumerate(shop.results, start=1)}
    seen = [
        {
            "segment": number.get(record.run_id, record.run_id),
            "call": record.call_id,
            "decision": record.decision,
            "resumed in": number.get(record.resumed_in or "", "-"),
            "reason": record.reason or "",
            "edited": ""
            if record.edited_arguments is None
            else json.dumps(record.edited_arguments, sort_keys=True),
        }
        for record in records
    ]
    expected = [
        {key: row.as_dict().get(key, "") for key in (seen[0] if seen else {})}
        for row in context.table
    ]
    assert seen == expected, seen
    now = datetime.now(UTC)
    for record in records:
        assert record.decided_at <= now, record
        assert record.decided_by is None, record  # the executor has no callers


@then("the audit by run id lists {count:d} decisions for the first paused segment")
def _then_audit_by_run(context: Context, count: int) -> None:
    shop = _shop(context)
    store = shop.executor().store
    assert store is not None
    first = shop.paused_segment("first")
    records = _on_loop(context, store.approvals(run_id=first.run_id))
    assert len(records) == count, records
    assert {record.run_id for record in records} == {first.run_id}


# -- Then: stores and workers -----------------------------------------------------------------


@then("exactly one executor resumed it, the other was refused with ApprovalConflictError")
def _then_one_wins(context: Context) -> None:
    race: list[Any] = context.race
    won = [r for r in race if isinstance(r, ExecutionResult)]
    lost = [r for r in race if isinstance(r, BaseException)]
    assert len(won) == 1, race
    assert len(lost) == 1, race
    assert isinstance(lost[0], errors.ApprovalConflictError), repr(lost[0])
    assert won[0].status == "answered", won[0]


@then('the shop\'s session history is a valid transcript ending with "{text}"')
def _then_history(context: Context, text: str) -> None:
    shop = _shop(context)
    store = shop.executor().store
    assert store is not None
    assert shop.session_id is not None
    turns = _on_loop(context, store.history(shop.session_id))
    messages = [message for turn in turns for message in turn.messages]
    asked: list[str] = []
    for message in messages:
        if isinstance(message, AIMessage):
            assert not asked, f"calls {asked} unanswered before {message!r}"
            asked = [call["id"] for call in message.tool_calls]
        elif isinstance(message, ToolMessage):
            assert asked, f"{message!r} answers no call"
            assert asked[0] == message.tool_call_id, (asked, message)
            asked.pop(0)
    assert not asked, asked
    assert messages[-1].content == text, messages[-1]


# -- Then: stops ------------------------------------------------------------------------------


@then("the stopped segment billed its model call once and the tools ran once")
def _then_stopped(context: Context) -> None:
    shop = _shop(context)
    result = shop.last
    assert context.consumed.tasks_left == (), context.consumed.tasks_left
    assert context.consumed.stopped_early, "the caller never reached its stop"
    model = shop.model
    assert model is not None
    asked_in_segment = len(model.requests) - sum(len(r.usage_by_call) for r in shop.results[:-1])
    assert len(result.usage_by_call) == asked_in_segment, (result.usage_by_call, asked_in_segment)
    names = [name for name, _ in shop.ran]
    assert len(names) == len(set(names)), names
    assert result.resumed_from == shop.results[0].run_id, result


# -- config and demo tools --------------------------------------------------------------------


@given("an actor config whose book_table tool has approval: required")
def _given_config(context: Context) -> None:
    context.actor["agent"]["tools"] = [
        {"name": "get_weather", "handler": "cleveractors.demo:get_weather"},
        {"name": "book_table", "handler": "cleveractors.demo:book_table", "approval": "required"},
    ]


@when('the config\'s actor is asked "{message}", then its book_table call is approved')
def _when_config_run(context: Context, message: str) -> None:
    context.actor["agent"]["script"] = [scripted_reply(row.as_dict()) for row in context.table]
    executor = ActorExecutor.from_config(context.actor)  # the stub provider, replaying per run

    async def run() -> tuple[ExecutionResult, list[str], ExecutionResult]:
        async with executor:
            paused = await executor.execute(message)
            ran_then = [invocation.tool for invocation in demo.invocations()]
            answered = await executor.execute(
                Resumption(paused.run_id, [{"call_id": "b1", "decision": "approve"}])
            )
            return paused, ran_then, answered

    context.config_run = asyncio.run(run())


@then("the config's run paused for b1 with only get_weather run, then answered after booking")
def _then_config_run(context: Context) -> None:
    paused, ran_then, answered = context.config_run
    assert paused.status == "paused", paused
    assert [call.call_id for call in paused.pending_approvals] == ["b1"], paused
    assert ran_then == ["get_weather"], ran_then
    assert answered.status == "answered", answered
    assert [invocation.tool for invocation in demo.invocations()] == ["get_weather", "book_table"]


# -- over the wire ----------------------------------------------------------------------------

_ANTHROPIC_MODEL = "claude-sonnet-4-5"
_THINKING = {"type": "enabled", "budget_tokens": 1024}


@given("the shop's model is {provider} against its scripted server")
def _given_wire(context: Context, provider: str) -> None:
    shop = _shop(context)
    server: ScriptedOpenAIServer | ScriptedAnthropicServer
    if provider == "ChatOpenAI":
        server = ScriptedOpenAIServer(shop.replies)
        server.start()
        shop.chat_model = ChatOpenAI(
            model="gpt-4o-mini",
            base_url=server.base_url,
            api_key=SecretStr("sk-unused"),
            max_retries=0,
            stream_usage=True,
        )
    else:
        assert provider == "ChatAnthropic with thinking", provider
        replies = [
            ScriptedAnthropicReply(**reply.model_dump(), thinking="The refund needs a look first.")
            for reply in shop.replies
        ]
        server = ScriptedAnthropicServer(replies)
        server.start()
        shop.chat_model = ChatAnthropic(  # type: ignore[call-arg]  # langchain's aliases
            model=_ANTHROPIC_MODEL,
            base_url=server.base_url,
            api_key=SecretStr("sk-unused"),
            max_retries=0,
            max_tokens=2048,
            thinking=_THINKING,
        )
    context.wire_server = server
    context.add_cleanup(server.stop)


def _answered_in_order(messages: list[dict[str, Any]]) -> list[str]:
    """The ids answered after the last assistant message with tool calls, checking both
    providers' rule: every call answered, right after it, in its order."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message["role"] != "assistant":
            continue
        if message.get("tool_calls"):  # OpenAI: one `tool` message per call
            asked = [call["id"] for call in message["tool_calls"]]
            answers = messages[position + 1 : position + 1 + len(asked)]
            assert [a["role"] for a in answers] == ["tool"] * len(asked), answers
            assert [a["tool_call_id"] for a in answers] == asked, (answers, asked)
            return asked
        content = message["content"]
        if isinstance(content, list) and any(b["type"] == "tool_use" for b in content):
            asked = [block["id"] for block in content if block["type"] == "tool_use"]
            results = messages[position + 1]  # Anthropic: all results in the next user turn
            assert results["role"] == "user", results
            answered = [b["tool_use_id"] for b in results["content"] if b["type"] == "tool_result"]
            assert answered == asked, (answered, asked)
            return asked
    raise AssertionError(f"no tool calls in {messages}")


@then("the server accepted every request, the resumed one answering {ids} in order")
def _then_accepted(context: Context, ids: str) -> None:
    server = context.wire_server
    assert len(server.requests) == 2, server.requests
    assert len(server.billed) == 2, f"a request was refused: {server.requests[-1]}"
    resumed = server.requests[-1]
    assert _answered_in_order(resumed["messages"]) == ids.split(", ")
    if isinstance(server, ScriptedAnthropicServer):  # the signed thinking went back first
        assert resumed["thinking"] == _THINKING, resumed.get("thinking")
        reply = next(m for m in reversed(resumed["messages"]) if m["role"] == "assistant")
        assert reply["content"][0]["type"] == "thinking", reply["content"]
        assert reply["content"][0]["signature"], reply["content"][0]


@then('the server accepted every request, the last one answering {ids} in order, then "{message}"')
def _then_accepted_then_message(context: Context, ids: str, message: str) -> None:
    server = context.wire_server
    assert len(server.billed) == len(server.requests) == 2, f"refused: {server.requests[-1]}"
    messages = server.requests[-1]["messages"]
    assert _answered_in_order(messages) == ids.split(", ")
    roles = [m["role"] for m in messages if m["role"] != "system"]
    if isinstance(server, ScriptedAnthropicServer):  # the Messages API alternates the roles
        assert all(a != b for a, b in itertools.pairwise(roles)), roles
    last = messages[-1]
    assert last["role"] == "user", last
    assert message in json.dumps(last["content"]), last


@then("the resumed request tells the model of the edit and the rejection")
def _then_wire_texts(context: Context) -> None:
    body = json.dumps(context.wire_server.requests[-1]["messages"])
    assert 'arguments to {\\"amount\\": 20, \\"order\\": \\"A1\\"}' in body, body
    assert "refunded 20 on A1" in body, body
    assert "a person declined this call to 'send_mail' (not now)" in body, body


@then("each segment's usage is what the server billed for it, none twice")
def _then_wire_bills(context: Context) -> None:
    shop = _shop(context)
    billed = [(call.prompt_tokens, call.completion_tokens) for call in context.wire_server.billed]
    per_segment = [
        [(call.usage.prompt_tokens, call.usage.completion_tokens) for call in result.usage_by_call]
        for result in shop.results
    ]
    assert per_segment == [[billed[0]], [billed[1]]], (per_segment, billed)
    assert all(not call.usage.estimated for r in shop.results for call in r.usage_by_call)


# -- building ---------------------------------------------------------------------------------


@when("a shop agent is built with approval {approval} and approval_timeout_s {timeout:g}")
def _when_built(context: Context, approval: str, timeout: float) -> None:
    shop = Shop()
    try:
        LLMAgent(
            ScriptedChatModel(replies=[]),
            tools=shop.tools(),
            approval=json.loads(approval),
            approval_timeout_s=timeout,
        )
    except errors.ConfigurationError as exc:
        context.build_error = exc
    else:
        context.build_error = None


@then('building it fails with ConfigurationError naming "{words}"')
def _then_build_failed(context: Context, words: str) -> None:
    assert context.build_error is not None, "the agent was built"
    assert words in str(context.build_error), str(context.build_error)
