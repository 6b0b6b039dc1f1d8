"""Prompt caching, placed for the agent: what each request asks the provider to keep.

Anthropic caches a request's prefix (laid out tools, system, messages) up to each block marked
`cache_control`, at most four per request. The agent marks the last tool (so all the tool
schemas), the system prompt, the last message of the session's earlier turns (stable for the
whole turn, however many tool rounds it takes) and the last message the run keeps (the next
round's request starts with everything up to it). A message made for one call only (the
synthesis request's instruction) is never marked, and neither is a pruning call, whose prompt
is never sent again. OpenAI caches prefixes by itself; `prompt_cache_key`, the session's id (the
agent's name without a session), routes one conversation's requests to the same cache. Gemini
caches implicitly: nothing is sent. Other providers get nothing either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable

from cleveractors.config import PromptCacheMode, PromptCacheTTL
from cleveractors.usage import CallPurpose

__all__ = ["PromptCaching"]

_Style = Literal["breakpoints", "key"]

_STYLES: dict[str, _Style] = {"anthropic": "breakpoints", "openai": "key"}
"""LangChain's provider names (the agent resolves one for its prices too) to how each caches."""

_MARKABLE_BLOCKS = frozenset({"text", "image", "document"})
"""Content blocks a breakpoint may sit on as LangChain messages carry them (a tool message's
mark is moved onto its `tool_result` by langchain-anthropic). Thinking blocks cannot be marked."""

_Model = Runnable[LanguageModelInput, Any]


@dataclass(frozen=True, slots=True)
class PromptCaching:
    """How one agent's requests ask its provider to cache their prefix."""

    style: _Style | None
    """`breakpoints` (Anthropic), `key` (OpenAI), or None: nothing is sent."""
    ttl: PromptCacheTTL = "5m"

    @classmethod
    def of(
        cls, provider: str | None, *, mode: PromptCacheMode, ttl: PromptCacheTTL
    ) -> PromptCaching:
        style = None if mode == "off" else _STYLES.get((provider or "").lower())
        return cls(style, ttl)

    @property
    def _control(self) -> dict[str, str]:
        return {"type": "ephemeral", "ttl": self.ttl}

    def tool_schemas(self, schemas: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools to bind (OpenAI function format); on Anthropic the last one is given in
        Anthropic's own format, which `ChatAnthropic` passes on as it is, with its breakpoint."""
        if self.style != "breakpoints" or not schemas:
            return list(schemas)
        function = schemas[-1]["function"]
        last = {
            "name": function["name"],
            "description": function["description"],
            "input_schema": function["parameters"],
            "cache_control": self._control,
        }
        return [*schemas[:-1], last]

    def request(
        self,
        model: _Model,
        sent: Sequence[BaseMessage],
        *,
        purpose: CallPurpose,
        kept: Sequence[BaseMessage],
        history_end: int,
        key: str,
    ) -> tuple[_Model, Sequence[BaseMessage]]:
        """The model and the messages of one call, with what caching needs.

        Args:
            sent: The messages of the call.
            kept: The run's transcript: the part of `sent` it begins is stable.
            history_end: Where the session's earlier turns end in `kept`.
            key: The session's id, or the agent's name without one.
        """
        if self.style is None or purpose == "pruning":
            return model, sent
        if self.style == "key":
            return model.bind(prompt_cache_key=key), sent
        begins_with_kept = bool(kept) and len(sent) >= len(kept) and sent[len(kept) - 1] is kept[-1]
        stable = len(kept) if begins_with_kept else 0
        return model, self._marked(sent, stable=stable, history_end=history_end)

    def _marked(
        self, sent: Sequence[BaseMessage], *, stable: int, history_end: int
    ) -> list[BaseMessage]:
        messages = list(sent)
        first = 0
        if messages and isinstance(messages[0], SystemMessage):
            first = 1
            messages[0] = _with_mark(messages[0], self._control) or messages[0]
        newest = self._mark_last(messages, before=stable, after=first - 1)
        self._mark_last(messages, before=min(history_end, newest), after=first - 1)
        return messages

    def _mark_last(self, messages: list[BaseMessage], *, before: int, after: int) -> int:
        """Mark the last message that can carry a mark, from `before` (excluded) back to
        `after` (excluded); returns its position (`before` when none could)."""
        for position in range(before - 1, after, -1):
            marked = _with_mark(messages[position], self._control)
            if marked is not None:
                messages[position] = marked
                return position
        return before


def _with_mark(message: BaseMessage, control: dict[str, str]) -> BaseMessage | None:
    """The message with a breakpoint on its last block that can carry one; None if none can."""
    content = message.content
    if isinstance(content, str):
        if not content.strip():  # the API refuses an empty text block
            return None
        blocks: list[str | dict[str, Any]] = [
            {"type": "text", "text": content, "cache_control": control}
        ]
        return message.model_copy(update={"content": blocks})
    for position in range(len(content) - 1, -1, -1):
        block = content[position]
        if _can_mark(block):
            blocks = [*content[:position], {**block, "cache_control": control}]
            return message.model_copy(update={"content": blocks + content[position + 1 :]})
    return None


def _can_mark(block: object) -> TypeGuard[dict[str, Any]]:
    if not isinstance(block, dict) or block.get("type") not in _MARKABLE_BLOCKS:
        return False
    return block.get("type") != "text" or bool(str(block.get("text", "")).strip())
