"""Tools for the offline demo actor, examples and tests: `handler: cleveractors.demo:get_weather`.

The answers come from fixed tables, never from the network, so a scripted answer always matches
what the tools said. `weather_report` is the demo actor's lookup (`examples/demo_actor.yaml`):
a full report that takes a moment, like a real weather API, so the CLI's spinner and concurrent
lookups are visible; `get_weather` answers the same table at once, in one line.

Every call is recorded (tool, arguments, start and end times, how it ended, what it returned) so
a test can tell which handlers ran, in which order, whether they overlapped and whether one was
cancelled; read the record with `invocations()` and reset it with `clear_invocations()`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = [
    "Invocation",
    "book_table",
    "broken_lookup",
    "clear_invocations",
    "convert_temperature",
    "get_time",
    "get_weather",
    "invocations",
    "long_report",
    "slow_lookup",
    "weather_report",
]

InvocationEnd = Literal["ok", "error", "cancelled"]
_Output = TypeVar("_Output")


@dataclass(frozen=True, slots=True)
class Invocation:
    """One call of a demo tool's handler."""

    tool: str
    arguments: dict[str, object]
    started: float
    """`time.perf_counter()` when the handler began."""
    finished: float
    ended: InvocationEnd
    output: object = None
    """What the handler returned (None when it raised or was cancelled)."""


# Sync handlers run in worker threads, async ones in the loop: both append here.
_lock = threading.Lock()
_invocations: list[Invocation] = []


def invocations() -> tuple[Invocation, ...]:
    """Every demo-tool call since the last `clear_invocations()`, in the order they started."""
    with _lock:
        return tuple(sorted(_invocations, key=lambda invocation: invocation.started))


def clear_invocations() -> None:
    """Forget the calls recorded so far."""
    with _lock:
        _invocations.clear()


class _Call:
    """The call being recorded; the handler hands it what it returns."""

    output: object = None

    def returned(self, output: _Output) -> _Output:
        self.output = output
        return output


@contextmanager
def _recorded(tool: str, **arguments: object) -> Iterator[_Call]:
    call = _Call()
    started = time.perf_counter()
    ended: InvocationEnd = "error"
    try:
        yield call
        ended = "ok"
    except asyncio.CancelledError:
        ended = "cancelled"
        raise
    finally:
        finished = time.perf_counter()
        record = Invocation(tool, dict(arguments), started, finished, ended, call.output)
        with _lock:
            _invocations.append(record)


# -- weather -----------------------------------------------------------------------------------

_REPORT_DELAY_S = 0.3


@dataclass(frozen=True, slots=True)
class _Weather:
    temperature_c: float
    conditions: str
    humidity_pct: int


_WEATHER = {
    "paris": _Weather(18.0, "light rain", 82),
    "rome": _Weather(24.0, "sunny", 55),
    "london": _Weather(15.0, "overcast", 77),
    "berlin": _Weather(16.0, "partly cloudy", 64),
    "oslo": _Weather(3.0, "snow", 90),
}
_ANY_OTHER_CITY = _Weather(20.0, "cloudy", 60)


def _weather_in(city: str) -> _Weather:
    return _WEATHER.get(city.strip().lower(), _ANY_OTHER_CITY)


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name, e.g. Paris.
    """
    with _recorded("get_weather", city=city) as call:
        weather = _weather_in(city)
        return call.returned(f"{city}: {weather.temperature_c:g} C, {weather.conditions}")


async def weather_report(city: str) -> dict[str, object]:
    """Get the current weather in a city: temperature in Celsius, conditions and humidity.

    Args:
        city: The city's name, e.g. "Paris".
    """
    with _recorded("weather_report", city=city) as call:
        await asyncio.sleep(_REPORT_DELAY_S)
        weather = _weather_in(city)
        return call.returned(
            {
                "city": city,
                "temperature_c": weather.temperature_c,
                "conditions": weather.conditions,
                "humidity_pct": weather.humidity_pct,
            }
        )


def convert_temperature(celsius: float, to: Literal["fahrenheit", "kelvin"]) -> dict[str, object]:
    """Convert a temperature from degrees Celsius to Fahrenheit or Kelvin.

    Args:
        celsius: The temperature in degrees Celsius.
        to: The unit to convert to.
    """
    with _recorded("convert_temperature", celsius=celsius, to=to) as call:
        value = celsius * 9 / 5 + 32 if to == "fahrenheit" else celsius + 273.15
        return call.returned({"celsius": celsius, "unit": to, "value": round(value, 2)})


# -- other lookups -----------------------------------------------------------------------------

_LOCAL_TIME = {"tokyo": "21:05"}
_EUROPEAN_TIME = "14:05"


def get_time(city: str) -> dict[str, str]:
    """Local time in a city (returns an object, which the model reads as JSON).

    Args:
        city: The city's name.
    """
    with _recorded("get_time", city=city) as call:
        local_time = _LOCAL_TIME.get(city.strip().lower(), _EUROPEAN_TIME)
        return call.returned({"city": city, "time": local_time})


def broken_lookup(query: str) -> str:
    """A lookup whose backend is down: always raises `LookupError`.

    Args:
        query: What to look up.
    """
    with _recorded("broken_lookup", query=query):
        raise LookupError(f"lookup backend unavailable for {query!r}")


async def slow_lookup(query: str, seconds: float = 0.2, cleanup_seconds: float = 0.0) -> str:
    """An async lookup that takes `seconds` to answer, and `cleanup_seconds` to stop if cancelled.

    Args:
        query: What to look up.
        seconds: How long the lookup takes.
        cleanup_seconds: How long it takes to let go of its connection when cancelled.
    """
    arguments: dict[str, object] = {"query": query, "seconds": seconds}
    if cleanup_seconds:
        arguments["cleanup_seconds"] = cleanup_seconds
    with _recorded("slow_lookup", **arguments) as call:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            await asyncio.sleep(cleanup_seconds)  # like closing a connection politely
            raise
        return call.returned(f"{query}: found after {seconds:g}s")


def long_report(topic: str, facts: int = 400) -> str:
    """A long report on a topic: `facts` numbered facts, far more than a model needs.

    Args:
        topic: What the report is about.
        facts: How many facts it lists.
    """
    with _recorded("long_report", topic=topic, facts=facts) as call:
        body = " ".join(f"fact-{number} about {topic} is unremarkable." for number in range(facts))
        return call.returned(f"Report on {topic}. Key fact: {topic} opens at 9:00. {body}")


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table; its confirmation is meant to be the turn's answer (ends_turn).

    Args:
        restaurant: The restaurant's name.
        people: How many guests.
    """
    with _recorded("book_table", restaurant=restaurant, people=people) as call:
        return call.returned(f"Booked a table for {people} at {restaurant}.")
