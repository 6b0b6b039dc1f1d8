"""`Tool`: one runnable tool with its JSON schema, however it was declared.

A tool comes from an actor config (`tool_from_config`), a plain Python callable
(`tool_from_callable`) or a LangChain `BaseTool` (`tool_from_langchain`); `as_tool` picks the
right one. Schemas are checked and validators built once, here, never per call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_function

from cleveractors.config import ToolConfig
from cleveractors.errors import ConfigurationError
from cleveractors.tools._handlers import import_handler_target

ToolHandler = Callable[..., Any]
"""A sync or async callable taking the tool's arguments as keyword arguments."""

_EMPTY_OBJECT_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model can call: name, description, argument schema and how to run it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[object]]
    """Runs the tool with validated arguments."""
    timeout_s: float | None = None
    ends_turn: bool = False
    concurrent: bool = False
    source: str = "python"
    """Where the tool comes from, for errors and listings, e.g. ``mcp server 'files'``."""
    needs_approval: bool = False
    """A person must approve each call before it runs (`cleveractors.approvals`)."""
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ends_turn and self.concurrent:
            raise ConfigurationError(
                f"tool {self.name!r}: a tool with ends_turn cannot be concurrent"
            )
        try:
            Draft202012Validator.check_schema(dict(self.parameters))
        except SchemaError as exc:
            raise ConfigurationError(
                f"tool {self.name!r}: parameters is not a valid JSON schema: {exc.message}"
            ) from None
        object.__setattr__(self, "validator", Draft202012Validator(dict(self.parameters)))

    def openai_schema(self) -> dict[str, Any]:
        """The tool in OpenAI function-calling format, as `bind_tools` takes it."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def tool_from_config(config: ToolConfig, *, config_dir: Path | None = None) -> Tool:
    """Build a tool from its config entry, importing its handler.

    Args:
        config: The tool's config entry.
        config_dir: The actor config file's folder: a handler module there (`mytools.py` or a
            package `mytools/`) is imported from it first, without touching `sys.path`.

    Raises:
        ConfigurationError: the handler cannot be imported (saying where it was looked for) or is
            not callable, or the schema (given or derived) is invalid.
    """
    handler = _import_handler(config, config_dir)
    parameters: Mapping[str, Any] = (
        config.parameters
        if config.parameters is not None
        else _derive_parameters(handler, tool_name=config.name)
    )
    return Tool(
        name=config.name,
        description=config.description or inspect.getdoc(handler) or "",
        parameters=parameters,
        run=_adapt_callable(handler),
        timeout_s=config.timeout_s,
        ends_turn=config.ends_turn,
        concurrent=config.concurrent,
        needs_approval=config.approval == "required",
    )


def tool_from_callable(
    handler: ToolHandler,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    ends_turn: bool = False,
    concurrent: bool = False,
    needs_approval: bool = False,
) -> Tool:
    """Build a tool from a Python function, sync or async; its parameters schema comes from the
    signature and type hints, its description (unless given) from the docstring. With
    `needs_approval`, a person approves each call before it runs (`cleveractors.approvals`).

    Raises:
        ConfigurationError: no schema can be derived from the signature (declare the tool's
            parameters yourself), or `ends_turn` and `concurrent` are both set.
    """
    tool_name = name or handler.__name__
    return Tool(
        name=tool_name,
        description=description or inspect.getdoc(handler) or "",
        parameters=_derive_parameters(handler, tool_name=tool_name),
        run=_adapt_callable(handler),
        timeout_s=timeout_s,
        ends_turn=ends_turn,
        concurrent=concurrent,
        needs_approval=needs_approval,
    )


def tool_from_langchain(tool: BaseTool) -> Tool:
    """Wrap a LangChain tool; it runs through its own `ainvoke`."""

    async def run(arguments: dict[str, Any]) -> object:
        return await tool.ainvoke(arguments)

    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=convert_to_openai_function(tool).get("parameters", _EMPTY_OBJECT_SCHEMA),
        run=run,
    )


def as_tool(candidate: Tool | BaseTool | ToolHandler) -> Tool:
    """Accept a `Tool`, a LangChain `BaseTool` or a plain callable."""
    if isinstance(candidate, Tool):
        return candidate
    if isinstance(candidate, BaseTool):
        return tool_from_langchain(candidate)
    if callable(candidate):
        return tool_from_callable(candidate)
    raise ConfigurationError(
        f"not a tool: {candidate!r} (expected a callable, a LangChain BaseTool or a Tool)"
    )


def _import_handler(config: ToolConfig, search_dir: Path | None) -> ToolHandler:
    where = f"tool {config.name!r}: handler {config.handler!r}"
    target = import_handler_target(config.handler, where=where, search_dir=search_dir)
    if not callable(target):
        raise ConfigurationError(f"{where} is not callable")
    return target


def _derive_parameters(handler: ToolHandler, *, tool_name: str) -> Mapping[str, Any]:
    try:
        derived = convert_to_openai_function(handler)
    except Exception as exc:  # LangChain raises several types for unsupported signatures
        raise ConfigurationError(
            f"tool {tool_name!r}: cannot derive a parameters schema from {handler!r}: {exc}; "
            "declare 'parameters' explicitly"
        ) from None
    parameters: Mapping[str, Any] = derived.get("parameters", _EMPTY_OBJECT_SCHEMA)
    return parameters


def _adapt_callable(handler: ToolHandler) -> Callable[[dict[str, Any]], Awaitable[object]]:
    if inspect.iscoroutinefunction(handler):

        async def run_async(arguments: dict[str, Any]) -> object:
            return await handler(**arguments)

        return run_async

    async def run_in_thread(arguments: dict[str, Any]) -> object:
        # A blocking handler must not stall the event loop (and with it every other stream).
        return await asyncio.to_thread(handler, **arguments)

    return run_in_thread
