"""`McpSession`: one MCP server's long-lived session, built on the official `mcp` SDK's `Client`.

The SDK's sessions live in anyio task groups and cancel scopes, which must be entered and left
by the same task. So each session has an owner task that enters the client, waits until it is
told to stop, and leaves it; tool calls come from the agent's tasks and only send requests.
Cancelling a call sends the MCP cancellation notification (the SDK does that for a caller that
stops waiting), so `timeout_s` and a cancelled run both reach the server.

A server's credentials (its URL's userinfo and query values, its header values) never reach an
error, an event or a log line: the SDK is given the URL without userinfo (which becomes the HTTP
client's basic auth, as httpx would make it), every failure is told by `describe_failure` with
those values hidden, and while the session is open the loggers that name request URLs (httpx2
at INFO, the SDK at DEBUG) have them hidden too.

A stdio server's stderr goes through a pipe of ours (`ServerStderr`, in `_mcp_guards` with
the hiding of credentials): shown on our stderr while the session is up, kept for the error of a
server that dies at start (with its exit code), and never reaching the terminal once we have
exited.

A server with `caller_headers` gets, on each call, the headers that function builds from the
calling run's `RunContext`. The session is shared by every run, so the headers travel with the
call itself: the call carries a fresh random token in its `_meta`, and the HTTP client's request
hook adds the headers kept under that token to the one request that carries it; the token is
dropped when the call returns. No other request (another caller's call, the session's own)
ever sees them.

A connection found lost (the server died, its stream dropped) is reconnected once, on the next
call. A call whose HTTP session had expired is sent again once on the new session: the server
never ran it. A call that was running when the connection dropped is not resent; the model
reads the error.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import secrets
import sys
from collections import Counter
from contextlib import AsyncExitStack
from functools import partial
from importlib.metadata import version
from typing import Any, cast

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, Subscription, SubscriptionLost
from mcp.shared.exceptions import MCPError

from cleveractors._config_tools import CallerHeaders
from cleveractors.config import McpServer
from cleveractors.context import RunContext
from cleveractors.errors import (
    ConfigurationError,
    McpServerError,
    describe_failure,
)
from cleveractors.tools._handlers import caller_headers_of
from cleveractors.tools._mcp_guards import (
    Secrets,
    ServerStderr,
    add_filter,
    credentials,
    remove_filter,
    spawned_processes,
)
from cleveractors.tools.spec import Tool

__all__ = ["McpCallError", "McpSession"]

logger = logging.getLogger(__name__)

_MAX_LIST_PAGES = 100  # a server whose tools/list pages never end cannot hang the connect
_SESSION_TERMINATED = "Session terminated"  # the SDK's words for an HTTP 404 on a known session
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: a response may stream long
_THIS_PYTHON = ("python", "python3")
CONTEXT_ARGUMENT = "cleveractors/context"
"""Where a tool of a server with `caller_headers` receives the run's context: no argument a
server's tool takes, and one the model cannot set (it is refused as unknown)."""
_CALLER_META = "dev.cleveractors/caller"
"""The `_meta` key of a call's token: the request hook finds the call's headers by it."""


class McpCallError(Exception):
    """An MCP tool call failed; the message is what the model reads (the server named)."""

    def __init__(self, message: str, *, is_session_expired: bool = False) -> None:
        super().__init__(message)
        self.is_session_expired = is_session_expired


