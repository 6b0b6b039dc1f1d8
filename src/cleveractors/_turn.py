"""One turn, as `ActorExecutor` drives it: the one path every run takes, stored or not, blocking
or streaming.

    open the run (its one id) -> claim the session, load its history (with a store)
    -> run the agent (a sink for events, a recorder for each LLM call)
    -> settle: the ledger whole, the turn committed, the session freed -> the outcome

The store is a service this path calls; the agent runs the loop and knows nothing of either.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cleveractors._cancellation import finish_despite_cancellation
from cleveractors.agents.base import Agent, History
from cleveractors.errors import SessionBusyError, SessionNotFoundError, StoreError
from cleveractors.events import Event, RunStarted
from cleveractors.result import ErrorInfo, ExecutionResult, RunOutcome
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


async def run_turn(
    agent: Agent,
    store: SqlStore | None,
    request: TurnRequest,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    """Run `request` through `agent` as run `run_id`. Never raises for a failed run: the outcome
    carries the result (every token spent, the run's id) and the error; only a cancellation
    that came before the run began gets through."""
    logger.info("run %s started (session %s)", run_id, request.session_id or "none")
    if store is None:
        sink(RunStarted(run_id=run_id))
        outcome = await agent.run(
            request.message,
            history=request.history,
            sink=sink,
            streaming=streaming,
            run_id=run_id,
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
    """The stored turn: the session's history in, one ledger row per LLM call as it ends, the
    new turn appended when the run answered. A busy, foreign or unwritable store refuses the
    run before anything is spent."""
    await store.open()
    try:
        held = await store.begin_run(
            run_id=run_id, session_id=request.session_id, caller=request.caller
        )
    except (SessionBusyError, SessionNotFoundError, StoreError) as exc:
        return RunOutcome(_refused(run_id, exc), exc)
    sink(RunStarted(run_id=run_id, session_id=request.session_id))
    history = request.history if request.session_id is None else held.history
    outcome = await _run_holding(agent, held, request.message, history, sink, streaming)
    settled, is_cancelled = await finish_despite_cancellation(held.close(outcome))
    if is_cancelled and settled.error is None:
        # Answered, billed and stored; the caller left while that was written.
        return RunOutcome(settled.result, asyncio.CancelledError(), settled.turn)
    return settled


async def _run_holding(
    agent: Agent,
    held: StoreRun,
    message: str,
    history: History | None,
    sink: Callable[[Event], None],
    streaming: bool,
) -> RunOutcome:
    recorder: CallRecorder = held.record_call
    try:
        return await agent.run(
            message,
            history=history,
            sink=sink,
            streaming=streaming,
            on_call=recorder,
            run_id=held.run_id,
        )
    except BaseException as exc:
        # `agent.run` makes a failed run its outcome: what gets here is a cancellation that came
        # before the run began (or an agent that broke that promise). Free the session, then let
        # it through.
        await finish_despite_cancellation(held.abort(exc))
        raise


def _refused(run_id: str, error: BaseException) -> ExecutionResult:
    """The result of a run refused before it began: nothing spent."""
    return ExecutionResult(text="", error=ErrorInfo.from_exception(error), run_id=run_id)


def _log_end(outcome: RunOutcome) -> None:
    result = outcome.result
    logger.info(
        "run %s %s: %d LLM calls, %d prompt + %d completion tokens%s",
        result.run_id,
        result.status,
        result.llm_calls,
        result.prompt_tokens,
        result.completion_tokens,
        " (estimated)" if result.usage_estimated else "",
    )
