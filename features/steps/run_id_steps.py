"""Steps for one run id everywhere: the result, the events, the ledger, the runs row, the
session's turn and the log lines."""

from __future__ import annotations

import asyncio
import logging
import re
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from behave import given, then, when
from behave.runner import Context
from sqlalchemy import select
from support.harness import Consumption, InSession, Stop, Target, after_text, consume, run_guarded

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.events import RunFailed, RunFinished, RunStarted
from cleveractors.store import SqlStore
from cleveractors.store.schema import runs

T = TypeVar("T")

RUN_ID = re.compile(r"\brun_[0-9a-f]{24}\b")
SESSION = "s-ids"
_REPLIES: dict[str, list[dict[str, object]]] = {
    "answered": [
        {
            "tool_calls": [
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "w1"},
                {"name": "get_weather", "args": {"city": "Rome"}, "id": "w2"},
            ]
        },
        {"text": "Sunny in Paris today.", "prompt_tokens": 40, "completion_tokens": 6},
    ],
    "failed": [{"error": "the provider broke", "error_status": 400}],
    "cancelled": [{"text": "Sunny in Paris today, all day long.", "chunk_delay_s": 0.5}],
}


class _LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("cleveractors.executor", "cleveractors.agents")):
            self.lines.append(record.getMessage())


def _store_url(context: Context, storage: str) -> str | None:
    if storage == "without a store":
        return None
    if "postgresql" in storage:
        return str(context.postgres.new_database())
    if "unreachable" in storage:
        return "sqlite:////proc/no-such-folder/store.db"  # /proc takes no new folder or file
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-ids-"))
    return f"sqlite:///{folder / 'store.db'}"


@given("an actor whose run will end {ending}, kept {storage}")
def _given_actor(context: Context, ending: str, storage: str) -> None:
    actor: dict[str, Any] = {
        "name": "ids",
        "agent": {
            "provider": "stub",
            "tools": [{"name": "get_weather", "handler": "cleveractors.demo:get_weather"}],
            "script": _REPLIES[ending],
        },
    }
    context.store_url = _store_url(context, storage)
    if context.store_url is not None:
        actor["store"] = {"url": context.store_url}
    context.in_session = storage.endswith("session")
    # An executor whose store cannot open is used without `async with` (which would fail first):
    # its first run opens the store.
    context.opens_first = "unreachable" not in storage
    context.ids_actor = actor


@given("another run holds the actor's session")
def _given_session_held(context: Context) -> None:
    async def hold() -> None:
        store = SqlStore(context.store_url, lease_s=600)
        await store.open()
        handle = await store.begin_run(run_id="run_" + "0" * 24, session_id=SESSION)
        context.holder = (store, handle)

    context.holder_loop = asyncio.new_event_loop()
    context.holder_loop.run_until_complete(hold())


def _target(context: Context, executor: ActorExecutor) -> Target:
    return InSession(executor, SESSION) if context.in_session else executor


def _stop(ending: str, mode: str, executor: ActorExecutor) -> Stop | None:
    if ending != "cancelled":
        return None
    if mode == "events":
        return Stop("break", at=after_text("Sunny"))
    model = executor.agent.model
    return Stop("cancel task", when=lambda: bool(model.requests))


@when('the actor is asked "{message}" in {mode} mode, and the run ends {ending}')
def _when_asked(context: Context, message: str, mode: str, ending: str) -> None:
    executor = ActorExecutor.from_config(context.ids_actor)
    lines = _LogLines()
    logger = logging.getLogger("cleveractors")
    logger.addHandler(lines)
    level = logger.level
    logger.setLevel(logging.INFO)

    async def ask() -> Consumption:
        stop = _stop(ending, mode, executor)
        if not context.opens_first:
            return await consume(_target(context, executor), message, mode=mode, stop=stop)
        async with executor:
            return await consume(_target(context, executor), message, mode=mode, stop=stop)

    try:
        context.consumed = run_guarded(ask())
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    context.log_lines = lines.lines
    context.result = context.consumed.result
    assert context.result is not None, context.consumed
    expected = {"answered": "answered", "failed": "failed", "cancelled": "cancelled"}.get(ending)
    if expected is not None:
        assert context.result.status == expected, context.result


