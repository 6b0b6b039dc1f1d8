"""Asking a person at the terminal about each gated call: approve, edit or reject."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from cleveractors.approvals import ApprovalDecision, PendingApproval
from cleveractors.cli.render import call_label

LineReader = Callable[[str], Awaitable[str | None]]
"""Shows a prompt and returns the line typed (without its newline); None at end of input."""

EditCheck = Callable[[PendingApproval, dict[str, object]], str | None]
"""Why a call's edited arguments cannot be taken (they break the tool's schema), or None."""

_CHOICES = {"a": "approve", "approve": "approve", "e": "edit", "edit": "edit"}
_CHOICES |= {"r": "reject", "reject": "reject"}


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
    check_edit: EditCheck,
    problem: tuple[str, str] | None = None,
) -> list[ApprovalDecision] | None:
    """Ask about each pending call (its tool and arguments shown): approve, edit with new JSON
    arguments (asked again until they are a JSON object), or reject with an optional reason.
    An edit `check_edit` refuses is refused at once, and the call asked about again. With
    `problem` (a call id and why the run refused its last edit), only that call is asked again.
    None when the person ends the input (Ctrl-D) before every call has a decision."""
    decisions: list[ApprovalDecision] = []
    asker = _Asker(read_line, console, check_edit)
    try:
        for call in pending:
            if problem is not None and call.call_id != problem[0]:
                continue
            if problem is not None:
                _refuse_edit(console, problem[1])
            decisions.append(await asker.decide(call))
    except _LeftUndecided:
        return None
    return decisions


def _show_call(console: Console, call: PendingApproval) -> None:
    console.print(
        Text.assemble(
            ("approval needed: ", "bold yellow"),
            (call_label(call.name, call.arguments), "bold"),
            (f"  [call {call.call_id}]", "dim"),
        )
    )


def _refuse_edit(console: Console, why: str) -> None:
    console.print(Text(f"the edit was refused: {why}", style="yellow"))


class _LeftUndecided(Exception):
    """The person ended the input before deciding."""


@dataclass(frozen=True)
class _Asker:
    read_line: LineReader
    console: Console
    check_edit: EditCheck

    async def ask(self, prompt: str) -> str:
        line = await self.read_line(prompt)
        if line is None:
            raise _LeftUndecided
        return line

    async def decide(self, call: PendingApproval) -> ApprovalDecision:
        """Ask until the call has a decision; an edit that is refused is asked about again."""
        while True:
            _show_call(self.console, call)
            decision = await self._choose(call)
            refusal = (
                None if decision.arguments is None else self.check_edit(call, decision.arguments)
            )
            if refusal is None:
                return decision
            _refuse_edit(self.console, refusal)

    async def _choose(self, call: PendingApproval) -> ApprovalDecision:
        while True:
            choice = _CHOICES.get(
                (await self.ask("approve, edit or reject? [a/e/r] ")).strip().lower()
            )
            if choice == "approve":
                return ApprovalDecision(
                    call_id=call.call_id, decision="approve", digest=call.digest
                )
            if choice == "reject":
                reason = (await self.ask("reason (optional, Enter for none): ")).strip()
                return ApprovalDecision(
                    call_id=call.call_id,
                    decision="reject",
                    digest=call.digest,
                    reason=reason or None,
                )
            if choice == "edit":
                return await self._edit(call)
            self.console.print(Text("type a (approve), e (edit) or r (reject)", style="yellow"))

    async def _edit(self, call: PendingApproval) -> ApprovalDecision:
        console = self.console
        shown = json.dumps(call.arguments) if isinstance(call.arguments, dict) else call.arguments
        console.print(Text(f"the arguments now: {shown}", style="dim"))
        while True:
            typed = await self.ask("new arguments (a JSON object): ")
            try:
                arguments = json.loads(typed)
            except json.JSONDecodeError as exc:
                console.print(Text(f"that is not JSON ({exc}); try again", style="yellow"))
                continue
            if not isinstance(arguments, dict):
                console.print(
                    Text("the arguments must be a JSON object {...}; try again", "yellow")
                )
                continue
            return ApprovalDecision(
                call_id=call.call_id, decision="edit", digest=call.digest, arguments=arguments
            )
