"""Keywords for stopping runs over the real wire: `ChatOpenAI` against a `ScriptedOpenAIServer`.

A consumer stops a streamed run at a chosen event, in one of the ways a caller can (break,
`aclose()`, leaving `async with`, cancelling its task, a cancelled anyio cancel scope); the
keywords then read what the stop left: the result, the demo tools' record of handler calls and
the server's own bill. Each run gets its own server and event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from robot.api import logger
from robot.api.deco import keyword, library
from support.billing import SentPrompts, billing_problems, requests_of_conversation
from support.harness import (
    NAMED_POSITIONS,
    ChunkCounter,
    Consumption,
    Stop,
    StopStyle,
    consume,
    read_slowly,
    run_guarded,
)

from cleveractors import ActorExecutor, demo
from cleveractors.agents.stream import MAX_BUFFERED_EVENTS
from cleveractors.events import TextDelta
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

ACTORS_DIR = Path(__file__).resolve().parent.parent / "actors"
API_KEY_ENV = "CLEVERACTORS_ROBOT_STOP_KEY"
_MESSAGE = "Look up the Louvre and the Orsay, then tell me about both."
_STYLES: dict[str, StopStyle] = {
    "break": "break",
    "aclose()": "aclose",
    "async with": "async with",
    "cancel task": "cancel task",
    "cancel scope": "cancel scope",
}


@dataclass(frozen=True)
class _Run:
    """One run over the wire: its server and what its consumer saw."""

    server: ScriptedOpenAIServer
    consumed: Consumption
    sent: SentPrompts = field(default_factory=SentPrompts)
    """The estimate rule's prompt for each call's messages, when the run recorded them."""


@library(scope="SUITE")
class StopLibrary:
    """Stops runs at chosen events and checks the run ended, billed, with no tool started late."""

    def __init__(self) -> None:
        self._servers: list[ScriptedOpenAIServer] = []
        self._stop: _Run | None = None
        self._stalled_chunks = 0
        self._slow_read: _Run | None = None

    def close(self) -> None:
        self.stop_stop_servers()
        os.environ.pop(API_KEY_ENV, None)

    # -- setup and actions --------------------------------------------------------------------

    @keyword
    def stop_stop_servers(self) -> None:
        """Stops the scripted servers this library started."""
        while self._servers:
            self._servers.pop().stop()

    @keyword
    def stop_a_run_over_the_wire(self, actor_file: str, position: str, style: str) -> None:
        """Serves the script of `actor_file` from a scripted server, streams a message to the
        actor (provider openai) and stops at the first `position` event (first text, mid-text,
        usage recorded, tool requested, tool started, tool finished) by `style` (break,
        aclose(), async with, cancel task, cancel scope). Waits until the run has settled."""
        if position not in NAMED_POSITIONS:
            known = sorted(NAMED_POSITIONS)
            raise ValueError(f"unknown position {position!r}; one of {known}")
        if style not in _STYLES:
            raise ValueError(f"unknown style {style!r}; one of {sorted(_STYLES)}")
        demo.clear_invocations()
        executor, server = self._over_the_wire(_script_of(actor_file), actor_file)
        sent = SentPrompts()
        executor.agent.model.callbacks = [sent]
        stop = Stop(_STYLES[style], at=NAMED_POSITIONS[position])
        consumed = run_guarded(consume(executor, _MESSAGE, mode="events", stop=stop))
        self._stop = _Run(server, consumed, sent)
        logger.info(f"events before the stop: {[e.kind for e in consumed.events]}")
        logger.info(f"result: {consumed.result!r}")
        if not consumed.stopped_early:
            raise AssertionError("the consumer never reached the stop")

    @keyword
    def read_a_long_answer_slowly(self, words: int) -> None:
        """Streams a `words`-word answer from a scripted server; reads one event, then nothing
        until the model has taken a channel's worth of chunks and half a second more, then the
        rest. Records how many chunks the model had taken while nothing was read."""
        text = " ".join(f"word{n}" for n in range(int(words)))
        executor, server = self._over_the_wire([ScriptedReply(text=text)], None)
        counter = ChunkCounter(signal_at=MAX_BUFFERED_EVENTS)
        executor.agent.model.callbacks = [counter]
        reading = read_slowly(
            executor.execute_events, "Tell me everything.", counter=counter, stall_s=0.5
        )
        consumed, self._stalled_chunks = run_guarded(reading)
        self._slow_read = _Run(server, consumed)

    def _over_the_wire(
        self, script: list[ScriptedReply], actor_file: str | None
    ) -> tuple[ActorExecutor, ScriptedOpenAIServer]:
        server = ScriptedOpenAIServer(script)
        server.start()
        self._servers.append(server)
        config = _read_actor(actor_file) if actor_file else {"name": "long", "agent": {}}
        agent = dict(config["agent"])
        agent.pop("script", None)
        agent.update(
            type="llm",
            provider="openai",
            model="gpt-4o-mini",
            base_url=server.base_url,
            api_key_env=API_KEY_ENV,
            max_retries=0,
        )
        os.environ[API_KEY_ENV] = "sk-robot-stop"
        return ActorExecutor.from_config({**config, "agent": agent}), server

    # -- assertions ---------------------------------------------------------------------------

    @keyword
    def run_should_have_been_cancelled(self) -> None:
        result = self._stopped().consumed.result
        if result is None or not result.cancelled:
            raise AssertionError(f"the run was not cancelled: {result!r}")

    @keyword
    def no_tool_should_have_started_after_the_stop(self) -> None:
        stopped_at = self._stopped().consumed.stopped_at or 0.0
        late = [call for call in demo.invocations() if call.started > stopped_at]
        if late:
            raise AssertionError(f"tools started after the stop: {late}")
        running = [call for call in demo.invocations() if call.finished > stopped_at]
        if any(call.ended != "cancelled" for call in running):
            raise AssertionError(f"a tool running at the stop was not cancelled: {running}")

    @keyword
    def stop_should_have_returned_within(self, seconds: float) -> None:
        took = self._stopped().consumed.settled_after_s
        if took > float(seconds):
            raise AssertionError(f"the run settled {took:.3f} s after the stop")

    @keyword
    def every_request_should_be_in_the_bill(self) -> None:
        """Each request the server received is one call of the result, and every call keeps the
        billing rule (`support.billing.billing_problems`): a call whose usage arrived is billed
        as the server billed it; one cut off before is flagged estimated, its prompt what the
        estimate rule gives for the messages it sent."""
        stop = self._stopped()
        result, server = stop.consumed.result, stop.server
        if result is None:
            raise AssertionError("no result was settled")
        billed = requests_of_conversation(server.requests, server.billed, _MESSAGE)
        calls = [call.usage for call in result.usage_by_call]
        if problems := billing_problems(calls, billed, stop.sent.of()):
            raise AssertionError("\n".join(problems))

    @keyword
    def no_task_of_the_run_should_be_left(self) -> None:
        if tasks := self._stopped().consumed.tasks_left:
            raise AssertionError(f"tasks left running: {tasks}")

    @keyword
    def model_should_have_waited_for_the_reader(self) -> None:
        """While nothing was read, the model took no more chunks than the event channel holds
        (plus the few in flight between two checkpoints)."""
        if self._stalled_chunks > MAX_BUFFERED_EVENTS + 4:
            raise AssertionError(f"the model took {self._stalled_chunks} chunks meanwhile")

    @keyword
    def whole_long_answer_should_have_arrived_as_billed(self, words: int) -> None:
        read = self._slow_read
        if read is None or read.consumed.result is None:
            raise RuntimeError("Read A Long Answer Slowly first")
        result = read.consumed.result
        text = "".join(e.text for e in read.consumed.events if isinstance(e, TextDelta))
        if len(text.split()) != int(words):
            raise AssertionError(f"{len(text.split())} words arrived, not {words}")
        billed = read.server.billed_total
        reported = (result.prompt_tokens, result.completion_tokens)
        if reported != (billed.prompt_tokens, billed.completion_tokens):
            raise AssertionError(f"reported {reported}, billed {billed}")

    # -- a client hanging up on the web server ------------------------------------------------

    @keyword
    def open_chat_until_a_tool_starts(self, base_url: str, message: str) -> httpx.Response:
        """POSTs `message` to `/chat` and reads the SSE stream until `tool_call_started`;
        returns the open response (hang up with `Hang Up`)."""
        client = httpx.Client(timeout=30.0)
        request = client.build_request("POST", f"{base_url}/chat", json={"message": message})
        response = client.send(request, stream=True)
        response.raise_for_status()
        for line in response.iter_lines():
            if line == "event: tool_call_started":
                return response
        raise AssertionError("the stream ended before a tool started")

    @keyword
    def server_cpu_seconds(self, base_url: str) -> float:
        """The CPU time (user + system) used so far by the server this test run started at
        `base_url` (a child process listening on its port), read from /proc."""
        port = base_url.rsplit(":", 1)[1].strip("/")
        for process in Path("/proc").iterdir():
            try:
                command = (process / "cmdline").read_bytes().split(b"\0")
                stat = (process / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, NotADirectoryError, PermissionError, ProcessLookupError):
                continue
            if int(stat[1]) == os.getpid() and b"--port" in command and port.encode() in command:
                return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        raise RuntimeError(f"no server started by this test run listens at {base_url}")

    @keyword
    def hang_up(self, response: httpx.Response) -> None:
        """Closes the connection of a response opened by `Open Chat Until A Tool Starts`."""
        response.close()

    def _stopped(self) -> _Run:
        if self._stop is None:
            raise RuntimeError("Stop A Run Over The Wire first")
        return self._stop


def _read_actor(actor_file: str) -> dict[str, Any]:
    config = yaml.safe_load((ACTORS_DIR / actor_file).read_text(encoding="utf-8"))
    if not isinstance(config, dict) or not isinstance(config.get("agent"), dict):
        raise RuntimeError(f"{actor_file} is not an actor config")
    return config


def _script_of(actor_file: str) -> list[ScriptedReply]:
    script = _read_actor(actor_file)["agent"].get("script") or ()
    return [ScriptedReply.model_validate(reply) for reply in script]
