"""`cleveractors serve`: an actor over HTTP, with a chat page."""

from __future__ import annotations

import copy
import ipaddress
import os
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from cleveractors.cli.actor import build_executor, export_telemetry
from cleveractors.cli.command import ACTOR_ARGUMENT, Command, app, fail, fail_configured, out
from cleveractors.errors import ConfigurationError
from cleveractors.executor import ActorExecutor

_WEB_EXTRA_MODULES = {"fastapi", "sse_starlette", "starlette", "uvicorn"}
_MAX_PORT = 65535

_Host = Annotated[str, typer.Option(help="Address to listen on.", metavar="HOST")]
_Port = Annotated[int, typer.Option(help="Port to listen on (1-65535).", metavar="PORT")]
_ApiKeysEnv = Annotated[
    str | None,
    typer.Option(
        help="Environment variable holding the accepted API keys, comma-separated; "
        "clients send one as 'Authorization: Bearer <key>'.",
        metavar="VAR",
    ),
]
_InsecureNoAuth = Annotated[
    bool,
    typer.Option(
        "--insecure-no-auth",
        help="Serve a non-loopback address without API keys (anyone may run it).",
    ),
]
_AllowedHost = Annotated[
    list[str] | None,
    typer.Option(
        help="A Host name clients may use besides the loopback ones (repeatable; "
        "'*' allows any, e.g. behind a proxy that checks it).",
        metavar="NAME",
    ),
]
_CorsOrigin = Annotated[
    list[str] | None,
    typer.Option(help="An origin whose web pages may call the API (repeatable).", metavar="ORIGIN"),
]
_Docs = Annotated[
    bool, typer.Option("--docs", help="Serve /openapi.json and a route list at /docs.")
]
_SendTimeoutS = Annotated[
    float,
    typer.Option(
        help="Drop a streaming client that takes no data for this many seconds.",
        metavar="SECONDS",
    ),
]
_MaxHistoryTurns = Annotated[
    int, typer.Option(help="Refuse requests with more earlier turns (422).", metavar="N")
]
_MaxTurnChars = Annotated[
    int,
    typer.Option(help="Refuse a message or turn with more characters (422).", metavar="N"),
]
_Store = Annotated[
    str | None,
    typer.Option(
        help="Keep sessions and the usage ledger in this database (sqlite:///path.db, "
        "postgresql://...); overrides the actor's store.url.",
        metavar="URL",
    ),
]
_GracefulTimeout = Annotated[
    int,
    typer.Option(
        help="On SIGTERM or Ctrl-C, let running requests finish for this many seconds, "
        "then cancel them (their usage is still billed).",
        metavar="SECONDS",
    ),
]


