"""A session's compacted history, as the loop leaves it and the store keeps it.

The loop (`agents._compaction`) may clear the tool outputs of the oldest turns it was given and
summarise the oldest turns into one message; `CompactedHistory` says how far, in messages of
the history the run was given, so the store can keep it per session (once per window fill, not
once per request). What is kept of the turns themselves never changes: compaction changes what
is sent, never what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

__all__ = [
    "CLEARED_OUTPUT",
    "SUMMARY_ID",
    "CompactedHistory",
    "SizedHistory",
    "cleared",
    "is_summary",
    "summary_message",
]

SUMMARY_ID = "cleveractors-context-summary"
"""The id of the message that stands for the summarised oldest turns."""
_SUMMARY_HEADER = "[Summary of the earlier conversation, written to save context]\n"
CLEARED_OUTPUT = (
    "[cleveractors: this tool output was cleared to save context; call the tool again if you "
    "need it]"
)


@dataclass(frozen=True, slots=True)
class CompactedHistory:
    """How a run compacted the history it was given, and the size of the history it leaves.

    Attributes:
        summary: The summary's text, when the run wrote one.
        summarized: The first history messages the summary stands for (an earlier summary
            among them).
        cleared: The first history messages whose tool outputs are cleared.
        next_tokens: The tokens of the history the session's next run is given (what this run
            sent of it, the provider's last exact figure plus the estimate of the rest, and
            this turn with its answer), so that run does not count it again.
    """

    summary: str | None
    summarized: int
    cleared: int
    next_tokens: int


class SizedHistory(list[BaseMessage]):
    """A history whose size in tokens is known: what the run that left it measured. The loop
    sizes its first prompt from it instead of counting every message again."""

    def __init__(self, messages: list[BaseMessage], *, tokens: int) -> None:
        super().__init__(messages)
        self.tokens = tokens


def is_summary(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and message.id == SUMMARY_ID


def summary_message(text: str) -> HumanMessage:
    """The message that stands for the summarised turns, first after the system prompt."""
    return HumanMessage(content=_SUMMARY_HEADER + text, id=SUMMARY_ID)


def cleared(message: BaseMessage) -> BaseMessage:
    """A tool output replaced by the placeholder; the call keeps its result message."""
    if not isinstance(message, ToolMessage) or message.content == CLEARED_OUTPUT:
        return message
    return message.model_copy(update={"content": CLEARED_OUTPUT, "artifact": None})
