"""The script of a scripted server: which reply each request gets, from one shared list or
from the list of its conversation, by the conversation so far."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cleveractors._script import ScriptedReply

__all__ = ["Script", "conversation_of"]


def conversation_of(body: Mapping[str, Any]) -> str:
    """The name of the conversation a chat request belongs to: the text of its first user
    message (every request of a run repeats it; "" when there is none). A script mapping is keyed
    by it; `per_conversation` tells conversations apart by all their messages."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(str(part.get("text", "")) for part in content)
            return str(content or "")
    return ""


def _history(body: Mapping[str, Any]) -> tuple[str, ...]:
    """A request's conversation so far, every message before the reply (a top-level `system`
    first, as the Messages API sends it), one canonical JSON text per message. Prompt-cache
    marks are not the conversation: a message marked in one request and not in the next (the
    mark moves to the newest message) is the same message."""
    system = (body["system"],) if body.get("system") else ()
    return tuple(
        json.dumps(_unmarked(message), sort_keys=True)
        for message in (*system, *body.get("messages", []))
    )


def _unmarked(value: Any) -> Any:
    """`value` without `cache_control`, and a lone text block as the text it holds (how a
    client sends a message's text once it marks it for caching)."""
    if isinstance(value, Mapping):
        return {key: _unmarked(item) for key, item in value.items() if key != "cache_control"}
    if isinstance(value, list):
        items = [_unmarked(item) for item in value]
        lone = items[0] if len(items) == 1 else None
        if isinstance(lone, dict) and lone.keys() == {"type", "text"} and lone["type"] == "text":
            return lone["text"]
        return items
    return value


@dataclass(frozen=True)
class _Taken:
    """The reply a conversation so far was last given: its place in the script, and whether it
    was a fault its client would retry."""

    position: int
    failed: bool


class Script:
    """Which reply a request gets: the next of one shared script (global order), or, per
    conversation, the one its conversation so far has come to."""

    def __init__(
        self,
        script: Sequence[ScriptedReply] | Mapping[str, Sequence[ScriptedReply]],
        *,
        per_conversation: bool,
    ) -> None:
        self.by_conversation = isinstance(script, Mapping)
        self.per_conversation = per_conversation or self.by_conversation
        if isinstance(script, Mapping):
            self.scripts = {name: list(replies) for name, replies in script.items()}
        else:
            self.shared = list(script)
        self.position = 0
        self.taken: dict[tuple[str, ...], _Taken] = {}

    def next_reply(self, body: Mapping[str, Any]) -> ScriptedReply | str:
        """The request's reply, or why there is none."""
        if not self.per_conversation:
            if self.position == len(self.shared):
                return self._exhausted(body, "the script", len(self.shared))
            self.position += 1
            return self.shared[self.position - 1]
        name = conversation_of(body)
        script = self.scripts.get(name) if self.by_conversation else self.shared
        if script is None:
            return f"no script for the conversation {name!r}"
        history = _history(body)
        position = self._position(history)
        if position == len(script):
            return self._exhausted(body, "its script", len(script))
        self.taken[history] = _Taken(position, script[position].fails)
        return script[position]

    def _position(self, history: tuple[str, ...]) -> int:
        """Where in its script a conversation so far is: the same messages again get the same
        reply (another run asking the same), or the next one after a fault (the retry); messages
        that extend an earlier request's get the reply after the one it got; else the first."""
        same = self.taken.get(history)
        if same is not None:
            return same.position + 1 if same.failed else same.position
        for length in range(len(history) - 1, 0, -1):
            earlier = self.taken.get(history[:length])
            if earlier is not None:
                return earlier.position + 1
        return 0

    @staticmethod
    def _exhausted(body: Mapping[str, Any], script: str, replies: int) -> str:
        messages = len(_history(body))
        return (
            f"script exhausted for conversation {conversation_of(body)!r} (messages so far: "
            f"{messages}; replies in {script}: {replies}, all taken)"
        )

    def add(self, replies: Sequence[ScriptedReply]) -> None:
        if self.by_conversation:
            raise TypeError("add_replies() needs a single script, not one per conversation")
        self.shared.extend(replies)

    def left(self) -> int:
        """How many replies of the shared script no request has taken (one script only)."""
        return len(self.shared) - self.position
