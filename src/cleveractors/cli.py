"""The `cleveractors` command: run an actor from a terminal, check its config, or serve it.

    cleveractors run actor.yaml "What's the weather in Paris?"   # live answer, tools, usage
    cleveractors chat actor.yaml                                   # turn after turn, /usage, /new
    cleveractors validate actor.yaml
    cleveractors serve actor.yaml --port 8000                      # needs cleveractors[web]
    cleveractors run actor.yaml "And tomorrow?" --session s-1      # a stored session
    cleveractors usage actor.yaml --since 2026-01-01               # the ledger and its totals
    cleveractors store prune actor.yaml                            # sessions past retention_days
    cleveractors resume actor.yaml RUN_ID --approve CALL_ID        # decide on a paused run
    cleveractors approvals actor.yaml --run RUN_ID                 # who decided what, when

A thin client of `ActorExecutor`, like `cleveractors.web`. Exit codes: 0 success, 1 the run or
the config failed, or `serve` cannot listen (one line on stderr, never a traceback), 2 wrong
usage (a bad option or argument), a missing extra or `OTEL_*` variables asking for an export
that cannot happen, 3 the run paused: tool calls wait for a person's approval (not on a
terminal, or left undecided), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM: stopped as
Ctrl-C stops it).

`run` and `serve` export OpenTelemetry traces and metrics when the `OTEL_*` variables ask for it
(`cleveractors[otel]`; the rule is in `cleveractors._otel_setup`).
"""

from __future__ import annotations

import asyncio
import copy
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import uuid
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, NoReturn, TextIO, TypeVar, cast
from urllib.parse import urlsplit

try:
    import typer
    from rich import box
    from rich.console import Console
    from rich.measure import Measurement
    from rich.status import Status
    from rich.table import Table
    from rich.text import Text
    from typer.core import TyperCommand
except ImportError as _missing:  # the console script is installed even without the extra
    sys.stderr.write(
        f"error: the command line needs {_missing.name!r}: pip install 'cleveractors[cli]'\n"
    )
    raise SystemExit(2) from None

from langchain_core.exceptions import ModelConnectionError, ModelError, ModelTimeoutError

from cleveractors import _cli_approvals as approvals
from cleveractors import events as ev
from cleveractors.agents import EventStream
from cleveractors.approvals import ApprovalDecision, PendingApproval
from cleveractors.config import ActorConfig, StoreConfig, load_actor_config, read_actor_source
from cleveractors.errors import (
    CleverActorsError,
    ConfigurationError,
    InvalidDecisionError,
    McpServerError,
    redact_url,
)
from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult
from cleveractors.tools import Tool
from cleveractors.turns import Resumption
from cleveractors.usage import LLMCallUsage, TokenUsage

if TYPE_CHECKING:  # the store and web extras are imported when a command needs them
    from fastapi import FastAPI

    from cleveractors.store import SqlStore, UsageReport

__all__ = ["EventRenderer", "app", "ledger_table", "main", "usage_table"]

# What a run raises for a reason the user can act on; anything else is a bug and keeps its trace.
_RUN_ERRORS = (CleverActorsError, ModelError)
_WEB_EXTRA_MODULES = {"fastapi", "sse_starlette", "starlette", "uvicorn"}
_ACTOR_HELP = "The actor's YAML config."
_ACTOR_ARGUMENT = typer.Argument(help=_ACTOR_HELP, metavar="ACTOR", show_default=False)
_MAX_PORT = 65535
_SIGTERM_EXIT = 128 + signal.SIGTERM  # 143, what a shell reports for a process SIGTERM ended
_Result = TypeVar("_Result")
_STATES = {
    "ok": ("finished", "green"),
    "error": ("failed", "red"),
    "skipped": ("skipped", "yellow"),
    "cancelled": ("cancelled", "yellow"),
}


class _Command(TyperCommand):
    """A command whose help reads `run [OPTIONS] ACTOR MESSAGE`, the usual notation: Typer
    writes required arguments as `{ACTOR}` in the usage line and `ACTOR <path>` in the list."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [piece.strip("{}") for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and param.param_type_name == "argument":
                arguments.append((param.metavar or (param.name or "").upper(), record[1]))
            elif record is not None:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


_APP_HELP = (
    "Run LLM actors with tools from a terminal, and see every token they spend.\n\n"
    "Exit codes: 0 success; 1 the run or the config failed; 2 wrong usage or a missing extra; "
    "3 the run paused: tool calls wait for a person's approval (`cleveractors resume`); "
    "130 interrupted (Ctrl-C); 143 terminated (SIGTERM)."
)
app = typer.Typer(
    help=_APP_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: the rich layout labels every flag `<bool>` and every argument `<str>`.
    rich_markup_mode=None,
)
# Model text is shown as sent: no Rich markup, emoji codes or highlighting applied to it.
_out = Console(soft_wrap=True, markup=False, emoji=False, highlight=False)
_err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)


def main() -> None:
    """The console script's entry point."""
    _show_warnings_as_lines()
    app()


def _show_warnings_as_lines() -> None:
    """Every warning as one line on stderr, and the library's deprecations (a renamed config key)
    shown at all: Python hides a DeprecationWarning that is not raised from `__main__`."""
    warnings.filterwarnings("default", category=DeprecationWarning, module=r"cleveractors(\.|$)")
    warnings.showwarning = _print_warning


def _print_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    _err.print(f"{category.__name__}: {message}")


