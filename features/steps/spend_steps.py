"""Steps of store.spend_limits.feature: an executor with spend limits on a fresh store, its
clock a value the scenario sets, its runs sent at once from one event loop (the store's engine is
shared by all of them, as by the requests of one `serve` worker)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from behave import given, then, when
from behave.runner import Context
from fastapi import Request
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from typer.testing import CliRunner

from cleveractors import ActorExecutor
from cleveractors.approvals import ApprovalDecision
from cleveractors.cli import app
from cleveractors.errors import CleverActorsError, SpendLimitExceeded
from cleveractors.result import ExecutionResult, SpendLeft
from cleveractors.spend_limits import SpendLimits
from cleveractors.store.spend import SpendAccount, read_spend_left
from cleveractors.turns import Resumption
from cleveractors.web import create_app

_ANSWER = {"text": "Hi.", "prompt_tokens": 3, "completion_tokens": 5}
_LOOKUP = {
    "text": "Looking.",
    "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "w1"}],
    "prompt_tokens": 40,
    "completion_tokens": 12,
}
_PRICES = {"input_per_mtok": 1, "output_per_mtok": 2}
_CALL_USD = Decimal("0.000013")
"""What one answer costs: 3 prompt tokens at $1, 5 completion tokens at $2 per million."""
_OUTPUT_CAP = 5
_WINDOWS = {"a day": "day", "a month": "month", "in 2 hours rolling": "rolling"}


@dataclass
class _SpendWorld:
    config: dict[str, Any]
    clock: list[datetime] = field(default_factory=lambda: [datetime.now(UTC)])
    plans: dict[str, SpendLimits | None] = field(default_factory=dict)
    uses_hook: bool = False
    meter_reader: InMemoryMetricReader | None = None
    meter_provider: MeterProvider | None = None
    results: list[ExecutionResult] = field(default_factory=list)
    errors: list[BaseException | None] = field(default_factory=list)
    responses: list[httpx.Response] = field(default_factory=list)

    def executor(self) -> ActorExecutor:
        built = ActorExecutor.from_config(self.config)
        limits: Any = self.hook if self.uses_hook else built.spend_limits
        meter = self.meter_provider
        return ActorExecutor(
            built.agent,
            name=built.name,
            store=built.store,
            spend_limits=limits,
            clock=lambda: self.clock[0],
            meter_provider=meter,
        )

    async def hook(self, caller: str | None) -> SpendLimits | None:
        """An application's hook, asynchronous as one reading a billing service would be."""
        await asyncio.sleep(0)
        return self.plans.get(caller or "")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _actor(context: Context, database: str, script: list[dict[str, Any]]) -> dict[str, Any]:
    if database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-spend-"))
        url = f"sqlite:///{folder / 'store.db'}"
    else:
        url = str(context.postgres.new_database())
    return {
        "name": "spender",
        "agent": {
            "provider": "stub",
            "script": script,
            "pricing": _PRICES,
            "tools": [{"name": "get_weather", "handler": "cleveractors.demo:get_weather"}],
        },
        "store": {"url": url},
    }


def _limits(amount: str, unit: str, per: str, *, strict: bool = False) -> dict[str, Any]:
    window = _WINDOWS[per]
    limit: dict[str, Any] = {"window": window, unit: amount}
    if window == "rolling":
        limit["hours"] = 2
    return {"limits": [limit], "strict": strict}


def _world(context: Context) -> _SpendWorld:
    world: _SpendWorld = context.spend
    return world


@given(
    "an actor on a fresh {database} store whose callers may spend ${amount} a day, strict {strict}"
)
def _usd_actor(context: Context, database: str, amount: str, strict: str) -> None:
    config = _actor(context, database, [_ANSWER])
    config["spend_limits"] = _limits(amount, "usd", "a day", strict=strict == "true")
    context.spend = _SpendWorld(config)


@given(
    "an actor on a fresh sqlite store whose callers may spend {amount:d} tokens {per}, "
    "strict {strict}"
)
def _token_actor(context: Context, amount: int, per: str, strict: str) -> None:
    config = _actor(context, "sqlite", [_ANSWER])
    config["spend_limits"] = _limits(str(amount), "tokens", per, strict=strict == "true")
    context.spend = _SpendWorld(config)


@given(
    "an actor whose model answers 503, on a fresh sqlite store whose callers may spend "
    "{amount:d} tokens a day"
)
def _failing_actor(context: Context, amount: int) -> None:
    config = _actor(context, "sqlite", [{"error": "overloaded", "error_status": 503}])
    config["agent"]["max_retries"] = 0
    config["spend_limits"] = _limits(str(amount), "tokens", "a day")
    context.spend = _SpendWorld(config)


