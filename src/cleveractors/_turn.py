"""One turn, as `ActorExecutor` drives it: the one path every run takes, stored or not, blocking
or streaming.

    open the run (its one id) -> claim the session, load its history (with a store)
    -> run the agent (a sink for events, a recorder for each LLM call)
    -> settle: the ledger whole, the turn committed, the session freed -> the outcome

The store is a service this path calls; the agent runs the loop and knows nothing of either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from cleveractors._pause import MemoryPauses, PausedRun, ToolAnswer
from cleveractors.agents._approval import SUPERSEDED, not_run
from cleveractors.agents.base import Agent, History
from cleveractors.approvals import ApprovalDecision
from cleveractors.errors import (
    ApprovalConflictError,
    ApprovalError,
    ConfigurationError,
    IdempotencyError,
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

__all__ = ["ResumeRequest", "TurnRequest", "run_turn"]

logger = logging.getLogger("cleveractors.executor")


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """What a caller asked for: one message, and where its conversation lives."""

    message: str
    history: History | None = None
    session_id: str | None = None
    caller: str | None = None
    idempotency_key: str | None = None
    """With a store: a request sent again under the same key (by the same caller, with the same
    message, history and session) is answered by the first run's stored result."""
    max_output_tokens: int | None = None
    """A cap on the output of each of the run's LLM calls (never above the model's own)."""
    can_pause: bool = True
    """False where nobody can approve a tool call: gated calls are declined, never run."""


@dataclass(frozen=True, slots=True)
class ResumeRequest:
    """Decisions on a paused run segment, from the caller who owns it."""

    run_id: str
    decisions: tuple[ApprovalDecision, ...]
    caller: str | None = None


async def run_turn(
    agent: Agent,
    store: SqlStore | None,
    request: TurnRequest | ResumeRequest,
    *,
    pauses: MemoryPauses,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
    telemetry: Telemetry | None = None,
) -> RunOutcome:
    """Run `request` through `agent` as run `run_id`. Never raises for a failed run: the outcome
    carries the result (every token spent, the run's id) and the error; only a cancellation
    that came before the run began gets through.

    With `telemetry`, the run is an `invoke_agent` span, the parent of its calls' spans; it
    ends here on every path. Runs paused without a store are kept in `pauses`."""
    turn = _run_turn(
        agent, store, request, pauses=pauses, run_id=run_id, sink=sink, streaming=streaming
    )
    if telemetry is None:
        return await turn
    session_id = request.session_id if isinstance(request, TurnRequest) else None
    run_trace = telemetry.start_run(run_id, session_id)
    token = current_trace_var.set(run_trace)
    try:
        outcome = await turn
    except BaseException as exc:  # a cancellation before the run began, or an escape
        status = "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"
        run_trace.end(status, prompt_tokens=0, completion_tokens=0, cost_usd=None, error=exc)
        raise
    finally:
        current_trace_var.reset(token)
    _end_trace(run_trace, outcome)
    return outcome


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


