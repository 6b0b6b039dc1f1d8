"""`ActorExecutor`: runs user messages through an actor's agent and reports what they cost.

    executor = ActorExecutor.from_config("actor.yaml")
    result = await executor.execute("Weather in Paris?")            # ExecutionResult
    async for chunk in executor.execute_stream("Weather in Paris?"):  # answer text, live
        ...
    async for event in executor.execute_events("Weather in Paris?"):  # typed events
        ...

An executor is also an async context manager: `async with ActorExecutor.from_config(path) as
executor:` opens what the agent holds for its life (the MCP servers' sessions) and closes it on
leaving, like `await executor.aclose()`. Without it, the first run opens them.

Each call's own result (the returned `ExecutionResult`, or the stream's `.result`) is the truth;
`last_result` is a convenience holding the latest one, set before any exception propagates.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from cleveractors import tokens
from cleveractors.agents import Agent, EventStream, History, LLMAgent, TextStream
from cleveractors.config import ActorConfig, load_actor_config
from cleveractors.errors import ConfigurationError
from cleveractors.providers import make_chat_model
from cleveractors.result import ExecutionResult
from cleveractors.tools import Tool, tool_from_config

__all__ = ["ActorExecutor"]


def _build_tools(config: ActorConfig) -> tuple[list[Tool], list[str]]:
    """The config's tools, and every problem building them (by field), all at once."""
    tools: list[Tool] = []
    problems: list[str] = []
    for position, tool_config in enumerate(config.agent.tools):
        try:
            tools.append(tool_from_config(tool_config))
        except ConfigurationError as exc:
            problems.append(f"agent.tools.{position}: {exc}")
    return tools, problems


class ActorExecutor:
    """Runs messages through one agent; safe to share between concurrent runs.

    Args:
        agent: The agent to run, e.g. an `LLMAgent` built in code.
        name: The actor's name, for logs and UIs.
    """

    def __init__(self, agent: Agent, *, name: str | None = None) -> None:
        self.agent = agent
        self.name = name or agent.name
        self.last_result: ExecutionResult | None = None
        tokens.warm_up()  # here, once, rather than inside the first cut-off stream

    @classmethod
    def from_config(
        cls,
        source: str | Path | Mapping[str, Any] | ActorConfig,
        *,
        origin: str | None = None,
    ) -> ActorExecutor:
        """Build an executor from a YAML file path, a plain dict or a validated `ActorConfig`.

        The chat model client is built here, once, not per message. `origin` names where a
        validated `ActorConfig` came from, for error messages (a path is named by itself).

        Raises:
            ConfigurationError: naming the file, field and value that are wrong, an unknown
                provider, a handler that cannot be imported or a missing API key variable.
        """
        config = source if isinstance(source, ActorConfig) else load_actor_config(source)
        if origin is None:
            origin = str(source) if isinstance(source, (str, Path)) else "<dict>"
        tools, problems = _build_tools(config)
        try:
            model = make_chat_model(config.agent)
        except ConfigurationError as exc:
            problems.append(str(exc))
        if problems:
            raise ConfigurationError(
                "\n".join(
                    [f"{origin}: invalid actor config ({len(problems)} problem(s))"]
                    + [f"  {problem}" for problem in problems]
                )
            ) from None
        agent = LLMAgent.from_config(config.agent, model=model, tools=tools, name=config.name)
        return cls(agent, name=config.name)

    async def __aenter__(self) -> Self:
        await self.aopen()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aopen(self) -> None:
        """Open what the agent holds for its life: connect its MCP servers, fetch their tools.

        Raises:
            McpServerError: an MCP server cannot be reached or does not offer an allowed tool.
            ConfigurationError: an MCP tool's name collides with another tool's, or a variable
                named in a server's env or headers is not set.
        """
        await self.agent.aopen()

    async def aclose(self) -> None:
        """Close the MCP sessions (stdio servers are terminated). A later run opens them again."""
        await self.agent.aclose()

    async def execute(self, message: str, history: History | None = None) -> ExecutionResult:
        """Run a message to its answer.

        Raises:
            ConfigurationError: the message or history is malformed.
            Exception: the model's own error, unchanged; `last_result` holds the usage.
        """
        return await self.agent.process_message(message, history=history, on_result=self._remember)

    def execute_events(self, message: str, history: History | None = None) -> EventStream:
        """Run a message, yielding typed events; the last is `RunFinished` or `RunFailed`."""
        return self.agent.stream_message(message, history=history, on_result=self._remember)

    def execute_stream(self, message: str, history: History | None = None) -> TextStream:
        """Run a message, yielding the answer's text chunks (non-empty) as they arrive."""
        return TextStream(self.execute_events(message, history))

    def _remember(self, result: ExecutionResult) -> None:
        self.last_result = result
