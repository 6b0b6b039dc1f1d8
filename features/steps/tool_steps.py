"""Steps about tools: declaring them, and what ran, in which order, and what the model read."""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import StructuredTool

from cleveractors import ActorExecutor, ConfigurationError, LLMAgent, demo, tool_from_callable
from cleveractors.agents import Agent
from cleveractors.testing import ScriptedChatModel

_HANDLERS = "cleveractors.demo"
_NAMES = re.compile(r",\s*|\s+and\s+")


def _names(text: str) -> list[str]:
    return [name.strip() for name in _NAMES.split(text) if name.strip()]


def _tool_messages_after_calls(messages: tuple[BaseMessage, ...]) -> list[tuple[list[str], list]]:
    """Each AI message with tool calls, with its call ids, and the tool messages right after it."""
    batches = []
    for position, message in enumerate(messages):
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            ids = [call["id"] for call in message.tool_calls]
            ids += [call["id"] for call in message.invalid_tool_calls]
            answers = []
            for following in messages[position + 1 :]:
                if not isinstance(following, ToolMessage):
                    break
                answers.append(following)
            batches.append((ids, answers))
    return batches


def _tool_message(context: Context, number: int, call_id: str) -> ToolMessage:
    messages = context.model.requests[number - 1].messages
    matches = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
    assert len(matches) == 1, f"request {number} answers call {call_id} {len(matches)} times"
    return matches[0]


def _log_lines(context: Context, level: int) -> list[str]:
    return [record.getMessage() for record in context.log_records if record.levelno == level]


# -- Given: declared tools ---------------------------------------------------------------------


@given("the actor declares the demo tool {names}")
@given("the actor declares the demo tools {names}")
def _given_demo_tools(context: Context, names: str) -> None:
    context.actor["agent"]["tools"] += [
        {"name": name, "handler": f"{_HANDLERS}:{name}"} for name in _names(names)
    ]


_TOOL_COLUMNS = {
    "timeout s": ("timeout_s", float),
    "ends turn": ("ends_turn", lambda cell: cell == "yes"),
    "concurrent": ("concurrent", lambda cell: cell == "yes"),
    "parameters": ("parameters", json.loads),
    "description": ("description", str),
}


@given("the actor declares these tools:")
def _given_tools(context: Context) -> None:
    for row in context.table:
        tool: dict[str, Any] = {"name": row["name"], "handler": f"{_HANDLERS}:{row['handler']}"}
        for heading in row.headings:
            if heading in _TOOL_COLUMNS and row[heading]:
                key, convert = _TOOL_COLUMNS[heading]
                tool[key] = convert(row[heading])
        context.actor["agent"]["tools"].append(tool)


@given(
    "the actor is built in code, with get_weather as a plain function and get_time as a "
    "LangChain tool"
)
def _given_agent_in_code(context: Context) -> None:
    agent = LLMAgent(
        ScriptedChatModel(replies=context.actor["agent"]["script"]),
        tools=[demo.get_weather, StructuredTool.from_function(demo.get_time)],
        name=context.actor["name"],
    )
    context.executor = ActorExecutor(agent)


class _AgentOfMyOwn(Agent):
    """An agent a user wrote without the tool loop; the scenarios never run it."""

    name = "my-own-agent"

    async def process_message(self, message: str, **options: Any) -> Any:
        raise NotImplementedError

    def stream_message(self, message: str, **options: Any) -> Any:
        raise NotImplementedError

    async def run(self, message: str, **options: Any) -> Any:
        raise NotImplementedError


@given("an executor over an agent of my own that is not an LLMAgent")
def _given_agent_of_my_own(context: Context) -> None:
    context.executor = ActorExecutor(_AgentOfMyOwn())


# -- When: building an agent in code -----------------------------------------------------------


def _apply(callback: Callable[[int], int]) -> str:
    """A function whose argument no JSON schema can describe."""
    return str(callback(1))


