"""`cleveractors resume` and `cleveractors approvals`: decide on a paused run's calls, and the
audit of who decided what."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from cleveractors.approvals import ApprovalDecision, ApprovalRecord
from cleveractors.cli.actor import (
    VERBOSE_OPTION,
    build_executor,
    check_run_options,
    in_store,
    open_store,
    show_library_logs,
)
from cleveractors.cli.command import (
    ACTOR_ARGUMENT,
    STORE_URL_OPTION,
    Command,
    app,
    fail,
    fail_configured,
    out,
)
from cleveractors.cli.render import EventRenderer, print_unsqueezed
from cleveractors.cli.turn import Output, run_shown
from cleveractors.errors import CleverActorsError, ConfigurationError
from cleveractors.turns import Resumption

if TYPE_CHECKING:  # the store extra is imported when a command needs it
    from cleveractors.store import SqlStore


@dataclass(frozen=True)
class DecisionOptions:
    """`resume`'s decision options as typed: `--approve ID`, `--reject ID[:REASON]`,
    `--edit 'ID:{JSON}'`, `--respond ID:TEXT`, each repeatable."""

    approve: Sequence[str] = ()
    reject: Sequence[str] = ()
    edit: Sequence[str] = ()
    respond: Sequence[str] = ()

    def decisions(self) -> list[ApprovalDecision]:
        """The decisions, in the order of the options' kinds.

        Raises:
            ValueError: an option that is not of its form (the option and the problem named).
        """
        decisions = [
            ApprovalDecision(call_id=_call_id("--approve", v), decision="approve")
            for v in self.approve
        ]
        for value in self.reject:
            call_id, _, reason = value.partition(":")
            decisions.append(
                ApprovalDecision(
                    call_id=_call_id("--reject", call_id), decision="reject", reason=reason or None
                )
            )
        for value in self.edit:
            call_id, arguments = _split("--edit", value, "ID:{JSON}")
            decisions.append(
                ApprovalDecision(
                    call_id=call_id, decision="edit", arguments=_json_object(value, arguments)
                )
            )
        for value in self.respond:
            call_id, output = _split("--respond", value, "ID:TEXT")
            decisions.append(ApprovalDecision(call_id=call_id, decision="respond", output=output))
        if not decisions:
            raise ValueError(
                "give at least one decision: --approve ID, --reject ID[:REASON], "
                "--edit 'ID:{JSON}' or --respond ID:TEXT"
            )
        return decisions


def _call_id(option: str, call_id: str) -> str:
    if not call_id.strip():
        raise ValueError(f"{option}: the call id is empty")
    return call_id.strip()


def _split(option: str, value: str, form: str) -> tuple[str, str]:
    call_id, colon, rest = value.partition(":")
    if not colon:
        raise ValueError(f"{option} {value!r}: expected {form}")
    return _call_id(option, call_id), rest


def _json_object(option_value: str, text: str) -> dict[str, object]:
    try:
        arguments = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--edit {option_value!r}: the arguments are not JSON ({exc})") from None
    if not isinstance(arguments, dict):
        raise ValueError(f"--edit {option_value!r}: the arguments must be a JSON object")
    return arguments


def approvals_table(records: Sequence[ApprovalRecord]) -> Table:
    """The approvals audit: when, who, which run and call, the tool, the decision, the reason
    and the edited arguments, oldest first."""
    table = Table(title="Approvals", box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("decided (UTC)", "who", "run", "call", "tool", "decision", "reason", "edited"):
        table.add_column(column)
    for record in records:
        edited = record.edited_arguments
        table.add_row(
            record.decided_at.strftime("%Y-%m-%d %H:%M:%S"),
            record.decided_by or "-",
            record.run_id,
            record.call_id,
            record.name,
            record.decision,
            record.reason or record.output or "",
            "" if edited is None else json.dumps(edited, sort_keys=True),
        )
    return table


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


@app.command(cls=Command, short_help="Decide on a paused run's calls; see the run go on.")
def resume(
    actor: Annotated[Path, ACTOR_ARGUMENT],
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
    verbose: Annotated[bool, VERBOSE_OPTION] = False,
    store_url: Annotated[str | None, STORE_URL_OPTION] = None,
) -> None:
    """Decide on the pending calls of paused run RUN_ID (kept in ACTOR's store) and go on with
    it, shown as `run` shows a run. Calls left undecided keep waiting: the command then prints
    them and exits 3, as `run` does (on a terminal it asks about them). A decision that cannot
    be taken exits 1 with its reason: an unknown run (RunNotFoundError), one already resumed or
    decided (ApprovalConflictError), an unknown call or edited arguments failing the tool's
    schema (InvalidDecisionError)."""
    check_run_options("resume", None, events=events, as_json=as_json, no_stream=no_stream)
    options = DecisionOptions(approve or (), reject or (), edit or (), respond or ())
    try:
        decisions = options.decisions()
    except ValueError as exc:
        fail(str(exc), code=2)
    view = None if as_json or events else EventRenderer(out)
    show_library_logs(verbose, view)
    try:
        executor = build_executor(actor, store_url=store_url)
        if executor.store is None:
            raise ConfigurationError(
                f"{actor}: resume needs the store the run paused in: add `store:` to the "
                "actor's config or pass --store URL (without a store, a pause is gone when the "
                "command that paused exits)"
            )
    except ConfigurationError as exc:
        fail_configured(exc)
    turn = Resumption(run_id, tuple(decisions))
    run_shown(actor, executor, turn, Output(no_stream, events, as_json), view)


@app.command("approvals", cls=Command, short_help="List the approvals audit of the actor's store.")
def list_approvals(
    actor: Annotated[Path, ACTOR_ARGUMENT],
    run: Annotated[
        str | None,
        typer.Option(
            "--run", help="Only this run's calls, in every segment of it.", metavar="RUN_ID"
        ),
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Only this session's calls.", metavar="ID")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the records as JSON.")] = False,
    store_url: Annotated[str | None, STORE_URL_OPTION] = None,
) -> None:
    """List every decision on a gated tool call kept in ACTOR's store, oldest first: when, who,
    the run and call, the tool, the decision (approve, edit, reject, respond, or expired /
    superseded when nobody decided), the reason and the edited arguments. With --run, the
    run's whole chain of segments: the first run and each resumption, whichever of their ids
    is given."""
    store = open_store(actor, store_url)
    try:
        records = asyncio.run(in_store(store, lambda: _records(store, run, session)))
    except CleverActorsError as exc:
        fail(str(exc))
    if as_json:
        rows = [record.model_dump(mode="json") for record in records]
        out.file.write(json.dumps(rows, indent=2) + "\n")
        return
    print_unsqueezed(out, approvals_table(records))


async def _records(store: SqlStore, run: str | None, session: str | None) -> list[ApprovalRecord]:
    if run is None:
        return await store.approvals(session_id=session)
    return [
        record
        for segment in await store.run_segments(run)
        for record in await store.approvals(run_id=segment, session_id=session)
    ]
