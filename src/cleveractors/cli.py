"""The `cleveractors` command: run an actor from a terminal, check its config, or serve it.

    cleveractors run actor.yaml "What's the weather in Paris?"   # live answer, tools, usage
    cleveractors validate actor.yaml
    cleveractors serve actor.yaml --port 8000                      # needs cleveractors[web]

A thin client of `ActorExecutor`, like `cleveractors.web`. Exit codes: 0 success, 1 the run or
the config failed (one line on stderr, never a traceback), 2 usage error or missing extra.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import sys
from collections.abc import Awaitable, Callable
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar, cast

try:
    import typer
    from rich import box
    from rich.console import Console
    from rich.measure import Measurement
    from rich.status import Status
    from rich.table import Table
    from rich.text import Text
except ImportError as _missing:  # the console script is installed even without the extra
    sys.stderr.write(
        f"error: the command line needs {_missing.name!r}: pip install 'cleveractors[cli]'\n"
    )
    raise SystemExit(2) from None

from langchain_core.exceptions import ModelError

from cleveractors import events as ev
from cleveractors.config import load_actor_config
from cleveractors.errors import CleverActorsError, ConfigurationError, McpServerError
from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult, ToolCallRecord
from cleveractors.tools import Tool
from cleveractors.usage import TokenUsage

__all__ = ["EventRenderer", "app", "main", "usage_table"]

# What a run raises for a reason the user can act on; anything else is a bug and keeps its trace.
_RUN_ERRORS = (CleverActorsError, ModelError)
_WEB_EXTRA_MODULES = {"fastapi", "sse_starlette", "starlette", "uvicorn"}
_ACTOR_HELP = "The actor's YAML config."
_Result = TypeVar("_Result")
_STATES = {
    "ok": ("finished", "green"),
    "error": ("failed", "red"),
    "skipped": ("skipped", "yellow"),
}

app = typer.Typer(
    help="Run LLM actors with tools from a terminal, and see every token they spend.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Model text is shown as sent: no Rich markup, emoji codes or highlighting applied to it.
_out = Console(soft_wrap=True, markup=False, emoji=False, highlight=False)
_err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)


def main() -> None:
    """The console script's entry point."""
    app()


def _show_version(value: bool) -> None:
    if value:
        _out.print(f"cleveractors {version('cleveractors')}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Version.")
    ] = False,
) -> None:
    """Run LLM actors with tools from a terminal, and see every token they spend."""


# -- rendering ---------------------------------------------------------------------------------


def _call_label(name: str, arguments: dict[str, object] | str) -> str:
    if isinstance(arguments, str):
        return f"{name}({arguments})"
    return f"{name}({', '.join(f'{k}={json.dumps(v)}' for k, v in arguments.items())})"


def _tool_line(label: str, state: str, style: str, detail: str = "") -> Text:
    return Text.assemble(("tool ", "dim"), (label, "bold"), " ", (state, style), detail)


