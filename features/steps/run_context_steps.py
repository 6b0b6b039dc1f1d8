"""Steps about the run's context: tools that read it (`support.context_tools`), the deps a run
is given, and where the deps must never be found."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from behave import given, then, when
from behave.runner import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.context_tools import DEPS_SECRET, Shop, my_orders, shop_owner, whoami
from support.harness import run_guarded

from cleveractors import (
    ActorExecutor,
    ExecutionResult,
    LLMAgent,
    Resumption,
    ToolAgent,
    tool_from_callable,
)
from cleveractors.agents.tool import ToolCallRequest
from cleveractors.testing import ScriptedChatModel, ScriptedReply
from cleveractors.testing.tables import scripted_tool_calls
from cleveractors.tools import as_tool

_HANDLERS = ("my_orders", "my_orders_sync", "whoami")
_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@dataclass
class _Outcome:
    """What a run left, in the shape the shared Then steps read (`.result`)."""

    result: ExecutionResult


def _run(awaitable: Any) -> Any:
    return run_guarded(awaitable)


def _executor(context: Context) -> ActorExecutor:
    executor: ActorExecutor | None = getattr(context, "built_executor", None)
    if executor is not None:
        return executor
    options: dict[str, Any] = {}
    if getattr(context, "tracer_provider_for_deps", None) is not None:
        options["tracer_provider"] = context.tracer_provider_for_deps
    executor = ActorExecutor.from_config(context.actor, **options)
    context.built_executor = executor
    return executor


# -- Given -------------------------------------------------------------------------------------


@given("an actor whose YAML names the handlers my_orders, my_orders_sync and whoami")
def _given_yaml_actor(context: Context) -> None:
    context.actor["name"] = "shop"
    context.actor["agent"]["tools"] = [
        {"name": name, "handler": f"support.context_tools:{name}"} for name in _HANDLERS
    ]


@given("an agent built in code with the function my_orders and the LangChain tool shop_owner")
def _given_code_agent(context: Context) -> None:
    context.code_tools = [tool_from_callable(my_orders), shop_owner]


def _script(context: Context, calls: str, answer: str) -> None:
    script = [
        {"tool_calls": [call.model_dump() for call in scripted_tool_calls(calls)]},
        {"text": answer},
    ]
    context.actor["agent"]["script"] = script
    if hasattr(context, "code_tools"):
        replies = [ScriptedReply.model_validate(reply) for reply in script]
        model = ScriptedChatModel(replies=replies, replay_per_run=True)
        agent = LLMAgent(model, tools=context.code_tools, name="shop")
        context.built_executor = ActorExecutor(agent)


@given('the model calls [{calls}], then answers "{answer}"')
def _given_calls(context: Context, calls: str, answer: str) -> None:
    _script(context, calls, answer)


@given("the actor keeps its sessions in a SQLite store")
def _given_sqlite(context: Context) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-context-"))
    context.store_folder = folder
    context.actor["store"] = {"url": f"sqlite:///{folder / 'store.db'}"}


@given("the actor's runs are traced with message content, and logged at DEBUG")
def _given_traced(context: Context) -> None:
    os.environ[_CONTENT_ENV] = "true"  # put back after the scenario (restored_environment)
    context.deps_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(context.deps_spans))
    context.tracer_provider_for_deps = provider
    logging.getLogger().setLevel(logging.DEBUG)
    logging.getLogger("cleveractors").setLevel(logging.DEBUG)


@given("my_orders needs a person's approval")
def _given_gated(context: Context) -> None:
    for tool in context.actor["agent"]["tools"]:
        if tool["name"] == "my_orders":
            tool["approval"] = "required"


@given("a clerk agent whose tool whoami ends its turn, called as a tool by the shop agent")
def _given_clerk(context: Context) -> None:
    clerk_model = ScriptedChatModel(
        replies=[ScriptedReply.model_validate({"tool_calls": [{"name": "whoami", "args": {}}]})],
        replay_per_run=True,
    )
    clerk = LLMAgent(clerk_model, tools=[tool_from_callable(whoami, ends_turn=True)], name="clerk")
    shop_model = ScriptedChatModel(
        replies=[
            ScriptedReply.model_validate(
                {"tool_calls": [{"name": "clerk", "args": {"message": "Who asks?"}}]}
            ),
            ScriptedReply(text="Done."),
        ],
        replay_per_run=True,
    )
    context.built_executor = ActorExecutor(
        LLMAgent(shop_model, tools=[clerk.as_tool()], name="shop")
    )


# -- When --------------------------------------------------------------------------------------


def _ask(context: Context, message: str, mode: str, **options: Any) -> None:
    executor = _executor(context)

    async def work() -> ExecutionResult:
        async with executor:
            if mode == "blocking":
                return await executor.execute(message, **options)
            stream = executor.execute_events(message, **options)
            async for _event in stream:
                pass
            assert stream.result is not None
            return stream.result

    context.outcome = _Outcome(_run(work()))


@when(
    'the actor is asked "{message}" in the session "{session}" by the caller "{caller}" '
    'with the deps of "{owner}", {mode}'
)
def _when_asked_in_session(
    context: Context, message: str, session: str, caller: str, owner: str, mode: str
) -> None:
    _ask(context, message, mode, session_id=session, caller=caller, deps=Shop(owner))
    context.caller = caller


@when('the actor is asked "{message}" as "{caller}" with the deps of "{owner}", {mode}')
def _when_asked(context: Context, message: str, caller: str, owner: str, mode: str) -> None:
    _ask(context, message, mode, caller=caller, deps=Shop(owner))


def _ledger_rows(context: Context) -> int:
    with sqlite3.connect(context.store_folder / "store.db") as connection:
        (count,) = connection.execute("SELECT count(*) FROM cleveractors_llm_calls").fetchone()
    return int(count)


def _resume(context: Context, deps: Shop | None) -> ExecutionResult:
    executor = _executor(context)
    paused = context.outcome.result
    decisions = [
        {"call_id": call.call_id, "decision": "approve"} for call in paused.pending_approvals
    ]
    turn = Resumption(paused.run_id or "", decisions, caller=context.caller)

    async def work() -> ExecutionResult:
        async with executor:
            return await executor.execute(turn, deps=deps)

    result: ExecutionResult = _run(work())
    return result


@when("the paused run is approved without deps")
def _when_resumed_without(context: Context) -> None:
    context.rows_before = _ledger_rows(context)
    context.requests_before = len(context.built_executor.agent.model.requests)
    context.resume_error = None
    try:
        _resume(context, None)
    except Exception as exc:
        context.resume_error = exc


@when('the paused run is approved with the deps of "{owner}"')
def _when_resumed_with(context: Context, owner: str) -> None:
    context.outcome = _Outcome(_resume(context, Shop(owner)))


@when('the actor is asked "{message}" without deps')
def _when_asked_without(context: Context, message: str) -> None:
    executor = _executor(context)
    context.call_error = None
    try:
        executor.execute_events(message)
    except Exception as exc:
        context.call_error = exc


@when(
    '"{first}" with the deps of "{first_owner}" and "{second}" with the deps of '
    '"{second_owner}" ask at once, with the MCP servers open'
)
def _when_two_callers(
    context: Context, first: str, first_owner: str, second: str, second_owner: str
) -> None:
    async def work() -> list[ExecutionResult]:
        async with ActorExecutor.from_config(context.actor) as executor:
            context.executor_tools = executor.tools
            return list(
                await asyncio.gather(
                    executor.execute("Whose?", caller=first, deps=Shop(first_owner)),
                    executor.execute("Whose?", caller=second, deps=Shop(second_owner)),
                )
            )

    results = _run(work())
    context.by_caller = dict(zip((first, second), results, strict=True))
    context.outcome = _Outcome(results[0])


@when('a ToolAgent named "{name}" runs whoami outside any run')
def _when_tool_agent_alone(context: Context, name: str) -> None:
    agent = ToolAgent(tool_from_callable(whoami), agent_name=name, available=("whoami",))
    context.alone = _run(agent.run(ToolCallRequest("c1", "whoami", {})))


@when('the shop agent is asked "{message}" by "{caller}" with the deps of "{owner}"')
def _when_shop_asked(context: Context, message: str, caller: str, owner: str) -> None:
    _ask(context, message, "blocking", caller=caller, deps=Shop(owner))


# -- Then --------------------------------------------------------------------------------------


@then("the schemas the models see are")
def _then_schemas(context: Context) -> None:
    tools = {tool.name: tool for tool in ActorExecutor.from_config(context.actor).tools}
    tools |= {tool.name: tool for tool in map(as_tool, context.code_tools)}
    for row in context.table:
        parameters = tools[row["tool"]].openai_schema()["function"]["parameters"]
        properties = sorted(parameters.get("properties", {}))
        required = sorted(parameters.get("required", []))
        assert properties == _names(row["properties"]), (row["tool"], parameters)
        assert required == _names(row["required"]), (row["tool"], parameters)


def _names(cell: str) -> list[str]:
    return sorted(name.strip() for name in cell.split(",") if name.strip())


@then('the run answered "{text}"')
def _then_answered(context: Context, text: str) -> None:
    assert context.outcome.result.answer == text, context.outcome.result


@then('the tool call {call_id} failed with "{text}"')
def _then_failed(context: Context, call_id: str, text: str) -> None:
    record = next(r for r in context.outcome.result.tool_calls if r.call_id == call_id)
    assert record.status == "error", record
    assert record.output == f"Error: {text}", record.output


@then("the tool {name} never ran")
def _then_never_ran(context: Context, name: str) -> None:
    # A tool that ran says whose orders it saw: the refusal came first.
    outputs = [r.output for r in context.outcome.result.tool_calls if r.name == name]
    assert all(" has " not in output for output in outputs), outputs


@then(
    'whoami saw the run\'s id, the session "{session}", the caller "{caller}", the actor '
    '"{actor}" and the usage of the first call'
)
def _then_whoami(context: Context, session: str, caller: str, actor: str) -> None:
    result = context.outcome.result
    seen = json.loads(next(r.output for r in result.tool_calls if r.name == "whoami"))
    first = result.usage_by_call[0]
    assert seen == {
        "run_id": result.run_id,
        "session_id": session,
        "caller": caller,
        "actor": actor,
        "llm_calls": 1,
        "total_tokens": first.usage.total_tokens,
        "cost_usd": str(first.cost_usd or 0),
    }, seen


@then('whoami saw the run id "{run_id}", the actor "{actor}", no caller and no LLM call')
def _then_alone(context: Context, run_id: str, actor: str) -> None:
    seen = json.loads(context.alone.output)
    assert (seen["run_id"], seen["actor"]) == (run_id, actor), seen
    assert (seen["caller"], seen["session_id"], seen["llm_calls"]) == (None, None, 0), seen


@then('the clerk\'s answer names the caller "{caller}", the actor "{actor}" and its own run')
def _then_clerk(context: Context, caller: str, actor: str) -> None:
    result = context.outcome.result
    seen = json.loads(next(r.output for r in result.tool_calls if r.name == "clerk"))
    (child,) = result.child_runs
    assert (seen["caller"], seen["actor"]) == (caller, actor), seen
    assert seen["run_id"] == child.run_id != result.run_id, (seen, child)


@then("the deps' secret is in no file of the SQLite store, no log line and no span")
def _then_secret_nowhere(context: Context) -> None:
    secret = DEPS_SECRET.encode()
    files = list(context.store_folder.iterdir())
    assert files, "the store wrote no file"
    assert _ledger_rows(context) == 2, "the run was not stored"
    for path in files:
        assert secret not in path.read_bytes(), f"the secret is in {path.name}"
    lines = [record.getMessage() for record in context.log_records]
    assert any(record.levelno == logging.DEBUG for record in context.log_records), "no DEBUG"
    assert all(DEPS_SECRET not in line for line in lines)
    spans = context.deps_spans.get_finished_spans()
    assert any(span.name.startswith("execute_tool") for span in spans), [s.name for s in spans]
    assert all(DEPS_SECRET not in span.to_json() for span in spans)


@then("the resumption failed with DepsMissingError naming my_orders")
def _then_resume_refused(context: Context) -> None:
    error = context.resume_error
    assert type(error).__name__ == "DepsMissingError", repr(error)
    assert "my_orders" in str(error), str(error)
    assert error.tool_names == ("my_orders", "my_orders_sync"), error.tool_names


@then("the resumption wrote no ledger row and asked the model nothing")
def _then_nothing_spent(context: Context) -> None:
    assert _ledger_rows(context) == context.rows_before
    assert len(context.built_executor.agent.model.requests) == context.requests_before


@then('the run was refused at the call with DepsMissingError "{text}"')
def _then_call_refused(context: Context, text: str) -> None:
    error = context.call_error
    assert type(error).__name__ == "DepsMissingError", repr(error)
    assert text in str(error), str(error)


@then('{caller}\'s call {tool} output is "{expected}"')
def _then_caller_output(context: Context, caller: str, tool: str, expected: str) -> None:
    result = context.by_caller[caller]
    record = next(r for r in result.tool_calls if r.name == tool)
    assert record.status == "ok", record
    assert record.output == expected, record.output


@then('{caller}\'s call {tool} failed with "{text}"')
def _then_caller_failed(context: Context, caller: str, tool: str, text: str) -> None:
    result = context.by_caller[caller]
    record = next(r for r in result.tool_calls if r.name == tool)
    assert record.status == "error", record
    assert text in record.output, record.output


@then("the schema the model sees for {tool} has no properties")
def _then_mcp_schema(context: Context, tool: str) -> None:
    found = next(t for t in context.executor_tools if t.name == tool)
    parameters = found.openai_schema()["function"]["parameters"]
    assert not parameters.get("properties"), parameters
    assert "context" not in json.dumps(parameters), parameters
