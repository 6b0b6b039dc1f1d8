"""Steps about `max_output_tokens`: an `openai` actor (ChatOpenAI) against a `ScriptedOpenAIServer`
on 127.0.0.1, whose recorded requests show what each LLM call asked for. Every step text names
"the capped-output actor" or "server", so none can shadow the steps of other modules.
"""

from __future__ import annotations

import asyncio
import json
import os

from behave import given, then, when
from behave.runner import Context

from cleveractors import ActorExecutor
from cleveractors.errors import ConfigurationError
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

_KEY_VARIABLE = "CLEVERACTORS_OUTPUT_CAP_KEY"


def _cap(text: str) -> int | None:
    return None if text == "none" else int(text)


@given("a capped-output actor over the wire whose model options are {options}")
def actor_over_the_wire(context: Context, options: str) -> None:
    lookup = ScriptedToolCall(name="get_weather", args={"city": "Paris"})
    server = ScriptedOpenAIServer(
        [ScriptedReply(tool_calls=(lookup,)), ScriptedReply(text="It is mild in Paris.")],
        per_conversation=True,
    )
    server.start()
    context.add_cleanup(server.stop)
    os.environ[_KEY_VARIABLE] = "sk-scripted"
    context.add_cleanup(os.environ.pop, _KEY_VARIABLE, None)
    tool = {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "handler": "cleveractors.demo:get_weather",
    }
    agent = {
        "type": "llm",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": server.base_url,
        "api_key_env": _KEY_VARIABLE,
        "max_retries": 0,
        "tools": [tool],
        "model_options": json.loads(options),
    }
    context.capped_server = server
    context.capped_executor = ActorExecutor.from_config({"name": "capped", "agent": agent})


async def _run(executor: ActorExecutor, mode: str, cap: int | None) -> str:
    message = "What is the weather in Paris?"
    if mode == "blocking":
        return (await executor.execute(message, max_output_tokens=cap)).text
    chunks = [chunk async for chunk in executor.execute_stream(message, max_output_tokens=cap)]
    return "".join(chunks)


@when("the capped-output actor is run {mode} with max_output_tokens {cap}")
def run_capped(context: Context, mode: str, cap: str) -> None:
    text = asyncio.run(_run(context.capped_executor, mode, _cap(cap)))
    assert text.endswith("It is mild in Paris."), f"the run answered {text!r}"


@then("the capped-output server received {count:d} requests, each with max_completion_tokens {cap}")
def requests_capped(context: Context, count: int, cap: str) -> None:
    requests = context.capped_server.requests
    assert len(requests) == count, f"the server received {len(requests)} requests"
    sent = [(body.get("max_completion_tokens"), body.get("max_tokens")) for body in requests]
    assert sent == [(_cap(cap), None)] * count, f"(max_completion_tokens, max_tokens) were {sent}"


@then("running the capped-output actor with max_output_tokens {cap:d} fails with {error_type}")
def cap_refused(context: Context, cap: int, error_type: str) -> None:
    """ERROR_TYPE is the exception's class and, quoted, its message."""
    raised: ConfigurationError | None = None
    try:
        asyncio.run(_run(context.capped_executor, "blocking", cap))
    except ConfigurationError as exc:
        raised = exc
    assert raised is not None, "the run began"
    assert f'{type(raised).__name__} "{raised}"' == error_type, f"it raised {raised!r}"
    assert context.capped_server.requests == [], "the model was asked anyway"