class McpSession:
    """One server: its session, owned by a dedicated task, and the tools it offers."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.source = f"mcp server {server.name!r}"
        self.tools: list[Tool] = []
        self._client: Client | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._is_lost = False
        self._is_list_stale = False
        self._has_unreported_list = False
        self._reconnecting = asyncio.Lock()
        self._secrets = Secrets()
        self._stderr = ServerStderr(self._secrets)
        self._caller_headers = _caller_headers(server)
        self._headers_by_token: dict[str, dict[str, str]] = {}
        """The headers of the calls in flight, by the token each call carries."""

    # -- lifecycle -----------------------------------------------------------------------------

    async def connect(self) -> Client:
        """Open the session and fetch the tools; returns the session's client.

        Raises:
            McpServerError: the server cannot be reached or its tool list cannot be used.
            ConfigurationError: a variable named in env or headers is not set.
        """
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        add_filter(self._secrets)
        self._is_lost = False
        self._owner = asyncio.create_task(
            self._own(ready, self._stop), name=f"cleveractors {self.source}"
        )
        try:
            self._client = client = await ready
            self.tools = await self._fetch_tools(client)
        except BaseException:
            await self.close()
            raise
        self._is_list_stale = False
        self._has_unreported_list = True
        logger.info("%s: connected, %d tool(s)", self.source, len(self.tools))
        return client

    @property
    def is_open(self) -> bool:
        """Whether the session holds a connection, or is making one (a stdio server may run)."""
        return self._owner is not None and not self._owner.done()

    def _usable_client(self) -> Client | None:
        """The client, if calls can go out now: connected, not found lost, and the owner task
        still holds the session (an event loop that ended took it down)."""
        owner = self._owner
        if self._is_lost or owner is None or owner.done():
            return None
        return self._client

    async def close(self) -> None:
        """Close the session (a stdio server is terminated, its process group with it)."""
        owner, client = self._owner, self._client
        self._owner, self._client = None, None
        if owner is None or owner.done():
            remove_filter(self._secrets)
            return
        self._stop.set()
        self._stderr.quiet()  # what a server says while it is stopped is not news
        if client is None:
            # Still connecting: the owner is not waiting for `_stop` yet, and a server that never
            # answers must not hold up a stop. Cancelling it unwinds the SDK's scopes in its task.
            owner.cancel()
        await asyncio.wait([owner])  # the owner leaves the SDK's scopes in its own task
        remove_filter(self._secrets)

    async def _own(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(await self._new_client(stack))
                await self._follow_list_changes(stack, client, stop)
                ready.set_result(client)
                await stop.wait()
        except ConfigurationError as exc:
            ready.set_exception(exc)
        except Exception as exc:  # the SDK and its transports raise many types, some in groups
            if not ready.done():
                reason = self._describe(exc) + self._stderr.last_words()
                ready.set_exception(McpServerError(f"{self.source}: cannot connect: {reason}"))
            else:
                logger.warning(
                    "%s: closing the session failed: %s", self.source, self._describe(exc)
                )
        finally:
            if not ready.done():  # cancelled while connecting
                ready.cancel()

    async def _new_client(self, stack: AsyncExitStack) -> Client:
        info = types.Implementation(name="cleveractors", version=version("cleveractors"))
        if self.server.url is not None:
            headers = self.server.resolved_headers()
            endpoint = httpx2.URL(self.server.url)
            self._secrets.values = credentials(endpoint, headers)
            auth = None
            if endpoint.userinfo:
                auth = httpx2.BasicAuth(endpoint.username, endpoint.password)
            hooks = {"request": [self._add_caller_headers]} if self._caller_headers else {}
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=headers, auth=auth, timeout=_HTTP_TIMEOUT, event_hooks=hooks
                )
            )
            bare = str(endpoint.copy_with(userinfo=b""))
            web = streamable_http_client(bare, http_client=http)
            return Client(web, message_handler=self._on_message, client_info=info, cache=None)
        # The config gives a command whenever it gives no url.
        program, *arguments = self.server.command or ()
        # The SDK starts the server in a new session (its own process group) and kills that
        # group on close; a child without our environment gets only what env names.
        env = self.server.resolved_env()
        self._secrets.values = tuple(value for value in env.values() if value)
        stdio = StdioServerParameters(
            command=_program(program), args=arguments, env=env, cwd=self.server.cwd
        )
        self._stderr = stack.enter_context(ServerStderr(self._secrets))
        spawned_processes.set(self._stderr.processes)
        transport = stdio_client(stdio, errlog=self._stderr.file)
        return Client(transport, message_handler=self._on_message, client_info=info, cache=None)

    async def _follow_list_changes(
        self, stack: AsyncExitStack, client: Client, stop: asyncio.Event
    ) -> None:
        """On a 2026 session, subscribe to tool-list changes; its end tells us the server went.

        Earlier protocol versions send `notifications/tools/list_changed` unasked (see
        `_on_message`)."""
        try:
            subscription = await stack.enter_async_context(client.listen(tools_list_changed=True))
        except (ListenNotSupportedError, MCPError):  # an earlier protocol, or no such support
            return
        follower = asyncio.create_task(self._read_changes(subscription, stop))
        stack.push_async_callback(_cancel_and_wait, follower)

    async def _read_changes(self, subscription: Subscription, stop: asyncio.Event) -> None:
        try:
            async for _change in subscription:
                self._is_list_stale = True
        except SubscriptionLost:
            pass
        if not stop.is_set():
            logger.warning(
                "%s: the connection was lost; reconnecting on the next call", self.source
            )
            self._is_lost = True

    async def _on_message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._is_list_stale = True

    # -- tools ---------------------------------------------------------------------------------

    async def refresh_tools(self) -> bool:
        """Refetch the tools if the server announced a change; True when `tools` is new since
        the last call (also after a connect or reconnect)."""
        client = self._usable_client()
        if self._is_list_stale and client is not None:
            self._is_list_stale = False
            try:
                self.tools = await self._fetch_tools(client)
                self._has_unreported_list = True
            except Exception as exc:  # keep the tools we have; the next round tries again
                self._is_list_stale = True
                logger.warning(
                    "%s: refreshing its tools failed: %s", self.source, self._describe(exc)
                )
        is_new, self._has_unreported_list = self._has_unreported_list, False
        return is_new

    async def _fetch_tools(self, client: Client) -> list[Tool]:
        listed: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        allowed = self.server.tools
        if allowed is not None:
            missing = sorted(set(allowed) - {tool.name for tool in listed})
            if missing:
                raise McpServerError(
                    f"{self.source} does not offer the allowed tool(s): {', '.join(missing)}"
                )
            listed = [tool for tool in listed if tool.name in allowed]
        return [self._as_tool(tool) for tool in listed]

    def _as_tool(self, listed: types.Tool) -> Tool:
        name = f"{self.server.name}_{listed.name}" if self.server.prefix else listed.name
        per_caller = self._caller_headers is not None
        try:
            return Tool(
                name=name,
                description=listed.description or "",
                parameters=listed.input_schema,
                run=partial(self._call_as_caller if per_caller else self.call, listed.name),
                context_parameters=(CONTEXT_ARGUMENT,) if per_caller else (),
                timeout_s=self.server.timeout_s,
                concurrent=self.server.concurrent,
                source=self.source,
                needs_approval=self.server.needs_approval(listed.name),
            )
        except ConfigurationError as exc:
            raise McpServerError(f"{self.source}: {exc}") from None

    # -- calls ---------------------------------------------------------------------------------

    async def call(
        self, tool_name: str, arguments: dict[str, Any], *, token: str | None = None
    ) -> str:
        """Call one tool; its result as the text the model reads. A `token` names the call's
        own headers (see `_call_as_caller`).

        Raises:
            McpCallError: the server reported an error, refused the call, or cannot be reached.
        """
        try:
            result = await self._send(tool_name, arguments, token)
        except McpCallError as error:
            if not error.is_session_expired:
                raise
            result = await self._send(tool_name, arguments, token)
        return _output(result, self.source)

    async def _call_as_caller(self, tool_name: str, arguments: dict[str, Any]) -> str:
        """Call one tool with the headers `caller_headers` builds from the run's context."""
        arguments = dict(arguments)
        context: RunContext[Any] = arguments.pop(CONTEXT_ARGUMENT)
        headers = await _headers_for(self._caller_headers, context, self.source)
        token = secrets.token_urlsafe(16)
        self._headers_by_token[token] = headers
        try:
            return await self.call(tool_name, arguments, token=token)
        finally:
            del self._headers_by_token[token]

    async def _add_caller_headers(self, request: httpx2.Request) -> None:
        """The request hook: a call's own headers on the one request that carries its token."""
        if request.method != "POST" or not self._headers_by_token:
            return
        try:
            message = json.loads(request.content)
            token = message["params"]["_meta"][_CALLER_META]
        except (ValueError, KeyError, TypeError):
            return  # not a call of a caller: the session's own request
        headers = self._headers_by_token.get(token) if isinstance(token, str) else None
        if headers:
            request.headers.update(headers)

    async def _send(
        self, tool_name: str, arguments: dict[str, Any], token: str | None
    ) -> types.CallToolResult:
        client = await self._live_client()
        # A key of our own, which RequestParamsMeta allows (its extra items) and mypy cannot see.
        meta = None if token is None else cast(types.RequestParamsMeta, {_CALLER_META: token})
        try:
            return await client.call_tool(tool_name, arguments, meta=meta)
        except MCPError as exc:
            expired = _SESSION_TERMINATED in exc.message
            if expired or exc.code == types.CONNECTION_CLOSED:
                self._is_lost = True
                raise McpCallError(
                    f"{self.source}: the connection was lost during the call "
                    "(it is reconnected on the next call)",
                    is_session_expired=expired,
                ) from exc
            raise McpCallError(f"{self.source} refused the call: {exc.message}") from exc

    async def _live_client(self) -> Client:
        """The session's client, reconnected first (once) if the connection was lost."""
        async with self._reconnecting:
            client = self._usable_client()
            if client is not None:
                return client
            logger.warning("%s: reconnecting", self.source)
            await self.close()
            try:
                return await self.connect()
            except (McpServerError, ConfigurationError) as exc:
                self._is_lost = True
                raise McpCallError(f"{self.source} is unavailable: {exc}") from exc

    def _describe(self, error: BaseException) -> str:
        return describe_failure(error, hidden=self._secrets.values)