_CODE_TOOLS: dict[str, object] = {
    "a function taking a callback": [_apply],
    "get_weather twice": [demo.get_weather, tool_from_callable(demo.get_weather)],
    "a number": [42],
}


@when("an agent is built in code with {tools}")
def _when_agent_in_code(context: Context, tools: str) -> None:
    context.error = None
    try:
        LLMAgent(ScriptedChatModel(replies=[]), tools=_CODE_TOOLS[tools])
    except ConfigurationError as exc:
        context.error = exc


# -- Then: what ran ----------------------------------------------------------------------------


@then("the handlers ran in this order:")
def _then_handlers_ran(context: Context) -> None:
    ran = sorted(demo.invocations(), key=lambda invocation: invocation.started)
    seen = [(invocation.tool, invocation.arguments) for invocation in ran]
    expected = [(row["tool"], json.loads(row["arguments"])) for row in context.table]
    assert seen == expected, f"handlers ran: {seen}"


@then("no tool ran")
def _then_no_tool(context: Context) -> None:
    assert not demo.invocations(), demo.invocations()
    assert context.outcome.result.tool_calls == ()


@then("the handlers ran {count:d} time")
@then("the handlers ran {count:d} times")
def _then_handler_count(context: Context, count: int) -> None:
    assert len(demo.invocations()) == count, demo.invocations()


@then("the {tool} calls overlapped in time")
def _then_overlapped(context: Context, tool: str) -> None:
    runs = [invocation for invocation in demo.invocations() if invocation.tool == tool]
    assert len(runs) > 1, runs
    latest_start = max(run.started for run in runs)
    earliest_end = min(run.finished for run in runs)
    assert latest_start < earliest_end, "a call began only after another had finished"


@then("the {tool} calls ran one after another")
def _then_sequential(context: Context, tool: str) -> None:
    runs = sorted(
        (invocation for invocation in demo.invocations() if invocation.tool == tool),
        key=lambda invocation: invocation.started,
    )
    assert len(runs) > 1, runs
    for before, after in itertools.pairwise(runs):
        assert after.started >= before.finished, "two calls overlapped"


@then("the {tool} handlers finished in the order of the queries {queries}")
def _then_finish_order(context: Context, tool: str, queries: str) -> None:
    finished = sorted(
        (invocation for invocation in demo.invocations() if invocation.tool == tool),
        key=lambda invocation: invocation.finished,
    )
    assert [run.arguments["query"] for run in finished] == _names(queries), finished


@then("the {tool} handler was cancelled")
def _then_handler_cancelled(context: Context, tool: str) -> None:
    ends = [invocation.ended for invocation in demo.invocations() if invocation.tool == tool]
    assert ends == ["cancelled"], ends


@then("the {tool} handlers ended like this:")
def _then_handler_ends(context: Context, tool: str) -> None:
    ends = {
        str(invocation.arguments["query"]): invocation.ended
        for invocation in demo.invocations()
        if invocation.tool == tool
    }
    assert ends == {row["query"]: row["ended"] for row in context.table}, ends


@then("the executor lists the tools {names}")
def _then_executor_tools(context: Context, names: str) -> None:
    listed = [tool.name for tool in context.executor.tools]
    assert listed == _names(names), listed


@then("the executor lists no tools")
def _then_executor_no_tools(context: Context) -> None:
    assert context.executor.tools == (), context.executor.tools


# -- Then: what the model read -----------------------------------------------------------------


@then(
    "the model's request {number:d} answers the calls {ids} with one tool message each, "
    "in that order"
)
def _then_answers_in_order(context: Context, number: int, ids: str) -> None:
    batches = _tool_messages_after_calls(context.model.requests[number - 1].messages)
    assert batches, f"request {number} holds no tool calls"
    call_ids, answers = batches[-1]
    assert call_ids == _names(ids), f"the model's reply asked for {call_ids}"
    assert [answer.tool_call_id for answer in answers] == call_ids, answers


