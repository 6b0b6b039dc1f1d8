"""What an MCP server's session keeps from leaking: its credentials out of the log lines that
name request URLs (`Secrets`, `credentials`), and a stdio server's stderr (`ServerStderr`):
shown while the session is up, kept for the error of a server that dies at start, with its exit
code (read from the process the SDK spawned: the one use of an SDK private name), and never
reaching the terminal once we have exited."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TextIO

import httpx2
from mcp.client import stdio as _stdio_module

from cleveractors.errors import hide_values

__all__ = [
    "Secrets",
    "ServerStderr",
    "add_filter",
    "credentials",
    "remove_filter",
    "spawned_processes",
]

_LOGGERS_NAMING_URLS = ("httpx2", "mcp.client.streamable_http")
_STDERR_TAIL_LINES = 10  # a traceback's end: the exception and the lines that raised it
_STDERR_DRAIN_S = 1.0  # a grandchild may hold the pipe open; the server itself is gone


class Secrets(logging.Filter):
    """A session's credentials; as a filter of the loggers that name request URLs, it hides
    them in their records."""

    def __init__(self) -> None:
        super().__init__()
        self.values: tuple[str, ...] = ()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.values:
            message = record.getMessage()
            hidden = hide_values(message, self.values)
            if hidden != message:
                record.msg, record.args = hidden, None
        return True


def add_filter(log_filter: logging.Filter) -> None:
    for name in _LOGGERS_NAMING_URLS:
        logging.getLogger(name).addFilter(log_filter)


def remove_filter(log_filter: logging.Filter) -> None:
    for name in _LOGGERS_NAMING_URLS:
        logging.getLogger(name).removeFilter(log_filter)


def credentials(endpoint: httpx2.URL, headers: dict[str, str]) -> tuple[str, ...]:
    """What must never be shown of an HTTP server: its URL's password and query values (as
    written and decoded: a request log shows them percent-encoded), each header's value and
    that value's last word (the token of `Bearer <token>`)."""
    written = [field.partition("=")[2] for field in endpoint.query.decode().split("&")]
    decoded = [value for _name, value in endpoint.params.multi_items()]
    values = [endpoint.password or "", *written, *decoded]
    for value in headers.values():
        values += [value, value.rpartition(" ")[2]]
    return tuple(value for value in values if value)


def _server_stderr() -> TextIO:
    """Where a stdio server's stderr is shown: ours, unless ours is no file (a test runner or a
    notebook captured it); then the process's own."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ or sys.stderr
    return sys.stderr


class ServerStderr:
    """A stdio server's stderr, through a pipe of ours: each line is shown on our stderr while
    the session runs (not once it is closing: a server being stopped may complain), the last
    lines are kept for the error of a server that dies at start, and nothing the server writes
    after we exit can reach the terminal (the pipe has no reader then)."""

    def __init__(self, secrets: Secrets) -> None:
        self._secrets = secrets
        self._tail: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        self._is_quiet = False
        self._reader: threading.Thread | None = None
        self.processes: list[Any] = []  # the SDK's process, for its exit code
        self.file: TextIO = _server_stderr()

    def __enter__(self) -> ServerStderr:
        read_end, write_end = os.pipe()
        self.file = os.fdopen(write_end, "w", encoding="utf-8", errors="replace")
        self._reader = threading.Thread(
            target=self._forward, args=(read_end, _server_stderr()), daemon=True
        )
        self._reader.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.file.close()  # the reader sees the end once the server has gone too
        if self._reader is not None:
            self._reader.join(timeout=_STDERR_DRAIN_S)

    def quiet(self) -> None:
        self._is_quiet = True

    def _forward(self, read_end: int, shown: TextIO) -> None:
        with os.fdopen(read_end, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                self._tail.append(line.rstrip("\n"))
                if not self._is_quiet:
                    with contextlib.suppress(OSError, ValueError):
                        shown.write(line)
                        shown.flush()

    def last_words(self) -> str:
        """The exit code and last stderr lines of a server whose transport has closed (the
        SDK reaped the process, the reader took the pipe's last lines), as an error's tail."""
        codes = [p.returncode for p in self.processes if p.returncode is not None]
        said = [hide_values(line, self._secrets.values) for line in self._tail if line.strip()]
        tail = f" (exit code {codes[0]})" if codes else ""
        if said:
            tail += "; its stderr ended with:\n  " + "\n  ".join(said)
        return tail


def _remembering(spawn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """The SDK's spawn, keeping its process for the session that asked (the SDK does not give
    it out, and the exit code of a server that died at start is the first thing to know)."""

    async def spawn_and_remember(*args: Any, **kwargs: Any) -> Any:
        process = await spawn(*args, **kwargs)
        processes = spawned_processes.get()
        if processes is not None:
            processes.append(process)
        return process

    return spawn_and_remember


spawned_processes: ContextVar[list[Any] | None] = ContextVar(
    "cleveractors_mcp_spawned", default=None
)
# An SDK without this private name gives no exit codes; its stderr lines are still shown.
_SDK_SPAWN = "_create_platform_compatible_process"
_sdk_spawn = getattr(_stdio_module, _SDK_SPAWN, None)
if _sdk_spawn is not None:
    setattr(_stdio_module, _SDK_SPAWN, _remembering(_sdk_spawn))
