"""`create_app()`: a FastAPI app serving one actor: the chat page at `/` and the chat router."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from cleveractors.executor import ActorExecutor
from cleveractors.result import ResultCallback
from cleveractors.web.router import create_chat_router

__all__ = ["create_app"]

_ACTOR_NAME_SLOT = "__ACTOR_NAME__"


def create_app(
    executor: ActorExecutor,
    *,
    on_usage: ResultCallback | None = None,
    max_body_bytes: int = 1_000_000,
) -> FastAPI:
    """The app `cleveractors serve` runs: the chat page at `/` and the routes of the chat router.

    Args:
        executor: The actor every request runs (shared: an executor is safe for concurrent runs).
        on_usage: Called once per request that ran the actor, with its final result; see
            `create_chat_router`.
        max_body_bytes: Larger request bodies are refused with 413.
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # The executor's MCP sessions live as long as the app serves.
        async with executor:
            yield

    app = FastAPI(title=f"{executor.name} (cleveractors)", lifespan=lifespan)
    app.include_router(
        create_chat_router(lambda: executor, on_usage, max_body_bytes=max_body_bytes)
    )
    page = _chat_page(executor.name)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def chat_page() -> HTMLResponse:
        return HTMLResponse(page)

    return app


def _chat_page(actor_name: str) -> str:
    template = resources.files("cleveractors.web").joinpath("static/index.html")
    return template.read_text(encoding="utf-8").replace(_ACTOR_NAME_SLOT, html.escape(actor_name))
