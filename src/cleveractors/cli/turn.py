"""A turn as `run`, `resume` and `chat` show it: live, blocking or as events, asking about
paused calls at a terminal, then the usage of every segment."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import typer
from langchain_core.exceptions import ModelError
from rich.console import Console

from cleveractors import events as ev
from cleveractors.approvals import ApprovalDecision, PendingApproval
from cleveractors.cli.actor import opened, run_error_line
from cleveractors.cli.asking import LineReader, ask_decisions, read_terminal_line
from cleveractors.cli.command import SIGTERM_EXIT, err, fail, fail_configured, out
from cleveractors.cli.render import EventRenderer, call_label, print_unsqueezed, usage_table
from cleveractors.cli.schema import edit_check
from cleveractors.cli.segments import PAUSED_EXIT, Segments, print_pause
from cleveractors.errors import (
    ApprovalError,
    CleverActorsError,
    ConfigurationError,
    InvalidDecisionError,
)
from cleveractors.executor import ActorExecutor
from cleveractors.result import ExecutionResult
from cleveractors.turns import Resumption, Turn

# What a run raises for a reason the user can act on; anything else is a bug and keeps its trace.
RUN_ERRORS = (CleverActorsError, ModelError)


async def run_turn(
    executor: ActorExecutor,
    turn: Turn,
    on_event: Callable[[ev.Event], None],
    *,
    is_streamed: bool,
) -> ExecutionResult:
    """The one place the command line asks the executor to run or resume a turn: streamed (the
    model's text as it comes) or blocking (each reply's text whole); each event to `on_event`."""
    if not is_streamed:
        return await executor.execute(turn, on_event=on_event)
    async with executor.execute_events(turn) as events:
        async for event in events:
            on_event(event)
    # A stream that ended without raising has settled its result.
    return cast(ExecutionResult, events.result)


async def run_live(
    executor: ActorExecutor, turn: Turn, view: EventRenderer | None
) -> ExecutionResult:
    """Stream the turn, its events shown as they come."""
    return await run_turn(executor, turn, _shown_by(view), is_streamed=True)


async def _run_blocking(
    executor: ActorExecutor, turn: Turn, view: EventRenderer | None
) -> ExecutionResult:
    """Run the turn without streaming the model: each reply's text is shown whole, in its place
    among the tool lines."""
    return await run_turn(executor, turn, _shown_by(view), is_streamed=False)


async def _print_events(executor: ActorExecutor, turn: Turn) -> ExecutionResult:
    return await run_turn(executor, turn, _print_event, is_streamed=True)


def _shown_by(view: EventRenderer | None) -> Callable[[ev.Event], None]:
    return _ignore if view is None else view.show


def _ignore(event: ev.Event) -> None:
    """Nothing shows the events (--json)."""


def _print_event(event: ev.Event) -> None:
    out.file.write(ev.event_adapter.dump_json(event).decode() + "\n")
    out.file.flush()


_Runner = Callable[[ActorExecutor, Turn, EventRenderer | None], Awaitable[ExecutionResult]]


async def _shown_turn(
    runner: _Runner, executor: ActorExecutor, turn: Turn, view: EventRenderer | None
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


async def run_to_the_end(
    runner: _Runner,
    executor: ActorExecutor,
    turn: Turn,
    view: EventRenderer | None,
    segments: Segments,
    *,
    ask: LineReader | None,
) -> ExecutionResult:
    """Run the turn, each segment kept in `segments`; while it pauses and a person can be asked
    (`ask`), ask about its pending calls and resume it. An edit that breaks the tool's schema is
    refused as it is typed; one the run refuses is asked again. Returns the last segment's
    result."""
    result = await _shown_turn(runner, executor, turn, view)
    segments.add(result)
    decided: dict[str, ApprovalDecision] = {}
    problem: tuple[str, str] | None = None
    while result.status == "paused" and ask is not None:
        pending = result.pending_approvals
        answers = await ask_decisions(
            pending, out, ask, check_edit=edit_check(executor.tools), problem=problem
        )
        if answers is None:
            break  # left undecided: the run stays paused
        decided |= {decision.call_id: decision for decision in answers}
        if view is not None:
            view.name_calls(decided_labels(pending, decided))
        resumption = Resumption(str(result.run_id), tuple(decided.values()))
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


def decided_labels(
    pending: tuple[PendingApproval, ...], decided: Mapping[str, ApprovalDecision]
) -> dict[str, str]:
    """How the resumed run's lines name each decided call: with the arguments it runs with."""
    labels = {}
    for call in pending:
        decision = decided.get(call.call_id)
        if decision is not None:
            labels[call.call_id] = call_label(call.name, decision.arguments or call.arguments)
    return labels