def _show_version(value: bool) -> None:
    if value:
        _out.print(f"cleveractors {version('cleveractors')}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Run LLM actors with tools from a terminal, and see every token they spend."""


# -- rendering ---------------------------------------------------------------------------------


_call_label = approvals.call_label
_DECIDED = {
    "approve": ("approved", "green"),
    "edit": ("edited", "green"),
    "reject": ("rejected", "yellow"),
    "respond": ("answered by a person", "yellow"),
    "expired": ("expired", "yellow"),
    "superseded": ("declined", "yellow"),
}


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
        self._spinning = ""
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
            case ev.ToolApprovalRequested(name=name, arguments=arguments):
                self._line(_tool_line(_call_label(name, arguments), "waits for approval", "yellow"))
            case ev.ToolCallDecided(call_id=call_id, name=name, decision=decision, reason=why):
                state, style = _DECIDED[decision]
                detail = f": {_one_line(why)}" if why else ""
                self._line(_tool_line(self._labels.get(call_id, name), state, style, detail))

    def name_calls(self, labels: Mapping[str, str]) -> None:
        """Label calls by id before a resumed run shows them (its events name the tool only)."""
        self._labels.update(labels)

    def close(self) -> None:
        """Stop the spinner and end the last line of text."""
        self._stop_spinner()
        if not self._at_line_start:
            self._console.print()
            self._at_line_start = True

    def cancel(self) -> None:
        """The run was stopped: the tools still running never finish, so say so."""
        for label in self._running.values():
            self._line(_tool_line(label, *_STATES["cancelled"]))
        self._running.clear()
        self.close()

    def write_above(self, write: Callable[[], None]) -> None:
        """Run `write` (a log line on stderr) without splitting a line of text or the spinner
        where both show (a terminal, or `2>&1`): the line is ended first, the spinner comes
        back after. Where stderr goes elsewhere, the text is left as it is."""
        if not (self._console.is_terminal or _same_file(self._console.file, sys.stderr)):
            write()
            return
        spinning = self._spinning
        self.close()
        write()
        if spinning:
            self._spin(spinning)

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
            self._spinning = label

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
            self._spinning = ""


def _same_file(first: IO[str], second: IO[str]) -> bool:
    try:
        return os.path.sameopenfile(first.fileno(), second.fileno())
    except (OSError, ValueError):  # a stream without a file descriptor (a test's buffer)
        return False


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


def _one_line(message: str) -> str:
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())


def _fail(message: str, *, code: int = 1) -> NoReturn:
    _err.print(Text.assemble(("error: ", "bold red"), _one_line(message)))
    raise typer.Exit(code)


def _fail_configured(exc: ConfigurationError) -> NoReturn:
    """End with a config's problems one per line, as `validate` lists them: joined into one
    line, a config with several problems is hard to read."""
    _err.print(Text.assemble(("error: ", "bold red"), str(exc)))
    raise typer.Exit(1)


# -- run ---------------------------------------------------------------------------------------


def _build_executor(
    actor: Path, *, base_url: str | None = None, store_url: str | None = None
) -> ActorExecutor:
    """ACTOR's executor, with what the command line overrides, checked in one pass (every
    problem of the file at once, as `validate` reports them)."""
    source = _actor_source(actor, base_url=base_url, store_url=store_url)
    return ActorExecutor.from_config(source, origin=str(actor), config_dir=actor.parent)


def _actor_source(
    actor: Path, *, base_url: str | None, store_url: str | None
) -> Path | dict[str, Any]:
    """ACTOR's raw config, with `--base-url` and `--store` put in before it is checked."""
    if base_url is None and store_url is None:
        return actor
    raw = read_actor_source(actor)
    if not isinstance(raw, Mapping):
        return actor  # the check reports a file that is no mapping as such
    source = dict(raw)
    if base_url is not None:
        agent = source.get("agent")
        agent = agent if isinstance(agent, Mapping) else {}
        provider = agent.get("provider")
        if provider != "openai":
            raise ConfigurationError(
                f"--base-url: actor {source.get('name')!r} uses provider {provider!r}; "
                "a base URL applies to provider 'openai' only"
            )
        source["agent"] = {**agent, "base_url": base_url}
    if store_url is not None:
        store = source.get("store")
        source["store"] = {
            **(store if isinstance(store, Mapping) else {}),
            "url": _typed_store_url(store_url),
        }
    return source


def _typed_store_url(url: str) -> str:
    """A relative SQLite path typed on the command line is from the working directory, like any
    path typed there (one in the file is from the file's folder)."""
    try:
        from cleveractors.store import resolve_sqlite_path
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"--store: {exc}") from None
    return resolve_sqlite_path(url, Path.cwd())


def _events_of(executor: ActorExecutor, turn: _Turn) -> EventStream:
    if turn.resuming is not None:
        return executor.execute_events(Resumption(turn.resuming, turn.decisions))
    return executor.execute_events(turn.message, turn.history, session_id=turn.session)


async def _run_live(
    executor: ActorExecutor, turn: _Turn, view: EventRenderer | None
) -> ExecutionResult:
    """Stream the turn, its events shown as they come."""
    async with _events_of(executor, turn) as events:
        async for event in events:
            if view is not None:
                view.show(event)
    # A stream that ended without raising has settled its result.
    return cast(ExecutionResult, events.result)


async def _print_events(executor: ActorExecutor, turn: _Turn) -> ExecutionResult:
    async with _events_of(executor, turn) as events:
        async for event in events:
            _out.file.write(ev.event_adapter.dump_json(event).decode() + "\n")
            _out.file.flush()
    return cast(ExecutionResult, events.result)


