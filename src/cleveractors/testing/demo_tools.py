"""Plain tool functions for tests and demos: `handler: cleveractors.testing.demo_tools:get_weather`.

Every call is recorded (tool, arguments, start and end times, how it ended) so a test can tell
which handlers ran, in which order, whether they overlapped and whether one was cancelled; read
the record with `invocations()` and reset it with `clear_invocations()`. The tools answer from
fixed tables, never from the network.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Invocation",
    "book_table",
    "broken_lookup",
    "clear_invocations",
    "get_time",
    "get_weather",
    "invocations",
    "long_report",
    "slow_lookup",
]

InvocationEnd = Literal["ok", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class Invocation:
    """One call of a demo tool's handler."""

    tool: str
    arguments: dict[str, object]
    started: float
    """`time.perf_counter()` when the handler began."""
    finished: float
    ended: InvocationEnd


# Sync handlers run in worker threads, async ones in the loop: both append here.
_lock = threading.Lock()
_invocations: list[Invocation] = []


def invocations() -> tuple[Invocation, ...]:
    """Every demo-tool call since the last `clear_invocations()`, in the order they ended."""
    with _lock:
        return tuple(_invocations)


def clear_invocations() -> None:
    """Forget the calls recorded so far."""
    with _lock:
        _invocations.clear()


@contextmanager
def _recorded(tool: str, **arguments: object) -> Iterator[None]:
    started = time.perf_counter()
    ended: InvocationEnd = "error"
    try:
        yield
        ended = "ok"
    except asyncio.CancelledError:
        ended = "cancelled"
        raise
    finally:
        finished = time.perf_counter()
        with _lock:
            _invocations.append(Invocation(tool, dict(arguments), started, finished, ended))


_WEATHER = {"Paris": "18 C, light rain", "Rome": "24 C, sunny", "Oslo": "3 C, snow"}


def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name, e.g. Paris.
    """
    with _recorded("get_weather", city=city):
        return f"{city}: {_WEATHER.get(city, '20 C, cloudy')}"


def get_time(city: str) -> dict[str, str]:
    """Local time in a city (returns an object, which the model reads as JSON).

    Args:
        city: The city's name.
    """
    with _recorded("get_time", city=city):
        return {"city": city, "time": "14:05"}


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
    with _recorded("slow_lookup", **arguments):
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            await asyncio.sleep(cleanup_seconds)  # like closing a connection politely
            raise
        return f"{query}: found after {seconds:g}s"


def long_report(topic: str, facts: int = 400) -> str:
    """A long report on a topic: `facts` numbered facts, far more than a model needs.

    Args:
        topic: What the report is about.
        facts: How many facts it lists.
    """
    with _recorded("long_report", topic=topic, facts=facts):
        body = " ".join(f"fact-{number} about {topic} is unremarkable." for number in range(facts))
        return f"Report on {topic}. Key fact: {topic} opens at 9:00. {body}"


def book_table(restaurant: str, people: int) -> str:
    """Book a restaurant table; its confirmation is meant to be the turn's answer (ends_turn).

    Args:
        restaurant: The restaurant's name.
        people: How many guests.
    """
    with _recorded("book_table", restaurant=restaurant, people=people):
        return f"Booked a table for {people} at {restaurant}."
