"""The model's context window, and what the loop sends next with its size, kept cheaply.

`window_of` reads the model's input limit (the agent's `context_window`, else its LangChain
model profile's `max_input_tokens`; None when neither knows it, and then nothing is managed).
`ContextView` is what a run sends: the transcript's messages, with the oldest turns' tool
outputs cleared and the oldest turns summarised once the run compacted them (`agents._compaction`);
the transcript itself, and so the stored turn, is never rewritten.

Sizing never re-tokenises the conversation per call: each message is counted once, when it
joins the view; the provider's exact prompt tokens of the last call replace the estimate of
everything sent up to it (`calibrate`), so the size before a call is that figure plus the
estimate of what was added since.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage

from cleveractors._compacted import CompactedHistory, cleared, summary_message
from cleveractors.tokens import count_message_tokens, count_tokens
from cleveractors.usage import LLMCallUsage

__all__ = ["BUDGET_SHARE", "ContextView", "budget_of", "tool_schema_tokens", "window_of"]

BUDGET_SHARE = 0.75
"""The default context budget: this share of the window, the rest left for the answer."""
_TOKENS_PER_REPLY = 3


def window_of(model: BaseChatModel, configured: int | None) -> int | None:
    """The model's input limit: `configured` (a deployment may allow less than the model),
    else its LangChain profile's `max_input_tokens`, else None (unknown: never guessed)."""
    if configured is not None:
        return configured
    profile = getattr(model, "profile", None)
    limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
    return limit if type(limit) is int and limit > 0 else None


def budget_of(window: int | None, configured: int | None) -> int | None:
    """The prompt size past which the loop compacts: `configured`, else a share of the window."""
    if configured is not None:
        return configured
    return None if window is None else int(window * BUDGET_SHARE)


def tool_schema_tokens(schemas: Iterable[Mapping[str, object]]) -> int:
    """What the tool declarations add to every request, counted once per run."""
    return sum(count_tokens(json.dumps(schema, sort_keys=True)) for schema in schemas)


