"""Actor configuration: pydantic models (frozen, unknown keys rejected) and YAML/dict loading.

Every validation failure becomes one `ConfigurationError` naming the file, each bad field's path
and the value it had, e.g. ``actor.yaml: agent.max_tool_rounds: Input should be greater than or
equal to 1 (got 0)``. Rules between fields (a script only for provider `stub`, unique tool names,
a script calling only declared tools...) are checked on the raw data, so that they are reported
in the same pass as every field's own problem. A renamed key still loads under its old name,
with a `DeprecationWarning` naming the new one, until 1.0.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from cleveractors._config_guardrails import InputGuardrailConfig, OutputGuardrailConfig
from cleveractors._config_problems import describe_error, describe_problems, describe_yaml_error
from cleveractors._config_rules import (
    ENV_NAME_PATTERN,
    Frozen,
    Problem,
    entries,
    named,
    validated_with_rules,
)
from cleveractors._config_tools import (
    AgentToolConfig,
    McpServer,
    ToolConfig,
    ToolEntry,
)
from cleveractors._script import ScriptedReply
from cleveractors.errors import ConfigurationError
from cleveractors.output import OUTPUT_TOOL, OutputMode
from cleveractors.pricing import ModelPrices
from cleveractors.spend_limits import SpendLimits

__all__ = [
    "HANDOFF_TOOL_PREFIX",
    "ActorConfig",
    "AgentToolConfig",
    "FallbackModelConfig",
    "FallbackPolicy",
    "ImmediateFallback",
    "InputGuardrailConfig",
    "LLMAgentConfig",
    "McpServer",
    "OutputGuardrailConfig",
    "PromptCacheMode",
    "PromptCacheTTL",
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

HANDOFF_TOOL_PREFIX = "transfer_to_"
"""How the tool that hands the conversation to an actor of `handoffs` is named: this, then the
actor's name."""

_PROVIDERS: frozenset[str] = frozenset(get_args(ProviderName))
# An agent's keys that were renamed: old name -> new name. The old one loads, with a warning.
PromptCacheMode = Literal["auto", "off"]
"""`auto`: the agent asks the provider to cache its requests' stable prefix (see
docs/caching.md); `off`: nothing extra is sent."""

PromptCacheTTL = Literal["5m", "1h"]
"""How long Anthropic keeps a cached prefix (a 1-hour write costs more than a 5-minute one)."""

_RENAMED_AGENT_KEYS = {"tool_max_rounds": "max_tool_rounds"}
_REMOVAL_VERSION = "1.0"
_STUB_MODEL = "scripted"


class ImmediateFallback(Frozen):
    """An error on which the next model takes over at once, without retrying this one: its HTTP
    `status`, its `code` (the error body's `code` or `type`, e.g. `insufficient_quota`,
    `overloaded_error`), or both."""

    status: int | None = Field(default=None, ge=400, le=599)
    code: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _check_given(self) -> ImmediateFallback:
        if self.status is None and self.code is None:
            raise ValueError("give a status, a code or both")
        return self


DEFAULT_IMMEDIATE_FALLBACKS = (
    ImmediateFallback(status=529),
    ImmediateFallback(code="overloaded_error"),
    ImmediateFallback(status=429, code="insufficient_quota"),
)
"""Anthropic's overloaded (HTTP 529, or its `overloaded_error` inside a stream) and OpenAI's
spent quota (HTTP 429 `insufficient_quota`): retrying the same model does not help."""


class FallbackPolicy(Frozen):
    """When an agent's fallback models take over (`agent.fallback`)."""

    immediate: tuple[ImmediateFallback, ...] = DEFAULT_IMMEDIATE_FALLBACKS
    """Errors on which the next model takes over at once; any other error a retry may fix
    (HTTP 408, 409, 429, 5xx, timeouts, cut-off streams) moves on once the retries are spent."""
    sticky: Literal["run", "session"] = "run"
    """`run`: a run stays on the model that answered; each new message starts on the first
    model. `session`: a session's next messages start on the model that last answered it, until
    that model fails."""


