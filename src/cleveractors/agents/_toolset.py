"""The tool set of one agent: its own tools and its MCP servers' tools, bound to its model.

Binding converts every schema, so it is done once, and again only when an MCP server's list of
tools changes (`sync`, before each round). The set also keeps the dispatcher that runs a batch of
calls against the current tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from cleveractors.agents._batch import ToolDispatcher
from cleveractors.config import McpServer
from cleveractors.errors import ConfigurationError
from cleveractors.providers.tool_choice import bind_tools_forbidding_calls
from cleveractors.tools import Tool, ToolHandler, as_tool
from cleveractors.tools.mcp import McpToolbox

__all__ = ["ToolSet"]


class ToolSet:
    """The tools an agent offers its model.

    Attributes:
        tools: The tools by name, the agent's own first.
        dispatcher: Runs a batch of calls against `tools`.
        model_with_tools: The model with every tool bound (a round's request).
        model_declaring_tools: The model with the tools declared and calling them forbidden,
            in the provider's own words (a synthesis request whose transcript holds tool calls).

    Raises:
        ConfigurationError: two of the agent's own tools share a name.
    """

    __slots__ = (
        "_agent_name",
        "_mcp",
        "_mcp_version",
        "_model",
        "_own_tools",
        "_provider",
        "dispatcher",
        "model_declaring_tools",
        "model_with_tools",
        "tools",
    )

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[Tool | BaseTool | ToolHandler],
        *,
        agent_name: str,
        provider: str | None,
        mcp_servers: Sequence[McpServer] = (),
    ) -> None:
        self._model = model
        self._agent_name = agent_name
        self._provider = provider
        self._own_tools: dict[str, Tool] = {}
        for candidate in tools:
            tool = as_tool(candidate)
            if tool.name in self._own_tools:
                raise ConfigurationError(f"agent {agent_name!r}: two tools are named {tool.name!r}")
            self._own_tools[tool.name] = tool
        self._mcp = (
            McpToolbox(mcp_servers, agent_name=agent_name, other_tools=self._own_tools)
            if mcp_servers
            else None
        )
        self._mcp_version = 0
        self._bind(self._own_tools)

    async def sync(self) -> None:
        """Bind the MCP servers' tools when they are new or changed (connecting them first).

        Raises:
            McpServerError: a server cannot be reached or does not offer an allowed tool.
            ConfigurationError: an MCP tool's name collides with another tool's.
        """
        if self._mcp is None:
            return
        mcp_tools, version = await self._mcp.current_tools()  # names checked by the toolbox
        if version == self._mcp_version:
            return
        self._bind(self._own_tools | {tool.name: tool for tool in mcp_tools})
        self._mcp_version = version

    @property
    def open_mcp_servers(self) -> tuple[str, ...]:
        """The names of the MCP servers connected (or connecting) now."""
        return () if self._mcp is None else self._mcp.open_servers

    async def aclose(self) -> None:
        """Close the MCP sessions (stdio servers are terminated); a later `sync` reopens them."""
        if self._mcp is not None:
            await self._mcp.aclose()

    def _bind(self, tools: dict[str, Tool]) -> None:
        self.tools = tools
        self.dispatcher = ToolDispatcher(tools, agent_name=self._agent_name)
        schemas = [tool.openai_schema() for tool in tools.values()]
        model = self._model
        self.model_with_tools: Runnable[LanguageModelInput, Any] = (
            model.bind_tools(schemas) if tools else model
        )
        self.model_declaring_tools: Runnable[LanguageModelInput, Any] = (
            bind_tools_forbidding_calls(model, schemas, provider=self._provider) if tools else model
        )
