"""Steps about context-window management: `ChatOpenAI` and `ChatAnthropic` over the wire
against scripted servers that enforce a window or refuse a prompt as too long, and stub actors
whose model refuses. Every step text names "the context", "the session", "the summarising
calls", "some compactions", "a scripted OpenAI/Anthropic server ...", "a stored openai actor",
"an openai/anthropic actor on that server", "a stub actor", "the stub actor", "the openai SDK"
or "messages ... on one session", so none can shadow the steps of other modules.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import openai
from behave import given, then, when
from behave.runner import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.context_server import LongSessionServer, is_summary_request

from cleveractors import ActorExecutor
from cleveractors.config import load_actor_config
from cleveractors.errors import ConfigurationError
from cleveractors.events import ContextCompacted
from cleveractors.testing import ScriptedAnthropicServer, ScriptedOpenAIServer, ScriptedReply

_KEY_VARIABLE = "CLEVERACTORS_CONTEXT_SERVER_KEY"
_SESSION = "long-session"


@given(
    "a scripted OpenAI server with a {window:d}-token window, whose tool reports are "
    "{facts:d} facts long"
)
def long_session_server(context: Context, window: int, facts: int) -> None:
    server = LongSessionServer(context_window=window, report_facts=facts)
    server.start()
    context.add_cleanup(server.stop)
    context.context_server = server


@given(
    "a stored openai actor with the tool long_report, a context_window of {window:d}, a "
    "context_budget of {budget:d} and the compaction_model {compaction_model}"
)
def stored_actor(context: Context, window: int, budget: int, compaction_model: str) -> None:
    folder = tempfile.TemporaryDirectory()
    context.add_cleanup(folder.cleanup)
    os.environ[_KEY_VARIABLE] = "sk-scripted"
    context.add_cleanup(os.environ.pop, _KEY_VARIABLE, None)
    actor = _actor(context.context_server, window)
    actor["agent"] |= {"context_budget": budget, "compaction_model": compaction_model}
    context.context_actor = actor | {
        "store": {"url": f"sqlite:///{Path(folder.name) / 'sessions.db'}", "history_turns": 1000}
    }


def _actor(server: ScriptedOpenAIServer, window: int) -> dict[str, Any]:
    return {
        "name": "reports",
        "agent": {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "base_url": server.base_url,
            "api_key_env": _KEY_VARIABLE,
            "max_retries": 0,
            "context_window": window,
            "tools": [{"name": "long_report", "handler": "cleveractors.demo:long_report"}],
        },
    }


@when("{count:d} messages are sent on one session")
def messages_on_one_session(context: Context, count: int) -> None:
    words = " ".join(f"detail{n}" for n in range(200))  # a long message: fewer turns fit

    async def run() -> None:
        context.context_results, context.context_compactions = [], []
        async with ActorExecutor.from_config(context.context_actor) as executor:
            for turn in range(count):
                message = f"Report topic{turn} please, with {words}"
                async for event in executor.execute_events(message, session_id=_SESSION):
                    if isinstance(event, ContextCompacted):
                        context.context_compactions.append(event)
                context.context_results.append(executor.last_result)
            store = executor.store
            assert store is not None
            context.context_ledger = (await store.usage(session_id=_SESSION)).rows
            context.context_turns = await store.history(_SESSION)

    asyncio.run(run())


@then("every turn was answered and no request was refused")
def every_turn_answered(context: Context) -> None:
    failed = [r.error for r in context.context_results if r.error is not None]
    assert not failed, failed[:3]
    refused = [call for call in context.context_ledger if call.status != "ok"]
    assert not refused, refused[:3]


@then("every prompt the server received stayed within the context budget of {budget:d} tokens")
def prompts_within_budget(context: Context, budget: int) -> None:
    largest = max(call.prompt_tokens for call in context.context_server.billed)
    assert largest <= budget, f"a prompt of {largest} tokens was sent"


@then("every summarising call is a ledger row with purpose compaction and a cost")
def summaries_billed(context: Context) -> None:
    on_wire = sum(1 for body in context.context_server.requests if is_summary_request(body))
    rows = [row for row in context.context_ledger if row.purpose == "compaction"]
    assert on_wire >= 2, f"only {on_wire} summarising requests: the window never filled twice"
    assert len(rows) == on_wire, f"{len(rows)} ledger rows for {on_wire} summarising requests"
    assert all(row.cost_usd is not None and row.cost_usd > 0 for row in rows), rows


@then("the summarising calls came at most once per window fill")
def once_per_fill(context: Context) -> None:
    """Between two summaries the conversation must have grown by a quarter of the window at
    least (the prompts' growth, as the server counted them, summed over the requests between:
    a compaction brings the prompt to half the budget, and the next comes at the budget), and
    no run summarises twice."""
    server = context.context_server
    window = server.context_window
    sizes = [
        (is_summary_request(body), billed.prompt_tokens)
        for body, billed in zip(server.requests, server.billed, strict=True)
    ]
    growth, seen_summary = 0, False
    previous = None
    for is_summary, size in sizes:
        if is_summary:
            assert not seen_summary or growth >= window // 4, f"a summary after {growth} tokens"
            seen_summary, growth, previous = True, 0, None
            continue
        if previous is not None and size > previous:
            growth += size - previous
        previous = size
    per_run: dict[str, int] = {}
    for row in context.context_ledger:
        if row.purpose == "compaction":
            per_run[row.run_id] = per_run.get(row.run_id, 0) + 1
    assert max(per_run.values()) == 1, per_run


@then("no request carried a tool call without its result")
def calls_paired(context: Context) -> None:
    for index, body in enumerate(context.context_server.requests):
        asked: set[str] = set()
        answered: set[str] = set()
        for message in body["messages"]:
            asked.update(call["id"] for call in message.get("tool_calls") or ())
            if message["role"] == "tool":
                assert message["tool_call_id"] in asked, (
                    f"request {index}: a result before its call"
                )
                answered.add(message["tool_call_id"])
        assert asked == answered, f"request {index}: calls {asked - answered} have no result"


@then("the session keeps all {count:d} turns whole, the tool outputs included")
def session_whole(context: Context, count: int) -> None:
    turns = context.context_turns
    assert len(turns) == count, len(turns)
    outputs = [m.text for turn in turns for m in turn.messages if m.type == "tool"]
    assert len(outputs) == count, len(outputs)
    assert all("Key fact" in text for text in outputs), "a stored tool output was changed"


@given(
    'a scripted OpenAI server with a {window:d}-token window that answers "{first}" then "{second}"'
)
def windowed_server(context: Context, window: int, first: str, second: str) -> None:
    script = [ScriptedReply(text=first), ScriptedReply(text=second)]
    server = ScriptedOpenAIServer(script, context_window=window)
    server.start()
    context.add_cleanup(server.stop)
    context.context_server = server
    os.environ[_KEY_VARIABLE] = "sk-scripted"
    context.add_cleanup(os.environ.pop, _KEY_VARIABLE, None)


def _ask_with_history(
    context: Context,
    message: str,
    turns: int,
    words: int,
    actor: dict[str, Any] | None = None,
    tracer_provider: TracerProvider | None = None,
) -> None:
    long_text = " ".join(f"word{n}" for n in range(words))
    history: list[dict[str, str]] = []
    for turn in range(turns):
        history += [
            {"role": "user", "content": f"Turn {turn}: {long_text}"},
            {"role": "assistant", "content": f"Answer {turn}: {long_text}"},
        ]
    if actor is None:
        actor = _actor(context.context_server, window=0)
        del actor["agent"]["context_window"]  # the profile: a window far larger than the server's

    async def run() -> None:
        context.context_events = events = []
        executor = ActorExecutor.from_config(actor, tracer_provider=tracer_provider)
        async with executor:
            try:
                async for event in executor.execute_events(message, history=history):
                    events.append(event)
            finally:
                context.context_result = executor.last_result

    context.context_error = None
    try:
        asyncio.run(run())
    except Exception as exc:  # the run's failure, re-raised by the stream
        context.context_error = exc


@when(
    'an openai actor on that server is asked "{message}" after {turns:d} turns of '
    "{words:d} words each"
)
def asked_after_history(context: Context, message: str, turns: int, words: int) -> None:
    _ask_with_history(context, message, turns, words)


@when(
    'an openai actor on that server, its spans kept, is asked "{message}" after {turns:d} turns '
    "of {words:d} words each"
)
def asked_after_history_traced(context: Context, message: str, turns: int, words: int) -> None:
    context.context_spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(context.context_spans))
    _ask_with_history(context, message, turns, words, tracer_provider=provider)


@then("the context run's chat spans were:")
def context_chat_spans(context: Context) -> None:
    spans = sorted(context.context_spans.get_finished_spans(), key=lambda s: s.start_time or 0)
    runs = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(runs) == 1, [s.name for s in spans]
    chats = [
        (str(attributes["cleveractors.call.purpose"]), span)
        for span in spans
        if (attributes := dict(span.attributes or {})).get("gen_ai.operation.name") == "chat"
    ]
    expected = [(row["purpose"], row["status"]) for row in context.table]
    got = [
        (purpose, "error" if span.status.status_code.name == "ERROR" else "ok")
        for purpose, span in chats
    ]
    assert got == expected, got
    for purpose, span in chats:
        assert span.parent is not None, purpose
        assert span.parent.span_id == runs[0].context.span_id, f"{purpose}: not a child of the run"
    summary = dict(chats[1][1].attributes or {})
    assert summary["gen_ai.usage.input_tokens"] > 0, summary


@when(
    "an openai actor on that server is asked a {size:d}-word message after {turns:d} turns of "
    "{words:d} words each"
)
def asked_long_after_history(context: Context, size: int, turns: int, words: int) -> None:
    _ask_with_history(context, " ".join(f"ask{n}" for n in range(size)), turns, words)


@then('the context run answered "{answer}"')
def context_answered(context: Context, answer: str) -> None:
    assert context.context_error is None, context.context_error
    assert context.context_result.answer == answer, context.context_result


@then("the context run's calls were:")
def context_calls(context: Context) -> None:
    calls = [
        (call.purpose, str(call.attempt), call.status)
        for call in context.context_result.usage_by_call
    ]
    expected = [(row["purpose"], row["attempt"], row["status"]) for row in context.table]
    assert calls == expected, calls


@then("the compaction and the retried call each cost something")
def compaction_and_retry_cost(context: Context) -> None:
    calls = context.context_result.usage_by_call
    assert calls[0].usage.total_tokens == 0, calls[0]  # refused: nothing to pay
    for call in calls[1:]:
        assert call.usage.prompt_tokens > 0, call
        assert call.cost_usd is not None, call
        assert call.cost_usd > 0, call


@then("the context run emitted context_compacted for a {reason}")
def compacted_event(context: Context, reason: str) -> None:
    events = [e for e in context.context_events if e.kind == "context_compacted"]
    assert len(events) == 1, events
    assert events[0].reason == reason, events
    assert events[0].tokens_after < events[0].tokens_before, events[0]


@when("the openai SDK sends the windowed server a {words:d}-word prompt")
def sdk_sends(context: Context, words: int) -> None:
    client = openai.OpenAI(
        base_url=context.context_server.base_url, api_key="sk-scripted", max_retries=0
    )
    context.context_error = None
    try:
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": " ".join(["word"] * words)}],
        )
    except openai.APIError as exc:
        context.context_error = exc
    finally:
        client.close()


@then("the openai SDK raised BadRequestError with the code {code}")
def sdk_raised(context: Context, code: str) -> None:
    error = context.context_error
    assert isinstance(error, openai.BadRequestError), repr(error)
    assert error.code == code, error.body
    assert error.type == "invalid_request_error", error.body
    assert error.param == "messages", error.body


@given('a stub actor whose model refuses {count:d} times with "{message}"')
def refusing_stub(context: Context, count: int, message: str) -> None:
    refusal = {"error": message, "error_status": 400}
    context.context_actor = {
        "name": "refusing",
        "agent": {
            "provider": "stub",
            "max_retries": 0,
            "script": [refusal] * count + [{"text": "Never reached."}],
        },
    }


@when('the stub actor is asked "{message}" after {turns:d} turns of {words:d} words each')
def stub_asked(context: Context, message: str, turns: int, words: int) -> None:
    _ask_with_history(context, message, turns, words, actor=context.context_actor)


@then("the summarising calls were answered by {model}")
def summaries_by(context: Context, model: str) -> None:
    models = {row.model for row in context.context_ledger if row.purpose == "compaction"}
    assert models == {model}, models
    asked = {b["model"] for b in context.context_server.requests if is_summary_request(b)}
    assert asked == {model}, asked


@when(
    "the context config with a context_window of {window:d} and a context_budget of {budget:d} "
    "is loaded"
)
def load_budget_config(context: Context, window: int, budget: int) -> None:
    agent = {"provider": "stub", "script": [], "context_window": window}
    context.context_error = None
    try:
        load_actor_config({"name": "a", "agent": agent | {"context_budget": budget}})
    except ConfigurationError as exc:
        context.context_error = exc


@then('the context config failed saying "{message}"')
def context_config_failed(context: Context, message: str) -> None:
    assert message in str(context.context_error), str(context.context_error)


@then("some compactions only cleared old tool outputs and the others also summarised")
def compaction_tiers(context: Context) -> None:
    events = context.context_compactions
    cleared_only = [e for e in events if e.summarized_turns == 0]
    summarised = [e for e in events if e.summarized_turns > 0]
    assert cleared_only, "every compaction summarised"
    assert summarised, "no compaction summarised"
    assert all(e.cleared_tool_outputs > 0 for e in cleared_only), cleared_only
    assert all(e.tokens_after < e.tokens_before for e in events), events
    on_wire = sum(1 for body in context.context_server.requests if is_summary_request(body))
    assert len(summarised) == on_wire, f"{len(summarised)} summaries, {on_wire} requests"


@given("a stub actor whose replies are:")
def stub_replies(context: Context) -> None:
    script: list[dict[str, object]] = []
    for row in context.table:
        if row["error"]:
            script.append({"error": row["error"], "error_status": int(row["status"])})
        else:
            script.append({"text": row["text"]})
    context.context_actor = {
        "name": "failing",
        "agent": {"provider": "stub", "max_retries": 0, "script": script},
    }


@then('the context run failed with {kind} saying "{fragment}"')
def context_failed_with(context: Context, kind: str, fragment: str) -> None:
    error = context.context_error
    assert type(error).__name__ == kind, repr(error)
    assert fragment in str(error), str(error)


@given(
    'a scripted Anthropic server that refuses with "{refusal}" then answers "{first}" then '
    '"{second}"'
)
def refusing_anthropic_server(context: Context, refusal: str, first: str, second: str) -> None:
    script = [
        ScriptedReply(error=refusal, error_status=400),
        ScriptedReply(text=first),
        ScriptedReply(text=second),
    ]
    server = ScriptedAnthropicServer(script)
    server.start()
    context.add_cleanup(server.stop)
    context.context_anthropic = server
    os.environ[_KEY_VARIABLE] = "sk-scripted"
    context.add_cleanup(os.environ.pop, _KEY_VARIABLE, None)


@when(
    'an anthropic actor on that server is asked "{message}" after {turns:d} turns of '
    "{words:d} words each"
)
def anthropic_asked(context: Context, message: str, turns: int, words: int) -> None:
    actor = {
        "name": "claude",
        "agent": {
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "base_url": context.context_anthropic.origin,
            "api_key_env": _KEY_VARIABLE,
            "max_retries": 0,
        },
    }
    _ask_with_history(context, message, turns, words, actor=actor)