async def _run_turn(
    agent: Agent,
    store: SqlStore | None,
    request: TurnRequest | ResumeRequest,
    *,
    pauses: MemoryPauses,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    if isinstance(request, ResumeRequest):
        if store is None:
            outcome = await _resume_in_memory(agent, pauses, request, run_id, sink, streaming)
        else:
            outcome = await _resume_stored(agent, store, request, run_id, sink, streaming)
    elif store is None:
        _open(run_id, request.session_id, sink)
        outcome = await agent.run(
            request.message,
            history=request.history,
            sink=sink,
            streaming=streaming,
            run_id=run_id,
            max_output_tokens=request.max_output_tokens,
            can_pause=request.can_pause,
        )
        _keep_in_memory(pauses, outcome, request.caller)
    else:
        outcome = await _run_stored(
            agent, store, request, run_id=run_id, sink=sink, streaming=streaming
        )
    _log_end(outcome)
    return outcome


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


async def _run_stored(
    agent: Agent,
    store: SqlStore,
    request: TurnRequest,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    """The stored turn, under its idempotency key when it has one: a request answered before is
    replayed, one still running or another request's key is refused, before anything is spent."""
    try:
        await store.open()
    except (ConfigurationError, StoreError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    key = request.idempotency_key
    if key is None:
        return await _run_in_ledger(
            agent, store, request, run_id=run_id, sink=sink, streaming=streaming
        )
    # The store extra is installed: this executor has a store.
    from cleveractors.store.idempotency import Replay, request_digest

    digest = request_digest(
        request.message,
        request.history,
        request.session_id,
        max_output_tokens=request.max_output_tokens,
    )
    claiming = store.claim_idempotency_key(
        caller=request.caller, key=key, request_digest=digest, run_id=run_id
    )
    try:
        claim, is_cancelled = await finish_despite_cancellation(claiming)
    except (IdempotencyError, ConfigurationError, StoreError) as exc:  # a key it cannot serve
        return RunOutcome(_refused(run_id, exc), exc)
    if isinstance(claim, Replay):
        if is_cancelled:
            raise asyncio.CancelledError
        return _replay(claim.result, request, sink)
    try:
        if is_cancelled:
            raise asyncio.CancelledError  # the claim was made as the caller left: free it
        async with _holding_key(store, request.caller, key, run_id):
            outcome = await _run_in_ledger(
                agent, store, request, run_id=run_id, sink=sink, streaming=streaming
            )
    except BaseException as exc:  # cancelled before the run began: the key is free again
        await finish_despite_cancellation(
            _settle_key(store, request.caller, key, run_id, _refused(run_id, exc))
        )
        raise
    _, is_cancelled = await finish_despite_cancellation(
        _settle_key(store, request.caller, key, run_id, outcome.result)
    )
    return _cancelled_after(outcome) if is_cancelled else outcome


async def _run_in_ledger(
    agent: Agent,
    store: SqlStore,
    request: TurnRequest,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    """The session's history in, one ledger row per LLM call as it ends, the new turn appended
    when the run answered. A busy, foreign or unwritable store refuses the run before anything
    is spent."""
    beginning = store.begin_run(run_id=run_id, session_id=request.session_id, caller=request.caller)
    try:
        held, is_cancelled = await finish_despite_cancellation(beginning)
    except (SessionBusyError, SessionNotFoundError, StoreError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    if is_cancelled:  # the session was claimed as the caller left: free it at once
        await finish_despite_cancellation(held.abort(asyncio.CancelledError()))
        raise asyncio.CancelledError
    try:
        superseded, is_cancelled = await finish_despite_cancellation(
            held.supersede_waiting_run(_declined_for_new_message)
        )
    except StoreError as exc:
        await finish_despite_cancellation(held.abort(exc))
        return RunOutcome(_refused(run_id, exc), exc)
    if is_cancelled:
        await finish_despite_cancellation(held.abort(asyncio.CancelledError()))
        raise asyncio.CancelledError
    _open(run_id, request.session_id, sink)
    history = request.history if request.session_id is None else [*held.history, *superseded]

    def run(recorder: CallRecorder) -> Awaitable[RunOutcome]:
        return agent.run(
            request.message,
            history=history,
            sink=sink,
            streaming=streaming,
            on_call=recorder,
            run_id=held.run_id,
            max_output_tokens=request.max_output_tokens,
            can_pause=request.can_pause,
        )

    outcome = _owned(await _run_holding_session(held, run), request.session_id, request.caller)
    settled, is_cancelled = await finish_despite_cancellation(held.close(outcome))
    return _cancelled_after(settled) if is_cancelled else settled


def _declined_for_new_message(paused: PausedRun) -> dict[str, ToolAnswer]:
    """What the model reads for the calls of a pause that a new message answered."""
    return {pending.call_id: not_run(pending.name, SUPERSEDED) for pending in paused.pending}


def _owned(outcome: RunOutcome, session_id: str | None, caller: str | None) -> RunOutcome:
    """The outcome with its pause (if it paused) naming the session and the caller it is for."""
    if outcome.pause is None:
        return outcome
    pause = replace(outcome.pause, session_id=session_id, caller=caller)
    return RunOutcome(outcome.result, outcome.error, outcome.turn, pause)


def _keep_in_memory(pauses: MemoryPauses, outcome: RunOutcome, caller: str | None) -> None:
    if outcome.pause is not None:
        pauses.keep(replace(outcome.pause, caller=caller))


async def _resume_in_memory(
    agent: Agent,
    pauses: MemoryPauses,
    request: ResumeRequest,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    """Resume a run this executor paused and keeps in memory (it has no store)."""
    try:
        await agent.open()  # an edit is checked against the tools: MCP servers' ones too
        paused = pauses.find(request.run_id, request.caller)
        checked = agent.check_decisions(paused, request.decisions, now=datetime.now(UTC))
        pauses.take(paused.run_id, resumed_in=run_id)  # nothing awaited since `find`
    except (ApprovalError, ConfigurationError, McpServerError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    _open(run_id, None, sink, resumed_from=paused.run_id)
    outcome = await agent.resume(paused, checked, sink=sink, streaming=streaming, run_id=run_id)
    _keep_in_memory(pauses, outcome, request.caller)
    return outcome


async def _resume_stored(
    agent: Agent,
    store: SqlStore,
    request: ResumeRequest,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    """Resume a paused run from the store, on any worker: its session held again, the pause
    taken by one resumption only (the decisions recorded with it), each LLM call in the
    ledger, and the turn appended when it answers (or the pause kept again)."""
    try:
        await store.open()
        await agent.open()  # an edit is checked against the tools: MCP servers' ones too
        paused = await store.paused_run(request.run_id, caller=request.caller)
        checked = agent.check_decisions(paused, request.decisions, now=datetime.now(UTC))
    except (ConfigurationError, StoreError, ApprovalError, McpServerError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    beginning = store.begin_run(run_id=run_id, session_id=paused.session_id, caller=request.caller)
    try:
        held, is_cancelled = await finish_despite_cancellation(beginning)
    except SessionBusyError as exc:
        conflict = _being_ended(paused, exc)
        return RunOutcome(_refused(run_id, conflict), conflict)
    except (SessionNotFoundError, StoreError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    try:
        if is_cancelled:
            raise asyncio.CancelledError
        _, is_cancelled = await finish_despite_cancellation(held.claim_pause(paused, checked))
        if is_cancelled:
            raise asyncio.CancelledError
    except (ApprovalError, StoreError) as exc:
        await finish_despite_cancellation(held.abort(exc))
        return RunOutcome(_refused(run_id, exc), exc)
    except BaseException as exc:
        await finish_despite_cancellation(held.abort(exc))
        raise
    _open(run_id, paused.session_id, sink, resumed_from=paused.run_id)

    def run(recorder: CallRecorder) -> Awaitable[RunOutcome]:
        return agent.resume(
            paused, checked, sink=sink, streaming=streaming, on_call=recorder, run_id=run_id
        )

    outcome = _owned(await _run_holding_session(held, run), paused.session_id, request.caller)
    settled, is_cancelled = await finish_despite_cancellation(held.close(outcome))
    return _cancelled_after(settled) if is_cancelled else settled


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


async def _run_holding_session(
    held: StoreRun, run: Callable[[CallRecorder], Awaitable[RunOutcome]]
) -> RunOutcome:
    """The agent's run, each LLM call recorded in the ledger as it ends."""
    try:
        return await run(held.record_call)
    except BaseException as exc:
        # `agent.run` makes a failed run its outcome: what gets here is a cancellation that came
        # before the run began (or an agent that broke that promise). Free the session, then let
        # it through.
        await finish_despite_cancellation(held.abort(exc))
        raise


def _replay(
    stored: ExecutionResult, request: TurnRequest, sink: Callable[[Event], None]
) -> RunOutcome:
    """The answer of the run that first served this request, given again: its text as one
    delta, its result marked `replayed`. Nothing runs; nothing is billed."""
    run_id = stored.run_id or ""  # a stored answer names its run: it was the run's own result
    sink(RunStarted(run_id=run_id, session_id=request.session_id, replayed=True))
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


async def _settle_key(
    store: SqlStore, caller: str | None, key: str, run_id: str, result: ExecutionResult
) -> None:
    """Keep an answer for the key's repeats, or free the key of a run that failed. The run's
    outcome stands either way: a key that cannot be settled is free again once its lease runs
    out, and costs its repeats a rerun (said in the log)."""
    try:
        is_settled = await store.settle_idempotency_key(
            caller=caller, key=key, run_id=run_id, result=result
        )
    except StoreError as exc:
        logger.warning("run %s: settling idempotency key %r failed: %s", run_id, key, exc)
        return
    if not is_settled:
        logger.warning("run %s no longer held idempotency key %r when it settled", run_id, key)


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
