"""Steps of store.sessions_ledger.feature: `SqlStore` on SQLite and on a real PostgreSQL.

Each step opens the store, does its one thing and closes it again, so everything a Then step
reads has been through the database. "Another process" is a real child Python process that
holds a session through its own `SqlStore`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import signal
import subprocess  # nosec B404  # a child Python process of our own
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from sqlalchemy import func, select, text, update
from sqlalchemy.engine import make_url
from support.harness import Consumption, InSession, consume, run_guarded

from cleveractors.agents import Agent, EventStream, LLMAgent
from cleveractors.agents.stream import RunOutcome
from cleveractors.errors import ConfigurationError, SessionBusyError, SessionNotFoundError
from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult
from cleveractors.store import LedgerRow, SqlStore
from cleveractors.store.schema import SCHEMA_VERSION, schema_version
from cleveractors.testing import ScriptedChatModel
from cleveractors.testing.tables import scripted_reply
from cleveractors.usage import LLMCallUsage, TokenUsage

T = TypeVar("T")


@dataclass(slots=True)
class _StoreWorld:
    url: str
    history_turns: int = 50
    retention_days: int | None = None
    lease_s: float = 30.0


def _open(context: Context) -> SqlStore:
    world: _StoreWorld = context.store_world
    return SqlStore(
        world.url,
        history_turns=world.history_turns,
        retention_days=world.retention_days,
        lease_s=world.lease_s,
    )


def _with_store(context: Context, use: Callable[[SqlStore], Awaitable[T]]) -> T:
    async def run() -> T:
        async with _open(context) as store:
            return await use(store)

    return asyncio.run(run())


def _database_url(context: Context, database: str) -> str:
    if database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-store-"))
        return f"sqlite:///{folder / 'store.db'}"
    return str(context.postgres.new_database())


def _error_of(action: Callable[[], object]) -> Exception | None:
    try:
        action()
    except Exception as exc:  # the Then step says which type it expects
        return exc
    return None


def _result(prompt: int = 10, completion: int = 5) -> ExecutionResult:
    usage = TokenUsage(prompt_tokens=prompt, completion_tokens=completion)
    call = LLMCallUsage(index=1, purpose="round", round=1, usage=usage)
    return ExecutionResult(text="done", usage_by_call=(call,))


def _turn(question: str) -> list[BaseMessage]:
    return [HumanMessage(question), AIMessage(f"answer to {question}")]


def _tool_turn() -> list[BaseMessage]:
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}
    return [
        HumanMessage("Weather in Paris?"),
        AIMessage("Let me look.", tool_calls=[call]),
        ToolMessage("Sunny, 24°C", tool_call_id="call_1"),
        AIMessage("It is sunny in Paris."),
    ]


async def _commit(
    store: SqlStore, session_id: str, messages: list[BaseMessage], *, run_id: str | None = None
) -> None:
    async with store.run(session_id=session_id, run_id=run_id) as run:
        await run.commit_turn(messages, _result())


# -- Given -----------------------------------------------------------------------------------------


@given("a fresh {database} store")
def fresh_store(context: Context, database: str) -> None:
    context.store_world = _StoreWorld(url=_database_url(context, database))


@given("a fresh {database} store keeping {count:d} turns of history")
def fresh_store_with_history(context: Context, database: str, count: int) -> None:
    context.store_world = _StoreWorld(url=_database_url(context, database), history_turns=count)


@given("a fresh {database} store with a lease of {seconds:f} seconds")
def fresh_store_with_lease(context: Context, database: str, seconds: float) -> None:
    context.store_world = _StoreWorld(url=_database_url(context, database), lease_s=seconds)


@given("a fresh {database} store keeping sessions for {days:d} days")
def fresh_store_with_retention(context: Context, database: str, days: int) -> None:
    context.store_world = _StoreWorld(url=_database_url(context, database), retention_days=days)


@given('the session "{session_id}" has 3 committed turns asking "{a}", "{b}" and "{c}"')
def three_turns(context: Context, session_id: str, a: str, b: str, c: str) -> None:
    async def commit_all(store: SqlStore) -> None:
        for question in (a, b, c):
            await _commit(store, session_id, _turn(question))

    _with_store(context, commit_all)


@given('the session "{session_id}" has 1 committed turn')
def one_turn(context: Context, session_id: str) -> None:
    _with_store(context, lambda store: _commit(store, session_id, _turn("hi"), run_id="r-1"))


@given('caller "{caller}" has 1 committed turn in session "{session_id}"')
def one_turn_of_caller(context: Context, session_id: str, caller: str) -> None:
    async def commit(store: SqlStore) -> None:
        async with store.run(session_id=session_id, caller=caller) as run:
            await run.commit_turn(_turn("hi"), _result())

    _with_store(context, commit)


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from cleveractors.store import LedgerRow, SqlStore

    async def hold() -> None:
        async with SqlStore(sys.argv[1], lease_s=float(sys.argv[3])) as store:
            async with store.run(session_id=sys.argv[2], run_id="held-by-other"):
                print("held", flush=True)
                await asyncio.sleep(3600)

    asyncio.run(hold())
    """
)


