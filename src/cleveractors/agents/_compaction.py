"""Compaction: making what a run sends fit its context budget, in tiers.

1. Clear old tool outputs: the tool messages of the oldest history turns get a placeholder
   (each call keeps its result message, so no provider sees a call without its answer).
2. If that is not enough, summarise the oldest turns with one LLM call (purpose `compaction`,
   billed, traced and counted against the budgets like any other) into one summary message.

Both work on whole history turns (a user message up to the next), so a tool call is never
separated from its result; the system prompt and this turn (the latest user message onwards)
are never touched. A compaction brings the prompt down to half the budget, so the next one
comes only once the conversation has filled the window again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from cleveractors._compacted import is_summary
from cleveractors.agents._context_window import ContextView
from cleveractors.events import ContextCompacted

__all__ = [
    "COMPACT_TO_SHARE",
    "CompactionReason",
    "compact",
    "is_context_overflow",
    "summary_prompt",
]

COMPACT_TO_SHARE = 0.5
"""A compaction brings the prompt down to this share of the budget."""
CompactionReason = Literal["budget", "context_length_error"]
Summarize = Callable[[list[BaseMessage]], Awaitable[str]]
"""Writes the summary of these messages: one billed LLM call (the loop's `_model_turn`)."""

_SUMMARY_PROMPT = (
    "Summarise the conversation below for the assistant that continues it. Keep every fact, "
    "number, name, decision and open question the user or the tools gave, and what the "
    "assistant promised or concluded; drop small talk and repetition. Write at most {words} "
    "words, in plain prose, and reply with the summary only.\n\n{conversation}"
)


@dataclass(frozen=True, slots=True)
class _Plan:
    clear_through: int
    summarize_through: int


async def compact(
    view: ContextView,
    *,
    round: int,
    reason: CompactionReason,
    summarize: Summarize,
) -> ContextCompacted | None:
    """Make `view` fit half its budget (or half its size, after the provider refused it):
    clear, then summarise, as little as that takes. None when nothing could be compacted."""
    before = view.tokens
    # The plan weighs messages by our own counter; the budget is in the provider's tokens,
    # which the last call's exact figure measured: convert by their ratio.
    view.count_each()
    scale = view.estimate / before if before > 0 else 1.0
    limit = view.budget if view.budget is not None and reason == "budget" else before
    target = int(limit * COMPACT_TO_SHARE * scale)
    if reason == "budget":
        plan = _plan(view, target, summary_target=target // 2, max_summarized=None)
    else:
        plan = _plan(view, target, summary_target=target, max_summarized=target)
    if plan is None:
        return None
    cleared = view.clear_through(plan.clear_through)
    summarized = 0
    if plan.summarize_through > view.summarized:
        turns = view.history_turns()
        summarized = sum(1 for start, _ in turns if start < plan.summarize_through)
        text = await summarize(view.summarized_messages(plan.summarize_through))
        view.summarize_through(plan.summarize_through, text)
    view.rescale(scale)
    return ContextCompacted(
        round=round,
        reason=reason,
        tokens_before=before,
        tokens_after=view.tokens,
        cleared_tool_outputs=cleared,
        summarized_turns=summarized,
    )


def _plan(
    view: ContextView, target: int, *, summary_target: int, max_summarized: int | None
) -> _Plan | None:
    """How far to clear and summarise: the oldest turns first, until the prompt fits."""
    turns = [(start, end) for start, end in view.history_turns()]
    if not turns:
        return None
    size = view.tokens
    clear_through = view.cleared
    for start, end in turns:
        if size <= target:
            break
        if end <= view.cleared:
            continue
        size -= _clearing_saves(view, max(start, view.cleared), end)
        clear_through = end
    if size <= target:
        return _Plan(clear_through, view.summarized) if clear_through > view.cleared else None
    # Clearing every old turn was not enough: summarise the oldest turns, as many as it takes
    # (never a summary that would stand for nothing but the previous one).
    # Ahead of time, a summary brings the prompt down to half the target, so the turns it
    # leaves (cleared already) do not call for another summary at the next compaction. After a
    # refusal the window is smaller than thought: the summarising request must fit it too, so
    # it takes at most half the refused prompt.
    summary_room = max(64, target // 8)
    through, summarized = view.summarized, 0
    for start, end in turns:
        is_enough = size + summary_room <= summary_target
        weight = _cleared_size(view, start, end)
        is_too_much = max_summarized is not None and summarized + weight > max_summarized
        if (is_enough or is_too_much) and not _only_summary(view, through):
            break
        size -= weight
        summarized += weight
        through = end
    return _Plan(max(clear_through, through), through)


def _clearing_saves(view: ContextView, start: int, end: int) -> int:
    return view.tokens_of(start, end) - _cleared_size(view, start, end)


def _cleared_size(view: ContextView, start: int, end: int) -> int:
    """What history positions [start, end) cost once their tool outputs are cleared (their
    clearing is planned, not done: the placeholder is short, so count it as 16 tokens)."""
    messages = view.summarized_messages(end)[-(end - start) :] if end > start else []
    return sum(
        16 if isinstance(message, ToolMessage) else view.tokens_of(start + i, start + i + 1)
        for i, message in enumerate(messages)
    )


def _only_summary(view: ContextView, through: int) -> bool:
    """Whether summarising through `through` would fold nothing but an earlier summary."""
    messages = view.summarized_messages(through) if through > view.summarized else []
    return all(is_summary(message) for message in messages)


def summary_prompt(messages: Sequence[BaseMessage], *, max_words: int) -> list[BaseMessage]:
    """The one request that summarises `messages`, rendered as plain text (a tool call and its
    result as lines, so no provider sees tool blocks without tool definitions)."""
    conversation = "\n".join(_line(message) for message in messages)
    return [HumanMessage(_SUMMARY_PROMPT.format(words=max_words, conversation=conversation))]


def _line(message: BaseMessage) -> str:
    if is_summary(message):
        return f"Earlier summary: {message.text}"
    if isinstance(message, ToolMessage):
        return f"Tool {message.name or message.tool_call_id} returned: {message.text}"
    if isinstance(message, AIMessage):
        calls = "".join(f"\nAssistant called {c['name']}({c['args']})" for c in message.tool_calls)
        return f"Assistant: {message.text}{calls}"
    return f"User: {message.text}"  # the system prompt is never summarised


_OVERFLOW_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_OVERFLOW_WORDS = ("prompt is too long", "maximum context length")


def is_context_overflow(error: BaseException) -> bool:
    """Whether the provider refused the request as too long for the model's context window:
    langchain-core's `ContextOverflowError` (what langchain-openai and langchain-anthropic
    raise), or an HTTP 400 whose body says so (OpenAI's `context_length_exceeded` code,
    Anthropic's "prompt is too long")."""
    if isinstance(error, ContextOverflowError):
        return True
    if getattr(error, "status_code", None) != 400:
        return False
    body = getattr(error, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("code") in _OVERFLOW_CODES:
            return True
    text = str(error).lower()
    return any(words in text for words in _OVERFLOW_WORDS)
