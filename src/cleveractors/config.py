"""Actor configuration: pydantic models (frozen, unknown keys rejected) and YAML/dict loading.

Every validation failure becomes one `ConfigurationError` naming the file, each bad field's path
and the value it had, e.g. ``actor.yaml: agent.tool_max_rounds: Input should be greater than or
equal to 1 (got 0)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from cleveractors.errors import ConfigurationError
from cleveractors.pricing import ModelPrices
from cleveractors.testing.script import ScriptedReply

__all__ = [
    "ActorConfig",
    "LLMAgentConfig",
    "McpServer",
    "ProviderName",
    "StoreConfig",
    "ToolConfig",
    "load_actor_config",
]

ProviderName = Literal[
    "openai",
    "stub",
    "anthropic",
    "google_genai",
    "google_vertexai",
    "ollama",
    "azure_openai",
    "bedrock_converse",
    "mistralai",
    "groq",
    "deepseek",
    "xai",
    "fireworks",
    "together",
]
"""`openai`, `stub`, and the providers of LangChain's `init_chat_model`, by the same names."""

_TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # what OpenAI accepts as a function name
_HANDLER_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
_SECRETISH = re.compile(r"key|token|secret|password|auth", re.IGNORECASE)
_SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# An MCP server's env and headers carry its credentials: no value under a server is echoed.
_HIDDEN_VALUE_PATH = re.compile(r"(^|\.)mcp_servers(\.|$)")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolConfig(_Frozen):
    """A tool the model may call, implemented by a Python callable."""

    name: str = Field(pattern=_TOOL_NAME_PATTERN)
    description: str = ""
    handler: str = Field(pattern=_HANDLER_PATTERN)
    """Import path `package.module:function`; sync or async."""
    parameters: dict[str, Any] | None = None
    """JSON schema of the arguments; derived from the handler's signature when omitted."""
    timeout_s: PositiveFloat | None = None
    ends_turn: bool = False
    """Once this tool has run, its output is the turn's answer; later calls are skipped."""
    concurrent: bool = False
    """May run at the same time as the other concurrent calls of its batch."""

    @model_validator(mode="after")
    def _ends_turn_is_sequential(self) -> ToolConfig:
        if self.ends_turn and self.concurrent:
            raise ValueError("a tool with ends_turn: true cannot be concurrent: true")
        return self


class McpServer(_Frozen):
    """An MCP server whose tools the agent may call: a command (stdio) or a URL (streamable HTTP).

    Values in `env` and `headers` may name environment variables as ``${NAME}``; they are read
    when the server is connected, so secrets never live in the config. A header or variable whose
    name looks like a credential (key, token, secret, password, auth) must take its value that way.
    """

    name: str = Field(pattern=_SERVER_NAME_PATTERN)
    """Unique among the agent's servers; names the server in logs, errors and `validate`."""
    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    """The program and its arguments, started as a child process talking MCP on stdio."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables for the command's process, on top of a minimal inherited set (PATH, HOME...)."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    """The server's streamable HTTP endpoint, e.g. ``http://127.0.0.1:9000/mcp``."""
    headers: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] | None = None
    """Allow-list of the server's tool names; None offers all of them."""
    prefix: bool = False
    """Expose each tool as ``<server name>_<tool name>``."""
    timeout_s: PositiveFloat = 30.0
    """How long one call may take before the model reads a timeout error."""
    concurrent: bool = False
    """The server's tools may run at the same time as the other concurrent calls of a batch."""

    @model_validator(mode="after")
    def _check_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (stdio) or 'url' (streamable HTTP)")
        if self.command is None and self.env:
            raise ValueError("'env' is for a 'command' server; an HTTP server takes 'headers'")
        if self.url is None and self.headers:
            raise ValueError("'headers' are for a 'url' server; a command server takes 'env'")
        for field_name, values in (("env", self.env), ("headers", self.headers)):
            for key, value in values.items():
                if _SECRETISH.search(key) and not _ENV_REFERENCE.search(value):
                    raise ValueError(
                        f"{field_name}.{key} looks like a credential: give it as '${{VARIABLE}}' "
                        "and set the variable in the environment"
                    )
        return self

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

        return _ENV_REFERENCE.sub(lookup, value)


