"""The command line's side of approvals: asking a person at the terminal about each gated call,
telling a script (no terminal) which calls wait, reading `resume`'s decision options, and the
tables of a run's segments and of the approvals audit.

A client of the public API only (`cleveractors.approvals`, `ExecutionResult`); `cli.py` drives
the runs and calls in here for what a person sees and types.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cleveractors.approvals import ApprovalDecision, ApprovalRecord, PendingApproval
from cleveractors.result import ExecutionResult

__all__ = [
    "PAUSED_EXIT",
    "DecisionOptions",
    "LineReader",
    "Segments",
    "approvals_table",
    "ask_decisions",
    "call_label",
    "print_pause",
    "read_terminal_line",
]

PAUSED_EXIT = 3
"""The exit code of a command whose run paused with calls waiting for a person: 0 would read as
answered, 1 as failed; the run is neither, and a script must tell it apart to decide later."""

LineReader = Callable[[str], Awaitable[str | None]]
"""Shows a prompt and returns the line typed (without its newline); None at end of input."""

_CHOICES = {"a": "approve", "approve": "approve", "e": "edit", "edit": "edit"}
_CHOICES |= {"r": "reject", "reject": "reject"}


def call_label(name: str, arguments: dict[str, object] | str) -> str:
    """A tool call as the live output shows it: `refund(order="A1", amount=30)`."""
    if isinstance(arguments, str):
        return f"{name}({arguments})"
    return f"{name}({', '.join(f'{k}={json.dumps(v)}' for k, v in arguments.items())})"


# -- asking at a terminal -----------------------------------------------------------------------


async def read_terminal_line(prompt: str, console: Console) -> str | None:
    """Show PROMPT and wait for a line on the terminal without blocking the event loop, so that
    Ctrl-C and SIGTERM stop a command waiting here as they stop a run (its task is cancelled)."""
    console.print(prompt, end="")
    loop = asyncio.get_running_loop()
    typed: asyncio.Future[bytes] = loop.create_future()
    descriptor = sys.stdin.fileno()

    def readable() -> None:
        if not typed.done():  # a terminal in canonical mode gives one line per read
            typed.set_result(os.read(descriptor, 4096))

    loop.add_reader(descriptor, readable)
    try:
        line = await typed
    finally:
        loop.remove_reader(descriptor)
    if not line:  # Ctrl-D: the person leaves the calls undecided
        console.print()
        return None
    return line.decode(errors="replace").rstrip("\r\n")


async def ask_decisions(
    pending: Sequence[PendingApproval],
    console: Console,
    read_line: LineReader,
    *,
    problem: tuple[str, str] | None = None,
) -> list[ApprovalDecision] | None:
    """Ask about each pending call (its tool and arguments shown): approve, edit with new JSON
    arguments (asked again until they are a JSON object), or reject with an optional reason.
    With `problem` (a call id and why its last edit was refused), only that call is asked again.
    None when the person ends the input (Ctrl-D) before every call has a decision."""
    decisions: list[ApprovalDecision] = []
    try:
        for call in pending:
            if problem is not None and call.call_id != problem[0]:
                continue
            if problem is not None:
                console.print(Text(f"the edit was refused: {problem[1]}", style="yellow"))
            console.print(
                Text.assemble(
                    ("approval needed: ", "bold yellow"),
                    (call_label(call.name, call.arguments), "bold"),
                    (f"  [call {call.call_id}]", "dim"),
                )
            )
            decisions.append(await _ask_one(call, console, _Asker(read_line)))
    except _LeftUndecided:
        return None
    return decisions


class _LeftUndecided(Exception):
    """The person ended the input before deciding."""


@dataclass(frozen=True)
class _Asker:
    read_line: LineReader

    async def __call__(self, prompt: str) -> str:
        line = await self.read_line(prompt)
        if line is None:
            raise _LeftUndecided
        return line


async def _ask_one(call: PendingApproval, console: Console, ask: _Asker) -> ApprovalDecision:
    while True:
        choice = _CHOICES.get((await ask("approve, edit or reject? [a/e/r] ")).strip().lower())
        if choice == "approve":
            return ApprovalDecision(call_id=call.call_id, decision="approve", digest=call.digest)
        if choice == "reject":
            reason = (await ask("reason (optional, Enter for none): ")).strip()
            return ApprovalDecision(
                call_id=call.call_id, decision="reject", digest=call.digest, reason=reason or None
            )
        if choice == "edit":
            return await _ask_edit(call, console, ask)
        console.print(Text("type a (approve), e (edit) or r (reject)", style="yellow"))


async def _ask_edit(call: PendingApproval, console: Console, ask: _Asker) -> ApprovalDecision:
    shown = json.dumps(call.arguments) if isinstance(call.arguments, dict) else call.arguments
    console.print(Text(f"the arguments now: {shown}", style="dim"))
    while True:
        typed = await ask("new arguments (a JSON object): ")
        try:
            arguments = json.loads(typed)
        except json.JSONDecodeError as exc:
            console.print(Text(f"that is not JSON ({exc}); try again", style="yellow"))
            continue
        if not isinstance(arguments, dict):
            console.print(Text("the arguments must be a JSON object {...}; try again", "yellow"))
            continue
        return ApprovalDecision(
            call_id=call.call_id, decision="edit", digest=call.digest, arguments=arguments
        )


# -- a pause nobody can answer here -------------------------------------------------------------


def print_pause(console: Console, actor: str, result: ExecutionResult, *, has_store: bool) -> None:
    """What waits, for a script or a person to decide later: the run id, each pending call (id,
    tool, arguments, digest) and the command that decides; without a store, that the pause is
    gone once this command exits."""
    pending = result.pending_approvals
    plural = "" if len(pending) == 1 else "s"
    console.print(f"paused: run {result.run_id} waits for approval of {len(pending)} call{plural}")
    for call in pending:
        arguments = json.dumps(call.arguments, sort_keys=True)
        console.print(
            f"  call {call.call_id}  tool {call.name}  arguments {arguments}  digest {call.digest}"
        )
    if has_store:
        first = pending[0].call_id if pending else "CALL_ID"
        console.print(
            f"decide with: cleveractors resume {actor} {result.run_id} --approve {first} "
            f"(or --reject {first}:REASON, --edit '{first}:{{...}}', --respond {first}:TEXT)"
        )
    else:
        console.print(
            "no store: this pause is lost when the command exits (the calls above never run); "
            "add `store:` to the actor's config to decide later with `cleveractors resume`"
        )


# -- resume's options ---------------------------------------------------------------------------


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


# -- the usage of every segment -----------------------------------------------------------------


@dataclass
class Segments:
    """The results of a run's segments, in order: the first run, then each resumption. The
    usage table lists every segment's calls once (a resumption reports only its own)."""

    results: list[ExecutionResult] = field(default_factory=list)

    def add(self, result: ExecutionResult | None) -> None:
        """Keep a segment's result, once (a failed segment's result may be offered twice)."""
        if result is not None and all(result.run_id != kept.run_id for kept in self.results):
            self.results.append(result)

    @property
    def last(self) -> ExecutionResult | None:
        return self.results[-1] if self.results else None

    def combined(self) -> ExecutionResult:
        """Every call of every segment, numbered on: its totals are the whole run's."""
        if len(self.results) == 1:
            return self.results[0]
        calls = [call for result in self.results for call in result.usage_by_call]
        renumbered = [call.model_copy(update={"index": n}) for n, call in enumerate(calls, 1)]
        return ExecutionResult(text="", usage_by_call=tuple(renumbered))

    def lines(self) -> list[Text]:
        """One line per segment (only when there are several): its run id, how it ended, its
        calls and tokens; they add up to the table's total."""
        if len(self.results) < 2:
            return []
        lines = []
        for number, result in enumerate(self.results, 1):
            calls = f"{result.llm_calls} call{'' if result.llm_calls == 1 else 's'}"
            lines.append(
                Text(
                    f"segment {number}: run {result.run_id} {result.status}, {calls}, "
                    f"{result.total_tokens} tokens",
                    style="dim",
                )
            )
        return lines


# -- the audit ----------------------------------------------------------------------------------


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
