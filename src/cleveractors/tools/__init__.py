"""Tools: declared in config, or given as callables or LangChain tools; see `Tool`."""

from cleveractors.tools.spec import (
    Tool,
    ToolHandler,
    as_tool,
    tool_from_callable,
    tool_from_config,
    tool_from_langchain,
)

__all__ = [
    "Tool",
    "ToolHandler",
    "as_tool",
    "tool_from_callable",
    "tool_from_config",
    "tool_from_langchain",
]
