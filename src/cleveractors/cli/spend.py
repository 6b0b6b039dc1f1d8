"""`cleveractors usage --caller NAME`: what a caller spent, reserved and has left in each
window of the actor's spend limits."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.table import Table

from cleveractors.cli.actor import in_store, open_store, with_store
from cleveractors.cli.command import fail, out
from cleveractors.cli.render import print_unsqueezed
from cleveractors.errors import CleverActorsError
from cleveractors.result import SpendLeft

__all__ = ["print_spend"]


def print_spend(actor: Path, store_url: str | None, caller: str, *, as_json: bool) -> None:
    """Print CALLER's windows under ACTOR's `spend_limits` (an empty CALLER: no particular one)."""
    try:
        limits = with_store(actor, store_url).spend_limits
    except CleverActorsError as exc:
        fail(str(exc))
    if limits is None:
        fail(f"{actor}: the actor sets no spend_limits")
    store = open_store(actor, store_url)
    # The store extra is installed: open_store found it.
    from cleveractors.store.spend import read_spend_left

    who = caller or None
    try:
        left = asyncio.run(
            in_store(store, lambda: read_spend_left(store.engine, who, limits, _now))
        )
    except CleverActorsError as exc:
        fail(str(exc))
    if as_json:
        windows = [entry.model_dump(mode="json") for entry in left]
        out.file.write(json.dumps({"caller": who, "windows": windows}, indent=2) + "\n")
        return
    print_unsqueezed(out, spend_table(caller, left))


def spend_table(caller: str, left: tuple[SpendLeft, ...]) -> Table:
    title = f"Spend of {caller!r}" if caller else "Spend of no particular caller"
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for column in ("window", "unit", "limit", "spent", "reserved", "left", "resets (UTC)"):
        table.add_column(column, justify="left" if column in ("window", "unit") else "right")
    for entry in left:
        resets = entry.resets_at.strftime("%Y-%m-%d %H:%M:%S") if entry.resets_at else "-"
        amounts = (entry.limit, entry.spent, entry.reserved, entry.left)
        table.add_row(
            entry.window, entry.unit, *(_amount(each, entry.unit) for each in amounts), resets
        )
    return table


def _amount(value: object, unit: str) -> str:
    return f"{value:.6f}" if unit == "usd" else f"{value}"


def _now() -> datetime:
    return datetime.now(UTC)