@then("the last run failed, and alice's day window shows 0 spent and 0 reserved")
def _failed_released(context: Context) -> None:
    world = _world(context)
    result, error = _last(world)
    assert error is not None, result
    assert [call.usage.total_tokens for call in result.usage_by_call] == [0], result
    (entry,) = result.spend_left
    assert (entry.window, entry.spent, entry.reserved, entry.left) == ("day", 0, 0, 20), entry


@given(
    "an actor with an MCP server that cannot start, on a fresh sqlite store whose callers may "
    "spend {amount:d} tokens a day"
)
def _broken_mcp_actor(context: Context, amount: int) -> None:
    config = _actor(context, "sqlite", [_ANSWER])
    config["agent"]["mcp_servers"] = [{"name": "gone", "command": ["/nonexistent/mcp-server"]}]
    config["spend_limits"] = _limits(str(amount), "tokens", "a day")
    context.spend = _SpendWorld(config)


@given('a worker that died mid-call had reserved {tokens:d} tokens for caller "{caller}"')
def _dead_worker(context: Context, tokens: int, caller: str) -> None:
    world = _world(context)

    async def reserve() -> None:
        async with world.executor() as executor:
            assert executor.store is not None
            limits = SpendLimits.model_validate(world.config["spend_limits"])
            account = SpendAccount(executor.store.engine, caller, limits, lambda: world.clock[0])
            await account.reserve(1, tokens=tokens, cost_usd=None)  # and never settles it

    asyncio.run(reserve())


@when('caller "{caller}" sends a message to the executor without opening it first')
def _send_unopened(context: Context, caller: str) -> None:
    world = _world(context)

    async def send() -> None:
        executor = world.executor()
        error: BaseException | None = None
        try:
            await executor.execute("Hello", caller=caller)
        except Exception as exc:
            error = exc
        finally:
            await executor.aclose()
        assert executor.last_result is not None
        world.results.append(executor.last_result)
        world.errors.append(error)

    asyncio.run(send())


@then("the last run failed with {error_type}, and alice's day window shows 0 spent and 0 reserved")
def _failed_before_call(context: Context, error_type: str) -> None:
    world = _world(context)
    result, error = _last(world)
    assert type(error).__name__ == error_type, repr(error)
    assert result.usage_by_call == (), result
    (entry,) = result.spend_left
    assert (entry.spent, entry.reserved, entry.left) == (0, 0, 20), entry


@given(
    "an actor whose weather lookup waits for approval, on a fresh sqlite store whose limits "
    "come from a hook of plans by caller"
)
def _gated_actor(context: Context) -> None:
    config = _actor(context, "sqlite", [_LOOKUP, _ANSWER])
    config["agent"]["tools"][0]["approval"] = "required"
    context.spend = _SpendWorld(config, uses_hook=True)


@then("the last run paused, its lookup billed: {tokens:d} tokens spent in the day window")
def _paused(context: Context, tokens: int) -> None:
    result, error = _last(_world(context))
    assert error is None, error
    assert result.status == "paused", result
    context.spend_paused = result.run_id
    (entry,) = result.spend_left
    assert (entry.spent, entry.reserved) == (tokens, 0), entry


@when('caller "{caller}" approves the paused lookup')
def _approve(context: Context, caller: str) -> None:
    world = _world(context)
    decision = ApprovalDecision(call_id="w1", decision="approve")

    async def resume() -> None:
        async with world.executor() as executor:
            stream = executor.execute_events(
                Resumption(context.spend_paused, [decision], caller=caller)
            )
            error: BaseException | None = None
            try:
                async for _event in stream:
                    pass
            except Exception as exc:
                error = exc
            assert stream.result is not None
            world.results.append(stream.result)
            world.errors.append(error)

    asyncio.run(resume())


@given("an actor on a fresh sqlite store whose limits come from a hook of plans by caller")
def _hook_actor(context: Context) -> None:
    context.spend = _SpendWorld(_actor(context, "sqlite", [_ANSWER]), uses_hook=True)


@given(
    "an actor that looks the weather up then answers, on a fresh sqlite store whose callers "
    "may spend {amount:d} tokens a day"
)
def _tool_actor(context: Context, amount: int) -> None:
    config = _actor(context, "sqlite", [_LOOKUP, _ANSWER])
    config["spend_limits"] = _limits(str(amount), "tokens", "a day")
    context.spend = _SpendWorld(config)


