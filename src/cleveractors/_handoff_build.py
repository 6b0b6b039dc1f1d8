"""The actors an actor's `handoffs` reach, loaded with it: each file once (two actors may hand
the conversation back and forth), each checked as the first one is, every name unique.

A path is relative to the file that names it (to `config_dir`, or the working directory, for a
config given as a dict). A missing file, an invalid one, an actor that names itself and two
files of one actor name are each a `ConfigurationError` naming the file and its entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cleveractors.agents import LLMAgent
from cleveractors.config import ActorConfig, load_actor_config
from cleveractors.errors import ConfigurationError

__all__ = ["link_handoffs"]


@dataclass(frozen=True, slots=True)
class _Loaded:
    config: ActorConfig
    agent: LLMAgent
    path: Path | None
    folder: Path
    origin: str


BuildAgent = Callable[[ActorConfig, Path], LLMAgent]
"""Builds an actor's agent from its validated config and its file (`_actor_build`)."""


def link_handoffs(
    *,
    config: ActorConfig,
    agent: LLMAgent,
    origin: str,
    config_dir: Path | None,
    build: BuildAgent,
) -> None:
    """Build every actor `config`'s handoffs reach (with `build`) and offer each to the agents
    that name it.

    Raises:
        ConfigurationError: a file is missing or invalid, an actor hands off to itself, or two
            files name the same actor; the message names the file and the entry.
    """
    if not config.handoffs:
        return
    folder = config_dir if config_dir is not None else Path.cwd()
    own_path = Path(origin).resolve() if Path(origin).is_file() else None
    first = _Loaded(config, agent, own_path, folder, origin)
    by_path: dict[Path, _Loaded] = {} if own_path is None else {own_path: first}
    by_name: dict[str, _Loaded] = {config.name: first}
    waiting = [first]
    while waiting:
        actor = waiting.pop(0)
        for position, entry in enumerate(actor.config.handoffs):
            where = f"{actor.origin}: handoffs.{position}"
            path = (actor.folder / entry).resolve()
            target = by_path.get(path)
            if target is None:
                target = _load(path, entry, where, build)
                _check_name(target, by_name, where)
                by_path[path] = by_name[target.config.name] = target
                waiting.append(target)
            if target is actor:
                raise ConfigurationError(
                    f"{where}: {entry!r} is {actor.config.name!r} itself; an actor cannot hand "
                    "the conversation to itself"
                )
            try:
                actor.agent.add_handoff(target.agent, description=target.config.description)
            except ConfigurationError as exc:
                raise ConfigurationError(f"{where}: {exc}") from None


def _load(path: Path, entry: str, where: str, build: BuildAgent) -> _Loaded:
    if not path.is_file():
        raise ConfigurationError(f"{where}: {entry!r}: no actor config at {path}")
    try:
        config = load_actor_config(path)
        agent = build(config, path)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    return _Loaded(config, agent, path, path.parent, str(path))


def _check_name(target: _Loaded, by_name: dict[str, _Loaded], where: str) -> None:
    """Sessions remember the actor that has the conversation by name: one name, one file."""
    other = by_name.get(target.config.name)
    if other is not None:
        raise ConfigurationError(
            f"{where}: {target.origin} names its actor {target.config.name!r}, as "
            f"{other.origin} does; actors that hand off to each other need distinct names"
        )
