"""Steps of store.pool.feature: runs queueing for a store's few connections, on SQLite and on a
real PostgreSQL.

Which run took a connection, and when, is seen from the pool's own checkout and checkin events:
a checkout runs inside the asyncio task that asked for it, so the task's name says whose it is.
Each step runs its whole story in one event loop, as the store's connections belong to one.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy import event
from support.harness import run_guarded, wait_until

from cleveractors.config import StoreConfig
from cleveractors.errors import ConfigurationError, StoreError
from cleveractors.result import ExecutionResult
from cleveractors.store import SqlStore
from cleveractors.usage import LLMCallUsage, TokenUsage


@dataclass(slots=True)
class _PoolWorld:
    url: str
    max_connections: int
    from_config: bool = False
    wait_s: float = 30.0
    """Made by `SqlStore.from_config()` from an actor's `store:`, not by `SqlStore()`."""
    started: list[str] = field(default_factory=list)
    """The runs by the order of their first connection."""
    run_ids: list[str] = field(default_factory=list)
    open_now: int = 0
    most_open: int = 0


def _store(world: _PoolWorld) -> SqlStore:
    if world.from_config:
        config = StoreConfig(
            url=world.url, max_connections=world.max_connections, connection_wait_s=world.wait_s
        )
        return SqlStore.from_config(config)
    return SqlStore(
        world.url, max_connections=world.max_connections, connection_wait_s=world.wait_s
    )


def _watch(store: SqlStore, world: _PoolWorld) -> None:
    """Note each run's first connection, and how many connections are open at once."""

    def checked_out(*_: Any) -> None:
        task = asyncio.current_task()
        name = "" if task is None else task.get_name()
        if name.startswith("r-") and name not in world.started:
            world.started.append(name)
        world.open_now += 1
        world.most_open = max(world.most_open, world.open_now)

    def checked_in(*_: Any) -> None:
        world.open_now -= 1

    event.listen(store.engine.sync_engine, "checkout", checked_out)
    event.listen(store.engine.sync_engine, "checkin", checked_in)


async def _answer(store: SqlStore, run_id: str) -> None:
    """A run on its own session that records one call and answers."""
    usage = TokenUsage(prompt_tokens=10, completion_tokens=5)
    call = LLMCallUsage(index=1, purpose="round", round=1, usage=usage)
    async with store.run(session_id=f"s-{run_id}", run_id=run_id) as run:
        await run.record_call(call)
        messages = [HumanMessage(f"question of {run_id}"), AIMessage("an answer")]
        await run.commit_turn(messages, ExecutionResult(text="an answer", usage_by_call=(call,)))


def _spawn(store: SqlStore, run_id: str, world: _PoolWorld) -> asyncio.Task[None]:
    world.run_ids.append(run_id)
    return asyncio.get_running_loop().create_task(_answer(store, run_id), name=run_id)


async def _must(condition: Callable[[], bool], what: str) -> None:
    assert await wait_until(condition), f"timed out waiting until {what}"


# -- Given -----------------------------------------------------------------------------------------


def _fresh_url(context: Context, database: str) -> str:
    if database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-pool-"))
        return f"sqlite:///{folder / 'store.db'}"
    return str(context.postgres.new_database())


@given("a fresh {database} store with at most {count:d} connection")
@given("a fresh {database} store with at most {count:d} connections")
def fresh_small_store(context: Context, database: str, count: int) -> None:
    context.pool_world = _PoolWorld(url=_fresh_url(context, database), max_connections=count)


@given("a fresh {database} store whose actor's config allows at most {count:d} connections")
def fresh_small_configured_store(context: Context, database: str, count: int) -> None:
    url = _fresh_url(context, database)
    context.pool_world = _PoolWorld(url=url, max_connections=count, from_config=True)


@given(
    "a fresh {database} store with at most {count:d} connection, "
    "waiting at most {wait_s:f} seconds for one"
)
def fresh_impatient_store(context: Context, database: str, count: int, wait_s: float) -> None:
    url = _fresh_url(context, database)
    context.pool_world = _PoolWorld(url=url, max_connections=count, wait_s=wait_s)


# -- When ------------------------------------------------------------------------------------------


@when("its connection is busy while {waiting:d} runs ask to start, one after another")
def busy_while_runs_wait(context: Context, waiting: int) -> None:
    context.pool_waiting = waiting  # the story goes on in the next step, in the same loop


