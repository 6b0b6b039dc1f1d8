"""Turns: what a caller asks of an executor, and the one path every turn takes.

    Turn = NewMessage | Resumption       a user's message, or decisions on a paused run

    begin   claim what the turn needs: its idempotency key, its session (and the session's
            history), and for a resumption its pause, the decisions checked; a new message on
            a session supersedes the pause that waits there
    -> run  the agent's run (a sink for events, a recorder for each LLM call)
    -> settle  the ledger whole, the turn committed or the pause kept, the session and key freed

`run_turn` is that path, one body for every turn, stored or not, new or resumed, blocking or
streaming. With a store each step is the store's, on any worker; without one the pauses are kept
in this process (`MemoryPauses`). The store is a service this path calls; the agent runs the loop
and knows nothing of either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from pydantic import ValidationError

from cleveractors._pause import MemoryPauses
from cleveractors.agents._decisions import SUPERSEDED, not_run
from cleveractors.agents.base import Agent, History
from cleveractors.approvals import ApprovalDecision, CheckedDecisions, PausedRun, ToolAnswer
from cleveractors.errors import (
    ApprovalConflictError,
    ApprovalError,
    ConfigurationError,
    IdempotencyError,
    InvalidDecisionError,
    McpServerError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
)
from cleveractors.events import Event, RunStarted, TextDelta
from cleveractors.result import ErrorInfo, ExecutionResult, RunOutcome
from cleveractors.runs import finish_despite_cancellation
from cleveractors.tracing import RunTrace, Telemetry, current_trace_var
from cleveractors.usage import CallRecorder

if TYPE_CHECKING:
    from collections.abc import Callable

    from cleveractors.store import SqlStore, StoreRun

__all__ = ["NewMessage", "Resumption", "Turn", "run_turn"]

logger = logging.getLogger("cleveractors.executor")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A user's message, and where its conversation lives: a turn that begins a run. A plain
    `str` given to `ActorExecutor.execute()` (or `execute_events()`, `execute_stream()`) is a
    `NewMessage` of it.

    Raises:
        ConfigurationError: `history` given with a `session_id` (the session holds the
            history), or a `max_output_tokens` under 1.
    """

    message: str
    history: History | None = None
    """Earlier turns, when the executor keeps no session for them."""
    session_id: str | None = None
    """Continue (or start) this stored session; needs a store."""
    caller: str | None = None
    """Whose session it is: another caller's session does not exist for them."""
    idempotency_key: str | None = None
    """With a store: a request sent again under the same key (by the same caller, with the same
    message, history and session) is answered by the first run's stored result."""
    max_output_tokens: int | None = None
    """A cap on the output of each of the run's LLM calls (never above the model's own)."""
    can_pause: bool = True
    """False where nobody can approve a tool call: gated calls are declined, never run."""

    def __post_init__(self) -> None:
        if self.session_id is not None and self.history:
            raise ConfigurationError(
                "history cannot be given with session_id: the session holds the history"
            )
        cap = self.max_output_tokens
        if cap is not None and cap < 1:
            raise ConfigurationError(
                f"max_output_tokens must be a positive number of tokens, not {cap}"
            )