@when('the actor is asked "{message}" twice')
def _when_asked_twice(context: Context, message: str) -> None:
    async def ask() -> list[ExecutionResult]:
        results = []
        for _ in range(2):
            executor = ActorExecutor.from_config(context.ids_actor)
            results.append(await executor.execute(message))
        return results

    context.results = run_guarded(ask())


def _run_id(context: Context) -> str:
    run_id = context.result.run_id
    assert run_id is not None, context.result
    return str(run_id)


@then("the result has a run id")
def _then_has_run_id(context: Context) -> None:
    assert RUN_ID.fullmatch(_run_id(context)), context.result.run_id


@then("the two results have different run ids")
def _then_different(context: Context) -> None:
    first, second = context.results
    assert first.run_id is not None, first
    assert second.run_id not in (None, first.run_id), context.results


@then("every event that names a run names the result's run id")
def _then_events_name_it(context: Context) -> None:
    if context.consumed.mode == "blocking":
        return  # a blocking caller sees no events: the result is all it has
    events = context.consumed.events
    started = [event for event in events if isinstance(event, RunStarted)]
    assert [event.run_id for event in started] == [_run_id(context)], events
    assert events[0] is started[0], events[0]
    _then_end_names_it(context)


@then("the result's error is a StoreError naming the store")
def _then_store_error(context: Context) -> None:
    error = context.result.error
    assert error is not None, context.result
    assert (error.type, "no-such-folder" in error.message) == ("StoreError", True), error
    assert type(context.consumed.error).__name__ == "StoreError", repr(context.consumed.error)


@then("the run_failed event names the result's run id, and no run_started came")
def _then_refusal_names_it(context: Context) -> None:
    if context.consumed.mode == "blocking":
        return  # a blocking caller sees no events: the result is all it has
    events = context.consumed.events
    assert not any(isinstance(event, RunStarted) for event in events), events
    assert isinstance(events[-1], RunFailed), events
    _then_end_names_it(context)


def _then_end_names_it(context: Context) -> None:
    ends = [e for e in context.consumed.events if isinstance(e, RunFinished | RunFailed)]
    if context.consumed.stopped_early:
        assert ends == [], ends  # the caller left before the end: the result is what it has
        return
    assert [event.result.run_id for event in ends] == [_run_id(context)], ends


def _with_store(context: Context, use: Callable[[SqlStore], Awaitable[T]]) -> T:
    async def run() -> T:
        async with SqlStore(context.store_url) as store:
            return await use(store)

    return asyncio.run(run())


async def _run_rows(store: SqlStore) -> list[str]:
    async with store.engine.connect() as connection:
        return [str(row.run_id) for row in await connection.execute(select(runs.c.run_id))]


@then("every ledger row and the runs row carry the result's run id")
def _then_ledger_carries_it(context: Context) -> None:
    if context.store_url is None:
        return
    report = _with_store(context, lambda store: store.usage())
    assert report.rows, "the run wrote no ledger rows"
    assert {row.run_id for row in report.rows} == {_run_id(context)}, report.rows
    assert len(report.rows) == context.result.llm_calls, (report.rows, context.result)
    assert _with_store(context, _run_rows) == [_run_id(context)]


@then("the store has no runs row for the result's run id")
def _then_no_runs_row(context: Context) -> None:
    assert _run_id(context) not in _with_store(context, _run_rows)


@then("the session's turn carries the result's run id, if it answered")
def _then_turn_carries_it(context: Context) -> None:
    if not context.in_session:
        return
    turns = _with_store(context, lambda store: store.history(SESSION))
    expected = [_run_id(context)] if context.result.status == "answered" else []
    assert [turn.run_id for turn in turns] == expected, turns


@then("every log line of the run names the result's run id, and no other")
def _then_log_lines_name_it(context: Context) -> None:
    lines = context.log_lines
    assert len(lines) >= 2, lines  # its start and its end, at least
    for line in lines:
        assert set(RUN_ID.findall(line)) == {_run_id(context)}, line
    assert any(context.result.status in line for line in lines), lines
    if context.result.tool_calls:
        assert any("2 tool calls in one reply" in line for line in lines), lines
