"""Keywords for the store suite: `cleveractors serve` with a store on a throwaway PostgreSQL (or a
SQLite file), talked to over HTTP, killed with SIGKILL, and its ledger read back with the CLI.

The PostgreSQL server is the Behave suite's own `TemporaryPostgres` (features/support), so both
suites start it the same way. The actors are written here, from a script whose token counts are
the provider's billing record: what the ledger must hold is read from that script.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from robot.api import logger
from robot.api.deco import keyword, library
from WebLibrary import (
    _CLIENT_TIMEOUT_S,
    ChatStream,
    WebLibrary,
    _free_port,
    _openai_client,
    _sse_messages,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
# The Behave suite's PostgreSQL helper, from the test tree's root.
from features.support.postgres import TemporaryPostgres

from cleveractors.store import SqlStore
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

_API_KEY_ENV = "CLEVERACTORS_STORE_SUITE_KEY"

_LOOKUP = {
    "text": "Let me look that up.",
    "tool_calls": [{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_paris"}],
    "prompt_tokens": 52,
    "completion_tokens": 17,
}
_SLOW_ANSWER = {
    "text": " ".join(["In Paris it is 18 C with light rain, so take an umbrella."] * 6),
    "chunk_delay_s": 0.05,
    "prompt_tokens": 88,
    "completion_tokens": 70,
}
_QUICK_ANSWER = {"text": "Noted.", "prompt_tokens": 11, "completion_tokens": 3}
_CHEAP_ANSWER = {"text": "Noted.", "prompt_tokens": 5, "completion_tokens": 3}
"""Its prompt as the provider counts it is below what the loop estimates (8 tokens for a message
"Hello" alone), so a strict limit is never passed."""
_PRICES = {"input_per_mtok": 1, "output_per_mtok": 2}
_TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "handler": "cleveractors.demo:get_weather",
    }
]


@library(scope="SUITE", auto_keywords=False)
class StoreLibrary(WebLibrary):
    """Stored sessions over HTTP, on PostgreSQL or SQLite."""

    def __init__(self) -> None:
        super().__init__()
        self._postgres = TemporaryPostgres()
        self._folder = Path(tempfile.mkdtemp(prefix="cleveractors-store-"))
        self._provider: ScriptedOpenAIServer | None = None

    # -- databases and actors ------------------------------------------------------------------

    @keyword
    def new_postgres_database(self) -> str:
        """An empty database on the suite's PostgreSQL server (started on first use)."""
        return self._postgres.new_database()

    @keyword
    def new_sqlite_database(self, name: str) -> str:
        return f"sqlite:///{self._folder / name}.db"

    @keyword
    def stop_postgres(self) -> None:
        self._postgres.stop()
        if self._provider is not None:
            self._provider.stop()

    @keyword
    def start_scripted_openai_server(self, script: str) -> str:
        """A `ScriptedOpenAIServer` on 127.0.0.1 replaying SCRIPT (see `Write Stored Actor`);
        its base URL, for an `openai` actor."""
        replies = [ScriptedReply.model_validate(reply) for reply in _script(script)]
        if self._provider is not None:  # one at a time: the billing keywords read the last one
            self._provider.stop()
        self._provider = ScriptedOpenAIServer(replies)
        self._provider.start()
        return self._provider.base_url

    @keyword
    def completed_billed_calls(self) -> list[dict[str, int]]:
        """The scripted server's billing record of every call it answered in full, in order."""
        assert self._provider is not None, "no scripted OpenAI server was started"
        return [
            {"prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens}
            for call in self._provider.billed
            if call.completed
        ]

    @keyword
    def scripted_server_requests(self) -> int:
        """How many requests the scripted OpenAI server received, answered or not."""
        assert self._provider is not None, "no scripted OpenAI server was started"
        return len(self._provider.requests)

    @keyword
    def write_stored_actor(
        self,
        name: str,
        script: str,
        lease_s: float = 30.0,
        store_url: str = "",
        base_url: str = "",
    ) -> str:
        """An actor file with a store: script `slow tool turn` (a lookup, then a slow answer;
        the first turn only, for a scripted server that plays it in order), `slow` (a slow
        answer), `slow answers` (a slow answer, three times, for a scripted server) or `quick`
        (a quick answer; a stub replays its script for every run); its store
        at STORE_URL (else `serve --store` names it).
        With BASE_URL the actor is an `openai` one (ChatOpenAI) talking to that server, which
        plays the script; else the `stub` provider plays it. Returns its path."""
        agent: dict[str, Any] = {"type": "llm", "tools": _TOOLS}
        if base_url:
            os.environ[_API_KEY_ENV] = "sk-store-suite"  # inherited by the servers
            agent |= {"provider": "openai", "model": "gpt-4o-mini", "base_url": base_url}
            agent |= {"api_key_env": _API_KEY_ENV}
        else:
            agent |= {"provider": "stub", "script": _script(script)}
        actor = {
            "name": name,
            "agent": agent,
            "store": {"retention_days": 30, "lease_s": float(lease_s)},
        }
        if store_url:
            actor["store"]["url"] = store_url
        path = self._folder / f"{name}.yaml"
        path.write_text(json.dumps(actor), encoding="utf-8")  # JSON is YAML, and quick to parse
        return str(path)

    @keyword
    def write_spend_limited_actor(self, name: str, usd_per_day: str, strict: bool) -> str:
        """A stub actor answering in one cheap call (5 prompt and 3 completion tokens, at $1
        and $2 per million), each caller limited to USD_PER_DAY a day; with STRICT each call
        reserves its prompt plus its output cap. Returns its path."""
        actor = {
            "name": name,
            "agent": {"provider": "stub", "script": [_CHEAP_ANSWER], "pricing": _PRICES},
            "store": {"lease_s": 30.0},
            "spend_limits": {"limits": [{"window": "day", "usd": usd_per_day}], "strict": strict},
        }
        path = self._folder / f"{name}.yaml"
        path.write_text(json.dumps(actor), encoding="utf-8")
        return str(path)

    @keyword
    def start_stored_servers(
        self, actor: str, store_url: str, count: int, api_keys: str
    ) -> list[str]:
        """COUNT `Start Stored Server`s at once (they start in parallel); their base URLs."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
            starting = [
                pool.submit(self.start_stored_server, actor, store_url, api_keys)
                for _ in range(count)
            ]
            return [future.result() for future in starting]

    @keyword
    def stored_ledger(self, store_url: str) -> dict[str, Any]:
        """The ledger of the store at STORE_URL, read in this process, as `usage --json` prints
        it."""

        async def read() -> dict[str, Any]:
            async with SqlStore(store_url, should_create=False) as store:
                report = await store.usage()
            found: dict[str, Any] = json.loads(report.model_dump_json())
            return found

        return asyncio.run(read())

    @keyword
    def send_at_once_to_both(
        self, urls: list[str], count: int, key: str, route: str
    ) -> list[dict[str, Any]]:
        """COUNT requests "Hello" at once, alternating between the servers at URLS, as the
        caller of API KEY, to ROUTE (`/chat`, or `/v1/chat/completions` capping each call's
        output at 3 tokens); each one's status, `Retry-After`, `X-Run-Id` and body."""
        return asyncio.run(_send_at_once(urls, count, key, route))

    @keyword
    def scripted_call(self, which: str) -> dict[str, int]:
        """The billing record of one scripted call: `lookup`, `slow answer` or `quick answer`."""
        reply = {"lookup": _LOOKUP, "slow answer": _SLOW_ANSWER, "quick answer": _QUICK_ANSWER}
        return {
            "prompt_tokens": int(reply[which]["prompt_tokens"]),
            "completion_tokens": int(reply[which]["completion_tokens"]),
        }

    # -- servers -------------------------------------------------------------------------------

    @keyword
    def start_stored_server(self, actor: str, store_url: str, api_keys: str = "") -> str:
        """`cleveractors serve ACTOR --store URL` on a free loopback port, with API_KEYS
        (comma-separated) when given; its base URL."""
        port = _free_port()
        command = [
            str(Path(sys.executable).with_name("cleveractors")),
            "serve",
            actor,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--store",
            store_url,
        ]
        environment = _environment()
        if api_keys:
            environment["STORE_SUITE_API_KEYS"] = api_keys
            command += ["--api-keys-env", "STORE_SUITE_API_KEYS"]
        return self._start(Path(actor).stem, command, port, environment)

    @keyword
    def kill_server(self, base_url: str) -> None:
        """SIGKILL the server at BASE_URL: no shutdown, no cleanup, as when a machine dies."""
        server = next(server for server in self._servers if server.base_url == base_url)
        self._servers.remove(server)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()

    # -- sessions over HTTP --------------------------------------------------------------------

    @keyword
    def chat_in_session(
        self, base_url: str, session_id: str, message: str, key: str = ""
    ) -> ChatStream:
        """POST a message to `/chat` in a stored session (as the caller of API KEY, if given)
        and read the whole SSE stream."""
        return _chat(base_url, {"message": message, "session_id": session_id}, key)

    @keyword
    def post_chat(self, base_url: str, body: dict[str, Any]) -> httpx.Response:
        """POST BODY to `/chat` and read the response whole (for refusals)."""
        return httpx.post(f"{base_url}/chat", json=body, timeout=_CLIENT_TIMEOUT_S)

    @keyword
    def chat_until_then_kill(
        self, base_url: str, session_id: str, message: str, kind: str, round_number: int
    ) -> ChatStream:
        """Chat in a session, and SIGKILL the server the moment an event of KIND in round
        ROUND_NUMBER arrives (mid-call: the call has streamed, not ended)."""
        stream = ChatStream()
        body = {"message": message, "session_id": session_id}
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/chat", json=body) as response,
        ):
            for name, data in _sse_messages(response.iter_lines()):
                event = json.loads(data)
                stream.frames.append((name, event))
                if name == kind and event.get("round") == int(round_number):
                    self.kill_server(base_url)
                    break
        logger.info(f"event kinds before the kill: {stream.kinds}")
        return stream

    @keyword
    def chat_while_another_runs(
        self, first_url: str, second_url: str, session_id: str
    ) -> list[ChatStream]:
        """Start a run in SESSION_ID on FIRST_URL; as soon as its answer streams, send another
        message in the same session to SECOND_URL. Both streams, read whole."""
        streaming = threading.Event()
        first = ChatStream()

        def hold() -> None:
            body = {"message": "first", "session_id": session_id}
            with (
                httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
                client.stream("POST", f"{first_url}/chat", json=body) as response,
            ):
                for name, data in _sse_messages(response.iter_lines()):
                    first.frames.append((name, json.loads(data)))
                    streaming.set()

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            if not streaming.wait(_CLIENT_TIMEOUT_S):
                raise AssertionError("the first run never started streaming")
            second = _chat(second_url, {"message": "second", "session_id": session_id})
        finally:
            holder.join(_CLIENT_TIMEOUT_S)
        return [first, second]

    @keyword
    def chat_under_key(self, base_url: str, key: str, message: str) -> KeyedChat:
        """POST MESSAGE to `/chat` with `Idempotency-Key: KEY`; the response, read whole."""
        return _chat_under_key(base_url, key, message)

    @keyword
    def chat_under_key_then_hang_up(self, base_url: str, key: str, message: str) -> str:
        """POST MESSAGE to `/chat` under KEY and hang up at the first text delta (a client that
        timed out); the run's X-Run-Id."""
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S, headers={"Idempotency-Key": key}) as client,
            client.stream("POST", f"{base_url}/chat", json={"message": message}) as response,
        ):
            assert response.status_code == 200, response.read()
            for name, _data in _sse_messages(response.iter_lines()):
                if name == "text_delta":
                    break
            else:
                raise AssertionError("the run ended before its first text delta")
            return response.headers["x-run-id"]

    @keyword
    def chat_at_once_under_key(
        self, first_url: str, second_url: str, key: str, message: str
    ) -> list[KeyedChat]:
        """POST the same MESSAGE under the same Idempotency-Key KEY to both servers at the same
        moment. Both responses, the one that ran the request first (it must be exactly one: a
        200 that is not a replay), then the other."""
        start = threading.Barrier(2)
        chats: dict[str, KeyedChat] = {}

        def send(url: str) -> None:
            start.wait(_CLIENT_TIMEOUT_S)
            chats[url] = _chat_under_key(url, key, message)

        senders = [threading.Thread(target=send, args=(url,)) for url in (first_url, second_url)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(_CLIENT_TIMEOUT_S * 2)
        both = [chats[first_url], chats[second_url]]
        ran = [chat for chat in both if chat.status_code == 200 and not chat.replayed]
        told = [(chat.status_code, chat.run_id, chat.replayed) for chat in both]
        logger.info(f"(status, X-Run-Id, replayed) of each: {told}")
        assert len(ran) == 1, f"{len(ran)} of the two requests ran: {told}"
        return ran + [chat for chat in both if chat is not ran[0]]

    @keyword
    def complete_with_the_openai_sdk(self, base_url: str, message: str, key: str) -> dict[str, Any]:
        """`client.chat.completions.create(...)` from the official `openai` client, with
        `extra_headers={"Idempotency-Key": KEY}`. Returns `content`, `usage` (a dict) and the
        response's `run_id` (its X-Run-Id header)."""
        with _openai_client(base_url) as client:
            raw = client.chat.completions.with_raw_response.create(
                model="sdk",
                messages=[{"role": "user", "content": message}],
                extra_headers={"Idempotency-Key": key},
            )
            completion = raw.parse()
        usage = completion.usage
        return {
            "content": completion.choices[0].message.content,
            "usage": None if usage is None else usage.model_dump(),
            "run_id": raw.headers.get("x-run-id"),
        }

    @keyword
    def session_turns(self, base_url: str, session_id: str, key: str = "") -> httpx.Response:
        """`GET /sessions/{id}` (with API KEY, if given)."""
        url = f"{base_url}/sessions/{session_id}"
        return httpx.get(url, headers=_bearer(key), timeout=_CLIENT_TIMEOUT_S)

    @keyword
    def delete_stored_session(self, base_url: str, session_id: str, key: str = "") -> int:
        """`DELETE /sessions/{id}` (with API KEY, if given); the status code."""
        url = f"{base_url}/sessions/{session_id}"
        return httpx.delete(url, headers=_bearer(key), timeout=_CLIENT_TIMEOUT_S).status_code

    @keyword
    def run_concurrent_sessions(self, urls: list[str], sessions: int, turns: int) -> list[str]:
        """SESSIONS sessions at once, each TURNS turns in a row, turn t of session s sent to
        server (s + t) mod len(URLS); then every session read back. Returns the problems found
        (a run that did not finish, a turn lost, doubled or out of order); empty when none."""
        return asyncio.run(_concurrent_sessions(urls, int(sessions), int(turns)))

    # -- the ledger, through the CLI -----------------------------------------------------------

    @keyword
    def ledger_report(self, actor: str, store_url: str, *options: str) -> dict[str, Any]:
        """`cleveractors usage ACTOR --store URL --json [OPTIONS]` (the actor's own store when
        STORE_URL is empty), parsed."""
        store = ["--store", store_url] if store_url else []
        completed = _cli("usage", actor, *store, "--json", *options)
        report: dict[str, Any] = json.loads(completed.stdout)
        return report

    @keyword
    def run_store_cli(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        """`cleveractors ARGUMENTS...`; the completed process (exit code, stdout, stderr)."""
        return _cli(*arguments, check=False)

    @keyword
    def age_sessions(self, sqlite_url: str, days: int) -> None:
        """Make every session of a SQLite store look untouched for DAYS days."""
        import sqlite3  # the test's own view of the file, beside the store

        path = sqlite_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as database:
            database.execute(
                "UPDATE cleveractors_sessions SET updated_at = datetime(updated_at, ?)",
                (f"-{int(days)} days",),
            )


@dataclass(frozen=True, slots=True)
class KeyedChat:
    """A `/chat` response under an Idempotency-Key: the SSE stream when it is 200, else the
    refusal's JSON body."""

    status_code: int
    run_id: str | None
    stream: ChatStream | None
    body: dict[str, Any] | None

    @property
    def replayed(self) -> bool:
        """Whether the stream replays a stored answer (`run_started` says so)."""
        return self.stream is not None and bool(self.stream.events[0].get("replayed"))


def _chat_under_key(base_url: str, key: str, message: str) -> KeyedChat:
    headers = {"Idempotency-Key": key}
    with (
        httpx.Client(timeout=_CLIENT_TIMEOUT_S, headers=headers) as client,
        client.stream("POST", f"{base_url}/chat", json={"message": message}) as response,
    ):
        run_id = response.headers.get("x-run-id")
        if response.status_code != 200:
            return KeyedChat(response.status_code, run_id, None, json.loads(response.read()))
        stream = ChatStream()
        for name, data in _sse_messages(response.iter_lines()):
            stream.frames.append((name, json.loads(data)))
        return KeyedChat(response.status_code, run_id, stream, None)


async def _send_at_once(urls: list[str], count: int, key: str, route: str) -> list[dict[str, Any]]:
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=0)
    async with httpx.AsyncClient(
        timeout=_CLIENT_TIMEOUT_S * 4, limits=limits, headers=_bearer(key)
    ) as client:

        async def send(number: int) -> dict[str, Any]:
            body: dict[str, Any] = {"message": "Hello"}
            if route != "/chat":
                body = {"model": "m", "messages": [{"role": "user", "content": "Hello"}]}
                body["max_tokens"] = 3
            response = await client.post(f"{urls[number % len(urls)]}{route}", json=body)
            return {
                "status": response.status_code,
                "retry_after": response.headers.get("retry-after"),
                "run_id": response.headers.get("x-run-id"),
                "body": response.text,
            }

        return list(await asyncio.gather(*(send(number) for number in range(count))))


def _environment() -> dict[str, str]:
    return os.environ.copy()


def _script(name: str) -> list[dict[str, Any]]:
    return {
        "slow tool turn": [_LOOKUP, _SLOW_ANSWER] + [_LOOKUP, _QUICK_ANSWER] * 10,
        "slow": [_SLOW_ANSWER],
        "slow answers": [_SLOW_ANSWER] * 3,
        "quick": [_QUICK_ANSWER] * 400,
    }[name]


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _chat(base_url: str, body: dict[str, Any], key: str = "") -> ChatStream:
    stream = ChatStream()
    with (
        httpx.Client(timeout=_CLIENT_TIMEOUT_S, headers=_bearer(key)) as client,
        client.stream("POST", f"{base_url}/chat", json=body) as response,
    ):
        response.raise_for_status()
        for name, data in _sse_messages(response.iter_lines()):
            stream.frames.append((name, json.loads(data)))
    return stream


def _cli(*arguments: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("cleveractors")), *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    logger.info(f"$ cleveractors {' '.join(arguments)}\n{completed.stdout}{completed.stderr}")
    if check and completed.returncode != 0:
        raise AssertionError(f"cleveractors exited with {completed.returncode}")
    return completed


async def _concurrent_sessions(urls: list[str], sessions: int, turns: int) -> list[str]:
    # No keep-alive: a request sent on a pooled connection just as the server's keep-alive
    # timeout closes it fails with ReadError (an HTTP/1.1 race, not ours), and a chat request is
    # not one to retry.
    limits = httpx.Limits(max_connections=sessions, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=_CLIENT_TIMEOUT_S * 4, limits=limits) as client:
        found = await asyncio.gather(
            *(_one_session(client, urls, number, turns) for number in range(sessions))
        )
    return [problem for problems in found for problem in problems]


async def _one_session(
    client: httpx.AsyncClient, urls: list[str], number: int, turns: int
) -> list[str]:
    session_id = f"load-{number}"
    problems = []
    for turn in range(turns):
        body = {"message": f"{session_id} turn {turn + 1}", "session_id": session_id}
        last = None
        async with client.stream(
            "POST", f"{urls[(number + turn) % len(urls)]}/chat", json=body
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("event:"):
                    last = line.removeprefix("event:").strip()
        if last != "run_finished":
            problems.append(f"{session_id} turn {turn + 1} ended with {last}")
    stored = (await client.get(f"{urls[number % len(urls)]}/sessions/{session_id}")).json()
    questions = [turn["messages"][0]["content"] for turn in stored["turns"]]
    expected = [f"{session_id} turn {turn + 1}" for turn in range(turns)]
    if questions != expected:
        problems.append(f"{session_id} holds {questions}, not {expected}")
    return problems
