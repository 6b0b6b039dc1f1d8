"""`StoreRun`: one run's hold on its session and its ledger, from its start to its settling.

    handle = await store.begin_run(run_id=..., session_id=..., caller=...)
    await handle.record_call(call)      # one ledger row per LLM call, as it happens
    outcome = await handle.close(outcome)  # the ledger whole, the turn appended, the session freed

While the run goes, a `Lease` renews its hold on the session; a run whose lease was taken over
is told so at its next renewal, and appends nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from langchain_core.messages import BaseMessage
from sqlalchemy import exc as sa_exc
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from cleveractors.approvals import CheckedDecisions, PausedRun, ToolAnswer
from cleveractors.errors import StoreError
from cleveractors.result import ErrorInfo, ExecutionResult, RunOutcome
from cleveractors.store.engine import GatedEngine
from cleveractors.store.leases import Lease
from cleveractors.store.ledger import ended_by, finish_run, open_run, run_totals, write_calls
from cleveractors.store.pauses import claim_pause, keep_pause, pause_of_session, supersede_pause
from cleveractors.store.records import RunStatus
from cleveractors.store.sessions import (
    active_actor,
    append_turn,
    claim_session,
    read_turns,
    release_session,
    renew_session,
    set_active_actor,
)
from cleveractors.usage import LLMCallUsage

if TYPE_CHECKING:
    from cleveractors.store.spend import SpendAccount

__all__ = ["RunHost", "StoreRun", "SupersededAnswers", "store_error", "with_store_error"]

logger = logging.getLogger(__name__)

SupersededAnswers = Callable[[PausedRun], dict[str, ToolAnswer]]
"""What the model reads, by call id, for each call a superseded pause waited for."""


class RunHost(Protocol):
    """What a run needs of its store (`SqlStore`)."""

    @property
    def engine(self) -> GatedEngine: ...

    @property
    def lease_s(self) -> float: ...

    @property
    def history_turns(self) -> int: ...


class StoreRun:
    """One run's hold on its session and its ledger; made by `SqlStore.run()`."""

    def __init__(self, store: RunHost, run_id: str, session_id: str | None, caller: str) -> None:
        self.store = store
        self.run_id = run_id
        self.session_id = session_id
        self.caller = caller
        self.history: list[BaseMessage] = []
        """The session's latest `history_turns` turns, flattened, as the run found them."""
        self.active_actor: str | None = None
        """The actor a handoff left the session with, as the run found it (None: its own)."""
        self.is_committed = False
        self.failure: tuple[RunStatus, ExecutionResult] | None = None
        """How the run failed, when it ended without an answer (set by `settle`)."""
        self._lease: Lease | None = None
        self.spend: SpendAccount | None = None
        """The run's hold on its caller's spend limits: each ledger row settles its call."""

    async def start(self) -> None:
        async with self.store.engine.begin() as connection:
            if self.session_id is not None:
                await claim_session(
                    connection,
                    self.session_id,
                    self.caller,
                    self.run_id,
                    lease_s=self.store.lease_s,
                )
                found = await read_turns(
                    connection, self.session_id, self.caller, limit=self.store.history_turns
                )
                self.history = [message for turn in found for message in turn.messages]
                self.active_actor = await active_actor(connection, self.session_id)
            await open_run(connection, self.run_id, self.session_id, self.caller)
        if self.session_id is not None:
            self._lease = Lease(
                lambda: renew_session(self.store.engine, self.run_id, lease_s=self.store.lease_s),
                span_s=self.store.lease_s,
                on_lost=self._lost_session,
                name=f"the lease of run {self.run_id} on session {self.session_id!r}",
            )

    def _lost_session(self) -> None:
        logger.warning(
            "store: run %s lost its lease on session %r; its turn will not be appended",
            self.run_id,
            self.session_id,
        )

    async def record_call(self, call: LLMCallUsage) -> None:
        """Write one LLM call's ledger row now. Writing it again is a no-op.

        Raises:
            StoreError: the row could not be written.
        """
        await self.record_calls((call,))

    async def record_calls(self, calls: Sequence[LLMCallUsage]) -> None:
        """Write ledger rows in one transaction; rows already written are left as they are."""
        if not calls:
            return
        try:
            async with self.store.engine.begin() as connection:
                settled = await write_calls(
                    connection,
                    calls,
                    run_id=self.run_id,
                    session_id=self.session_id,
                    caller=self.caller,
                    spend=self.spend,
                )
        except SQLAlchemyError as exc:
            raise StoreError(
                f"store: the ledger rows of run {self.run_id} could not be written "
                f"({type(exc).__name__})"
            ) from exc
        if self.spend is not None:
            self.spend.settled(settled)

    async def close(self, outcome: RunOutcome) -> RunOutcome:
        """Settle the run and end it: the ledger whole, the turn appended if it answered, the
        session freed. Never raises: a write that fails becomes the outcome's `StoreError`."""
        settled = await self.settle(outcome)
        try:
            await self.end("ok" if self.is_committed else "failed")
        except SQLAlchemyError as exc:
            return with_store_error(settled, store_error(f"ending run {self.run_id}", exc))
        return settled

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        """Make the ledger whole (calls recorded on the way out of a failure included) and, for
        an answered run, append its turn. A write that fails turns the outcome into a failure."""
        result = outcome.result
        try:
            await self.record_calls(result.usage_by_call)
            if outcome.pause is not None:
                await self.commit_pause(outcome.pause, result)
            elif outcome.error is None:
                await self.commit_turn(outcome.turn, result)
            else:
                self.failure = ("cancelled" if result.cancelled else "failed", result)
                if outcome.turn and self.session_id is not None:  # what of it is whole
                    await self.keep_turn(outcome.turn)
        except (StoreError, SQLAlchemyError) as exc:
            failure = exc if isinstance(exc, StoreError) else store_error(f"run {self.run_id}", exc)
            self.failure = ("failed", result)
            return with_store_error(outcome, failure)
        return outcome

    async def claim_pause(self, paused: PausedRun, checked: CheckedDecisions) -> None:
        """Take `paused` for this run's resumption and record the decisions, made by this run's
        caller.

        Raises:
            ApprovalConflictError: another resumption (or a new message) took it first.
            StoreError: the database could not be written.
        """
        try:
            async with self.store.engine.begin() as connection:
                await claim_pause(
                    connection,
                    paused,
                    checked,
                    resumed_in=self.run_id,
                    decided_by=self.caller or None,
                )
        except SQLAlchemyError as exc:
            raise store_error(f"resuming run {paused.run_id}", exc) from exc

    async def supersede_waiting_run(self, answer: SupersededAnswers) -> list[BaseMessage]:
        """End the session's paused run, if one waits, its calls answered by `answer` (a new
        message came instead of decisions); returns its turn's messages (empty when none
        waits). The run holds the session, so nothing resumes it meanwhile.

        Raises:
            StoreError: the database could not be written.
        """
        if self.session_id is None:
            return []
        try:
            async with self.store.engine.begin() as connection:
                paused = await pause_of_session(connection, self.session_id, self.caller)
                if paused is None:
                    return []
                return await supersede_pause(
                    connection,
                    paused,
                    answer(paused),
                    session_id=self.session_id,
                    by_run=self.run_id,
                    caller=self.caller,
                )
        except SQLAlchemyError as exc:
            raise store_error(f"declining the waiting calls of {self.session_id!r}", exc) from exc

    async def commit_pause(self, paused: PausedRun, result: ExecutionResult) -> None:
        """Keep the pause, mark the run `paused` and free its session, in one transaction."""
        async with self.store.engine.begin() as connection:
            await keep_pause(connection, paused, self.caller)
            await self._keep_active_actor(connection, result)
            await finish_run(connection, self.run_id, "paused", run_totals(result))
            await release_session(connection, self.run_id)
        self.is_committed = True

    async def commit_turn(self, messages: Sequence[BaseMessage], result: ExecutionResult) -> None:
        """Append the run's whole turn to its session and close the run, in one transaction."""
        async with self.store.engine.begin() as connection:
            if self.session_id is not None:
                await append_turn(
                    connection,
                    self.session_id,
                    run_id=self.run_id,
                    messages=messages,
                    held_by=self.run_id,
                )
                await self._keep_active_actor(connection, result)
            await finish_run(connection, self.run_id, "ok", run_totals(result))
            await release_session(connection, self.run_id)
        self.is_committed = True

    async def _keep_active_actor(
        self, connection: AsyncConnection, result: ExecutionResult
    ) -> None:
        """The session's next turn runs on the actor this one ended on, if a handoff moved it."""
        actor = result.active_agent
        if self.session_id is not None and actor is not None and actor != self.active_actor:
            await set_active_actor(connection, self.session_id, actor, held_by=self.run_id)

    async def keep_turn(self, messages: Sequence[BaseMessage]) -> None:
        """Append to the session what of a failed run's turn is whole (tool calls that ran,
        with their results), leaving the run to be marked by `end`."""
        async with self.store.engine.begin() as connection:
            await append_turn(
                connection,
                str(self.session_id),
                run_id=self.run_id,
                messages=messages,
                held_by=self.run_id,
            )

    async def abort(self, error: BaseException) -> None:
        """End a run that `error` stopped before it had an outcome (a cancellation before it
        began): marked from the error, its session freed."""
        await self.end(ended_by(error), error_type=type(error).__name__)

    async def end(self, status: RunStatus, *, error_type: str | None = None) -> None:
        """Stop renewing the lease; a run not committed is marked and its session freed."""
        if self._lease is not None:
            await self._lease.stop()
        if self.is_committed:
            return
        values: dict[str, object] = {}
        if self.failure is not None:
            status, result = self.failure
            values.update(run_totals(result))
            error_type = result.error.type if result.error is not None else error_type
        values["error_type"] = error_type
        async with self.store.engine.begin() as connection:
            await finish_run(connection, self.run_id, status, values)
            await release_session(connection, self.run_id)


def store_error(doing: str, cause: SQLAlchemyError) -> StoreError:
    # Only a wait for a connection is told in full: other errors may quote the database.
    detail = f" ({cause})" if isinstance(cause, sa_exc.TimeoutError) else ""
    failure = StoreError(f"store: {type(cause).__name__} while {doing}{detail}")
    failure.__cause__ = cause
    return failure


def with_store_error(outcome: RunOutcome, failure: StoreError) -> RunOutcome:
    """The run's outcome, failed by the store: its usage kept, the store's error on it."""
    result = outcome.result.model_copy(update={"error": ErrorInfo.from_exception(failure)})
    return RunOutcome(result, failure, outcome.turn)