def _start_holder(context: Context, session_id: str) -> subprocess.Popen[str]:
    world: _StoreWorld = context.store_world
    holder = subprocess.Popen(  # nosec B603  # our own interpreter and script
        [sys.executable, "-c", _HOLDER, world.url, session_id, str(world.lease_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    context.add_cleanup(holder.kill)
    assert holder.stdout is not None
    line = holder.stdout.readline()
    assert line.strip() == "held", f"the holding process said {line!r}"
    return holder


@given('another process holds session "{session_id}"')
def other_process_holds(context: Context, session_id: str) -> None:
    _start_holder(context, session_id)


@given('another process holds session "{session_id}" and is killed with SIGKILL')
def other_process_killed(context: Context, session_id: str) -> None:
    holder = _start_holder(context, session_id)
    holder.send_signal(signal.SIGKILL)
    holder.wait()


# -- When ------------------------------------------------------------------------------------------


@when('a run on session "{session_id}" commits a turn with a tool call and its answer')
def commit_tool_turn(context: Context, session_id: str) -> None:
    _with_store(context, lambda store: _commit(store, session_id, _tool_turn(), run_id="r-1"))


@when('a new run starts on session "{session_id}"')
def new_run_starts(context: Context, session_id: str) -> None:
    async def start(store: SqlStore) -> list[BaseMessage]:
        async with store.run(session_id=session_id) as run:
            return run.history

    context.run_history = _with_store(context, start)


class _Stop(Exception):
    """A run's own failure, in the middle of it."""


@when('a run on session "{session_id}" ends with {ending} before committing')
def run_ends_early(context: Context, session_id: str, ending: str) -> None:
    failure: BaseException = asyncio.CancelledError() if ending == "a cancellation" else _Stop()

    async def fail(store: SqlStore) -> None:
        try:
            async with store.run(session_id=session_id, run_id="r-1"):
                raise failure
        except (_Stop, asyncio.CancelledError):
            pass

    _with_store(context, fail)


@when('a run on session "{session_id}" starts in this process')
def run_starts_here(context: Context, session_id: str) -> None:
    async def start(store: SqlStore) -> None:
        async with store.run(session_id=session_id):
            pass

    context.store_error = _error_of(lambda: _with_store(context, start))


@when("the lease has run out")
def lease_runs_out(context: Context) -> None:
    time.sleep(context.store_world.lease_s * 1.5)


@when(
    'a run on session "{session_id}" records these LLM calls, each written twice:',
)
def record_calls(context: Context, session_id: str) -> None:
    calls = [
        LLMCallUsage(
            index=int(row["index"]),
            purpose=row["purpose"],
            round=int(row["round"]),
            usage=TokenUsage(
                prompt_tokens=int(row["prompt"]),
                completion_tokens=int(row["completion"]),
                estimated=row["estimated"] == "yes",
            ),
            cost_usd=Decimal(row["cost"]) if row.get("cost") else None,
        )
        for row in context.table
    ]
    context.recorded_calls = calls

    async def record(store: SqlStore) -> None:
        async with store.run(session_id=session_id) as run:
            for call in calls:
                await run.record_call(call)
                await run.record_call(call)  # a retried write
            await run.commit_turn(_turn("hi"), _result())

    _with_store(context, record)


@when("the store is pruned {days:d} days from now")
def prune(context: Context, days: int) -> None:
    later = datetime.now(UTC) + timedelta(days=days)
    context.pruned = _with_store(context, lambda store: store.prune(now=later))


@when("the database says it was written by a newer cleveractors")
def newer_schema(context: Context) -> None:
    async def bump(store: SqlStore) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(update(schema_version).values(version=SCHEMA_VERSION + 1))

    _with_store(context, bump)


# -- Then ------------------------------------------------------------------------------------------


@then('the session "{session_id}" has {count:d} turn')
@then('the session "{session_id}" has {count:d} turns')
def session_has_turns(context: Context, session_id: str, count: int) -> None:
    found = _with_store(context, lambda store: store.history(session_id))
    assert len(found) == count, f"{len(found)} turns: {found}"
    context.turns = found


@then("that turn holds the user message, the tool call, the tool result and the answer, in order")
def turn_is_whole(context: Context) -> None:
    stored = list(context.turns[0].messages)
    expected = _tool_turn()
    assert [type(m) for m in stored] == [type(m) for m in expected], stored
    assert [m.content for m in stored] == [m.content for m in expected], stored
    assert stored[1].tool_calls == expected[1].tool_calls, stored[1]
    assert stored[2].tool_call_id == "call_1", stored[2]


@then('the run "{run_id}" is in the ledger with status "{status}"')
@then('the killed run "{run_id}" is in the ledger with status "{status}"')
def run_status(context: Context, run_id: str, status: str) -> None:
    from cleveractors.store.schema import runs

    async def read(store: SqlStore) -> str | None:
        async with store.engine.connect() as connection:
            query = runs.select().where(runs.c.run_id == run_id)
            row = (await connection.execute(query)).one_or_none()
            return None if row is None else str(row.status)

    found = _with_store(context, read)
    assert found == status, f"run {run_id} has status {found}"


@then('the run\'s history asks "{first}" then "{second}"')
def history_asks(context: Context, first: str, second: str) -> None:
    asked = [m.content for m in context.run_history if isinstance(m, HumanMessage)]
    assert asked == [first, second], asked
    assert len(context.run_history) == 4, context.run_history


@then('a new run on session "{session_id}" can start')
def new_run_can_start(context: Context, session_id: str) -> None:
    async def start(store: SqlStore) -> None:
        async with store.run(session_id=session_id) as run:
            await run.commit_turn(_turn("again"), _result())

    _with_store(context, start)


@then('it is refused with SessionBusyError naming "{session_id}"')
def refused_busy(context: Context, session_id: str) -> None:
    error = context.store_error
    assert isinstance(error, SessionBusyError), error
    assert session_id in str(error), error


@then('the ledger for session "{session_id}" has {count:d} rows, one per call, in order')
def ledger_rows(context: Context, session_id: str, count: int) -> None:
    report = _with_store(context, lambda store: store.usage(session_id=session_id))
    assert len(report.rows) == count, report.rows
    expected = [
        (c.index, c.purpose, c.round, c.usage.prompt_tokens, c.usage.completion_tokens)
        for c in context.recorded_calls
    ]
    found = [
        (r.call_index, r.purpose, r.round, r.prompt_tokens, r.completion_tokens)
        for r in report.rows
    ]
    assert found == expected, found
    context.usage_report = report


@then("the ledger totals are {prompt:d} prompt and {completion:d} completion tokens, estimated")
def ledger_totals(context: Context, prompt: int, completion: int) -> None:
    report = context.usage_report
    assert (report.prompt_tokens, report.completion_tokens) == (prompt, completion), report
    assert report.estimated, report
    assert report.cost_usd is None, "no row was priced, so there is no total cost"


@then("the ledger's cost is USD {usd}, each row's cost as recorded")
def ledger_cost(context: Context, usd: str) -> None:
    report = context.usage_report
    recorded = [call.cost_usd for call in context.recorded_calls]
    assert [row.cost_usd for row in report.rows] == recorded, report.rows
    assert report.cost_usd == Decimal(usd), report.cost_usd


@then('the ledger has no rows for session "{session_id}"')
def no_rows_for_session(context: Context, session_id: str) -> None:
    report = _with_store(context, lambda store: store.usage(session_id=session_id))
    assert report.rows == (), report.rows


@then("the ledger since tomorrow has no rows")
def no_rows_since_tomorrow(context: Context) -> None:
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    report = _with_store(context, lambda store: store.usage(since=tomorrow))
    assert report.rows == (), report.rows
    everything = _with_store(context, lambda store: store.usage(until=tomorrow))
    assert len(everything.rows) == len(context.recorded_calls), everything.rows


@then('caller "{caller}" sees no turns in session "{session_id}"')
def caller_sees_nothing(context: Context, caller: str, session_id: str) -> None:
    found = _with_store(context, lambda store: store.history(session_id, caller=caller))
    assert found == [], found


@then('caller "{caller}" cannot delete session "{session_id}"')
def caller_cannot_delete(context: Context, caller: str, session_id: str) -> None:
    removed = _with_store(context, lambda store: store.delete_session(session_id, caller=caller))
    assert removed is False


@then('a run of caller "{caller}" on session "{session_id}" is refused with SessionNotFoundError')
def caller_run_refused(context: Context, caller: str, session_id: str) -> None:
    async def start(store: SqlStore) -> None:
        async with store.run(session_id=session_id, caller=caller):
            pass

    error = _error_of(lambda: _with_store(context, start))
    assert isinstance(error, SessionNotFoundError), f"the run started or failed otherwise: {error}"
    assert session_id in str(error), error


@then('caller "{caller}" still has {count:d} turn in session "{session_id}"')
def caller_still_has(context: Context, caller: str, count: int, session_id: str) -> None:
    found = _with_store(context, lambda store: store.history(session_id, caller=caller))
    assert len(found) == count, found


@then('the ledger still holds the run "{run_id}"')
def ledger_holds_run(context: Context, run_id: str) -> None:
    assert context.pruned == 1, context.pruned
    run_status(context, run_id, "ok")


@then("the database is at the current schema version")
def at_current_version(context: Context) -> None:
    async def read(store: SqlStore) -> int:
        async with store.engine.connect() as connection:
            return int(await connection.scalar(schema_version.select()))

    assert _with_store(context, read) == SCHEMA_VERSION
    assert _with_store(context, read) == SCHEMA_VERSION  # reopening changes nothing


@then('opening the store fails with ConfigurationError saying "{words}"')
def opening_fails(context: Context, words: str) -> None:
    error = _error_of(lambda: _with_store(context, lambda store: store.usage()))
    assert isinstance(error, ConfigurationError), f"the store opened or failed otherwise: {error}"
    assert words in str(error), error


@then('a store on "{url}" fails with ConfigurationError saying "{words}"')
def bad_url(context: Context, url: str, words: str) -> None:
    error = _error_of(lambda: SqlStore(url))
    assert isinstance(error, ConfigurationError), (
        f"{url!r} was accepted or failed otherwise: {error}"
    )
    assert words in str(error), error
    context.store_error = error


@then('the store\'s error does not show "{secret}"')
def store_error_hides(context: Context, secret: str) -> None:
    assert secret not in str(context.store_error), context.store_error


# -- an executor with a store -----------------------------------------------------------------


def _script(context: Context) -> list[dict[str, object]]:
    return [
        scripted_reply(row.as_dict()).model_dump(exclude_defaults=True) for row in context.table
    ]


def _executor(context: Context, script: list[dict[str, object]]) -> ActorExecutor:
    actor = copy.deepcopy(context.actor)
    actor["agent"]["script"] = script
    actor["store"] = {"url": context.store_world.url, "lease_s": context.store_world.lease_s}
    return ActorExecutor.from_config(actor)


async def _ask(executor: ActorExecutor, message: str, session_id: str, mode: str) -> Consumption:
    async with executor:
        target = InSession(executor, session_id)
        return await consume(target, message, mode="blocking" if mode == "blocking" else "events")


@given("the actor keeps sessions in a fresh {database} store")
def actor_keeps_sessions(context: Context, database: str) -> None:
    context.store_world = _StoreWorld(url=_database_url(context, database))
    context.runs = []


@given("the actor declares the ledger probe tool")
def ledger_probe_tool(context: Context) -> None:
    context.actor["agent"]["tools"].append(
        {"name": "count_ledger_rows", "handler": "support.ledger_probe:count_ledger_rows"}
    )


@given("the actor declares the session thief tool")
def session_thief_tool(context: Context) -> None:
    context.actor["agent"]["tools"].append(
        {"name": "steal_session", "handler": "support.ledger_probe:steal_session"}
    )


@given("the store's ledger table is gone")
def ledger_table_gone(context: Context) -> None:
    async def drop(store: SqlStore) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(text("DROP TABLE cleveractors_llm_calls"))

    _with_store(context, drop)


@given('a run on session "{session_id}" is under way')
def run_under_way(context: Context, session_id: str) -> None:
    # The run of another executor (another worker) holds the session for the whole scenario.
    _start_holder(context, session_id)


@given("another worker's first run on the web actor's session \"{session_id}\" is under way")
def web_session_run_under_way(context: Context, session_id: str) -> None:
    context.store_world = _StoreWorld(url=context.web_actor["store"]["url"])
    _start_holder(context, session_id)


@when(
    'the actor is asked "{message}" on session "{session_id}" in {mode} mode, its model replying:'
)
def asked_on_session(context: Context, message: str, session_id: str, mode: str) -> None:
    os.environ["CLEVERACTORS_PROBE_DB"] = make_url(context.store_world.url).database or ""
    executor = _executor(context, _script(context))
    consumed = run_guarded(_ask(executor, message, session_id, mode))
    context.run_error = consumed.error
    assert executor.last_result is not None, f"no result: {context.run_error!r}"
    context.runs.append((executor, executor.last_result))


@then('the second run\'s first request held the first turn whole before "{message}"')
def second_run_held_first_turn(context: Context, message: str) -> None:
    (_first_executor, first), (second_executor, _second) = context.runs
    sent = second_executor.agent.model.requests[0].messages
    roles = [type(m).__name__ for m in sent]
    assert roles == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"], roles
    assert sent[1].tool_calls[0]["id"] == "w1", sent[1]
    assert sent[2].content == first.tool_calls[0].output, sent[2]
    assert sent[3].content == first.answer, sent[3]
    assert sent[-1].content == message, sent[-1]


def _tokens(usage: TokenUsage | LedgerRow) -> tuple[int, int, int, int, int, bool]:
    return (
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
        usage.estimated,
    )


@then('the ledger for session "{session_id}" holds every call of both runs, as billed')
@then('the ledger for session "{session_id}" holds every call of the run, as billed')
def ledger_matches_results(context: Context, session_id: str) -> None:
    report = _with_store(context, lambda store: store.usage(session_id=session_id))
    billed = [
        (c.index, c.attempt, c.status, c.provider, c.model, *_tokens(c.usage))
        for _executor, result in context.runs
        for c in result.usage_by_call
    ]
    found = [
        (r.call_index, r.attempt, r.status, r.provider, r.model, *_tokens(r)) for r in report.rows
    ]
    assert found == billed, f"ledger {found} != results {billed}"
    assert billed, "the runs billed nothing"


@then('the tool call {call_id} answered "{output}"')
def tool_call_answered(context: Context, call_id: str, output: str) -> None:
    ((_executor, result),) = context.runs
    answers = {record.call_id: record.output for record in result.tool_calls}
    assert answers.get(call_id) == output, answers


@then("the run failed")
def run_failed(context: Context) -> None:
    ((_executor, result),) = context.runs
    assert result.error is not None, result
    assert context.run_error is not None, result


@then("the run failed with {error_type}")
def run_failed_with(context: Context, error_type: str) -> None:
    ((_executor, result),) = context.runs
    assert type(context.run_error).__name__ == error_type, repr(context.run_error)
    assert result.error is not None, result
    assert result.error.type == error_type, result.error


@then('the ledger\'s run is marked "{status}"')
def ledger_run_marked(context: Context, status: str) -> None:
    from cleveractors.store.schema import runs

    async def statuses(store: SqlStore) -> list[str]:
        async with store.engine.connect() as connection:
            return [str(row.status) for row in await connection.execute(runs.select())]

    assert _with_store(context, statuses) == [status]


@then("nothing was billed for it")
def nothing_billed(context: Context) -> None:
    ((executor, result),) = context.runs
    assert result.llm_calls == 0, result
    assert result.total_tokens == 0, result
    assert executor.agent.model.requests == (), "the model was asked"


@then("the failed run's result still bills {prompt:d} prompt and {completion:d} completion tokens")
def failed_run_bills(context: Context, prompt: int, completion: int) -> None:
    ((_executor, result),) = context.runs
    assert (result.prompt_tokens, result.completion_tokens) == (prompt, completion), result


@then('asking on session "{session_id}" without a store fails saying "{words}"')
def session_without_store(context: Context, session_id: str, words: str) -> None:
    actor = copy.deepcopy(context.actor)
    actor["agent"]["script"] = [{"text": "Hi"}]
    executor = ActorExecutor.from_config(actor)
    error = _error_of(lambda: asyncio.run(executor.execute("Hi", session_id=session_id)))
    assert isinstance(error, ConfigurationError), repr(error)
    assert words in str(error), error


@then('asking on session "{session_id}" with a history fails saying "{words}"')
def session_with_history(context: Context, session_id: str, words: str) -> None:
    context.store_world = _StoreWorld(url=_database_url(context, "sqlite"))
    executor = _executor(context, [{"text": "Hi"}])
    history = [{"role": "user", "content": "earlier"}]
    call = executor.execute("Hi", history, session_id=session_id)
    error = _error_of(lambda: asyncio.run(call))
    assert isinstance(error, ConfigurationError), repr(error)
    assert words in str(error), error


@when('an agent with an on_call recorder is asked "{message}" in {mode} mode, its model replying:')
def agent_with_recorder(context: Context, message: str, mode: str) -> None:
    model = ScriptedChatModel(replies=[scripted_reply(row.as_dict()) for row in context.table])
    agent = LLMAgent(model)
    heard: list[LLMCallUsage] = []
    results: list[ExecutionResult] = []

    async def record(call: LLMCallUsage) -> None:
        heard.append(call)

    async def ask() -> None:
        if mode == "blocking":
            await agent.process_message(message, on_result=results.append, on_call=record)
            return
        stream = agent.stream_message(message, on_result=results.append, on_call=record)
        async with stream:
            async for _event in stream:
                pass

    context.run_error = _error_of(lambda: asyncio.run(ask()))
    context.runs = [(agent, results[0])]
    context.heard = heard


@then("the recorder heard of exactly the calls on the result")
def recorder_heard_all(context: Context) -> None:
    ((_agent, result),) = context.runs
    assert context.heard, "the recorder heard of nothing"
    assert tuple(context.heard) == result.usage_by_call, (context.heard, result.usage_by_call)


# -- the store failing under a run ------------------------------------------------------------


@given("the actor keeps sessions in a fresh sqlite store with a lease of {seconds:f} seconds")
def actor_keeps_sessions_with_lease(context: Context, seconds: float) -> None:
    actor_keeps_sessions(context, "sqlite")
    context.store_world.lease_s = seconds


@given("the actor declares the store probe tools")
def store_probe_tools(context: Context) -> None:
    for name in ("steal_session_and_wait", "hide_sessions_table", "lose_runs_table"):
        context.actor["agent"]["tools"].append(
            {"name": name, "handler": f"support.ledger_probe:{name}"}
        )


@given("the store's turns table is gone")
def turns_table_gone(context: Context) -> None:
    async def drop(store: SqlStore) -> None:
        async with store.engine.begin() as connection:
            await connection.execute(text("DROP TABLE cleveractors_turns"))

    _with_store(context, drop)


class _EndsBeforeItBegins(Agent):
    """An agent whose run ends before it begins: cancelled at once, or breaking the promise of
    `Agent.run` to return a failed run as its outcome."""

    def __init__(self, ending: BaseException) -> None:
        self.name = "ends-before-it-begins"
        self.ending = ending

    async def process_message(self, message: str, **_options: object) -> ExecutionResult:
        raise NotImplementedError  # the executor with a store calls `run`

    def stream_message(self, message: str, **_options: object) -> EventStream:
        raise NotImplementedError  # the executor with a store calls `run`

    async def run(self, message: str, **_options: object) -> RunOutcome:
        raise self.ending


@when(
    'a run of an agent that {ending} before it begins is asked "{message}" on session '
    '"{session_id}"'
)
def agent_ends_before_it_begins(
    context: Context, ending: str, message: str, session_id: str
) -> None:
    endings = {"is cancelled": asyncio.CancelledError(), "raises an error": RuntimeError("broke")}
    store = _open(context)
    executor = ActorExecutor(_EndsBeforeItBegins(endings[ending]), store=store)

    async def ask() -> BaseException | None:
        async with executor:
            try:
                await executor.execute(message, session_id=session_id)
            except (asyncio.CancelledError, RuntimeError) as exc:
                return exc
        return None

    context.run_error = asyncio.run(ask())


@then("the call ended with {error_type}")
def call_ended_with(context: Context, error_type: str) -> None:
    assert type(context.run_error).__name__ == error_type, repr(context.run_error)


@then('the run\'s error says "{words}"')
def run_error_says(context: Context, words: str) -> None:
    assert words in str(context.run_error), context.run_error


@then('the store holds no session "{session_id}" and no run')
def store_holds_nothing(context: Context, session_id: str) -> None:
    from cleveractors.store.schema import runs, sessions

    async def count(store: SqlStore) -> tuple[int, int]:
        async with store.engine.connect() as connection:
            held = select(func.count()).where(sessions.c.id == session_id)
            return (
                int(await connection.scalar(held)),
                int(await connection.scalar(select(func.count()).select_from(runs))),
            )

    assert _with_store(context, count) == (0, 0), "the failed start left rows behind"


@then('a warning said "{words}"')
def warning_said(context: Context, words: str) -> None:
    warnings = [r.getMessage() for r in context.log_records if r.levelno == logging.WARNING]
    assert any(words in warning for warning in warnings), warnings
