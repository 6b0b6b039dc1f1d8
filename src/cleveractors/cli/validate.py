"""`cleveractors validate`: check an actor's config; list every problem."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from cleveractors.cli.actor import opened
from cleveractors.cli.command import ACTOR_ARGUMENT, SIGTERM_EXIT, Command, app, err, out
from cleveractors.cli.schema import schema_problem
from cleveractors.config import load_actor_config
from cleveractors.errors import ConfigurationError, McpServerError
from cleveractors.executor import ActorExecutor
from cleveractors.tools import Tool


@app.command(cls=Command, short_help="Check an actor's config; list every problem.")
def validate(actor: Annotated[Path, ACTOR_ARGUMENT]) -> None:
    """Check ACTOR's config: fields, tool handlers and schemas, its output schema, provider
    settings, a stub script's tool arguments against their tools' schemas; connect its MCP
    servers. Lists every tool: name, where it comes from, description; and a typed actor's
    answer: the checked output schema and its mode."""
    try:
        executor = ActorExecutor.from_config(actor)
        tools = asyncio.run(opened(executor, lambda: _current_tools(executor)))
        _check_script(actor, tools)
        agent = load_actor_config(actor).agent
    except (ConfigurationError, McpServerError) as exc:
        err.print(f"INVALID: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    except asyncio.CancelledError:  # SIGTERM: the MCP servers are closed, nothing to report
        raise typer.Exit(SIGTERM_EXIT) from None
    out.print(f"OK: {executor.name} ({len(tools)} tool{'' if len(tools) == 1 else 's'})")
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        summary = (tool.description.strip().splitlines() or [""])[0]
        out.print(f"  {tool.name:<{width}}  [{tool.source}]  {summary}".rstrip())
    if agent.output_schema is not None:
        out.print(
            f"  output: {_schema_summary(agent.output_schema)}: a valid JSON Schema, answered "
            f"in {agent.output_mode} mode",
            markup=False,
            highlight=False,
        )


def _schema_summary(schema: dict[str, Any]) -> str:
    """An output schema in a few words: `object (city, rain)`, `array`, `string`."""
    kind = str(schema.get("type", "any value"))
    properties = schema.get("properties")
    if isinstance(properties, dict) and properties:
        return f"{kind} ({', '.join(map(str, properties))})"
    return kind


async def _current_tools(executor: ActorExecutor) -> tuple[Tool, ...]:
    return executor.tools


def _check_script(actor: Path, tools: tuple[Tool, ...]) -> None:
    """A stub script's tool calls fit their tools' schemas (MCP tools included, known once
    their servers are connected): a replay would otherwise fail where the script was meant to
    show something else.

    Raises:
        ConfigurationError: each call that does not fit, by step, tool and field.
    """
    by_name = {tool.name: tool for tool in tools}
    problems = []
    for step, reply in enumerate(load_actor_config(actor).agent.script or ()):
        for position, call in enumerate(reply.tool_calls):
            tool = by_name.get(call.name)
            if tool is None or not isinstance(call.args, dict):
                continue  # an undeclared tool, or argument text: a script may mean them
            problem = schema_problem(tool, call.args)
            if problem is not None:
                problems.append(
                    f"  agent.script.{step}.tool_calls.{position}.args: script step {step + 1} "
                    f"calls {call.name!r} with arguments that fail its schema {problem}"
                )
    if problems:
        count = f"{len(problems)} problem{'' if len(problems) == 1 else 's'}"
        raise ConfigurationError(
            f"{actor}: the script's tool calls do not fit their tools ({count})\n"
            + "\n".join(problems)
        )
