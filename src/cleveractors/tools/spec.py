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
from cleveractors.context import ContextParameters, annotated_context, context_parameters
from cleveractors.errors import ConfigurationError
from cleveractors.tools._handlers import import_callable

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
    context_parameters: tuple[str, ...] = ()
    """The names under which `run` receives the run's `RunContext` among its arguments; the
    model's schema never lists them and a call that sets one is refused, as an unknown
    argument is."""
    argument_names: frozenset[str] | None = None
    """Every argument the tool takes from the model (a function's parameters): a call with
    another is refused before anything runs. None when the tool itself judges its arguments."""
    needs_deps: bool = False
    """A `RunContext[MyDeps]` parameter: the tool needs the run's `deps`, so a run without
    them is refused before it begins."""
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
    injected = context_parameters(handler)
    parameters: Mapping[str, Any] = (
        _without(config.parameters, injected.names)
        if config.parameters is not None
        else _derive_parameters(handler, tool_name=config.name, injected=injected)
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
        context_parameters=injected.names,
        argument_names=_argument_names(handler, injected),
        needs_deps=injected.needs_deps,
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
    A parameter annotated `RunContext` (or `RunContext[MyDeps]`) receives the run's context
    (`cleveractors.RunContext`) and is not part of the schema.

    Raises:
        ConfigurationError: no schema can be derived from the signature (declare the tool's
            parameters yourself), or `ends_turn` and `concurrent` are both set.
    """
    tool_name = name or handler.__name__
    injected = context_parameters(handler)
    return Tool(
        name=tool_name,
        description=description or inspect.getdoc(handler) or "",
        parameters=_derive_parameters(handler, tool_name=tool_name, injected=injected),
        run=_adapt_callable(handler),
        timeout_s=timeout_s,
        ends_turn=ends_turn,
        concurrent=concurrent,
        needs_approval=needs_approval,
        context_parameters=injected.names,
        argument_names=_argument_names(handler, injected),
        needs_deps=injected.needs_deps,
    )


def tool_from_langchain(tool: BaseTool) -> Tool:
    """Wrap a LangChain tool; it runs through its own `ainvoke`. A field of its arguments
    annotated `RunContext` receives the run's context and is not part of the schema."""

    async def run(arguments: dict[str, Any]) -> object:
        return await tool.ainvoke(arguments)

    injected = _langchain_context_parameters(tool)
    parameters = convert_to_openai_function(tool).get("parameters", _EMPTY_OBJECT_SCHEMA)
    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=_without(parameters, injected.names),
        run=run,
        context_parameters=injected.names,
        needs_deps=injected.needs_deps,
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
    return import_callable(config.handler, where=where, search_dir=search_dir)


def _derive_parameters(
    handler: ToolHandler, *, tool_name: str, injected: ContextParameters
) -> Mapping[str, Any]:
    try:
        derived = convert_to_openai_function(handler)
    except Exception as exc:  # LangChain raises several types for unsupported signatures
        raise ConfigurationError(
            f"tool {tool_name!r}: cannot derive a parameters schema from {handler!r}: {exc}; "
            "declare 'parameters' explicitly"
        ) from None
    parameters: Mapping[str, Any] = derived.get("parameters", _EMPTY_OBJECT_SCHEMA)
    return _without(parameters, injected.names)


def _without(parameters: Mapping[str, Any], names: tuple[str, ...]) -> Mapping[str, Any]:
    """The schema without the properties `names` (the run's context is not the model's)."""
    if not names:
        return parameters
    properties = parameters.get("properties")
    required = parameters.get("required")
    kept: dict[str, Any] = dict(parameters)
    if isinstance(properties, Mapping):
        kept["properties"] = {key: value for key, value in properties.items() if key not in names}
    if isinstance(required, list):
        kept["required"] = [key for key in required if key not in names]
    return kept


def _argument_names(handler: ToolHandler, injected: ContextParameters) -> frozenset[str] | None:
    """The arguments a function takes from the model: its parameters but the context ones;
    None when it takes any (`**kwargs`) or its signature cannot be read."""
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return frozenset(
        parameter.name
        for parameter in parameters
        if parameter.name not in injected.names
        and parameter.kind is not inspect.Parameter.VAR_POSITIONAL
    )


def _langchain_context_parameters(tool: BaseTool) -> ContextParameters:
    """The fields of a LangChain tool's arguments annotated `RunContext`."""
    schema = tool.args_schema
    fields = getattr(schema, "model_fields", None)
    if not isinstance(fields, Mapping):
        return ContextParameters()

    return annotated_context({name: info.annotation for name, info in fields.items()})


def _adapt_callable(handler: ToolHandler) -> Callable[[dict[str, Any]], Awaitable[object]]:
    if inspect.iscoroutinefunction(handler):

        async def run_async(arguments: dict[str, Any]) -> object:
            return await handler(**arguments)

        return run_async

    async def run_in_thread(arguments: dict[str, Any]) -> object:
        # A blocking handler must not stall the event loop (and with it every other stream).
        return await asyncio.to_thread(handler, **arguments)

    return run_in_thread
