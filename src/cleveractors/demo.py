"""The tools of the offline demo actor (`examples/demo_actor.yaml`): made-up weather, real maths.

`get_weather` returns the same fake report for a city every time, so the scripted demo answer
always matches what the tools said, and it waits a moment like a real weather API would, so the
CLI's spinner and the concurrent lookups are visible.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Literal

__all__ = ["convert_temperature", "get_weather"]

_LOOKUP_DELAY_S = 0.3
_CONDITIONS = ("sunny", "partly cloudy", "overcast", "light rain", "windy", "foggy")
_KNOWN_CITIES: dict[str, tuple[float, str, int]] = {
    "paris": (18.0, "light rain", 82),
    "rome": (24.0, "sunny", 55),
    "london": (15.0, "overcast", 77),
    "berlin": (16.0, "partly cloudy", 64),
}


async def get_weather(city: str) -> dict[str, object]:
    """Get the current weather in a city: temperature in Celsius, conditions and humidity.

    Args:
        city: The city's name, e.g. "Paris".
    """
    await asyncio.sleep(_LOOKUP_DELAY_S)
    temperature_c, conditions, humidity_pct = _fake_report(city)
    return {
        "city": city,
        "temperature_c": temperature_c,
        "conditions": conditions,
        "humidity_pct": humidity_pct,
    }


def convert_temperature(celsius: float, to: Literal["fahrenheit", "kelvin"]) -> dict[str, object]:
    """Convert a temperature from degrees Celsius to Fahrenheit or Kelvin.

    Args:
        celsius: The temperature in degrees Celsius.
        to: The unit to convert to.
    """
    value = celsius * 9 / 5 + 32 if to == "fahrenheit" else celsius + 273.15
    return {"celsius": celsius, "unit": to, "value": round(value, 2)}


def _fake_report(city: str) -> tuple[float, str, int]:
    known = _KNOWN_CITIES.get(city.strip().lower())
    if known is not None:
        return known
    # crc32, unlike hash(), is the same in every process, so an unknown city is stable too.
    seed = zlib.crc32(city.strip().lower().encode("utf-8"))
    return float(5 + seed % 26), _CONDITIONS[seed % len(_CONDITIONS)], 40 + seed % 51
