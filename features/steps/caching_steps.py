"""Steps about prompt caching: an actor file on a scripted Anthropic or OpenAI server (real HTTP,
ChatAnthropic and ChatOpenAI built from the config), its requests, and the saving shown on the
result, the usage table, `cleveractors usage --json` and the ledger's table.

Every step text starts with "the cached actor", "every request", "every breakpoint", "the
requests carry", "no request", "a request with", "the scripted Anthropic server answered",
"the result's cache", "the saving is", "the usage table", "the ledger table" or
"cleveractors usage --json", so none shadows the steps of other modules.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import yaml
from behave import given, then, when
from behave.runner import Context
from rich.console import Console
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from support.harness import guarded, run_guarded
from support.sdk_requests import anthropic_request_problems, breakpoints, openai_request_problems
from typer.testing import CliRunner

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.cli import app, ledger_table, usage_table
from cleveractors.store import SqlStore, UsageReport
from cleveractors.store.engine import async_url
from cleveractors.store.schema import llm_calls, schema_version
from cleveractors.testing import (
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
    ScriptedOpenAIServer,
    ScriptedReply,
)
from cleveractors.testing.tables import scripted_reply
from cleveractors.testing.wire import ScriptedWireServer

_KEY_ENV = "CLEVERACTORS_CACHING_TEST_KEY"
_MODELS = {"Anthropic": "claude-sonnet-4-5", "OpenAI": "gpt-4o"}
_PER_MTOK = Decimal(1_000_000)


def _server(context: Context) -> ScriptedWireServer[Any]:
    server: ScriptedWireServer[Any] = context.cache_server
    return server


@given("the cached actor speaks to a scripted {provider} server with {setting}, which answers:")
def _given_cached_actor(context: Context, provider: str, setting: str) -> None:
    replies = [_reply(row.as_dict()) for row in context.table]
    server: ScriptedWireServer[Any] = (
        ScriptedAnthropicServer(replies)
        if provider == "Anthropic"
        else ScriptedOpenAIServer(replies)
    )
    server.start()
    context.add_cleanup(server.stop)
    context.cache_server = server
    context.cache_provider = provider
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-caching-"))
    name, _, value = setting.partition(" ")
    agent: dict[str, Any] = {
        "provider": provider.lower(),
        "model": _MODELS[provider],
        "base_url": server.base_url,
        "api_key_env": _KEY_ENV,
        "max_retries": 0,
        "system_prompt": "You answer questions about the weather.",
        "tools": [
            {"name": "find_nothing", "handler": "support.caching_tools:find_nothing"},
            {"name": "get_weather", "handler": "cleveractors.demo:get_weather"},
        ],
        name: yaml.safe_load(value),
    }
    actor = {"name": "cached-weather", "agent": agent, "store": {"url": "sqlite:///store.db"}}
    context.cache_actor = folder / "actor.yaml"
    context.cache_actor.write_text(yaml.safe_dump(actor))
    os.environ[_KEY_ENV] = "sk-scripted"  # the scenario's environment is put back after it


def _reply(cells: dict[str, str]) -> ScriptedReply:
    """A scripted reply from a row; a `thinking` column makes it a Messages API reply."""
    thinking = cells.pop("thinking", "")
    reply = scripted_reply(cells)
    if not thinking:
        return reply
    return ScriptedAnthropicReply(**reply.model_dump(), thinking=thinking)


@when('the cached actor is asked "{message}" in session "{session}", {mode}')
def _when_asked_in_session(context: Context, message: str, session: str, mode: str) -> None:
    context.cache_result = _in_loop(context).run(guarded(_ask(context, message, session, mode)))


@when('the cached actor is asked "{message}" without a session, {mode}')
def _when_asked_alone(context: Context, message: str, mode: str) -> None:
    context.cache_result = _in_loop(context).run(guarded(_ask(context, message, None, mode)))


def _in_loop(context: Context) -> asyncio.Runner:
    """The scenario's one event loop: the actor's chat model keeps its HTTP client across
    messages, as a server's executor does, and a client belongs to one loop."""
    if not hasattr(context, "cache_loop"):
        context.cache_loop = asyncio.Runner()
        context.add_cleanup(context.cache_loop.close)
    runner: asyncio.Runner = context.cache_loop
    return runner


