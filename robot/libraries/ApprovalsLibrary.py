"""Keywords for the approvals suite: a run that pauses for a person over real HTTP, decided on
`POST /runs/{id}/decisions`, on `cleveractors serve` processes that share a PostgreSQL database
(one of them killed with SIGKILL while the run waits), and on the chat page in Chromium.

The actor's model is a `ScriptedOpenAIServer` on 127.0.0.1 playing the actor file's script, one
copy per conversation, so whichever process resumes the run gets the script's next reply; the
server records each request, so a test reads what the model was told about each decision.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from robot.api import logger
from robot.api.deco import keyword, library
from StoreLibrary import StoreLibrary
from WebLibrary import _CLIENT_TIMEOUT_S, ChatStream, _sse_messages

from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

_PROVIDER_KEY_VARIABLE = "CLEVERACTORS_APPROVALS_SUITE_KEY"


@dataclass(frozen=True, slots=True)
class DecisionsResponse:
    """What `POST /runs/{id}/decisions` answered: the resumed segment's SSE stream when it is
    200, else the refusal's JSON body; and its X-Run-Id."""

    status_code: int
    run_id: str | None
    stream: ChatStream | None
    body: dict[str, Any] | None


@library(scope="SUITE", auto_keywords=False)
class ApprovalsLibrary(StoreLibrary):
    """Pause, decide and resume over HTTP."""

    def __init__(self) -> None:
        super().__init__()
        self._model_servers: list[ScriptedOpenAIServer] = []

    @keyword
    def actor_over_the_wire(self, actor: str) -> str:
        """Start a `ScriptedOpenAIServer` playing ACTOR's script (a copy per conversation) and
        write ACTOR as an `openai` actor against it; the new file's path."""
        config = yaml.safe_load(Path(actor).read_text(encoding="utf-8"))
        agent = config["agent"]
        replies = [ScriptedReply.model_validate(reply) for reply in agent.pop("script")]
        server = ScriptedOpenAIServer(replies, per_conversation=True)
        server.start()
        self._model_servers.append(server)
        os.environ[_PROVIDER_KEY_VARIABLE] = "sk-approvals-suite"  # inherited by the servers
        agent |= {"provider": "openai", "model": "gpt-4o-mini", "base_url": server.base_url}
        agent |= {"api_key_env": _PROVIDER_KEY_VARIABLE, "max_retries": 0}
        path = self._folder / f"{Path(actor).stem}-over-the-wire.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return str(path)

    @keyword
    def actor_tree_over_the_wire(self, actor: str) -> str:
        """`Actor Over The Wire` for ACTOR and every actor file it calls as a tool (at any
        depth), each on its own scripted server, the calls rewritten to the new files; the root's
        new path."""
        config = yaml.safe_load(Path(actor).read_text(encoding="utf-8"))
        for tool in config["agent"].get("tools", []):
            if "agent" in tool:
                child = Path(actor).with_name(tool["agent"])
                tool["agent"] = Path(self.actor_tree_over_the_wire(str(child))).name
        written = self._folder / f"{Path(actor).stem}-with-tools.yaml"
        written.write_text(yaml.safe_dump(config), encoding="utf-8")
        return self.actor_over_the_wire(str(written))

    @keyword
    def stop_model_servers(self) -> None:
        while self._model_servers:
            self._model_servers.pop().stop()

    @keyword
    def chat_and_read(self, base_url: str, message: str, session_id: str = "") -> ChatStream:
        """POST MESSAGE to `/chat` (in SESSION_ID, if given) and read the whole SSE stream; the
        response's X-Run-Id is logged."""
        body: dict[str, Any] = {"message": message}
        if session_id:
            body["session_id"] = session_id
        stream = ChatStream()
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/chat", json=body) as response,
        ):
            response.raise_for_status()
            logger.info(f"X-Run-Id: {response.headers.get('x-run-id')}")
            for name, data in _sse_messages(response.iter_lines()):
                stream.frames.append((name, json.loads(data)))
        return stream

    @keyword
    def decisions_on(self, paused: ChatStream, *decisions: str) -> list[dict[str, Any]]:
        """Decisions as the JSON body takes them, from `approve:CALL_ID` or
        `reject:CALL_ID:REASON`, each bound to the digest PAUSED's stream gave its call."""
        digests = {
            event["call_id"]: event["digest"]
            for event in paused.events
            if event["kind"] == "tool_approval_requested"
        }
        made = []
        for text in decisions:
            decision, call_id, *reason = text.split(":", 2)
            entry = {"call_id": call_id, "decision": decision, "digest": digests[call_id]}
            if reason:
                entry["reason"] = reason[0]
            made.append(entry)
        return made

    @keyword
    def post_decisions(
        self, base_url: str, run_id: str, decisions: list[dict[str, Any]]
    ) -> DecisionsResponse:
        """POST DECISIONS to `/runs/RUN_ID/decisions`; the response, read whole."""
        return _post_decisions(base_url, run_id, decisions)

    @keyword
    def post_decisions_at_once(
        self, first_url: str, second_url: str, run_id: str, decisions: list[dict[str, Any]]
    ) -> list[DecisionsResponse]:
        """POST the same DECISIONS on RUN_ID to both servers at the same moment; both
        responses, in the servers' order."""
        start = threading.Barrier(2)
        answers: dict[str, DecisionsResponse] = {}

        def send(url: str) -> None:
            start.wait(_CLIENT_TIMEOUT_S)
            answers[url] = _post_decisions(url, run_id, decisions)

        senders = [threading.Thread(target=send, args=(url,)) for url in (first_url, second_url)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(_CLIENT_TIMEOUT_S * 2)
        both = [answers[first_url], answers[second_url]]
        logger.info(f"(status, X-Run-Id) of each: {[(a.status_code, a.run_id) for a in both]}")
        return both

    @keyword
    def post_decisions_and_hang_up(
        self, base_url: str, run_id: str, decisions: list[dict[str, Any]], answer_words: int
    ) -> ChatStream:
        """POST DECISIONS on RUN_ID, read the resumed segment until ANSWER_WORDS words of its
        answer have arrived, then close the connection mid-answer; what was read."""
        stream = ChatStream()
        body = {"decisions": decisions}
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/runs/{run_id}/decisions", json=body) as response,
        ):
            response.raise_for_status()
            for name, data in _sse_messages(response.iter_lines()):
                stream.frames.append((name, json.loads(data)))
                if name == "text_delta":
                    words = len(stream.text_of_round(stream.last["round"]).split())
                    if words >= int(answer_words):
                        break
        logger.info(f"hung up after: {stream.kinds}")
        return stream

    @keyword
    def read_run(self, base_url: str, run_id: str) -> httpx.Response:
        """`GET /runs/RUN_ID`."""
        return httpx.get(f"{base_url}/runs/{run_id}", timeout=_CLIENT_TIMEOUT_S)

    @keyword
    def model_requests(self) -> int:
        """How many requests the latest scripted model server received."""
        return len(self._model_servers[-1].requests)

    @keyword
    def model_was_told(self, call_id: str) -> str:
        """What the model's latest request holds as the answer to tool call CALL_ID."""
        messages = self._model_servers[-1].requests[-1]["messages"]
        answers = [
            message["content"]
            for message in messages
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id
        ]
        if len(answers) != 1:
            raise AssertionError(f"{len(answers)} answers to {call_id} in {messages}")
        content = answers[0]
        text = content if isinstance(content, str) else "".join(part["text"] for part in content)
        logger.info(f"the model read for {call_id}: {text}")
        return text


def _post_decisions(
    base_url: str, run_id: str, decisions: list[dict[str, Any]]
) -> DecisionsResponse:
    body = {"decisions": decisions}
    with (
        httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
        client.stream("POST", f"{base_url}/runs/{run_id}/decisions", json=body) as response,
    ):
        segment = response.headers.get("x-run-id")
        if response.status_code != 200:
            refusal = json.loads(response.read())
            return DecisionsResponse(response.status_code, segment, None, refusal)
        stream = ChatStream()
        for name, data in _sse_messages(response.iter_lines()):
            stream.frames.append((name, json.loads(data)))
        return DecisionsResponse(response.status_code, segment, stream, None)
