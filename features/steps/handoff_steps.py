"""Steps of agents.handoffs.feature: two actors built in code (each a `ScriptedChatModel`) that
hand the conversation to each other, run by an executor on the first, with or without a store;
and actor files whose `handoffs` cannot be loaded.

The Given steps only describe the actors; the first When step builds them, so a later Given
(a budget, a tool that needs approval) still shapes them. Each run uses a fresh executor on the
same agents, as a restarted server would: the store alone carries a session from turn to turn.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import HumanMessage, SystemMessage
from sqlalchemy import select

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent, LoopLimits, Resumption
from cleveractors.approvals import ApprovalDecision
from cleveractors.demo import get_weather
from cleveractors.errors import ConfigurationError
from cleveractors.events import Event, HandoffOccurred
from cleveractors.store import SqlStore
from cleveractors.store.schema import sessions
from cleveractors.testing import ScriptedChatModel
from cleveractors.testing.tables import scripted_reply
from cleveractors.web import create_app


@dataclass
class _Actor:
    name: str
    system_prompt: str
    model: ScriptedChatModel = field(default_factory=lambda: ScriptedChatModel(replies=[]))
    has_weather: bool = False
    token_budget: int | None = None
    approval: list[str] = field(default_factory=list)
    hands_off_to: list[str] = field(default_factory=list)


@dataclass
class _HandoffWorld:
    actors: dict[str, _Actor] = field(default_factory=dict)
    store_url: str | None = None
    agents: dict[str, LLMAgent] = field(default_factory=dict)
    executor: ActorExecutor | None = None
    runs: list[SimpleNamespace] = field(default_factory=list)
    """Per run: its `result` and its `events` (none in blocking mode)."""

    def agent(self, name: str) -> LLMAgent:
        if not self.agents:
            for actor in self.actors.values():
                self.agents[actor.name] = LLMAgent(
                    actor.model,
                    name=actor.name,
                    system_prompt=actor.system_prompt or None,
                    tools=[get_weather] if actor.has_weather else [],
                    limits=LoopLimits(token_budget=actor.token_budget),
                    approval=actor.approval or None,
                )
            for actor in self.actors.values():
                for target in actor.hands_off_to:
                    self.agents[actor.name].add_handoff(self.agents[target])
        return self.agents[name]


def _world(context: Context) -> _HandoffWorld:
    world: _HandoffWorld | None = getattr(context, "handoffs", None)
    if world is None:
        world = context.handoffs = _HandoffWorld()
    return world


def _last(context: Context) -> SimpleNamespace:
    return _world(context).runs[-1]


async def _run(
    executor: ActorExecutor, turn: str | Resumption, mode: str, session_id: str | None
) -> SimpleNamespace:
    async with executor:
        if mode == "blocking":
            if isinstance(turn, Resumption):
                return SimpleNamespace(result=await executor.execute(turn), events=[])
            result = await executor.execute(turn, session_id=session_id)
            return SimpleNamespace(result=result, events=[])
        stream = executor.execute_events(turn, session_id=session_id)
        events: list[Event] = [event async for event in stream]
        return SimpleNamespace(result=stream.result, events=events)


def _ask(context: Context, message: str | Resumption, mode: str, session_id: str | None) -> None:
    world = _world(context)
    if world.store_url is None:  # its paused runs are kept in the executor's memory
        executor = world.executor = world.executor or ActorExecutor(world.agent("triage"))
    else:
        executor = ActorExecutor(world.agent("triage"), store=SqlStore(world.store_url))
    ran = asyncio.run(_run(executor, message, mode, session_id))
    ran.message = message
    world.runs.append(ran)
    context.outcome = ran  # read by the shared event steps


# -- the world -----------------------------------------------------------------------------------


@given('the handoff actor "{name}" with the system prompt "{prompt}"')
def handoff_actor(context: Context, name: str, prompt: str) -> None:
    _world(context).actors[name] = _Actor(name, prompt)


@given('the handoff actor "{name}" with the system prompt "{prompt}" and the demo tool get_weather')
def handoff_actor_with_tool(context: Context, name: str, prompt: str) -> None:
    _world(context).actors[name] = _Actor(name, prompt, has_weather=True)


@given("{first} and {second} hand off to each other")
def hand_off_to_each_other(context: Context, first: str, second: str) -> None:
    actors = _world(context).actors
    actors[first].hands_off_to.append(second)
    actors[second].hands_off_to.append(first)


@given("the handoff actors keep sessions in a fresh {database} store")
def handoff_store(context: Context, database: str) -> None:
    if database == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="cleveractors-handoffs-"))
        _world(context).store_url = f"sqlite:///{folder / 'store.db'}"
    else:
        _world(context).store_url = str(context.postgres.new_database())


@given("{name}'s model replies")
@given("{name}'s model replies:")
def model_replies(context: Context, name: str) -> None:
    replies = [scripted_reply(row.as_dict()) for row in context.table]
    _world(context).actors[name].model = ScriptedChatModel(replies=replies)


@given("{name} has the demo tool get_weather")
def has_weather(context: Context, name: str) -> None:
    _world(context).actors[name].has_weather = True


@given("{name} has no system prompt")
def no_system_prompt(context: Context, name: str) -> None:
    _world(context).actors[name].system_prompt = ""


@given("{name} has a token budget of {tokens:d}")
def token_budget(context: Context, name: str, tokens: int) -> None:
    _world(context).actors[name].token_budget = tokens


@given("{name}'s tool {tool} needs approval")
def needs_approval(context: Context, name: str, tool: str) -> None:
    _world(context).actors[name].approval.append(tool)


# -- the runs ------------------------------------------------------------------------------------


@when('session "{session_id}" is asked "{message}" in {mode} mode')
def ask_in_session(context: Context, session_id: str, message: str, mode: str) -> None:
    _ask(context, message, mode, session_id)


@when('triage is asked "{message}" without a session in {mode} mode')
def ask_without_session(context: Context, message: str, mode: str) -> None:
    _ask(context, message, mode, None)


@when("{name} no longer hands off to {target}")
def no_longer_hands_off(context: Context, name: str, target: str) -> None:
    world = _world(context)
    world.actors[name].hands_off_to.remove(target)
    world.agents.clear()  # rebuilt on the same models, as after a change of config


@when("the paused handoff run is resumed with {tool} approved")
def resume_approved(context: Context, tool: str) -> None:
    paused: ExecutionResult = _last(context).result
    assert paused.status == "paused", paused
    decisions = [
        ApprovalDecision(call_id=call.call_id, decision="approve")
        for call in paused.pending_approvals
        if call.name == tool
    ]
    _ask(context, Resumption(str(paused.run_id), decisions), "blocking", None)


# -- what happened -------------------------------------------------------------------------------


@then('the handoff run answered "{answer}" on {name}')
def answered_on(context: Context, answer: str, name: str) -> None:
    result: ExecutionResult = _last(context).result
    assert result.status == "answered", result.error
    assert result.answer == answer, result.answer
    assert result.active_agent == name, result.active_agent
    assert result.usage_by_call[-1].agent == name, result.usage_by_call


@then('the handoff run\'s synthesis reason is "{reason}"')
def synthesis_reason(context: Context, reason: str) -> None:
    assert _last(context).result.synthesis_reason == reason, _last(context).result


@then(
    "{name}'s request {number:d} was sent with {owner}'s system prompt, the user's message and "
    "tools {tools}"
)
def request_with_tools(context: Context, name: str, number: int, owner: str, tools: str) -> None:
    world = _world(context)
    request = world.actors[name].model.requests[number - 1]
    first = request.messages[0]
    assert isinstance(first, SystemMessage), request.messages
    assert first.content == world.actors[owner].system_prompt, first.content
    assert sum(isinstance(m, SystemMessage) for m in request.messages) == 1, request.messages
    users = [m.content for m in request.messages if isinstance(m, HumanMessage)]
    assert users[-1] == _last(context).message, users
    assert request.tool_names == tuple(tools.split(", ")), request.tool_names


@then(
    "{name}'s request {number:d} was sent with {owner}'s system prompt and the first turn "
    'before "{message}"'
)
def request_with_history(
    context: Context, name: str, number: int, owner: str, message: str
) -> None:
    world = _world(context)
    request = world.actors[name].model.requests[number - 1]
    assert request.messages[0].content == world.actors[owner].system_prompt, request.messages
    users = [m.content for m in request.messages if isinstance(m, HumanMessage)]
    assert users == ["I want a refund", message], users
    tool_names = [getattr(m, "name", None) for m in request.messages if m.type == "tool"]
    assert tool_names == ["transfer_to_billing"], tool_names


@then("{name}'s request {number:d} was sent without a system prompt")
def request_without_prompt(context: Context, name: str, number: int) -> None:
    request = _world(context).actors[name].model.requests[number - 1]
    assert not any(isinstance(m, SystemMessage) for m in request.messages), request.messages
    assert isinstance(request.messages[0], HumanMessage), request.messages


@then('the store says session "{session_id}" is with {name}')
def store_says(context: Context, session_id: str, name: str) -> None:
    async def read() -> str | None:
        query = select(sessions.c.active_actor).where(sessions.c.id == session_id)
        async with (
            SqlStore(str(_world(context).store_url)) as store,
            store.engine.begin() as connection,
        ):
            found: str | None = await connection.scalar(query)
            return found

    assert asyncio.run(read()) == name


@then("every handoff run's usage per agent adds up to its totals")
def usage_adds_up(context: Context) -> None:
    for ran in _world(context).runs:
        result: ExecutionResult = ran.result
        by_agent = result.usage_by_agent
        assert sum(part.llm_calls for part in by_agent.values()) == result.llm_calls
        assert sum(part.usage.prompt_tokens for part in by_agent.values()) == result.prompt_tokens
        assert (
            sum(part.usage.completion_tokens for part in by_agent.values())
            == result.completion_tokens
        )
        names = {call.agent for call in result.usage_by_call}
        assert set(by_agent) == names, (by_agent, names)
    assert {"triage", "billing"} <= {
        name for ran in _world(context).runs for name in ran.result.usage_by_agent
    }


@then('the ledger for session "{session_id}" holds the calls of both actors of every run')
def ledger_holds_both(context: Context, session_id: str) -> None:
    async def read() -> list[tuple[str, int, int]]:
        async with SqlStore(str(_world(context).store_url)) as store:
            report = await store.usage(session_id=session_id)
            return [(row.run_id, row.prompt_tokens, row.completion_tokens) for row in report.rows]

    billed = sorted(
        (str(ran.result.run_id), call.usage.prompt_tokens, call.usage.completion_tokens)
        for ran in _world(context).runs
        for call in ran.result.usage_by_call
    )
    assert sorted(asyncio.run(read())) == billed


@then("the handoff events are {kinds}")
def handoff_events(context: Context, kinds: str) -> None:
    seen = [e.kind for e in _last(context).events if e.kind not in ("text_delta",)]
    assert seen == ["run_started", *kinds.split(", "), "run_finished"], seen


@then(
    "the handoff event says {to_agent} took over from {from_agent} in round {round_number:d} "
    '(call {call_id}) because "{reason}"'
)
def handoff_event(
    context: Context, to_agent: str, from_agent: str, round_number: int, call_id: str, reason: str
) -> None:
    events = [e for e in _last(context).events if isinstance(e, HandoffOccurred)]
    assert events == [
        HandoffOccurred(
            round=round_number,
            call_id=call_id,
            from_agent=from_agent,
            to_agent=to_agent,
            reason=reason,
        )
    ], events


@then('a warning says "{text}"')
def warning_says(context: Context, text: str) -> None:
    warnings = [r.getMessage() for r in context.log_records if r.levelname == "WARNING"]
    assert any(text in warning for warning in warnings), warnings


@then('an agent named "{name}" is offered as the tool "{tool}"')
def offered_as(context: Context, name: str, tool: str) -> None:
    target = LLMAgent(ScriptedChatModel(replies=[]), name=name)
    agent = LLMAgent(ScriptedChatModel(replies=[]), name="other", handoffs=[target])
    assert list(agent.tools) == [tool], list(agent.tools)


def _refusal(action: Callable[[], object]) -> str:
    try:
        action()
    except ConfigurationError as exc:
        return str(exc)
    raise AssertionError("no ConfigurationError")


@then('{name} refuses a handoff to itself, saying "{message}"')
def refuses_itself(context: Context, name: str, message: str) -> None:
    agent = _world(context).agent(name)
    assert message in _refusal(lambda: agent.add_handoff(agent))


@then('{name} refuses a second agent named "{target}", saying "{message}"')
def refuses_same_name(context: Context, name: str, target: str, message: str) -> None:
    agent = _world(context).agent(name)
    other = LLMAgent(ScriptedChatModel(replies=[]), name=target)
    assert message in _refusal(lambda: agent.add_handoff(other))


@then('an agent refuses handoffs to two agents named "{target}", saying "{message}"')
def refuses_two_of_a_name(context: Context, target: str, message: str) -> None:
    first, second = (LLMAgent(ScriptedChatModel(replies=[]), name=target) for _ in range(2))
    model = ScriptedChatModel(replies=[])
    assert message in _refusal(lambda: LLMAgent(model, name="other", handoffs=[first, second]))


@then('an agent with a tool named "{tool}" refuses a handoff to {target}, saying "{message}"')
def refuses_taken_tool_name(context: Context, tool: str, target: str, message: str) -> None:
    def transfer(reason: str) -> str:
        return reason

    transfer.__name__ = tool
    agent = LLMAgent(ScriptedChatModel(replies=[]), name="other", tools=[transfer])
    assert message in _refusal(lambda: agent.add_handoff(_world(context).agent(target)))


# -- actor files ---------------------------------------------------------------------------------

_WEATHER_NAMED_LIKE_A_HANDOFF = (
    "[{name: transfer_to_second, handler: 'cleveractors.demo:get_weather'}]"
)
_FILES: dict[str, dict[str, tuple[str, list[str], str] | tuple[str, list[str], str, str]]] = {
    "a missing file": {"first.yaml": ("first", ["nowhere.yaml"], "stub")},
    "an actor naming itself": {"first.yaml": ("first", ["first.yaml"], "stub")},
    "two files of one name": {
        "first.yaml": ("first", ["second.yaml"], "stub"),
        "second.yaml": ("first", [], "stub"),
    },
    "an invalid target": {
        "first.yaml": ("first", ["second.yaml"], "stub"),
        "second.yaml": ("second", [], "nope"),
    },
    "a tool named like one": {
        "first.yaml": ("first", ["second.yaml"], "stub", _WEATHER_NAMED_LIKE_A_HANDOFF),
        "second.yaml": ("second", [], "stub"),
    },
    "two actors naming each other": {
        "first.yaml": ("first", ["second.yaml"], "stub"),
        "second.yaml": ("second", ["first.yaml"], "stub"),
    },
}


@given("the actor files of a handoff with {problem}")
def actor_files(context: Context, problem: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-handoff-files-"))
    for file_name, (name, handoffs, provider, *tools) in _FILES[problem].items():
        (folder / file_name).write_text(
            textwrap.dedent(
                f"""\
                name: {name}
                handoffs: {handoffs}
                agent:
                  provider: {provider}
                  tools: {tools[0] if tools else "[]"}
                  script: [{{text: Hi}}]
                """
            ),
            encoding="utf-8",
        )
    context.handoff_folder = folder


@when("the first actor file is loaded")
def load_first(context: Context) -> None:
    context.handoff_error = context.handoff_executor = None
    try:
        context.handoff_executor = ActorExecutor.from_config(context.handoff_folder / "first.yaml")
    except ConfigurationError as exc:
        context.handoff_error = exc


@then('loading it fails with ConfigurationError naming "{file}" and saying "{message}"')
def load_fails(context: Context, file: str, message: str) -> None:
    error = context.handoff_error
    assert error is not None, "it loaded"
    assert str(context.handoff_folder / file) in str(error), str(error)
    assert message in str(error), str(error)


# -- over HTTP -----------------------------------------------------------------------------------

_BODIES: dict[str, Callable[[str], dict[str, Any]]] = {
    "/chat": lambda text: {"message": text},
    "/ai-sdk": lambda text: {
        "id": "chat-1",
        "messages": [{"id": "m0", "role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
    },
    "/ag-ui": lambda text: {
        "threadId": "chat-1",
        "runId": "client-run",
        "messages": [{"id": "m0", "role": "user", "content": text}],
    },
    "/v1/chat/completions": lambda text: {
        "model": "triage",
        "messages": [{"role": "user", "content": text}],
        "stream": True,
    },
}


@when('the web app serving triage is sent "{message}" to {route}')
def send_to_route(context: Context, message: str, route: str) -> None:
    app = create_app(ActorExecutor(_world(context).agent("triage")))

    async def exchange() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post(route, json=_BODIES[route](message))

    context.handoff_response = asyncio.run(exchange())


@then('the response is {status:d} and holds "{text}"')
def response_holds(context: Context, status: int, text: str) -> None:
    response: httpx.Response = context.handoff_response
    assert response.status_code == status, response.text
    assert text in "".join(_texts(response.text)), response.text


@then("the response holds {count:d} handoff SSE frame from {from_agent} to {to_agent}")
def handoff_frames(context: Context, count: int, from_agent: str, to_agent: str) -> None:
    text: str = context.handoff_response.text
    frames = [frame for frame in text.split("\n\n") if frame.startswith("event: handoff\n")]
    assert len(frames) == count, text
    for frame in frames:
        data = json.loads(frame.split("data: ", 1)[1])
        assert (data["from_agent"], data["to_agent"]) == (from_agent, to_agent), data


def _texts(body: str) -> list[str]:
    """The text pieces an SSE body carries, whatever the route's words for them."""
    pieces = []
    for line in body.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        data = json.loads(line[len("data: ") :])
        for key in ("text", "delta", "content"):
            value = data.get(key) if isinstance(data, dict) else None
            if isinstance(value, str):
                pieces.append(value)
        for choice in data.get("choices", []) if isinstance(data, dict) else []:
            pieces.append(choice.get("delta", {}).get("content") or "")
    return pieces


@then("the first actor hands off to the second, which hands back to the very same first")
def hands_back_to_the_same(context: Context) -> None:
    first = context.handoff_executor.agent
    (second,) = first.handoffs.agents
    assert second.name == "second", second.name
    assert second.handoffs.agents == (first,), second.handoffs.agents
    assert list(first.tools) == ["transfer_to_second"], list(first.tools)
    assert list(second.tools) == ["transfer_to_first"], list(second.tools)