class FallbackModelConfig(Frozen):
    """A model that takes over when the agent's model (or the fallback before it) fails: its
    provider, model and options, as the agent's own."""

    provider: ProviderName
    model: str = Field(default="", validate_default=True)
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
    model_options: dict[str, Any] = Field(default_factory=dict)
    temperature: NonNegativeFloat | None = None
    request_timeout_s: PositiveFloat | None = None
    max_retries: int | None = Field(default=None, ge=0, le=10)
    """The loop's retries of this model's calls; by default the agent's `max_retries`."""
    pricing: ModelPrices | None = None
    script: tuple[ScriptedReply, ...] | None = None
    """For provider `stub`: the replies it plays back."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(
        cls, data: object, handler: ModelWrapValidatorHandler[FallbackModelConfig]
    ) -> FallbackModelConfig:
        problems = list(_script_problems(data)) if isinstance(data, Mapping) else []
        return validated_with_rules(data, handler, problems)

    @field_validator("model")
    @classmethod
    def _check_model_given(cls, model: str, info: ValidationInfo) -> str:
        return _model_or_default(model, info)


class LLMAgentConfig(Frozen):
    """The one LLM agent of an actor: a chat model, its prompt, its tools and its limits."""

    type: Literal["llm"] = "llm"
    provider: ProviderName
    model: str = Field(default="", validate_default=True)
    """The provider's name for the model, e.g. `gpt-4o-mini`; required for every provider but
    `stub`, whose default is `scripted`."""
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, pattern=ENV_NAME_PATTERN)
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
    prompt_cache: PromptCacheMode = "auto"
    """Cache breakpoints on Anthropic, `prompt_cache_key` on OpenAI; `off` sends neither."""
    prompt_cache_ttl: PromptCacheTTL = "5m"
    """The lifetime of Anthropic's cache breakpoints: `5m` or `1h`."""
    tool_output_max_tokens: PositiveInt | None = None
    context_window: PositiveInt | None = None
    """The model's input limit in tokens; when omitted, its LangChain model profile's
    `max_input_tokens` (unknown for both: the conversation is sent as it is, never compacted
    ahead of time). See the context page of the docs."""
    context_budget: PositiveInt | None = None
    """Compact the conversation before a call whose prompt would pass this many tokens; by
    default 75% of the context window, leaving the rest for the answer."""
    compaction_model: str | None = None
    """The model (same provider) that summarises the oldest turns; by default the agent's."""
    stream_tool_rounds: bool = True
    """Stream every round with tools bound; false: rounds via ainvoke, final answer as one chunk."""
    tools: tuple[ToolEntry, ...] = ()
    """Python tools (`handler`), and other actors called as tools (`agent: other.yaml`)."""
    max_agent_depth: PositiveInt = 3
    """How deep actors called as tools may nest under this one's run; deeper calls are refused
    with an error the model reads."""
    mcp_servers: tuple[McpServer, ...] = ()
    """MCP servers whose tools join `tools` (needs ``cleveractors[mcp]``)."""
    approval_timeout_s: PositiveFloat = 24 * 60 * 60.0
    """How long a tool call that needs approval waits for a person before it expires (it is then
    read by the model as declined, and never runs)."""
    script: tuple[ScriptedReply, ...] | None = None
    """For provider `stub`: the replies it plays back, one per LLM call."""
    fallback_models: tuple[FallbackModelConfig, ...] = ()
    """Models that take over, in order, when the model fails (see `fallback`)."""
    fallback: FallbackPolicy = FallbackPolicy()
    """When the fallback models take over, and whether a session stays on the one that answered."""
    output_schema: dict[str, Any] | None = None
    """A JSON Schema the answer must match: the run's `output` is then the parsed, validated
    JSON (see `docs/output.md`)."""
    output_mode: OutputMode = "auto"
    """How the model is asked for the typed answer: `auto`, `native`, `tool` or `prompted`."""
    output_retries: NonNegativeInt = 1
    """How many times an answer that fails validation is sent back to the model."""
    input_guardrails: tuple[InputGuardrailConfig, ...] = ()
    """Checks of the user's message before (or beside) the first model call."""
    output_guardrails: tuple[OutputGuardrailConfig, ...] = ()
    """Checks of the final answer; a tripped guardrail ends the run with `GuardrailTripped`."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(
        cls, data: object, handler: ModelWrapValidatorHandler[LLMAgentConfig]
    ) -> LLMAgentConfig:
        problems: list[Problem] = []
        if isinstance(data, Mapping):
            data = _renamed_keys(data, problems)
            problems += _agent_problems(data)
        return validated_with_rules(data, handler, problems)

    @field_validator("model")
    @classmethod
    def _check_model_given(cls, model: str, info: ValidationInfo) -> str:
        """A field validator, not an after-model one, so that pydantic reports it in the same
        pass as the other fields' problems."""
        return _model_or_default(model, info)

    def with_fallback(self, fallback: FallbackModelConfig) -> LLMAgentConfig:
        """This agent's settings with the model of `fallback` in place of its own (what its
        provider builds; its retries are the fallback's own, or the agent's)."""
        fields = {
            name: getattr(fallback, name)
            for name in type(fallback).model_fields
            if name != "max_retries"
        }
        retries = self.max_retries if fallback.max_retries is None else fallback.max_retries
        return self.model_copy(update={**fields, "max_retries": retries, "fallback_models": ()})


def _model_or_default(model: str, info: ValidationInfo) -> str:
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


