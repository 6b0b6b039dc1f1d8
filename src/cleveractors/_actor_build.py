"""An actor from its config: the agent (its chat model and tools), its name and its store,
with every problem of the config reported at once, as `validate` lists them."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from cleveractors._guardrail_build import build_guardrails
from cleveractors._handoff_build import link_handoffs
from cleveractors.agents import LLMAgent
from cleveractors.config import (
    ActorConfig,
    AgentToolConfig,
    LLMAgentConfig,
    StoreConfig,
    ToolConfig,
    check_actor_config,
    describe_problems,
    read_actor_source,
    valid_part_of_agent,
)
from cleveractors.errors import ConfigurationError
from cleveractors.providers import make_chat_model, make_fallback_models
from cleveractors.spend_limits import SpendLimits
from cleveractors.tools import Tool, tool_from_config
from cleveractors.tools.mcp import with_server_paths_beside

if TYPE_CHECKING:
    from cleveractors.store import SqlStore

__all__ = ["BuiltActor", "build_actor"]


@dataclass(frozen=True, slots=True)
class BuiltActor:
    """What an executor is made of, from a config."""

    name: str
    agent: LLMAgent
    store: SqlStore | None
    spend_limits: SpendLimits | None = None


class _AgentCycleError(ConfigurationError):
    """Actor files that call each other as tools in a circle: refused as a whole."""


def build_actor(
    source: str | Path | Mapping[str, Any] | ActorConfig,
    *,
    origin: str,
    config_dir: Path | None,
    calling: tuple[Path, ...] = (),
) -> BuiltActor:
    """The actor a config describes; its chat model client is built here, once. The actors it
    calls as tools (`agent: other.yaml`) are built too; `calling` are the files of the actors
    whose tools this one is being built for.

    Raises:
        ConfigurationError: every problem of the config at once (see `ActorExecutor.from_config`),
            or the files of a cycle of actors calling each other as tools.
    """
    if isinstance(source, str | Path):
        calling = (*calling, Path(source).resolve())
    if not isinstance(source, ActorConfig):
        source = _validated_config(source, origin, config_dir)
    agent = _build_agent(source, origin=origin, config_dir=config_dir, calling=calling)
    link_handoffs(
        config=source, agent=agent, origin=origin, config_dir=config_dir, build=_handoff_agent
    )
    if source.spend_limits is not None and source.store is None:
        problem = (
            "spend_limits: needs a store (its counters are shared by every worker); add `store:`"
        )
        raise ConfigurationError(describe_problems(origin, [problem]))
    store = _build_store(source.store, config_dir)
    return BuiltActor(source.name, agent, store, source.spend_limits)


def _handoff_agent(config: ActorConfig, path: Path) -> LLMAgent:
    """A handoff target's agent (its `store` is not used: the session is the first actor's)."""
    return _build_agent(config, origin=str(path), config_dir=path.parent, calling=(path.resolve(),))


def _build_agent(
    source: ActorConfig, *, origin: str, config_dir: Path | None, calling: tuple[Path, ...]
) -> LLMAgent:
    config = with_server_paths_beside(source, config_dir)
    tools, problems = _build_tools(list(enumerate(config.agent.tools)), config_dir, calling)
    inputs, outputs, guardrail_problems = build_guardrails(
        config.agent, config_dir=config_dir, build=_handoff_agent
    )
    problems += guardrail_problems
    agent: LLMAgent | None = None
    try:
        model = make_chat_model(config.agent)
        agent = LLMAgent.from_config(
            config.agent,
            model=model,
            tools=tools,
            name=config.name,
            compaction_model=_compaction_model(config.agent),
            fallback_models=make_fallback_models(config.agent),
            input_guardrails=inputs,
            output_guardrails=outputs,
        )
    except ConfigurationError as exc:
        problems.append(str(exc))
    if problems or agent is None:
        raise ConfigurationError(describe_problems(origin, problems)) from None
    return agent


def _compaction_model(agent: LLMAgentConfig) -> BaseChatModel | None:
    """The model of `compaction_model` (the agent's provider and settings); None for the
    agent's own model. A scripted (`stub`) agent summarises with its own script."""
    name = agent.compaction_model
    if name is None or name == agent.model or agent.provider == "stub":
        return None
    return make_chat_model(agent.model_copy(update={"model": name}))


def _build_tools(
    entries: Sequence[tuple[int, ToolConfig | AgentToolConfig]],
    config_dir: Path | None,
    calling: tuple[Path, ...] = (),
) -> tuple[list[Tool], list[str]]:
    """The config's tools, and every problem building them (by field), all at once."""
    tools: list[Tool] = []
    problems: list[str] = []
    for position, tool_config in entries:
        try:
            if isinstance(tool_config, AgentToolConfig):
                tools.append(_agent_tool(tool_config, config_dir, calling))
            else:
                tools.append(tool_from_config(tool_config, config_dir=config_dir))
        except _AgentCycleError:
            raise
        except ConfigurationError as exc:
            problems.append(f"agent.tools.{position}: {exc}")
    return tools, problems


def _agent_tool(entry: AgentToolConfig, config_dir: Path | None, calling: tuple[Path, ...]) -> Tool:
    """Another actor, built from its file (beside this one's), as a tool."""
    path = ((config_dir or Path.cwd()) / entry.agent).resolve()
    if path in calling:
        cycle = " -> ".join(str(each) for each in (*calling[calling.index(path) :], path))
        raise _AgentCycleError(f"actors call each other as tools in a cycle: {cycle}")
    child = build_actor(path, origin=str(path), config_dir=path.parent, calling=calling)
    return child.agent.as_tool(name=entry.name, description=entry.description)


def _valid_tool_entries(raw: object) -> list[tuple[int, ToolConfig]]:
    """The tool entries of an invalid config that are valid on their own: their handlers and
    schemas are checked too, so one run reports every problem."""
    agent = raw.get("agent") if isinstance(raw, Mapping) else None
    entries = agent.get("tools") if isinstance(agent, Mapping) else None
    if not isinstance(entries, list | tuple):
        return []
    valid: list[tuple[int, ToolConfig]] = []
    for position, entry in enumerate(entries):
        with contextlib.suppress(ValidationError):  # its own problems are among the config's
            valid.append((position, ToolConfig.model_validate(entry)))
    return valid


def _validated_config(
    source: str | Path | Mapping[str, Any], origin: str, config_dir: Path | None
) -> ActorConfig:
    """The config, or a `ConfigurationError` listing its problems and those of its tools."""
    raw = read_actor_source(source)
    config, problems = check_actor_config(raw)
    if config is None:
        _, tool_problems = _build_tools(_valid_tool_entries(raw), config_dir)
        problems += tool_problems + _model_problems(valid_part_of_agent(raw))
        raise ConfigurationError(describe_problems(origin, problems)) from None
    return config


def _model_problems(agent: LLMAgentConfig | None) -> list[str]:
    """The problem of an invalid config's provider settings (a missing API key variable...), if
    its valid part has one: the chat model is built only to check them."""
    if agent is None:
        return []
    try:
        make_chat_model(agent)
        make_fallback_models(agent)
    except ConfigurationError as exc:
        return [str(exc)]
    return []


def _build_store(config: StoreConfig | None, config_dir: Path | None) -> SqlStore | None:
    if config is None:
        return None
    try:
        from cleveractors.store import SqlStore
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"store: {exc}") from None
    return SqlStore.from_config(config, config_dir=config_dir)
