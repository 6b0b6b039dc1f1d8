"""The config of an agent's guardrails: each a function (`module:function`, found beside the
actor file first, as tool handlers are) or a judge (another actor file), with its stage's
option."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import Field, ModelWrapValidatorHandler, model_validator

from cleveractors._config_rules import Frozen, Problem, validated_with_rules
from cleveractors._config_tools import HANDLER_PATTERN

__all__ = ["GuardrailConfig", "InputGuardrailConfig", "OutputGuardrailConfig"]


class GuardrailConfig(Frozen):
    """A guardrail: exactly one of `function` and `judge`."""

    name: str | None = Field(default=None, min_length=1, max_length=64)
    """Names it in errors, spans and logs; by default the function's or the judge's name."""
    function: str | None = Field(default=None, pattern=HANDLER_PATTERN)
    """Import path `package.module:function` (sync or async), taking a `GuardrailInput` and
    returning a `GuardrailResult`."""
    judge: str | None = Field(default=None, min_length=1)
    """An actor file (relative to this one) asked for a verdict; its calls are billed."""

    @model_validator(mode="wrap")
    @classmethod
    def _check_rules(
        cls, data: object, handler: ModelWrapValidatorHandler[GuardrailConfig]
    ) -> GuardrailConfig:
        problems = list(_guardrail_problems(data)) if isinstance(data, Mapping) else []
        return validated_with_rules(data, handler, problems)


def _guardrail_problems(guardrail: Mapping[str, Any]) -> Iterator[Problem]:
    given = [key for key in ("function", "judge") if guardrail.get(key) is not None]
    if len(given) != 1:
        yield Problem(
            ("function",),
            "a guardrail needs exactly one of function (module:function) and judge (an actor "
            f"file); got {' and '.join(given) or 'neither'}",
        )


class InputGuardrailConfig(GuardrailConfig):
    """A check of the user's message."""

    run_in_parallel: bool = False
    """Run beside the first model call instead of before it (a tripwire cancels the call)."""


class OutputGuardrailConfig(GuardrailConfig):
    """A check of the final answer."""

    hold_until_checked: bool = False
    """Hold the run's text events until the answer passes."""
