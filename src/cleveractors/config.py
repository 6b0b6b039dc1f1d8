"""Actor configuration: pydantic models (frozen, unknown keys rejected) and YAML/dict loading.

Every validation failure becomes one `ConfigurationError` naming the file, each bad field's path
and the value it had, e.g. ``actor.yaml: agent.max_tool_rounds: Input should be greater than or
equal to 1 (got 0)``. Rules between fields (a script only for provider `stub`, unique tool names,
a script calling only declared tools...) are checked on the raw data, so that they are reported
in the same pass as every field's own problem. A renamed key still loads under its old name,
with a `DeprecationWarning` naming the new one, until 1.0.
"""

from __future__ import annotations

import difflib
import os
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from cleveractors._script import ScriptedReply
from cleveractors.errors import ConfigurationError
from cleveractors.pricing import ModelPrices

__all__ = [
    "ActorConfig",
    "LLMAgentConfig",
    "McpServer",
    "ProviderName",
    "StoreConfig",
    "ToolConfig",
    "check_actor_config",
    "config_origin",
    "describe_problems",
    "load_actor_config",
    "read_actor_source",
    "valid_part_of_agent",
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

_PROVIDERS: frozenset[str] = frozenset(get_args(ProviderName))
_TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"  # what OpenAI accepts as a function name
_HANDLER_PATTERN = r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$"
_ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_SECRETISH = re.compile(r"key|token|secret|password|auth", re.IGNORECASE)
_SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# An MCP server's env and headers carry its credentials: no value under a server is echoed.
_HIDDEN_VALUE_PATH = re.compile(r"(^|\.)mcp_servers(\.|$)")
# An agent's keys that were renamed: old name -> new name. The old one loads, with a warning.
_RENAMED_AGENT_KEYS = {"tool_max_rounds": "max_tool_rounds"}
_REMOVAL_VERSION = "1.0"
_STUB_MODEL = "scripted"
_CROSS_FIELD = "cross_field"  # the error type of a rule between fields


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True, slots=True)
class _Problem:
    """A rule between fields broken: reported at the field it is about (pydantic would name the
    enclosing object and echo all of it), with that field's value when it helps."""

    loc: tuple[str | int, ...]
    message: str
    value: object = None
    """Shown as ``(got ...)``; None shows nothing."""


_ModelT = TypeVar("_ModelT", bound=BaseModel)
_LAX_BOOL: TypeAdapter[bool] = TypeAdapter(bool)


def _validated_with_rules(
    data: object, handler: ModelWrapValidatorHandler[_ModelT], problems: list[_Problem]
) -> _ModelT:
    """Validate `data`, reporting `problems` (rules between its fields, checked on the raw data)
    together with every field's own problem: in an after-validator, a rule would be checked only
    once every field is valid, and a user would fix a config one pass at a time."""
    try:
        model = handler(data)
    except ValidationError as exc:
        errors = [*map(_reraised, exc.errors()), *map(_init_error, problems)]
        raise ValidationError.from_exception_data(exc.title, errors) from None
    if problems:
        errors = [_init_error(problem) for problem in problems]
        raise ValidationError.from_exception_data(type(model).__name__, errors)
    return model


def _reraised(error: ErrorDetails) -> InitErrorDetails:
    """A field's error as it was, its message included (a known type would get its default)."""
    kind = PydanticCustomError(error["type"], error["msg"], error.get("ctx"))
    return {"type": kind, "loc": error["loc"], "input": error["input"]}


def _init_error(problem: _Problem) -> InitErrorDetails:
    kind = PydanticCustomError(_CROSS_FIELD, problem.message)
    return {"type": kind, "loc": problem.loc, "input": problem.value}


def _is_true(value: object) -> bool:
    """Whether a raw value is one pydantic reads as true (`true`, `yes`, 1...)."""
    try:
        return _LAX_BOOL.validate_python(value)
    except ValidationError:
        return False  # its field's own problem


def _entries(data: Mapping[str, Any], key: str) -> list[tuple[int, Mapping[str, Any]]]:
    """The mappings of a raw list field, by position; anything else is its field's own problem."""
    value = data.get(key)
    if not isinstance(value, list | tuple):
        return []
    return [(position, entry) for position, entry in enumerate(value) if isinstance(entry, Mapping)]