async def _run_blocking(
    executor: ActorExecutor, turn: _Turn, view: EventRenderer | None
) -> ExecutionResult:
    """Run the turn without streaming the model: each reply's text is shown whole, in its place
    among the tool lines."""
    on_event = None if view is None else view.show
    if turn.resuming is not None:
        return await executor.execute(Resumption(turn.resuming, turn.decisions), on_event=on_event)
    return await executor.execute(
        turn.message, turn.history, session_id=turn.session, on_event=on_event
    )


@dataclass(frozen=True)
class _Turn:
    """One message to the actor, with what it follows: the earlier turns, or a stored session;
    or, `resuming` a paused run, the decisions on its pending calls."""

    message: str
    history: list[dict[str, object]] | None = None
    session: str | None = None
    resuming: str | None = None
    decisions: tuple[ApprovalDecision, ...] = ()


_Runner = Callable[[ActorExecutor, _Turn, EventRenderer | None], Awaitable[ExecutionResult]]


async def _shown_turn(
    runner: _Runner, executor: ActorExecutor, turn: _Turn, view: EventRenderer | None
) -> ExecutionResult:
    """Run the turn with its view; a stopped turn marks its running tools cancelled."""
    try:
        return await runner(executor, turn, view)
    except asyncio.CancelledError:
        if view is not None:
            view.cancel()
        raise
    finally:
        if view is not None:
            view.close()


async def _run_to_the_end(
    runner: _Runner,
    executor: ActorExecutor,
    turn: _Turn,
    view: EventRenderer | None,
    segments: approvals.Segments,
    *,
    ask: approvals.LineReader | None,
) -> ExecutionResult:
    """Run the turn, each segment kept in `segments`; while it pauses and a person can be asked
    (`ask`), ask about its pending calls and resume it. An edit the run refuses (its arguments
    fail the tool's schema) is asked again. Returns the last segment's result."""
    result = await _shown_turn(runner, executor, turn, view)
    segments.add(result)
    decided: dict[str, ApprovalDecision] = {}
    problem: tuple[str, str] | None = None
    while result.status == "paused" and ask is not None:
        pending = result.pending_approvals
        answers = await approvals.ask_decisions(pending, _out, ask, problem=problem)
        if answers is None:
            break  # left undecided: the run stays paused
        decided |= {decision.call_id: decision for decision in answers}
        if view is not None:
            view.name_calls(_decided_labels(pending, decided))
        resumption = _Turn("", resuming=result.run_id, decisions=tuple(decided.values()))
        try:
            result = await _shown_turn(runner, executor, resumption, view)
        except InvalidDecisionError as exc:
            if exc.call_id not in decided or decided[exc.call_id].decision != "edit":
                raise
            problem = (exc.call_id, str(exc))
            continue
        segments.add(result)
        decided, problem = {}, None
    return result


def _decided_labels(
    pending: tuple[PendingApproval, ...], decided: Mapping[str, ApprovalDecision]
) -> dict[str, str]:
    """How the resumed run's lines name each decided call: with the arguments it runs with."""
    labels = {}
    for call in pending:
        decision = decided.get(call.call_id)
        if decision is not None:
            labels[call.call_id] = _call_label(call.name, decision.arguments or call.arguments)
    return labels


def _terminal_reader() -> approvals.LineReader | None:
    """How to ask a person, when there is one: stdin is a terminal."""
    return _read_answer if sys.stdin.isatty() else None


def _read_answer(prompt: str) -> Awaitable[str | None]:
    return approvals.read_terminal_line(prompt, _out)


@dataclass(frozen=True)
class _Output:
    """How a run command shows its run: live, blocking, as events or as the result's JSON."""

    no_stream: bool = False
    events: bool = False
    as_json: bool = False
    base_url: str | None = None


def _run_shown(
    actor: Path, executor: ActorExecutor, turn: _Turn, output: _Output, view: EventRenderer | None
) -> None:
    """Run the turn as `run` and `resume` show it (`view` None for --json and --events), asking
    about paused calls on a terminal: the answer live, then the usage of every segment; a pause
    left waiting ends the command with the run id and the pending calls (exit 3)."""
    as_json = output.as_json
    ask = None if view is None else _terminal_reader()
    segments = approvals.Segments()
    runner = _run_blocking if output.no_stream else _run_live

    def work() -> Awaitable[ExecutionResult]:
        if output.events:
            return _print_events(executor, turn)
        return _run_to_the_end(runner, executor, turn, view, segments, ask=ask)

    try:
        result = asyncio.run(_opened(executor, work))
    except ConfigurationError as exc:
        _report_spent(executor, segments, as_json=as_json)
        _fail_configured(exc)
    except _RUN_ERRORS as exc:
        _report_spent(executor, segments, as_json=as_json)
        _fail(_run_error_line(exc, actor, output.base_url))
    except KeyboardInterrupt:
        _report_spent(executor, segments, as_json=as_json)
        _fail(_stopped_line("interrupted", executor, segments), code=130)
    except asyncio.CancelledError:  # only SIGTERM cancels the run's task
        _report_spent(executor, segments, as_json=as_json)
        _fail(_stopped_line("terminated (SIGTERM)", executor, segments), code=_SIGTERM_EXIT)
    if as_json:
        _out.file.write(result.model_dump_json(indent=2) + "\n")
    elif not output.events:
        _out.print()
        _print_usage(_out, segments)
    if result.status == "paused":
        shown_on = _out if view is not None else _err  # --json / --events keep stdout theirs
        approvals.print_pause(shown_on, str(actor), result, has_store=executor.store is not None)
        raise typer.Exit(approvals.PAUSED_EXIT)


