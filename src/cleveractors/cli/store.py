"""`cleveractors usage` and `cleveractors store prune`: the ledger and the sessions of an
actor's store."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from cleveractors.cli.actor import in_store, open_store
from cleveractors.cli.command import ACTOR_ARGUMENT, STORE_URL_OPTION, Command, app, fail, out
from cleveractors.cli.render import cache_caption, money, print_unsqueezed
from cleveractors.cli.spend import print_spend
from cleveractors.errors import CleverActorsError

if TYPE_CHECKING:  # the store and web extras are imported when a command needs them
    from cleveractors.store import UsageReport

store_app = typer.Typer(help="Look after the actor's store (sessions and the usage ledger).")
app.add_typer(store_app, name="store")


def _moment(option: str, text: str | None) -> datetime | None:
    """An ISO date or date-time from the command line; one without a zone is UTC."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        fail(f"{option}: {text!r} is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)", code=2)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@app.command(cls=Command, short_help="Print the usage ledger of the actor's store.")
def usage(
    actor: Annotated[Path, ACTOR_ARGUMENT],
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
    store_url: Annotated[str | None, STORE_URL_OPTION] = None,
    caller: Annotated[
        str | None,
        typer.Option(
            help="Instead, what this caller spent, reserved and has left per spend-limit window.",
            metavar="NAME",
        ),
    ] = None,
) -> None:
    """Print the usage ledger of ACTOR's store: one row per LLM call, then the totals."""
    if caller is not None:
        print_spend(actor, store_url, caller, as_json=as_json)
        return
    window = {"since": _moment("--since", since), "until": _moment("--until", until)}
    store = open_store(actor, store_url)
    try:
        report = asyncio.run(in_store(store, lambda: store.usage(session_id=session, **window)))
    except CleverActorsError as exc:
        fail(str(exc))
    if as_json:
        out.file.write(report.model_dump_json(indent=2) + "\n")
        return
    print_unsqueezed(out, ledger_table(report))


def ledger_table(report: UsageReport) -> Table:
    """The ledger's rows and their totals; a cost column when any row was priced; the cached
    tokens and what the cache saved (its hit rate under the table) when any row has some."""
    priced = any(row.cost_usd is not None for row in report.rows)
    cached = bool(report.cache_read_tokens or report.cache_write_tokens)
    table = Table(title="Usage ledger", box=box.SIMPLE_HEAD, title_justify="left")
    columns = ["recorded (UTC)", "session", "run", "call", "purpose", "attempt", "status"]
    columns += ["prompt", "completion", "total", "estimated"] + (["USD"] if priced else [])
    columns += ["cached", "saved USD"] if cached else []
    for column in columns:
        table.add_column(column, justify="right" if column in _NUMBER_COLUMNS else "left")
    for row in report.rows:
        cells = [
            row.recorded_at.strftime("%Y-%m-%d %H:%M:%S"),
            row.session_id or "",
            row.run_id,
            str(row.call_index),
            row.purpose,
            str(row.attempt),
            row.status,
            str(row.prompt_tokens),
            str(row.completion_tokens),
            str(row.total_tokens),
            "estimated" if row.estimated else "",
        ]
        cells += [money(row.cost_usd)] if priced else []
        cells += [str(row.cache_read_tokens), money(row.cache_savings_usd)] if cached else []
        table.add_row(*cells)
    table.add_section()
    calls = f"{len(report.rows)} call{'' if len(report.rows) == 1 else 's'}"
    totals = [str(report.prompt_tokens), str(report.completion_tokens), str(report.total_tokens)]
    marker = "estimated" if report.estimated else ""
    cost = [money(report.cost_usd)] if priced else []
    cost += [str(report.cache_read_tokens), money(report.cache_savings_usd)] if cached else []
    table.add_row("total", "", "", calls, "", "", "", *totals, marker, *cost, style="bold")
    if cached:
        table.caption = cache_caption(report.cache_hit_rate, report.cache_savings_usd)
        table.caption_justify = "left"
    return table


_NUMBER_COLUMNS = {"call", "attempt", "prompt", "completion", "total", "USD", "cached", "saved USD"}


@store_app.command(cls=Command, short_help="Remove sessions idle past retention_days.")
def prune(
    actor: Annotated[Path, ACTOR_ARGUMENT],
    store_url: Annotated[str | None, STORE_URL_OPTION] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the sessions it would remove; remove none.")
    ] = False,
) -> None:
    """Remove the sessions untouched for longer than the store's retention_days (the ledger's
    rows stay: they are the bill)."""
    store = open_store(actor, store_url)
    try:
        # Without retention_days too, so that a store that is not there is an error.
        if dry_run:
            idle = asyncio.run(in_store(store, store.idle_sessions))
        else:
            removed = asyncio.run(in_store(store, store.prune))
    except CleverActorsError as exc:
        fail(str(exc))
    days = f"untouched for more than {store.retention_days} days"
    if store.retention_days is None:
        out.print(
            "nothing to prune: the actor's store keeps sessions forever "
            "(set store.retention_days to remove idle ones)"
        )
    elif dry_run:
        out.print(f"would remove {_sessions(len(idle))} {days}" + (":" if idle else ""))
        for session_id in idle:
            out.print(f"  {session_id}")
    else:
        out.print(f"removed {_sessions(removed)} {days}")


def _sessions(count: int) -> str:
    return f"{count} session{'' if count == 1 else 's'}"
