"""Guardrail functions the guardrail scenarios name in their actor configs
(`support.guardrail_checks:<name>`), sync and async."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from cleveractors.guardrails import GuardrailInput, GuardrailResult

NOT_CALLABLE = "a guardrail must be a function"

model_streaming = asyncio.Event()
"""Set by the wire scenario's model callback once the model call is streaming its reply."""


def always_pass(checked: GuardrailInput) -> GuardrailResult:
    return GuardrailResult.passed()


async def always_pass_async(checked: GuardrailInput) -> GuardrailResult:
    return GuardrailResult.passed()


def refuse_passwords(checked: GuardrailInput) -> GuardrailResult:
    if "password" in checked.text.lower():
        return GuardrailResult.trip(f"the {checked.stage} names a password")
    return GuardrailResult.passed()


async def refuse_rain_async(checked: GuardrailInput) -> GuardrailResult:
    if "rain" in checked.text.lower():
        return GuardrailResult.trip("no rain talk")
    return GuardrailResult.passed()


def answers_with_text(checked: GuardrailInput) -> str:
    return "not a verdict"


async def trip_once_model_streams(checked: GuardrailInput) -> GuardrailResult:
    """Trip, once the model call that runs beside it is streaming (so it is cut off mid-reply)."""
    await asyncio.wait_for(model_streaming.wait(), timeout=30)
    return GuardrailResult.trip("the message is off topic")


class RainCheck:
    """A guardrail that is an object with an async `__call__` (not a coroutine function)."""

    async def __call__(self, checked: GuardrailInput) -> GuardrailResult:
        return await refuse_rain_async(checked)


refuse_rain_object = RainCheck()


class Weather(BaseModel):
    """The typed answer of the typed-actor scenario."""

    city: str
    temp: int


def too_hot(checked: GuardrailInput) -> GuardrailResult:
    """Reads the typed answer and the run's deps: trips above the caller's `max_temp`."""
    assert isinstance(checked.output, Weather), checked.output
    assert checked.context is not None, "no run context"
    limit = checked.context.deps["max_temp"]
    if checked.output.temp > limit:
        return GuardrailResult.trip(
            f"{checked.output.city} at {checked.output.temp} is over {limit}"
        )
    return GuardrailResult.passed()