@dataclass(frozen=True, slots=True)
class Resumption:
    """A person's decisions on the pending calls of the paused run segment `run_id`: a turn
    that goes on with it (`cleveractors.approvals`). The decisions are `ApprovalDecision`s or
    their JSON form as dicts, kept as `ApprovalDecision`s.

    The resumption is a new run segment, with its own id (`resumed_from` names the paused one),
    its own ledger rows and result. Approved and edited calls run; when every call of the batch
    has an answer the model is asked again; while some still wait, the run pauses again, to be
    resumed by the new segment's id.

    Raises:
        InvalidDecisionError: a decision that is not one (an unknown field, a missing one).
    """

    run_id: str
    """The paused segment's id (`result.run_id` of the paused result)."""
    decisions: Sequence[ApprovalDecision | Mapping[str, Any]]
    """A decision per pending call decided now; calls left out keep waiting."""
    caller: str | None = None
    """Who decides: the run's own caller only (the audit records them)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "decisions", _as_decisions(self.run_id, self.decisions))

    @property
    def decided(self) -> tuple[ApprovalDecision, ...]:
        """The decisions as models, whichever form they were given in."""
        return cast(tuple[ApprovalDecision, ...], self.decisions)


Turn = NewMessage | Resumption
"""What a caller asks of an executor: a new message, or decisions that resume a paused run."""


async def run_turn(
    agent: Agent,
    store: SqlStore | None,
    turn: Turn,
    *,
    pauses: MemoryPauses,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
    telemetry: Telemetry | None = None,
) -> RunOutcome:
    """Run `turn` through `agent` as run `run_id`. Never raises for a failed run: the outcome
    carries the result (every token spent, the run's id) and the error; only a cancellation
    that came before the run began gets through.

    With `telemetry`, the run is an `invoke_agent` span, the parent of its calls' spans; it
    ends here on every path. Runs paused without a store are kept in `pauses`."""
    book: _Book = (
        _MemoryBook(agent, pauses, turn, run_id)
        if store is None
        else _StoredBook(agent, store, turn, run_id)
    )
    running = _run_turn(agent, book, turn, run_id=run_id, sink=sink, streaming=streaming)
    if telemetry is None:
        return await running
    run_trace = telemetry.start_run(run_id, _session_of(turn))
    token = current_trace_var.set(run_trace)
    try:
        outcome = await running
    except BaseException as exc:  # a cancellation before the run began, or an escape
        status = "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"
        run_trace.end(status, prompt_tokens=0, completion_tokens=0, cost_usd=None, error=exc)
        raise
    finally:
        current_trace_var.reset(token)
    _end_trace(run_trace, outcome)
    return outcome


async def _run_turn(
    agent: Agent,
    book: _Book,
    turn: Turn,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    """Begin, run the held turn, settle: the same steps for every turn."""
    try:
        held = await book.begin()
    except _Refused as refused:
        await finish_despite_cancellation(book.abort(refused.error))
        return RunOutcome(_refused(run_id, refused.error), refused.error)
    except BaseException as exc:  # cancelled as it began: whatever it claimed is free again
        await finish_despite_cancellation(book.abort(exc))
        raise
    if isinstance(held, ExecutionResult):
        outcome = _replay(held, _session_of(turn), sink)
    else:
        _open(run_id, held.session_id, sink, resumed_from=held.resumed_from)
        try:
            async with book.holding():
                ran = await agent.run(
                    held.start,
                    history=held.history,
                    sink=sink,
                    streaming=streaming,
                    on_call=book.record_call,
                    run_id=run_id,
                    max_output_tokens=held.max_output_tokens,
                    can_pause=held.can_pause,
                )
        except BaseException as exc:
            # `agent.run` makes a failed run its outcome: what gets here is a cancellation that
            # came before the run began (or an agent that broke that promise). Free what the
            # turn holds, then let it through.
            await finish_despite_cancellation(book.abort(exc))
            raise
        outcome = await book.settle(_owned(ran, held.session_id, turn.caller))
    _log_end(outcome)
    return outcome


def _session_of(turn: Turn) -> str | None:
    """The session a turn names (a resumption's is its pause's, known once it is read)."""
    return turn.session_id if isinstance(turn, NewMessage) else None


@dataclass(frozen=True, slots=True)
class _Held:
    """A turn that began: what the agent's run starts from."""

    start: str | CheckedDecisions
    history: History | None
    session_id: str | None
    max_output_tokens: int | None
    can_pause: bool
    resumed_from: str | None = None

    @classmethod
    def resuming(cls, checked: CheckedDecisions) -> _Held:
        paused = checked.paused
        return cls(
            checked,
            history=None,
            session_id=paused.session_id,
            max_output_tokens=paused.max_output_tokens,
            can_pause=True,
            resumed_from=paused.run_id,
        )


class _Refused(Exception):
    """The turn cannot begin: nothing was spent; `error` is the run's error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _Book(Protocol):
    """Where a turn's claims are kept: the store, or this process's memory."""

    record_call: CallRecorder | None

    async def begin(self) -> _Held | ExecutionResult:
        """Claim what the turn needs; a stored answer to replay instead of running.

        Raises:
            _Refused: the turn cannot begin; nothing is spent.
        """

    def holding(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Keep the claims alive while the agent runs."""

    async def abort(self, error: BaseException) -> None:
        """Free what `begin` claimed, for a turn that ends before its run does."""

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        """Keep what the run left (ledger, turn, pause) and free its claims."""


class _MemoryBook:
    """An executor without a store: no session, no key; pauses are kept in `pauses`."""

    record_call: CallRecorder | None = None

    def __init__(self, agent: Agent, pauses: MemoryPauses, turn: Turn, run_id: str) -> None:
        self._agent, self._pauses, self._turn, self._run_id = agent, pauses, turn, run_id

    async def begin(self) -> _Held:
        turn = self._turn
        if isinstance(turn, NewMessage):
            return _Held(turn.message, turn.history, None, turn.max_output_tokens, turn.can_pause)
        try:
            await self._agent.open()  # an edit is checked against the tools: MCP servers' too
            paused = self._pauses.find(turn.run_id, turn.caller)
            checked = self._agent.check_decisions(paused, turn.decided, now=datetime.now(UTC))
            self._pauses.take(paused.run_id, resumed_in=self._run_id)  # nothing awaited since
        except (ApprovalError, ConfigurationError, McpServerError) as exc:
            raise _Refused(exc) from exc
        return _Held.resuming(checked)

    def holding(self) -> contextlib.AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    async def abort(self, error: BaseException) -> None:
        return None

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        if outcome.pause is not None:
            self._pauses.keep(outcome.pause)
        return outcome


class _StoredBook:
    """An executor with a store: the turn's key, session and pause are claimed there, each LLM
    call is in the ledger as it ends, and the turn is appended when it answers (or the pause
    kept again). A busy, foreign or unwritable store refuses the turn before anything is
    spent; a request answered before under its idempotency key is replayed."""

    def __init__(self, agent: Agent, store: SqlStore, turn: Turn, run_id: str) -> None:
        self._agent, self._store, self._turn, self._run_id = agent, store, turn, run_id
        self._key: str | None = None
        """The idempotency key this turn claimed, once it did."""
        self._held: StoreRun | None = None
        self.record_call: CallRecorder | None = None

    async def begin(self) -> _Held | ExecutionResult:
        try:
            await self._store.open()
        except (ConfigurationError, StoreError) as exc:
            raise _Refused(exc) from exc
        turn = self._turn
        if isinstance(turn, Resumption):
            checked = await self._checked(turn)
            held = await self._hold_session(checked.paused.session_id, checked.paused)
            await _finished(held.claim_pause(checked.paused, checked), ApprovalError, StoreError)
            return _Held.resuming(checked)
        replay = await self._claim_key(turn)
        if replay is not None:
            return replay
        held = await self._hold_session(turn.session_id, None)
        superseded = await _finished(
            held.supersede_waiting_run(_declined_for_new_message), StoreError
        )
        history = turn.history if turn.session_id is None else [*held.history, *superseded]
        return _Held(turn.message, history, turn.session_id, turn.max_output_tokens, turn.can_pause)

    async def _checked(self, turn: Resumption) -> CheckedDecisions:
        try:
            await self._agent.open()  # an edit is checked against the tools: MCP servers' too
            paused = await self._store.paused_run(turn.run_id, caller=turn.caller)
            return self._agent.check_decisions(paused, turn.decided, now=datetime.now(UTC))
        except (ConfigurationError, StoreError, ApprovalError, McpServerError) as exc:
            raise _Refused(exc) from exc

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
        )
        claim = await _finished(
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
            held: StoreRun = await _finished(
                beginning,
                SessionBusyError,
                SessionNotFoundError,
                StoreError,
                on_claim=lambda claimed: setattr(self, "_held", claimed),
            )
        except _Refused as refused:
            if paused is not None and isinstance(refused.error, SessionBusyError):
                raise _Refused(_being_ended(paused, refused.error)) from refused.error
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
        if self._held is not None:
            await finish_despite_cancellation(self._held.abort(error))
        if self._key is not None:
            await finish_despite_cancellation(self._settle_key(_refused(self._run_id, error)))

    async def settle(self, outcome: RunOutcome) -> RunOutcome:
        held = cast("StoreRun", self._held)  # a turn is settled only once it began
        settled, is_cancelled = await finish_despite_cancellation(held.close(outcome))
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


def _end_trace(run_trace: RunTrace, outcome: RunOutcome) -> None:
    result = outcome.result
    if result.replayed:  # nothing ran: its tokens are on the first run's span, not twice
        run_trace.end(
            result.status, prompt_tokens=0, completion_tokens=0, cost_usd=None, error=None
        )
        return
    run_trace.end(
        result.status,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd,
        error=outcome.error,
    )


def _open(
    run_id: str,
    session_id: str | None,
    sink: Callable[[Event], None],
    *,
    resumed_from: str | None = None,
) -> None:
    """The run is open: its session held, its key claimed. Said once, to the events and the log."""
    sink(RunStarted(run_id=run_id, session_id=session_id, resumed_from=resumed_from))
    if resumed_from is None:
        logger.info("run %s started (session %s)", run_id, session_id or "none")
    else:
        logger.info(
            "run %s started (session %s), resuming run %s",
            run_id,
            session_id or "none",
            resumed_from,
        )


def _declined_for_new_message(paused: PausedRun) -> dict[str, ToolAnswer]:
    """What the model reads for the calls of a pause that a new message answered."""
    return {pending.call_id: not_run(pending.name, SUPERSEDED) for pending in paused.pending}


def _owned(outcome: RunOutcome, session_id: str | None, caller: str | None) -> RunOutcome:
    """The outcome with its pause (if it paused) naming the session and the caller it is for."""
    if outcome.pause is None:
        return outcome
    pause = replace(outcome.pause, session_id=session_id, caller=caller)
    return RunOutcome(outcome.result, outcome.error, outcome.turn, pause)


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


def _replay(
    stored: ExecutionResult, session_id: str | None, sink: Callable[[Event], None]
) -> RunOutcome:
    """The answer of the run that first served this request, given again: its text as one
    delta, its result marked `replayed`. Nothing runs; nothing is billed."""
    run_id = stored.run_id or ""  # a stored answer names its run: it was the run's own result
    sink(RunStarted(run_id=run_id, session_id=session_id, replayed=True))
    logger.info("run %s replayed for a repeated idempotency key: nothing ran", run_id)
    if stored.text:
        sink(TextDelta(round=max(stored.rounds, 1), text=stored.text))
    return RunOutcome(stored.model_copy(update={"replayed": True}))


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


def _refused(run_id: str, error: BaseException) -> ExecutionResult:
    """The result of a run refused before it began: nothing spent."""
    return ExecutionResult(text="", error=ErrorInfo.from_exception(error), run_id=run_id)


def _log_end(outcome: RunOutcome) -> None:
    result = outcome.result
    if result.replayed or not logger.isEnabledFor(logging.INFO):
        return  # a replay ran nothing; the totals are sums over the calls, made for nobody else
    usage = result.usage
    logger.info(
        "run %s %s: %d LLM calls, %d prompt + %d completion tokens%s",
        result.run_id,
        result.status,
        result.llm_calls,
        usage.prompt_tokens,
        usage.completion_tokens,
        " (estimated)" if usage.estimated else "",
    )


async def _finished(
    step: Awaitable[T],
    *refusals: type[BaseException],
    on_claim: Callable[[T], object] | None = None,
) -> T:
    """Run a step of the beginning to its end even if the caller leaves meanwhile. What it
    claimed is handed to `on_claim` first (so it is freed again), then a cancellation that came
    meanwhile is raised; an error of the `refusals` types refuses the turn.

    Raises:
        _Refused: the step failed with one of `refusals`.
        asyncio.CancelledError: the caller left while the step ran.
    """
    try:
        claimed, is_cancelled = await finish_despite_cancellation(step)
    except refusals as exc:
        raise _Refused(exc) from exc
    if on_claim is not None:
        on_claim(claimed)
    if is_cancelled:
        raise asyncio.CancelledError
    return claimed


def _as_decisions(
    run_id: str, decisions: Sequence[ApprovalDecision | Mapping[str, Any]]
) -> tuple[ApprovalDecision, ...]:
    """The decisions as models; one that is not a decision is refused, its problem named.

    Raises:
        InvalidDecisionError: a decision with an unknown or a missing field.
    """
    if isinstance(decisions, str | bytes | Mapping):
        raise InvalidDecisionError(
            f"decisions must be a list of decisions, not {type(decisions).__name__}",
            run_id=run_id,
        )
    checked: list[ApprovalDecision] = []
    for position, decision in enumerate(decisions):
        if isinstance(decision, ApprovalDecision):
            checked.append(decision)
            continue
        try:
            checked.append(ApprovalDecision.model_validate(decision))
        except ValidationError as exc:
            call_id = decision.get("call_id") if isinstance(decision, Mapping) else None
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'decision'}: {error['msg']}"
                for error in exc.errors()
            )
            raise InvalidDecisionError(
                f"decisions[{position}] is not a decision: {problems}",
                run_id=run_id,
                call_id=call_id if isinstance(call_id, str) else None,
            ) from None
    return tuple(checked)
