"""The text of a run, by one rule everywhere: what the user saw, rounds set apart by a blank line.

A run writes text in several rounds: often a sentence before it calls tools ("Let me look that
up."), then the answer after them. `ExecutionResult.text`, the chunks of `execute_stream()`, the
CLI, `/chat`, `/v1/chat/completions` and the chat page all show the same text: every round's
text, in order, the text of a later round set apart from the text before it by
`ROUND_SEPARATOR`. `ExecutionResult.answer` is the last reply's text alone.
"""

from __future__ import annotations

__all__ = ["ROUND_SEPARATOR", "RunText"]

ROUND_SEPARATOR = "\n\n"
"""What goes between the text of two rounds (e.g. before the answer after tools)."""


class RunText:
    """Collects a run's text, piece by piece, as it is shown (streamed or not)."""

    __slots__ = ("_pieces", "_round")

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._round: int | None = None

    @property
    def text(self) -> str:
        """Everything added so far, joined by the rule."""
        return "".join(self._pieces)

    def add(self, round_number: int, text: str) -> str:
        """Take the next piece of a round's text; returns it as it is shown: after a separator
        when it begins a new round's text. An empty piece adds nothing."""
        if not text:
            return ""
        if self._round is not None and round_number != self._round:
            text = ROUND_SEPARATOR + text
        self._round = round_number
        self._pieces.append(text)
        return text
