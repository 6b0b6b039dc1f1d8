"""A small MCP server over stdio, written with the `mcp` SDK that `cleveractors[mcp]` installs
(2.x: `MCPServer`, which 1.x called `FastMCP`). Its tools are ordinary functions; the SDK builds
each input schema from the type hints and the description from the docstring.

    cleveractors run examples/mcp_weather_actor.yaml "Weather in Paris?"   # from any folder
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather", log_level="WARNING")

_REPORTS = {"paris": (18, "light rain"), "rome": (24, "sunny")}


@server.tool()
def get_weather(city: str) -> str:
    """Current weather in a city: temperature in Celsius and conditions."""
    celsius, conditions = _REPORTS.get(city.lower(), (20, "clear"))
    return f"{city}: {celsius}°C, {conditions}"


if __name__ == "__main__":
    server.run()  # stdio: the actor starts this file as its child process