@given('caller "{caller}" is on a plan of {amount:d} tokens a day')
@when('caller "{caller}" moves to a plan of {amount:d} tokens a day')
def _plan(context: Context, caller: str, amount: int) -> None:
    _world(context).plans[caller] = SpendLimits.model_validate(
        _limits(str(amount), "tokens", "a day")
    )


@when('caller "{caller}" moves to no plan')
def _no_plan(context: Context, caller: str) -> None:
    _world(context).plans[caller] = None


@given("the clock reads {moment} UTC")
@when("the clock reads {moment} UTC")
def _clock(context: Context, moment: str) -> None:
    _world(context).clock[0] = datetime.fromisoformat(moment).replace(tzinfo=UTC)


@given("the executor records metrics")
def _metrics(context: Context) -> None:
    world = _world(context)
    world.meter_reader = InMemoryMetricReader()
    world.meter_provider = MeterProvider([world.meter_reader])


async def _send(world: _SpendWorld, caller: str, count: int) -> None:
    async with world.executor() as executor:

        async def one() -> tuple[ExecutionResult, BaseException | None]:
            stream = executor.execute_events("Hello", caller=caller, max_output_tokens=_OUTPUT_CAP)
            try:
                async for _event in stream:
                    pass
            except Exception as exc:
                assert stream.result is not None
                return stream.result, exc
            assert stream.result is not None
            return stream.result, None

        for result, error in await asyncio.gather(*(one() for _ in range(count))):
            world.results.append(result)
            world.errors.append(error)


@when('caller "{caller}" sends {count:d} messages at once')
def _send_many(context: Context, caller: str, count: int) -> None:
    asyncio.run(_send(_world(context), caller, count))


@when('caller "{caller}" sends a message')
def _send_one(context: Context, caller: str) -> None:
    asyncio.run(_send(_world(context), caller, 1))


async def _ledger(world: _SpendWorld) -> list[Any]:
    async with world.executor() as executor:
        assert executor.store is not None
        return list((await executor.store.usage()).rows)


def _answered(world: _SpendWorld) -> list[ExecutionResult]:
    return [result for result in world.results if result.error is None]


@then("some runs answered and every other run was refused with SpendLimitExceeded, billing nothing")
def _some_answered(context: Context) -> None:
    world = _world(context)
    answered = _answered(world)
    assert 0 < len(answered) < len(world.results), len(answered)
    for result, error in zip(world.results, world.errors, strict=True):
        if result.error is None:
            continue
        assert isinstance(error, SpendLimitExceeded), error
        assert result.usage_by_call == (), result
        assert any(left.refused for left in result.spend_left), result.spend_left


@then("no refused run has a ledger row, and the ledger bills the answered runs only")
def _ledger_of_answered(context: Context) -> None:
    world = _world(context)
    rows = asyncio.run(_ledger(world))
    assert {row.run_id for row in rows} == {result.run_id for result in _answered(world)}
    assert len(rows) == len(_answered(world))
    context.spend_rows = rows


@then("the ledger's total is within the limit {bound}")
def _within(context: Context, bound: str) -> None:
    world = _world(context)
    billed = sum((row.cost_usd for row in context.spend_rows), Decimal(0))
    limit = Decimal(world.config["spend_limits"]["limits"][0]["usd"])
    if bound == "exactly":
        assert billed <= limit, (billed, limit)
        return
    # Each answered call reserved its prompt as estimated (8 tokens at $1 per million).
    beyond = _CALL_USD - Decimal("0.000008")
    assert billed <= limit + len(context.spend_rows) * beyond, (billed, limit)
    assert billed > limit - _CALL_USD, (billed, limit)  # the limit was reached, not just passed


@then("alice's day window counts what the ledger billed, with nothing reserved")
def _window_counts(context: Context) -> None:
    world = _world(context)
    billed = sum((row.cost_usd for row in context.spend_rows), Decimal(0))

    async def read() -> tuple[SpendLeft, ...]:
        async with world.executor() as executor:
            assert executor.store is not None
            limits = SpendLimits.model_validate(world.config["spend_limits"])
            return await read_spend_left(executor.store.engine, "alice", limits, _utc_now)

    (window,) = asyncio.run(read())
    assert window.window == "day"
    assert window.spent == billed, (window, billed)
    assert window.reserved == 0, window


def _last(world: _SpendWorld) -> tuple[ExecutionResult, BaseException | None]:
    return world.results[-1], world.errors[-1]


