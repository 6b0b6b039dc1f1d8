"""Where a turn's claims are kept (`Book`): in the store (`StoredBook`: its idempotency key,
session and pause claimed there, each LLM call in the ledger as it ends) or in this process's
memory (`MemoryBook`). The path (`cleveractors._turn_path`) begins, holds and settles a turn
through one of them and never asks which."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from cleveractors._pause import MemoryPauses
from cleveractors._spend_gate import CallSpend
from cleveractors.agents import LLMAgent
from cleveractors.agents._decisions import SUPERSEDED, not_run
from cleveractors.agents.base import Agent, History
from cleveractors.approvals import CheckedDecisions, PausedRun, ToolAnswer
from cleveractors.errors import (
    ApprovalConflictError,
    ApprovalError,
    ConfigurationError,
    IdempotencyError,
    McpServerError,
    SessionBusyError,
    SessionNotFoundError,
    SpendLimitExceeded,
    StoreError,
)
from cleveractors.result import ErrorInfo, ExecutionResult, RunOutcome, SpendLeft
from cleveractors.runs import finish_despite_cancellation
from cleveractors.spend_limits import SpendPolicy
from cleveractors.turns import NewMessage, Resumption, Turn
from cleveractors.usage import CallRecorder

if TYPE_CHECKING:
    from collections.abc import Callable

    from cleveractors.store import SqlStore, StoreRun
    from cleveractors.store.spend import SpendAccount

__all__ = ["Book", "Held", "MemoryBook", "Refused", "StoredBook", "finished", "refused_result"]

logger = logging.getLogger("cleveractors.executor")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Held:
    """A turn that began: what the agent's run starts from."""

    start: str | CheckedDecisions
    history: History | None
    session_id: str | None
    max_output_tokens: int | None
    can_pause: bool
    resumed_from: str | None = None
    active_agent: str | None = None
    """The actor the turn runs on, when a handoff left the session (or the pause) with one;
    None: the executor's own. Only a stored session remembers a handoff across turns."""
    output_schema: Mapping[str, Any] | None = None

    @classmethod
    def resuming(cls, checked: CheckedDecisions) -> Held:
        paused = checked.paused
        return cls(
            checked,
            history=None,
            session_id=paused.session_id,
            max_output_tokens=paused.max_output_tokens,
            can_pause=True,
            resumed_from=paused.run_id,
            active_agent=paused.agent,
        )


class Refused(Exception):
    """The turn cannot begin: nothing was spent; `error` is the run's error."""

    def __init__(self, error: BaseException, *, spend_left: tuple[SpendLeft, ...] = ()) -> None:
        super().__init__(str(error))
        self.error = error
        self.spend_left = spend_left
        """The caller's spend limits, when they refused the turn."""