async def _headers_for(
    build: CallerHeaders | None, context: RunContext[Any], source: str
) -> dict[str, str]:
    """The headers `build` (a server's `caller_headers`) makes of the run's context.

    Raises:
        McpCallError: the function failed; the model reads why.
    """
    try:
        built = {} if build is None else build(context)
        if inspect.isawaitable(built):
            built = await built
        return {str(name): str(value) for name, value in dict(built).items()}
    except Exception as exc:  # the application's function: its failure is the call's
        raise McpCallError(f"{source}: caller_headers failed: {type(exc).__name__}: {exc}") from exc


def _caller_headers(server: McpServer) -> CallerHeaders | None:
    """The server's `caller_headers` function, imported (from `sys.path`) when the config names
    it and its actor file's folder did not (`with_server_paths_beside`).

    Raises:
        ConfigurationError: it cannot be imported, or is not callable.
    """
    return caller_headers_of(server, search_dir=None)


def _output(result: types.CallToolResult, source: str) -> str:
    """Text blocks as the output, else the structured content's JSON; other blocks noted."""
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    if texts:
        output = "\n".join(texts)
    elif result.structured_content is not None:
        output = json.dumps(result.structured_content)
    else:
        output = ""
    left_out = Counter(
        block.type for block in result.content if not isinstance(block, types.TextContent)
    )
    if left_out:
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(left_out.items()))
        note = f"[cleveractors: left out content the model cannot read here: {kinds}]"
        output = f"{output}\n{note}" if output else note
    if result.is_error:
        raise McpCallError(f"{source} reported an error: {output or '(no details)'}")
    return output


def _program(command: str) -> str:
    """`python` and `python3` mean the interpreter running us, whatever PATH holds: the server
    then sees the packages installed beside cleveractors."""
    return sys.executable if command in _THIS_PYTHON and sys.executable else command


async def _cancel_and_wait(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.wait([task])