class EventRenderer:
    """Shows a run's events on a console as they happen.

    Text deltas are written as they arrive; each tool call gets a line when it starts and when it
    finishes, with its duration. On a terminal a spinner runs while the model thinks or tools run;
    elsewhere the output stays plain lines, so it can be piped, logged and tested.
    """

    def __init__(self, console: Console) -> None:
        self._console = console
        self._labels: dict[str, str] = {}
        self._running: dict[str, str] = {}
        self._status: Status | None = None
        self._at_line_start = True

    def show(self, event: ev.Event) -> None:
        """Render one event."""
        match event:
            case ev.RoundStarted():
                self._spin("thinking")
            case ev.TextDelta(text=text):
                self._stop_spinner()
                self._console.print(text, end="")
                self._at_line_start = text.endswith("\n")
            case ev.ToolCallRequested(call_id=call_id, name=name, arguments=arguments):
                self._labels[call_id] = _call_label(name, arguments)
            case ev.ToolCallStarted(call_id=call_id, name=name):
                self._running[call_id] = self._labels.get(call_id, name)
                self._line(_tool_line(self._running[call_id], "started", "cyan"))
                self._spin_for_tools()
            case ev.ToolCallFinished(call_id=call_id, error=error, duration_s=took):
                label = self._running.pop(call_id, event.name)
                state, style = _STATES["ok" if error is None else "error"]
                detail = f" in {took:.2f}s" + ("" if error is None else f": {_one_line(error)}")
                self._line(_tool_line(label, state, style, detail))
                self._spin_for_tools()
            case ev.ToolCallSkipped(call_id=call_id, name=name):
                self._line(_tool_line(self._labels.get(call_id, name), *_STATES["skipped"]))
            case ev.OutputPruned(name=name, method=method, original_tokens=tokens):
                self._line(Text(f"output of {name} {method} ({tokens} tokens)", style="dim"))
            case ev.SynthesisStarted(reason=reason):
                self._line(Text(f"limit reached ({reason}): answering without tools", "yellow"))

    def close(self) -> None:
        """Stop the spinner and end the last line of text."""
        self._stop_spinner()
        if not self._at_line_start:
            self._console.print()
            self._at_line_start = True

    def _line(self, text: Text) -> None:
        self.close()
        self._console.print(text)

    def _spin_for_tools(self) -> None:
        if self._running:
            self._spin("running " + ", ".join(self._running.values()))
        else:
            self._stop_spinner()

    def _spin(self, label: str) -> None:
        if self._console.is_terminal:
            self.close()
            self._status = self._console.status(label)
            self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None


# Token columns after "prompt" / "completion"; the detail ones only when a run has any.
_DETAIL_COLUMNS = (
    ("cached", "cache_read_tokens"),
    ("cache write", "cache_write_tokens"),
    ("reasoning", "reasoning_tokens"),
)


def usage_table(result: ExecutionResult) -> Table:
    """The tokens and cost of a run: one row per LLM call, then the total; estimated counts
    marked; cached / cache-write / reasoning columns where the run has any; cost "n/a" for a
    call whose model has no known price, and for a total that would be partial."""
    details = [(title, key) for title, key in _DETAIL_COLUMNS if getattr(result.usage, key)]
    table = Table(title="Token usage", box=box.SIMPLE_HEAD, title_justify="left")
    columns = ["call", "purpose", "round", "prompt", "completion"]
    columns += [title for title, _ in details] + ["total", "USD", "estimated"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("purpose", "estimated") else "right")
    for call in result.usage_by_call:
        row = [str(call.index), call.purpose, str(call.round), *_counts(call.usage, details)]
        table.add_row(*row, _money(call.cost_usd), "estimated" if call.usage.estimated else "")
    table.add_section()
    calls = f"{result.llm_calls} call{'' if result.llm_calls == 1 else 's'}"
    marker = "estimated" if result.usage_estimated else ""
    totals = _counts(result.usage, details)
    table.add_row("total", calls, "", *totals, _money(result.cost_usd), marker, style="bold")
    return table


def _print_unsqueezed(console: Console, table: Table) -> None:
    """Print the table at its natural width even where the console is narrower (80 columns when
    not a terminal): a count or a cost cut to "0.00…" is worse than a long line."""
    needed = Measurement.get(console, console.options.update_width(1_000), table).maximum
    console.width = max(console.width, needed)  # print() clamps any width to the console's
    console.print(table)


def _counts(usage: TokenUsage, details: list[tuple[str, str]]) -> list[str]:
    counts = [usage.prompt_tokens, usage.completion_tokens]
    counts += [getattr(usage, key) for _, key in details] + [usage.total_tokens]
    return [str(count) for count in counts]


def _money(cost: Decimal | None) -> str:
    return "n/a" if cost is None else f"{cost:.6f}"


def _show_tool_records(records: tuple[ToolCallRecord, ...]) -> None:
    for record in records:
        took = "" if record.status == "skipped" else f" in {record.duration_s:.2f}s"
        _out.print(
            _tool_line(_call_label(record.name, record.arguments), *_STATES[record.status], took)
        )


