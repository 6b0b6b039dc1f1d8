"""`McpToolbox`: the tools of an agent's MCP servers, one long-lived session per server.

The toolbox opens every server once (when the executor opens, or on the first run) and keeps
its session until it is closed. Opening is all or nothing: when a server cannot be connected or
a tool's name is taken, the servers already started are closed before the error is raised.

Each server's tools become ordinary `Tool`s whose `run` calls the server, so they go through the
same loop, records, events, limits and timeouts as any other tool. A server's tool list is
fetched when it connects and again after it announced a change
(`notifications/tools/list_changed`), before the next round.

The `mcp` package is imported here only when an agent has servers: the library works without
``cleveractors[mcp]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cleveractors.config import ActorConfig, McpServer
from cleveractors.errors import ConfigurationError
from cleveractors.tools._handlers import caller_headers_of
from cleveractors.tools.spec import Tool

if TYPE_CHECKING:
    from cleveractors.tools._mcp_session import McpSession

__all__ = ["McpToolbox", "servers_beside", "with_server_paths_beside"]


def _import_session_class() -> type[McpSession]:
    try:
        from cleveractors.tools._mcp_session import McpSession
    except ImportError as exc:
        raise ConfigurationError(
            f"mcp_servers need the 'mcp' package ({exc}): pip install 'cleveractors[mcp]'"
        ) from None
    return McpSession


class McpToolbox:
    """The MCP servers of one agent and the tools they offer now.

    Args:
        servers: The servers, each with a unique name.
        agent_name: For logs and errors.
        other_tools: The agent's other tools, by name: no server's tool may take one of their
            names.

    Raises:
        ConfigurationError: two servers share a name, or the `mcp` package is not installed.
    """

    def __init__(
        self,
        servers: Sequence[McpServer],
        *,
        agent_name: str,
        other_tools: Mapping[str, Tool] | None = None,
    ) -> None:
        names = [server.name for server in servers]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigurationError(
                f"agent {agent_name!r}: mcp server names must be unique; repeated: "
                + ", ".join(repeated)
            )
        session_class = _import_session_class()
        self._sessions = [session_class(server) for server in servers]
        self._agent_name = agent_name
        self._other_tools = dict(other_tools or {})
        self._lock = asyncio.Lock()
        self._is_open = False
        self._version = 0

    async def open(self) -> None:
        """Connect every server and fetch its tools; a no-op when already open. When it fails,
        every server it had started is closed again.

        Raises:
            McpServerError: a server cannot be reached or does not offer an allowed tool.
            ConfigurationError: a variable named in a server's env or headers is not set, or a
                tool's name is taken by another tool.
        """
        async with self._lock:
            if self._is_open:
                return
            try:
                for session in self._sessions:
                    await session.connect()
                self._checked_tools()  # a taken name fails the opening, not a later round
            except BaseException:
                await self._close_sessions()
                raise
            self._is_open = True

    async def aclose(self) -> None:
        """Close every session; stdio servers are terminated. The toolbox may be opened again."""
        async with self._lock:
            await self._close_sessions()
            self._is_open = False

    @property
    def open_servers(self) -> tuple[str, ...]:
        """The names of the servers whose sessions are open (or opening) now."""
        return tuple(session.server.name for session in self._sessions if session.is_open)

    async def current_tools(self) -> tuple[list[Tool], int]:
        """The servers' tools now, opening the toolbox first if needed, and the list's version,
        which grows whenever a list was (re)fetched: after a connect, or a change the server
        announced.

        Raises:
            McpServerError, ConfigurationError: as `open()`; and a ConfigurationError when a
                changed list gives a tool a name that is taken (the servers stay open).
        """
        await self.open()
        for session in self._sessions:
            if await session.refresh_tools():
                self._version += 1
        return self._checked_tools(), self._version

    def _checked_tools(self) -> list[Tool]:
        """The servers' tools, checked: none takes the name of another tool of the agent."""
        named = dict(self._other_tools)
        for session in self._sessions:
            for tool in session.tools:
                if tool.name in named:
                    raise ConfigurationError(
                        f"agent {self._agent_name!r}: tool name {tool.name!r} is offered twice: "
                        f"by {named[tool.name].source} and by {tool.source} (rename one, or set "
                        "'prefix: true' on the server)"
                    )
                named[tool.name] = tool
        return [tool for session in self._sessions for tool in session.tools]

    async def _close_sessions(self) -> None:
        for session in self._sessions:
            await session.close()


def with_server_paths_beside(config: ActorConfig, config_dir: Path | None) -> ActorConfig:
    """`config` with its stdio MCP servers' relative paths taken from `config_dir`, the actor
    file's folder, as its handlers and SQLite path are; unchanged without one (a dict)."""
    agent = config.agent
    if config_dir is None or not agent.mcp_servers:
        return config
    servers = servers_beside(agent.mcp_servers, config_dir)
    return config.model_copy(update={"agent": agent.model_copy(update={"mcp_servers": servers})})


def servers_beside(servers: Sequence[McpServer], folder: Path) -> tuple[McpServer, ...]:
    """Each stdio server with its relative paths taken from `folder`.

    A server with a `cwd` runs there (a relative `cwd` is taken from `folder`), its command as
    written. Without one, the program is taken from `folder` when it is a relative path with a
    `/` (a bare name is looked up on PATH, as a shell does), and so is each argument that
    starts with `./` or `../` (or is `.` or `..`), names a file in `folder`, or names a folder
    in it by a path with a `/`. Options (`-m`, `--root=...`), module and package names and
    paths found nowhere in `folder` are passed as written.
    """
    folder = folder.absolute()
    return tuple(_server_beside(server, folder) for server in servers)


def _server_beside(server: McpServer, folder: Path) -> McpServer:
    if isinstance(server.caller_headers, str):  # a module beside the actor file first
        named = caller_headers_of(server, search_dir=folder)
        server = server.model_copy(update={"caller_headers": named})
    if server.command is None:
        return server
    if server.cwd is not None:
        return server.model_copy(update={"cwd": str(folder / server.cwd)})
    program, *arguments = server.command
    if "/" in program and not Path(program).is_absolute():
        program = str(folder / program)
    resolved = [str(folder / word) if _is_path(word, folder) else word for word in arguments]
    return server.model_copy(update={"command": (program, *resolved)})


def _is_path(argument: str, folder: Path) -> bool:
    """Whether a command's argument is a relative path to take from `folder`. A bare name
    counts only as a file: a folder of that name is as likely a package run with `-m`."""
    if not argument or argument.startswith("-") or Path(argument).is_absolute():
        return False
    if argument in (".", "..") or argument.startswith(("./", "../")):
        return True
    beside = folder / argument
    return beside.is_file() or ("/" in argument and beside.exists())
