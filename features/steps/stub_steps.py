"""Steps about the `stub` provider replaying its script for every run of an executor."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from behave import given, then, when
from behave.runner import Context
from support.harness import consume

from cleveractors import ActorExecutor, ExecutionResult, Resumption


@given("the stub actor file:")
def _given_stub_actor(context: Context) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-stub-"))
    path = folder / "actor.yaml"
    path.write_text(context.text, encoding="utf-8")
    context.add_cleanup(shutil.rmtree, folder)
    context.stub_path = path
    context.stub_executor = ActorExecutor.from_config(path)


async def _ask(executor: ActorExecutor, message: str, mode: str) -> ExecutionResult:
    consumed = await consume(executor, message, mode="text" if mode == "streaming" else "blocking")
    assert consumed.result is not None, f"the run left no result: {consumed.error!r}"
    return consumed.result


@when('the stub actor is asked "{message}" {count:d} times in {mode} mode')
def _when_asked_in_turn(context: Context, message: str, count: int, mode: str) -> None:
    async def in_turn() -> list[ExecutionResult]:
        return [await _ask(context.stub_executor, message, mode) for _ in range(count)]

    context.stub_results = asyncio.run(in_turn())


@when('the stub actor is asked "{message}" {count:d} times at once')
def _when_asked_at_once(context: Context, message: str, count: int) -> None:
    async def at_once() -> list[ExecutionResult]:
        modes = ["blocking", "streaming"] * count
        runs = (_ask(context.stub_executor, message, mode) for mode in modes[:count])
        return list(await asyncio.gather(*runs))

    context.stub_results = asyncio.run(at_once())


@when('the stub actor pauses on "{message}", and a new executor of its file approves every call')
def _when_paused_and_resumed_elsewhere(context: Context, message: str) -> None:
    async def pause_then_resume() -> list[ExecutionResult]:
        async with context.stub_executor as first:
            paused = await first.execute(message)
        assert paused.status == "paused", f"the run did not pause: {paused}"
        decisions = [
            {"call_id": c.call_id, "decision": "approve"} for c in paused.pending_approvals
        ]
        async with ActorExecutor.from_config(context.stub_path) as second:
            return [paused, await second.execute(Resumption(paused.run_id, decisions))]

    context.stub_results = asyncio.run(pause_then_resume())[1:]


@then('every run answered "{text}" after {calls:d} LLM calls')
def _then_every_run_answered(context: Context, text: str, calls: int) -> None:
    for number, result in enumerate(context.stub_results, start=1):
        assert result.error is None, f"run {number} failed: {result.error}"
        assert result.answer == text, f"run {number} answered {result.answer!r}"
        assert result.llm_calls == calls, f"run {number} made {result.llm_calls} calls"


@then("every run has its own run id")
def _then_own_run_ids(context: Context) -> None:
    ids = [result.run_id for result in context.stub_results]
    assert all(ids), ids
    assert len(set(ids)) == len(ids), ids


@then('every run failed with {error_type} "{message}"')
def _then_every_run_failed(context: Context, error_type: str, message: str) -> None:
    for number, result in enumerate(context.stub_results, start=1):
        assert result.error is not None, f"run {number} did not fail"
        assert result.error.type == error_type, f"run {number}: {result.error}"
        assert message in result.error.message, f"run {number}: {result.error.message}"
