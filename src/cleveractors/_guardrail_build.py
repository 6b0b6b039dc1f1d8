"""An agent's guardrails from its config: each function imported (beside the actor file first,
as tool handlers are), each judge's actor file loaded and built, every problem named by its
entry (`agent.input_guardrails.0: ...`) and reported with the config's others."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from cleveractors.agents import LLMAgent
from cleveractors.config import (
    ActorConfig,
    InputGuardrailConfig,
    LLMAgentConfig,
    OutputGuardrailConfig,
    load_actor_config,
)
from cleveractors.errors import ConfigurationError
from cleveractors.guardrails import GuardrailCheck, InputGuardrail, OutputGuardrail
from cleveractors.tools._handlers import import_handler_target

__all__ = ["BuiltGuardrails", "build_guardrails"]

BuildAgent = Callable[[ActorConfig, Path], LLMAgent]
"""Builds an actor's agent from its validated config and its file (`_actor_build`)."""

BuiltGuardrails = tuple[list[InputGuardrail], list[OutputGuardrail], list[str]]
"""The input and output guardrails, and every problem building them."""

_judging: ContextVar[frozenset[Path]] = ContextVar("cleveractors_judging", default=frozenset())
"""The judge files being built now: a judge that (through others) judges with itself is an
error, not an endless build."""


def build_guardrails(
    config: LLMAgentConfig, *, config_dir: Path | None, build: BuildAgent
) -> BuiltGuardrails:
    """The guardrails `config` declares; a judge's agent is made with `build`."""
    inputs: list[InputGuardrail] = []
    outputs: list[OutputGuardrail] = []
    problems: list[str] = []
    for position, entry in enumerate(config.input_guardrails):
        where = f"agent.input_guardrails.{position}"
        try:
            check, judge = _check_or_judge(entry, config_dir, build)
            inputs.append(
                InputGuardrail(
                    check, judge=judge, name=entry.name or "", run_in_parallel=entry.run_in_parallel
                )
            )
        except ConfigurationError as exc:
            problems.append(f"{where}: {exc}")
    for position, output in enumerate(config.output_guardrails):
        where = f"agent.output_guardrails.{position}"
        try:
            check, judge = _check_or_judge(output, config_dir, build)
            outputs.append(
                OutputGuardrail(
                    check,
                    judge=judge,
                    name=output.name or "",
                    hold_until_checked=output.hold_until_checked,
                )
            )
        except ConfigurationError as exc:
            problems.append(f"{where}: {exc}")
    return inputs, outputs, problems


def _check_or_judge(
    entry: InputGuardrailConfig | OutputGuardrailConfig,
    config_dir: Path | None,
    build: BuildAgent,
) -> tuple[GuardrailCheck | None, LLMAgent | None]:
    if entry.judge is not None:
        return None, _judge(entry.judge, config_dir, build)
    function = str(entry.function)  # the config's rule: a function when there is no judge
    target = import_handler_target(function, where=f"function {function!r}", search_dir=config_dir)
    if not callable(target):
        raise ConfigurationError(f"function {function!r} is not callable")
    return target, None


def _judge(entry: str, config_dir: Path | None, build: BuildAgent) -> LLMAgent:
    path = ((config_dir if config_dir is not None else Path.cwd()) / entry).resolve()
    if not path.is_file():
        raise ConfigurationError(f"judge {entry!r}: no actor config at {path}")
    if path in _judging.get():
        raise ConfigurationError(f"judge {entry!r}: {path} is judged by itself")
    with _building(path):
        try:
            return build(load_actor_config(path), path)
        except ConfigurationError as exc:
            raise ConfigurationError(f"judge {entry!r}: {exc}") from None


@contextmanager
def _building(path: Path) -> Iterator[None]:
    token = _judging.set(_judging.get() | {path})
    try:
        yield
    finally:
        _judging.reset(token)