def _terminal_reader() -> LineReader | None:
    """How to ask a person, when there is one: stdin is a terminal."""
    return read_answer if sys.stdin.isatty() else None


def read_answer(prompt: str) -> Awaitable[str | None]:
    return read_terminal_line(prompt, out)


@dataclass(frozen=True)
class Output:
    """How a run command shows its run: live, blocking, as events or as the result's JSON."""

    no_stream: bool = False
    events: bool = False
    as_json: bool = False
    base_url: str | None = None


def run_shown(
    actor: Path, executor: ActorExecutor, turn: Turn, output: Output, view: EventRenderer | None
) -> None:
    """Run the turn as `run` and `resume` show it (`view` None for --json and --events), asking
    about paused calls on a terminal: the answer live, then the usage of every segment; a pause
    left waiting ends the command with the run id and the pending calls (exit 3)."""
    as_json = output.as_json
    ask = None if view is None else _terminal_reader()
    segments = Segments()
    runner = _run_blocking if output.no_stream else run_live

    async def work() -> ExecutionResult:
        if isinstance(turn, Resumption):
            await _check_resumption(executor, turn.run_id, turn.decided, view)
        if output.events:
            return await _print_events(executor, turn)
        return await run_to_the_end(runner, executor, turn, view, segments, ask=ask)

    try:
        result = asyncio.run(opened(executor, work))
    except ConfigurationError as exc:
        _report_spent(executor, segments, as_json=as_json)
        fail_configured(exc)
    except RUN_ERRORS as exc:
        # A refused resumption ran nothing: its empty result is no segment to bill.
        is_refused = isinstance(exc, ApprovalError)
        _report_spent(executor, segments, as_json=as_json, is_refused=is_refused)
        fail(run_error_line(exc, actor, output.base_url))
    except KeyboardInterrupt:
        _report_spent(executor, segments, as_json=as_json)
        fail(_stopped_line("interrupted", executor, segments), code=130)
    except asyncio.CancelledError:  # only SIGTERM cancels the run's task
        _report_spent(executor, segments, as_json=as_json)
        fail(_stopped_line("terminated (SIGTERM)", executor, segments), code=SIGTERM_EXIT)
    if as_json:
        out.file.write(result.model_dump_json(indent=2) + "\n")
    elif not output.events:
        out.print()
        _print_usage(out, segments)
    if result.status == "paused":
        shown_on = out if view is not None else err  # --json / --events keep stdout theirs
        print_pause(shown_on, str(actor), result, has_store=executor.store is not None)
        raise typer.Exit(PAUSED_EXIT)


async def _check_resumption(
    executor: ActorExecutor,
    run_id: str,
    decisions: Sequence[ApprovalDecision],
    view: EventRenderer | None,
) -> None:
    """Before a resumption runs: a decision on a call the run does not wait for is refused
    with the ids it waits for, and the view names the decided calls with their arguments, as
    `run` names them."""
    pending = (await executor.paused_run(run_id)).pending
    waiting = [call.call_id for call in pending]
    for decision in decisions:
        if decision.call_id not in waiting:
            raise InvalidDecisionError(
                f"run {run_id!r} has no pending call {decision.call_id!r} "
                f"(it waits for {', '.join(waiting)})",
                run_id=run_id,
                call_id=decision.call_id,
            )
    if view is not None:
        view.name_calls(decided_labels(pending, {d.call_id: d for d in decisions}))


def _stopped_line(how: str, executor: ActorExecutor, segments: Segments) -> str:
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


def _print_usage(console: Console, segments: Segments) -> None:
    """The usage table of every segment's calls (each once), and a line per segment."""
    print_unsqueezed(console, usage_table(segments.combined()))
    for line in segments.lines():
        console.print(line)


def _report_spent(
    executor: ActorExecutor, segments: Segments, *, as_json: bool, is_refused: bool = False
) -> None:
    """Show what a failed or interrupted run spent, in every segment (none when nothing ran)."""
    if not is_refused:
        segments.add(executor.last_result)
    spent = segments.last
    if spent is not None and as_json:
        out.file.write(spent.model_dump_json(indent=2) + "\n")
    elif spent is not None:
        _print_usage(err, segments)