def _stopped_line(how: str, executor: ActorExecutor, segments: approvals.Segments) -> str:
    """What a stop ended: the running segment, or (at the approval question) nothing, the run
    staying paused for later when a store keeps it."""
    waiting = segments.last
    if waiting is None or waiting.status != "paused" or executor.last_result is not waiting:
        return f"{how}; the run was cancelled"
    if executor.store is None:
        return f"{how} at the approval question; the pause is lost (no store), nothing ran"
    return (
        f"{how} at the approval question; run {waiting.run_id} stays paused: decide with "
        "`cleveractors resume`"
    )


def _print_usage(console: Console, segments: approvals.Segments) -> None:
    """The usage table of every segment's calls (each once), and a line per segment."""
    _print_unsqueezed(console, usage_table(segments.combined()))
    for line in segments.lines():
        console.print(line)


@app.command(cls=_Command, short_help="Send a message; see the answer and its tokens.")
def run(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    message: Annotated[str, typer.Argument(help="The user's message.", metavar="MESSAGE")],
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Wait for the answer.")] = False,
    events: Annotated[bool, typer.Option("--events", help="Print events as JSON lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    base_url: Annotated[
        str | None,
        typer.Option(help="Send an openai actor's requests to this server.", metavar="URL"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show the library's log lines.")
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(help="Continue (or start) this stored session; needs `store:`.", metavar="ID"),
    ] = None,
) -> None:
    """Send MESSAGE to the actor: the answer streams live, then a table of the tokens spent.

    A tool declared `approval: required` pauses the run: on a terminal you are asked to
    approve, edit (new JSON arguments) or reject (with a reason) each such call, and the run
    goes on; the usage table then lists the calls of every segment. Not on a terminal (or with
    --json / --events, or Ctrl-D at the question), it prints the run id and the pending calls
    and exits 3: decide later with `cleveractors resume` (only with a store: without one, the
    pause is gone when the command exits).
    """
    _check_run_options(message, base_url, events=events, as_json=as_json, no_stream=no_stream)
    _export_telemetry()
    output = _Output(no_stream=no_stream, events=events, as_json=as_json, base_url=base_url)
    view = None if as_json or events else EventRenderer(_out)
    _show_library_logs(verbose, view)
    try:
        executor = _build_executor(actor, base_url=base_url)
    except ConfigurationError as exc:
        _fail_configured(exc)
    _run_shown(actor, executor, _Turn(message, session=session), output, view)


async def _opened(executor: ActorExecutor, work: Callable[[], Awaitable[_Result]]) -> _Result:
    """Run `work` with the executor open (its MCP servers connected), closing it after."""
    _cancel_on_sigterm()
    async with executor:
        return await work()


def _cancel_on_sigterm() -> None:
    """SIGTERM (`timeout`, `docker stop`, systemd, Kubernetes) stops the work as Ctrl-C does:
    the task is cancelled, so the run's usage is settled and the MCP servers are closed; outside
    the event loop, SIGTERM keeps its default (nothing has run yet)."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


def _check_run_options(
    message: str, base_url: str | None, *, events: bool, as_json: bool, no_stream: bool
) -> None:
    """Wrong usage ends before anything runs: exit 2, one line, no usage table."""
    if events and (as_json or no_stream):
        _fail("--events cannot be combined with --json or --no-stream", code=2)
    if not message.strip():
        _fail("MESSAGE is empty: say something to the actor", code=2)
    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            _fail(f"--base-url must be an http:// or https:// URL, got {base_url!r}", code=2)


def _show_library_logs(verbose: bool, view: EventRenderer | None) -> None:
    """The live output already shows what the log says (a tool failed, a call was skipped), so
    the library's log lines appear only with --verbose, on stderr, written around the view."""
    if not verbose:
        return
    library = logging.getLogger("cleveractors")
    handler = _LogAroundView(view)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    library.addHandler(handler)
    library.setLevel(logging.INFO)


class _LogAroundView(logging.StreamHandler[TextIO]):
    """Writes log records to stderr, never into the middle of a streamed line of text."""

    def __init__(self, view: EventRenderer | None) -> None:
        super().__init__(sys.stderr)
        self._view = view

    def emit(self, record: logging.LogRecord) -> None:
        if self._view is None:
            super().emit(record)
        else:
            self._view.write_above(lambda: super(_LogAroundView, self).emit(record))


def _run_error_line(exc: BaseException, actor: Path, base_url: str | None) -> str:
    """The error line of a failed run. A model that cannot be reached is named by the URL it
    was sent to (never the key): the model's own error says only "Connection error."."""
    line = f"{type(exc).__name__}: {exc}"
    url = base_url or load_actor_config(actor).agent.base_url
    if url is not None and isinstance(exc, ModelConnectionError | ModelTimeoutError):
        line += f" (while talking to {redact_url(url)})"
    return line


def _report_spent(executor: ActorExecutor, segments: approvals.Segments, *, as_json: bool) -> None:
    """Show what a failed or interrupted run spent, in every segment (none when nothing ran)."""
    segments.add(executor.last_result)
    spent = segments.last
    if spent is not None and as_json:
        _out.file.write(spent.model_dump_json(indent=2) + "\n")
    elif spent is not None:
        _print_usage(_err, segments)


# -- chat --------------------------------------------------------------------------------------

_CHAT_HELP = (
    "/usage: tokens and cost so far; /new: a fresh conversation; /exit (or Ctrl-D): leave; "
    "Ctrl-C stops an answer"
)


@dataclass
class _Chat:
    """What a chat keeps between turns: the conversation so far, and every call it paid for."""

    session: str | None
    history: list[dict[str, object]] = field(default_factory=list)
    calls: list[LLMCallUsage] = field(default_factory=list)
    turns: int = 0

    def next_turn(self, message: str) -> _Turn:
        if self.session is not None:  # the store holds the history
            return _Turn(message, session=self.session)
        return _Turn(message, history=list(self.history))

    def answered(self, message: str, segments: approvals.Segments) -> None:
        self.paid(segments)
        if self.session is None:
            text = "".join(result.text for result in segments.results)
            self.history.append({"role": "user", "content": message})
            self.history.append({"role": "assistant", "content": text})

    def paid(self, segments: approvals.Segments) -> None:
        """Count a turn's calls (of each of its segments), numbered on from the chat's earlier
        ones."""
        self.turns += 1
        first = len(self.calls) + 1
        self.calls += [
            call.model_copy(update={"index": first + offset})
            for offset, call in enumerate(segments.combined().usage_by_call)
        ]

    def fresh(self) -> str:
        """Forget the conversation (not what it cost); a stored chat moves to a new session."""
        self.history.clear()
        if self.session is None:
            return "a fresh conversation"
        self.session = f"chat-{uuid.uuid4().hex[:12]}"
        return f"a fresh conversation, in session {self.session}"

    def so_far(self) -> ExecutionResult:
        """Every call of the chat, as one result: its totals are the chat's."""
        return ExecutionResult(text="", usage_by_call=tuple(self.calls))


@app.command(cls=_Command, short_help="Chat with an actor, turn after turn, in the terminal.")
def chat(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    base_url: Annotated[
        str | None,
        typer.Option(help="Send an openai actor's requests to this server.", metavar="URL"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show the library's log lines.")
    ] = False,
    session: Annotated[
        str | None,
        typer.Option(
            help="Keep the conversation in this stored session; needs `store:`.", metavar="ID"
        ),
    ] = None,
) -> None:
    """Chat with ACTOR: each answer streams live as in `run`, then the tokens and cost of the
    turn and of the chat so far. The conversation is kept in memory (in the store with
    --session). /usage shows every call so far, /new starts a fresh conversation, /exit or
    Ctrl-D leaves; Ctrl-C stops the current answer, and at the prompt leaves. A tool call that
    needs approval is asked about as `run` asks (Ctrl-D there leaves it undecided: the turn is
    not kept)."""
    _check_run_options("chat", base_url, events=False, as_json=False, no_stream=False)
    view = EventRenderer(_out)
    _show_library_logs(verbose, view)
    try:
        executor = _build_executor(actor, base_url=base_url)
        if session is not None and executor.store is None:
            raise ConfigurationError(
                f"{actor}: --session needs a store: add `store:` to its config"
            )
        with asyncio.Runner() as loop:
            loop.run(executor.open())
            try:
                _chat_loop(loop, executor, view, _Chat(session))
            finally:
                loop.run(executor.aclose())
    except _RUN_ERRORS as exc:
        _fail(_run_error_line(exc, actor, base_url))
    except KeyboardInterrupt:  # while connecting or closing: nothing was said yet
        _fail("interrupted", code=130)


def _chat_loop(
    loop: asyncio.Runner, executor: ActorExecutor, view: EventRenderer, chat: _Chat
) -> None:
    _out.print(Text(f"Chatting with {executor.name}. {_CHAT_HELP}", style="dim"))
    while (line := _read_message()) is not None:
        message = line.strip()
        if message == "/exit":
            return
        if message == "/usage":
            _print_unsqueezed(_out, usage_table(chat.so_far()))
        elif message == "/new":
            _out.print(Text(chat.fresh(), style="dim"))
        elif message.startswith("/"):
            _out.print(Text(f"unknown command {message}; {_CHAT_HELP}", style="yellow"))
        elif message:
            _chat_turn(loop, executor, view, chat, line)


def _read_message() -> str | None:
    """The next line the user types; None when they leave (Ctrl-D, or Ctrl-C at the prompt)."""
    try:
        return _out.input(Text("you> ", style="bold"))
    except (EOFError, KeyboardInterrupt):
        _out.print()
        return None


def _chat_turn(
    loop: asyncio.Runner, executor: ActorExecutor, view: EventRenderer, chat: _Chat, message: str
) -> None:
    """One turn, shown as `run` shows it, its paused calls asked about as `run` asks. A
    stopped, failed or undecided turn is counted (it was paid for) but not kept in the
    conversation."""
    before = executor.last_result
    segments = approvals.Segments()
    turn = chat.next_turn(message)
    try:
        run = _run_to_the_end(_run_live, executor, turn, view, segments, ask=_read_answer)
        result = loop.run(run)
    except (KeyboardInterrupt, *_RUN_ERRORS) as exc:
        if executor.last_result is not before:
            segments.add(executor.last_result)
        reason = "stopped" if isinstance(exc, KeyboardInterrupt) else _one_line(str(exc))
        _chat_not_kept(chat, segments, reason)
        return
    if result.status == "paused":
        _chat_not_kept(chat, segments, "the calls were left undecided")
        return
    chat.answered(message, segments)
    _out.print(_chat_totals(chat, segments.combined()))


def _chat_not_kept(chat: _Chat, segments: approvals.Segments, reason: str) -> None:
    if segments.results:
        chat.paid(segments)
    _err.print(Text(f"{reason}; this turn is not kept, the chat goes on", style="yellow"))
    _out.print(_chat_totals(chat))


def _chat_totals(chat: _Chat, turn: ExecutionResult | None = None) -> Text:
    """One line after each turn: what it cost, and the chat so far."""
    so_far = chat.so_far()
    this = (
        ""
        if turn is None
        else f"this turn {turn.total_tokens} tokens (USD {_money(turn.cost_usd)}); "
    )
    plural = "" if chat.turns == 1 else "s"
    return Text(
        f"{this}chat so far {so_far.total_tokens} tokens in {chat.turns} turn{plural} "
        f"(USD {_money(so_far.cost_usd)})",
        style="dim",
    )


# -- validate and serve ------------------------------------------------------------------------


@app.command(cls=_Command, short_help="Check an actor's config; list every problem.")
def validate(actor: Annotated[Path, _ACTOR_ARGUMENT]) -> None:
    """Check ACTOR's config: fields, tool handlers and schemas, provider settings; connect its
    MCP servers. Lists every tool: name, where it comes from, description."""
    try:
        executor = ActorExecutor.from_config(actor)
        tools = asyncio.run(_opened(executor, lambda: _current_tools(executor)))
    except (ConfigurationError, McpServerError) as exc:
        _err.print(f"INVALID: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    except asyncio.CancelledError:  # SIGTERM: the MCP servers are closed, nothing to report
        raise typer.Exit(_SIGTERM_EXIT) from None
    _out.print(f"OK: {executor.name} ({len(tools)} tools)")
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        summary = (tool.description.strip().splitlines() or [""])[0]
        _out.print(f"  {tool.name:<{width}}  [{tool.source}]  {summary}".rstrip())


async def _current_tools(executor: ActorExecutor) -> tuple[Tool, ...]:
    return executor.tools


@app.command(cls=_Command, short_help="Serve an actor over HTTP, with a chat page.")
def serve(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    host: Annotated[str, typer.Option(help="Address to listen on.", metavar="HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (1-65535).", metavar="PORT")] = 8000,
    api_keys_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the accepted API keys, comma-separated; "
            "clients send one as 'Authorization: Bearer <key>'.",
            metavar="VAR",
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="Serve a non-loopback address without API keys (anyone may run it).",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="A Host name clients may use besides the loopback ones (repeatable; "
            "'*' allows any, e.g. behind a proxy that checks it).",
            metavar="NAME",
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="An origin whose web pages may call the API (repeatable).", metavar="ORIGIN"
        ),
    ] = None,
    docs: Annotated[
        bool, typer.Option("--docs", help="Serve /openapi.json and a route list at /docs.")
    ] = False,
    send_timeout_s: Annotated[
        float,
        typer.Option(
            help="Drop a streaming client that takes no data for this many seconds.",
            metavar="SECONDS",
        ),
    ] = 30.0,
    max_history_turns: Annotated[
        int, typer.Option(help="Refuse requests with more earlier turns (422).", metavar="N")
    ] = 200,
    max_turn_chars: Annotated[
        int,
        typer.Option(help="Refuse a message or turn with more characters (422).", metavar="N"),
    ] = 16_000,
    store: Annotated[
        str | None,
        typer.Option(
            help="Keep sessions and the usage ledger in this database (sqlite:///path.db, "
            "postgresql://...); overrides the actor's store.url.",
            metavar="URL",
        ),
    ] = None,
    graceful_timeout: Annotated[
        int,
        typer.Option(
            help="On SIGTERM or Ctrl-C, let running requests finish for this many seconds, "
            "then cancel them (their usage is still billed).",
            metavar="SECONDS",
        ),
    ] = 10,
) -> None:
    """Serve ACTOR over HTTP: the chat page at /, /chat (SSE), /v1/chat/completions, /v1/models;
    with a store (`--store URL` or `store:` in the config) also stored sessions.

    Only loopback Host names are answered unless --allowed-host adds more; a non-loopback
    --host needs --api-keys-env (or --insecure-no-auth).
    """
    if not 1 <= port <= _MAX_PORT:
        _fail(f"--port must be between 1 and {_MAX_PORT}, got {port}", code=2)
    if graceful_timeout < 0:
        _fail(f"--graceful-timeout must be 0 or more seconds, got {graceful_timeout}", code=2)
    try:
        import uvicorn
        from sse_starlette.sse import AppStatus

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
        executor = _build_executor(actor, store_url=store)
    except ConfigurationError as exc:
        _fail_configured(exc)
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
    _export_telemetry(app_)
    listening = _listen(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    _out.print(f"Serving {executor.name} on http://{shown_host}:{port} (Ctrl-C stops)")
    _out.print(_store_line(executor))
    # On SIGTERM or Ctrl-C uvicorn stops accepting, waits for running requests up to the grace
    # period, cancels the rest, runs the lifespan's end (the MCP servers, the store) and exits
    # by the signal it got. sse-starlette would cut every stream at once: it waits too.
    AppStatus.enable_automatic_graceful_drain = False  # its disable_...() is untyped
    config_ = uvicorn.Config(
        app_,
        host=host,
        port=port,
        timeout_graceful_shutdown=graceful_timeout,
        log_config=_serve_log_config(),
    )
    uvicorn.Server(config_).run(sockets=[listening])


def _export_telemetry(web_app: FastAPI | None = None) -> None:
    """Send spans and metrics where the `OTEL_*` variables say (`cleveractors._otel_setup`),
    flushed at exit; nothing is imported or set when they ask for no export. A `serve` app's
    request spans become the parents of its runs."""
    from cleveractors._otel_setup import start_from_env

    try:
        start_from_env(app=web_app)
    except ConfigurationError as exc:
        _fail(str(exc), code=2)


def _serve_log_config() -> dict[str, Any]:
    """uvicorn's logging with the time on every line, the library's lines among them: a
    server's log is read later, so each line says when and how bad (`INFO:`, `WARNING:`)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for formatter in config["formatters"].values():
        formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
    config["formatters"]["library"] = {
        **config["formatters"]["default"],
        "fmt": "%(asctime)s %(levelprefix)s %(name)s: %(message)s",
    }
    config["handlers"]["library"] = {**config["handlers"]["default"], "formatter": "library"}
    config["loggers"]["cleveractors"] = {
        "handlers": ["library"],
        "level": "INFO",
        "propagate": False,
    }
    return config


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


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound here so that a busy port is one line, not uvicorn's trace."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        _fail(f"cannot listen on {host}:{port}: {reason}")


def _store_line(executor: ActorExecutor) -> str:
    """Which store a server keeps its sessions and ledger in, its password hidden."""
    if executor.store is None:
        return "no store: sessions are not kept (the chat page sends the history)"
    return f"store: {executor.store.shown_url}"


def _with_store(actor: Path, url: str | None) -> ActorConfig:
    """ACTOR's config, its store at URL when one is given."""
    config = load_actor_config(actor)
    if url is None:
        return config
    store = (config.store or StoreConfig()).model_copy(update={"url": _typed_store_url(url)})
    return config.model_copy(update={"store": store})


# -- the store: usage and prune -----------------------------------------------------------------

store_app = typer.Typer(help="Look after the actor's store (sessions and the usage ledger).")
app.add_typer(store_app, name="store")

_STORE_URL_OPTION = typer.Option(
    "--store", help="The store's database URL; overrides the actor's store.url.", metavar="URL"
)


def _open_store(actor: Path, url: str | None) -> SqlStore:
    """The actor's existing store (its config's `store:`, at URL when given), not yet opened:
    these commands look after a store, so a missing SQLite file is an error, never created."""
    try:
        from cleveractors.store import SqlStore
    except ModuleNotFoundError as exc:
        _fail(str(exc), code=2)
    try:
        config = _with_store(actor, url)
        if config.store is None:
            raise ConfigurationError(
                f"{actor}: the actor has no store: add `store:` to its config or pass --store URL"
            )
        return SqlStore.from_config(config.store, config_dir=actor.parent, should_create=False)
    except ConfigurationError as exc:
        _fail(str(exc))


def _moment(option: str, text: str | None) -> datetime | None:
    """An ISO date or date-time from the command line; one without a zone is UTC."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        _fail(f"{option}: {text!r} is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)", code=2)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _in_store(store: SqlStore, work: Callable[[], Awaitable[_Result]]) -> _Result:
    async with store:
        return await work()


@app.command(cls=_Command, short_help="Print the usage ledger of the actor's store.")
def usage(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    session: Annotated[
        str | None, typer.Option(help="Only this session's calls.", metavar="ID")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Calls from this date (UTC).", metavar="DATE")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Calls before this date (UTC).", metavar="DATE")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    store_url: Annotated[str | None, _STORE_URL_OPTION] = None,
) -> None:
    """Print the usage ledger of ACTOR's store: one row per LLM call, then the totals."""
    window = {"since": _moment("--since", since), "until": _moment("--until", until)}
    store = _open_store(actor, store_url)
    try:
        report = asyncio.run(_in_store(store, lambda: store.usage(session_id=session, **window)))
    except CleverActorsError as exc:
        _fail(str(exc))
    if as_json:
        _out.file.write(report.model_dump_json(indent=2) + "\n")
        return
    _print_unsqueezed(_out, ledger_table(report))


def ledger_table(report: UsageReport) -> Table:
    """The ledger's rows and their totals; a cost column when any row was priced."""
    priced = any(row.cost_usd is not None for row in report.rows)
    table = Table(title="Usage ledger", box=box.SIMPLE_HEAD, title_justify="left")
    columns = ["recorded (UTC)", "session", "run", "call", "purpose", "attempt", "status"]
    columns += ["prompt", "completion", "total", "estimated"] + (["USD"] if priced else [])
    for column in columns:
        table.add_column(column, justify="right" if column in _NUMBER_COLUMNS else "left")
    for row in report.rows:
        cells = [
            row.recorded_at.strftime("%Y-%m-%d %H:%M:%S"),
            row.session_id or "",
            row.run_id[:12],
            str(row.call_index),
            row.purpose,
            str(row.attempt),
            row.status,
            str(row.prompt_tokens),
            str(row.completion_tokens),
            str(row.total_tokens),
            "estimated" if row.estimated else "",
        ]
        table.add_row(*cells, *([_money(row.cost_usd)] if priced else []))
    table.add_section()
    calls = f"{len(report.rows)} call{'' if len(report.rows) == 1 else 's'}"
    totals = [str(report.prompt_tokens), str(report.completion_tokens), str(report.total_tokens)]
    marker = "estimated" if report.estimated else ""
    cost = [_money(report.cost_usd)] if priced else []
    table.add_row("total", "", "", calls, "", "", "", *totals, marker, *cost, style="bold")
    return table


_NUMBER_COLUMNS = {"call", "attempt", "prompt", "completion", "total", "USD"}


@store_app.command(cls=_Command, short_help="Remove sessions idle past retention_days.")
def prune(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    store_url: Annotated[str | None, _STORE_URL_OPTION] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the sessions it would remove; remove none.")
    ] = False,
) -> None:
    """Remove the sessions untouched for longer than the store's retention_days (the ledger's
    rows stay: they are the bill)."""
    store = _open_store(actor, store_url)
    try:
        # Without retention_days too, so that a store that is not there is an error.
        if dry_run:
            idle = asyncio.run(_in_store(store, store.idle_sessions))
        else:
            removed = asyncio.run(_in_store(store, store.prune))
    except CleverActorsError as exc:
        _fail(str(exc))
    days = f"untouched for more than {store.retention_days} days"
    if store.retention_days is None:
        _out.print(
            "nothing to prune: the actor's store keeps sessions forever "
            "(set store.retention_days to remove idle ones)"
        )
    elif dry_run:
        _out.print(f"would remove {_sessions(len(idle))} {days}" + (":" if idle else ""))
        for session_id in idle:
            _out.print(f"  {session_id}")
    else:
        _out.print(f"removed {_sessions(removed)} {days}")


def _sessions(count: int) -> str:
    return f"{count} session{'' if count == 1 else 's'}"


# -- resume and approvals ----------------------------------------------------------------------

_DECISION_OPTIONS = {
    "approve": typer.Option(help="Run this pending call as asked (repeatable).", metavar="ID"),
    "reject": typer.Option(
        help="Decline this call; the model reads REASON (repeatable).", metavar="ID[:REASON]"
    ),
    "edit": typer.Option(
        help="Run this call with these arguments, checked against the tool's schema (repeatable).",
        metavar="ID:JSON",
    ),
    "respond": typer.Option(
        help="Do not run this call; the model reads TEXT as its output (repeatable).",
        metavar="ID:TEXT",
    ),
}


@app.command(cls=_Command, short_help="Decide on a paused run's calls; see the run go on.")
def resume(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    run_id: Annotated[
        str,
        typer.Argument(help="The paused run's id (the latest segment's).", metavar="RUN_ID"),
    ],
    approve: Annotated[list[str] | None, _DECISION_OPTIONS["approve"]] = None,
    reject: Annotated[list[str] | None, _DECISION_OPTIONS["reject"]] = None,
    edit: Annotated[list[str] | None, _DECISION_OPTIONS["edit"]] = None,
    respond: Annotated[list[str] | None, _DECISION_OPTIONS["respond"]] = None,
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Wait for the answer.")] = False,
    events: Annotated[bool, typer.Option("--events", help="Print events as JSON lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show the library's log lines.")
    ] = False,
    store_url: Annotated[str | None, _STORE_URL_OPTION] = None,
) -> None:
    """Decide on the pending calls of paused run RUN_ID (kept in ACTOR's store) and go on with
    it, shown as `run` shows a run. Calls left undecided keep waiting: the command then prints
    them and exits 3, as `run` does (on a terminal it asks about them). A decision that cannot
    be taken exits 1 with its reason: an unknown run (RunNotFoundError), one already resumed or
    decided (ApprovalConflictError), an unknown call or edited arguments failing the tool's
    schema (InvalidDecisionError)."""
    _check_run_options("resume", None, events=events, as_json=as_json, no_stream=no_stream)
    options = approvals.DecisionOptions(approve or (), reject or (), edit or (), respond or ())
    try:
        decisions = options.decisions()
    except ValueError as exc:
        _fail(str(exc), code=2)
    view = None if as_json or events else EventRenderer(_out)
    _show_library_logs(verbose, view)
    try:
        executor = _build_executor(actor, store_url=store_url)
        if executor.store is None:
            raise ConfigurationError(
                f"{actor}: resume needs the store the run paused in: add `store:` to the "
                "actor's config or pass --store URL (without a store, a pause is gone when the "
                "command that paused exits)"
            )
    except ConfigurationError as exc:
        _fail_configured(exc)
    turn = _Turn("", resuming=run_id, decisions=tuple(decisions))
    _run_shown(actor, executor, turn, _Output(no_stream, events, as_json), view)


@app.command("approvals", cls=_Command, short_help="List the approvals audit of the actor's store.")
def list_approvals(
    actor: Annotated[Path, _ACTOR_ARGUMENT],
    run: Annotated[
        str | None, typer.Option("--run", help="Only this paused run's calls.", metavar="RUN_ID")
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Only this session's calls.", metavar="ID")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the records as JSON.")] = False,
    store_url: Annotated[str | None, _STORE_URL_OPTION] = None,
) -> None:
    """List every decision on a gated tool call kept in ACTOR's store, oldest first: when, who,
    the run and call, the tool, the decision (approve, edit, reject, respond, or expired /
    superseded when nobody decided), the reason and the edited arguments."""
    store = _open_store(actor, store_url)
    try:
        records = asyncio.run(
            _in_store(store, lambda: store.approvals(run_id=run, session_id=session))
        )
    except CleverActorsError as exc:
        _fail(str(exc))
    if as_json:
        rows = [record.model_dump(mode="json") for record in records]
        _out.file.write(json.dumps(rows, indent=2) + "\n")
        return
    _print_unsqueezed(_out, approvals.approvals_table(records))
