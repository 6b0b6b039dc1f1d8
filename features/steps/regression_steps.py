"""Steps for the review regressions: tool handlers that misbehave in the ways a review found, a
model that leaves tool call ids out, handler modules that cannot be imported, and the checks that
pin each fix down.

Every step text starts with "regression:" so it never collides with the shared steps, which these
scenarios reuse for the rest (script tables, asking the actor, reading the model's requests).
The handlers here are defined in this module and built into an agent in code; config-file
scenarios import their handlers from `cleveractors.demo` or from a module a step
writes to a temporary folder on `sys.path`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context
from support.harness import Mode, Stop, consume, run_guarded, tool_started, wait_until

from cleveractors import (
    ActorExecutor,
    ConfigurationError,
    LLMAgent,
    Tool,
    demo,
    tool_from_callable,
)
from cleveractors.testing import ScriptedChatModel

_STALL_S = 30.0
"""How long a stalled handler sleeps: far longer than any scenario waits for it."""

# ==============================================================================================
# HANDLERS
# ==============================================================================================


_handler_ends: dict[str, str] = {}
"""How each call of the handlers below ended (started, failed, completed, cancelled), by its
`query` argument; emptied when a scenario builds its actor."""


async def upstream_lookup(query: str) -> str:
    """A lookup whose HTTP client gave up: the handler itself raises `TimeoutError`.

    Args:
        query: What to look up.
    """
    _handler_ends[query] = "failed"
    raise TimeoutError("upstream timed out")


async def tuple_keyed_lookup(query: str) -> dict[tuple[int, int], str]:
    """A lookup returning a mapping JSON cannot encode (tuple keys).

    Args:
        query: What to look up.
    """
    _handler_ends[query] = "failed"
    return {(1, 2): "x"}


async def missing_lookup(query: str) -> str:
    """A lookup that raises an ordinary exception.

    Args:
        query: What to look up.
    """
    _handler_ends[query] = "failed"
    raise LookupError(f"no index for {query!r}")


async def sibling_lookup(query: str) -> str:
    """A lookup that finishes only after another call of its batch has failed, so a batch that
    cancelled its other calls on a failure would cancel this one.

    Args:
        query: What to look up.
    """
    try:
        await wait_until(lambda: "failed" in _handler_ends.values())
        await asyncio.sleep(0.01)  # the failure reaches the batch while this call still runs
    except asyncio.CancelledError:
        _handler_ends[query] = "cancelled"
        raise
    _handler_ends[query] = "completed"
    return f"{query}: found"


async def stalled_lookup(query: str) -> str:
    """A lookup that hangs until cancelled.

    Args:
        query: What to look up.
    """
    _handler_ends[query] = "started"
    try:
        await asyncio.sleep(_STALL_S)
    except asyncio.CancelledError:
        _handler_ends[query] = "cancelled"
        raise
    _handler_ends[query] = "completed"
    return f"{query}: found"


def confirm_quietly(booking: str) -> str:
    """Confirm a booking with an empty answer (an `ends_turn` tool with nothing to say).

    Args:
        booking: What to confirm.
    """
    return ""


_HANDLERS: dict[str, Callable[..., Any]] = {
    "upstream_lookup": upstream_lookup,
    "tuple_keyed_lookup": tuple_keyed_lookup,
    "missing_lookup": missing_lookup,
    "sibling_lookup": sibling_lookup,
    "stalled_lookup": stalled_lookup,
    "confirm_quietly": confirm_quietly,
    "get_weather": demo.get_weather,
    "slow_lookup": demo.slow_lookup,
}


class _IdlessScriptedChatModel(ScriptedChatModel):
    """A scripted model whose tool calls carry no id, as some OpenAI-compatible servers send
    them; blocking replies of the plain `ScriptedChatModel` always have one."""

    @staticmethod
    def _call_id(turn: Any, index: int) -> Any:
        return None


# ==============================================================================================
# GIVEN
# ==============================================================================================


def _code_tool(row: Any) -> Tool:
    timeout = row.get("timeout s") or None
    return tool_from_callable(
        _HANDLERS[row["handler"]],
        name=row["name"],
        timeout_s=None if timeout is None else float(timeout),
        ends_turn=row.get("ends turn") == "yes",
        concurrent=row.get("concurrent") == "yes",
    )


def _build_in_code(context: Context, model_type: type[ScriptedChatModel]) -> None:
    _handler_ends.clear()
    context.add_cleanup(_handler_ends.clear)
    model = model_type(replies=list(context.actor["agent"]["script"]))
    agent = LLMAgent(
        model, tools=[_code_tool(row) for row in context.table], name=context.actor["name"]
    )
    context.executor = ActorExecutor(agent)


@given("regression: the actor is built in code with these tools:")
def _given_code_actor(context: Context) -> None:
    _build_in_code(context, ScriptedChatModel)


@given("regression: the actor is built in code, its model leaving out tool call ids, with:")
def _given_idless_actor(context: Context) -> None:
    _build_in_code(context, _IdlessScriptedChatModel)


@given('regression: the module "{name}" in a folder on sys.path holds this code:')
def _given_module(context: Context, name: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-handlers-"))
    (folder / f"{name}.py").write_text(context.text, encoding="utf-8")
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()

    def remove() -> None:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)
        shutil.rmtree(folder)

    context.add_cleanup(remove)


# ==============================================================================================
# WHEN
# ==============================================================================================


def _stop_during_tool(how: str, tool: str, query: str) -> tuple[Mode, Stop]:
    if how == "cancelling the blocking caller's task":
        # A blocking run emits no events: the handler noting that it started is the signal.
        return "blocking", Stop("cancel task", when=lambda: query in _handler_ends)
    if how == "cancelling the event consumer's task":
        return "events", Stop("cancel task", at=tool_started(tool))
    if how == "closing the event stream with aclose()":
        return "events", Stop("aclose from another task", at=tool_started(tool))
    raise AssertionError(f"unknown way to stop: {how!r}")


@when('regression: the run is stopped by {how} while the tool "{tool}" runs for "{query}"')
def _when_stopped(context: Context, how: str, tool: str, query: str) -> None:
    mode, stop = _stop_during_tool(how, tool, query)
    context.model = context.executor.agent.model
    message = "Look both up, please."
    context.outcome = run_guarded(consume(context.executor, message, mode=mode, stop=stop))
    assert context.outcome.stopped_early, f"the run ended before the tool {tool} started"


_MODES: dict[str, Mode] = {"blocking": "blocking", "streaming": "text"}


# The shared step `the actor is asked {message:Json} with the history {history:Json} ...` cannot
# take a history that is a JSON string: its text then also matches `the actor is asked
# "{message}" in {mode} mode`, which is registered first and would run without any history.
@when('regression: the actor is asked "hi" in {mode} mode with the history {history}')
def _when_asked_with_history(context: Context, mode: str, history: str) -> None:
    assert mode in _MODES, mode
    executor = ActorExecutor.from_config(context.actor)
    context.executor, context.model = executor, executor.agent.model
    asking = consume(executor, "hi", mode=_MODES[mode], history=json.loads(history))
    context.outcome = run_guarded(asking)


async def _never_called(arguments: dict[str, Any]) -> object:
    raise AssertionError("a tool that could not be built was run")


_FLAGGED_TOOL_BUILDS: dict[str, Callable[[str], object]] = {
    "Tool(...)": lambda name: Tool(
        name=name,
        description="Book a table.",
        parameters={"type": "object", "properties": {}},
        run=_never_called,
        ends_turn=True,
        concurrent=True,
    ),
    "tool_from_callable(...)": lambda name: tool_from_callable(
        demo.book_table, name=name, ends_turn=True, concurrent=True
    ),
}


@when('regression: a tool "{name}" is built with {how}, both ends_turn and concurrent')
def _when_flagged_tool(context: Context, name: str, how: str) -> None:
    context.error = None
    try:
        _FLAGGED_TOOL_BUILDS[how](name)
    except ConfigurationError as exc:
        context.error = exc


# ==============================================================================================
# THEN
# ==============================================================================================


@then("regression: the run succeeded and last_result records no error")
def _then_no_error(context: Context) -> None:
    outcome = context.outcome
    assert outcome.error is None, f"the call raised {outcome.error!r}"
    assert outcome.last_result is not None, "last_result was not set"
    assert outcome.last_result.error is None, outcome.last_result.error
    assert not outcome.last_result.cancelled


@then("regression: no ExceptionGroup escaped the run")
def _then_no_exception_group(context: Context) -> None:
    error = context.outcome.error
    assert not isinstance(error, BaseExceptionGroup), f"an exception group escaped: {error!r}"
    result = context.outcome.last_result
    assert result is not None, "last_result was not set"
    assert result.error is None, result.error


@then("regression: the handlers for {queries} completed, and none was cancelled")
def _then_siblings_completed(context: Context, queries: str) -> None:
    expected = {query.strip(): "completed" for query in queries.split(" and ")}
    seen = {query: end for query, end in _handler_ends.items() if query in expected}
    assert seen == expected, f"the handlers ended: {_handler_ends}"


@then('regression: the handler for "{query}" was cancelled')
def _then_stalled_cancelled(context: Context, query: str) -> None:
    assert _handler_ends.get(query) == "cancelled", f"the handlers ended: {_handler_ends}"


@then(
    'regression: the result records the call {call_id} of {tool} as ok, with the output "{output}"'
)
def _then_first_call_recorded(context: Context, call_id: str, tool: str, output: str) -> None:
    for result in (context.outcome.result, context.outcome.last_result):
        assert result is not None, "no result was settled"
        records = {record.call_id: record for record in result.tool_calls}
        assert call_id in records, f"call {call_id} is not recorded: {result.tool_calls}"
        record = records[call_id]
        assert (record.name, record.status, record.output) == (tool, "ok", output), record


@then("regression: the result does not record the call {call_id} as ok")
def _then_unfinished_not_ok(context: Context, call_id: str) -> None:
    records = [r for r in context.outcome.result.tool_calls if r.call_id == call_id]
    assert all(record.status != "ok" for record in records), records


@then('regression: the error does not show "{secret}"')
def _then_secret_hidden(context: Context, secret: str) -> None:
    error = context.error
    assert isinstance(error, ConfigurationError), f"loading gave {error!r}"
    assert secret not in f"{error} {error!r} {error.args!r}", f"the value leaked: {error}"


@then("regression: the error message holds no traceback")
def _then_no_traceback_text(context: Context) -> None:
    message = str(context.error)
    assert "Traceback" not in message, message
    assert 'File "' not in message, message


@then("regression: the answer is empty, and no chunk the stream yielded was empty")
def _then_no_empty_chunk(context: Context) -> None:
    outcome = context.outcome
    assert outcome.mode == "text", outcome.mode
    assert outcome.error is None, f"the call failed: {outcome.error!r}"
    assert outcome.result.text == "", f"answer {outcome.result.text!r}"
    assert all(outcome.chunks), f"an empty chunk was yielded: {outcome.chunks!r}"
