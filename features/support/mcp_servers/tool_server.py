"""An MCP server for our tests: `python tool_server.py` (stdio) or `... http PORT`.

It appends what it sees to the file named by MCP_TEST_LOG (its pid when it starts, a cancelled
call), so tests can check the process table and that cancellation reached the server. Over HTTP,
when MCP_TEST_BEARER is set, requests must carry `Authorization: Bearer <that value>`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, ImageContent, TextContent

server = MCPServer("test-tools", log_level="WARNING")


def _log(line: str) -> None:
    path = os.environ.get("MCP_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(line + "\n")


@server.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@server.tool()
def structured_only(city: str) -> CallToolResult:
    """A result with structured content and no text."""
    return CallToolResult(content=[], structured_content={"city": city, "celsius": 21})


@server.tool()
def picture() -> CallToolResult:
    """A caption and an image."""
    return CallToolResult(
        content=[
            TextContent(type="text", text="a red square"),
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ]
    )


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    raise ToolError(reason)


@server.tool()
async def slow(seconds: float) -> str:
    """Wait, then answer; its start, end and a cancellation are logged."""
    _log(f"slow started {seconds:g}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _log("cancelled slow")
        raise
    _log(f"slow ended {seconds:g}")
    return f"waited {seconds:g}s"


@server.tool()
def crash() -> str:
    """The server dies in the middle of this call."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool()
def secret_seen() -> str:
    """Whether the server got the secret from its environment (never the secret itself)."""
    return "secret present" if os.environ.get("MCP_TEST_SECRET") else "secret missing"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called NAME and announce that the tool list changed."""
    server.add_tool(lambda: f"{name} ran", name=name, description=f"added by grow ({name})")
    await ctx.notify_tools_changed()
    return f"added {name}"


@server.tool()
def protocol_error() -> str:
    """Answers with a JSON-RPC error instead of a result."""
    raise MCPError(code=INVALID_PARAMS, message="the test server refuses this request")


@server.tool()
def nothing() -> CallToolResult:
    """A result with no content at all."""
    return CallToolResult(content=[])


@server.tool()
async def forget(name: str, ctx: Context) -> str:
    """Remove the tool called NAME and announce that the tool list changed."""
    server.remove_tool(name)
    await ctx.notify_tools_changed()
    return f"removed {name}"


@server.tool()
def whose_call(ctx: Context) -> str:
    """The X-Caller and X-Owner headers of the HTTP request that carried this call."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return f"caller={headers.get('x-caller', '-')} owner={headers.get('x-owner', '-')}"


def _serve_http(port: int) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = server.streamable_http_app()
    bearer = os.environ.get("MCP_TEST_BEARER")

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and bearer is not None:
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {bearer}".encode():
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    _log(f"pid {os.getpid()}")
    if sys.argv[1:2] == ["http"]:
        _serve_http(int(sys.argv[2]))
    else:
        server.run()
