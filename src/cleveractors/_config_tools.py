"""The config of an agent's tools: a tool implemented by a Python callable (`ToolConfig`) and
an MCP server (`McpServer`), each with the rules between its fields."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    PositiveFloat,
    Tag,
    model_validator,
)

from cleveractors._config_rules import Frozen, Problem, is_true, validated_with_rules
from cleveractors.context import RunContext
from cleveractors.errors import ConfigurationError

__all__ = [
    "ENTRY_TAGS",
    "ENV_REFERENCE",
    "HANDLER_PATTERN",
    "SECRETISH",
    "TOOL_NAME_PATTERN",
    "AgentToolConfig",
    "CallerHeaders",
    "McpServer",
    "ToolConfig",
    "ToolEntry",
]

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # what OpenAI accepts as a function name
HANDLER_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
SECRETISH = re.compile(r"key|token|secret|password|auth", re.IGNORECASE)
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"

CallerHeaders = Callable[[RunContext[Any]], Mapping[str, str] | Awaitable[Mapping[str, str]]]
"""Maps the context of the run making an MCP call to the HTTP headers of that call (sync or
async): a caller's own credentials, sent with their calls only."""


class ToolConfig(Frozen):
    """A tool the model may call, implemented by a Python callable."""

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = ""
    handler: str = Field(pattern=HANDLER_PATTERN)
    """Import path `package.module:function`; sync or async."""
    parameters: dict[str, Any] | None = None
    """JSON schema of the arguments; derived from the handler's signature when omitted."""
    timeout_s: PositiveFloat | None = None
    ends_turn: bool = False
    """Once this tool has run, its output is the turn's answer; later calls are skipped."""
    concurrent: bool = False
    """May run at the same time as the other concurrent calls of its batch."""
    approval: Literal["never", "required"] = "never"
    """`required`: a person approves each call before it runs; the run pauses until then."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(
        cls, data: object, handler: ModelWrapValidatorHandler[ToolConfig]
    ) -> ToolConfig:
        problems = list(_tool_problems(data)) if isinstance(data, Mapping) else []
        return validated_with_rules(data, handler, problems)


class AgentToolConfig(Frozen):
    """Another actor, called as a tool: the calling model sends it a `message`, it runs a whole
    turn of its own, and its answer is the tool's output."""

    agent: str = Field(min_length=1)
    """The other actor's config file, relative to this actor's file."""
    name: str | None = Field(default=None, pattern=TOOL_NAME_PATTERN)
    """The tool's name; the other actor's name when omitted."""
    description: str | None = None
    """What the calling model reads about the tool."""


def _entry_kind(entry: object) -> str:
    is_agent = (
        "agent" in entry if isinstance(entry, Mapping) else isinstance(entry, AgentToolConfig)
    )
    return _AGENT_TAG if is_agent else _HANDLER_TAG


_HANDLER_TAG, _AGENT_TAG = "<handler>", "<agent>"
ENTRY_TAGS = frozenset({_HANDLER_TAG, _AGENT_TAG})
"""How pydantic names the kind of a tool entry in an error's location; problems leave it out."""

ToolEntry = Annotated[
    Annotated[ToolConfig, Tag(_HANDLER_TAG)] | Annotated[AgentToolConfig, Tag(_AGENT_TAG)],
    Discriminator(_entry_kind),
]
"""One entry of `agent.tools`: a Python tool (`handler`) or another actor (`agent`)."""


def _tool_problems(tool: Mapping[str, Any]) -> Iterator[Problem]:
    if is_true(tool.get("ends_turn")) and is_true(tool.get("concurrent")):
        yield Problem(
            ("concurrent",),
            "a tool with ends_turn: true cannot be concurrent: true",
            tool.get("concurrent"),
        )