@when("{later:d} more runs ask to start, each just as a connection comes back")
def later_arrivals(context: Context, later: int) -> None:
    world: _PoolWorld = context.pool_world
    waiting: int = context.pool_waiting

    async def story() -> None:
        async with _store(world) as store:
            _watch(store, world)
            tasks: list[asyncio.Task[None]] = []
            given_back = asyncio.Event()
            async with store.engine.connect():  # busy with other work
                for number in range(1, waiting + 1):
                    tasks.append(_spawn(store, f"r-waited-{number}", world))
                    await _must(lambda n=number: store.engine.waiting == n, f"{number} runs wait")
                arrivals = iter(range(1, later + 1))

                def arrive(*_: Any) -> None:
                    # Between the connection's return and the first waiter taking it.
                    number = next(arrivals, None)
                    if number is None:
                        given_back.set()
                    else:
                        tasks.append(_spawn(store, f"r-later-{number}", world))

                event.listen(store.engine.sync_engine, "checkin", arrive)
            await _must(given_back.is_set, "every later run has arrived")
            await asyncio.gather(*tasks)

    run_guarded(story())


@when("{count:d} runs on their own sessions start at once")
def runs_at_once(context: Context, count: int) -> None:
    world: _PoolWorld = context.pool_world

    async def story() -> None:
        async with _store(world) as store:
            _watch(store, world)
            await asyncio.gather(*(_spawn(store, f"r-{n}", world) for n in range(count)))

    run_guarded(story())


@when("a run asks to start while the connection stays busy, then another once it is free")
def run_waits_too_long(context: Context) -> None:
    world: _PoolWorld = context.pool_world

    async def story() -> None:
        async with _store(world) as store:
            async with store.engine.connect():  # busy with other work
                try:
                    await _answer(store, "r-waited")
                except StoreError as exc:
                    context.pool_error = exc
                else:
                    context.pool_error = None
            await _spawn(store, "r-after", world)

    run_guarded(story())


@when("{count:d} runs on their own sessions start at once on an in-memory SQLite store")
def runs_at_once_in_memory(context: Context, count: int) -> None:
    world = _PoolWorld(url="sqlite:///:memory:", max_connections=count)
    context.pool_world = world

    async def story() -> list[str | None]:
        async with SqlStore(world.url) as store:  # gone once closed: read before
            await asyncio.gather(*(_spawn(store, f"r-{n}", world) for n in range(count)))
            return [await store.run_status(run_id) for run_id in world.run_ids]

    context.pool_statuses = run_guarded(story())


@when("a store is made with at most {count:d} connections")
def store_of_no_connections(context: Context, count: int) -> None:
    try:
        SqlStore("sqlite:///unused.db", max_connections=count)
    except ConfigurationError as exc:
        context.pool_error = exc
    else:
        context.pool_error = None


# -- Then ------------------------------------------------------------------------------------------


@then(
    "the {count:d} runs start in the order they asked: "
    "the {waited:d} that waited, then the {later:d} that came later"
)
def started_in_order(context: Context, count: int, waited: int, later: int) -> None:
    world: _PoolWorld = context.pool_world
    expected = [f"r-waited-{n}" for n in range(1, waited + 1)]
    expected += [f"r-later-{n}" for n in range(1, later + 1)]
    assert len(expected) == count
    assert world.started == expected, world.started


@then("all {count:d} runs answer, each with its call in the ledger")
def all_answer(context: Context, count: int) -> None:
    world: _PoolWorld = context.pool_world

    async def read() -> tuple[list[str | None], list[str]]:
        async with _store(world) as store:
            statuses = [await store.run_status(run_id) for run_id in world.run_ids]
            report = await store.usage()
        return statuses, [row.run_id for row in report.rows]

    statuses, ledger_runs = run_guarded(read())
    assert len(world.run_ids) == count, world.run_ids
    assert statuses == ["answered"] * count, statuses
    assert sorted(ledger_runs) == sorted(world.run_ids), ledger_runs


@then("all {count:d} runs answered, as the store itself says before it closes")
def all_answered_in_memory(context: Context, count: int) -> None:
    assert context.pool_statuses == ["answered"] * count, context.pool_statuses


@then("never more than {count:d} connections were open at once")
def never_more_open(context: Context, count: int) -> None:
    world: _PoolWorld = context.pool_world
    assert 0 < world.most_open <= count, world.most_open


@then('the first run failed with StoreError "{text}"')
def failed_waiting(context: Context, text: str) -> None:
    assert isinstance(context.pool_error, StoreError), context.pool_error
    assert text in str(context.pool_error), str(context.pool_error)


@then("the other run answers, with its call in the ledger")
def other_answers(context: Context) -> None:
    all_answer(context, 1)


@then("it is refused with ConfigurationError naming max_connections")
def refused(context: Context) -> None:
    assert isinstance(context.pool_error, ConfigurationError), context.pool_error
    assert "max_connections" in str(context.pool_error)
