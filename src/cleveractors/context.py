"""`RunContext`: who a run is for and what the application gave it, as a tool receives it.

A tool's parameter annotated `RunContext` (or `RunContext[MyDeps]`) is filled in by the loop
with the run's context: the run's id, its session and caller, the actor's name, the run's usage
so far (read live from the run's bill) and the run's `deps`, any object the application passed
with `ActorExecutor.execute(..., deps=...)`. Such a parameter never appears in the schema the
model sees, and the model cannot set it.

`deps` lives only in memory, for the run: it is never written to the store, a log line or a
span (its `repr` is left out of the context's own), and a resumed run gets it again from its
caller.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Annotated, Any, Generic, TypeVar, get_args, get_origin

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from cleveractors.usage import UsageLedger

__all__ = [
    "ContextParameters",
    "DepsT",
    "RunContext",
    "RunUsage",
    "annotated_context",
    "context_parameters",
]

DepsT = TypeVar("DepsT")
"""The type of a run's `deps`, as a tool's `RunContext[DepsT]` annotation names it."""


@dataclass(frozen=True, slots=True)
class RunUsage:
    """What a run has spent so far: its LLM calls' tokens and the cost of those priced."""

    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    """The cost of the calls whose price is known (what a cost budget is checked against)."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class RunContext(Generic[DepsT]):
    """The context of the run a tool call belongs to.

    The loop makes one per run and hands it to every tool parameter annotated `RunContext`.
    Build one yourself to test a tool on its own: `RunContext(run_id="r1", actor="a", deps=x)`.

    Attributes:
        run_id: The run's id (as its result, events, ledger rows and logs name it).
        actor: The name of the actor (the agent) running the call.
        deps: What the application passed with `execute(..., deps=...)` (None when it passed
            nothing). Kept in memory only: never stored, logged or traced.
        session_id: The stored session the run continues, if any.
        caller: Whose run it is (the web app's authenticated caller), if known.
    """

    run_id: str
    actor: str
    deps: DepsT = field(repr=False)
    session_id: str | None = None
    caller: str | None = None
    _ledger: UsageLedger = field(default_factory=UsageLedger, repr=False, compare=False)
    """The run's bill, read live by `usage` (the loop's own; an empty one otherwise)."""

    @property
    def usage(self) -> RunUsage:
        """The run's usage so far: every LLM call recorded up to now (the round that asked for
        this tool call included)."""
        ledger = self._ledger
        total = ledger.total
        return RunUsage(
            llm_calls=len(ledger.calls),
            prompt_tokens=total.prompt_tokens,
            completion_tokens=total.completion_tokens,
            cost_usd=ledger.cost_spent_usd,
        )

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        # A LangChain tool built from a function with a RunContext parameter makes a pydantic
        # model of its signature: the context is taken as it is, never validated field by field.
        return core_schema.is_instance_schema(cls)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {}  # dropped from the model's schema by `context_parameters`' users anyway


@dataclass(frozen=True, slots=True)
class ContextParameters:
    """How a callable takes the run's context: the names of its `RunContext` parameters, and
    whether one of them names a deps type (`RunContext[MyDeps]`), so that it needs `deps`."""

    names: tuple[str, ...] = ()
    needs_deps: bool = False


def context_parameters(handler: object) -> ContextParameters:
    """The parameters of `handler` (a function) annotated `RunContext` or `RunContext[X]`
    (also inside `Annotated`); none for anything whose signature cannot be read."""
    try:
        signature = inspect.signature(handler)  # type: ignore[arg-type] # any callable, or not
    except (TypeError, ValueError):
        return ContextParameters()
    hints = _type_hints(handler)
    return annotated_context(
        {
            name: hints.get(name, parameter.annotation)
            for name, parameter in signature.parameters.items()
        }
    )


def annotated_context(annotations: Mapping[str, object]) -> ContextParameters:
    """Which of the named annotations (parameters or fields, in order) are a `RunContext`."""
    names: list[str] = []
    needs_deps = False
    for name, annotation in annotations.items():
        deps_type = _context_deps_type(annotation)
        if deps_type is None:
            continue
        names.append(name)
        needs_deps = needs_deps or deps_type not in (Any, type(None), object, _BARE)
    return ContextParameters(tuple(names), needs_deps)


_BARE = object()
"""The deps type of a bare `RunContext` annotation: it names none."""


def _type_hints(handler: object) -> dict[str, Any]:
    try:
        return typing.get_type_hints(handler, include_extras=True)
    except Exception:  # a name the module cannot resolve: its tool fails to derive a schema
        return {}


def _context_deps_type(annotation: object) -> object | None:
    """The deps type a `RunContext` annotation names (`_BARE` for none); None when the
    annotation is not a `RunContext`."""
    if get_origin(annotation) is Annotated:
        return _context_deps_type(get_args(annotation)[0])
    if annotation is RunContext:
        return _BARE
    if get_origin(annotation) is RunContext:
        deps_type: object = get_args(annotation)[0]
        return deps_type
    return None