class Book(Protocol):
    """Where a turn's claims are kept: the store, or this process's memory."""

    record_call: CallRecorder | None

    @property
    def call_spend(self) -> CallSpend | None:
        """The run's hold on its caller's spend limits, when it has any."""

    async def begin(self) -> Held | ExecutionResult:
        """Claim what the turn needs; a stored answer to replay instead of running.

        Raises:
            Refused: the turn cannot begin; nothing is spent.
        """

    def holding(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep the claims alive while the agent runs."""

    async def abort(self, error: BaseException) -> None:
        """Free what `begin` claimed, for a turn that ends before its run does."""

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        """Keep what the run left (ledger, turn, pause) and free its claims."""


class MemoryBook:
    """An executor without a store: no session, no key; pauses are kept in `pauses`."""

    record_call: CallRecorder | None = None
    call_spend: CallSpend | None = None

    def __init__(self, agent: Agent, pauses: MemoryPauses, turn: Turn, run_id: str) -> None:
        self._agent, self._pauses, self._turn, self._run_id = agent, pauses, turn, run_id

    async def begin(self) -> Held:
        turn = self._turn
        if isinstance(turn, NewMessage):
            return Held(
                turn.message,
                turn.history,
                None,
                turn.max_output_tokens,
                turn.can_pause,
                output_schema=turn.output_schema,
            )
        try:
            await self._agent.open()  # an edit is checked against the tools: MCP servers' too
            paused = self._pauses.find(turn.run_id, turn.caller)
            checked = self._agent.check_decisions(paused, turn.decided, now=datetime.now(UTC))
            self._pauses.take(paused.run_id, resumed_in=self._run_id)  # nothing awaited since
        except (ApprovalError, ConfigurationError, McpServerError) as exc:
            raise Refused(exc) from exc
        return Held.resuming(checked)

    def holding(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def abort(self, error: BaseException) -> None:
        return None

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        if outcome.pause is not None:
            self._pauses.keep(outcome.pause)
        return outcome


class StoredBook:
    """An executor with a store: the turn's key, session and pause are claimed there, each LLM
    call is in the ledger as it ends, and the turn is appended when it answers (or the pause
    kept again). A busy, foreign or unwritable store refuses the turn before anything is
    spent; a request answered before under its idempotency key is replayed."""

    def __init__(
        self,
        agent: Agent,
        store: SqlStore,
        turn: Turn,
        run_id: str,
        *,
        spend: SpendPolicy | None = None,
    ) -> None:
        self._agent, self._store, self._turn, self._run_id = agent, store, turn, run_id
        self._key: str | None = None
        """The idempotency key this turn claimed, once it did."""
        self._held: StoreRun | None = None
        self.record_call: CallRecorder | None = None
        self._spend = spend
        self.call_spend: SpendAccount | None = None

    async def begin(self) -> Held | ExecutionResult:
        try:
            await self._store.open()
        except (ConfigurationError, StoreError) as exc:
            raise Refused(exc) from exc
        turn = self._turn
        if isinstance(turn, Resumption):
            checked = await self._checked(turn)
            held = await self._hold_session(checked.paused.session_id, checked.paused)
            resuming = Held.resuming(checked)
            await self._admit(held, resuming)
            await finished(held.claim_pause(checked.paused, checked), ApprovalError, StoreError)
            return resuming
        replay = await self._claim_key(turn)
        if replay is not None:
            return replay
        held = await self._hold_session(turn.session_id, None)
        superseded = await finished(
            held.supersede_waiting_run(_declined_for_new_message), StoreError
        )
        if turn.session_id is None:
            history = turn.history
        else:  # the store's own list when nothing joins it: it may know its size
            history = [*held.history, *superseded] if superseded else held.history
        begun = Held(
            turn.message,
            history,
            turn.session_id,
            turn.max_output_tokens,
            turn.can_pause,
            active_agent=held.active_actor,
            output_schema=turn.output_schema,
        )
        await self._admit(held, begun)
        return begun

    async def _admit(self, held: StoreRun, begun: Held) -> None:
        """Reserve the run's first call against the caller's spend limits, if it has any: a
        caller with no room left is refused here, before any LLM call."""
        if self._spend is None:
            return
        # The store extra is installed: this executor has a store.
        from cleveractors.store.spend import SpendAccount

        caller = self._turn.caller
        limits = await self._spend.limits_for(caller)
        if limits is None:
            return
        account = SpendAccount(self._store.engine, caller, limits, self._spend.clock)
        tokens, cost = _first_call_reservation(self._agent, begun, is_strict=limits.strict)
        try:
            await finished(
                account.admit(tokens=tokens, cost_usd=cost),
                SpendLimitExceeded,
                ConfigurationError,
                StoreError,
            )
        except Refused as refused:
            raise Refused(refused.error, spend_left=account.refused) from refused.error
        held.spend = self.call_spend = account

    async def _checked(self, turn: Resumption) -> CheckedDecisions:
        try:
            await self._agent.open()  # an edit is checked against the tools: MCP servers' too
            paused = await self._store.paused_run(turn.run_id, caller=turn.caller)
            return self._agent.check_decisions(paused, turn.decided, now=datetime.now(UTC))
        except (ConfigurationError, StoreError, ApprovalError, McpServerError) as exc:
            raise Refused(exc) from exc

    async def _claim_key(self, turn: NewMessage) -> ExecutionResult | None:
        """Claim the turn's idempotency key (if it has one); the stored answer of a request
        answered before. A key still running or another request's is refused."""
        key = turn.idempotency_key
        if key is None:
            return None
        # The store extra is installed: this executor has a store.
        from cleveractors.store.idempotency import Replay, request_digest

        digest = request_digest(
            turn.message,
            turn.history,
            turn.session_id,
            max_output_tokens=turn.max_output_tokens,
            output_schema=turn.output_schema,
        )
        claim = await finished(
            self._store.claim_idempotency_key(
                caller=turn.caller, key=key, request_digest=digest, run_id=self._run_id
            ),
            IdempotencyError,
            ConfigurationError,
            StoreError,
            on_claim=lambda claimed: (
                None if isinstance(claimed, Replay) else setattr(self, "_key", key)
            ),
        )
        return claim.result if isinstance(claim, Replay) else None

    async def _hold_session(self, session_id: str | None, paused: PausedRun | None) -> StoreRun:
        """Open the run in the ledger, its session (if any) claimed and its history loaded."""
        beginning = self._store.begin_run(
            run_id=self._run_id, session_id=session_id, caller=self._turn.caller
        )
        try:
            held: StoreRun = await finished(
                beginning,
                SessionBusyError,
                SessionNotFoundError,
                StoreError,
                on_claim=lambda claimed: setattr(self, "_held", claimed),
            )
        except Refused as refused:
            if paused is not None and isinstance(refused.error, SessionBusyError):
                raise Refused(_being_ended(paused, refused.error)) from refused.error
            raise
        self.record_call = held.record_call
        return held

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[None]:
        if self._key is None:
            yield
            return
        async with _holding_key(self._store, self._turn.caller, self._key, self._run_id):
            yield

    async def abort(self, error: BaseException) -> None:
        if self.call_spend is not None:
            await finish_despite_cancellation(self.call_spend.release())
        if self._held is not None:
            await finish_despite_cancellation(self._held.abort(error))
        if self._key is not None:
            await finish_despite_cancellation(self._settle_key(refused_result(self._run_id, error)))

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        held = cast("StoreRun", self._held)  # a turn is settled only once it began
        settled, is_cancelled = await finish_despite_cancellation(held.close(outcome))
        if self.call_spend is not None:
            settled, is_late = await finish_despite_cancellation(
                _with_spend_left(settled, self.call_spend)
            )
            is_cancelled = is_cancelled or is_late
        if self._key is not None:
            _, is_late = await finish_despite_cancellation(self._settle_key(settled.result))
            is_cancelled = is_cancelled or is_late
        return _cancelled_after(settled) if is_cancelled else settled

    async def _settle_key(self, result: ExecutionResult) -> None:
        """Keep an answer for the key's repeats, or free the key of a run that failed. The run's
        outcome stands either way: a key that cannot be settled is free again once its lease
        runs out, and costs its repeats a rerun (said in the log)."""
        key, run_id = self._key, self._run_id
        try:
            is_settled = await self._store.settle_idempotency_key(
                caller=self._turn.caller, key=cast(str, key), run_id=run_id, result=result
            )
        except StoreError as exc:
            logger.warning("run %s: settling idempotency key %r failed: %s", run_id, key, exc)
            return
        if not is_settled:
            logger.warning("run %s no longer held idempotency key %r when it settled", run_id, key)


def _first_call_reservation(
    agent: Agent, begun: Held, *, is_strict: bool
) -> tuple[int, Decimal | None]:
    """What the run's first call reserves (an agent of another kind reserves nothing, and is
    refused only at the limit)."""
    if not isinstance(agent, LLMAgent):
        return 0, Decimal(0)
    try:
        return agent.first_call_reservation(
            begun.start,
            begun.history,
            max_output_tokens=begun.max_output_tokens,
            is_strict=is_strict,
        )
    except ConfigurationError as exc:
        raise Refused(exc) from exc


async def _with_spend_left(outcome: RunOutcome, account: SpendAccount) -> RunOutcome:
    """The outcome with what the caller has left, once the run let go what it still held."""
    await account.release()
    try:
        left = await account.left()
    except StoreError as exc:
        logger.warning("reading what %r has left to spend failed: %s", account.caller, exc)
        return outcome
    result = outcome.result.model_copy(update={"spend_left": left})
    return RunOutcome(result, outcome.error, outcome.turn, outcome.pause)


def _declined_for_new_message(paused: PausedRun) -> dict[str, ToolAnswer]:
    """What the model reads for the calls of a pause that a new message answered."""
    answers = {pending.call_id: not_run(pending.name, SUPERSEDED) for pending in paused.pending}
    for call in paused.batch:  # an agent called as a tool, waiting on its paused run
        if call.call_id in paused.children:
            answers[call.call_id] = not_run(call.name, SUPERSEDED)
    return answers


def _being_ended(paused: PausedRun, busy: SessionBusyError) -> ApprovalConflictError:
    """A paused run's session held by another run: that run is ending the pause (a resumption
    of it, or a new message declining its calls), since every run on the session does, so this
    resumption lost the race as surely as if the pause were already taken."""
    conflict = ApprovalConflictError(
        f"run {paused.run_id!r} is being resumed or answered by another request",
        run_id=paused.run_id,
    )
    conflict.__cause__ = busy
    return conflict


def _cancelled_after(outcome: RunOutcome) -> RunOutcome:
    """The outcome of a run whose caller left while it was being settled: an answer stays
    answered, billed and stored, and the cancellation still reaches the caller."""
    if outcome.error is not None:
        return outcome
    return RunOutcome(outcome.result, asyncio.CancelledError(), outcome.turn)


@contextlib.asynccontextmanager
async def _holding_key(
    store: SqlStore, caller: str | None, key: str, run_id: str
) -> AsyncIterator[None]:
    """Keep the run's claim on its key while the run goes (the store's lease, as for its
    session). A run that lost its claim (the database was out of reach for a whole lease, and
    another worker took the key over) is stopped: the request now runs there, and must not be
    paid for twice."""
    running = asyncio.current_task()

    def stop() -> None:
        logger.warning(
            "run %s lost its claim on idempotency key %r to another run; stopping it", run_id, key
        )
        if running is not None:
            running.cancel()

    async with store.idempotency_lease(caller=caller, key=key, run_id=run_id, on_lost=stop):
        yield


def refused_result(
    run_id: str, error: BaseException, spend_left: tuple[SpendLeft, ...] = ()
) -> ExecutionResult:
    """The result of a run refused before it began: nothing spent."""
    return ExecutionResult(
        text="", error=ErrorInfo.from_exception(error), run_id=run_id, spend_left=spend_left
    )


async def finished(
    step: Awaitable[T],
    *refusals: type[BaseException],
    on_claim: Callable[[T], object] | None = None,
) -> T:
    """Run a step of the beginning to its end even if the caller leaves meanwhile. What it
    claimed is handed to `on_claim` first (so it is freed again), then a cancellation that came
    meanwhile is raised; an error of the `refusals` types refuses the turn.

    Raises:
        Refused: the step failed with one of `refusals`.
        asyncio.CancelledError: the caller left while the step ran.
    """
    try:
        claimed, is_cancelled = await finish_despite_cancellation(step)
    except refusals as exc:
        raise Refused(exc) from exc
    if on_claim is not None:
        on_claim(claimed)
    if is_cancelled:
        raise asyncio.CancelledError
    return claimed
