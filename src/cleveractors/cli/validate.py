"""`cleveractors validate`: check an actor's config; list every problem."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from cleveractors.cli.actor import opened
from cleveractors.cli.command import ACTOR_ARGUMENT, SIGTERM_EXIT, Command, app, err, out
from cleveractors.errors import (
    ConfigurationError,
    McpServerError,
)
from cleveractors.executor import ActorExecutor
from cleveractors.tools import Tool


@app.command(cls=Command, short_help="Check an actor's config; list every problem.")
def validate(actor: Annotated[Path, ACTOR_ARGUMENT]) -> None:
    """Check ACTOR's config: fields, tool handlers and schemas, provider settings; connect its
    MCP servers. Lists every tool: name, where it comes from, description."""
    try:
        executor = ActorExecutor.from_config(actor)
        tools = asyncio.run(opened(executor, lambda: _current_tools(executor)))
    except (ConfigurationError, McpServerError) as exc:
        err.print(f"INVALID: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None
    except asyncio.CancelledError:  # SIGTERM: the MCP servers are closed, nothing to report
        raise typer.Exit(SIGTERM_EXIT) from None
    out.print(f"OK: {executor.name} ({len(tools)} tools)")
    width = max((len(tool.name) for tool in tools), default=0)
    for tool in tools:
        summary = (tool.description.strip().splitlines() or [""])[0]
        out.print(f"  {tool.name:<{width}}  [{tool.source}]  {summary}".rstrip())


async def _current_tools(executor: ActorExecutor) -> tuple[Tool, ...]:
    return executor.tools
