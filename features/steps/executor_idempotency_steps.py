"""Steps of executor.idempotency.feature: requests sent again under their idempotency key."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context
from support.harness import Consumption, consume, run_guarded, wait_until

from cleveractors import ActorExecutor, ConfigurationError, ExecutionResult, NewMessage
from cleveractors.events import RunFinished, RunStarted, TextDelta
from cleveractors.store import SqlStore

_ANSWER = {"prompt_tokens": 30, "completion_tokens": 5}


class _Caller:
    """A target that asks as one caller under one key (the harness's target protocol)."""

    def __init__(
        self,
        executor: ActorExecutor,
        key: str,
        caller: str | None = None,
        cap: int | None = None,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        self.executor = executor
        self.key = key
        self.caller = caller
        self.cap = cap
        self.output_schema = output_schema

    @property
    def last_result(self) -> ExecutionResult | None:
        return self.executor.last_result

    async def execute(self, message: str, history: Any = None) -> ExecutionResult:
        turn = NewMessage(
            message,
            history,
            idempotency_key=self.key,
            caller=self.caller,
            max_output_tokens=self.cap,
            output_schema=self.output_schema,
        )
        return await self.executor.execute(turn)

    def execute_events(self, message: str, history: Any = None) -> Any:
        return self.executor.execute_events(
            message, history, idempotency_key=self.key, caller=self.caller
        )

    def execute_stream(self, message: str, history: Any = None) -> Any:
        return self.executor.execute_stream(
            message, history, idempotency_key=self.key, caller=self.caller
        )


def _actor(context: Context, script: list[dict[str, object]], database: str | None) -> None:
    actor: dict[str, Any] = {"name": "keys", "agent": {"provider": "stub", "script": script}}
    if database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-keys-"))
        actor["store"] = {"url": f"sqlite:///{folder / 'store.db'}"}
    elif database == "postgresql":
        actor["store"] = {"url": str(context.postgres.new_database())}
    context.keys_actor = actor
    context.asked: list[tuple[ActorExecutor, Consumption]] = []


def _fresh(context: Context) -> ActorExecutor:
    actor = copy.deepcopy(context.keys_actor)
    if context.asked and getattr(context, "later_scripts", None):
        actor["agent"]["script"] = context.later_scripts.pop(0)
    return ActorExecutor.from_config(actor)


@given('an actor answering "{text}" with a fresh {database} store')
def _given_actor(context: Context, text: str, database: str) -> None:
    _actor(context, [{"text": text, **_ANSWER}], database)


@given('an actor answering "{text}" slowly with a fresh {database} store')
def _given_slow_actor(context: Context, text: str, database: str) -> None:
    _actor(context, [{"text": text, "chunk_delay_s": 0.3, **_ANSWER}], database)


@given(
    'an actor answering "{text}" slowly with a fresh {database} store leasing for {seconds:g} '
    "seconds"
)
def _given_slow_actor_short_lease(
    context: Context, text: str, database: str, seconds: float
) -> None:
    _given_slow_actor(context, text, database)
    context.keys_actor["store"]["lease_s"] = seconds


@given('an actor whose first answer fails, then answers "{text}", with a fresh {database} store')
def _given_failing_actor(context: Context, text: str, database: str) -> None:
    # Each worker's model plays its own script: the first worker's fails, the second's answers.
    refusal = {"error": "the provider broke", "error_status": 400}
    _actor(context, [refusal], database)
    context.later_scripts = [[{"text": text, **_ANSWER}]]


@given('an actor answering "{text}" without a store')
def _given_storeless_actor(context: Context, text: str) -> None:
    _actor(context, [{"text": text, **_ANSWER}], None)


async def _ask(
    executor: ActorExecutor,
    key: str,
    message: str,
    mode: str,
    caller: str | None = None,
    target: Callable[[ActorExecutor], Any] | None = None,
) -> Consumption:
    async with executor:
        asker = _Caller(executor, key, caller) if target is None else target(executor)
        return await consume(asker, message, mode=mode)


class _LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def _logged(context: Context) -> Iterator[None]:
    """Collect what the library logs at INFO and above meanwhile, into `context.log_lines`."""
    lines = _LogLines()
    logger = logging.getLogger("cleveractors")
    level = logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
        context.log_lines = lines.lines


def _ask_fresh(
    context: Context,
    message: str,
    key: str,
    mode: str,
    caller: str | None = None,
    target: Callable[[ActorExecutor], Any] | None = None,
) -> None:
    executor = _fresh(context)
    with _logged(context):
        consumed = run_guarded(_ask(executor, key, message, mode, caller, target))
    context.asked.append((executor, consumed))


@when('a worker is asked "{message}" under key "{key}" in {mode} mode')
@when('another worker is asked "{message}" under key "{key}" in {mode} mode')
def _when_asked(context: Context, message: str, key: str, mode: str) -> None:
    _ask_fresh(context, message, key, mode)


@when('another worker is asked "{message}" under key "{key}", its output capped at {cap:d} tokens')
def _when_asked_capped(context: Context, message: str, key: str, cap: int) -> None:
    _ask_fresh(
        context, message, key, "blocking", target=lambda executor: _Caller(executor, key, cap=cap)
    )


@when('another worker is asked "{message}" under key "{key}", its answer typed by a schema')
def _when_asked_typed(context: Context, message: str, key: str) -> None:
    schema = {"type": "object"}
    _ask_fresh(
        context,
        message,
        key,
        "blocking",
        target=lambda executor: _Caller(executor, key, output_schema=schema),
    )


@when('caller "{caller}" asks "{message}" under key "{key}"')
@when('caller "{caller}" asks "{message}" under key "{key}" of another worker')
def _when_caller_asks(context: Context, caller: str, message: str, key: str) -> None:
    _ask_fresh(context, message, key, "blocking", caller)


@when(
    'while a worker answers "{message}" under key "{key}", another worker is asked the same in '
    "{mode} mode"
)
def _when_asked_meanwhile(context: Context, message: str, key: str, mode: str) -> None:
    first, second = _fresh(context), _fresh(context)

    async def both() -> tuple[Consumption, Consumption]:
        async with first, second:
            going = asyncio.create_task(consume(_Caller(first, key), message, mode="events"))
            assert await wait_until(lambda: bool(first.agent.model.requests)), "never asked"
            meanwhile = await consume(_Caller(second, key), message, mode=mode)
            return await going, meanwhile

    going, meanwhile = run_guarded(both())
    context.asked += [(first, going), (second, meanwhile)]


def _first_and_second(context: Context) -> tuple[ExecutionResult, Consumption]:
    (_first_executor, first), (_second_executor, second) = context.asked
    assert first.result is not None, first
    return first.result, second


@then("the second answer is the first run's result, replayed: the same run id, text and usage")
def _then_replayed(context: Context) -> None:
    first, second = _first_and_second(context)
    assert second.error is None, second.error
    assert second.result is not None, second
    assert second.result.replayed, second.result
    assert second.result.model_copy(update={"replayed": False}) == first, (second.result, first)
    if second.mode == "text":
        assert "".join(second.chunks) == first.text, second.chunks


@then("the second worker's model was never asked")
def _then_never_asked(context: Context) -> None:
    (_, _), (second_executor, _) = context.asked
    requests = second_executor.agent.model.requests
    assert len(requests) == 0, requests


async def _ledger_run_ids(context: Context) -> list[str]:
    async with SqlStore(context.keys_actor["store"]["url"]) as store:
        return [row.run_id for row in (await store.usage()).rows]


@then("the ledger holds the first run's calls, and no other")
def _then_ledger_first_only(context: Context) -> None:
    first, _second = _first_and_second(context)
    rows = asyncio.run(_ledger_run_ids(context))
    assert rows == [first.run_id] * first.llm_calls, rows


@then("the ledger holds the calls of both runs")
def _then_ledger_both(context: Context) -> None:
    first, second = _first_and_second(context)
    assert second.result is not None
    rows = asyncio.run(_ledger_run_ids(context))
    expected = [first.run_id] * first.llm_calls + [second.result.run_id] * second.result.llm_calls
    assert sorted(rows) == sorted(expected), rows


@then(
    "the second run's events are run_started (replayed, the first run's id), one text delta "
    '"{text}", run_finished'
)
def _then_replayed_events(context: Context, text: str) -> None:
    first, second = _first_and_second(context)
    started, delta, finished = second.events
    assert isinstance(started, RunStarted), started
    assert (started.run_id, started.replayed) == (first.run_id, True), started
    assert isinstance(delta, TextDelta), delta
    assert delta.text == text, delta
    assert isinstance(finished, RunFinished), finished
    assert finished.result.replayed, finished.result


@then("the second request failed with {error_type} naming the first run")
def _then_refused(context: Context, error_type: str) -> None:
    first, second = _first_and_second(context)
    assert second.result is not None, second
    assert second.result.error is not None, second.result
    assert second.result.error.type == error_type, second.result.error
    assert str(first.run_id) in second.result.error.message, second.result.error
    assert type(second.error).__name__ == error_type, repr(second.error)


@then("the second request billed nothing")
def _then_billed_nothing(context: Context) -> None:
    _first, second = _first_and_second(context)
    assert second.result is not None
    assert second.result.usage_by_call == (), second.result


@then('the first run answered "{text}"')
def _then_first_answered(context: Context, text: str) -> None:
    first, _second = _first_and_second(context)
    assert (first.error, first.text) == (None, text), first


@then('the second request answered "{text}" as a run of its own')
def _then_second_ran(context: Context, text: str) -> None:
    first, second = _first_and_second(context)
    assert second.result is not None, second
    assert (second.result.error, second.result.text) == (None, text), second.result
    assert not second.result.replayed, second.result
    assert second.result.run_id != first.run_id, (second.result, first)


@then('asking under key "{key}" fails with ConfigurationError saying "{words}"')
def _then_storeless_refused(context: Context, key: str, words: str) -> None:
    executor = _fresh(context)
    error: Exception | None = None
    try:
        asyncio.run(executor.execute("Weather?", idempotency_key=key))
    except ConfigurationError as exc:
        error = exc
    assert error is not None, "a key without a store was accepted"
    assert words in str(error), error


@when('while a worker answers "{message}" under key "{key}", another run takes the key over')
def _when_key_taken_over(context: Context, message: str, key: str) -> None:
    from sqlalchemy import update

    from cleveractors.store.schema import idempotency_keys

    worker = _fresh(context)

    async def take_over() -> Consumption:
        async with worker:
            going = asyncio.create_task(consume(_Caller(worker, key), message, mode="events"))
            assert await wait_until(lambda: bool(worker.agent.model.requests)), "never asked"
            assert worker.store is not None
            async with worker.store.engine.begin() as connection:
                await connection.execute(
                    update(idempotency_keys)
                    .where(idempotency_keys.c.key == key)
                    .values(run_id="run_" + "f" * 24)
                )
            return await going

    with _logged(context):
        context.asked.append((worker, run_guarded(take_over())))


@then("the first run was stopped: cancelled, its call billed in the ledger")
def _then_stopped(context: Context) -> None:
    ((_worker, consumed),) = context.asked
    result = consumed.result
    assert result is not None, consumed
    assert result.cancelled, result
    assert [call.status for call in result.usage_by_call] == ["cancelled"], result.usage_by_call
    rows = asyncio.run(_ledger_run_ids(context))
    assert rows == [result.run_id], rows


@then("the run logged that it lost its claim to another run")
def _then_logged_lost(context: Context) -> None:
    ((_worker, consumed),) = context.asked
    assert consumed.result is not None
    lost = [line for line in context.log_lines if "lost its claim" in line]
    assert lost, context.log_lines
    assert str(consumed.result.run_id) in lost[0], lost


@then("the second worker logged only that it replayed the first run, naming no other run")
def _then_replay_logged(context: Context) -> None:
    first, _second = _first_and_second(context)
    ids = {run_id for line in context.log_lines for run_id in re.findall(r"run_[0-9a-f]{24}", line)}
    assert ids == {first.run_id}, context.log_lines
    assert any("replayed" in line for line in context.log_lines), context.log_lines
    assert not any("answered" in line for line in context.log_lines), context.log_lines
