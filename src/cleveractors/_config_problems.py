"""An actor config's problems, said the way a person reads them: one line each, naming the
field's path and, unless it may be a secret, the value it had."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import get_args

import yaml
from pydantic import BaseModel
from pydantic_core import ErrorDetails

from cleveractors._config_rules import CROSS_FIELD, ENV_NAME_PATTERN
from cleveractors._config_tools import ENTRY_TAGS, HANDLER_PATTERN, SECRETISH, TOOL_NAME_PATTERN

__all__ = ["describe_error", "describe_problems", "describe_yaml_error"]

# An MCP server's env and headers carry its credentials: no value under a server is echoed.
_HIDDEN_VALUE_PATH = re.compile(r"(^|\.)mcp_servers(\.|$)")


def describe_problems(origin: str, problems: list[str]) -> str:
    """One message for every problem of a config, one per line under a heading naming it."""
    heading = f"{origin}: invalid actor config ({len(problems)} problem(s))"
    return "\n".join([heading, *(f"  {problem}" for problem in problems)])


def describe_yaml_error(path: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    if not isinstance(exc, yaml.MarkedYAMLError) or mark is None:
        return f"{path}: not valid YAML: {exc}"
    message = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {exc.problem}"
    started = exc.context_mark
    if exc.context and started is not None:
        message += (
            f" ({exc.context} started at line {started.line + 1}, column {started.column + 1})"
        )
    return message


# What a pattern means, said the way a person writes it; the regex itself helps nobody.
_PATTERN_MEANINGS = {
    HANDLER_PATTERN: "expected 'module:function', e.g. 'mytools:get_weather'",
    TOOL_NAME_PATTERN: "expected 1 to 64 letters, digits, '_' or '-'",
    ENV_NAME_PATTERN: "expected an environment variable's name, e.g. 'OPENAI_API_KEY'",
}


def describe_error(error: ErrorDetails, root: type[BaseModel]) -> str:
    """One line for one of pydantic's errors of a config whose top model is `root`."""
    loc = tuple(part for part in error["loc"] if part not in ENTRY_TAGS)
    message = error["msg"]
    value: object = error["input"]
    is_shown = error["type"] not in ("missing", "extra_forbidden")
    if error["type"] == CROSS_FIELD:
        is_shown = value is not None
    elif error["type"] == "string_pattern_mismatch":
        pattern = str(error.get("ctx", {}).get("pattern", ""))
        message = _PATTERN_MEANINGS.get(pattern, message)
    elif error["type"] == "extra_forbidden":
        message = f"unknown key{_did_you_mean(loc, root)}"
    elif error["type"] == "model_type" and not loc:
        message = f"expected a mapping with 'name' and 'agent', not a {type(value).__name__}"
        is_shown = False
    where = ".".join(str(part) for part in loc) or "(top level)"
    # An unknown key's value, or a secret-looking field's, may be a pasted API key: never echo.
    if is_shown and not SECRETISH.search(where) and not _HIDDEN_VALUE_PATH.search(where):
        return f"{where}: {message} (got {value!r})"
    return f"{where}: {message}"


def _did_you_mean(loc: tuple[int | str, ...], root: type[BaseModel]) -> str:
    """`; did you mean 'max_tool_rounds'?` for a misspelt key, from the keys its object takes."""
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if isinstance(part, str) and model is not None:
            field = model.model_fields.get(part)
            model = None if field is None else _model_in(field.annotation)
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The config model a field holds, directly or inside a tuple / optional."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None
