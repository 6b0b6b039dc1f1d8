"""A run's segments (the first run, then each resumption), and what a pause nobody answers
here prints for a script or a person to decide later."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rich.console import Console
from rich.text import Text

from cleveractors.result import ExecutionResult

PAUSED_EXIT = 3
"""The exit code of a command whose run paused with calls waiting for a person: 0 would read as
answered, 1 as failed; the run is neither, and a script must tell it apart to decide later."""


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
