"""Who may call the routes, and what a caller may learn: API keys, the caller's identity, loopback
names, and the generic error a client gets instead of the upstream text.

- `Authenticate`: the router's `authenticate` argument, `request -> identity or None`, sync or
  async. `api_key_authenticator(keys)` builds one for bearer API keys.
- `current_caller()`: the identity `authenticate` returned, readable from `on_usage`, the
  executor factory and the actor's tools while the request runs.
- `DepsFactory`: `create_app`'s `deps` argument, `(request, caller) -> deps`, sync or async:
  the deps of the request's run (`RunContext.deps`), built per request (`request_deps()`).
- `public_error(error, request_id)`: a failed run as a client sees it (the error type and a
  generic message); the upstream text goes to the `cleveractors.web` logger with the request id.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar

from starlette.requests import Request

from cleveractors.result import ErrorInfo

__all__ = [
    "LOOPBACK_HOSTS",
    "SHUTDOWN_ERROR_TYPE",
    "Authenticate",
    "DepsFactory",
    "api_key_authenticator",
    "bearer_token",
    "current_caller",
    "is_loopback_address",
    "public_error",
    "request_deps",
    "serve_deps",
]

logger = logging.getLogger("cleveractors.web")

Authenticate = Callable[[Request], "str | Awaitable[str | None] | None"]
"""Returns the caller's identity (any string: a user id, a key's name) or None to refuse the
request with 401. It may be a plain function or a coroutine function; it runs on the event loop
before the body is read, so it should be quick (cache what it looks up)."""

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""The Host names a local server answers by default (any port): a page on another name (a DNS
rebinding attack points a name the attacker owns at 127.0.0.1) gets 400."""

SHUTDOWN_ERROR_TYPE = "ServerShuttingDown"
"""The error type a client is told when the server shut down during its run: nothing is wrong
with the request, so it may be sent again (to this server once it is back, or another)."""

DepsFactory = Callable[[Request, "str | None"], object]
"""Builds the deps of a request's run (what its tools' `RunContext.deps` is) from the request
and the caller `authenticate` returned (None without authentication); a plain or a coroutine
function. Called once per request that runs the actor, after authentication; what it returns
lives in memory for that run only (never stored, logged or traced)."""

_caller: ContextVar[str | None] = ContextVar("cleveractors_web_caller", default=None)
_DEPS_STATE = "cleveractors_deps"


def current_caller() -> str | None:
    """The identity `authenticate` returned for the request being served; None without
    authentication or outside a request."""
    return _caller.get()


def set_current_caller(identity: str | None) -> None:
    """Record the request's caller for `current_caller()` (the router does this)."""
    _caller.set(identity)


def api_key_authenticator(keys: Iterable[str]) -> Authenticate:
    """An `authenticate` for bearer API keys (`Authorization: Bearer <key>`).

    Every key is compared, in constant time (`hmac.compare_digest`), so neither the time taken nor
    the key that matched tells an attacker how close a guess was.

    Args:
        keys: The accepted keys; at least one, none empty.

    Returns:
        A callable returning `"key-<n>"` (the matching key's position, from 1, never the key
        itself) or None.

    Raises:
        ValueError: no keys, or an empty one.
    """
    accepted = [key.encode() for key in keys]
    if not accepted or not all(accepted):
        raise ValueError("api keys must be a non-empty list of non-empty keys")

    def authenticate(request: Request) -> str | None:
        offered = (bearer_token(request) or "").encode()
        matched = None
        for position, key in enumerate(accepted, start=1):
            if hmac.compare_digest(offered, key) and matched is None:
                matched = f"key-{position}"
        return matched

    return authenticate


def bearer_token(request: Request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def is_loopback_address(host: str) -> bool:
    """Whether binding HOST (an address or `localhost`) only accepts connections from this
    machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def public_error(error: ErrorInfo, request_id: str) -> ErrorInfo:
    """What a client is told of a failed run: the error type and a generic message naming the
    request. The upstream text (which may quote keys, hosts or prompts) is logged instead; a
    tripped guardrail's name and reason are the application's own words, told as they are."""
    if error.type in (SHUTDOWN_ERROR_TYPE, "GuardrailTripped"):  # quoting nothing upstream
        return error
    logger.error("request %s: the run failed: %s: %s", request_id, error.type, error.message)
    return ErrorInfo(
        type=error.type,
        message=f"the actor's run failed (request {request_id}; the server log has the cause)",
    )


def serve_deps(state: object, factory: DepsFactory | None) -> None:
    """Keep an app's deps factory in its `state`, where `request_deps` finds it."""
    setattr(state, _DEPS_STATE, factory)


async def request_deps(request: Request) -> object:
    """The deps of the request's run: built by the app's `DepsFactory` from the request and its
    caller; None when the app has none."""
    factory: DepsFactory | None = getattr(request.app.state, _DEPS_STATE, None)
    if factory is None:
        return None
    built = factory(request, current_caller())
    return await built if inspect.isawaitable(built) else built
