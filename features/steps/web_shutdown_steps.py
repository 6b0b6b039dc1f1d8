"""Steps of web.shutdown.feature: `create_app()` served by uvicorn in process, on a free
loopback port, stopped the way its signal handler stops it (`should_exit`) while a stream is in
flight over real HTTP.

Every step text starts with "an actor with a store is served by uvicorn", "a stream on", "the
stream's last events" or "the served actor's", so none can shadow the steps of other modules.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from behave import given, then, when
from behave.runner import Context
from sse_starlette.sse import AppStatus

from cleveractors import ActorExecutor, ExecutionResult
from cleveractors.web import create_app

_TIMEOUT_S = 30.0
_BODIES: dict[str, Any] = {
    "/chat": {"message": "Where is the Louvre?"},
    "/v1/chat/completions": {
        "model": "louvre",
        "messages": [{"role": "user", "content": "Where is the Louvre?"}],
        "stream": True,
    },
    "/ai-sdk": {
        "id": "chat-1",
        "messages": [
            {
                "id": "m1",
                "role": "user",
                "parts": [{"type": "text", "text": "Where is the Louvre?"}],
            }
        ],
    },
    "/ag-ui": {
        "threadId": "thread-1",
        "runId": "client-run-1",
        "messages": [{"id": "m1", "role": "user", "content": "Where is the Louvre?"}],
    },
}
_TOOL_STARTED = {
    "/chat": "event: tool_call_started",
    "/v1/chat/completions": '"content":" up."',
    "/ai-sdk": '"type":"tool-input-available"',
    "/ag-ui": '"type":"TOOL_CALL_END"',
}
"""What each route has streamed once the lookup runs (OpenAI's format shows no tool call: the
last piece of the text before it)."""


@dataclass
class _ServedWorld:
    grace_s: float
    folder: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="shutdown-")))
    usage: list[ExecutionResult] = field(default_factory=list)
    stream: str = ""
    executor: ActorExecutor | None = None

    def actor(self) -> ActorExecutor:
        # The lookup takes 2 s, or when cancelled, half a second to stop: a grace period of
        # 0.2 s cuts it, one of 30 s lets the run answer.
        lookup = {"query": "Louvre", "seconds": 2, "cleanup_seconds": 0.5}
        config = {
            "name": "louvre",
            "agent": {
                "provider": "stub",
                "tools": [
                    {
                        "name": "slow_lookup",
                        "description": "Look something up, slowly.",
                        "handler": "cleveractors.demo:slow_lookup",
                    }
                ],
                "script": [
                    {
                        "text": "Looking it up.",
                        "tool_calls": [{"name": "slow_lookup", "args": lookup, "id": "call_1"}],
                        "prompt_tokens": 23,
                        "completion_tokens": 4,
                    },
                    {"text": "In Paris.", "prompt_tokens": 7, "completion_tokens": 1},
                ],
            },
            "store": {"url": f"sqlite:///{self.folder / 'store.db'}"},
        }
        self.executor = ActorExecutor.from_config(config)
        return self.executor


def _world(context: Context) -> _ServedWorld:
    world: _ServedWorld = context.served
    return world


@given("an actor with a store is served by uvicorn with a grace period of {seconds:g} seconds")
def step_served(context: Context, seconds: float) -> None:
    context.served = _ServedWorld(grace_s=seconds)


@when("a stream on {route} is in flight when the server shuts down")
def step_shut_down_during_stream(context: Context, route: str) -> None:
    world = _world(context)
    world.stream = asyncio.run(asyncio.wait_for(_stream_through_shutdown(world, route), 60))


async def _stream_through_shutdown(world: _ServedWorld, route: str) -> str:
    app = create_app(world.actor(), on_usage=world.usage.append)
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        app, timeout_graceful_shutdown=int(world.grace_s) or world.grace_s, log_level="warning"
    )
    server = uvicorn.Server(config)
    # As `serve` does: sse-starlette would cut every stream at once, not after the grace period.
    drains = AppStatus.enable_automatic_graceful_drain
    AppStatus.enable_automatic_graceful_drain = False
    # Listening already: the request waits in the backlog until the server has started.
    listening.listen()
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    received = bytearray()
    try:
        async with (
            httpx.AsyncClient(timeout=_TIMEOUT_S) as client,
            client.stream("POST", f"http://127.0.0.1:{port}{route}", json=_BODIES[route]) as sent,
        ):
            async for chunk in sent.aiter_bytes():
                received += chunk
                if _TOOL_STARTED[route] in received.decode(errors="replace"):
                    server.should_exit = True  # what uvicorn's SIGTERM handler does
    finally:
        server.should_exit = True
        await serving
        listening.close()
        AppStatus.enable_automatic_graceful_drain = drains
    return received.decode()


@then("the stream's last events hold {texts}")
def step_last_events_hold(context: Context, texts: str) -> None:
    stream = _world(context).stream
    events = [event for event in stream.split("\n\n") if event.strip() != "data: [DONE]"]
    events = [event for event in events if event.strip()]
    last = "\n\n".join(events[-2:])
    missing = [text for text in texts.split(", ") if text not in last]
    assert not missing, f"{missing} not in the last events {last!r} of:\n{stream}"


@then("the served actor's on_usage heard of {runs:d} run, of {tokens:d} tokens, {status}")
def step_on_usage_heard(context: Context, runs: int, tokens: int, status: str) -> None:
    usage = _world(context).usage
    assert len(usage) == runs, usage
    assert [result.total_tokens for result in usage] == [tokens], usage
    assert [result.status for result in usage] == [status], usage


@then("the served actor's ledger bills {runs:d} run, of {tokens:d} tokens")
def step_ledger_bills(context: Context, runs: int, tokens: int) -> None:
    executor = _world(context).executor
    assert executor is not None
    assert executor.store is not None

    async def read() -> tuple[int, int]:
        assert executor.store is not None
        async with executor.store as store:
            report = await store.usage()
        return len({row.run_id for row in report.rows}), report.total_tokens

    assert asyncio.run(read()) == (runs, tokens)