async def _ask(context: Context, message: str, session: str | None, mode: str) -> ExecutionResult:
    if not hasattr(context, "cache_executor"):
        executor = context.cache_executor = ActorExecutor.from_config(context.cache_actor)
        await executor.__aenter__()
        loop: asyncio.Runner = context.cache_loop
        context.add_cleanup(lambda: loop.run(executor.__aexit__(None, None, None)))
    executor = context.cache_executor
    if mode == "blocking":
        return await executor.execute(message, session_id=session)
    stream = executor.execute_events(message, session_id=session)
    async for _ in stream:
        pass
    assert stream.result is not None
    return stream.result


@when("a request with {count:d} breakpoints is sent to the scripted Anthropic server")
def _when_raw_request(context: Context, count: int) -> None:
    mark = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"Part {n}.", "cache_control": mark} for n in range(count)]
    body = {
        "model": _MODELS["Anthropic"],
        "max_tokens": 64,
        "messages": [{"role": "user", "content": blocks}],
    }
    context.cache_response = httpx.post(
        f"{_server(context).base_url}/v1/messages", json=body, headers={"x-api-key": "k"}
    )


@then('the scripted Anthropic server answered {status:d} "{message}"')
def _then_answered(context: Context, status: int, message: str) -> None:
    response: httpx.Response = context.cache_response
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"] == message, response.text


@then("every request is accepted by the {sdk} SDK's {params}")
def _then_sdk_accepts(context: Context, sdk: str, params: str) -> None:
    check = anthropic_request_problems if sdk == "anthropic" else openai_request_problems
    requests = _server(context).requests
    assert requests, "no request reached the server"
    problems = {number: check(body) for number, body in enumerate(requests, start=1)}
    assert not any(problems.values()), problems


@then('every breakpoint has the lifetime "{ttl}"')
def _then_lifetime(context: Context, ttl: str) -> None:
    marks = [mark for body in _server(context).requests for _, mark in breakpoints(body)]
    assert marks, "no breakpoint was sent"
    assert all(mark == {"type": "ephemeral", "ttl": ttl} for mark in marks), marks


@then("the requests carry breakpoints exactly at:")
def _then_breakpoints(context: Context) -> None:
    requests = _server(context).requests
    found = [", ".join(path for path, _ in breakpoints(body)) for body in requests]
    expected = [row["breakpoints"] for row in context.table]
    assert found == expected, json.dumps(found, indent=1)


@then("request {number:d} ends with the synthesis instruction, unmarked")
def _then_instruction_unmarked(context: Context, number: int) -> None:
    last = _server(context).requests[number - 1]["messages"][-1]["content"][-1]
    assert last["type"] == "text", last
    assert last["text"].startswith("Stop using tools now"), last
    assert "cache_control" not in last, last


@then('the requests carry the prompt_cache_keys "{keys}"')
def _then_keys(context: Context, keys: str) -> None:
    requests = _server(context).requests
    sent = [body.get("prompt_cache_key") for body in requests]
    expected = [key.strip() for key in keys.split(",")]
    # Two rounds in the session, then one call without a session.
    assert sent == expected, sent


@then("no request carries cache_control or prompt_cache_key")
def _then_nothing_sent(context: Context) -> None:
    requests = _server(context).requests
    assert len(requests) == 2, requests
    for body in requests:
        assert "cache_control" not in json.dumps(body), body
        assert "prompt_cache_key" not in body, body


@then(
    "the result's cache_read_tokens is {read:d}, cache_hit_rate {rate:g} and "
    "cache_savings_usd {saved}"
)
def _then_result_saving(context: Context, read: int, rate: float, saved: str) -> None:
    result: ExecutionResult = context.cache_result
    assert result.cache_read_tokens == read, result
    assert result.cache_hit_rate == rate, result.cache_hit_rate
    expected = None if saved == "None" else Decimal(saved)
    assert result.cache_savings_usd == expected, result.cache_savings_usd


@then(
    "the saving is the server's billed cache reads and writes at {input_price} input, "
    "{read_price} read and {write_price} write"
)
def _then_saving_billed(
    context: Context, input_price: str, read_price: str, write_price: str
) -> None:
    billed = _server(context).billed
    assert len(billed) == 1, billed
    call = billed[0]
    price = Decimal(input_price)
    written = getattr(call, "cache_write_tokens", 0)
    expected = (
        call.cached_tokens * (price - Decimal(read_price))
        + written * (price - Decimal(write_price))
    ) / _PER_MTOK
    assert context.cache_result.cache_savings_usd == expected, (
        context.cache_result.cache_savings_usd,
        expected,
    )


def _rendered(table: Any) -> str:
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(table)
    output = console.file.getvalue()
    assert isinstance(output, str)
    return output


