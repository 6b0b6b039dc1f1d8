"""The web extra (`pip install 'cleveractors[web]'`): an actor behind FastAPI routes.

- `create_chat_router(executor_factory, on_usage=None, authenticate=None, ...)`: `POST /chat`
  (the run's typed events as Server-Sent Events; a run that waits for a person's approval ends
  with `run_paused`), `POST /runs/{id}/decisions` (the paused run resumed, streamed the same
  way), `GET /runs/{id}` (its status and pending approvals, for its owner only) and
  `POST /v1/chat/completions` (OpenAI-compatible; tool calls that need approval are declined
  there), for your own app.
- `create_app(executor)`: a ready app with both routes and a chat page at `/`; what
  `cleveractors serve` runs. Loopback Host names only, no CORS, no API docs unless asked.
  `create_app(executor, deps=...)` builds each request's deps (a `DepsFactory`).
- `api_key_authenticator(keys)`: an `authenticate` for bearer API keys; `current_caller()` the
  identity it returned for the request being served.
"""

try:
    import fastapi  # noqa: F401  # only checked for here
    import sse_starlette  # noqa: F401
except ImportError as exc:
    # ModuleNotFoundError naming the missing module, so callers can tell it from other errors.
    raise ModuleNotFoundError(
        f"cleveractors.web needs the web extra ({exc.name} is missing): "
        "pip install 'cleveractors[web]'",
        name=exc.name,
    ) from exc

from cleveractors.web.app import create_app
from cleveractors.web.router import ChatRequest, ChatTurn, create_chat_router
from cleveractors.web.security import (
    Authenticate,
    DepsFactory,
    api_key_authenticator,
    current_caller,
)

__all__ = [
    "Authenticate",
    "ChatRequest",
    "ChatTurn",
    "DepsFactory",
    "api_key_authenticator",
    "create_app",
    "create_chat_router",
    "current_caller",
]
