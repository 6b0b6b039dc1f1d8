"""What the command line shows: a run's events as they happen, the usage table, a tool
call's label, one-line messages."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import IO

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.status import Status
from rich.table import Table
from rich.text import Text

from cleveractors import events as ev
from cleveractors.result import ExecutionResult
from cleveractors.usage import TokenUsage

_STATES = {
    "ok": ("finished", "green"),
    "error": ("failed", "red"),
    "skipped": ("skipped", "yellow"),
    "cancelled": ("cancelled", "yellow"),
}


def call_label(name: str, arguments: dict[str, object] | str) -> str:
    """A tool call as the live output shows it: `refund(order="A1", amount=30)`."""
    if isinstance(arguments, str):
        return f"{name}({arguments})"
    return f"{name}({', '.join(f'{k}={json.dumps(v)}' for k, v in arguments.items())})"


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
                self._labels[call_id] = call_label(name, arguments)
            case ev.ToolCallStarted(call_id=call_id, name=name):
                self._running[call_id] = self._labels.get(call_id, name)
                self._line(_tool_line(self._running[call_id], "started", "cyan"))
                self._spin_for_tools()
            case ev.ToolCallFinished(call_id=call_id, error=error, duration_s=took):
                label = self._running.pop(call_id, event.name)
                state, style = _STATES["ok" if error is None else "error"]
                detail = f" in {took:.2f}s" + ("" if error is None else f": {one_line(error)}")
                self._line(_tool_line(label, state, style, detail))
                self._spin_for_tools()
            case ev.ToolCallSkipped(call_id=call_id, name=name):
                self._line(_tool_line(self._labels.get(call_id, name), *_STATES["skipped"]))
            case ev.OutputPruned(name=name, method=method, original_tokens=tokens):
                self._line(Text(f"output of {name} {method} ({tokens} tokens)", style="dim"))
            case ev.SynthesisStarted(reason=reason):
                self._line(Text(f"limit reached ({reason}): answering without tools", "yellow"))
            case ev.ToolApprovalRequested(name=name, arguments=arguments):
                self._line(_tool_line(call_label(name, arguments), "waits for approval", "yellow"))
            case ev.ToolCallDecided(call_id=call_id, name=name, decision=decision, reason=why):
                state, style = _DECIDED[decision]
                detail = f": {one_line(why)}" if why else ""
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
    marked; cached / cache-write / reasoning columns where the run has any, and then what the
    cache saved and its hit rate; cost "n/a" for a call whose model has no known price, and for
    a total that would be partial."""
    details = [(title, key) for title, key in _DETAIL_COLUMNS if getattr(result.usage, key)]
    cached = result.cache_read_tokens or result.cache_write_tokens
    table = Table(title="Token usage", box=box.SIMPLE_HEAD, title_justify="left")
    columns = ["call", "purpose", "round", "prompt", "completion"]
    columns += [title for title, _ in details] + ["total", "USD"]
    columns += ["saved USD"] if cached else []
    for column in [*columns, "estimated"]:
        table.add_column(column, justify="left" if column in ("purpose", "estimated") else "right")
    for call in result.usage_by_call:
        row = [str(call.index), call.purpose, str(call.round), *_counts(call.usage, details)]
        row += [money(call.cost_usd)] + ([money(call.cache_savings_usd)] if cached else [])
        table.add_row(*row, "estimated" if call.usage.estimated else "")
    table.add_section()
    calls = f"{result.llm_calls} call{'' if result.llm_calls == 1 else 's'}"
    totals = ["total", calls, "", *_counts(result.usage, details), money(result.cost_usd)]
    totals += [money(result.cache_savings_usd)] if cached else []
    marker = "estimated" if result.usage_estimated else ""
    table.add_row(*totals, marker, style="bold")
    if cached:
        table.caption = cache_caption(result.cache_hit_rate, result.cache_savings_usd)
        table.caption_justify = "left"
    return table


def cache_caption(hit_rate: float, saved: Decimal | None) -> str:
    """The prompt cache's line under a usage table: `cache hit rate 58.8%, saved USD 0.000027`."""
    return f"cache hit rate {hit_rate:.1%}, saved USD {money(saved)}"


def print_unsqueezed(console: Console, table: Table) -> None:
    """Print the table at its natural width even where the console is narrower (80 columns when
    not a terminal): a count or a cost cut to "0.00…" is worse than a long line."""
    needed = Measurement.get(console, console.options.update_width(1_000), table).maximum
    console.width = max(console.width, needed)  # print() clamps any width to the console's
    console.print(table)


def _counts(usage: TokenUsage, details: list[tuple[str, str]]) -> list[str]:
    counts = [usage.prompt_tokens, usage.completion_tokens]
    counts += [getattr(usage, key) for _, key in details] + [usage.total_tokens]
    return [str(count) for count in counts]


def money(cost: Decimal | None) -> str:
    return "n/a" if cost is None else f"{cost:.6f}"


def one_line(message: str) -> str:
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())
