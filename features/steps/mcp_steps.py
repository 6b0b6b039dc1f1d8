"""Steps about MCP servers: real servers (features/support/mcp_servers) over stdio and HTTP.

The stdio server appends its pid to the file named by MCP_TEST_LOG when it starts, and a line
when it sees a call cancelled, so the steps can check the process table and the cancellation.
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context
from support.harness import (
    HANG_GUARD_S,
    Consumption,
    Mode,
    Stop,
    consume,
    run_guarded,
    wait_until,
)

from cleveractors import ActorExecutor, LLMAgent, McpServer
from cleveractors.events import RunFailed
from cleveractors.result import ErrorInfo
from cleveractors.store import SqlStore
from cleveractors.testing import ScriptedChatModel

_SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "tool_server.py"
_SECRET = "mcp-test-secret-0f9e8d"


def _servers(context: Context) -> list[dict[str, Any]]:
    servers: list[dict[str, Any]] = context.actor["agent"].setdefault("mcp_servers", [])
    return servers


def _server(context: Context, name: str) -> dict[str, Any]:
    return next(server for server in _servers(context) if server["name"] == name)


def _log_lines(context: Context) -> list[str]:
    return Path(context.mcp_log).read_text(encoding="utf-8").splitlines()


def _server_pids(context: Context) -> list[int]:
    return [int(line.split()[1]) for line in _log_lines(context) if line.startswith("pid ")]


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's bookkeeping is left


async def _ask(executor: ActorExecutor, message: str, mode: str) -> Consumption:
    return await consume(executor, message, mode="text" if mode == "streaming" else "blocking")


def _run(context: Context, work: Callable[[], Awaitable[Any]]) -> Any:
    return run_guarded(work())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        assert process.poll() is None, "the MCP HTTP server exited while starting"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"the MCP HTTP server never listened on port {port}")


def _start_http_server(
    context: Context, port: int, environment: dict[str, str]
) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, str(_SERVER), "http", str(port)], env=environment)
    context.add_cleanup(process.wait, 10)
    context.add_cleanup(process.terminate)
    _wait_for_port(port, process)
    return process


# -- Given: servers ----------------------------------------------------------------------------


@given('the MCP test server "{name}" over stdio')
def _given_stdio_server(context: Context, name: str) -> None:
    if not hasattr(context, "mcp_log"):
        handle, context.mcp_log = tempfile.mkstemp(prefix="mcp-test-", suffix=".log")
        os.close(handle)
        context.add_cleanup(os.unlink, context.mcp_log)
        os.environ["MCP_TEST_LOG"] = context.mcp_log
    _servers(context).append(
        {
            "name": name,
            "command": [sys.executable, str(_SERVER)],
            "env": {"MCP_TEST_LOG": "${MCP_TEST_LOG}"},
        }
    )


@given('the MCP test server "{name}" over streamable HTTP, its token from ${variable}')
def _given_http_server(context: Context, name: str, variable: str) -> None:
    port = _free_port()
    environment = {**os.environ, "MCP_TEST_BEARER": _SECRET}
    environment.pop("MCP_TEST_LOG", None)
    context.http_server = _start_http_server(context, port, environment)
    context.http_server_command = (port, environment)
    os.environ[variable] = _SECRET
    _servers(context).append(
        {
            "name": name,
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": f"Bearer ${{{variable}}}"},
        }
    )


@given('the MCP server "{name}" has {setting} {value:Json}')
def _given_server_setting(context: Context, name: str, setting: str, value: Any) -> None:
    _server(context, name)[setting.replace(" ", "_")] = value


@given("the environment variable {variable} is unset")
def _given_unset(context: Context, variable: str) -> None:
    os.environ.pop(variable, None)


_URL_PASSWORD = "url-password-7c1d"
_URL_API_KEY = "url-api-key-5b2a"


@given('the MCP server "{name}" URL carries a password and an api_key')
def _given_url_credentials(context: Context, name: str) -> None:
    server = _server(context, name)
    server["url"] = (
        server["url"].replace("http://", f"http://search-user:{_URL_PASSWORD}@")
        + f"?api_key={_URL_API_KEY}"
    )


@given('the MCP server "{name}" URL carries an api_key')
def _given_url_api_key(context: Context, name: str) -> None:
    _server(context, name)["url"] += f"?api_key={_URL_API_KEY}"


# -- When --------------------------------------------------------------------------------------


@when('the actor is asked "{message}" in {mode} mode, with its MCP servers open')
def _when_asked_open(context: Context, message: str, mode: str) -> None:
    async def work() -> Consumption:
        async with ActorExecutor.from_config(context.actor) as executor:
            context.model = executor.agent.model
            return await _ask(executor, message, mode)

    context.outcome = _run(context, work)


@when("the actor's MCP servers are opened and closed")
def _when_opened(context: Context) -> None:
    async def work() -> None:
        async with ActorExecutor.from_config(context.actor) as executor:
            context.offered = sorted(executor.agent.tools)

    context.open_error = None
    try:
        _run(context, work)
    except Exception as exc:
        context.open_error = exc


def _one_script_across_runs(executor: ActorExecutor) -> ScriptedChatModel:
    """These scenarios script two runs as one conversation: the stub's model plays its script
    once across the runs, rather than from its first reply for each run."""
    model = executor.agent.model
    assert isinstance(model, ScriptedChatModel)
    model.replay_per_run = False
    return model


async def _kill_stdio_server(context: Context) -> None:
    for pid in _server_pids(context):
        os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.2)  # let the session notice, as it would between user turns


async def _stop_http_server(context: Context) -> None:
    context.http_server.kill()
    context.http_server.wait()


async def _restart_http_server(context: Context) -> None:
    await _stop_http_server(context)
    port, environment = context.http_server_command
    await asyncio.to_thread(_start_http_server, context, port, environment)


# What happens to the actor's MCP server between its two runs, as the feature texts say it.
_BETWEEN_RUNS: dict[str, Callable[[Context], Awaitable[None]]] = {
    "its stdio server is killed": _kill_stdio_server,
    "its HTTP server is restarted": _restart_http_server,
    "its HTTP server is stopped": _stop_http_server,
}


@when('the actor is asked "{first}", {happening}, then it is asked "{second}"')
def _when_asked_around(context: Context, first: str, happening: str, second: str) -> None:
    disrupt = _BETWEEN_RUNS.get(happening)
    if disrupt is None:
        raise ValueError(f"between runs, {happening!r} is none of {sorted(_BETWEEN_RUNS)}")

    async def work() -> list[Consumption]:
        async with ActorExecutor.from_config(context.actor) as executor:
            context.model = _one_script_across_runs(executor)
            before = await _ask(executor, first, "blocking")
            await disrupt(context)
            return [before, await _ask(executor, second, "blocking")]

    context.outcomes = _run(context, work)
    context.outcome = context.outcomes[-1]


@when('an agent is built in code with two MCP servers named "{name}"')
def _when_built_in_code(context: Context, name: str) -> None:
    server = McpServer(name=name, command=(sys.executable, str(_SERVER)))
    context.open_error = None
    try:
        LLMAgent(ScriptedChatModel(replies=[]), mcp_servers=[server, server])
    except Exception as exc:
        context.open_error = exc


@when("the web app serving the actor starts and stops")
def _when_web_app(context: Context) -> None:
    from fastapi.testclient import TestClient

    from cleveractors.web import create_app

    executor = ActorExecutor.from_config(context.actor)
    with TestClient(create_app(executor)):
        context.offered = sorted(executor.agent.tools)


@when('the run of "{message}" is cancelled while the tool {tool} runs')
def _when_cancelled(context: Context, message: str, tool: str) -> None:
    def call_reached_server() -> bool:
        return any(line.startswith(f"{tool} started") for line in _log_lines(context))

    async def work() -> None:
        async with ActorExecutor.from_config(context.actor) as executor:
            context.model = executor.agent.model
            stop = Stop("cancel task", when=call_reached_server)
            consumed = await consume(executor, message, mode="events", stop=stop)
            context.cancelled_result = consumed.last_result
            await _wait_for_log_line(context, f"cancelled {tool}")

    _run(context, work)


@when("a program opens the actor by its first run and exits without closing it")
def _when_program_exits(context: Context) -> None:
    program = (
        "import asyncio, json, sys\n"
        "from cleveractors import ActorExecutor\n"
        "executor = ActorExecutor.from_config(json.loads(sys.argv[1]))\n"
        "print(asyncio.run(executor.execute('hello')).text)\n"
    )
    actor = context.actor | {"agent": context.actor["agent"] | {"script": [{"text": "hi"}]}}
    payload = _as_json(actor)
    context.program = subprocess.run(
        [sys.executable, "-c", program, payload],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


@when("a program without the mcp package loads the actor")
def _when_without_mcp(context: Context) -> None:
    program = (
        "import json, sys\n"
        "sys.modules['mcp'] = None\n"
        "import cleveractors, cleveractors.cli, cleveractors.web\n"
        "from cleveractors import ActorExecutor, ConfigurationError\n"
        "try:\n"
        "    ActorExecutor.from_config(json.loads(sys.argv[1]))\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    context.program = subprocess.run(
        [sys.executable, "-c", program, _as_json(context.actor)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )


def _as_json(actor: dict[str, Any]) -> str:
    import json

    script = [
        reply.model_dump() if hasattr(reply, "model_dump") else reply
        for reply in actor["agent"].get("script", [])
    ]
    return json.dumps(actor | {"agent": actor["agent"] | {"script": script}})


async def _wait_for_log_line(context: Context, line: str) -> None:
    # The server writes the line from its own process: nothing to await but the file.
    if not await wait_until(lambda: line in _log_lines(context)):
        raise AssertionError(f"the server never logged {line!r}: {_log_lines(context)}")


# -- Then --------------------------------------------------------------------------------------


@then("the agent offered the tools {names}")
def _then_offered(context: Context, names: str) -> None:
    assert context.open_error is None, f"opening failed: {context.open_error!r}"
    expected = sorted(name.strip() for name in names.split(","))
    assert context.offered == expected, context.offered


@then("while it served, the agent offered the tool {name}")
def _then_offered_while_serving(context: Context, name: str) -> None:
    assert name in context.offered, context.offered


@then('building it failed with {error_type} "{message}"')
@then('opening failed with {error_type} "{message}"')
def _then_open_failed(context: Context, error_type: str, message: str) -> None:
    error = context.open_error
    assert error is not None, "opening succeeded"
    assert type(error).__name__ == error_type, f"{error!r} is not a {error_type}"
    assert message in str(error), str(error)


@then('the error does not show "{value}"')
def _then_value_hidden(context: Context, value: str) -> None:
    assert value not in str(context.error), str(context.error)


@then("the error does not show the secret")
def _then_no_secret(context: Context) -> None:
    assert _SECRET not in str(context.open_error), str(context.open_error)


@then("the URL's credentials appear in no error, result or log line")
def _then_url_credentials_hidden(context: Context) -> None:
    outcome = getattr(context, "outcome", None)
    places = {
        "the error": repr(context.open_error) if hasattr(context, "open_error") else "",
        "the result": "" if outcome is None else outcome.result.model_dump_json(),
        **{
            f"log record {n} ({record.name})": record.getMessage()
            for n, record in enumerate(context.log_records)
        },
    }
    assert any("127.0.0.1" in text for text in places.values()), "no log line named the server"
    leaks = [
        where for where, text in places.items() if _URL_PASSWORD in text or _URL_API_KEY in text
    ]
    assert not leaks, f"the URL's credentials leaked into: {leaks}"


@then("the secret appears in no result, tool output or log line")
def _then_secret_hidden(context: Context) -> None:
    assert _SECRET not in context.outcome.result.model_dump_json()
    assert all(_SECRET not in record.getMessage() for record in context.log_records)


@then("the tool call {call_id} output is {expected:Json}")
def _then_output(context: Context, call_id: str, expected: str) -> None:
    record = next(r for r in context.outcome.result.tool_calls if r.call_id == call_id)
    assert record.status == "ok", record
    assert record.output == expected, record.output


@then("the model's request {number:d} had the tool {name} bound")
def _then_bound(context: Context, number: int, name: str) -> None:
    assert name in context.model.requests[number - 1].tool_names


@then("the model's request {number:d} had no tool {name} bound")
def _then_not_bound(context: Context, number: int, name: str) -> None:
    assert name not in context.model.requests[number - 1].tool_names


@then("the MCP server saw the call cancelled")
def _then_server_cancelled(context: Context) -> None:
    assert "cancelled slow" in _log_lines(context), _log_lines(context)


@then("the server started both slow calls before it ended either")
def _then_overlapped(context: Context) -> None:
    slow = [line for line in _log_lines(context) if line.startswith("slow ")]
    assert [line.split()[1] for line in slow] == ["started", "started", "ended", "ended"], slow


@then("the cancelled run's tokens are reported")
def _then_cancelled_tokens(context: Context) -> None:
    result = context.cancelled_result
    assert result is not None, "no result was kept"
    assert result.llm_calls == 1, result
    assert result.total_tokens > 0, result


@then("{count:d} stdio server processes were started")
def _then_started(context: Context, count: int) -> None:
    assert len(_server_pids(context)) == count, _log_lines(context)


@then("no MCP server process is left running")
def _then_no_orphans(context: Context) -> None:
    pids = _server_pids(context)
    assert pids, "no server process was started"
    deadline = time.monotonic() + 10
    while any(_is_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    running = [pid for pid in pids if _is_running(pid)]
    assert not running, f"server processes still running: {running}"


@then('the program printed "{text}"')
def _then_printed(context: Context, text: str) -> None:
    assert context.program.returncode == 0, context.program.stderr
    assert text in context.program.stdout, context.program.stdout


# -- Starting an executor: failures, and what a dropped executor left open ---------------------


@given('an MCP server "{name}" whose process exits at once')
def _given_exiting_server(context: Context, name: str) -> None:
    _servers(context).append(
        {"name": name, "command": [sys.executable, "-c", "raise SystemExit(3)"]}
    )


@given("the actor keeps its store in a fresh sqlite file")
def _given_sqlite_store(context: Context) -> None:
    folder = tempfile.mkdtemp(prefix="cleveractors-store-")
    context.add_cleanup(shutil.rmtree, folder, ignore_errors=True)
    context.actor["store"] = {"url": f"sqlite:///{folder}/store.db"}


@given("the actor keeps its store in a folder that does not exist")
def _given_unreachable_store(context: Context) -> None:
    folder = tempfile.mkdtemp(prefix="cleveractors-store-")
    os.rmdir(folder)
    context.actor["store"] = {"url": f"sqlite:///{folder}/store.db"}


async def _start_by_open(executor: ActorExecutor) -> ErrorInfo | None:
    try:
        await executor.open()
    except Exception as exc:
        return ErrorInfo.from_exception(exc)
    return None


async def _start_by_run(executor: ActorExecutor, mode: Mode) -> ErrorInfo | None:
    consumed = await consume(executor, "Hello.", mode=mode)
    if consumed.error is not None:
        return ErrorInfo.from_exception(consumed.error)
    failed = [event.error for event in consumed.events if isinstance(event, RunFailed)]
    return failed[0] if failed else None


# How a scenario starts its executor, as the feature texts say it; each returns what failed.
_STARTS: dict[str, Callable[[ActorExecutor], Awaitable[ErrorInfo | None]]] = {
    "open()": _start_by_open,
    "its first run": partial(_start_by_run, mode="blocking"),
    "its first streamed run": partial(_start_by_run, mode="events"),
}


def _start(start: str) -> Callable[[ActorExecutor], Awaitable[ErrorInfo | None]]:
    if start not in _STARTS:
        raise ValueError(f"{start!r} is none of {sorted(_STARTS)}")
    return _STARTS[start]


def _warnings_on_drop(held: list[ActorExecutor]) -> list[str]:
    """The ResourceWarnings the executor, held only by `held`, gives when it is collected."""
    gc.collect()  # what earlier scenarios left for the collector warns before, not here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        held.clear()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


async def _alive_after_stopping(pids: list[int]) -> list[int]:
    """The processes still alive once a stopping one has had time to exit."""
    await wait_until(lambda: not any(_is_running(pid) for pid in pids), timeout_s=5)
    return [pid for pid in pids if _is_running(pid)]


@when("the executor is started by {start}, which fails")
def _when_start_fails(context: Context, start: str) -> None:
    begin = _start(start)

    async def work() -> None:
        held = [ActorExecutor.from_config(context.actor)]
        context.start_error = await begin(held[0])
        context.alive_after_error = await _alive_after_stopping(_server_pids(context))
        store = held[0].store
        context.store_was_open = store is not None and _is_open(store)
        context.drop_warnings = _warnings_on_drop(held)

    _run(context, work)


@when("the executor is started by {start}, then dropped without aclose()")
def _when_dropped_open(context: Context, start: str) -> None:
    begin = _start(start)

    async def work() -> None:
        held = [ActorExecutor.from_config(context.actor)]
        agent, store = held[0].agent, held[0].store
        context.start_error = await begin(held[0])
        try:
            context.drop_warnings = _warnings_on_drop(held)
        finally:  # what the dropped executor left open, closed here so as not to leak it
            await agent.aclose()
            if store is not None:
                await store.aclose()

    _run(context, work)


def _is_open(store: SqlStore) -> bool:
    try:
        store.engine  # noqa: B018 (the store's own word on whether it is open)
    except RuntimeError:
        return False
    return True


@then('starting failed with {error_type} "{message}"')
def _then_start_failed(context: Context, error_type: str, message: str) -> None:
    error = context.start_error
    assert error is not None, "starting succeeded"
    assert error.type == error_type, f"{error} is not a {error_type}"
    assert message in error.message, error.message


@then("right after the error, no MCP server process it started was alive")
def _then_none_alive(context: Context) -> None:
    assert _server_pids(context), "no server process was started"
    assert not context.alive_after_error, (
        f"server processes still running after the error: {context.alive_after_error}"
    )


@then("no MCP server process was started")
def _then_none_started(context: Context) -> None:
    assert not _server_pids(context), _log_lines(context)


@then("the executor's store was closed")
def _then_store_closed(context: Context) -> None:
    assert not context.store_was_open, "the store is still open after the failed start"


@then("dropping the executor then warned of nothing")
def _then_no_drop_warning(context: Context) -> None:
    assert not context.drop_warnings, context.drop_warnings


@then('dropping the executor warned "{message}"')
def _then_drop_warned(context: Context, message: str) -> None:
    assert context.start_error is None, f"starting failed: {context.start_error}"
    assert any(message in warning for warning in context.drop_warnings), context.drop_warnings