@then("every tool call the model made is answered by exactly one tool message")
def _then_transcripts_valid(context: Context) -> None:
    for number, request in enumerate(context.model.requests, start=1):
        for call_ids, answers in _tool_messages_after_calls(request.messages):
            answered = [answer.tool_call_id for answer in answers]
            assert sorted(answered) == sorted(call_ids), f"request {number}: {answered}"
            assert len(set(answered)) == len(answered), f"request {number}: {answered}"


@then("the model's request {number:d} carries the tool results:")
def _then_tool_results(context: Context, number: int) -> None:
    for row in context.table:
        message = _tool_message(context, number, row["call id"])
        assert message.text == row["content"], f"{row['call id']}: {message.text!r}"
        assert message.status == row["status"], f"{row['call id']}: {message.status}"


@then('the model\'s request {number:d} carries an error for call {call_id} mentioning "{text}"')
def _then_tool_error(context: Context, number: int, call_id: str, text: str) -> None:
    message = _tool_message(context, number, call_id)
    assert message.status == "error", message
    assert text in message.text, message.text


@then(
    'the model\'s request {number:d} carries the output of {call_id} truncated, marked "{marker}"'
)
def _then_truncated(context: Context, number: int, call_id: str, marker: str) -> None:
    message = _tool_message(context, number, call_id)
    kept, _, note = message.text.partition("\n" + marker)
    assert note, f"no marker in {message.text[-200:]!r}"
    # The failed condensing request just before holds the original output, after its prompt.
    condensing = context.model.requests[number - 2]
    assert condensing.tool_names == (), "the request before was not the condensing call"
    original = condensing.messages[0].text.split("\n\n", 1)[1]
    assert kept, "nothing of the output was kept"
    assert original.startswith(kept), "what was kept is not the start of the output"
    assert len(kept) < len(original), "nothing was cut"


@then("the tool calls are recorded as:")
def _then_records(context: Context) -> None:
    records = context.outcome.result.tool_calls
    seen = [(record.call_id, record.name, record.status, record.output) for record in records]
    expected = [(r["call id"], r["name"], r["status"], r["output"]) for r in context.table]
    assert seen == expected, f"recorded: {seen}"


@then("the tool call {call_id} is recorded as an error")
def _then_record_error(context: Context, call_id: str) -> None:
    record = next(r for r in context.outcome.result.tool_calls if r.call_id == call_id)
    assert record.status == "error", record
    assert record.output.startswith("Error: "), record.output


@then('the tool {name} takes the arguments {properties} and requires "{required}"')
def _then_tool_schema(context: Context, name: str, properties: str, required: str) -> None:
    schema = context.executor.agent.tools[name].parameters
    assert schema["properties"] == json.loads(properties), schema
    assert schema.get("required", []) == _names(required), schema


# -- Then: logs --------------------------------------------------------------------------------


@then('an INFO log line names the agent "{agent}" and the tools {tools}, in that order')
def _then_info_line(context: Context, agent: str, tools: str) -> None:
    for line in _log_lines(context, logging.INFO):
        if agent not in line:
            continue
        position = 0
        for name in _names(tools):
            position = line.find(name, position)
            if position < 0:
                break
            position += len(name)
        else:
            return
    raise AssertionError(f"no INFO line: {_log_lines(context, logging.INFO)}")


@then("an INFO log line names the skipped call {call_id} of {tool}")
def _then_skip_line(context: Context, call_id: str, tool: str) -> None:
    lines = _log_lines(context, logging.INFO)
    assert any("skipped" in line and call_id in line and tool in line for line in lines), lines


@then("a WARNING log line names the tool {tool} and the call {call_id}")
def _then_warning(context: Context, tool: str, call_id: str) -> None:
    lines = _log_lines(context, logging.WARNING)
    assert any(tool in line and call_id in line for line in lines), lines


@then('building the agent fails with a ConfigurationError mentioning "{text}"')
def _then_build_failed(context: Context, text: str) -> None:
    assert isinstance(context.error, ConfigurationError), context.error
    for fragment in text.split(" ; "):
        assert fragment in str(context.error), str(context.error)
