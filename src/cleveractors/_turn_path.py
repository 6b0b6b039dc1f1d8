"""The one path every turn takes (`run_turn`):

    begin   claim what the turn needs: its idempotency key, its session (and the session's
            history), and for a resumption its pause, the decisions checked; a new message on
            a session supersedes the pause that waits there
    -> run  the agent's run (a sink for events, a recorder for each LLM call)
    -> settle  the ledger whole, the turn committed or the pause kept, the session and key freed

One body for every turn (`cleveractors.turns`), stored or not, new or resumed, blocking or
streaming. With a store each step is the store's, on any worker; without one the pauses are kept
in this process (`MemoryPauses`). The store is a service this path calls; the agent runs the loop
and knows nothing of either.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from cleveractors._pause import MemoryPauses
from cleveractors._spend_gate import current_call_spend
from cleveractors._turn_books import Book, MemoryBook, Refused, StoredBook, refused_result
from cleveractors.agents import LLMAgent
from cleveractors.agents.base import Agent
from cleveractors.context import RunContext
from cleveractors.errors import SpendLimitExceeded
from cleveractors.events import Event, RunStarted, TextDelta
from cleveractors.result import ExecutionResult, RunOutcome
from cleveractors.runs import finish_despite_cancellation
from cleveractors.spend_limits import SpendPolicy
from cleveractors.tracing import RunTrace, Telemetry, current_trace_var
from cleveractors.turns import NewMessage, Turn

if TYPE_CHECKING:
    from collections.abc import Callable

    from cleveractors.store import SqlStore

__all__ = ["run_turn"]

logger = logging.getLogger("cleveractors.executor")


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
    deps: object = None,
    spend: SpendPolicy | None = None,
) -> RunOutcome:
    """Run `turn` through `agent` as run `run_id`, its tools given `deps` (in memory only).
    Never raises for a failed run: the outcome carries the result (every token spent, the run's
    id) and the error; only a cancellation that came before the run began gets through.

    With `telemetry`, the run is an `invoke_agent` span, the parent of its calls' spans; it
    ends here on every path. Runs paused without a store are kept in `pauses`. With `spend`,
    the caller's spend limits hold for every LLM call (they need a store)."""
    book: Book = (
        MemoryBook(agent, pauses, turn, run_id)
        if store is None
        else StoredBook(agent, store, turn, run_id, spend=spend)
    )
    running = _run_turn(agent, book, turn, run_id=run_id, sink=sink, streaming=streaming, deps=deps)
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
    if _was_stopped_by_spend_limit(outcome):
        telemetry.count_spend_refusal()
    return outcome


async def _run_turn(
    agent: Agent,
    book: Book,
    turn: Turn,
    *,
    run_id: str,
    sink: Callable[[Event], None],
    streaming: bool,
    deps: object,
) -> RunOutcome:
    """Begin, run the held turn, settle: the same steps for every turn."""
    try:
        held = await book.begin()
    except Refused as refused:
        await finish_despite_cancellation(book.abort(refused.error))
        result = refused_result(run_id, refused.error, refused.spend_left)
        return RunOutcome(result, refused.error)
    except BaseException as exc:  # cancelled as it began: whatever it claimed is free again
        await finish_despite_cancellation(book.abort(exc))
        raise
    if isinstance(held, ExecutionResult):
        outcome = _replay(held, _session_of(turn), sink)
    else:
        _open(run_id, held.session_id, sink, resumed_from=held.resumed_from)
        token = current_call_spend.set(book.call_spend)
        try:
            async with book.holding():
                running_agent = _active(agent, held.active_agent)
                ran = await running_agent.run(
                    held.start,
                    history=held.history,
                    sink=sink,
                    streaming=streaming,
                    on_call=book.record_call,
                    run_id=run_id,
                    max_output_tokens=held.max_output_tokens,
                    can_pause=held.can_pause,
                    context=RunContext(
                        run_id=run_id,
                        actor=running_agent.name,
                        deps=deps,
                        session_id=held.session_id,
                        caller=turn.caller,
                    ),
                    session_id=held.session_id,
                    output_schema=held.output_schema,
                )
        except BaseException as exc:
            # `agent.run` makes a failed run its outcome: what gets here is a cancellation that
            # came before the run began (or an agent that broke that promise). Free what the
            # turn holds, then let it through.
            await finish_despite_cancellation(book.abort(exc))
            raise
        finally:
            current_call_spend.reset(token)
        outcome = await book.settle(_owned(ran, held.session_id, turn.caller))
    _log_end(outcome)
    return outcome


def _was_stopped_by_spend_limit(outcome: RunOutcome) -> bool:
    """Whether the caller's spend limit refused the turn or one of its calls."""
    return (
        isinstance(outcome.error, SpendLimitExceeded)
        or outcome.result.synthesis_reason == "spend_limit"
    )


def _active(agent: Agent, name: str | None) -> Agent:
    """The agent the turn runs on: the one a handoff left the session (or the paused run)
    with, found among those the executor's agent can hand off to; else the executor's own."""
    if name is None or name == agent.name or not isinstance(agent, LLMAgent):
        return agent
    found = agent.handoff_agent(name)
    if found is None:
        logger.warning(
            "actor %r, to which a handoff passed the conversation, is no longer among the "
            "handoffs of %r; the turn runs on %r",
            name,
            agent.name,
            agent.name,
        )
        return agent
    return found


def _session_of(turn: Turn) -> str | None:
    """The session a turn names (a resumption's is its pause's, known once it is read)."""
    return turn.session_id if isinstance(turn, NewMessage) else None


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


def _owned(outcome: RunOutcome, session_id: str | None, caller: str | None) -> RunOutcome:
    """The outcome with its pause (if it paused) naming the session and the caller it is for."""
    if outcome.pause is None:
        return outcome
    pause = replace(outcome.pause, session_id=session_id, caller=caller)
    return RunOutcome(outcome.result, outcome.error, outcome.turn, pause)


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