def _one_line(message: str) -> str:
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())


def _fail(message: str, *, code: int = 1) -> NoReturn:
    _err.print(Text.assemble(("error: ", "bold red"), _one_line(message)))
    raise typer.Exit(code)


# -- run ---------------------------------------------------------------------------------------


def _build_executor(actor: Path, base_url: str | None) -> ActorExecutor:
    config = load_actor_config(actor)
    if base_url is not None:
        if config.agent.provider != "openai":
            raise ConfigurationError(
                f"--base-url: actor {config.name!r} uses provider {config.agent.provider!r}; "
                "a base URL applies to provider 'openai' only"
            )
        agent = config.agent.model_copy(update={"base_url": base_url})
        config = config.model_copy(update={"agent": agent})
    return ActorExecutor.from_config(config, origin=str(actor))


async def _run_live(executor: ActorExecutor, message: str, *, show: bool) -> ExecutionResult:
    renderer = EventRenderer(_out)
    try:
        async with executor.execute_events(message) as events:
            async for event in events:
                if show:
                    renderer.show(event)
    finally:
        renderer.close()
    # A stream that ended without raising has settled its result.
    return cast(ExecutionResult, events.result)


async def _print_events(executor: ActorExecutor, message: str) -> None:
    async with executor.execute_events(message) as events:
        async for event in events:
            _out.file.write(ev.event_adapter.dump_json(event).decode() + "\n")
            _out.file.flush()


async def _run_blocking(executor: ActorExecutor, message: str, *, show: bool) -> ExecutionResult:
    if not (show and _out.is_terminal):
        return await executor.execute(message)
    with _out.status("thinking"):
        return await executor.execute(message)