@app.command(cls=Command, short_help="Serve an actor over HTTP, with a chat page.")
def serve(
    actor: Annotated[Path, ACTOR_ARGUMENT],
    host: _Host = "127.0.0.1",
    port: _Port = 8000,
    api_keys_env: _ApiKeysEnv = None,
    insecure_no_auth: _InsecureNoAuth = False,
    allowed_host: _AllowedHost = None,
    cors_origin: _CorsOrigin = None,
    docs: _Docs = False,
    send_timeout_s: _SendTimeoutS = 30.0,
    max_history_turns: _MaxHistoryTurns = 200,
    max_turn_chars: _MaxTurnChars = 16_000,
    store: _Store = None,
    graceful_timeout: _GracefulTimeout = 10,
) -> None:
    """Serve ACTOR over HTTP: the chat page at /, /chat (SSE), /v1/chat/completions, /v1/models;
    with a store (`--store URL` or `store:` in the config) also stored sessions.

    Only loopback Host names are answered unless --allowed-host adds more; a non-loopback
    --host needs --api-keys-env (or --insecure-no-auth).
    """
    if not 1 <= port <= _MAX_PORT:
        fail(f"--port must be between 1 and {_MAX_PORT}, got {port}", code=2)
    if graceful_timeout < 0:
        fail(f"--graceful-timeout must be 0 or more seconds, got {graceful_timeout}", code=2)
    try:
        import uvicorn
        from sse_starlette.sse import AppStatus

        from cleveractors.web.app import create_app
        from cleveractors.web.security import (
            LOOPBACK_HOSTS,
            api_key_authenticator,
            is_loopback_address,
        )
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _WEB_EXTRA_MODULES:
            raise
        fail(f"serve needs {exc.name!r}: pip install 'cleveractors[web]'", code=2)
    keys = _api_keys(api_keys_env)
    if not keys and not insecure_no_auth and not is_loopback_address(host):
        fail(
            f"refusing to serve {host} without API keys: anyone who can reach it could run the "
            "actor; give --api-keys-env VAR (or --insecure-no-auth)",
            code=2,
        )
    try:
        executor = build_executor(actor, store_url=store)
    except ConfigurationError as exc:
        fail_configured(exc)
    app_ = create_app(
        executor,
        authenticate=api_key_authenticator(keys) if keys else None,
        allowed_hosts=[*LOOPBACK_HOSTS, *_bound_name(host), *(allowed_host or [])],
        cors_origins=cors_origin or [],
        docs=docs,
        send_timeout_s=send_timeout_s,
        max_history_turns=max_history_turns,
        max_turn_chars=max_turn_chars,
    )
    export_telemetry(app_)
    listening = _listen(host, port)
    shown_host = f"[{host}]" if ":" in host else host
    out.print(f"Serving {executor.name} on http://{shown_host}:{port} (Ctrl-C stops)")
    out.print(_store_line(executor))
    # On SIGTERM or Ctrl-C uvicorn stops accepting, waits for running requests up to the grace
    # period, cancels the rest, runs the lifespan's end (the MCP servers, the store) and exits
    # by the signal it got. sse-starlette would cut every stream at once: it waits too.
    AppStatus.enable_automatic_graceful_drain = False  # its disable_...() is untyped
    config_ = uvicorn.Config(
        app_,
        host=host,
        port=port,
        timeout_graceful_shutdown=graceful_timeout,
        log_config=_serve_log_config(),
    )
    uvicorn.Server(config_).run(sockets=[listening])


def _serve_log_config() -> dict[str, Any]:
    """uvicorn's logging with the time on every line, the library's lines among them: a
    server's log is read later, so each line says when and how bad (`INFO:`, `WARNING:`)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    for formatter in config["formatters"].values():
        formatter["fmt"] = "%(asctime)s " + formatter["fmt"]
    config["formatters"]["library"] = {
        **config["formatters"]["default"],
        "fmt": "%(asctime)s %(levelprefix)s %(name)s: %(message)s",
    }
    config["handlers"]["library"] = {**config["handlers"]["default"], "formatter": "library"}
    config["loggers"]["cleveractors"] = {
        "handlers": ["library"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def _bound_name(host: str) -> list[str]:
    """A specific address served is a name clients use; a wildcard (0.0.0.0, ::) is not."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return [host]
    if address.is_unspecified:
        return []
    return [f"[{host}]" if address.version == 6 else host]


def _api_keys(variable: str | None) -> list[str]:
    """The keys in $VARIABLE (comma-separated); none without a variable."""
    if variable is None:
        return []
    keys = [key.strip() for key in os.environ.get(variable, "").split(",") if key.strip()]
    if not keys:
        fail(f"--api-keys-env: ${variable} is not set or holds no keys", code=2)
    return keys


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound here so that a busy port is one line, not uvicorn's trace."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        fail(f"cannot listen on {host}:{port}: {reason}")


def _store_line(executor: ActorExecutor) -> str:
    """Which store a server keeps its sessions and ledger in, its password hidden."""
    if executor.store is None:
        return "no store: sessions are not kept (the chat page sends the history)"
    return f"store: {executor.store.shown_url}"
