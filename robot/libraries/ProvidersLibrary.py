"""Robot Framework keywords for provider integrations over the real wire.

`ChatAnthropic` (langchain-anthropic) runs against a `ScriptedAnthropicServer` and
`ChatOpenAI(use_responses_api=True)` against the test tree's `ScriptedResponsesServer`, both on
127.0.0.1. The agent is built in code (`ActorExecutor(LLMAgent(model, tools=[get_weather]))`);
each run gets a fresh server replaying one of the named conversations below, so runs in different
modes can be compared request by request with the servers' records.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from openai import BadRequestError, OpenAI
from robot.api import logger
from robot.api.deco import keyword, library
from scripted_responses_server import ScriptedResponsesReply, ScriptedResponsesServer
from support.harness import consume

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent, LoopLimits, RetryPolicy
from cleveractors.demo import clear_invocations, get_weather, invocations
from cleveractors.events import Event
from cleveractors.testing import (
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
    ScriptedReply,
    ScriptedToolCall,
)

Mode = Literal["blocking", "events"]
T = TypeVar("T")

_API_KEY = "sk-scripted-provider-test"
_ANTHROPIC_MODEL = "claude-sonnet-4-5"
_OPENAI_MODEL = "o4-mini"
_THINKING = {"type": "enabled", "budget_tokens": 1024}
_MAX_TOKENS = 2048
_QUESTION = "What is the weather in Paris, and in Rome?"
_BROKEN_ARGUMENTS = '{"city": "Paris", "oops": '


def _call(city: str, call_id: str) -> ScriptedToolCall:
    return ScriptedToolCall(name="get_weather", args={"city": city}, id=call_id)


def _thought(thinking: str, **fields: Any) -> ScriptedAnthropicReply:
    """A reply that thinks first (sent only when the request enables thinking)."""
    return ScriptedAnthropicReply(thinking=thinking, args_chunk_size=5, **fields)


_ANSWER = "Paris has light rain, Rome is sunny."
ANTHROPIC_CONVERSATIONS: dict[str, tuple[ScriptedReply, ...]] = {
    "one tool round": (
        _thought("I need the weather in Paris.", tool_calls=(_call("Paris", "toolu_paris"),)),
        _thought("Paris answered.", text="Paris has light rain."),
    ),
    "two tool rounds": (
        _thought("Paris first.", tool_calls=(_call("Paris", "toolu_paris"),)),
        _thought(
            "Now Rome.",
            redacted_thinking="RedactedBlob",
            text="Now Rome.",
            tool_calls=(_call("Rome", "toolu_rome"),),
        ),
        _thought("Both answered.", text=_ANSWER, cache_read_tokens=4, cache_write_tokens=2),
    ),
    "parallel calls": (
        _thought(
            "Both cities at once.",
            tool_calls=(_call("Paris", "toolu_paris"), _call("Rome", "toolu_rome")),
        ),
        _thought("Both answered.", text=_ANSWER),
    ),
    "529 on request 2": (
        _thought("Paris first.", tool_calls=(_call("Paris", "toolu_paris"),)),
        ScriptedAnthropicReply(error="Overloaded", error_status=529),
        _thought("Paris answered.", text="Paris has light rain."),
    ),
    "dropped stream": (
        _thought("Paris first.", tool_calls=(_call("Paris", "toolu_paris"),)),
        ScriptedAnthropicReply(text="Paris has light rain today.", cut_off_after_chunks=4),
    ),
    "broken argument JSON": (
        _thought(
            "Paris first.",
            tool_calls=(
                ScriptedToolCall(name="get_weather", args=_BROKEN_ARGUMENTS, id="toolu_bad"),
            ),
        ),
        _thought("The call failed.", text="I could not get the weather."),
    ),
    "stuck model": (
        _thought("Rome first.", tool_calls=(_call("Rome", "toolu_rome"),)),
        ScriptedAnthropicReply(text=""),
        ScriptedAnthropicReply(text="Rome is sunny at 24 °C."),
    ),
}
"""The scripts the Anthropic server replays, by name."""

RESPONSES_CONVERSATIONS: dict[str, tuple[ScriptedReply, ...]] = {
    "two tool rounds": (
        ScriptedResponsesReply(reasoning="Paris first.", tool_calls=(_call("Paris", "call_p"),)),
        ScriptedResponsesReply(
            reasoning="Now Rome.", tool_calls=(_call("Rome", "call_r"),), cached_tokens=3
        ),
        ScriptedResponsesReply(reasoning="Both answered.", text=_ANSWER),
    ),
}
"""The scripts the Responses server replays, by name."""


class _Server(Protocol):
    @property
    def requests(self) -> list[dict[str, Any]]: ...

    @property
    def billed(self) -> list[Any]: ...

    def stop(self) -> None: ...


@dataclass
class _Run:
    """One message sent to an agent over the wire, and everything seen of it."""

    provider: str
    conversation: str
    mode: Mode
    server: _Server
    script: tuple[ScriptedReply, ...]
    events: list[Event] = field(default_factory=list)
    result: ExecutionResult | None = None
    error: BaseException | None = None
    tool_cities: list[str] = field(default_factory=list)


@library(scope="SUITE")
class ProvidersLibrary:
    """Runs an agent over ChatAnthropic or ChatOpenAI's Responses API against scripted servers,
    and checks answers, tool calls, requests and token counts against the servers' records."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._runs: list[_Run] = []

    def close(self) -> None:
        """Called by Robot when the suite ends: stop servers, close the event loop."""
        self.stop_provider_servers()
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    # -- setup and runs ---------------------------------------------------------------------

    @keyword
    def stop_provider_servers(self) -> None:
        """Stops every server the runs started."""
        for run in self._runs:
            run.server.stop()

    @keyword
    def run_anthropic_conversation(
        self,
        conversation: str,
        mode: Mode,
        thinking: bool = True,
        streaming_model: bool | None = None,
        max_retries: int = 0,
    ) -> None:
        """Serves `conversation` from a new ScriptedAnthropicServer and sends the question to an
        agent over `ChatAnthropic` (thinking on or off) in `mode`: `blocking` (`execute`) or
        `events` (`execute_events`). `streaming_model` sets the model's `streaming`: True
        streams inside `ainvoke`, False makes `astream()` yield one whole message; None leaves
        it unset. `max_retries` are the loop's retries."""
        script = ANTHROPIC_CONVERSATIONS[conversation]
        server = ScriptedAnthropicServer(script)
        server.start()
        model = ChatAnthropic(
            model=_ANTHROPIC_MODEL,
            base_url=server.base_url,
            api_key=_API_KEY,
            max_retries=0,
            max_tokens=_MAX_TOKENS,
            thinking=_THINKING if thinking else None,
            **({} if streaming_model is None else {"streaming": streaming_model}),
        )
        run = _Run("anthropic", conversation, mode, server, script)
        self._play(run, model, max_retries)

    @keyword
    def run_responses_conversation(self, conversation: str, mode: Mode) -> None:
        """Serves `conversation` from a new ScriptedResponsesServer and sends the question to an
        agent over `ChatOpenAI(use_responses_api=True, stream_usage=True)` in `mode`."""
        script = RESPONSES_CONVERSATIONS[conversation]
        server = ScriptedResponsesServer(script)
        server.start()
        model = ChatOpenAI(
            model=_OPENAI_MODEL,
            base_url=server.base_url,
            api_key=_API_KEY,
            max_retries=0,
            use_responses_api=True,
            stream_usage=True,
            reasoning={"effort": "low", "summary": "auto"},
            include=["reasoning.encrypted_content"],
            store=False,
        )
        run = _Run("responses", conversation, mode, server, script)
        self._play(run, model, 0)

    def _play(self, run: _Run, model: BaseChatModel, max_retries: int) -> None:
        clear_invocations()
        agent = LLMAgent(model, tools=[get_weather], **_agent_options(max_retries))
        executor = ActorExecutor(agent)
        self._runs.append(run)
        consumed = self._run(consume(executor, _QUESTION, mode=run.mode))
        run.events, run.error, run.result = consumed.events, consumed.error, consumed.last_result
        run.tool_cities = [call.arguments["city"] for call in invocations()]
        logger.info(f"requests: {json.dumps(run.server.requests, indent=1)[:20000]}")
        if run.result is not None:
            logger.info(f"last_result: {run.result.model_dump_json(indent=2)}")
        if run.error is not None:
            logger.info(f"error: {run.error!r}")

    # -- assertions -------------------------------------------------------------------------

    @keyword
    def answer_should_be_the_last_scripted_text(self) -> None:
        """The run succeeded and answered with the text of the script's last reply."""
        run = self._latest()
        if run.error is not None:
            raise AssertionError(f"the run failed: {run.error!r}")
        _should_equal(self._result().answer, run.script[-1].text, "answer")

    @keyword
    def tool_should_have_run_for(self, *cities: str) -> None:
        """get_weather ran once per city, in this order (an empty list: it never ran)."""
        _should_equal(self._latest().tool_cities, list(cities), "cities get_weather ran for")

    @keyword
    def server_should_have_received_requests(self, count: int) -> None:
        """The run's server received exactly `count` requests."""
        _should_equal(len(self._latest().server.requests), count, "requests received")

    @keyword
    def server_requests_should_have_been_blocking(self) -> None:
        """No request of the run asked the server to stream."""
        streamed = [
            n for n, body in enumerate(self._latest().server.requests) if body.get("stream")
        ]
        _should_equal(streamed, [], "requests that asked to stream")

    @keyword
    def reported_tokens_should_equal_the_server_record(self) -> None:
        """The result holds one exact record per call the server billed, with its tokens, and
        (when the server refused a request with an HTTP error) a zero record for that attempt."""
        run, result = self._latest(), self._result()
        billed = {call.request_index: call for call in run.server.billed}
        answered = [c for c in result.usage_by_call if getattr(c, "status", "ok") == "ok"]
        _should_equal(
            [
                (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.estimated)
                for c in answered
            ],
            [(b.prompt_tokens, b.completion_tokens, False) for b in billed.values()],
            "tokens per answered call (prompt, completion, estimated) against the server's bill",
        )
        _should_equal(
            (result.prompt_tokens, result.completion_tokens),
            (
                sum(b.prompt_tokens for b in billed.values()),
                sum(b.completion_tokens for b in billed.values()),
            ),
            "total tokens against the server's bill",
        )
        _should_equal(result.llm_calls, len(run.server.requests), "LLM calls vs requests")

    @keyword
    def refused_attempt_should_be_recorded_at_no_cost(self) -> None:
        """The attempt the server refused (HTTP 529) is a `failed` record costing 0 tokens, and
        the next attempt of the same round got the answer."""
        calls = self._result().usage_by_call
        failed = [c for c in calls if getattr(c, "status", "ok") == "failed"]
        if len(failed) != 1:
            raise AssertionError(f"expected one failed attempt, got: {calls}")
        (attempt,) = failed
        _should_equal(attempt.usage.total_tokens, 0, "tokens of the refused attempt")
        retry = calls[calls.index(attempt) + 1]
        _should_equal((retry.round, getattr(retry, "attempt", 1)), (attempt.round, 2), "retry")

    @keyword
    def run_should_have_failed_with(self, type_name: str) -> None:
        """The run's error, or one it was raised from, is of the named type."""
        error = self._latest().error
        chain = []
        while error is not None:
            chain.append(type(error).__name__)
            error = error.__cause__ or error.__context__
        if type_name not in chain:
            raise AssertionError(f"expected {type_name} in the error chain, got {chain}")

    @keyword("Cut-Off Call Should Be Estimated And The Rest Exact")
    def cut_off_call_should_be_estimated_and_the_rest_exact(self) -> None:
        """The calls the server completed are reported as billed; the cut-off one is a flagged,
        non-zero estimate, and the result is flagged estimated."""
        run, result = self._latest(), self._result()
        completed = [b for b in run.server.billed if b.completed]
        *exact, cut_off = result.usage_by_call
        _should_equal(
            [(c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.estimated) for c in exact],
            [(b.prompt_tokens, b.completion_tokens, False) for b in completed],
            "completed calls against the server's bill",
        )
        if not (cut_off.usage.estimated and cut_off.usage.prompt_tokens):
            raise AssertionError(f"the cut-off call is not a flagged, non-zero estimate: {cut_off}")
        _should_equal(result.usage_estimated, True, "usage_estimated")

    @keyword
    def turn_should_have_ended_in_synthesis(self, reason: str) -> None:
        """The loop stopped for `reason` and the synthesis call gave the script's last text."""
        result = self._result()
        _should_equal(result.synthesis_reason, reason, "synthesis reason")
        _should_equal(result.usage_by_call[-1].purpose, "synthesis", "purpose of the last call")
        _should_equal(result.answer, self._latest().script[-1].text, "answer")

    @keyword
    def request_bodies_should_be_the_same_in_both_modes(self) -> None:
        """The latest blocking and events runs of the same conversation sent the same request
        bodies, round by round, apart from the streaming flag."""
        blocking, events = self._latest_of("blocking"), self._latest_of("events")
        _should_equal(
            (blocking.provider, blocking.conversation),
            (events.provider, events.conversation),
            "the two runs' conversations",
        )
        _should_equal(
            [_comparable(body) for body in events.server.requests],
            [_comparable(body) for body in blocking.server.requests],
            "request bodies, events vs blocking (stream flags removed)",
        )

    @keyword
    def every_assistant_turn_should_have_been_sent_back_with_its_thinking(self) -> None:
        """Each request after the first carries every earlier reply's thinking block first, with
        the signature the server issued (what the Messages API requires with thinking on)."""
        requests = self._latest().server.requests
        for number, body in enumerate(requests[1:], start=1):
            turns = [m for m in body["messages"] if m["role"] == "assistant"]
            _should_equal(len(turns), number, f"assistant turns in request {number + 1}")
            for turn in turns:
                first = turn["content"][0]
                if first["type"] != "thinking" or not first.get("signature"):
                    raise AssertionError(f"request {number + 1}: turn without thinking: {turn}")

    @keyword
    def every_function_call_should_have_been_sent_back_after_its_reasoning(self) -> None:
        """Each request after the first carries every earlier reasoning item (with its id and
        encrypted content) before the function calls it led to."""
        requests = self._latest().server.requests
        for number, body in enumerate(requests[1:], start=1):
            kinds = [item.get("type") for item in body["input"]]
            reasoning = [i for i in body["input"] if i.get("type") == "reasoning"]
            _should_equal(len(reasoning), number, f"reasoning items in request {number + 1}")
            if not all(item.get("encrypted_content") for item in reasoning):
                raise AssertionError(f"request {number + 1}: reasoning without content: {kinds}")

    @keyword
    def openai_sdk_should_rebuild_the_scripted_response(self) -> None:
        """The `openai` SDK's `responses.create(stream=True)` events rebuild the scripted reply
        (reasoning summary, function call arguments, usage details), and equal the response the
        server returns without streaming, apart from ids."""
        reply = ScriptedResponsesReply(
            reasoning="Paris first.", tool_calls=(_call("Paris", "call_p"),), cached_tokens=1
        )
        with ScriptedResponsesServer([reply, reply]) as server:
            client = OpenAI(base_url=server.base_url, api_key=_API_KEY, max_retries=0)
            events = list(
                client.responses.create(model=_OPENAI_MODEL, input=_QUESTION, stream=True)
            )
            blocking = client.responses.create(model=_OPENAI_MODEL, input=_QUESTION)
            billed = server.billed[0]
        kinds = [event.type for event in events]
        logger.info(f"events: {kinds}")
        summary = "".join(
            e.delta for e in events if e.type == "response.reasoning_summary_text.delta"
        )
        arguments = "".join(
            e.delta for e in events if e.type == "response.function_call_arguments.delta"
        )
        _should_equal(summary, reply.reasoning, "streamed reasoning summary")
        _should_equal(json.loads(arguments), {"city": "Paris"}, "streamed function arguments")
        _should_equal([e.sequence_number for e in events], list(range(len(events))), "sequence")
        completed = events[-1].response
        usage = completed.usage
        _should_equal(
            (
                usage.input_tokens,
                usage.input_tokens_details.cached_tokens,
                usage.output_tokens,
                usage.output_tokens_details.reasoning_tokens,
            ),
            (billed.prompt_tokens, 1, billed.completion_tokens, 2),
            "usage (input, cached, output, reasoning) against the server's bill",
        )
        _should_equal(
            [item.type for item in completed.output], ["reasoning", "function_call"], "output"
        )
        _should_equal(
            _without_ids(completed.model_dump()["output"]),
            _without_ids(blocking.model_dump()["output"]),
            "streamed vs blocking output",
        )

    @keyword
    def responses_server_should_reject_a_function_call_without_its_reasoning(self) -> None:
        """Sent back without its reasoning item, a function call the server issued gets the API's
        HTTP 400; with it, the request is answered."""
        reply = ScriptedResponsesReply(
            reasoning="Paris first.", tool_calls=(_call("Paris", "call_p"),)
        )
        with ScriptedResponsesServer([reply, ScriptedReply(text="Rainy.")]) as server:
            client = OpenAI(base_url=server.base_url, api_key=_API_KEY, max_retries=0)
            first = client.responses.create(model=_OPENAI_MODEL, input=_QUESTION)
            reasoning, call = (item.model_dump(exclude_none=True) for item in first.output)
            result = {"type": "function_call_output", "call_id": call["call_id"], "output": "rain"}
            question = {"role": "user", "content": _QUESTION}
            try:
                client.responses.create(model=_OPENAI_MODEL, input=[question, call, result])
            except BadRequestError as error:
                message = error.body["message"] if isinstance(error.body, dict) else str(error)
            else:
                raise AssertionError("the function call without its reasoning was accepted")
            answer = client.responses.create(
                model=_OPENAI_MODEL, input=[question, reasoning, call, result]
            )
        expected = (
            f"Item '{call['id']}' of type 'function_call' was provided without its required "
            f"'reasoning' item: '{reasoning['id']}'."
        )
        _should_equal(message, expected, "the 400's message")
        _should_equal(answer.output_text, "Rainy.", "the answer once the reasoning is sent")

    # -- plumbing ---------------------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coroutine)

    def _latest(self) -> _Run:
        if not self._runs:
            raise RuntimeError("run a conversation first")
        return self._runs[-1]

    def _latest_of(self, mode: Mode) -> _Run:
        run = next((r for r in reversed(self._runs) if r.mode == mode), None)
        if run is None:
            raise RuntimeError(f"no {mode} run")
        return run

    def _result(self) -> ExecutionResult:
        result = self._latest().result
        if result is None:
            raise AssertionError("executor.last_result was not set by the run")
        return result


def _agent_options(max_retries: int) -> dict[str, Any]:
    return {
        "limits": LoopLimits(max_tool_rounds=4),
        "retry": RetryPolicy(max_retries=max_retries, backoff_s=0.01),
    }


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    """A request body without what the provider's integration sets differently when streaming:
    the stream flags, and the `status` of Responses input items (langchain-openai keeps the
    `"completed"` of a blocking reply's items; its streamed items never carry one)."""
    comparable = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    if isinstance(body.get("input"), list):
        comparable["input"] = [
            {k: v for k, v in item.items() if k != "status"} for item in body["input"]
        ]
    return comparable


def _without_ids(value: object) -> object:
    if isinstance(value, dict):
        return {
            k: _without_ids(v) for k, v in value.items() if k not in ("id", "encrypted_content")
        }
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def _should_equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")