def _renamed_keys(agent: Mapping[str, Any], problems: list[Problem]) -> dict[str, Any]:
    """The agent's keys under their current names, warning of each old name used; an old name
    given with its new one is a problem, and the new one is validated."""
    renamed = dict(agent)
    for old, new in _RENAMED_AGENT_KEYS.items():
        if old not in renamed:
            continue
        value = renamed.pop(old)
        if new in renamed:
            problems.append(
                Problem(
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


def _agent_problems(agent: Mapping[str, Any]) -> list[Problem]:
    return [
        *_script_problems(agent),
        *_repeated_names(agent, "tools", "tool"),
        *_repeated_names(agent, "mcp_servers", "mcp server"),
        *_undeclared_tool_calls(agent),
        *(
            Problem(("fallback_models", position, *problem.loc), problem.message, problem.value)
            for position, fallback in entries(agent, "fallback_models")
            for problem in _undeclared_tool_calls(
                {
                    **fallback,
                    "tools": agent.get("tools", ()),
                    "mcp_servers": agent.get("mcp_servers"),
                }
            )
        ),
        *_output_schema_problems(agent),
        *_context_problems(agent),
    ]


def _context_problems(agent: Mapping[str, Any]) -> Iterator[Problem]:
    window, budget = agent.get("context_window"), agent.get("context_budget")
    if type(window) is int and type(budget) is int and 0 < window <= budget:
        yield Problem(
            ("context_budget",),
            f"must be below context_window ({window}), to leave room for the answer",
            budget,
        )


def _with_agent_tools(fallback: Mapping[str, Any], agent: Mapping[str, Any]) -> dict[str, Any]:
    """A fallback's script checked against the agent's tools."""
    return {**fallback, "tools": agent.get("tools", ()), "mcp_servers": agent.get("mcp_servers")}


def _output_schema_problems(agent: Mapping[str, Any]) -> Iterator[Problem]:
    schema = agent.get("output_schema")
    if not isinstance(schema, Mapping):
        return  # absent, or not a mapping: the field's own problem
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as exc:
        where = ".".join(str(part) for part in exc.path) or "the schema"
        yield Problem(("output_schema",), f"not a valid JSON Schema ({where}: {exc.message})")


def _script_problems(agent: Mapping[str, Any]) -> Iterator[Problem]:
    provider, script = agent.get("provider"), agent.get("script")
    if provider == "stub" and script is None:
        yield Problem(("script",), "provider 'stub' needs a 'script' (a list of replies)")
    elif provider in _PROVIDERS and provider != "stub" and script is not None:
        yield Problem(("script",), f"'script' is only for provider 'stub', not {provider!r}")


def _repeated_names(agent: Mapping[str, Any], key: str, noun: str) -> Iterator[Problem]:
    """Each entry that takes a name an earlier entry has, at its own name."""
    first: dict[str, int] = {}
    for position, name in named(entries(agent, key)):
        if name in first:
            yield Problem(
                (key, position, "name"),
                f"{noun} names must be unique; {noun} {first[name]} is named {name!r} too",
            )
        first.setdefault(name, position)


def _undeclared_tool_calls(agent: Mapping[str, Any]) -> Iterator[Problem]:
    """A scripted call to a tool the agent does not declare: the replay would fail at run time."""
    if agent.get("mcp_servers"):
        # An MCP server's tools are known only once it is connected, so any name may be one.
        return
    if not isinstance(agent.get("tools", ()), list | tuple):
        return  # what it declares is unknown: the field's own problem says why
    if any("agent" in entry and "name" not in entry for _, entry in entries(agent, "tools")):
        return  # an actor called as a tool is named by its own file, read later
    declared = list(dict.fromkeys(name for _, name in named(entries(agent, "tools"))))
    if agent.get("output_schema") is not None:
        declared.append(OUTPUT_TOOL)  # a typed actor answers by calling it in `tool` mode
    offered = f"declared: {', '.join(declared)}" if declared else "it declares no tools"
    for reply_position, reply in entries(agent, "script"):
        for call_position, call in entries(reply, "tool_calls"):
            name = call.get("name")
            # A handoff's tool is named after an actor known only once `handoffs` are loaded.
            if (
                isinstance(name, str)
                and name not in declared
                and not name.startswith(HANDOFF_TOOL_PREFIX)
            ):
                yield Problem(
                    ("script", reply_position, "tool_calls", call_position, "name"),
                    f"calls {name!r}, which the actor does not declare ({offered})",
                )


class StoreConfig(Frozen):
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


class ActorConfig(Frozen):
    """An actor: a name, its one agent, and optionally a store for sessions and the ledger."""

    name: str = Field(min_length=1)
    agent: LLMAgentConfig
    store: StoreConfig | None = None
    spend_limits: SpendLimits | None = None
    """What each caller may spend per day, month or rolling window (needs `store`)."""
    description: str | None = None
    """What the actor does, for the agents that may hand the conversation to it."""
    handoffs: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    """Actor config files (paths relative to this file) the model may hand the conversation to,
    each offered as a tool `transfer_to_<name>`; see Handoffs in the docs."""


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
        raise ConfigurationError(describe_yaml_error(path, exc)) from None
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
        return None, [describe_error(error, ActorConfig) for error in exc.errors(include_url=False)]


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