@then(
    'the last run was refused: the {window} limit ({unit}) of "{caller}", resetting at {moment} UTC'
)
def _refused_named(context: Context, window: str, unit: str, caller: str, moment: str) -> None:
    _result, error = _last(_world(context))
    assert isinstance(error, SpendLimitExceeded), error
    assert (error.caller, error.window, error.unit) == (caller, window, unit), vars(error)
    assert error.resets_at == datetime.fromisoformat(moment).replace(tzinfo=UTC), error.resets_at
    assert caller in str(error), str(error)
    assert moment.replace(" ", "T") in str(error), str(error)


@then("the last run's result marks the {window} window refused, with {left:d} tokens left")
def _marked(context: Context, window: str, left: int) -> None:
    result, _error = _last(_world(context))
    (entry,) = result.spend_left
    assert (entry.window, entry.refused, entry.left) == (window, True, left), entry
    assert result.total_tokens == 0, result


@then("the model was asked {count:d} times, and the ledger holds {rows:d} rows")
def _asked(context: Context, count: int, rows: int) -> None:
    world = _world(context)
    assert sum(len(result.usage_by_call) for result in world.results) == count
    assert len(asyncio.run(_ledger(world))) == rows


@then('caller "{caller}" still gets an answer')
def _other_caller(context: Context, caller: str) -> None:
    world = _world(context)
    asyncio.run(_send(world, caller, 1))
    result, error = _last(world)
    assert error is None, error
    assert result.answer == "Hi.", result


@then("the last run was refused with SpendLimitExceeded")
def _refused(context: Context) -> None:
    result, error = _last(_world(context))
    assert isinstance(error, SpendLimitExceeded), error
    assert result.usage_by_call == (), result


@then("the last run answered, its result showing {tokens:d} tokens spent in the {window} window")
def _answered_with(context: Context, tokens: int, window: str) -> None:
    result, error = _last(_world(context))
    assert error is None, error
    (entry,) = result.spend_left
    assert (entry.window, entry.unit, entry.spent, entry.reserved) == (window, "tokens", tokens, 0)


@then("the last run answered, its result showing no spend limits")
def _no_limits(context: Context) -> None:
    result, error = _last(_world(context))
    assert error is None, error
    assert result.spend_left == (), result.spend_left


@then('the last run failed with SpendLimitExceeded after its tool round, flagged "{reason}"')
def _stopped(context: Context, reason: str) -> None:
    result, error = _last(_world(context))
    assert isinstance(error, SpendLimitExceeded), error
    assert result.synthesis_reason == reason, result.synthesis_reason
    assert [call.status for call in result.tool_calls] == ["ok"], result.tool_calls
    (entry,) = result.spend_left
    assert (entry.spent, entry.reserved) == (52, 0), entry


@then("its lookup call is billed and in the ledger, and nothing more")
def _lookup_billed(context: Context) -> None:
    world = _world(context)
    result, _error = _last(world)
    assert [call.usage.total_tokens for call in result.usage_by_call] == [52], result
    (row,) = asyncio.run(_ledger(world))
    assert (row.run_id, row.total_tokens) == (result.run_id, 52), row


@then("the refusals metric counts {count:d} for the actor, with no caller among its attributes")
def _refusal_metric(context: Context, count: int) -> None:
    reader = _world(context).meter_reader
    assert reader is not None
    data = reader.get_metrics_data()
    assert data is not None
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "cleveractors.spend_limit.refusals"
        for point in metric.data.data_points
    ]
    assert [dict(point.attributes or {}) for point in points] == [
        {"gen_ai.agent.name": "spender"}
    ], points
    assert sum(int(point.value) for point in points) == count  # type: ignore[attr-defined]


# -- over the web -------------------------------------------------------------------------------


@when('caller "{caller}" asks "{message}" through {route}')
def _ask(context: Context, caller: str, message: str, route: str) -> None:
    world = _world(context)

    async def caller_from_header(request: Request) -> str | None:
        return request.headers.get("x-caller")

    async def send() -> httpx.Response:
        executor = world.executor()
        limits, executor.spend_limits = executor.spend_limits, None
        app = create_app(executor, authenticate=caller_from_header, spend_limits=limits)
        transport = httpx.ASGITransport(app=app)
        body: dict[str, Any] = {"message": message}
        if route != "/chat":
            body = {"model": "spender", "messages": [{"role": "user", "content": message}]}
        async with (
            executor,
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client,
        ):
            return await client.post(route, json=body, headers={"X-Caller": caller})

    world.responses.append(asyncio.run(send()))


