"""`ActorExecutor`: runs user messages through an actor's agent and reports what they cost.

    executor = ActorExecutor.from_config("actor.yaml")
    result = await executor.execute("Weather in Paris?")            # ExecutionResult
    result = await executor.execute(Resumption(run_id, decisions))  # a paused run, on
    async for chunk in executor.execute_stream("Weather in Paris?"):  # answer text, live
        ...
    async for event in executor.execute_events("Weather in Paris?"):  # typed events
        ...

An executor is also an async context manager: `async with ActorExecutor.from_config(path) as
executor:` opens what it holds for its life (its store, its agent's MCP sessions) and closes it
on leaving, like `await executor.aclose()`. Without it, the first run opens them. A start that
fails closes again whatever it had started; an executor garbage-collected with something still
open says what in a `ResourceWarning`.

Each entry point takes a `Turn` (`cleveractors.turns`): a `str` or `NewMessage`, or a
`Resumption` of a paused run; every one of them takes the same path (`_turn_path.run_turn`).

Each call's own result (the returned `ExecutionResult`, or the stream's `.result`) is the truth;
`last_result` is a convenience holding the latest one, set before any exception propagates.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from cleveractors import tokens
from cleveractors._actor_build import build_actor
from cleveractors._pause import MemoryPauses
from cleveractors._turn_path import run_turn
from cleveractors.agents import Agent, EventStream, History, LLMAgent, TextStream
from cleveractors.agents._delegate import agent_tool
from cleveractors.agents.base import discard_event, settle_blocking
from cleveractors.approvals import PausedRun
from cleveractors.config import (
    ActorConfig,
    config_origin,
)
from cleveractors.errors import ConfigurationError, DepsMissingError
from cleveractors.events import Event
from cleveractors.result import ExecutionResult, RunOutcome
from cleveractors.runs import new_run_id
from cleveractors.spend_limits import SpendLimits, SpendLimitsHook, SpendPolicy
from cleveractors.tools import Tool
from cleveractors.tracing import Telemetry
from cleveractors.turns import NewMessage, Resumption, Turn

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from cleveractors.store import SqlStore

__all__ = ["ActorExecutor"]


class ActorExecutor:
    """Runs messages through one agent; safe to share between concurrent runs.

    With a `store`, every run's LLM calls are written to its ledger as they happen, and a
    `session_id` makes the store keep the conversation: use the executor as
    `async with executor:` (or `await executor.aclose()`) so the store is closed with it.

    Args:
        agent: The agent to run, e.g. an `LLMAgent` built in code.
        name: The actor's name, for logs and UIs.
        store: Where sessions and the usage ledger are kept (`cleveractors.store.SqlStore`).
        tracer_provider: Where the runs' OpenTelemetry spans go (`cleveractors.tracing`); the
            global provider when None (a no-op unless an SDK is configured).
        meter_provider: Where the runs' OpenTelemetry metrics go; the global one when None.
        spend_limits: What each caller may spend (`cleveractors.spend_limits`): the same
            `SpendLimits` for every caller, or a hook `(caller) -> SpendLimits | None` (sync or
            async) asked at the start of each turn, so a plan that changes applies at once.
            Needs a store, which keeps the counters for every worker.
        clock: What time it is (an aware datetime), by which the spend limits' windows are
            read; the system's clock in UTC when None.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        store: SqlStore | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        spend_limits: SpendLimits | SpendLimitsHook | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.agent = agent
        self.name = name or agent.name
        self.store = store
        self.spend_limits = spend_limits
        """What each caller may spend: set it (or pass it) before the first run."""
        self._clock = clock
        self._telemetry = Telemetry(
            self.name,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            chat_model=getattr(agent, "model", None),
        )
        self.last_result: ExecutionResult | None = None
        self._pauses = MemoryPauses()
        """Runs paused without a store: kept in this process only, until resumed."""
        tokens.warm_up()  # here, once, rather than inside the first cut-off stream

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Tool:
        """This executor's agent as a tool another agent's model can call with a `message`
        (see `LLMAgent.as_tool`): a child run of the caller's, billed in the caller's ledger
        (this executor's store is not used for it).

        Raises:
            ConfigurationError: the name (the actor's, when omitted) is not a valid tool name.
        """
        return agent_tool(
            self.agent, name=self.name if name is None else name, description=description
        )

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools the agent may call, in the order they were declared; an agent's MCP tools
        are listed once its servers are open (`open()`, or a first run). An agent other than
        `LLMAgent` declares none."""
        if isinstance(self.agent, LLMAgent):
            return tuple(self.agent.tools.values())
        return ()

    async def open(self) -> None:
        """Open what the executor holds: its store, and its agent's MCP servers (connected,
        their tools fetched). Runs open them on first use too. When it fails, whatever it had
        opened is closed again before the error is raised.

        Raises:
            McpServerError: an MCP server cannot be reached or does not offer an allowed tool.
            ConfigurationError: an MCP tool's name collides with another tool's, or a variable
                named in a server's env or headers is not set.
            Exception: the store's own error when it cannot be opened.
        """
        try:
            if self.store is not None:
                await self.store.open()
            await self.agent.open()
        except BaseException as failure:
            await self._close_after(failure)
            raise

    async def _close_after(self, failure: BaseException) -> None:
        """Close what a failed `open()` had started; `failure` stays the caller's error."""
        try:
            await self.aclose()
        except Exception as exc:
            failure.add_note(f"closing the executor after this failure failed too: {exc!r}")

    async def aclose(self) -> None:
        """Close what the executor holds: the MCP sessions (stdio servers are terminated) and
        the store. Runs still going must have ended; a later run opens them again."""
        try:
            await self.agent.aclose()
        finally:
            if self.store is not None:
                await self.store.aclose()

    def __del__(self, _warn: Callable[..., object] = warnings.warn) -> None:
        # Nothing can be awaited here: like asyncio's transports and httpx's clients, a dropped
        # executor that still holds something open says what (`_warn` outlives module teardown).
        left_open = self._left_open()
        if left_open:
            _warn(
                f"unclosed executor {self.name!r} left open: {', '.join(left_open)}; use "
                "`async with executor:` or `await executor.aclose()`",
                ResourceWarning,
                source=self,
            )

    def _left_open(self) -> list[str]:
        """What the executor holds open now, in words; nothing for one half-built."""
        agent = getattr(self, "agent", None)
        servers = agent.open_mcp_servers if isinstance(agent, LLMAgent) else ()
        left_open = [f"mcp server {name!r}" for name in servers]
        store = getattr(self, "store", None)
        if store is not None and _is_open(store):
            left_open.append("its store")
        return left_open

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @classmethod
    def from_config(
        cls,
        source: str | Path | Mapping[str, Any] | ActorConfig,
        *,
        origin: str | None = None,
        config_dir: Path | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> ActorExecutor:
        """Build an executor from a YAML file path, a plain dict or a validated `ActorConfig`.

        The chat model client is built here, once, not per message. `origin` names where a
        validated `ActorConfig` came from, for error messages (a path is named by itself).
        `config_dir` is the config's folder (a path's own folder by default): handler modules
        beside the config are looked for there first, and a relative SQLite path in
        `store.url` is taken from there. Without one (a dict), that path is relative to the
        working directory.

        Raises:
            ConfigurationError: every problem of the config at once, each naming the field and
                value that are wrong: fields, handlers that cannot be imported, invalid schemas,
                a missing API key variable.
        """
        if origin is None:
            origin = "<dict>" if isinstance(source, ActorConfig) else config_origin(source)
        if config_dir is None and isinstance(source, (str, Path)):
            config_dir = Path(source).parent
        actor = build_actor(source, origin=origin, config_dir=config_dir)
        return cls(
            actor.agent,
            name=actor.name,
            store=actor.store,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            spend_limits=actor.spend_limits,
        )

    async def execute(
        self,
        turn: str | Turn,
        history: History | None = None,
        *,
        session_id: str | None = None,
        caller: str | None = None,
        idempotency_key: str | None = None,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
        on_event: Callable[[Event], None] | None = None,
        deps: object = None,
    ) -> ExecutionResult:
        """Run a turn to its end: a new message to its answer, or a paused run on once a person
        decided on its pending calls (a `Resumption`: a new run segment, see there).

        Args:
            turn: The user's message (a `str`, which is `NewMessage(turn, history, ...)` with
                the keyword arguments below), or a `NewMessage` or `Resumption` that carries
                its own options: then the keyword arguments (`on_event` apart) are not given.
            history: Earlier turns, when the executor keeps no session for them.
            session_id: Continue (or start) this stored session; needs a store.
            caller: Whose session it is: another caller's session does not exist for them.
            idempotency_key: Needs a store. A request sent again under the same key, by the same
                caller with the same message, history and session, gets the first run's result
                back (`replayed=True`) instead of running and billing again. A run that failed
                or was cancelled frees its key; keys expire with the store's `retention_days`.
            max_output_tokens: A cap on the output tokens of each LLM call of this run (a
                client's `max_tokens`), bound on the model for the run; never above the model's
                own `max_tokens`. None leaves the model's.
            can_pause: False where nobody can approve a tool call (an endpoint without a way
                to ask): calls that need approval are then declined, never run, and the model
                reads why. True (the default) pauses the run for them: the result's `status`
                is `paused`, and a `Resumption` goes on once a person decided.
            on_event: Called with each event of the run as it happens, to show progress:
                those of `execute_events()`, each reply's text as one `TextDelta` (the model
                is not streamed), and no `RunFinished` / `RunFailed` (the return value or the
                exception says how the run ended). It must not block.
            deps: Anything your tools need for this run (a database handle, the user's
                credentials): their `RunContext` parameters carry it (`cleveractors.context`).
                Given with any turn, a `Resumption` too; kept in memory only, never stored,
                logged or traced.

        Raises:
            ConfigurationError: the turn is not a `str`, `NewMessage` or `Resumption` (or is
                one given with options), the message or history is malformed, a session or an
                idempotency key without a store, or a key that is empty or too long;
                `DepsMissingError` when a tool needs `deps` and none are given.
            SessionBusyError: another run holds the session.
            IdempotencyKeyInProgressError: the key's first run is still going.
            IdempotencyKeyMismatchError: the key was first used for another request.
            RunNotFoundError: a resumption of no paused run by that id for this caller.
            ApprovalConflictError: the run was already resumed (one of two workers wins), or a
                call has two decisions; `ApprovalExpiredError` for a call that expired.
            InvalidDecisionError: a decision that does not fit its call (unknown call id or
                field, stale digest, edited arguments failing the tool's schema).
            StoreError: the ledger or the session could not be written.
            Exception: the model's own error, unchanged; `last_result` holds the usage.
        """
        bound = self._bound(
            turn,
            history,
            session_id=session_id,
            caller=caller,
            idempotency_key=idempotency_key,
            max_output_tokens=max_output_tokens,
            can_pause=can_pause,
            deps=deps,
        )
        outcome = await bound(on_event or discard_event, streaming=False)
        return settle_blocking(outcome, self._remember)

    def execute_events(
        self,
        turn: str | Turn,
        history: History | None = None,
        *,
        session_id: str | None = None,
        caller: str | None = None,
        idempotency_key: str | None = None,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
        deps: object = None,
    ) -> EventStream:
        """Run a turn, yielding typed events: first `RunStarted` (the run's id; a resumption's
        names the paused run in `resumed_from`, then a `ToolCallDecided` per decision), last
        `RunFinished`, `RunPaused` (it waits for a person) or `RunFailed`. Arguments as for
        `execute()`; a replayed request streams `RunStarted(replayed=True)`, its stored answer
        as one `TextDelta`, then `RunFinished`.

        Raises:
            ConfigurationError: as `execute()`, at the call, before anything runs. A run that
                fails (a resumption refused among them) ends the stream with `RunFailed`, and
                its error is raised when the stream ends.
        """
        bound = self._bound(
            turn,
            history,
            session_id=session_id,
            caller=caller,
            idempotency_key=idempotency_key,
            max_output_tokens=max_output_tokens,
            can_pause=can_pause,
            deps=deps,
        )
        return EventStream(lambda sink: bound(sink, streaming=True), on_result=self._remember)

    def execute_stream(
        self,
        turn: str | Turn,
        history: History | None = None,
        *,
        session_id: str | None = None,
        caller: str | None = None,
        idempotency_key: str | None = None,
        max_output_tokens: int | None = None,
        can_pause: bool = True,
        deps: object = None,
    ) -> TextStream:
        """Run a turn, yielding the answer's text chunks (non-empty) as they arrive.
        Arguments as for `execute()`.

        Raises:
            ConfigurationError: as `execute()`, at the call; a run's own failure is raised when
                the stream ends.
        """
        events = self.execute_events(
            turn,
            history,
            session_id=session_id,
            caller=caller,
            idempotency_key=idempotency_key,
            max_output_tokens=max_output_tokens,
            can_pause=can_pause,
            deps=deps,
        )
        return TextStream(events)

    async def paused_run(self, run_id: str, *, caller: str | None = None) -> PausedRun:
        """The paused run segment `run_id` (its `pending` calls wait for decisions), for its
        own caller: from the store, or, without one, from this executor's memory.

        Raises:
            RunNotFoundError: no paused run by that id for this caller.
            ApprovalConflictError: it was resumed already, or a new message answered it;
                `ApprovalExpiredError` (without a store) when its calls expired.
            StoreError: the store could not be read.
        """
        if self.store is None:
            return self._pauses.find(run_id, caller)
        await self.store.open()
        return await self.store.paused_run(run_id, caller=caller)

    def _bound(
        self,
        turn: str | Turn,
        history: History | None,
        *,
        session_id: str | None,
        caller: str | None,
        idempotency_key: str | None,
        max_output_tokens: int | None,
        can_pause: bool,
        deps: object,
    ) -> _BoundTurn:
        """The one path of every entry point: the turn as a `Turn`, with its run id minted now,
        ready to run with a sink, blocking or streaming."""
        if isinstance(turn, str):
            turn = NewMessage(
                turn,
                history,
                session_id=session_id,
                caller=caller,
                idempotency_key=idempotency_key,
                max_output_tokens=max_output_tokens,
                can_pause=can_pause,
            )
        else:
            options = {
                "history": history,
                "session_id": session_id,
                "caller": caller,
                "idempotency_key": idempotency_key,
                "max_output_tokens": max_output_tokens,
                "can_pause": None if can_pause else can_pause,
            }
            _check_turn(turn, [name for name, value in options.items() if value is not None])
        if isinstance(turn, NewMessage):
            for name in ("session_id", "idempotency_key"):
                if getattr(turn, name) is not None and self.store is None:
                    raise ConfigurationError(
                        f"{name} needs a store: configure `store:` or pass ActorExecutor(store=...)"
                    )
        if deps is None:
            _check_no_deps_needed(self.tools)
        telemetry = self._telemetry if self._telemetry.is_live else None
        return _BoundTurn(
            self.agent, self.store, turn, new_run_id(), telemetry, self._pauses, self._spend(), deps
        )

    def _spend(self) -> SpendPolicy | None:
        """Where the runs' spend limits come from, if any.

        Raises:
            ConfigurationError: spend limits without a store.
        """
        if self.spend_limits is None:
            return None
        if self.store is None:
            raise ConfigurationError(
                "spend_limits need a store (their counters are shared by every worker): "
                "configure `store:` or pass ActorExecutor(store=...)"
            )
        if self._clock is None:
            return SpendPolicy(self.spend_limits)
        return SpendPolicy(self.spend_limits, self._clock)

    def _remember(self, result: ExecutionResult) -> None:
        self.last_result = result


@dataclass(frozen=True, slots=True)
class _BoundTurn:
    """One run of one request, its id fixed: called once, with its sink."""

    agent: Agent
    store: SqlStore | None
    turn: Turn
    run_id: str
    telemetry: Telemetry | None
    """None when nothing would record the run's spans and metrics."""
    pauses: MemoryPauses
    spend: SpendPolicy | None
    deps: object = field(default=None, repr=False)
    """The run's deps: in memory only."""

    def __call__(self, sink: Callable[[Event], None], *, streaming: bool) -> Awaitable[RunOutcome]:
        return run_turn(
            self.agent,
            self.store,
            self.turn,
            run_id=self.run_id,
            sink=sink,
            streaming=streaming,
            telemetry=self.telemetry,
            pauses=self.pauses,
            deps=self.deps,
            spend=self.spend,
        )


def _check_turn(turn: object, options: list[str]) -> None:
    """A turn given as an object is a `NewMessage` or a `Resumption`, and carries its options.

    Raises:
        ConfigurationError: another type, or keyword options given beside the turn.
    """
    if not isinstance(turn, NewMessage | Resumption):
        raise ConfigurationError(
            f"a turn is a message (str), a NewMessage or a Resumption, not {type(turn).__name__}"
        )
    if options:
        raise ConfigurationError(
            f"{', '.join(options)} cannot be given with a {type(turn).__name__}: "
            "set them on the turn itself"
        )


def _check_no_deps_needed(tools: tuple[Tool, ...]) -> None:
    """A run without deps is refused before it begins when a tool needs them.

    Raises:
        DepsMissingError: naming the tools that need deps.
    """
    needing = tuple(tool.name for tool in tools if tool.needs_deps)
    if needing:
        raise DepsMissingError(
            f"the tool(s) {', '.join(needing)} need deps (a RunContext[...] parameter) and "
            "the run was given none: pass execute(..., deps=...), for a Resumption too",
            tool_names=needing,
        )


def _is_open(store: SqlStore) -> bool:
    try:
        store.engine  # noqa: B018 (the store's public word on whether it is open)
    except RuntimeError:
        return False
    return True