@then('the usage table\'s line under it reads "{line}"')
def _then_usage_caption(context: Context, line: str) -> None:
    lines = [each.strip() for each in _rendered(usage_table(context.cache_result)).splitlines()]
    assert line in lines, lines


@then('the usage table has no column "{title}"')
def _then_no_column(context: Context, title: str) -> None:
    output = _rendered(usage_table(context.cache_result))
    assert title not in output, output
    assert "cache hit rate" not in output, output


def _usage_report(context: Context) -> UsageReport:
    runner = CliRunner()
    ran = runner.invoke(app, ["usage", str(context.cache_actor), "--json"])
    assert ran.exit_code == 0, ran.output
    return UsageReport.model_validate_json(ran.stdout)


@then(
    "cleveractors usage --json reports cache_read_tokens {read:d}, cache_hit_rate {rate:g} and "
    "cache_savings_usd {saved}"
)
def _then_usage_json(context: Context, read: int, rate: float, saved: str) -> None:
    runner = CliRunner()
    ran = runner.invoke(app, ["usage", str(context.cache_actor), "--json"])
    assert ran.exit_code == 0, ran.output
    report = json.loads(ran.stdout)
    assert report["cache_read_tokens"] == read, report
    assert report["cache_hit_rate"] == rate, report
    assert Decimal(report["cache_savings_usd"]) == Decimal(saved), report
    assert Decimal(report["rows"][0]["cache_savings_usd"]) == Decimal(saved), report


@then('the ledger table\'s line under it reads "{line}"')
def _then_ledger_caption(context: Context, line: str) -> None:
    lines = [each.strip() for each in _rendered(ledger_table(_usage_report(context))).splitlines()]
    assert line in lines, lines


# -- a ledger written before savings were kept ---------------------------------------------------

_V5_ROW = {
    "run_id": "run-old",
    "session_id": "s-1",
    "caller": "",
    "recorded_at": "2026-11-01 12:00:00.000000",
    "purpose": "round",
    "round": 1,
    "attempt": 1,
    "status": "ok",
    "prompt_tokens": 1000,
    "completion_tokens": 10,
    "cache_write_tokens": 0,
    "reasoning_tokens": 0,
    "estimated": False,
    "provider": "openai",
    "model": "gpt-4o",
    "cost_usd": "0.0026",
}


@given(
    "a SQLite ledger of schema version 5 with a priced call that cached nothing and a priced "
    "call that read {read:d} tokens from the cache"
)
def _given_v5_ledger(context: Context, read: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-caching-"))
    context.cache_store_url = f"sqlite:///{folder / 'store.db'}"
    rows = [{**_V5_ROW, "call_index": 1, "cache_read_tokens": 0}]
    rows.append({**_V5_ROW, "call_index": 2, "cache_read_tokens": read})

    async def make() -> None:
        async with SqlStore(context.cache_store_url):
            pass  # the tables as they are now; then back to version 5's ledger
        engine = create_async_engine(async_url(context.cache_store_url))
        try:
            async with engine.begin() as connection:
                await connection.execute(text(f"ALTER TABLE {llm_calls.name} DROP COLUMN {_SAVED}"))
                await connection.execute(text(f"UPDATE {schema_version.name} SET version = 5"))
                columns = ", ".join(rows[0])
                values = ", ".join(f":{name}" for name in rows[0])
                insert = text(f"INSERT INTO {llm_calls.name} ({columns}) VALUES ({values})")
                await connection.execute(insert, rows)
        finally:
            await engine.dispose()

    run_guarded(make())


_SAVED = "cache_savings_usd"


@when("the cached actor's store opens it and reports the usage")
def _when_store_reports(context: Context) -> None:
    async def report() -> UsageReport:
        async with SqlStore(context.cache_store_url) as store:
            return await store.usage()

    context.cache_report = run_guarded(report())


@then("the ledger's rows saved \"{savings}\" and the report's cache_savings_usd is None")
def _then_old_rows(context: Context, savings: str) -> None:
    report: UsageReport = context.cache_report
    assert [str(row.cache_savings_usd) for row in report.rows] == savings.split(", "), report
    assert report.cache_savings_usd is None, report


@then("the ledger has a cache_savings_usd column")
def _then_column(context: Context) -> None:
    async def columns() -> list[str]:
        engine = create_async_engine(async_url(context.cache_store_url))
        try:
            async with engine.connect() as connection:
                found = await connection.execute(text(f"PRAGMA table_info({llm_calls.name})"))
                return [row[1] for row in found]
        finally:
            await engine.dispose()

    assert _SAVED in run_guarded(columns())