@then("the first response answered and told what alice has left, in the format of {route}")
def _first_told(context: Context, route: str) -> None:
    response = _world(context).responses[0]
    assert response.status_code == 200, response.text
    if route != "/chat":  # OpenAI's format has no place for it: the result's on_usage has it
        return
    frames = [
        json.loads(line.removeprefix("data:"))
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]
    (finished,) = [frame for frame in frames if frame.get("kind") == "run_finished"]
    (left,) = finished["result"]["spend_left"]
    assert (left["window"], left["spent"], left["left"]) == ("day", "8", "2"), left


@then("the last response is 429 with a Retry-After until the day's end, in the format of {route}")
def _too_many(context: Context, route: str) -> None:
    response = _world(context).responses[-1]
    assert response.status_code == 429, response.text
    now = datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp() + 86400
    assert abs(int(response.headers["retry-after"]) - (midnight - now.timestamp())) < 60
    assert "x-run-id" not in response.headers
    if route == "/chat":
        assert "day spend limit" in response.json()["detail"], response.text
        return
    error = response.json()["error"]
    assert (error["type"], error["code"]) == ("insufficient_quota", "insufficient_quota"), error
    assert "day spend limit" in error["message"], error


# -- limits that cannot hold -----------------------------------------------------------------------


def _bad_config(context: Context, limits: str) -> dict[str, Any]:
    config = _actor(context, "sqlite", [_ANSWER])
    day = {"window": "day", "usd": 5}
    if limits == "5 USD a day without a store":
        del config["store"]
    elif limits == "a day limit with neither usd nor tokens":
        day = {"window": "day"}
    elif limits == "a day limit of 5 hours":
        day = {"window": "day", "usd": 5, "hours": 5}
    elif limits == "5 USD a day for a model with no price":
        del config["agent"]["pricing"]
    config["spend_limits"] = {
        "limits": [day, day] if limits == "two day limits" else [day],
        "strict": limits == "strict for a model with no output cap",
    }
    return config


@given("an actor whose spend limits are {limits}")
def _bad_limits(context: Context, limits: str) -> None:
    context.spend_config = _bad_config(context, limits)


@then('building or running it fails naming "{message}"')
def _fails(context: Context, message: str) -> None:
    async def run() -> None:
        async with ActorExecutor.from_config(context.spend_config) as executor:
            await executor.execute("Hello", caller="alice")

    failure: CleverActorsError | None = None
    try:
        asyncio.run(run())
    except CleverActorsError as exc:
        failure = exc
    assert failure is not None, "the actor ran"
    assert message in str(failure), str(failure)


# -- the command line ------------------------------------------------------------------------------


@when('the operator runs `cleveractors usage` for caller "{caller}"')
def _usage_table(context: Context, caller: str) -> None:
    _usage_cli(context, caller, as_json=False)


@when('the operator runs `cleveractors usage` for caller "{caller}" --json')
def _usage_json_cli(context: Context, caller: str) -> None:
    _usage_cli(context, caller, as_json=True)


def _usage_cli(context: Context, caller: str, *, as_json: bool) -> None:
    world = _world(context)
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-spend-cli-"))
    actor = folder / "actor.json"
    actor.write_text(json.dumps(world.config), encoding="utf-8")
    arguments = ["usage", str(actor), "--caller", caller]
    if as_json:
        arguments.append("--json")
    context.cli = CliRunner().invoke(app, arguments)


@then("it prints the {window} window: limit {limit}, spent {spent}, reserved 0, left {left}")
def _usage_printed(context: Context, window: str, limit: str, spent: str, left: str) -> None:
    result = context.cli
    assert result.exit_code == 0, result.output
    (row,) = [
        line.split() for line in result.output.splitlines() if line.strip().startswith(window)
    ]
    assert row[:6] == [window, "tokens", limit, spent, "0", left], row


@then("its JSON names the caller and the {window} window: spent {spent}, left {left}")
def _usage_json(context: Context, window: str, spent: str, left: str) -> None:
    result = context.cli
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    (entry,) = report["windows"]
    assert report["caller"] == "alice", report
    assert (entry["window"], entry["spent"], entry["left"]) == (window, spent, left), entry


@then('it fails naming "{message}"')
def _usage_fails(context: Context, message: str) -> None:
    result = context.cli
    assert result.exit_code != 0, result.output
    assert message in result.output, result.output
