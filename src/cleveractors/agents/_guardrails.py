"""An agent's guardrails as the loop runs them: the input's before (or beside) the first model
call, the output's on the final answer, each verdict a span and a log line.

`Guardrails` is the agent's (built once); `RunGuards` is one run's: it wraps the run's event sink,
so the text an output guardrail holds (`hold_until_checked`) waits there until the answer passes,
and it knows whether any text went out, so a tripwire after it sends `OutputRetracted`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage

from cleveractors.agents._loop import EventSink, _Run, _Step, _ToolLoopResult
from cleveractors.agents.base import Agent, discard_event
from cleveractors.errors import ConfigurationError, GuardrailTripped
from cleveractors.events import Event, OutputDelta, OutputRetracted, TextDelta
from cleveractors.guardrails import (
    Guardrail,
    GuardrailCheck,
    GuardrailInput,
    GuardrailResult,
    GuardrailStage,
    InputGuardrail,
    OutputGuardrail,
)
from cleveractors.tracing import current_trace
from cleveractors.usage import LLMCallUsage

__all__ = ["Guardrails", "RunGuards", "judge_verdict"]

# The agent's logger, whichever of its modules writes: users filter on it.
logger = logging.getLogger("cleveractors.agents.llm")

_JUDGE_PROMPT = (
    "Check the {what} below against your instructions. Reply with PASS if it is acceptable; "
    "otherwise reply with FAIL: followed by the reason in one sentence.\n\n{text}"
)
_WHAT: dict[GuardrailStage, str] = {"input": "user's message", "output": "answer"}

G = TypeVar("G", bound=Guardrail)


class Guardrails:
    """An agent's input and output guardrails.

    Raises:
        ConfigurationError: two guardrails of one stage share a name.
    """

    __slots__ = ("agent_name", "inputs", "outputs")

    def __init__(
        self,
        inputs: Sequence[InputGuardrail | GuardrailCheck],
        outputs: Sequence[OutputGuardrail | GuardrailCheck],
        *,
        agent_name: str,
    ) -> None:
        self.agent_name = agent_name
        self.inputs = _named(InputGuardrail, inputs, agent_name, "input")
        self.outputs = _named(OutputGuardrail, outputs, agent_name, "output")

    def for_run(self, sink: EventSink) -> RunGuards:
        """What one run needs of them, around the run's event sink."""
        holds = any(guard.hold_until_checked for guard in self.outputs)
        return RunGuards(self, sink, holds=holds)


def _named(
    kind: type[G],
    guards: Sequence[G | GuardrailCheck],
    agent_name: str,
    stage: GuardrailStage,
) -> tuple[G, ...]:
    made = tuple(guard if isinstance(guard, kind) else kind(guard) for guard in guards)  # type: ignore[arg-type]  # a bare check is the guardrail's function
    names = [guard.name for guard in made]
    for name in names:
        if names.count(name) > 1:
            raise ConfigurationError(
                f"agent {agent_name!r}: two {stage} guardrails are named {name!r}"
            )
    return made


