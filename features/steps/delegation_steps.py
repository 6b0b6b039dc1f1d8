"""Steps of agents.delegation.feature: agents called as tools, and the bill of the run tree."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import httpx
from behave import given, then, when
from behave.runner import Context
from features.support.harness import Consumption, run_guarded
from langchain_core.messages import ToolMessage
from opentelemetry.sdk.trace import ReadableSpan

from cleveractors import ActorExecutor, ConfigurationError, LLMAgent
from cleveractors.approvals import PendingApproval, child_call_id
from cleveractors.config import LLMAgentConfig
from cleveractors.errors import InvalidDecisionError
from cleveractors.events import (
    AgentEvent,
    TextDelta,
    ToolApprovalRequested,
    ToolCallDecided,
    ToolCallFinished,
    ToolCallStarted,
)
from cleveractors.result import ExecutionResult
from cleveractors.testing import ScriptedChatModel, ScriptedReply
from cleveractors.turns import Resumption
from cleveractors.usage import TokenUsage
from cleveractors.web import create_app

# -- Given / When ------------------------------------------------------------------------------


def _load(context: Context, name: str, **options: object) -> ActorExecutor:
    executor = ActorExecutor.from_config(context.actor_folder / name, **options)  # type: ignore[arg-type]  # only providers are passed
    context.add_cleanup(lambda: asyncio.run(executor.aclose()))
    return executor


@when('the actor of "{name}" is loaded')
def _when_loaded(context: Context, name: str) -> None:
    context.config_source = context.actor_folder / name
    context.error = None
    try:
        context.executor = _load(context, name)
    except ConfigurationError as exc:
        context.error = exc


async def _ask(executor: ActorExecutor, message: str | Resumption, mode: str) -> Consumption:
    if mode == "blocking":
        return Consumption("blocking", result=await executor.execute(message))
    outcome = Consumption("events")
    async for event in executor.execute_events(message):
        outcome.events.append(event)
        if isinstance(event, TextDelta):
            outcome.chunks.append(event.text)
    outcome.result = executor.last_result
    return outcome


@when('the actor of "{name}" is asked "{message}" in {mode} mode')
def _when_asked(context: Context, name: str, message: str, mode: str) -> None:
    context.executor = _load(context, name)
    context.outcome = run_guarded(_ask(context.executor, message, mode))


@when('the traced actor of "{name}" is asked "{message}"')
def _when_traced(context: Context, name: str, message: str) -> None:
    context.executor = _load(
        context,
        name,
        tracer_provider=context.tracer_provider,
        meter_provider=context.meter_provider,
    )
    context.outcome = run_guarded(_ask(context.executor, message, "blocking"))


@given('a researcher agent built in code that answers "{text}"')
def _given_researcher(context: Context, text: str) -> None:
    model = ScriptedChatModel(replies=[ScriptedReply(text=text)])
    context.researcher = LLMAgent(model, name="researcher")


@given(
    'a boss agent built in code with the researcher as_tool named "{name}" and an executor\'s '
    "as_tool"
)
def _given_boss(context: Context, name: str) -> None:
    helper_model = ScriptedChatModel(replies=[ScriptedReply(text="Rain.")])
    helper = ActorExecutor(LLMAgent(helper_model, name="helper"))
    calls = [
        {"name": name, "args": {"message": "Weather?"}},
        {"name": "helper", "args": {"message": "Weather?"}},
    ]
    model = ScriptedChatModel(
        replies=[
            ScriptedReply.model_validate({"tool_calls": calls}),
            ScriptedReply(text="Both say it rains."),
        ]
    )
    tools = [context.researcher.as_tool(name=name, description="Asks."), helper.as_tool()]
    context.boss = LLMAgent(model, name="boss", tools=tools)


@when('the boss agent is asked "{message}"')
def _when_boss_asked(context: Context, message: str) -> None:
    context.outcome = run_guarded(_ask(ActorExecutor(context.boss), message, "blocking"))


# -- Then --------------------------------------------------------------------------------------


def _result(context: Context) -> ExecutionResult:
    result = context.outcome.result
    assert result is not None, "no result"
    assert result.error is None, result.error
    return result


@then('the tool {name} returned "{output}" to the parent\'s model')
def _then_tool_output(context: Context, name: str, output: str) -> None:
    (record,) = [call for call in _result(context).tool_calls if call.name == name]
    assert (record.status, record.output) == ("ok", output), record


@then("the run has one child run, of {agent}, {status}, its parent the run itself")
def _then_one_child(context: Context, agent: str, status: str) -> None:
    result = _result(context)
    (child,) = result.child_runs
    assert (child.agent, child.status) == (agent, status), child
    assert child.parent_run_id == result.run_id, child
    assert child.run_id != result.run_id, child
    assert child.call_id == result.tool_calls[0].call_id, child


@then("the run has {count:d} child runs, of {first} and {second}")
def _then_children(context: Context, count: int, first: str, second: str) -> None:
    agents = [child.agent for child in _result(context).child_runs]
    assert len(agents) == count, agents
    assert sorted(agents) == sorted([first, second]), agents


@then("the calls of {agent} carry the child's run id and the parent's")
def _then_calls_carry(context: Context, agent: str) -> None:
    result = _result(context)
    (child,) = result.child_runs
    calls = [call for call in result.usage_by_call if call.agent == agent]
    assert calls, result.usage_by_call
    assert all(
        (call.run_id, call.parent_run_id) == (child.run_id, result.run_id) for call in calls
    ), calls
    own = [call for call in result.usage_by_call if call.agent != agent]
    assert all((c.run_id, c.parent_run_id) == (None, None) for c in own), own
    assert [call.index for call in calls] == list(range(1, len(calls) + 1)), calls


@then("the result's totals are the sum of every call of the tree, by agent: {counts}")
def _then_totals(context: Context, counts: str) -> None:
    result = _result(context)
    by_agent = result.usage_by_agent
    expected = dict(part.split(" ") for part in counts.split(", "))
    calls = {agent: str(part.llm_calls) for agent, part in by_agent.items()}
    assert calls == expected, by_agent
    assert all(part.usage.total_tokens > 0 for part in by_agent.values()), by_agent
    summed = sum((part.usage for part in by_agent.values()), TokenUsage())
    assert summed.total_tokens == result.total_tokens, (summed, result.total_tokens)
    assert result.llm_calls == sum(part.llm_calls for part in by_agent.values())


@then('its tool {name} is described as "{text}" and takes a required string "{argument}"')
def _then_schema(context: Context, name: str, text: str, argument: str) -> None:
    assert context.error is None, context.error
    (tool,) = [tool for tool in context.executor.tools if tool.name == name]
    assert tool.description == text, tool.description
    schema = tool.parameters
    assert schema["required"] == [argument], schema
    assert schema["properties"][argument]["type"] == "string", schema


@then(
    "between the parent's tool_call_started and tool_call_finished of {tool} come the child's "
    "events, each an agent_event with the path {path}"
)
def _then_nested_events(context: Context, tool: str, path: str) -> None:
    events = context.outcome.events
    start = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted))
    end = next(i for i, e in enumerate(events) if isinstance(e, ToolCallFinished))
    inside = events[start + 1 : end]
    assert inside, events
    assert all(isinstance(event, AgentEvent) for event in inside), inside
    assert all(event.agent_path == tuple(path.split(" > ")) for event in inside), inside
    (child,) = _result(context).child_runs
    assert all(e.run_id == child.run_id and e.call_id == child.call_id for e in inside), inside
    assert not any(isinstance(event, AgentEvent) for event in events[end:]), events[end:]
    context.child_events = [event.event for event in inside]


@then('the child\'s events include its {tool} call and its text "{text}"')
def _then_child_events(context: Context, tool: str, text: str) -> None:
    inner = context.child_events
    assert any(isinstance(e, ToolCallFinished) and e.name == tool for e in inner), inner
    assert "".join(e.text for e in inner if isinstance(e, TextDelta)) == text, inner
    assert any(event.kind == "usage_recorded" for event in inner), inner


@then('the parent\'s own text deltas are "{text}" alone')
def _then_parent_text(context: Context, text: str) -> None:
    assert "".join(context.outcome.chunks) == text, context.outcome.chunks
    assert _result(context).text == text, _result(context).text


@then('the child run of {agent} read the error "{fragment}" from its {tool} call')
def _then_child_read_error(context: Context, agent: str, fragment: str, tool: str) -> None:
    result = _result(context)
    (child,) = result.child_runs
    assert (child.agent, child.status) == (agent, "answered"), child
    assert not [call for call in result.usage_by_call if call.agent == tool], "it ran"
    finished = [
        event.event
        for event in context.outcome.events
        if isinstance(event, AgentEvent)
        and isinstance(event.event, ToolCallFinished)
        and event.event.name == tool
    ]
    assert len(finished) == 1, finished
    assert finished[0].error is not None, finished
    assert fragment in finished[0].error, finished[0].error


@then("loading fails with a ConfigurationError naming the cycle {first} -> {second} -> {third}")
def _then_cycle(context: Context, first: str, second: str, third: str) -> None:
    error = context.error
    assert isinstance(error, ConfigurationError), f"loading gave {error!r}"
    folder = context.actor_folder.resolve()
    cycle = " -> ".join(str(folder / name) for name in (first, second, third))
    assert cycle in str(error), str(error)


@then('the child run of {agent} answered by synthesis for "{reason}"')
def _then_child_synthesis(context: Context, agent: str, reason: str) -> None:
    (child,) = [child for child in _result(context).child_runs if child.agent == agent]
    assert (child.status, child.synthesis_reason) == ("answered", reason), child


@then('the run answered by synthesis for "{reason}"')
def _then_synthesis(context: Context, reason: str) -> None:
    assert _result(context).synthesis_reason == reason, _result(context)


@then(
    "the store's ledger has {count:d} rows, {theirs:d} of the child run naming the parent run, "
    "whose sum is the result's totals"
)
def _then_ledger(context: Context, count: int, theirs: int) -> None:
    result = _result(context)
    store = context.executor.store
    report = asyncio.run(store.usage())
    rows = report.rows
    assert len(rows) == count, rows
    (child,) = result.child_runs
    of_child = [row for row in rows if row.run_id == child.run_id]
    assert len(of_child) == theirs, rows
    assert all(row.parent_run_id == result.run_id for row in of_child), of_child
    assert all(row.parent_run_id is None for row in rows if row.run_id == result.run_id), rows
    assert report.prompt_tokens == result.prompt_tokens, (report, result.prompt_tokens)
    assert report.completion_tokens == result.completion_tokens, report
    assert (report.cost_usd or Decimal(0)) == (result.cost_usd or Decimal(0)), report


def _span(context: Context, name: str) -> ReadableSpan:
    (span,) = [s for s in context.exporter.get_finished_spans() if s.name == name]
    return span


@then('the span "{child}" is a child of the span "{parent}"')
def _then_span_parent(context: Context, child: str, parent: str) -> None:
    inner, outer = _span(context, child), _span(context, parent)
    assert inner.parent is not None
    assert outer.context is not None
    assert inner.parent.span_id == outer.context.span_id, (inner.parent, outer.context)
    assert inner.context is not None
    assert inner.context.trace_id == outer.context.trace_id


@then('the researcher\'s chat spans are children of the span "{parent}"')
def _then_chat_spans(context: Context, parent: str) -> None:
    outer = _span(context, parent)
    assert outer.context is not None
    chats = [
        span
        for span in context.exporter.get_finished_spans()
        if span.name.startswith("chat")
        and span.parent is not None
        and span.parent.span_id == outer.context.span_id
    ]
    assert len(chats) == 2, chats


@when('the actor of "{name}" is sent "{message}" on /chat')
def _when_chat(context: Context, name: str, message: str) -> None:
    app = create_app(_load(context, name))

    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000"
        ) as client:
            return await client.post("/chat", json={"message": message})

    context.chat_response = run_guarded(exchange())


@then('the /chat stream has agent_event frames with the path {path}, its own text "{text}"')
def _then_chat_frames(context: Context, path: str, text: str) -> None:
    response = context.chat_response
    assert response.status_code == 200, response.text
    kinds = [
        line[len("event: ") :] for line in response.text.splitlines() if line.startswith("event: ")
    ]
    frames = [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]
    nested = [frame for frame in frames if frame["kind"] == "agent_event"]
    assert nested, kinds
    assert kinds.count("agent_event") == len(nested), kinds
    assert all(frame["agent_path"] == path.split(" > ") for frame in nested), nested
    own = "".join(frame["text"] for frame in frames if frame["kind"] == "text_delta")
    assert own == text, own


@then('the tool {name} failed with "{fragment}" for the parent\'s model')
def _then_tool_failed(context: Context, name: str, fragment: str) -> None:
    (record,) = [call for call in _result(context).tool_calls if call.name == name]
    assert record.status == "error", record
    assert fragment in record.output, record.output


@then('an agent named "{bad}" cannot be a tool without a name, but can be one named "{good}"')
def _then_tool_names(context: Context, bad: str, good: str) -> None:
    agent = LLMAgent(ScriptedChatModel(replies=[]), name=bad)
    error = _configuration_error(agent.as_tool)
    assert "is not a valid tool name" in str(error), error
    assert agent.as_tool(name=good).name == good


@then("LLMAgent.from_config refuses a config whose tools name an actor file")
def _then_from_config_refuses(context: Context) -> None:
    config = LLMAgentConfig.model_validate(
        {"provider": "stub", "script": [{"text": "hi"}], "tools": [{"agent": "other.yaml"}]}
    )
    error = _configuration_error(
        lambda: LLMAgent.from_config(config, model=ScriptedChatModel(replies=[]))
    )
    assert "ActorExecutor.from_config" in str(error), error


def _configuration_error(call: Callable[[], object]) -> ConfigurationError:
    try:
        call()
    except ConfigurationError as exc:
        return exc
    raise AssertionError("no ConfigurationError")


@when('its tool is called directly with the message "{message}"')
def _when_tool_called(context: Context, message: str) -> None:
    tool = context.researcher.as_tool()
    context.tool_output = run_guarded(tool.run({"message": message}))


@then('the tool\'s output is "{text}"')
def _then_tool_output_is(context: Context, text: str) -> None:
    assert context.tool_output == text, context.tool_output


def _pending(context: Context) -> PendingApproval:
    (pending,) = context.paused_result.pending_approvals
    return pending


@then("the run paused waiting on {tool} asked by {path}")
def _then_paused(context: Context, tool: str, path: str) -> None:
    result = context.outcome.result
    assert result.status == "paused", result
    context.paused_result, context.paused_outcome = result, context.outcome
    pending = _pending(context)
    assert (pending.name, pending.agent_path) == (tool, tuple(path.split(" > "))), pending
    assert [child.status for child in result.child_runs] == ["paused"], result.child_runs


@then("the streamed run paused, the child announcing its call {tool} asked by {path}")
def _then_paused_announced(context: Context, tool: str, path: str) -> None:
    _then_paused(context, tool, path)
    call_id = _pending(context).call_id
    announced = [
        (event.agent_path, child_call_id(str(event.call_id), event.event.call_id))
        for event in context.outcome.events
        if isinstance(event, AgentEvent) and isinstance(event.event, ToolApprovalRequested)
    ]
    assert announced == [(tuple(path.split(" > ")), call_id)], announced


@then("a decision on a call id the tree does not have is refused, naming it")
def _then_unknown_call(context: Context) -> None:
    refused = _refusal(context, "nope")
    assert refused.call_id == "nope", refused
    assert "'nope'" in str(refused), refused


@then("a decision on that call is refused: {problem}")
def _then_decision_refused(context: Context, problem: str) -> None:
    refused = _refusal(context, _pending(context).call_id)
    assert problem in str(refused), refused


def _refusal(context: Context, call_id: str) -> InvalidDecisionError:
    """The error of approving CALL_ID of the paused run, which must be refused."""
    decision = {"call_id": call_id, "decision": "approve"}
    resumption = Resumption(context.paused_result.run_id, [decision])
    try:
        asyncio.run(context.executor.execute(resumption))
    except InvalidDecisionError as exc:
        return exc
    raise AssertionError(f"the decision on call {call_id!r} was taken")


@when('that call is decided "{decision}" in {mode} mode')
def _when_decided(context: Context, decision: str, mode: str) -> None:
    pending = _pending(context)
    resumption = Resumption(
        context.paused_result.run_id,
        [{"call_id": pending.call_id, "decision": decision, "digest": pending.digest}],
    )
    context.outcome = run_guarded(_ask(context.executor, resumption, mode))


@then("the child's {tool} call was {fate}")
def _then_child_call(context: Context, tool: str, fate: str) -> None:
    inner = [e.event for e in context.outcome.events if isinstance(e, AgentEvent)]
    decided = [e.decision for e in inner if isinstance(e, ToolCallDecided) and e.name == tool]
    ran = [e for e in inner if isinstance(e, ToolCallFinished) and e.name == tool]
    expected = {"run": (["approve"], 1), "declined": (["reject"], 0), "expired": (["expired"], 0)}[
        fate
    ]
    assert (decided, len(ran)) == expected, inner


@then("the store's ledger holds every call of the tree once, the sum of both segments' bills")
def _then_tree_ledger(context: Context) -> None:
    paused, resumed = context.paused_result, _result(context)
    report = asyncio.run(context.executor.store.usage())
    assert len(report.rows) == paused.llm_calls + resumed.llm_calls == 4, report.rows
    billed = paused.total_tokens + resumed.total_tokens
    assert report.total_tokens == billed, (report.total_tokens, billed)
    child_rows = {row.run_id for row in report.rows if row.parent_run_id is not None}
    (first, second) = (paused.child_runs[0], resumed.child_runs[0])
    assert child_rows == {first.run_id, second.run_id}, report.rows


@then("the events include agent_events with the path {path}")
def _then_path_events(context: Context, path: str) -> None:
    wanted = tuple(path.split(" > "))
    nested = [e for e in context.outcome.events if isinstance(e, AgentEvent)]
    deepest = [event for event in nested if event.agent_path == wanted]
    assert deepest, [event.agent_path for event in nested]
    assert all(isinstance(event.event, AgentEvent) is False for event in nested), nested


@when('the actor of "{name}" is sent "{message}" on /ai-sdk')
def _when_ai_sdk(context: Context, name: str, message: str) -> None:
    app = create_app(_load(context, name))
    body = {
        "id": "chat-1",
        "messages": [{"id": "m0", "role": "user", "parts": [{"type": "text", "text": message}]}],
        "trigger": "submit-message",
    }

    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000"
        ) as client:
            return await client.post("/ai-sdk", json=body)

    context.ai_sdk_response = run_guarded(exchange())


@then(
    "the /ai-sdk stream has data-agent-event parts with the path {path}, and the researcher's "
    'answer "{answer}" as its tool output'
)
def _then_ai_sdk(context: Context, path: str, answer: str) -> None:
    response = context.ai_sdk_response
    assert response.status_code == 200, response.text
    chunks = [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:") and line.strip() != "data: [DONE]"
    ]
    parts = [chunk for chunk in chunks if chunk["type"] == "data-agent-event"]
    assert parts, [chunk["type"] for chunk in chunks]
    assert all(part["transient"] is True for part in parts), parts
    assert all(part["data"]["agent_path"] == path.split(" > ") for part in parts), parts
    outputs = [chunk["output"] for chunk in chunks if chunk["type"] == "tool-output-available"]
    assert outputs == [answer], outputs


def _chunks(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [
        json.loads(line[len("data:") :])
        for line in response.text.splitlines()
        if line.startswith("data:") and line.strip() != "data: [DONE]"
    ]


@when(
    'the actor of "{name}" is sent "{message}" on /ai-sdk and the client approves what it is asked'
)
def _when_ai_sdk_approved(context: Context, name: str, message: str) -> None:
    app = create_app(_load(context, name))
    user = {"id": "m0", "role": "user", "parts": [{"type": "text", "text": message}]}

    async def exchange() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000"
        ) as client:
            body = {"id": "chat-1", "messages": [user], "trigger": "submit-message"}
            first = await client.post("/ai-sdk", json=body)
            chunks = _chunks(first)
            (asked,) = [chunk for chunk in chunks if chunk["type"] == "tool-approval-request"]
            (shown,) = [
                chunk
                for chunk in chunks
                if chunk["type"] == "tool-input-available"
                and chunk["toolCallId"] == asked["toolCallId"]
            ]
            part = {
                "type": f"tool-{shown['toolName']}",
                "toolCallId": shown["toolCallId"],
                "state": "approval-responded",
                "input": shown["input"],
                "approval": {"id": asked["approvalId"], "approved": True},
            }
            answered = {"id": "m1", "role": "assistant", "parts": [part]}
            body = {"id": "chat-1", "messages": [user, answered], "trigger": "submit-message"}
            return first, await client.post("/ai-sdk", json=body)

    context.ai_sdk_first, context.ai_sdk_second = run_guarded(exchange())


@then("the first /ai-sdk stream asked to approve the {tool} call, the call shown as a tool part")
def _then_ai_sdk_asked(context: Context, tool: str) -> None:
    chunks = _chunks(context.ai_sdk_first)
    shown = [c for c in chunks if c["type"] == "tool-input-available" and c["toolName"] == tool]
    asked = [c for c in chunks if c["type"] == "tool-approval-request"]
    assert [c["toolCallId"] for c in asked] == [c["toolCallId"] for c in shown], chunks
    (pending,) = [c["toolCallId"] for c in asked]
    assert "/" in pending, pending  # the child's call, by the id unique in the tree
    assert chunks[-1]["type"] == "finish", chunks[-1]


@then('the second /ai-sdk stream ends the {agent} call with "{answer}"')
def _then_ai_sdk_resumed(context: Context, agent: str, answer: str) -> None:
    chunks = _chunks(context.ai_sdk_second)
    outputs = [chunk["output"] for chunk in chunks if chunk["type"] == "tool-output-available"]
    assert outputs == [answer], outputs
    assert chunks[-1]["type"] == "finish", chunks[-1]


@then("the parent's own {tool} call ran once over both segments")
def _then_ran_once(context: Context, tool: str) -> None:
    events = [*context.paused_outcome.events, *context.outcome.events]
    ran = [e for e in events if isinstance(e, ToolCallFinished) and e.name == tool]
    assert len(ran) == 1, ran
    own = [call.name for call in _result(context).tool_calls]
    assert tool not in own, own  # the resumed segment did not run it again


@when('the actor of "{name}" is asked "{message}" in session "{session}"')
def _when_asked_in_session(context: Context, name: str, message: str, session: str) -> None:
    context.executor = _load(context, name)
    result = asyncio.run(context.executor.execute(message, session_id=session))
    assert result.status == "paused", result


@when('the actor is sent "{message}" in session "{session}"')
def _when_sent_in_session(context: Context, message: str, session: str) -> None:
    result = asyncio.run(context.executor.execute(message, session_id=session))
    context.outcome = Consumption("blocking", result=result)


@then("the session's first turn answers the {tool} call as declined for the new message")
def _then_superseded_turn(context: Context, tool: str) -> None:
    turns = asyncio.run(context.executor.store.history("s-tree"))
    first = turns[0].messages
    answers = [m for m in first if isinstance(m, ToolMessage) and m.name == tool]
    assert len(answers) == 1, first
    assert answers[0].status == "error", answers
    assert "the user sent a new message" in str(answers[0].content), answers


@when('the actor of "{name}" is asked "{message}" where nobody can approve a call')
def _when_nobody_approves(context: Context, name: str, message: str) -> None:
    context.executor = _load(context, name)
    result = asyncio.run(context.executor.execute(message, can_pause=False))
    context.outcome = Consumption("blocking", result=result)


@when("the tree waits {seconds:g} seconds and is resumed with no decision")
def _when_resumed_undecided(context: Context, seconds: float) -> None:
    async def late() -> Consumption:
        await asyncio.sleep(seconds)  # the pending call's expiry passes
        return await _ask(context.executor, Resumption(context.paused_result.run_id, []), "events")

    context.outcome = run_guarded(late())


@then("the store's audit lists that call as expired under the paused run")
def _then_audit_expired(context: Context) -> None:
    run_id = context.paused_result.run_id
    records = asyncio.run(context.executor.store.approvals(run_id=run_id))
    listed = [(record.call_id, record.decision) for record in records]
    assert listed == [(_pending(context).call_id, "expired")], listed


@when('the actor of "{name}" is sent "{message}" on /ag-ui and the client approves the interrupt')
def _when_ag_ui_approved(context: Context, name: str, message: str) -> None:
    app = create_app(_load(context, name))
    user = {"id": "m0", "role": "user", "content": message}

    async def exchange() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000"
        ) as client:
            body: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": [user]}
            first = await client.post("/ag-ui", json=body)
            (interrupt,) = _ag_ui_interrupts(first)
            answer = {"interruptId": interrupt["id"], "status": "resolved"}
            body = {"threadId": "t1", "runId": "r2", "messages": [user]}
            body["resume"] = [answer | {"payload": {"approved": True}}]
            return first, await client.post("/ag-ui", json=body)

    context.ag_ui_first, context.ag_ui_second = run_guarded(exchange())


def _ag_ui_interrupts(response: httpx.Response) -> list[dict[str, Any]]:
    (finished,) = [e for e in _chunks(response) if e["type"] == "RUN_FINISHED"]
    interrupts: list[dict[str, Any]] = finished["outcome"]["interrupts"]
    return interrupts


@then("the first /ag-ui run ended with one interrupt, for {tool} asked by {path}")
def _then_ag_ui_interrupt(context: Context, tool: str, path: str) -> None:
    (interrupt,) = _ag_ui_interrupts(context.ag_ui_first)
    about = interrupt["metadata"]["cleveractors"]
    assert (about["tool"], about["agent_path"]) == (tool, path.split(" > ")), interrupt
    assert "/" in interrupt["toolCallId"], interrupt  # the child's call, unique in the tree


@then('the second /ag-ui run gives the {agent} call the result "{answer}" and finishes')
def _then_ag_ui_resumed(context: Context, agent: str, answer: str) -> None:
    events = _chunks(context.ag_ui_second)
    results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results == [answer], results
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert not events[-1].get("outcome"), events[-1]
