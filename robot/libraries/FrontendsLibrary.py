"""Keywords for the frontend protocols suite: an actor served over HTTP (`cleveractors serve`, or
the usage-recording app), its model a scripted OpenAI-compatible server, and the protocols' own
client libraries from npm driven under Node (`robot/node/clients.mjs`: the `ai` package's chat
with its `DefaultChatTransport`, and `@ag-ui/client`'s `HttpAgent`).

What a client must hold is read from the script (its texts, tool calls) and from the scripted
server's billing record (its usage), never copied from an earlier response.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from robot.api import logger
from robot.api.deco import keyword, library
from WebLibrary import WebLibrary

from cleveractors.executor import ActorExecutor
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

_NODE_FOLDER = Path(__file__).resolve().parents[1] / "node"
_CLIENTS = _NODE_FOLDER / "clients.mjs"
_NODE_TIMEOUT_S = 60.0
_PROVIDER_KEY_ENV = "CLEVERACTORS_FRONTENDS_SUITE_KEY"

_LOOKUP = {
    "text": "Let me look that up.",
    "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_paris"}],
    "prompt_tokens": 52,
    "completion_tokens": 17,
}
_FORECAST = {
    "city": "Paris",
    "summary": "Light rain in the morning, clearing by the afternoon; take an umbrella.",
    "temp_c": 18,
    "rain": True,
    "hours": [{"hour": hour, "note": f"hour {hour}: {hour % 5} mm of rain"} for hour in range(12)],
}
_FORECAST_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "summary": {"type": "string"},
        "temp_c": {"type": "integer"},
        "rain": {"type": "boolean"},
        "hours": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"hour": {"type": "integer"}, "note": {"type": "string"}},
                "required": ["hour", "note"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["city", "summary", "temp_c", "rain", "hours"],
    "additionalProperties": False,
}
_SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "two rounds": [
        _LOOKUP,
        {
            "text": "In Paris it is 18 C with light rain, so take an umbrella.",
            "prompt_tokens": 88,
            "completion_tokens": 14,
        },
    ],
    "tool error": [
        {
            "tool_calls": [
                {"name": "broken_lookup", "args": {"query": "Paris weather"}, "id": "call_broken"}
            ],
            "prompt_tokens": 40,
            "completion_tokens": 9,
        },
        {
            "text": "The lookup is down; try again later.",
            "prompt_tokens": 71,
            "completion_tokens": 8,
        },
    ],
    "slow answer": [
        _LOOKUP,
        {
            "text": " ".join(["In Paris it is 18 C with light rain, so take an umbrella."] * 6),
            "chunk_delay_s": 0.05,
            "prompt_tokens": 88,
            "completion_tokens": 72,
        },
    ],
    "typed forecast": [
        _LOOKUP,
        {"text": json.dumps(_FORECAST), "prompt_tokens": 90, "completion_tokens": 160},
    ],
    "booking": [
        {
            "text": "I will book it.",
            "tool_calls": [
                {
                    "name": "book_table",
                    "args": {"restaurant": "Chez Marie", "people": 2},
                    "id": "call_book",
                }
            ],
            "prompt_tokens": 61,
            "completion_tokens": 12,
        },
        {
            "text": "Your table at Chez Marie is booked.",
            "prompt_tokens": 95,
            "completion_tokens": 9,
        },
    ],
}
_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "handler": "cleveractors.demo:get_weather",
    },
    {
        "name": "broken_lookup",
        "description": "Look something up.",
        "handler": "cleveractors.demo:broken_lookup",
    },
    {
        "name": "book_table",
        "description": "Book a restaurant table.",
        "handler": "cleveractors.demo:book_table",
        "approval": "required",
    },
]


@library(scope="SUITE", auto_keywords=False)
class FrontendsLibrary(WebLibrary):
    """Frontend protocols over real HTTP, checked by their own client libraries."""

    def __init__(self) -> None:
        super().__init__()
        self._folder = Path(tempfile.mkdtemp(prefix="cleveractors-frontends-"))
        self._provider: ScriptedOpenAIServer | None = None

    # -- the model and the actor ---------------------------------------------------------------

    @keyword
    def start_scripted_provider(self, script: str) -> str:
        """A `ScriptedOpenAIServer` on 127.0.0.1 playing SCRIPT (`two rounds`, `tool error`,
        `slow answer`, `booking`) in order; its base URL. It replaces the previous one."""
        if self._provider is not None:
            self._provider.stop()
        replies = [ScriptedReply.model_validate(reply) for reply in _SCRIPTS[script]]
        self._provider = ScriptedOpenAIServer(replies)
        self._provider.start()
        return self._provider.base_url

    @keyword
    def write_frontend_actor(self, name: str, base_url: str, typed: bool = False) -> str:
        """An `openai` actor talking to BASE_URL, with the tools the scripts call (`book_table`
        needs a person's approval), and when TYPED the forecast's `output_schema` (in `native`
        mode: the answer's text is the object); returns its path."""
        os.environ[_PROVIDER_KEY_ENV] = "sk-frontends-suite"  # inherited by the servers
        actor = {
            "name": name,
            "agent": {
                "type": "llm",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": base_url,
                "api_key_env": _PROVIDER_KEY_ENV,
                "tools": _TOOLS,
            },
        }
        if typed:
            actor["agent"] |= {"output_schema": _FORECAST_SCHEMA, "output_mode": "native"}
        path = self._folder / f"{name}.yaml"
        path.write_text(json.dumps(actor), encoding="utf-8")  # JSON is YAML
        return str(path)

    @keyword
    def billed_usage(self, first: int = 0, last: int | None = None) -> dict[str, int]:
        """The scripted server's billing record of its calls FIRST..LAST (0-based, LAST
        excluded; all by default), summed: `prompt_tokens`, `completion_tokens`,
        `total_tokens`, `calls` and `completed` (how many it answered in full)."""
        if self._provider is None:
            raise AssertionError("no scripted provider was started")
        billed = self._provider.billed[int(first) : None if last is None else int(last)]
        return {
            "prompt_tokens": sum(call.prompt_tokens for call in billed),
            "completion_tokens": sum(call.completion_tokens for call in billed),
            "total_tokens": sum(call.total_tokens for call in billed),
            "calls": len(billed),
            "completed": sum(1 for call in billed if call.completed),
        }

    @keyword
    def blocking_output(self, script: str, message: str) -> Any:
        """`result.output` of the typed actor asked MESSAGE in a blocking run (`execute`), its
        model a new scripted server playing SCRIPT: what a streamed run's last object must be."""
        replies = [ScriptedReply.model_validate(reply) for reply in _SCRIPTS[script]]
        with ScriptedOpenAIServer(replies) as provider:
            actor = self.write_frontend_actor(f"blocking-{time.time_ns()}", provider.base_url, True)
            result = asyncio.run(ActorExecutor.from_config(actor).execute(message))
        return result.output

    @keyword
    def scripted_texts(self, script: str) -> list[str]:
        """The texts of SCRIPT's replies, in order (an empty one for a reply without text)."""
        return [str(reply.get("text", "")) for reply in _SCRIPTS[script]]

    # -- the clients ---------------------------------------------------------------------------

    @keyword
    def run_ai_sdk_client(self, base_url: str, message: str, *options: str) -> dict[str, Any]:
        """The `ai` package's chat (`DefaultChatTransport` to BASE_URL/ai-sdk) sends MESSAGE;
        OPTIONS are `stop-after-words=N` (stop mid-answer) or `approve=yes|no`. Returns
        `rounds`: per request, the chat's `status`, `error`, `messages` and `finishes`."""
        return _run_client("ai-sdk", base_url, message, options)

    @keyword("Run AG-UI Client")
    def run_ag_ui_client(self, base_url: str, message: str, *options: str) -> dict[str, Any]:
        """`@ag-ui/client`'s `HttpAgent` (BASE_URL/ag-ui) runs MESSAGE; OPTIONS as for the AI
        SDK client, `approve` also `edit:{json}`. Returns `rounds`: per run, its `error`,
        `events`, the agent's `messages` and `pendingInterrupts`."""
        return _run_client("ag-ui", base_url, message, options)

    # -- what the clients hold -------------------------------------------------------------------

    @keyword
    def assistant_parts(self, held: dict[str, Any], round_index: int = -1) -> list[dict[str, Any]]:
        """The parts of the AI SDK chat's last assistant message after round ROUND_INDEX."""
        messages = held["rounds"][int(round_index)]["messages"]
        assistant = [message for message in messages if message["role"] == "assistant"]
        if not assistant:
            raise AssertionError(f"the chat holds no assistant message: {messages}")
        return list(assistant[-1]["parts"])

    @keyword
    def texts_of_parts(self, parts: list[dict[str, Any]]) -> list[str]:
        return [part["text"] for part in parts if part["type"] == "text"]

    @keyword
    def tool_parts(self, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [part for part in parts if part["type"].startswith("tool-")]

    @keyword
    def metadata_usage_should_equal_billed(
        self, metadata: dict[str, Any], billed: dict[str, int]
    ) -> None:
        """The AI SDK message metadata's `usage` holds exactly what the server billed."""
        usage = metadata["usage"]
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if usage[name] != billed[name]:
                raise AssertionError(
                    f"usage {name} is {usage[name]}, the server billed {billed[name]}"
                )
        if usage["details"]["llm_calls"] != billed["calls"]:
            raise AssertionError(
                f"{usage['details']['llm_calls']} calls told, {billed['calls']} billed"
            )

    @keyword("AG-UI Usage Should Equal Billed")
    def ag_ui_usage_should_equal_billed(
        self, event: dict[str, Any], billed: dict[str, int]
    ) -> None:
        """The `usage` entries of a `RUN_FINISHED` / `RUN_ERROR` event sum to what the server
        billed (AG-UI's accounting: input, output and total tokens)."""
        entries = event.get("usage") or []
        told = {
            "prompt_tokens": sum(entry.get("inputTokens", 0) for entry in entries),
            "completion_tokens": sum(entry.get("outputTokens", 0) for entry in entries),
            "total_tokens": sum(entry.get("totalTokens", 0) for entry in entries),
        }
        for name, value in told.items():
            if value != billed[name]:
                raise AssertionError(f"usage {name} is {value}, the server billed {billed[name]}")

    @keyword
    def each_object_should_extend_the_one_before(self, seen: list[Any], minimum: int = 2) -> None:
        """SEEN, the versions of a typed answer a client held, are at least MINIMUM and each
        extends the one before: its keys and items kept, a string only longer."""
        if len(seen) < int(minimum):
            raise AssertionError(f"{len(seen)} versions of the object, fewer than {minimum}")
        for before, after in itertools.pairwise(seen):
            if not _extends(before, after):
                raise AssertionError(f"{after!r} does not extend {before!r}")

    @keyword
    def events_of_type(self, run: dict[str, Any], event_type: str) -> list[dict[str, Any]]:
        return [event for event in run["events"] if event["type"] == event_type]


def _extends(before: Any, after: Any) -> bool:
    if isinstance(before, dict):
        return isinstance(after, dict) and all(
            key in after and _extends(value, after[key]) for key, value in before.items()
        )
    if isinstance(before, list):
        return (
            isinstance(after, list)
            and len(after) >= len(before)
            and all(_extends(item, after[n]) for n, item in enumerate(before))
        )
    if isinstance(before, str):
        return isinstance(after, str) and after.startswith(before)
    return bool(before == after)


def _run_client(command: str, base_url: str, message: str, options: tuple[str, ...]) -> dict:
    node = shutil.which("node")
    if node is None or not (_NODE_FOLDER / "node_modules").is_dir():
        raise AssertionError(
            f"Node and the clients in {_NODE_FOLDER}/node_modules are needed: "
            "`nox -s integration_tests` installs them (or `npm ci` in that folder)"
        )
    flat: list[str] = []
    for option in options:
        name, _, value = option.partition("=")
        flat += [f"--{name}", value]
    ran = subprocess.run(
        [node, str(_CLIENTS), command, base_url, message, *flat],
        capture_output=True,
        text=True,
        timeout=_NODE_TIMEOUT_S,
        cwd=_NODE_FOLDER,
        check=False,
    )
    if ran.stderr:
        logger.info(f"node said:\n{ran.stderr}")
    if ran.returncode != 0:
        raise AssertionError(f"the {command} client failed ({ran.returncode}):\n{ran.stderr}")
    held: dict[str, Any] = json.loads(ran.stdout)
    logger.info(json.dumps(held, indent=1)[:20_000])
    return held