@app.command()
def run(
    actor: Annotated[Path, typer.Argument(help=_ACTOR_HELP)],
    message: Annotated[str, typer.Argument(help="The user's message.")],
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Wait for the answer.")] = False,
    events: Annotated[bool, typer.Option("--events", help="Print events as JSON lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    base_url: Annotated[str | None, typer.Option(help="Override the agent's base_url.")] = None,
) -> None:
    """Send MESSAGE to the actor: the answer streams live, then a table of the tokens spent."""
    if events and (as_json or no_stream):
        _fail("--events cannot be combined with --json or --no-stream", code=2)
    executor: ActorExecutor | None = None
    try:
        executor = _build_executor(actor, base_url)
        opened = executor
        if events:
            asyncio.run(_opened(opened, lambda: _print_events(opened, message)))
            return
        runner = _run_blocking if no_stream else _run_live
        result = asyncio.run(_opened(opened, lambda: runner(opened, message, show=not as_json)))
    except _RUN_ERRORS as exc:
        _report_spent(executor, as_json=as_json)
        _fail(str(exc) if isinstance(exc, ConfigurationError) else f"{type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        _report_spent(executor, as_json=as_json)
        _fail("interrupted; the run was cancelled", code=130)
    if as_json:
        _out.file.write(result.model_dump_json(indent=2) + "\n")
        return
    if no_stream:
        _show_tool_records(result.tool_calls)
        _out.print(result.text)
    _out.print()
    _print_unsqueezed(_out, usage_table(result))


async def _opened(executor: ActorExecutor, work: Callable[[], Awaitable[_Result]]) -> _Result:
    """Run `work` with the executor open (its MCP servers connected), closing it after."""
    async with executor:
        return await work()


def _report_spent(executor: ActorExecutor | None, *, as_json: bool) -> None:
    """Show what a failed or interrupted run spent (without an executor, nothing was)."""
    spent = None if executor is None else executor.last_result
    if spent is not None and as_json:
        _out.file.write(spent.model_dump_json(indent=2) + "\n")
    elif spent is not None:
        _print_unsqueezed(_err, usage_table(spent))


# -- validate and serve ------------------------------------------------------------------------


@app.command()
def validate(actor: Annotated[Path, typer.Argument(help=_ACTOR_HELP)]) -> None:
    """Check ACTOR's config: fields, tool handlers and schemas, provider settings; connect its
    MCP servers. Lists every tool: name, where it comes from, description."""
    try:
        executor = ActorExecutor.from_config(actor)
        tools = asyncio.run(_opened(executor, lambda: _current_tools(executor)))
    except (ConfigurationError, McpServerError) as exc:
        _err.print(f"INVALID: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    _out.print(f"OK: {executor.name} ({len(tools)} tools)")
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        summary = (tool.description.strip().splitlines() or [""])[0]
        _out.print(f"  {tool.name:<{width}}  [{tool.source}]  {summary}".rstrip())


async def _current_tools(executor: ActorExecutor) -> list[Tool]:
    tools: dict[str, Tool] = getattr(executor.agent, "tools", {})
    return list(tools.values())


@app.command()
def serve(
    actor: Annotated[Path, typer.Argument(help=_ACTOR_HELP)],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    api_keys_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the accepted API keys, comma-separated; "
            "clients send one as 'Authorization: Bearer <key>'."
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(help="Serve a non-loopback address without API keys (anyone may run it)."),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="A Host name clients may use besides the loopback ones (repeatable; "
            "'*' allows any, e.g. behind a proxy that checks it)."
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(help="An origin whose web pages may call the API (repeatable)."),
    ] = None,
    docs: Annotated[
        bool, typer.Option(help="Serve /openapi.json and a route list at /docs.")
    ] = False,
    send_timeout_s: Annotated[
        float,
        typer.Option(help="Drop a streaming client that takes no data for this many seconds."),
    ] = 30.0,
    max_history_turns: Annotated[
        int, typer.Option(help="Refuse requests with more earlier turns (422).")
    ] = 200,
    max_turn_chars: Annotated[
        int, typer.Option(help="Refuse a message or turn with more characters (422).")
    ] = 16_000,
) -> None:
    """Serve ACTOR over HTTP: the chat page at /, /chat (SSE) and /v1/chat/completions.

    Only loopback Host names are answered unless --allowed-host adds more; a non-loopback
    --host needs --api-keys-env (or --insecure-no-auth).
    """
    try:
        import uvicorn

        from cleveractors.web.app import create_app
        from cleveractors.web.security import (
            LOOPBACK_HOSTS,
            api_key_authenticator,
            is_loopback_address,
        )
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _WEB_EXTRA_MODULES:
            raise
        _fail(f"serve needs {exc.name!r}: pip install 'cleveractors[web]'", code=2)
    keys = _api_keys(api_keys_env)
    if not keys and not insecure_no_auth and not is_loopback_address(host):
        _fail(
            f"refusing to serve {host} without API keys: anyone who can reach it could run the "
            "actor; give --api-keys-env VAR (or --insecure-no-auth)",
            code=2,
        )
    try:
        executor = ActorExecutor.from_config(actor)
    except ConfigurationError as exc:
        _fail(str(exc))
    app_ = create_app(
        executor,
        authenticate=api_key_authenticator(keys) if keys else None,
        allowed_hosts=[*LOOPBACK_HOSTS, *_bound_name(host), *(allowed_host or [])],
        cors_origins=cors_origin or [],
        docs=docs,
        send_timeout_s=send_timeout_s,
        max_history_turns=max_history_turns,
        max_turn_chars=max_turn_chars,
    )
    uvicorn.run(app_, host=host, port=port)


def _bound_name(host: str) -> list[str]:
    """A specific address served is a name clients use; a wildcard (0.0.0.0, ::) is not."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return [host]
    if address.is_unspecified:
        return []
    return [f"[{host}]" if address.version == 6 else host]


def _api_keys(variable: str | None) -> list[str]:
    """The keys in $VARIABLE (comma-separated); none without a variable."""
    if variable is None:
        return []
    keys = [key.strip() for key in os.environ.get(variable, "").split(",") if key.strip()]
    if not keys:
        _fail(f"--api-keys-env: ${variable} is not set or holds no keys", code=2)
    return keys