class RunGuards:
    """One run's guardrails: its sink (holding text while an output guardrail asks for it), the
    first model call with the input guardrails, and the answer with the output guardrails."""

    __slots__ = ("_guards", "_held", "_is_holding", "_outer", "has_sent_text", "sink")

    def __init__(self, guards: Guardrails, sink: EventSink, *, holds: bool) -> None:
        self._guards = guards
        self._outer = sink
        self._is_holding = holds
        self._held: list[Event] = []
        self.has_sent_text = False
        """Whether any text event reached the run's sink (what a tripwire must take back)."""
        has_guards = bool(guards.inputs or guards.outputs)
        self.sink: EventSink = self._pass if has_guards and sink is not discard_event else sink

    def _pass(self, event: Event) -> None:
        if isinstance(event, TextDelta | OutputDelta):  # the answer's text, or its object
            if self._is_holding:
                self._held.append(event)
                return
            self.has_sent_text = True
        self._outer(event)

    def release(self) -> None:
        """Send the held text: the answer passed (or the run paused, with no answer to check)."""
        self._is_holding = False
        held, self._held = self._held, []
        for event in held:
            self._pass(event)

    async def first_round(self, run: _Run, ask: Callable[[_Run], Awaitable[_Step]]) -> _Step:
        """The run's first round, after the input guardrails (beside those that run in
        parallel: a tripwire cancels the round's model call, which is billed as cancelled).

        Raises:
            GuardrailTripped: an input guardrail tripped.
        """
        text = run.transcript.user_message
        parallel = [guard for guard in self._guards.inputs if guard.run_in_parallel]
        for guard in self._guards.inputs:
            if not guard.run_in_parallel:
                self._raise_if_tripped(guard, await self._verdict(run, guard, "input", text))
        if not parallel:
            return await ask(run)
        model = asyncio.ensure_future(ask(run))
        checks: dict[asyncio.Future[Any], InputGuardrail] = {
            asyncio.ensure_future(self._verdict(run, guard, "input", text)): guard
            for guard in parallel
        }
        try:
            pending: set[asyncio.Future[Any]] = {model, *checks}
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    verdict = task.result()  # a failed check, or model call, fails the run
                    if isinstance(verdict, GuardrailResult):
                        self._raise_if_tripped(checks[task], verdict)
            return model.result()
        except BaseException:
            for task in (model, *checks):
                task.cancel()
            await asyncio.gather(model, *checks, return_exceptions=True)
            raise

    async def finish(self, run: _Run, answer: AIMessage) -> _ToolLoopResult:
        """The run's result, once every output guardrail passed the answer.

        Raises:
            GuardrailTripped: an output guardrail tripped (held text is dropped; text already
                sent is retracted by an `OutputRetracted` event).
        """
        for guard in self._guards.outputs:
            verdict = await self._verdict(run, guard, "output", answer.text, output=run.output)
            self._raise_if_tripped(guard, verdict)
        self.release()
        return run.result(answer)

    def _raise_if_tripped(self, guard: Guardrail, verdict: GuardrailResult) -> None:
        if not verdict.tripped:
            return
        stage: GuardrailStage = "input" if isinstance(guard, InputGuardrail) else "output"
        self._held.clear()
        self._is_holding = False
        if self.has_sent_text:
            self._outer(OutputRetracted(guardrail=guard.name, reason=verdict.reason))
        raise GuardrailTripped(guard.name, stage=stage, reason=verdict.reason)

    async def _verdict(
        self,
        run: _Run,
        guard: Guardrail,
        stage: GuardrailStage,
        text: str,
        *,
        output: object = None,
    ) -> GuardrailResult:
        """The guardrail's verdict on TEXT, as a span of the run's trace and a log line."""
        trace = current_trace()
        span = None if trace is None else trace.start_guardrail(guard.name, stage)
        try:
            if guard.judge is not None:
                verdict = await _ask_judge(run, guard.judge, stage, text)
            else:
                checked = GuardrailInput(
                    stage=stage,
                    text=text,
                    actor=self._guards.agent_name,
                    run_id=run.run_id,
                    output=output,
                    context=run.context,
                )
                # A guardrail without a judge has a check (`Guardrail` makes sure of it).
                check = cast(GuardrailCheck, guard.check)
                verdict = await _call_check(guard.name, check, checked)
        except BaseException as exc:
            if span is not None:
                span.end(tripped=None, reason="", error=exc)
            raise
        if span is not None:
            span.end(tripped=verdict.tripped, reason=verdict.reason, error=None)
        _log(run, guard.name, stage, verdict)
        return verdict


async def _call_check(name: str, check: GuardrailCheck, checked: GuardrailInput) -> GuardrailResult:
    """Call the function (a sync one in a worker thread, so a parallel check never stalls the
    model call's stream)."""
    if inspect.iscoroutinefunction(check):
        verdict: object = await check(checked)
    else:
        verdict = await asyncio.to_thread(check, checked)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    if not isinstance(verdict, GuardrailResult):
        raise TypeError(
            f"guardrail {name!r} returned {type(verdict).__name__}, not a GuardrailResult"
        )
    return verdict


async def _ask_judge(run: _Run, judge: Agent, stage: GuardrailStage, text: str) -> GuardrailResult:
    """Ask the judge agent; each of its calls is billed into the run as the judge records it."""
    bill = run.bill

    async def bill_call(call: LLMCallUsage) -> None:
        bill.record_judged_call(call, round=run.round)
        await bill.flush_calls()

    outcome = await judge.run(
        _JUDGE_PROMPT.format(what=_WHAT[stage], text=text),
        history=None,
        sink=discard_event,
        streaming=False,
        on_call=bill_call,
        # A run of its own (its logs name it), never taken for a child run of an agent tool:
        # its calls are this run's, billed here alone.
        run_id=None,
        can_pause=False,
    )
    if outcome.error is not None:
        raise outcome.error
    return judge_verdict(outcome.result.answer)


def judge_verdict(answer: str) -> GuardrailResult:
    """A judge's reply as a verdict: `PASS` passes; anything else trips, with the reason after
    `FAIL:` (or the whole reply) as the reason."""
    reply = answer.strip()
    if reply.upper().startswith("PASS"):
        return GuardrailResult.passed()
    head, colon, reason = reply.partition(":")
    if colon and head.strip().upper() == "FAIL" and reason.strip():
        return GuardrailResult.trip(reason.strip())
    return GuardrailResult.trip(reply or "the judge gave no verdict")


def _log(run: _Run, name: str, stage: GuardrailStage, verdict: GuardrailResult) -> None:
    if verdict.tripped:
        logger.warning(
            "agent %s, run %s: %s guardrail %s tripped: %s",
            run.agent_name,
            run.run_id,
            stage,
            name,
            verdict.reason,
        )
    else:
        logger.info(
            "agent %s, run %s: %s guardrail %s passed", run.agent_name, run.run_id, stage, name
        )
