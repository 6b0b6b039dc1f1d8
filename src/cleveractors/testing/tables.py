"""Scripts written as tables: for Behave steps, Robot keywords and your own tests.

A table row maps column headings to cells; `scripted_reply` turns one into a `ScriptedReply`.
Tool calls are written `name#id {json args}`, several separated by ` ; `; arguments that are not a
JSON object are kept as raw text, to script invalid arguments on purpose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from cleveractors._script import ScriptedReply, ScriptedToolCall

__all__ = ["REPLY_COLUMNS", "scripted_reply", "scripted_tool_calls"]

_CALL = re.compile(r"(?P<name>[^\s#]+)(?:#(?P<id>\S+))?(?:\s+(?P<args>.+))?", re.DOTALL)


def _arguments(text: str | None) -> dict[str, object] | str:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


def scripted_tool_calls(cell: str) -> tuple[ScriptedToolCall, ...]:
    """The tool calls written in one cell, e.g. `get_weather#w1 {"city": "Paris"} ; get_time`."""
    calls = []
    for written in filter(None, (part.strip() for part in cell.split(" ; "))):
        match = _CALL.fullmatch(written)
        if match is None:
            raise ValueError(f"not a tool call: {written!r}")
        calls.append(
            ScriptedToolCall(name=match["name"], id=match["id"], args=_arguments(match["args"]))
        )
    return tuple(calls)


REPLY_COLUMNS: dict[str, tuple[str, Callable[[str], object]]] = {
    "text": ("text", str),
    "tool calls": ("tool_calls", scripted_tool_calls),
    "prompt tokens": ("prompt_tokens", int),
    "completion tokens": ("completion_tokens", int),
    "error": ("error", str),
    "status": ("error_status", int),
    "retry after": ("retry_after", str),
    "cut off after": ("cut_off_after_chunks", int),
    "usage": ("omit_usage", lambda cell: cell == "omitted"),
    "delay": ("chunk_delay_s", float),
    "stall": ("stall_s", float),
    "stall after": ("stall_after_chunks", int),
    "args chunk": ("args_chunk_size", int),
    "cache read": ("cache_read_tokens", int),
    "cache write": ("cache_write_tokens", int),
    "reasoning": ("reasoning_tokens", int),
    "model": ("model_name", str),
}
"""The columns a script table may have, and the `ScriptedReply` field each one fills."""


def scripted_reply(cells: Mapping[str, str]) -> ScriptedReply:
    """One scripted reply from a table row (heading → cell); empty cells keep the defaults."""
    fields: dict[str, Any] = {}
    for heading, cell in cells.items():
        if cell:
            key, convert = REPLY_COLUMNS[heading]
            fields[key] = convert(cell)
    return ScriptedReply(**fields)
