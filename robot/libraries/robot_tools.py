"""Tool handlers for the Robot suites' actors: `handler: robot_tools:get_weather`.

The answers come from fixed tables, never from the network. Every handler records its call
(name, arguments, what it returned) in `handler_calls()`, in the order the handlers started, so a
test can tell which handlers ran, in which order, and which never ran.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = [
    "HandlerCall",
    "book_table",
    "clear_handler_calls",
    "get_time",
    "get_weather",
    "handler_calls",
]

_WEATHER = {"paris": "light rain, 18 °C", "rome": "sunny, 24 °C", "berlin": "overcast, 16 °C"}
_TIME = {"paris": "14:05", "rome": "14:05", "berlin": "14:05", "tokyo": "21:05"}


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """One call of a tool handler."""

    name: str
    arguments: dict[str, str]
    output: str


# Sync handlers run in worker threads (asyncio.to_thread), async ones in the loop.
_lock = threading.Lock()
_calls: list[HandlerCall] = []


def handler_calls() -> list[HandlerCall]:
    """Every handler call since the last `clear_handler_calls()`, in the order they started."""
    with _lock:
        return list(_calls)


def clear_handler_calls() -> None:
    """Forget the recorded calls."""
    with _lock:
        _calls.clear()


def _record(name: str, arguments: dict[str, str], output: str) -> str:
    with _lock:
        _calls.append(HandlerCall(name, arguments, output))
    return output


def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    report = _WEATHER.get(city.lower(), "no report")
    return _record("get_weather", {"city": city}, f"{city}: {report}")


async def get_time(city: str) -> str:
    """The local time in a city.

    Args:
        city: The city's name, e.g. "Tokyo".
    """
    local_time = _TIME.get(city.lower(), "unknown")
    return _record("get_time", {"city": city}, f"{city}: {local_time}")


def book_table(restaurant: str, time: str) -> str:
    """Book a table at a restaurant.

    Args:
        restaurant: The restaurant's name.
        time: The time of the booking, e.g. "19:30".
    """
    return _record(
        "book_table",
        {"restaurant": restaurant, "time": time},
        f"Booked a table at {restaurant} for {time}.",
    )
