"""How long a request at the history limits blocks the server's event loop (issue 8, item 4).

    python benchmarks/history_block.py            # 200 turns of 16000 characters, and of 100

A `/chat` request with the router's largest accepted history runs through `create_app()` (httpx's
ASGI transport, in this process) against an actor using `ChatOpenAI` and a scripted OpenAI
server in another process (so the server's work does not hold this interpreter's GIL). A ticker
task sleeping 1 ms records the longest gap between its wake-ups: the longest time the loop was
not free. Target: 50 ms. A report, not a test: it always exits 0.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import httpx

from cleveractors import ActorExecutor
from cleveractors.web import create_app
from cleveractors.web.router import DEFAULT_MAX_HISTORY_TURNS, DEFAULT_MAX_TURN_CHARS

TARGET_MS = 50.0
REPETITIONS = 5
_SERVER = """
import time
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply
with ScriptedOpenAIServer([ScriptedReply(text="Fine.")] * 1000) as server:
    print(server.base_url, flush=True)
    time.sleep(3600)
"""


def history(turns: int, characters: int) -> list[dict[str, str]]:
    text = ("word " * (characters // 5 + 1))[:characters]
    return [{"role": ("user", "assistant")[n % 2], "content": text} for n in range(turns)]


async def worst_block_ms(client: httpx.AsyncClient, body: dict[str, object]) -> float:
    gaps: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    response = await client.post("/chat", json=body)
    assert response.status_code == 200, response.text
    done.set()
    await ticker
    return max(gaps) * 1000


async def measure(base_url: str) -> None:
    os.environ["BENCH_OPENAI_KEY"] = "sk-bench"
    executor = ActorExecutor.from_config(
        {
            "name": "history-bench",
            "agent": {
                "type": "llm",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": base_url,
                "api_key_env": "BENCH_OPENAI_KEY",
                "max_retries": 0,
            },
        }
    )
    app = create_app(executor, max_body_bytes=10_000_000)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        await worst_block_ms(client, {"message": "warm up"})
        for characters in (DEFAULT_MAX_TURN_CHARS, 100):
            body = {
                "message": "Hi",
                "history": history(DEFAULT_MAX_HISTORY_TURNS, characters),
            }
            samples = [await worst_block_ms(client, body) for _ in range(REPETITIONS)]
            median = sorted(samples)[len(samples) // 2]
            verdict = "PASS" if median <= TARGET_MS else "MISSED"
            print(
                f"{DEFAULT_MAX_HISTORY_TURNS} turns x {characters} chars: worst loop block, "
                f"median of {REPETITIONS}: {median:.0f} ms (samples {[round(s) for s in samples]}) "
                f"target {TARGET_MS:.0f} ms {verdict}"
            )


def main() -> None:
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        asyncio.run(measure(server.stdout.readline().strip()))
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
