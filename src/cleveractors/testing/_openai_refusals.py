"""Chat Completions' 400 for messages it refuses although well formed JSON: content parts of a
type the role does not take, and tool calls without their results (or results without calls).

The rules follow the `openai` SDK's message param types (`ChatCompletionMessageParam`): a user
message's parts are `text`, `image_url`, `input_audio` or `file`; an assistant's `text` or
`refusal`; a system, developer or tool message's `text` only. Every `tool_calls` id of an
assistant message must be answered by the tool messages right after it, and a tool message
must answer a call of the assistant message before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from cleveractors.testing.wire import Rejection

__all__ = ["messages_rejection"]

_PART_TYPES: Mapping[str, tuple[str, ...]] = {
    "user": ("text", "image_url", "input_audio", "file"),
    "assistant": ("text", "refusal"),
    "system": ("text",),
    "developer": ("text",),
    "tool": ("text",),
}


def messages_rejection(body: Mapping[str, Any]) -> Rejection | None:
    """The API's 400 for the request's messages, or None when it accepts them."""
    messages: Sequence[Mapping[str, Any]] = body["messages"]
    for position, message in enumerate(messages):
        problem = _role_problem(position, message) or _part_problem(position, message)
        if problem is not None:
            return Rejection(HTTPStatus.BAD_REQUEST, problem)
    problem = _tool_calls_problem(messages)
    return None if problem is None else Rejection(HTTPStatus.BAD_REQUEST, problem)


def _role_problem(position: int, message: Mapping[str, Any]) -> str | None:
    role = message.get("role")
    if role in _PART_TYPES:
        return None
    supported = ", ".join(f"'{name}'" for name in _PART_TYPES)
    return (
        f"Invalid value: {role!r}. Supported values are: {supported}. (messages[{position}].role)"
    )


def _part_problem(position: int, message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    if not isinstance(content, list):
        return None
    allowed = _PART_TYPES[message["role"]]
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in allowed:
            supported = ", ".join(f"'{name}'" for name in allowed)
            return (
                f"Invalid value: {kind!r}. Supported values are: {supported}. "
                f"(messages[{position}].content[{number}].type)"
            )
    return None


def _tool_calls_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    waiting: list[str] = []
    called: set[str] = set()
    for position, message in enumerate(messages):
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in called:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls'. (messages[{position}])"
                )
            if call_id in waiting:
                waiting.remove(call_id)
            continue
        if waiting:
            return _unanswered(waiting)
        calls = message.get("tool_calls") or [] if message["role"] == "assistant" else []
        waiting = [str(call.get("id")) for call in calls]
        called = set(waiting)
    return _unanswered(waiting) if waiting else None


def _unanswered(waiting: Sequence[str]) -> str:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(waiting)
    )