class ContextView:
    """What a run sends the model next, and its size. Made per run, never shared.

    The view mirrors the transcript: `[head] + history + this turn`, where `head` is the
    system prompt (if any). Compaction replaces the oldest history messages by one summary
    message (`summarized`, counted in history messages) and clears the tool outputs of the
    ones after it (`cleared`); messages the transcript gains later are appended as they are.

    Attributes:
        budget: Compact before a call whose prompt would pass this; None: only after the
            provider refuses a prompt as too long.
        summarized: History messages (as the run was given them) the summary stands for.
        cleared: History messages (from the first) whose tool outputs are cleared.
        summary: The summary's text, once this run wrote one.
    """

    __slots__ = (
        "_calibration",
        "_counts",
        "_head",
        "_history",
        "_overhead",
        "_synced",
        "_total",
        "budget",
        "cleared",
        "sent",
        "summarized",
        "summary",
    )

    def __init__(
        self,
        messages: Sequence[BaseMessage],
        *,
        turn_start: int,
        has_system_prompt: bool,
        budget: int | None,
        overhead: int,
        history_tokens: int | None = None,
    ) -> None:
        self.budget = budget
        self._head = 1 if has_system_prompt else 0
        self._history = turn_start - self._head
        """How many history messages the run was given."""
        self._overhead = overhead + _TOKENS_PER_REPLY
        self.summarized = 0
        self.cleared = 0
        self.summary: str | None = None
        self.sent: list[BaseMessage] = list(messages)
        self._counts: list[int | None]
        if history_tokens is None:
            self._counts = [count_message_tokens(message) for message in self.sent]
            self._total = sum(count for count in self._counts if count is not None)
        else:  # measured by the run that left it: counted only if compaction reads it
            head, turn = self.sent[: self._head], self.sent[turn_start:]
            self._counts = [
                *(count_message_tokens(message) for message in head),
                *([None] * self._history),
                *(count_message_tokens(message) for message in turn),
            ]
            self._total = history_tokens + sum(c for c in self._counts if c is not None)
        self._synced = len(messages)
        """How many transcript messages the view has taken in."""
        self._calibration = 0
        """The provider's exact figure for the last call minus our estimate of it."""

    @property
    def tokens(self) -> int:
        """The next prompt's size: the last exact figure plus the estimate added since."""
        return self._total + self._overhead + self._calibration

    @property
    def turn_start(self) -> int:
        """Where this turn (the user's message) begins in `sent`."""
        return self._sent_offset() + self._history - self.summarized

    @property
    def estimate(self) -> int:
        """The next prompt's size by our own counter alone, without the provider's figure."""
        return self._total + self._overhead

    def rescale(self, scale: float) -> None:
        """Read our own estimate in the provider's tokens again: `scale` is our counter's
        tokens per provider token, as the last exact figure measured it."""
        estimate = self.estimate
        self._calibration = round(estimate / scale) - estimate if scale > 0 else 0

    def sync(self, transcript: Sequence[BaseMessage]) -> None:
        """Take in the messages the transcript gained since the last call (each counted once)."""
        for message in transcript[self._synced :]:
            self.sent.append(message)
            count = count_message_tokens(message)
            self._counts.append(count)
            self._total += count
        self._synced = len(transcript)

    def compacted(self, transcript: Sequence[BaseMessage], answer: BaseMessage) -> CompactedHistory:
        """How far this run compacted its history, and the size of the history it leaves
        (everything it sent but the system prompt, and the answer), for its session to keep."""
        self.sync(transcript)
        head = sum(self._count(index) for index in range(self._head))
        next_tokens = self.tokens - self._overhead - head + count_message_tokens(answer)
        return CompactedHistory(self.summary, self.summarized, self.cleared, max(next_tokens, 0))

    def count_each(self) -> None:
        """Count every message on its own (compaction weighs them one by one): a history
        measured as a whole is counted now, and the size is our own estimate again."""
        if None in self._counts:
            self._counts = [self._count(index) for index in range(len(self.sent))]
            self._total = sum(count for count in self._counts if count is not None)
            self._calibration = 0

    def _count(self, index: int) -> int:
        """The count of `sent[index]`, made now if it was not yet (a measured history)."""
        count = self._counts[index]
        if count is None:
            count = self._counts[index] = count_message_tokens(self.sent[index])
        return count

    def calibrate_from(self, call: LLMCallUsage, *, extra: int = 0) -> None:
        """The provider's exact prompt tokens for the view as sent (plus `extra` estimated
        tokens sent after it): from now on the size is that figure plus what is added. An
        estimated figure changes nothing."""
        usage = call.usage
        if call.status == "ok" and not usage.estimated:
            self._calibration = usage.prompt_tokens - extra - self._total - self._overhead

    # -- what compaction reads and rewrites ----------------------------------------------------

    def history_turns(self) -> list[tuple[int, int]]:
        """The history's turns still sent whole, oldest first: (start, end) in history
        positions, a turn running from a user message to the next one. A tool call and its
        result are always in the same turn."""
        start = max(self.summarized, 0)
        history = self._given_history()
        bounds = [
            position
            for position in range(start + 1, len(history))
            if isinstance(history[position], HumanMessage)
        ]
        edges = [start, *bounds, len(history)]
        return [(a, b) for a, b in pairwise(edges) if a < b]

    def tokens_of(self, start: int, end: int) -> int:
        """The estimated tokens of history positions [start, end) as sent now."""
        offset = self._sent_offset()
        return sum(self._count(offset + p - self.summarized) for p in range(start, end))

    def clear_through(self, end: int) -> int:
        """Clear the tool outputs of history positions before `end`; how many were cleared."""
        offset = self._sent_offset()
        count = 0
        for position in range(max(self.cleared, self.summarized), end):
            index = offset + position - self.summarized
            message = self.sent[index]
            replacement = cleared(message)
            if replacement is not message:
                self.sent[index] = replacement
                new = count_message_tokens(replacement)
                self._total += new - self._count(index)
                self._counts[index] = new
                count += 1
        self.cleared = max(self.cleared, end)
        self._calibration = 0  # our own estimate again, until the next call reports
        return count

    def summarized_messages(self, end: int) -> list[BaseMessage]:
        """What a summary through history position `end` stands for: the current summary (if
        any) and the messages after it, as sent now."""
        offset = self._sent_offset()
        first = offset - (1 if self._has_summary() else 0)
        return self.sent[first : offset + end - self.summarized]

    def summarize_through(self, end: int, text: str) -> None:
        """Replace history positions before `end` (and any earlier summary) by one summary."""
        offset = self._sent_offset()
        first = offset - (1 if self._has_summary() else 0)
        last = offset + end - self.summarized
        message = summary_message(text)
        count = count_message_tokens(message)
        self._total += count - sum(self._count(index) for index in range(first, last))
        self.sent[first:last] = [message]
        self._counts[first:last] = [count]
        self.summarized = end
        self.cleared = max(self.cleared, end)
        self.summary = text
        self._calibration = 0

    def _given_history(self) -> list[BaseMessage | None]:
        """History positions as the run was given them; those summarised are None."""
        offset = self._sent_offset()
        kept = self.sent[offset : offset + self._history - self.summarized]
        return [None] * self.summarized + list(kept)

    def _has_summary(self) -> bool:
        return self.summarized > 0

    def _sent_offset(self) -> int:
        """Where history position `summarized` is in `sent`."""
        return self._head + (1 if self._has_summary() else 0)
