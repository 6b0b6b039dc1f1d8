"""`create_chat_router()`: an actor behind FastAPI routes, streamed as Server-Sent Events.

    router = create_chat_router(lambda: executor, on_usage=bill)
    app.include_router(router)

- `POST /chat` takes `{"message": ..., "history": [{"role", "content"}]}` and streams the run's
  typed events, one SSE message per event named by its `kind`, ending with `run_finished`,
  `run_paused` or `run_failed`, each carrying the `ExecutionResult` with the usage.
  With a store, `{"message": ..., "session_id": ...}` continues (or starts) a stored session
  instead: the server holds its history (a `history` beside it is a 422). A session another run
  holds ends the stream at once with `run_failed` (`error.type` "SessionBusyError"); another
  caller's session with `run_failed` "SessionNotFoundError". `GET` / `DELETE /sessions/{id}`
  read and remove the caller's sessions (`cleveractors.web.sessions`).
  A run that calls a tool needing a person's approval streams `tool_approval_requested` for
  each such call and ends with `run_paused` (its result lists `pending_approvals`).
- `POST /runs/{run_id}/decisions` takes `{"decisions": [...]}` (each an `ApprovalDecision`'s
  JSON) for the caller's paused run and streams the resumed segment like `/chat`: first
  `run_started` (its `resumed_from` the paused run's id), a `tool_call_decided` per decision.
  Refused before anything runs: 404 for a run that is not the caller's paused run (another
  caller's included, so its existence is never revealed), 409 for one already resumed (or a
  call that expired, or a run whose session another request holds), 422 for a decision that
  does not fit its call; nothing is billed, and `on_usage` does not hear of it.
  `GET /runs/{run_id}` shows a run's status and pending approvals (`cleveractors.web.runs`).
- `POST /v1/chat/completions` speaks OpenAI's Chat Completions format, streamed or not (see
  `cleveractors.web.openai_compat` for how a conversation maps to an actor turn). The actor's tool
  rounds run here, server-side; the client only sees text and usage. The format has no way to
  ask for an approval: a tool call that needs one is never run there; the model reads it as
  declined ("approval is not available on this endpoint").

Every request that starts a run owns it (`cleveractors.web.turns`): however the request ends (the
answer is complete, the model failed, the client hung up or stopped reading for `send_timeout_s`,
the server shuts down), the run is stopped if it is still going, its usage settled, and then
`on_usage` called with the final result, once. A stream the server cancels when it shuts down
ends with the route's failure event (error type `ServerShuttingDown`: send the turn again), and
the app's lifespan ends only after the last run has settled.

With a store, a run request may carry an `Idempotency-Key` header: sent again (same caller,
same body) after the answer, it replays the first run's answer under the same `X-Run-Id`, and
`on_usage` does not hear of it again; while the first run goes on it is 409; with another body,
or on a server without a store, 422 (errors name the header). A failed run frees its key.

Before anything runs, a request is checked (`cleveractors.web.requests`) in this order: the
caller (`authenticate`, 401), the Content-Type (`application/json`, 415), the body size (413),
its shape (422), and the history limits (`max_history_turns`, `max_turn_chars`; 422 naming the
limit).

A failed run tells the client its error type and a generic message with the request's id (also
in the `X-Request-ID` header); the upstream text, which may quote keys or hosts, goes to the
`cleveractors.web` logger with that id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter

from cleveractors.executor import ActorExecutor
from cleveractors.result import ResultCallback
from cleveractors.web.ai_sdk import AI_SDK
from cleveractors.web.chat import ChatRequest, ChatTurn, DecisionsRequest, add_chat_routes
from cleveractors.web.completions import add_completion_routes, add_model_routes
from cleveractors.web.frontends import add_frontend_route, add_missing_extra_route
from cleveractors.web.requests import (
    DEFAULT_MAX_HISTORY_TURNS,
    DEFAULT_MAX_TURN_CHARS,
    RequestPolicy,
    caller_check,
)
from cleveractors.web.runs import add_run_routes
from cleveractors.web.security import Authenticate
from cleveractors.web.sessions import add_session_routes
from cleveractors.web.turns import DEFAULT_SEND_TIMEOUT_S, RunSettings

__all__ = [
    "DEFAULT_MAX_HISTORY_TURNS",
    "DEFAULT_MAX_TURN_CHARS",
    "DEFAULT_SEND_TIMEOUT_S",
    "ChatRequest",
    "ChatTurn",
    "DecisionsRequest",
    "create_chat_router",
]


def create_chat_router(
    executor_factory: Callable[[], ActorExecutor],
    on_usage: ResultCallback | None = None,
    *,
    max_body_bytes: int = 1_000_000,
    authenticate: Authenticate | None = None,
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    max_history_turns: int = DEFAULT_MAX_HISTORY_TURNS,
    max_turn_chars: int = DEFAULT_MAX_TURN_CHARS,
) -> APIRouter:
    """Routes that run an actor: `POST /chat` (typed events), `POST /runs/{id}/decisions` (a
    paused run resumed, typed events), `GET /runs/{id}`, `POST /v1/chat/completions`,
    `GET /v1/models` (and `/v1/models/{id}`), which list the actor as the one model, and
    `GET` / `DELETE /sessions/{id}` for an executor with a store.

    Args:
        executor_factory: Returns the executor for a request; called once per request, so it may
            return one shared executor or pick one per request.
        on_usage: Called exactly once per request that ran the actor, with its final
            `ExecutionResult`: also when the model failed, or the client disconnected mid-stream
            (then the run is cancelled and the result holds what was spent, `cancelled=True`).
            A run that paused for an approval and its resumption are two requests, each heard
            of once, with its own segment's usage (no token in both).
            It runs on the event loop: hand slow work (a billing API call) to a queue or task.
            `cleveractors.web.current_caller()` tells whom to bill.
        max_body_bytes: Larger request bodies are refused with 413, before they are parsed.
        authenticate: `request -> identity or None`, a plain or a coroutine function, called
            before the body is read; None refuses the request with 401. Without it every caller
            is accepted. `api_key_authenticator(keys)` makes one for bearer API keys.
        send_timeout_s: A streaming client that takes no data for this long (its socket buffers
            are full) is dropped; its run is cancelled and billed.
        max_history_turns: More history turns (earlier messages) are refused with 422.
        max_turn_chars: A message or history turn with more characters is refused with 422.

    Returns:
        An `APIRouter` to include in a FastAPI app (`include_router`, which also makes the app's
        lifespan wait, when it ends, until the router's last run has settled). Bad requests
        get 422 with a message; a body that is not `application/json` gets 415.
    """
    policy = RequestPolicy(authenticate, max_body_bytes, max_history_turns, max_turn_chars)
    runs = RunSettings(executor_factory, on_usage, send_timeout_s)
    caller_of = caller_check(policy)

    @asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        yield
        # A server shutting down cancels the streams still running when its grace period ends;
        # they bill their runs into the store, which the app closes only after this returns.
        await runs.in_flight.settled()

    router = APIRouter(lifespan=lifespan)
    add_chat_routes(router, runs, policy)
    add_run_routes(router, executor_factory, caller_of)
    add_completion_routes(router, runs, policy)
    add_model_routes(router, executor_factory, policy)
    add_frontend_route(router, AI_SDK, runs, policy)
    _add_ag_ui_route(router, runs, policy)
    add_session_routes(router, executor_factory, caller_of)
    return router


def _add_ag_ui_route(router: APIRouter, runs: RunSettings, policy: RequestPolicy) -> None:
    """`POST /ag-ui`, or its 501 naming the `ag-ui` extra when that is missing."""
    try:
        from cleveractors.web.ag_ui import AG_UI  # the ag-ui extra is optional
    except ModuleNotFoundError as missing:
        add_missing_extra_route(
            router, "/ag-ui", protocol="AG-UI", extra="ag-ui", module=str(missing.name)
        )
    else:
        add_frontend_route(router, AG_UI, runs, policy)
