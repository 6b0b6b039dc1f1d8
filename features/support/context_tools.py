"""Tools that read the run's context, for the run-context scenarios: handlers an actor's YAML
names (`support.context_tools:...`), the same functions given in code, a LangChain tool, and the
`caller_headers` function of an MCP server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

from langchain_core.tools import tool

from cleveractors import RunContext

DEPS_SECRET = "deps-secret-4f1e9a2b7c"
"""The bytes a scenario looks for everywhere a run leaves a trace: they must be in none."""


@dataclass(frozen=True)
class Shop:
    """The application's deps: whose shop it is, and a credential that must never be kept."""

    owner: str
    api_token: str = DEPS_SECRET


def whoami(ctx: RunContext) -> str:
    """Who is asking: the run's context as the tool sees it."""
    usage = ctx.usage
    return json.dumps(
        {
            "run_id": ctx.run_id,
            "session_id": ctx.session_id,
            "caller": ctx.caller,
            "actor": ctx.actor,
            "llm_calls": usage.llm_calls,
            "total_tokens": usage.total_tokens,
            "cost_usd": str(usage.cost_usd),
        }
    )


async def my_orders(status: str, ctx: RunContext[Shop]) -> str:
    """The caller's orders with the status (the credential is used, never shown).

    Args:
        status: Which orders: open or shipped.
        ctx: The run's context (never part of the schema).
    """
    authorized = ctx.deps.api_token == DEPS_SECRET
    return f"{ctx.deps.owner} has 2 {status} orders" + ("" if authorized else " (unauthorized)")


def my_orders_sync(status: str, context: Annotated[RunContext[Shop], "the run"]) -> str:
    """The caller's orders with the status, from a blocking handler."""
    return f"{context.deps.owner} has 3 {status} orders"


@tool
def shop_owner(greeting: str, ctx: RunContext[Shop]) -> str:
    """Greet the shop's owner."""
    return f"{greeting}, {ctx.deps.owner}"


def caller_headers(ctx: RunContext) -> dict[str, str]:
    """An MCP server's per-caller headers: the caller's own name and the deps' owner."""
    owner = ctx.deps.owner if isinstance(ctx.deps, Shop) else "nobody"
    return {"X-Caller": ctx.caller or "anonymous", "X-Owner": owner}


async def broken_headers(ctx: RunContext[Shop]) -> dict[str, str]:
    """Per-caller headers that cannot be built: the deps lack what they need."""
    raise LookupError(f"no token on file for {ctx.deps.owner}")
