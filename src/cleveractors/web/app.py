"""`create_app()`: a FastAPI app serving one actor: the chat page at `/` and the chat router.

Safe by default for a server on the user's own machine, where any web page the user visits can
send requests to it: Host names other than the loopback ones are refused (DNS rebinding), no CORS
headers are sent unless origins are named, the API docs are off, and everything the operator's
config puts into HTML is escaped. Nothing is loaded from a CDN.
"""

from __future__ import annotations

import html
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from cleveractors.agents import LLMAgent
from cleveractors.executor import ActorExecutor
from cleveractors.result import ResultCallback
from cleveractors.spend_limits import SpendLimits, SpendLimitsHook
from cleveractors.web.openai_compat import error_response
from cleveractors.web.router import (
    DEFAULT_MAX_HISTORY_TURNS,
    DEFAULT_MAX_TURN_CHARS,
    DEFAULT_SEND_TIMEOUT_S,
    create_chat_router,
)
from cleveractors.web.security import LOOPBACK_HOSTS, Authenticate, DepsFactory, serve_deps

__all__ = ["create_app"]

_ACTOR_NAME_SLOT = "__ACTOR_NAME__"
_SESSIONS_SLOT = "__SESSIONS__"
_ANSWER_SLOT = "__ANSWER_SHAPE__"
_OPENAPI_URL = "/openapi.json"
_OPENAI_PREFIX = "/v1/"
# The chat page's files: the icon, and the Markdown renderer and HTML sanitizer it vendors
# (see static/vendor/README.md), served from the package so the page needs no CDN.
_STATIC = {
    "favicon.svg": "image/svg+xml",
    "vendor/marked.umd.js": "text/javascript",
    "vendor/purify.min.js": "text/javascript",
}
_CACHED = {"Cache-Control": "public, max-age=3600"}


def create_app(
    executor: ActorExecutor,
    *,
    on_usage: ResultCallback | None = None,
    max_body_bytes: int = 1_000_000,
    authenticate: Authenticate | None = None,
    allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
    cors_origins: Sequence[str] = (),
    docs: bool = False,
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    max_history_turns: int = DEFAULT_MAX_HISTORY_TURNS,
    max_turn_chars: int = DEFAULT_MAX_TURN_CHARS,
    spend_limits: SpendLimits | SpendLimitsHook | None = None,
    deps: DepsFactory | None = None,
) -> FastAPI:
    """The app `cleveractors serve` runs: the chat page at `/` and the routes of the chat router.

    With a store on the executor, the chat page keeps its conversation as a stored session (its
    id in the browser's localStorage) and offers "New chat".

    Args:
        executor: The actor every request runs (shared: an executor is safe for concurrent runs).
        on_usage: Called once per request that ran the actor, with its final result; see
            `create_chat_router`.
        max_body_bytes: Larger request bodies are refused with 413.
        authenticate: Who may run the actor (see `create_chat_router`); None lets anyone who
            can reach the server.
        allowed_hosts: The names the `Host` header may carry (any port); others get 400.
            `"*"` allows any, `"*.example.com"` a domain's subdomains.
        cors_origins: Origins (`https://app.example.com`) whose pages may call the routes; none
            by default, so browsers keep other sites' pages from reading the answers.
        docs: Serve the OpenAPI schema at `/openapi.json` and a plain page listing the routes at
            `/docs` (no scripts).
        send_timeout_s: See `create_chat_router`.
        max_history_turns: See `create_chat_router`.
        max_turn_chars: See `create_chat_router`.
        spend_limits: What each authenticated caller may spend (a hook `(caller) -> limits`
            for plans that change, asked at each turn); set on `executor`, in place of its
            own. A caller at the limit gets 429 with `Retry-After`. Needs the executor's store.
        deps: Builds each request's deps (`RunContext.deps` for the actor's tools) from the
            request and the authenticated caller: `(request, caller) -> deps`, sync or async,
            called per request that runs the actor. None gives runs no deps.
    """
    if spend_limits is not None:
        executor.spend_limits = spend_limits

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # The executor's MCP sessions live as long as the app serves.
        async with executor:
            yield

    app = FastAPI(
        title=f"{executor.name} (cleveractors)",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=_OPENAPI_URL if docs else None,
    )
    serve_deps(app.state, deps)
    app.include_router(
        create_chat_router(
            lambda: executor,
            on_usage,
            max_body_bytes=max_body_bytes,
            authenticate=authenticate,
            send_timeout_s=send_timeout_s,
            max_history_turns=max_history_turns,
            max_turn_chars=max_turn_chars,
        )
    )
    app.add_exception_handler(HTTPException, _http_error)
    answer = executor.agent.answer_shape if isinstance(executor.agent, LLMAgent) else "text"
    page = _chat_page(executor.name, keeps_sessions=executor.store is not None, answer=answer)
    static = {name: (_static_file(name), media_type) for name, media_type in _STATIC.items()}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def chat_page() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/static/{name:path}", include_in_schema=False)
    async def static_file(name: str) -> Response:
        """The chat page's own files, from a fixed list (never a path from the request)."""
        if name not in static:
            return Response(status_code=404)
        content, media_type = static[name]
        return Response(content, media_type=media_type, headers=_CACHED)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        content, media_type = static["favicon.svg"]
        return Response(content, media_type=media_type, headers=_CACHED)

    if docs:

        @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
        async def docs_page() -> HTMLResponse:
            return HTMLResponse(_docs_page(app))

    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
            expose_headers=["X-Request-ID"],
        )
    # Added last, so it runs first: a request for a foreign name is refused before anything else.
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    """Routing's refusals (no such route: 404, another method: 405) in OpenAI's error format
    under `/v1/`, which OpenAI clients read; FastAPI's `{"detail": ...}` elsewhere."""
    if not isinstance(exc, HTTPException):  # registered for HTTPException alone
        raise exc
    if not request.url.path.startswith(_OPENAI_PREFIX):
        return await http_exception_handler(request, exc)
    problem = error_response(str(exc.detail), type="invalid_request_error")
    return JSONResponse(
        problem.model_dump(mode="json"), status_code=exc.status_code, headers=exc.headers
    )


def _static_file(name: str) -> bytes:
    return resources.files("cleveractors.web").joinpath(f"static/{name}").read_bytes()


def _chat_page(actor_name: str, *, keeps_sessions: bool, answer: str) -> str:
    template = resources.files("cleveractors.web").joinpath("static/index.html")
    page = template.read_text(encoding="utf-8").replace(_ACTOR_NAME_SLOT, html.escape(actor_name))
    # With a store, the page keeps a session id and lets the server hold the conversation.
    page = page.replace(_SESSIONS_SLOT, "on" if keeps_sessions else "off")
    # A typed actor's page shows its object as a card, a stored turn's too.
    return page.replace(_ANSWER_SLOT, answer)


def _docs_page(app: FastAPI) -> str:
    """The routes, from the OpenAPI schema, as a page without scripts; every text is escaped."""
    schema = app.openapi()
    rows = "".join(
        f"<tr><td>{html.escape(method.upper())}</td><td><code>{html.escape(path)}</code></td>"
        f"<td>{html.escape(str(operation.get('summary', '')))}</td></tr>"
        for path, operations in schema.get("paths", {}).items()
        for method, operation in operations.items()
    )
    title = html.escape(str(schema["info"]["title"]))
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"</head><body><h1>{title}</h1><p>The OpenAPI schema: "
        f'<a href="{_OPENAPI_URL}">{_OPENAPI_URL}</a></p>'
        f"<table><tr><th>Method</th><th>Path</th><th>Summary</th></tr>{rows}</table></body></html>"
    )