class LLMAgentConfig(_Frozen):
    """The one LLM agent of an actor: a chat model, its prompt, its tools and its limits."""

    type: Literal["llm"] = "llm"
    provider: ProviderName
    model: str = "scripted"
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """The name of the environment variable holding the key (never the key itself); by default
    the provider's usual one (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, ...)."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """Passed through to the provider's chat model class, e.g. Anthropic's `thinking` and
    `max_tokens`, or OpenAI's `reasoning_effort`."""
    temperature: NonNegativeFloat | None = None
    max_retries: int = Field(default=2, ge=0, le=10)
    """The loop's retries of a failed LLM call (HTTP 408/409/429/5xx, connection errors, cut-off
    streams, timeouts), each attempt billed and evented; the model's own client never retries."""
    retry_backoff_s: NonNegativeFloat = 0.5
    """The wait before the first retry when the provider sends no `Retry-After`; each next one
    waits twice as long (at most 8 s), shortened by up to 25 % at random."""
    request_timeout_s: PositiveFloat | None = None
    system_prompt: str | None = None
    tool_max_rounds: PositiveInt = 10
    token_budget: PositiveInt | None = None
    cost_budget_usd: Decimal | None = Field(default=None, gt=0)
    """Stop using tools once a message's calls cost this much (US dollars); needs a known price."""
    pricing: ModelPrices | None = None
    """Your own prices (USD per million tokens), instead of genai-prices' table."""
    tool_output_max_tokens: PositiveInt | None = None
    stream_tool_rounds: bool = True
    """Stream every round with tools bound; false: rounds via ainvoke, final answer as one chunk."""
    tools: tuple[ToolConfig, ...] = ()
    mcp_servers: tuple[McpServer, ...] = ()
    """MCP servers whose tools join `tools` (needs ``cleveractors[mcp]``)."""
    script: tuple[ScriptedReply, ...] | None = None
    """For provider `stub`: the replies it plays back, one per LLM call."""

    @model_validator(mode="after")
    def _check_provider_fields(self) -> LLMAgentConfig:
        if self.provider == "stub" and self.script is None:
            raise ValueError("provider 'stub' needs a 'script' (a list of replies)")
        if self.provider != "stub" and self.script is not None:
            raise ValueError("'script' is only for provider 'stub'")
        names = [tool.name for tool in self.tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be unique; repeated: {', '.join(duplicates)}")
        servers = [server.name for server in self.mcp_servers]
        repeated = sorted({name for name in servers if servers.count(name) > 1})
        if repeated:
            raise ValueError(f"mcp server names must be unique; repeated: {', '.join(repeated)}")
        return self


class StoreConfig(_Frozen):
    """Where sessions and the usage ledger are kept (needs `cleveractors[store]`)."""

    url: str = "sqlite:///cleveractors.db"
    """`sqlite:///path.db`, or `postgresql://user@host/db` (with `cleveractors[postgres]`)."""
    history_turns: PositiveInt = 50
    """How many of a session's latest turns go into the prompt."""
    retention_days: PositiveInt | None = None
    """`cleveractors store prune` removes sessions untouched for longer; None keeps them."""


class ActorConfig(_Frozen):
    """An actor: a name, its one agent, and optionally a store for sessions and the ledger."""

    name: str = Field(min_length=1)
    agent: LLMAgentConfig
    store: StoreConfig | None = None


def load_actor_config(source: str | Path | Mapping[str, Any]) -> ActorConfig:
    """Read and validate an actor config from a YAML file path or a plain dict.

    Raises:
        ConfigurationError: the file is missing or not YAML, or a field is missing or wrong.
    """
    origin = "<dict>"
    if isinstance(source, (str, Path)):
        origin = str(source)
        raw = _read_yaml(Path(source))
    else:
        raw = source
    try:
        return ActorConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigurationError(_describe_validation_error(origin, exc)) from None


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read actor config ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{path}: not valid YAML: {exc}") from None


def _describe_validation_error(origin: str, exc: ValidationError) -> str:
    lines = [f"{origin}: invalid actor config ({exc.error_count()} problem(s))"]
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        # An unknown key's value, or a secret-looking field's, may be a pasted API key: never echo.
        hidden = (
            error["type"] in ("missing", "extra_forbidden")
            or _SECRETISH.search(where)
            or _HIDDEN_VALUE_PATH.search(where)
        )
        got = "" if hidden else f" (got {error['input']!r})"
        lines.append(f"  {where}: {error['msg']}{got}")
    return "\n".join(lines)
