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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cleveractors.agents.base import Agent, History
from cleveractors.errors import (
    ConfigurationError,
    IdempotencyError,
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

__all__ = ["TurnRequest", "run_turn"]

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


async def run_turn(
    agent: Agent,
    store: SqlStore | None,
    request: TurnRequest,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
    telemetry: Telemetry | None = None,
) -> RunOutcome:
    """Run `request` through `agent` as run `run_id`. Never raises for a failed run: the outcome
    carries the result (every token spent, the run's id) and the error; only a cancellation
    that came before the run began gets through.

    With `telemetry`, the run is an `invoke_agent` span, the parent of its calls' spans; it
    ends here on every path."""
    if telemetry is None:
        return await _run_turn(agent, store, request, run_id=run_id, sink=sink, streaming=streaming)
    run_trace = telemetry.start_run(run_id, request.session_id)
    token = current_trace_var.set(run_trace)
    try:
        outcome = await _run_turn(
            agent, store, request, run_id=run_id, sink=sink, streaming=streaming
        )
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
    request: TurnRequest,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    logger.info("run %s started (session %s)", run_id, request.session_id or "none")
    if store is None:
        sink(RunStarted(run_id=run_id))
        outcome = await agent.run(
            request.message,
            history=request.history,
            sink=sink,
            streaming=streaming,
            run_id=run_id,
            max_output_tokens=request.max_output_tokens,
        )
    else:
        outcome = await _run_stored(
            agent, store, request, run_id=run_id, sink=sink, streaming=streaming
        )
    _log_end(outcome)
    return outcome


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
    await store.open()
    key = request.idempotency_key
    if key is None:
        return await _run_in_ledger(
            agent, store, request, run_id=run_id, sink=sink, streaming=streaming
        )
    from cleveractors.store.idempotency import Replay, request_digest

    digest = request_digest(request.message, request.history, request.session_id)
    try:
        claim = await store.claim_idempotency_key(
            caller=request.caller, key=key, request_digest=digest, run_id=run_id
        )
    except (IdempotencyError, ConfigurationError, StoreError) as exc:  # a key it cannot serve
        return RunOutcome(_refused(run_id, exc), exc)
    if isinstance(claim, Replay):
        return _replay(claim.result, request, sink)
    try:
        async with _holding_key(store, request.caller, key, run_id):
            outcome = await _run_in_ledger(
                agent, store, request, run_id=run_id, sink=sink, streaming=streaming
            )
    except BaseException as exc:  # a cancellation before the run began: the key is free again
        await finish_despite_cancellation(
            _settle_key(store, request, run_id, _refused(run_id, exc))
        )
        raise
    await finish_despite_cancellation(_settle_key(store, request, run_id, outcome.result))
    return outcome


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
    try:
        held = await store.begin_run(
            run_id=run_id, session_id=request.session_id, caller=request.caller
        )
    except (SessionBusyError, SessionNotFoundError, StoreError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    sink(RunStarted(run_id=run_id, session_id=request.session_id))
    history = request.history if request.session_id is None else held.history
    outcome = await _run_holding(agent, held, request, history, sink, streaming)
    settled, is_cancelled = await finish_despite_cancellation(held.close(outcome))
    if is_cancelled and settled.error is None:
        # Answered, billed and stored; the caller left while that was written.
        return RunOutcome(settled.result, asyncio.CancelledError(), settled.turn)
    return settled


async def _run_holding(
    agent: Agent,
    held: StoreRun,
    request: TurnRequest,
    history: History | None,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    recorder: CallRecorder = held.record_call
    try:
        return await agent.run(
            request.message,
            history=history,
            sink=sink,
            streaming=streaming,
            on_call=recorder,
            run_id=held.run_id,
            max_output_tokens=request.max_output_tokens,
        )
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
    assert stored.run_id is not None, "a stored result names its run"
    sink(RunStarted(run_id=stored.run_id, session_id=request.session_id, replayed=True))
    if stored.text:
        sink(TextDelta(round=max(stored.rounds, 1), text=stored.text))
    return RunOutcome(stored.model_copy(update={"replayed": True}))


@contextlib.asynccontextmanager
async def _holding_key(
    store: SqlStore, caller: str | None, key: str, run_id: str
) -> AsyncIterator[None]:
    """Renew the run's claim on its key every third of the store's lease while the run goes,
    as the run's hold on its session is renewed: a claim left to run out is a dead run's."""

    async def renew() -> None:
        while True:
            await asyncio.sleep(store.lease_s / 3)
            try:
                if not await store.renew_idempotency_key(caller=caller, key=key, run_id=run_id):
                    logger.warning("run %s lost its claim on idempotency key %r", run_id, key)
                    return
            except StoreError:  # the next renewal may succeed; the claim holds until then
                logger.warning("run %s: renewing idempotency key %r failed", run_id, key)

    renewal = asyncio.create_task(renew())
    try:
        yield
    finally:
        renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewal


async def _settle_key(
    store: SqlStore, request: TurnRequest, run_id: str, result: ExecutionResult
) -> None:
    """Keep an answer for the key's repeats, or free the key of a run that failed. The run's
    outcome stands either way: a key that cannot be settled only costs its repeats a rerun."""
    assert request.idempotency_key is not None
    try:
        await store.settle_idempotency_key(
            caller=request.caller, key=request.idempotency_key, run_id=run_id, result=result
        )
    except StoreError as exc:
        logger.warning(
            "run %s: settling idempotency key %r failed: %s", run_id, request.idempotency_key, exc
        )


def _refused(run_id: str, error: BaseException) -> ExecutionResult:
    """The result of a run refused before it began: nothing spent."""
    return ExecutionResult(text="", error=ErrorInfo.from_exception(error), run_id=run_id)


def _log_end(outcome: RunOutcome) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return  # the totals are sums over the calls: not worth making for nobody
    result = outcome.result
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
