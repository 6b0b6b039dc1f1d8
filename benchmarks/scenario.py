"""The conversation every benchmark runs, its tools, and the actor configs that run it.

One turn = one tool round: the model asks for `lookup_weather`, the tool answers, the model
writes a ~40-word answer. The library (through an actor config) and the hand-written loop bind
the very same tool schema, so both send byte-for-byte comparable requests to the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from cleveractors.testing import ScriptedReply, ScriptedToolCall, count_words

USER_MESSAGE = "What's the weather in Paris?"
TWO_TOOLS_MESSAGE = "What's the weather in Paris and in Rome?"
ANSWER = (
    "Paris is sunny this afternoon with a light breeze from the west. The high is 24 degrees and "
    "the low tonight is 15 degrees. Rain is unlikely before the weekend, so an evening walk along "
    "the Seine should stay dry and pleasant for everyone."
)
MODEL_NAME = "bench-model"
API_KEY_ENV = "CLEVERACTORS_BENCH_API_KEY"
TOOL_SLEEP_S = 0.2

WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"}},
    "required": ["city"],
}
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "lookup_weather",
        "description": "Current weather for a city.",
        "parameters": WEATHER_PARAMETERS,
    },
}


async def lookup_weather(city: str) -> str:
    """Current weather for a city (async, instant: the benchmarks measure the loop, not tools)."""
    return json.dumps({"city": city, "sky": "sunny", "high_c": 24, "low_c": 15})


async def sleep_async(tag: str) -> str:
    """A slow I/O-bound tool: an async sleep."""
    await asyncio.sleep(TOOL_SLEEP_S)
    return f"slept {tag}"


def sleep_blocking(tag: str) -> str:
    """A slow blocking tool: the library runs sync handlers in a worker thread."""
    time.sleep(TOOL_SLEEP_S)
    return f"slept {tag}"


_TOOL_CALL = ScriptedToolCall(name="lookup_weather", args={"city": "Paris"})
_SECOND_CALL = ScriptedToolCall(name="lookup_weather", args={"city": "Rome"})


def turn_script() -> list[ScriptedReply]:
    """The two replies of one turn: a tool call (ids are made unique by the server), the answer."""
    return [ScriptedReply(tool_calls=(_TOOL_CALL,)), ScriptedReply(text=ANSWER)]


def two_tools_script() -> list[ScriptedReply]:
    """The same turn with two calls of the tool in one reply (Paris and Rome), then the answer."""
    return [ScriptedReply(tool_calls=(_TOOL_CALL, _SECOND_CALL)), ScriptedReply(text=ANSWER)]


def conversation_scripts() -> dict[str, list[ScriptedReply]]:
    """Both turns by their first message, for a server answering each conversation on its own:
    any number of turns, concurrent or not, each gets its whole script."""
    return {USER_MESSAGE: turn_script(), TWO_TOOLS_MESSAGE: two_tools_script()}


def scripted_turn_delay_s(*, first_token_delay_s: float, token_interval_s: float) -> float:
    """How long the server itself waits over one turn: its floor for the whole turn's time.

    A streamed reply waits `first_token_delay_s` before its first content/tool chunk and
    `token_interval_s` before each later one (a blocking reply waits the same in total). The tool
    round has a first fragment (id and name) plus the arguments in 8-character pieces; the answer
    one chunk per word.
    """
    arguments = len(json.dumps(_TOOL_CALL.args))
    size = ScriptedReply().args_chunk_size
    chunks = (1 + -(-arguments // size), count_words(ANSWER))
    return sum(first_token_delay_s + (n - 1) * token_interval_s for n in chunks)


def use_dummy_api_key() -> None:
    """ChatOpenAI needs a key; the scripted server ignores it."""
    os.environ.setdefault(API_KEY_ENV, "bench-not-a-secret")


def openai_actor_config(
    base_url: str, *, stream_tool_rounds: bool = True, timeout_s: float | None = None
) -> dict[str, Any]:
    """An actor on the real `ChatOpenAI` against `base_url`, with the weather tool; `timeout_s`
    replaces the client's default timeouts (its connect timeout is 5 s)."""
    timeout = {} if timeout_s is None else {"request_timeout_s": timeout_s}
    return {
        "name": "bench",
        "agent": {
            "type": "llm",
            "provider": "openai",
            "model": MODEL_NAME,
            "base_url": base_url,
            "api_key_env": API_KEY_ENV,
            "max_retries": 0,
            "stream_tool_rounds": stream_tool_rounds,
            **timeout,
            "tools": [
                {
                    "name": "lookup_weather",
                    "description": "Current weather for a city.",
                    "handler": "scenario:lookup_weather",
                    "parameters": WEATHER_PARAMETERS,
                }
            ],
        },
    }


def sleeper_actor_config(handler: str, *, concurrent: bool, calls: int) -> dict[str, Any]:
    """An actor on the in-process stub provider: one batch of `calls` sleeper calls, then text."""
    batch = [
        {"name": "sleeper", "args": {"tag": f"call-{n}"}, "id": f"call_{n}"} for n in range(calls)
    ]
    return {
        "name": "bench-concurrency",
        "agent": {
            "type": "llm",
            "provider": "stub",
            "tools": [
                {
                    "name": "sleeper",
                    "description": "Sleeps, then answers.",
                    "handler": handler,
                    "parameters": {
                        "type": "object",
                        "properties": {"tag": {"type": "string"}},
                        "required": ["tag"],
                    },
                    "concurrent": concurrent,
                }
            ],
            "script": [{"tool_calls": batch}, {"text": "All three slept."}],
        },
    }
