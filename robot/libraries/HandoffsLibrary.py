"""Robot Framework keywords for handoffs over the real wire: two actor files that hand off to
each other (`robot/actors/handoff_*.yaml`), both loaded with provider `openai`
(langchain-openai's `ChatOpenAI`) against one scripted OpenAI-compatible server on 127.0.0.1,
which serves the first actor's script, then the second's, and records every request.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import yaml
from robot.api.deco import keyword, library

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.events import Event
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

ACTORS_DIR = Path(__file__).resolve().parent.parent / "actors"
API_KEY_ENV = "CLEVERACTORS_ROBOT_HANDOFF_KEY"

Mode = Literal["blocking", "streaming"]


@library(scope="SUITE")
class HandoffsLibrary:
    """Loads two actors that hand off to each other over the wire, and checks what they sent."""

    def __init__(self) -> None:
        self._runner = asyncio.Runner()  # one loop: ChatOpenAI's clients stay on theirs
        self._servers: list[ScriptedOpenAIServer] = []
        self._executor: ActorExecutor | None = None
        self._folder = Path(tempfile.mkdtemp(prefix="cleveractors-robot-handoffs-"))
        self._result: ExecutionResult | None = None
        self._events: list[Event] = []

    def close(self) -> None:
        """Called by Robot when the suite ends: stop the servers, close the event loop."""
        self.stop_handoff_servers()
        os.environ.pop(API_KEY_ENV, None)
        self._runner.close()

    # -- setup (never asserts) -------------------------------------------------------------------

    @keyword
    def load_handoff_actors_over_the_wire(self, first: str, second: str) -> None:
        """Serves `first`'s script then `second`'s from a new scripted server, and loads `first`
        (whose `handoffs` name `second`) with both actors on provider `openai` against it."""
        configs = {name: _read(name) for name in (first, second)}
        script = [
            ScriptedReply.model_validate(reply)
            for c in configs.values()
            for reply in c["agent"]["script"]
        ]
        server = ScriptedOpenAIServer(script)
        server.start()
        self._servers.append(server)
        os.environ[API_KEY_ENV] = "sk-robot-dummy-key"
        for name, config in configs.items():
            agent = {key: value for key, value in config["agent"].items() if key != "script"}
            agent.update(
                provider="openai",
                model="scripted",
                base_url=server.base_url,
                api_key_env=API_KEY_ENV,
                max_retries=0,
            )
            text = yaml.safe_dump({**config, "agent": agent})
            (self._folder / name).write_text(text, encoding="utf-8")
        self._executor = ActorExecutor.from_config(self._folder / first)

    @keyword
    def stop_handoff_servers(self) -> None:
        """Stops every scripted server this suite started."""
        for server in self._servers:
            server.stop()
        self._servers.clear()

    # -- actions ---------------------------------------------------------------------------------

    @keyword
    def send_message_to_the_handoff_actors(self, message: str, mode: Mode = "blocking") -> str:
        """Sends `message` (`execute()`, or `execute_events()` when `streaming`); returns the
        answer."""
        executor = self._executor
        if executor is None:
            raise RuntimeError("Load Handoff Actors Over The Wire first")
        self._events = []
        if mode == "blocking":
            self._result = self._runner.run(executor.execute(message))
        else:
            self._result = self._runner.run(self._stream(executor, message))
        return self._result.answer

    async def _stream(self, executor: ActorExecutor, message: str) -> ExecutionResult:
        stream = executor.execute_events(message)
        async for event in stream:
            self._events.append(event)
        if stream.result is None:
            raise RuntimeError("the stream ended without a result")
        return stream.result

    # -- checks ----------------------------------------------------------------------------------

    @keyword
    def request_should_carry_the_prompt_and_tools_of(
        self, number: int, actor_file: str, *tools: str
    ) -> None:
        """The server's request `number` (from 1) opened with `actor_file`'s system prompt (and
        no other system message) and offered exactly `tools`, in that order."""
        request = self._server.requests[int(number) - 1]
        messages = request["messages"]
        prompt = _read(actor_file)["agent"]["system_prompt"]
        systems = [m["content"] for m in messages if m["role"] == "system"]
        if messages[0] != {"role": "system", "content": prompt} or systems != [prompt]:
            raise AssertionError(f"request {number} sent the system messages {systems}")
        offered = [tool["function"]["name"] for tool in request.get("tools", [])]
        if offered != list(tools):
            raise AssertionError(f"request {number} offered {offered}, not {list(tools)}")

    @keyword
    def request_should_hold_the_conversation_so_far(self, number: int, *roles: str) -> None:
        """The server's request `number` (from 1) sent messages of these `roles` in order."""
        sent = [m["role"] for m in self._server.requests[int(number) - 1]["messages"]]
        if sent != list(roles):
            raise AssertionError(f"request {number} sent the roles {sent}, not {list(roles)}")

    @keyword
    def the_answer_should_come_from(self, actor: str) -> None:
        """The run ended on `actor`, and its last call was that actor's."""
        result = self._checked_result()
        if result.active_agent != actor or result.usage_by_call[-1].agent != actor:
            raise AssertionError(f"the run ended on {result.active_agent!r}, not {actor!r}")

    @keyword
    def reported_tokens_per_agent_should_equal_what_the_server_billed(self) -> None:
        """Each call's tokens are the server's bill for its request, each call names the actor
        whose agent made it, and the per-agent sums add up to the run's totals."""
        result = self._checked_result()
        billed = self._server.billed
        calls = result.usage_by_call
        reported = [(c.usage.prompt_tokens, c.usage.completion_tokens) for c in calls]
        expected = [(b.prompt_tokens, b.completion_tokens) for b in billed]
        if reported != expected:
            raise AssertionError(f"reported {reported}, the server billed {expected}")
        by_agent = result.usage_by_agent
        if sum(part.usage.total_tokens for part in by_agent.values()) != result.total_tokens:
            raise AssertionError(f"the per-agent usage {by_agent} does not add up")
        if sum(part.llm_calls for part in by_agent.values()) != len(billed):
            raise AssertionError(f"the per-agent calls {by_agent} are not the server's")

    @keyword
    def the_events_should_include_the_handoff(self, from_agent: str, to_agent: str) -> None:
        """The streamed events hold one `handoff` from `from_agent` to `to_agent`."""
        handoffs = [
            (getattr(e, "from_agent", None), getattr(e, "to_agent", None))
            for e in self._events
            if e.kind == "handoff"
        ]
        if handoffs != [(from_agent, to_agent)]:
            raise AssertionError(f"the handoff events were {handoffs}")

    @property
    def _server(self) -> ScriptedOpenAIServer:
        return self._servers[-1]

    def _checked_result(self) -> ExecutionResult:
        if self._result is None:
            raise AssertionError("no message was sent")
        return self._result


def _read(actor_file: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ACTORS_DIR / actor_file).read_text(encoding="utf-8"))
    return loaded
