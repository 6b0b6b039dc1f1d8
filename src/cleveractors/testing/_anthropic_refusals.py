"""The Messages API's 400 for a request it refuses although well formed: tool blocks without
tools, more than four cache breakpoints, and, with thinking on, a tool turn whose thinking is
missing or not signed by us."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from cleveractors.testing._anthropic_wire import thinking_enabled
from cleveractors.testing.wire import Rejection

__all__ = ["request_rejection"]

_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
_MAX_BREAKPOINTS = 4


def request_rejection(body: Mapping[str, Any], issued: Mapping[str, str]) -> Rejection | None:
    """The API's 400 for a request it refuses although well formed; None when it is accepted.

    A request whose messages hold `tool_use` or `tool_result` blocks must declare tools. With
    thinking enabled, every assistant message of the current turn (after the last user
    message that is not only tool results) that uses a tool must start with a thinking or
    redacted-thinking block, and each thinking block must carry, unchanged, a signature the
    server issued for exactly that text. `issued` maps signatures (and redacted data) to text.
    At most four blocks (tools, system and message blocks) may carry `cache_control`.
    """
    if not body.get("tools") and _holds_tool_blocks(body["messages"]):
        refusal = "Requests which include `tool_use` or `tool_result` blocks must define tools."
        return Rejection(HTTPStatus.BAD_REQUEST, refusal)
    marked = _count_breakpoints([body.get("tools"), body.get("system"), body["messages"]])
    if marked > _MAX_BREAKPOINTS:
        refusal = (
            f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {marked}."
        )
        return Rejection(HTTPStatus.BAD_REQUEST, refusal)
    if not thinking_enabled(body):
        return None
    messages: list[dict[str, Any]] = body["messages"]
    for position in range(_current_turn_start(messages), len(messages)):
        message = messages[position]
        content = message["content"]
        if message["role"] != "assistant" or isinstance(content, str):
            continue
        problem = _unsigned_tool_turn(position, content, issued)
        if problem is not None:
            return Rejection(HTTPStatus.BAD_REQUEST, problem)
    return None


def _count_breakpoints(value: object) -> int:
    if isinstance(value, dict):
        marked = int("cache_control" in value)
        return marked + sum(_count_breakpoints(item) for item in value.values())
    if isinstance(value, list):
        return sum(_count_breakpoints(item) for item in value)
    return 0


def _holds_tool_blocks(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(
        block["type"] in ("tool_use", "tool_result")
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
    )


def _current_turn_start(messages: Sequence[Mapping[str, Any]]) -> int:
    """Where the current turn starts: after the last user message that is not only results."""
    asked = [
        position
        for position, message in enumerate(messages)
        if message["role"] == "user" and not _only_tool_results(message["content"])
    ]
    return asked[-1] + 1 if asked else 0


def _only_tool_results(content: str | list[dict[str, Any]]) -> bool:
    return isinstance(content, list) and all(b["type"] == "tool_result" for b in content)


def _unsigned_tool_turn(
    position: int, content: list[dict[str, Any]], issued: Mapping[str, str]
) -> str | None:
    if not any(block["type"] == "tool_use" for block in content):
        return None
    first = content[0]["type"] if content else "nothing"
    if first not in ("thinking", "redacted_thinking"):
        return (
            f"messages.{position}.content.0.type: Expected `thinking` or `redacted_thinking`, "
            f"but found `{first}`. When `thinking` is enabled, a final `assistant` message must "
            "start with a thinking block (preceeding the lastmost set of `tool_use` and "
            "`tool_result` blocks). We recommend you include thinking blocks from previous "
            f"turns. To avoid this requirement, disable `thinking`. Please consult our "
            f"documentation at {_THINKING_DOCS}"
        )
    for number, block in enumerate(content):
        if block["type"] == "thinking" and issued.get(str(block.get("signature"))) != block.get(
            "thinking"
        ):
            return f"messages.{position}.content.{number}: Invalid `signature` in `thinking` block"
        if block["type"] == "redacted_thinking" and str(block.get("data")) not in issued:
            return (
                f"messages.{position}.content.{number}: Invalid `data` in `redacted_thinking` block"
            )
    return None
