"""Steps of web.approvals.feature: `create_app()` over an actor whose `refund` tool needs a
person's approval, driven through httpx's ASGI transport on one event loop per scenario.

The caller is named by an `X-Caller` header (the app's `authenticate` reads it), as an app's own
authentication would name it. The model is a `ScriptedChatModel` in global order: a paused run's
resumption gets the script's next reply, whichever segment asks. Every step text says "over
HTTP" or "the approvals app", so none can shadow the core approval scenarios' steps.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from behave import given, then, when
from behave.runner import Context
from langchain_core.messages import ToolMessage
from starlette.requests import Request

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent, tool_from_callable
from cleveractors.runs import new_run_id
from cleveractors.testing import ScriptedChatModel, ScriptedReply, ScriptedToolCall
from cleveractors.web import create_app, current_caller

_BASE_URL = "http://127.0.0.1:8000"
_ANSWER = "Here is what happened with order A1."


@dataclass
class _ApprovalsWorld:
    """The app's actor, what its tools did, what on_usage heard, and the latest response."""

    executor: ActorExecutor
    model: ScriptedChatModel
    loop: asyncio.AbstractEventLoop
    ran: list[str] = field(default_factory=list)
    usage: list[tuple[str | None, ExecutionResult]] = field(default_factory=list)
    response: httpx.Response | None = None
    paused_run_id: str | None = None
    resumed_run_id: str | None = None
    paused_digest: str | None = None
    segments: list[str] = field(default_factory=list)
    """Every run segment of the latest turn, oldest first."""
    paused_again: dict[str, Any] | None = None
    """The result of a resumed segment that paused again."""

    def app(self) -> Any:
        async def caller_from_header(request: Request) -> str | None:
            return request.headers.get("x-caller")

        def record_usage(result: ExecutionResult) -> None:
            self.usage.append((current_caller(), result))

        return create_app(self.executor, on_usage=record_usage, authenticate=caller_from_header)

    def send(self, method: str, path: str, **options: Any) -> httpx.Response:
        async def exchange() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app())
            async with httpx.AsyncClient(transport=transport, base_url=_BASE_URL) as client:
                return await client.request(method, path, **options)

        self.response = self.loop.run_until_complete(exchange())
        return self.response


def _world(context: Context) -> _ApprovalsWorld:
    world: _ApprovalsWorld = context.approvals
    return world


def _caller(who: str) -> dict[str, str]:
    return {"X-Caller": who}


