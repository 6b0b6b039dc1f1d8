"""ACTOR and its store, made ready for a command: the config with the command line's
overrides, the executor opened, the logs and the telemetry the options ask for."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar
from urllib.parse import urlsplit

import typer
from langchain_core.exceptions import ModelConnectionError, ModelTimeoutError

from cleveractors.cli.command import fail
from cleveractors.cli.render import EventRenderer
from cleveractors.config import ActorConfig, StoreConfig, load_actor_config, read_actor_source
from cleveractors.errors import ConfigurationError, redact_url
from cleveractors.executor import ActorExecutor

if TYPE_CHECKING:  # the store and web extras are imported when a command needs them
    from fastapi import FastAPI

    from cleveractors.store import SqlStore

_Result = TypeVar("_Result")

BASE_URL_OPTION = typer.Option(
    help="Send an openai actor's requests to this server.", metavar="URL"
)
VERBOSE_OPTION = typer.Option("--verbose", "-v", help="Also show the library's log lines.")


def build_executor(
    actor: Path, *, base_url: str | None = None, store_url: str | None = None
) -> ActorExecutor:
    """ACTOR's executor, with what the command line overrides, checked in one pass (every
    problem of the file at once, as `validate` reports them)."""
    source = _actor_source(actor, base_url=base_url, store_url=store_url)
    return ActorExecutor.from_config(source, origin=str(actor), config_dir=actor.parent)


def _actor_source(
    actor: Path, *, base_url: str | None, store_url: str | None
) -> Path | dict[str, Any]:
    """ACTOR's raw config, with `--base-url` and `--store` put in before it is checked."""
    if base_url is None and store_url is None:
        return actor
    raw = read_actor_source(actor)
    if not isinstance(raw, Mapping):
        return actor  # the check reports a file that is no mapping as such
    source = dict(raw)
    if base_url is not None:
        agent = source.get("agent")
        agent = agent if isinstance(agent, Mapping) else {}
        provider = agent.get("provider")
        if provider != "openai":
            raise ConfigurationError(
                f"--base-url: actor {source.get('name')!r} uses provider {provider!r}; "
                "a base URL applies to provider 'openai' only"
            )
        source["agent"] = {**agent, "base_url": base_url}
    if store_url is not None:
        store = source.get("store")
        source["store"] = {
            **(store if isinstance(store, Mapping) else {}),
            "url": typed_store_url(store_url),
        }
    return source


def typed_store_url(url: str) -> str:
    """A relative SQLite path typed on the command line is from the working directory, like any
    path typed there (one in the file is from the file's folder)."""
    try:
        from cleveractors.store import resolve_sqlite_path
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"--store: {exc}") from None
    return resolve_sqlite_path(url, Path.cwd())


async def opened(executor: ActorExecutor, work: Callable[[], Awaitable[_Result]]) -> _Result:
    """Run `work` with the executor open (its MCP servers connected), closing it after."""
    _cancel_on_sigterm()
    async with executor:
        return await work()


def _cancel_on_sigterm() -> None:
    """SIGTERM (`timeout`, `docker stop`, systemd, Kubernetes) stops the work as Ctrl-C does:
    the task is cancelled, so the run's usage is settled and the MCP servers are closed; outside
    the event loop, SIGTERM keeps its default (nothing has run yet)."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


def check_run_options(
    message: str, base_url: str | None, *, events: bool, as_json: bool, no_stream: bool
) -> None:
    """Wrong usage ends before anything runs: exit 2, one line, no usage table."""
    if events and (as_json or no_stream):
        fail("--events cannot be combined with --json or --no-stream", code=2)
    if not message.strip():
        fail("MESSAGE is empty: say something to the actor", code=2)
    if base_url is not None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            fail(f"--base-url must be an http:// or https:// URL, got {base_url!r}", code=2)


def show_library_logs(verbose: bool, view: EventRenderer | None) -> None:
    """The live output already shows what the log says (a tool failed, a call was skipped), so
    the library's log lines appear only with --verbose, on stderr, written around the view."""
    if not verbose:
        return
    library = logging.getLogger("cleveractors")
    handler = _LogAroundView(view)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    library.addHandler(handler)
    library.setLevel(logging.INFO)


class _LogAroundView(logging.StreamHandler[TextIO]):
    """Writes log records to stderr, never into the middle of a streamed line of text."""

    def __init__(self, view: EventRenderer | None) -> None:
        super().__init__(sys.stderr)
        self._view = view

    def emit(self, record: logging.LogRecord) -> None:
        if self._view is None:
            super().emit(record)
        else:
            self._view.write_above(lambda: super(_LogAroundView, self).emit(record))


def run_error_line(exc: BaseException, actor: Path, base_url: str | None) -> str:
    """The error line of a failed run. A model that cannot be reached is named by the URL it
    was sent to (never the key): the model's own error says only "Connection error."."""
    line = f"{type(exc).__name__}: {exc}"
    url = base_url or load_actor_config(actor).agent.base_url
    if url is not None and isinstance(exc, ModelConnectionError | ModelTimeoutError):
        line += f" (while talking to {redact_url(url)})"
    return line


def export_telemetry(web_app: FastAPI | None = None) -> None:
    """Send spans and metrics where the `OTEL_*` variables say (`cleveractors._otel_setup`),
    flushed at exit; nothing is imported or set when they ask for no export. A `serve` app's
    request spans become the parents of its runs."""
    from cleveractors._otel_setup import start_from_env

    try:
        start_from_env(app=web_app)
    except ConfigurationError as exc:
        fail(str(exc), code=2)


def with_store(actor: Path, url: str | None) -> ActorConfig:
    """ACTOR's config, its store at URL when one is given."""
    config = load_actor_config(actor)
    if url is None:
        return config
    store = (config.store or StoreConfig()).model_copy(update={"url": typed_store_url(url)})
    return config.model_copy(update={"store": store})


def open_store(actor: Path, url: str | None) -> SqlStore:
    """The actor's existing store (its config's `store:`, at URL when given), not yet opened:
    these commands look after a store, so a missing SQLite file is an error, never created."""
    try:
        from cleveractors.store import SqlStore
    except ModuleNotFoundError as exc:
        fail(str(exc), code=2)
    try:
        config = with_store(actor, url)
        if config.store is None:
            raise ConfigurationError(
                f"{actor}: the actor has no store: add `store:` to its config or pass --store URL"
            )
        return SqlStore.from_config(config.store, config_dir=actor.parent, should_create=False)
    except ConfigurationError as exc:
        fail(str(exc))


async def in_store(store: SqlStore, work: Callable[[], Awaitable[_Result]]) -> _Result:
    async with store:
        return await work()