def _named(entries: list[tuple[int, Mapping[str, Any]]]) -> list[tuple[int, str]]:
    names = ((position, entry.get("name")) for position, entry in entries)
    return [(position, name) for position, name in names if isinstance(name, str)]


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
    approval: Literal["never", "required"] = "never"
    """`required`: a person approves each call before it runs; the run pauses until then."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(
        cls, data: object, handler: ModelWrapValidatorHandler[ToolConfig]
    ) -> ToolConfig:
        problems = list(_tool_problems(data)) if isinstance(data, Mapping) else []
        return _validated_with_rules(data, handler, problems)


def _tool_problems(tool: Mapping[str, Any]) -> Iterator[_Problem]:
    if _is_true(tool.get("ends_turn")) and _is_true(tool.get("concurrent")):
        yield _Problem(
            ("concurrent",),
            "a tool with ends_turn: true cannot be concurrent: true",
            tool.get("concurrent"),
        )


class McpServer(_Frozen):
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
        return _validated_with_rules(data, handler, problems)

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


def _server_problems(server: Mapping[str, Any]) -> Iterator[_Problem]:
    has_command, has_url = server.get("command") is not None, server.get("url") is not None
    if has_command == has_url:
        yield _Problem((), "give either 'command' (stdio) or 'url' (streamable HTTP)")
    if has_url and not has_command and server.get("env"):
        yield _Problem(("env",), "'env' is for a 'command' server; an HTTP server takes 'headers'")
    if has_url and not has_command and server.get("cwd") is not None:
        yield _Problem(("cwd",), "'cwd' is for a 'command' server")
    if has_command and not has_url and server.get("headers"):
        yield _Problem(
            ("headers",), "'headers' are for a 'url' server; a command server takes 'env'"
        )
    for field_name in ("env", "headers"):
        values = server.get(field_name)
        for key, value in values.items() if isinstance(values, Mapping) else ():
            if (
                isinstance(key, str)
                and isinstance(value, str)
                and _SECRETISH.search(key)
                and not _ENV_REFERENCE.search(value)
            ):
                yield _Problem(
                    (field_name, key),
                    "looks like a credential: give it as '${VARIABLE}' and set the variable in "
                    "the environment",
                )
    approval, allowed = server.get("approval"), server.get("tools")
    if isinstance(approval, list | tuple) and isinstance(allowed, list | tuple):
        # A gated name the allow-list leaves out is a typo that would let the real tool run.
        for name in sorted(set(approval) - set(allowed)):
            yield _Problem(
                ("approval",), f"names {name!r}, which is not in the server's 'tools'", approval
            )


class LLMAgentConfig(_Frozen):
    """The one LLM agent of an actor: a chat model, its prompt, its tools and its limits."""

    type: Literal["llm"] = "llm"
    provider: ProviderName
    model: str = Field(default="", validate_default=True)
    """The provider's name for the model, e.g. `gpt-4o-mini`; required for every provider but
    `stub`, whose default is `scripted`."""
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME_PATTERN)
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
    stream_stall_timeout_s: PositiveFloat | None = 120.0
    """A streamed model call that sends no chunk for this long is ended (`StreamStalledError`,
    retried like a timeout before any text was shown). It replaces the client's own per-chunk
    timeout (ChatOpenAI's `stream_chunk_timeout`); null turns the loop's off and leaves the
    client's."""
    system_prompt: str | None = None
    max_tool_rounds: PositiveInt = 10
    """Tool batches per message; past them the model answers from what it has (synthesis)."""
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
    approval_timeout_s: PositiveFloat = 24 * 60 * 60.0
    """How long a tool call that needs approval waits for a person before it expires (it is then
    read by the model as declined, and never runs)."""
    script: tuple[ScriptedReply, ...] | None = None
    """For provider `stub`: the replies it plays back, one per LLM call."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(
        cls, data: object, handler: ModelWrapValidatorHandler[LLMAgentConfig]
    ) -> LLMAgentConfig:
        problems: list[_Problem] = []
        if isinstance(data, Mapping):
            data = _renamed_keys(data, problems)
            problems += _agent_problems(data)
        return _validated_with_rules(data, handler, problems)

    @field_validator("model")
    @classmethod
    def _check_model_given(cls, model: str, info: ValidationInfo) -> str:
        """A field validator, not an after-model one, so that pydantic reports it in the same
        pass as the other fields' problems."""
        if model:
            return model
        provider = info.data.get("provider")
        if provider is None or provider == "stub":  # None: the provider's own problem is reported
            return _STUB_MODEL
        raise PydanticCustomError(
            "missing",
            "Field required for provider '{provider}' (only provider 'stub' has a default model)",
            {"provider": provider},
        )


def _renamed_keys(agent: Mapping[str, Any], problems: list[_Problem]) -> dict[str, Any]:
    """The agent's keys under their current names, warning of each old name used; an old name
    given with its new one is a problem, and the new one is validated."""
    renamed = dict(agent)
    for old, new in _RENAMED_AGENT_KEYS.items():
        if old not in renamed:
            continue
        value = renamed.pop(old)
        if new in renamed:
            problems.append(
                _Problem(
                    (old,),
                    f"the deprecated name of {new}, given together with it; keep only agent.{new}",
                    value,
                )
            )
            continue
        warnings.warn(
            f"agent.{old} is deprecated, use agent.{new}; the old name goes in {_REMOVAL_VERSION}",
            DeprecationWarning,
            stacklevel=1,  # no caller frame is the user's: pydantic-core calls this
        )
        renamed[new] = value
    return renamed


def _agent_problems(agent: Mapping[str, Any]) -> list[_Problem]:
    return [
        *_script_problems(agent),
        *_repeated_names(agent, "tools", "tool"),
        *_repeated_names(agent, "mcp_servers", "mcp server"),
        *_undeclared_tool_calls(agent),
    ]


def _script_problems(agent: Mapping[str, Any]) -> Iterator[_Problem]:
    provider, script = agent.get("provider"), agent.get("script")
    if provider == "stub" and script is None:
        yield _Problem(("script",), "provider 'stub' needs a 'script' (a list of replies)")
    elif provider in _PROVIDERS and provider != "stub" and script is not None:
        yield _Problem(("script",), f"'script' is only for provider 'stub', not {provider!r}")


def _repeated_names(agent: Mapping[str, Any], key: str, noun: str) -> Iterator[_Problem]:
    """Each entry that takes a name an earlier entry has, at its own name."""
    first: dict[str, int] = {}
    for position, name in _named(_entries(agent, key)):
        if name in first:
            yield _Problem(
                (key, position, "name"),
                f"{noun} names must be unique; {noun} {first[name]} is named {name!r} too",
            )
        first.setdefault(name, position)


def _undeclared_tool_calls(agent: Mapping[str, Any]) -> Iterator[_Problem]:
    """A scripted call to a tool the agent does not declare: the replay would fail at run time."""
    if agent.get("mcp_servers"):
        # An MCP server's tools are known only once it is connected, so any name may be one.
        return
    if not isinstance(agent.get("tools", ()), list | tuple):
        return  # what it declares is unknown: the field's own problem says why
    declared = list(dict.fromkeys(name for _, name in _named(_entries(agent, "tools"))))
    offered = f"declared: {', '.join(declared)}" if declared else "it declares no tools"
    for reply_position, reply in _entries(agent, "script"):
        for call_position, call in _entries(reply, "tool_calls"):
            name = call.get("name")
            if isinstance(name, str) and name not in declared:
                yield _Problem(
                    ("script", reply_position, "tool_calls", call_position, "name"),
                    f"calls {name!r}, which the actor does not declare ({offered})",
                )


class StoreConfig(_Frozen):
    """Where sessions and the usage ledger are kept (needs `cleveractors[store]`)."""

    url: str = "sqlite:///cleveractors.db"
    """`sqlite:///path.db`, or `postgresql://user@host/db` (with `cleveractors[postgres]`)."""
    history_turns: PositiveInt = 50
    """How many of a session's latest turns go into the prompt."""
    retention_days: PositiveInt | None = None
    """`cleveractors store prune` removes sessions untouched for longer; None keeps them."""
    lease_s: PositiveFloat = 30.0
    """How long a run holds its session without renewing the hold: the longest a session stays
    busy after its worker process died mid-run."""
    max_connections: PositiveInt | None = None
    """The most database connections a worker opens at once (None: 30 on PostgreSQL, 15 on a
    SQLite file); work that finds them all busy waits for one in arrival order."""
    connection_wait_s: PositiveFloat = 30.0
    """How long work waits for a database connection before it fails with `StoreError` (a run
    that cannot start fails before `serve` sends its response's headers)."""


class ActorConfig(_Frozen):
    """An actor: a name, its one agent, and optionally a store for sessions and the ledger."""

    name: str = Field(min_length=1)
    agent: LLMAgentConfig
    store: StoreConfig | None = None


def load_actor_config(source: str | Path | Mapping[str, Any]) -> ActorConfig:
    """Read and validate an actor config from a YAML file path or a plain dict.

    Raises:
        ConfigurationError: the file is missing, empty or not YAML, or fields are missing or
            wrong (every problem at once).
    """
    origin = config_origin(source)
    config, problems = check_actor_config(read_actor_source(source))
    if config is None:
        raise ConfigurationError(describe_problems(origin, problems))
    return config


def config_origin(source: str | Path | Mapping[str, Any]) -> str:
    """How messages name a config: its path, or `<dict>`."""
    return str(source) if isinstance(source, (str, Path)) else "<dict>"


def read_actor_source(source: str | Path | Mapping[str, Any]) -> object:
    """The raw config: a dict as given, or a YAML file parsed.

    Raises:
        ConfigurationError: the file cannot be read, is empty, or is not valid YAML (with its
            line and column).
    """
    if not isinstance(source, (str, Path)):
        return source
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read actor config ({exc.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError(_describe_yaml_error(path, exc)) from None
    if raw is None:
        raise ConfigurationError(
            f"{path}: the file is empty; an actor config needs 'name' and 'agent'"
        )
    return raw


def check_actor_config(raw: object) -> tuple[ActorConfig | None, list[str]]:
    """Validate a raw config: the config, or None and every problem, one line each."""
    try:
        return ActorConfig.model_validate(raw), []
    except ValidationError as exc:
        return None, [_describe_error(error) for error in exc.errors(include_url=False)]


def valid_part_of_agent(raw: object) -> LLMAgentConfig | None:
    """The agent of an invalid config without its wrong fields, when what remains is valid: its
    provider's settings (the API key variable...) can then be checked in the same pass."""
    agent = raw.get("agent") if isinstance(raw, Mapping) else None
    if not isinstance(agent, Mapping):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a renamed key was warned of when the config was read
        try:
            return LLMAgentConfig.model_validate(agent)
        except ValidationError as exc:
            wrong = {error["loc"][0] for error in exc.errors() if error["loc"]}
        try:
            return LLMAgentConfig.model_validate(
                {key: value for key, value in agent.items() if key not in wrong}
            )
        except ValidationError:
            return None


def describe_problems(origin: str, problems: list[str]) -> str:
    """One message for every problem of a config, one per line under a heading naming it."""
    heading = f"{origin}: invalid actor config ({len(problems)} problem(s))"
    return "\n".join([heading, *(f"  {problem}" for problem in problems)])


def _describe_yaml_error(path: Path, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    if not isinstance(exc, yaml.MarkedYAMLError) or mark is None:
        return f"{path}: not valid YAML: {exc}"
    message = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {exc.problem}"
    started = exc.context_mark
    if exc.context and started is not None:
        message += (
            f" ({exc.context} started at line {started.line + 1}, column {started.column + 1})"
        )
    return message


# What a pattern means, said the way a person writes it; the regex itself helps nobody.
_PATTERN_MEANINGS = {
    _HANDLER_PATTERN: "expected 'module:function', e.g. 'mytools:get_weather'",
    _TOOL_NAME_PATTERN: "expected 1 to 64 letters, digits, '_' or '-'",
    _ENV_NAME_PATTERN: "expected an environment variable's name, e.g. 'OPENAI_API_KEY'",
}


def _describe_error(error: ErrorDetails) -> str:
    loc = tuple(error["loc"])
    message = error["msg"]
    value: object = error["input"]
    is_shown = error["type"] not in ("missing", "extra_forbidden")
    if error["type"] == _CROSS_FIELD:
        is_shown = value is not None
    elif error["type"] == "string_pattern_mismatch":
        pattern = str(error.get("ctx", {}).get("pattern", ""))
        message = _PATTERN_MEANINGS.get(pattern, message)
    elif error["type"] == "extra_forbidden":
        message = f"unknown key{_did_you_mean(loc)}"
    elif error["type"] == "model_type" and not loc:
        message = f"expected a mapping with 'name' and 'agent', not a {type(value).__name__}"
        is_shown = False
    where = ".".join(str(part) for part in loc) or "(top level)"
    # An unknown key's value, or a secret-looking field's, may be a pasted API key: never echo.
    if is_shown and not _SECRETISH.search(where) and not _HIDDEN_VALUE_PATH.search(where):
        return f"{where}: {message} (got {value!r})"
    return f"{where}: {message}"


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """`; did you mean 'max_tool_rounds'?` for a misspelt key, from the keys its object takes."""
    model: type[BaseModel] | None = ActorConfig
    for part in loc[:-1]:
        if isinstance(part, str) and model is not None:
            field = model.model_fields.get(part)
            model = None if field is None else _model_in(field.annotation)
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _model_in(annotation: object) -> type[BaseModel] | None:
    """The config model a field holds, directly or inside a tuple / optional."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None