def _events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """The SSE messages of RESPONSE as (event name, data) pairs."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    for line in response.text.splitlines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            events.append((name, json.loads(line.removeprefix("data:").strip())))
    return events


def _events_of(world: _ApprovalsWorld, kind: str) -> list[dict[str, Any]]:
    assert world.response is not None, "no request was sent"
    return [data for name, data in _events(world.response) if name == kind]


def _decide(world: _ApprovalsWorld, who: str, decisions: list[dict[str, Any]]) -> httpx.Response:
    response = world.send(
        "POST",
        f"/runs/{world.paused_run_id}/decisions",
        json={"decisions": decisions},
        headers=_caller(who),
    )
    if response.status_code == 200 and (started := _events_of(world, "run_started")):
        world.resumed_run_id = started[0]["run_id"]
        world.segments.append(world.resumed_run_id)
        if paused := _events_of(world, "run_paused"):
            world.paused_again = paused[0]["result"]
    return response


# -- the world -----------------------------------------------------------------------------------


def _actor(
    world_ran: list[str], *, approval_timeout_s: float, refunds: int = 1
) -> tuple[LLMAgent, ScriptedChatModel]:
    def lookup(order: str) -> str:
        """Look an order up."""
        world_ran.append("lookup")
        return f"order {order}: 2 items, paid 30 EUR"

    def refund(order: str, amount: float) -> str:
        """Refund an amount on an order."""
        world_ran.append("refund")
        return f"refunded {amount:g} on {order}"

    calls = (
        ScriptedToolCall(name="lookup", args={"order": "A1"}, id="c1"),
        ScriptedToolCall(name="refund", args={"order": "A1", "amount": 30}, id="c2"),
    )
    again = [  # each further refund asked for in a round of its own, paused for again
        ScriptedReply(
            text="One more refund.",
            tool_calls=(
                ScriptedToolCall(name="refund", args={"order": "A1", "amount": 5}, id=f"c{n}"),
            ),
            prompt_tokens=30,
            completion_tokens=3,
        )
        for n in range(3, refunds + 2)
    ]
    model = ScriptedChatModel(
        replies=[
            ScriptedReply(
                text="Let me look.", tool_calls=calls, prompt_tokens=20, completion_tokens=5
            ),
            *again,
            ScriptedReply(text=_ANSWER, prompt_tokens=40, completion_tokens=4),
        ]
    )
    tools = [tool_from_callable(lookup), tool_from_callable(refund, needs_approval=True)]
    agent = LLMAgent(model, tools=tools, name="refunds", approval_timeout_s=approval_timeout_s)
    return agent, model


def _keep_pauses(
    context: Context, where: str, *, approval_timeout_s: float = 3600.0, refunds: int = 1
) -> None:
    ran: list[str] = []
    agent, model = _actor(ran, approval_timeout_s=approval_timeout_s, refunds=refunds)
    store = None
    if where == "in a sqlite store":
        from cleveractors.store import SqlStore

        folder = Path(tempfile.mkdtemp(prefix="cleveractors-web-approvals-"))
        store = SqlStore(f"sqlite:///{folder / 'approvals.db'}")
    elif where != "in memory":
        raise ValueError(f"unknown place for pauses: {where!r}")
    loop = asyncio.new_event_loop()
    executor = ActorExecutor(agent, store=store)
    context.approvals = _ApprovalsWorld(executor, model, loop, ran=ran)

    def close() -> None:
        loop.run_until_complete(executor.aclose())
        # sse-starlette leaves a shutdown watcher per app waiting on the loop: stop it first.
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    context.add_cleanup(close)


@given("the approvals app keeps its pauses {where}, its calls expiring at once")
def keeps_pauses_expiring(context: Context, where: str) -> None:
    _keep_pauses(context, where, approval_timeout_s=0.001)


@given("the approvals app keeps its pauses {where}, its model asking for a second refund")
def keeps_pauses_refunding_twice(context: Context, where: str) -> None:
    _keep_pauses(context, where, refunds=2)


@given("the approvals app keeps its pauses {where}")
def keeps_pauses(context: Context, where: str) -> None:
    _keep_pauses(context, where)


@given('"{who}" has a run over HTTP paused on the refund in session "{session_id}"')
def has_paused_run_in_session(context: Context, who: str, session_id: str) -> None:
    chats_in_session(context, who, "Refund order A1", session_id)
    _check_paused(_world(context))


@given('"{who}" has a run over HTTP paused on the refund')
def has_paused_run(context: Context, who: str) -> None:
    chats(context, who, "Refund order A1")
    _check_paused(_world(context))


def _check_paused(world: _ApprovalsWorld) -> None:
    assert world.response is not None, "no response"
    assert world.response.status_code == 200, world.response.text
    assert _events_of(world, "run_paused"), _events(world.response)


@given('another request of "{who}" holds session "{session_id}"')
def another_request_holds(context: Context, who: str, session_id: str) -> None:
    world = _world(context)
    store = world.executor.store
    assert store is not None, "the scenario keeps no store"
    holding = store.begin_run(run_id=new_run_id(), session_id=session_id, caller=who)
    context.session_holder = world.loop.run_until_complete(holding)


@when('the other request lets session "{session_id}" go')
def lets_session_go(context: Context, session_id: str) -> None:
    holder = context.session_holder
    assert holder.session_id == session_id, holder.session_id
    _world(context).loop.run_until_complete(holder.end("cancelled"))


# -- requests ------------------------------------------------------------------------------------


@when('"{who}" chats "{message}" over HTTP in session "{session_id}"')
def chats_in_session(context: Context, who: str, message: str, session_id: str) -> None:
    _chat(_world(context), who, {"message": message, "session_id": session_id})


@when('"{who}" chats "{message}" over HTTP')
def chats(context: Context, who: str, message: str) -> None:
    _chat(_world(context), who, {"message": message})


def _chat(world: _ApprovalsWorld, who: str, body: dict[str, Any]) -> None:
    world.send("POST", "/chat", json=body, headers=_caller(who))
    if paused := _events_of(world, "run_paused"):
        world.paused_run_id = paused[0]["result"]["run_id"]
        world.paused_digest = paused[0]["result"]["pending_approvals"][0]["digest"]
        world.segments = [world.paused_run_id]


@when('"{who}" approves the second refund over HTTP')
def approves_again(context: Context, who: str) -> None:
    world = _world(context)
    assert world.paused_again is not None, "no resumed segment paused again"
    (pending,) = world.paused_again["pending_approvals"]
    world.paused_run_id = world.paused_again["run_id"]
    decision = {"call_id": pending["call_id"], "decision": "approve", "digest": pending["digest"]}
    _decide(world, who, [decision])


@when('"{who}" approves the refund over HTTP')
def approves(context: Context, who: str) -> None:
    world = _world(context)
    _decide(world, who, [{"call_id": "c2", "decision": "approve", "digest": world.paused_digest}])


@when('"{who}" rejects the refund over HTTP because "{reason}"')
def rejects(context: Context, who: str, reason: str) -> None:
    _decide(_world(context), who, [{"call_id": "c2", "decision": "reject", "reason": reason}])


@when('"{who}" posts over HTTP the decisions {decisions}')
def posts_decisions(context: Context, who: str, decisions: str) -> None:
    _decide(_world(context), who, json.loads(decisions))


@when('"{who}" posts an approval of the refund over HTTP {how}')
def posts_approval_how(context: Context, who: str, how: str) -> None:
    world = _world(context)
    path = f"/runs/{world.paused_run_id}/decisions"
    body: dict[str, Any] = {"decisions": [{"call_id": "c2", "decision": "approve"}]}
    headers = _caller(who)
    if how == "without naming the caller":
        headers = {}
    elif how.startswith("typed "):
        headers["content-type"] = how.removeprefix("typed ").strip('"')
        world.send("POST", path, content=json.dumps(body).encode(), headers=headers)
        return
    elif how.startswith("padded to "):
        size = int(how.removeprefix("padded to ").removesuffix(" bytes"))
        body["padding"] = "x" * size
    elif how.startswith("for the host "):
        headers["host"] = how.removeprefix("for the host ").strip('"')
    elif how.startswith("with the body "):
        body = json.loads(how.removeprefix("with the body "))
    else:
        raise ValueError(f"unknown way to post: {how!r}")
    world.send("POST", path, json=body, headers=headers)


@when('"{who}" reads the paused run over HTTP')
def reads_paused(context: Context, who: str) -> None:
    world = _world(context)
    world.send("GET", f"/runs/{world.paused_run_id}", headers=_caller(who))


@when('"{who}" reads the resumed segment over HTTP')
def reads_resumed(context: Context, who: str) -> None:
    world = _world(context)
    world.send("GET", f"/runs/{world.resumed_run_id}", headers=_caller(who))


@when('"{who}" asks "{message}" over HTTP through /v1/chat/completions')
def asks_completion(context: Context, who: str, message: str) -> None:
    body = {"model": "refunds", "messages": [{"role": "user", "content": message}]}
    _world(context).send("POST", "/v1/chat/completions", json=body, headers=_caller(who))


# -- what the client saw -------------------------------------------------------------------------


def _response(context: Context) -> httpx.Response:
    response = _world(context).response
    assert response is not None, "no request was sent"
    return response


@then("the response is 200 and the stream ends with {kind}")
def stream_ends(context: Context, kind: str) -> None:
    response = _response(context)
    assert response.status_code == 200, (response.status_code, response.text)
    kinds = [name for name, _ in _events(response)]
    assert kinds[-1:] == [kind], kinds
    assert kinds.count(kind) == 1, kinds


@then("the stream carries tool_approval_requested for refund with the arguments {arguments}")
def approval_requested(context: Context, arguments: str) -> None:
    world = _world(context)
    requested = _events_of(world, "tool_approval_requested")
    assert [(event["call_id"], event["name"]) for event in requested] == [("c2", "refund")]
    assert requested[0]["arguments"] == json.loads(arguments), requested[0]
    assert requested[0]["digest"] == world.paused_digest, requested[0]


@then(
    "the stream's run_paused result waits on the refund call and spent "
    "{prompt:d} prompt and {completion:d} completion tokens"
)
def paused_result(context: Context, prompt: int, completion: int) -> None:
    (paused,) = _events_of(_world(context), "run_paused")
    result = paused["result"]
    assert [call["call_id"] for call in result["pending_approvals"]] == ["c2"], result
    assert (result["prompt_tokens"], result["completion_tokens"]) == (prompt, completion), result


@then("the response's X-Run-Id names the paused run")
def run_id_names_paused(context: Context) -> None:
    world = _world(context)
    assert _response(context).headers["x-run-id"] == world.paused_run_id


@then(
    "the stream starts with run_started resumed from the paused run, under the response's X-Run-Id"
)
def resumed_start(context: Context) -> None:
    world = _world(context)
    response = _response(context)
    name, first = _events(response)[0]
    assert name == "run_started", (name, first)
    assert first["resumed_from"] == world.paused_run_id, first
    assert first["run_id"] == response.headers["x-run-id"] != world.paused_run_id, first


@then('the stream carries tool_call_decided "{decision}" for the refund call')
def call_decided(context: Context, decision: str) -> None:
    decided = _events_of(_world(context), "tool_call_decided")
    assert [(event["call_id"], event["decision"]) for event in decided] == [("c2", decision)]


@then('the resumed answer over HTTP is "{text}"')
def answer_is(context: Context, text: str) -> None:
    (finished,) = _events_of(_world(context), "run_finished")
    assert finished["result"]["text"].endswith(text), finished["result"]["text"]


@then("the app's lookup ran once and its refund {times}")
def tools_ran(context: Context, times: str) -> None:
    expected = {"never": 0, "once": 1}[times]
    ran = _world(context).ran
    assert (ran.count("lookup"), ran.count("refund")) == (1, expected), ran


@then("on_usage heard of 1 segment")
def heard_one(context: Context) -> None:
    usage = _world(context).usage
    assert len(usage) == 1, [result for _, result in usage]


@then(
    "on_usage heard of 2 segments: {first_prompt:d} + {first_completion:d} tokens, then "
    "{second_prompt:d} + {second_completion:d}, under their own run ids"
)
def heard_two(
    context: Context,
    first_prompt: int,
    first_completion: int,
    second_prompt: int,
    second_completion: int,
) -> None:
    world = _world(context)
    heard = [
        (caller, result.run_id, result.prompt_tokens, result.completion_tokens)
        for caller, result in world.usage
    ]
    assert heard == [
        ("alice", world.paused_run_id, first_prompt, first_completion),
        ("alice", world.resumed_run_id, second_prompt, second_completion),
    ], heard
    assert world.usage[1][1].resumed_from == world.paused_run_id


@then('the model\'s last request answers the refund call with "{text}"')
def last_request_answers(context: Context, text: str) -> None:
    messages = _world(context).model.requests[-1].messages
    answers = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "c2"]
    assert len(answers) == 1, messages
    assert text in answers[0].text, answers[0].text


@then(
    'the response is {status:d} with the status "{run_status}" and the pending refund call '
    "with its digest"
)
def shows_pending(context: Context, status: int, run_status: str) -> None:
    world = _world(context)
    response = _response(context)
    assert response.status_code == status, response.text
    view = response.json()
    assert (view["run_id"], view["status"]) == (world.paused_run_id, run_status), view
    (pending,) = view["pending_approvals"]
    assert (pending["call_id"], pending["name"], pending["digest"]) == (
        "c2",
        "refund",
        world.paused_digest,
    ), pending
    assert pending["arguments"] == {"order": "A1", "amount": 30}, pending


@then('the response is {status:d} with the status "{run_status}" and no pending call')
def shows_status(context: Context, status: int, run_status: str) -> None:
    response = _response(context)
    assert response.status_code == status, response.text
    view = response.json()
    assert (view["status"], view["pending_approvals"]) == (run_status, []), view


@then("the response is 404 with the detail of an unknown run")
def unknown_run(context: Context) -> None:
    world = _world(context)
    response = _response(context)
    run_id = response.url.path.rsplit("/", 1)[-1]
    assert response.status_code == 404, response.text
    assert response.json() == {"detail": f"no run {run_id!r}"}, response.text
    nobody = world.send("GET", "/runs/run_nobodys", headers=_caller("alice"))
    assert (nobody.status_code, nobody.json()) == (404, {"detail": "no run 'run_nobodys'"})


@then('the response is {status:d} with a JSON detail saying "{detail}"')
def refused_with(context: Context, status: int, detail: str) -> None:
    response = _response(context)
    assert response.status_code == status, (response.status_code, response.text)
    if response.headers.get("content-type", "").startswith("application/json"):
        assert detail in response.json()["detail"], response.text
    else:  # the Host check answers before any route, in plain text
        assert status == 400, response.text
        assert detail in response.text, response.text


@then("the response carries no X-Run-Id")
def no_run_id(context: Context) -> None:
    assert "x-run-id" not in _response(context).headers


@then('the completion answers "{text}"')
def completion_answers(context: Context, text: str) -> None:
    response = _response(context)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"].endswith(text), response.text


@then(
    'the store\'s audit holds one decision on the refund: "{decision}" by "{who}", '
    'because "{reason}"'
)
def audit_holds(context: Context, decision: str, who: str, reason: str) -> None:
    world = _world(context)
    store = world.executor.store
    assert store is not None, "the scenario keeps no store"
    records = world.loop.run_until_complete(store.approvals(run_id=world.paused_run_id))
    told = [(r.call_id, r.decision, r.decided_by, r.reason, r.resumed_in) for r in records]
    assert told == [("c2", decision, who, reason, world.resumed_run_id)], told


# -- the session's turns (GET /sessions/{id}) ----------------------------------------------------


@when('"{who}" reads session "{session_id}" over HTTP')
def reads_session(context: Context, who: str, session_id: str) -> None:
    _world(context).send("GET", f"/sessions/{session_id}", headers=_caller(who))


def _session_turns(context: Context, count: int) -> list[dict[str, Any]]:
    response = _response(context)
    assert response.status_code == 200, (response.status_code, response.text)
    turns: list[dict[str, Any]] = response.json()["turns"]
    assert len(turns) == count, json.dumps(turns, indent=2)
    return turns


@then("the session shows 1 turn, answered, made by the paused run and its resumption")
def shows_resumed_turn(context: Context) -> None:
    world = _world(context)
    (turn,) = _session_turns(context, 1)
    assert turn["status"] == "answered", turn
    assert turn["run_id"] == world.resumed_run_id, (turn["run_id"], world.resumed_run_id)
    assert turn["segments"] == [world.paused_run_id, world.resumed_run_id], turn["segments"]
    assert turn["pending_approvals"] == [], turn["pending_approvals"]
    assert turn["text"].endswith(_ANSWER), turn["text"]


@then("the session shows 1 turn, paused on the refund call with its digest, made by the paused run")
def shows_paused_turn(context: Context) -> None:
    world = _world(context)
    (turn,) = _session_turns(context, 1)
    assert turn["status"] == "paused", turn
    assert (turn["run_id"], turn["segments"]) == (world.paused_run_id, [world.paused_run_id]), turn
    (pending,) = turn["pending_approvals"]
    assert (pending["call_id"], pending["name"], pending["digest"]) == (
        "c2",
        "refund",
        world.paused_digest,
    ), pending
    assert turn["messages"][0] == {
        "role": "user",
        "content": "Refund order A1",
        "tool_calls": [],
        "tool_call_id": None,
        "name": None,
        "status": None,
        "decision": None,
        "reason": None,
    }, turn["messages"][0]
    assert turn["text"] == "Let me look.", turn["text"]


@then("the session shows 1 turn, answered, made by its {count:d} segments")
def shows_segments(context: Context, count: int) -> None:
    world = _world(context)
    (turn,) = _session_turns(context, 1)
    assert turn["status"] == "answered", turn
    assert len(world.segments) == count, world.segments
    assert (turn["run_id"], turn["segments"]) == (world.segments[-1], world.segments), turn


@then("the session shows 1 turn, paused on the second refund, made by its {count:d} segments")
def shows_paused_again(context: Context, count: int) -> None:
    world = _world(context)
    (turn,) = _session_turns(context, 1)
    assert turn["status"] == "paused", turn
    assert len(world.segments) == count, world.segments
    assert (turn["run_id"], turn["segments"]) == (world.segments[-1], world.segments), turn
    assert [pending["call_id"] for pending in turn["pending_approvals"]] == ["c3"], turn
    roles = [message["role"] for message in turn["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"], roles
    assert turn["messages"][0]["content"] == "Refund order A1", turn["messages"][0]
    assert _tool_results(turn)["c2"]["decision"] == "approve", turn["messages"]
    assert turn["text"] == "Let me look.\n\nOne more refund.", turn["text"]


@then("the session shows 2 turns, the first made by the paused run alone")
def shows_superseded_turn(context: Context) -> None:
    world = _world(context)
    first, second = _session_turns(context, 2)
    assert (first["status"], second["status"]) == ("answered", "answered"), (first, second)
    assert (first["run_id"], first["segments"]) == (world.paused_run_id, [world.paused_run_id])
    assert second["segments"] == [second["run_id"]] != [world.paused_run_id], second


def _ledger_of(context: Context, session_id: str) -> tuple[int, int, int]:
    world = _world(context)
    store = world.executor.store
    assert store is not None, "the scenario keeps no store"
    report = world.loop.run_until_complete(store.usage(session_id=session_id))
    return report.prompt_tokens, report.completion_tokens, len(report.rows)


def _billed(turn: dict[str, Any]) -> tuple[int, int, int]:
    usage = turn["usage"]
    assert usage is not None, turn
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"], usage
    return usage["prompt_tokens"], usage["completion_tokens"], usage["llm_calls"]


@then(
    "the turn billed {prompt:d} prompt and {completion:d} completion tokens in {calls:d} LLM "
    '{noun}, as the ledger holds for session "{session_id}"'
)
def turn_billed(
    context: Context, prompt: int, completion: int, calls: int, noun: str, session_id: str
) -> None:
    (turn,) = _response(context).json()["turns"]
    assert _billed(turn) == (prompt, completion, calls), turn["usage"]
    assert _ledger_of(context, session_id) == (prompt, completion, calls)


@then(
    "the first turn billed {prompt:d} prompt and {completion:d} completion tokens in {calls:d} "
    "LLM call"
)
def first_turn_billed(context: Context, prompt: int, completion: int, calls: int) -> None:
    first = _response(context).json()["turns"][0]
    assert _billed(first) == (prompt, completion, calls), first["usage"]


def _tool_results(turn: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["tool_call_id"]: m for m in turn["messages"] if m["role"] == "tool"}


def _lookup_answered(turn: dict[str, Any]) -> None:
    lookup = _tool_results(turn)["c1"]
    expected = ("order A1: 2 items, paid 30 EUR", "success", None)
    assert (lookup["content"], lookup["status"], lookup["decision"]) == expected, lookup


@then('the turn\'s lookup answered, and its refund was "{decision}" because "{reason}"')
def refund_declined(context: Context, decision: str, reason: str) -> None:
    (turn,) = _response(context).json()["turns"]
    _lookup_answered(turn)
    refund = _tool_results(turn)["c2"]
    assert (refund["decision"], refund["reason"], refund["status"]) == (decision, reason, "error")
    assert reason in refund["content"], refund


@then('the turn\'s lookup answered, and its refund was "{decision}" and answered "{output}"')
def refund_approved(context: Context, decision: str, output: str) -> None:
    (turn,) = _response(context).json()["turns"]
    _lookup_answered(turn)
    refund = _tool_results(turn)["c2"]
    assert (refund["decision"], refund["content"], refund["status"]) == (
        decision,
        output,
        "success",
    ), refund


@then("the turn's lookup answered, and its refund has no answer yet")
def refund_waits(context: Context) -> None:
    (turn,) = _response(context).json()["turns"]
    _lookup_answered(turn)
    assert "c2" not in _tool_results(turn), turn["messages"]
    calls = [call["id"] for m in turn["messages"] for call in m["tool_calls"]]
    assert calls == ["c1", "c2"], turn["messages"]


@then('the first turn\'s refund was "{decision}"')
def first_refund(context: Context, decision: str) -> None:
    first = _response(context).json()["turns"][0]
    refund = _tool_results(first)["c2"]
    assert (refund["decision"], refund["status"]) == (decision, "error"), refund