class McpServer(Frozen):
    """An MCP server whose tools the agent may call: a command (stdio) or a URL (streamable HTTP).

    Values in `env` and `headers` may name environment variables as ``${NAME}``; they are read
    when the server is connected, so secrets never live in the config. A header or variable whose
    name looks like a credential (key, token, secret, password, auth) must take its value that way.
    """

    name: str = Field(pattern=_SERVER_NAME_PATTERN)
    """Unique among the agent's servers; names the server in logs, errors and `validate`."""
    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    """The program and its arguments, started as a child process talking MCP on stdio. Read
    from a file, their relative paths are taken from the file's folder, unless `cwd` is given
    (`docs/mcp.md` says which count as paths)."""
    cwd: str | None = Field(default=None, min_length=1)
    """The folder the command runs in (relative: from the actor file's folder); the command and
    its arguments are then taken as written."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables for the command's process, on top of a minimal inherited set (PATH, HOME...)."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    """The server's streamable HTTP endpoint, e.g. ``http://127.0.0.1:9000/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    caller_headers: str | CallerHeaders | None = None
    """For a `url` server: `module:function` (or, in code, the function) mapping the calling
    run's `RunContext` to HTTP headers added to that run's calls only (a caller's own token);
    the session stays shared, the headers never reach another caller's calls."""
    tools: tuple[str, ...] | None = None
    """Allow-list of the server's tool names; None offers all of them."""
    prefix: bool = False
    """Expose each tool as ``<server name>_<tool name>``."""
    timeout_s: PositiveFloat = 30.0
    """How long one call may take before the model reads a timeout error."""
    concurrent: bool = False
    """The server's tools may run at the same time as the other concurrent calls of a batch."""
    approval: Literal["never", "required"] | tuple[str, ...] = "never"
    """`required`: a person approves each call of the server's tools before it runs; or the
    names (as the server names them) of the tools that need it."""

    def needs_approval(self, tool_name: str) -> bool:
        """Whether calls of the server's tool `tool_name` (the server's own name) wait for a
        person."""
        if isinstance(self.approval, tuple):
            return tool_name in self.approval
        return self.approval == "required"

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(cls, data: object, handler: ModelWrapValidatorHandler[McpServer]) -> McpServer:
        problems = list(_server_problems(data)) if isinstance(data, Mapping) else []
        return validated_with_rules(data, handler, problems)

    def resolved_env(self) -> dict[str, str]:
        """`env` with every ``${NAME}`` replaced from the environment.

        Raises:
            ConfigurationError: a named variable is not set.
        """
        return {key: self._resolve("env", key, value) for key, value in self.env.items()}

    def resolved_headers(self) -> dict[str, str]:
        """`headers` with every ``${NAME}`` replaced from the environment.

        Raises:
            ConfigurationError: a named variable is not set.
        """
        return {key: self._resolve("headers", key, value) for key, value in self.headers.items()}

    def _resolve(self, field_name: str, key: str, value: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable not in os.environ:
                raise ConfigurationError(
                    f"mcp server {self.name!r}: {field_name}.{key} names the environment "
                    f"variable {variable}, which is not set"
                )
            return os.environ[variable]

        return ENV_REFERENCE.sub(lookup, value)


def _server_problems(server: Mapping[str, Any]) -> Iterator[Problem]:
    has_command, has_url = server.get("command") is not None, server.get("url") is not None
    if has_command == has_url:
        yield Problem((), "give either 'command' (stdio) or 'url' (streamable HTTP)")
    if has_url and not has_command and server.get("env"):
        yield Problem(("env",), "'env' is for a 'command' server; an HTTP server takes 'headers'")
    if has_url and not has_command and server.get("cwd") is not None:
        yield Problem(("cwd",), "'cwd' is for a 'command' server")
    if has_command and not has_url and server.get("caller_headers") is not None:
        yield Problem(("caller_headers",), "'caller_headers' are for a 'url' server")
    if isinstance(caller := server.get("caller_headers"), str) and not re.match(
        HANDLER_PATTERN, caller
    ):
        yield Problem(("caller_headers",), "must be 'module:function'", caller)
    if has_command and not has_url and server.get("headers"):
        yield Problem(
            ("headers",), "'headers' are for a 'url' server; a command server takes 'env'"
        )
    for field_name in ("env", "headers"):
        values = server.get(field_name)
        for key, value in values.items() if isinstance(values, Mapping) else ():
            if (
                isinstance(key, str)
                and isinstance(value, str)
                and SECRETISH.search(key)
                and not ENV_REFERENCE.search(value)
            ):
                yield Problem(
                    (field_name, key),
                    "looks like a credential: give it as '${VARIABLE}' and set the variable in "
                    "the environment",
                )
    approval, allowed = server.get("approval"), server.get("tools")
    if isinstance(approval, list | tuple) and isinstance(allowed, list | tuple):
        # A gated name the allow-list leaves out is a typo that would let the real tool run.
        for name in sorted(set(approval) - set(allowed)):
            yield Problem(
                ("approval",), f"names {name!r}, which is not in the server's 'tools'", approval
            )
