"""Guardrails: checks that stop a run on bad input or a bad answer.

An input guardrail checks the user's message before the first model call (or beside it, with
`run_in_parallel=True`); an output guardrail checks the final answer. Each is a function (sync or
async) that gets a `GuardrailInput` and returns a `GuardrailResult`, or an agent used as a judge
(an actor file: it is asked to reply `PASS`, or `FAIL: <reason>`; its calls are billed into the
run). A tripped guardrail ends the run with `GuardrailTripped`, everything spent billed.

```python
from cleveractors.guardrails import GuardrailInput, GuardrailResult

def no_secrets(checked: GuardrailInput) -> GuardrailResult:
    if "password" in checked.text.lower():
        return GuardrailResult.trip("the text names a password")
    return GuardrailResult.passed()
```
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cleveractors.context import RunContext
from cleveractors.errors import ConfigurationError

if TYPE_CHECKING:
    from cleveractors.agents.base import Agent

__all__ = [
    "Guardrail",
    "GuardrailCheck",
    "GuardrailInput",
    "GuardrailResult",
    "GuardrailStage",
    "InputGuardrail",
    "OutputGuardrail",
]

GuardrailStage = Literal["input", "output"]
"""What a guardrail checks: the user's message (`input`) or the final answer (`output`)."""


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """A guardrail's verdict: it passed, or it tripped with a reason (what the run's
    `GuardrailTripped`, its span and its log line say)."""

    tripped: bool
    reason: str = ""

    @classmethod
    def passed(cls) -> GuardrailResult:
        return cls(tripped=False)

    @classmethod
    def trip(cls, reason: str) -> GuardrailResult:
        return cls(tripped=True, reason=reason)


@dataclass(frozen=True, slots=True)
class GuardrailInput:
    """What a guardrail function is given.

    Attributes:
        stage: `input` or `output`.
        text: The user's message (input), or the answer's text (output).
        actor: The name of the agent whose guardrail it is.
        run_id: The run's id (as its result, ledger and logs name it).
        output: The answer as a typed object, when the agent has an output type (else None).
        context: The run's context (its caller, session and the application's `deps`), as a
            tool's `RunContext` parameter receives it; None outside a run.
    """

    stage: GuardrailStage
    text: str
    actor: str
    run_id: str
    output: object | None = None
    context: RunContext[Any] | None = field(default=None, repr=False)


GuardrailCheck = Callable[[GuardrailInput], GuardrailResult | Awaitable[GuardrailResult]]
"""A guardrail function: sync or async, given what to check, returning the verdict."""


@dataclass(frozen=True, slots=True)
class Guardrail:
    """What both kinds of guardrail have: a check function or a judge, and a name.

    Raises:
        ConfigurationError: neither or both of `check` and `judge` are given, or `check` is not
            callable.
    """

    check: GuardrailCheck | None = None
    """The function; None when a judge checks."""
    judge: Agent | None = field(default=None, kw_only=True)
    """An agent asked for a verdict (`PASS`, or `FAIL: <reason>`), its calls billed into the run."""
    name: str = field(default="", kw_only=True)
    """Names the guardrail in `GuardrailTripped`, its span and its log line; by default the
    function's or the judge's name."""

    def __post_init__(self) -> None:
        if (self.check is None) == (self.judge is None):
            raise ConfigurationError(
                f"{type(self).__name__}: give either a check function or a judge agent"
            )
        if self.check is not None and not callable(self.check):
            raise ConfigurationError(
                f"{type(self).__name__}: check must be callable, got {self.check!r}"
            )
        if not self.name:
            named = self.judge if self.check is None else self.check
            object.__setattr__(self, "name", getattr(named, "name", None) or _name_of(named))


def _name_of(named: object) -> str:
    return str(getattr(named, "__name__", type(named).__name__))


@dataclass(frozen=True, slots=True)
class InputGuardrail(Guardrail):
    """A check of the user's message, before the first model call.

    With `run_in_parallel=True` it runs beside that call instead: a tripwire cancels the call
    (billed for what it spent) and nothing it asked for runs.
    """

    run_in_parallel: bool = field(default=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class OutputGuardrail(Guardrail):
    """A check of the final answer.

    With `hold_until_checked=True` the run's text events are held until every output guardrail
    passes (nothing of the answer reaches the client on a tripwire); otherwise a tripwire after
    text was sent emits `OutputRetracted`.
    """

    hold_until_checked: bool = field(default=False, kw_only=True)
