"""MCP servers our tests start (stdio and streamable HTTP), written with the `mcp` SDK."""
