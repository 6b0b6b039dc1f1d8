"""Robot Framework keywords for fallback models over the real wires.

An agent whose model is `ChatOpenAI` against a `ScriptedOpenAIServer` (which refuses, as the
API does, messages it does not take: `checks_messages=True`) and whose fallback is
`ChatAnthropic` against a `ScriptedAnthropicServer`, or the other way round, both on
127.0.0.1. Runs go through an executor with a SQLite store, so the ledger rows checked are the
ones the store wrote.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Coroutine
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar

from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from openai import BadRequestError
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from robot.api import logger
from robot.api.deco import keyword, library
from support.harness import Consumption, consume

from cleveractors import ActorExecutor, FallbackModel, FallbackPolicy, LLMAgent, RetryPolicy
from cleveractors.demo import get_weather
from cleveractors.events import ModelFellBack
from cleveractors.pricing import price_call
from cleveractors.store import SqlStore
from cleveractors.store.records import LedgerRow
from cleveractors.testing import (
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)
from cleveractors.turns import NewMessage
from cleveractors.usage import TokenUsage

Mode = Literal["blocking", "events"]
T = TypeVar("T")

_API_KEY = "sk-scripted-fallback-test"
_OPENAI_MODEL = "gpt-4o-mini"
_ANTHROPIC_MODEL = "claude-sonnet-4-5"
_THINKING = {"type": "enabled", "budget_tokens": 1024}
_QUESTION = "What is the weather in Paris?"
_PARIS = ScriptedToolCall(name="get_weather", args={"city": "Paris"}, id="toolu_paris")
_THOUGHT = ScriptedAnthropicReply(
    thinking="I need the weather in Paris.",
    redacted_thinking="RedactedBlob",
    text="Let me look.",
    tool_calls=(_PARIS,),
)

_SCRIPTS: dict[str, tuple[tuple[ScriptedReply, ...], tuple[ScriptedReply, ...]]] = {
    # (the OpenAI server's script, the Anthropic server's)
    "openai 503": (
        (
            ScriptedReply(error="Service unavailable", error_status=503, retry_after="0"),
            ScriptedReply(error="Service unavailable", error_status=503, retry_after="0"),
        ),
        (ScriptedAnthropicReply(text="Paris has light rain."),),
    ),
    "openai text then cut": (
        (ScriptedReply(text="Paris has light rain and", cut_off_after_chunks=3),),
        (ScriptedAnthropicReply(text="never sent"),),
    ),
    "two turns on openai 503": (
        (
            ScriptedReply(error="Service unavailable", error_status=503, retry_after="0"),
            ScriptedReply(error="Service unavailable", error_status=503, retry_after="0"),
        ),
        (
            ScriptedAnthropicReply(text="Paris has light rain."),
            ScriptedAnthropicReply(text="Rome is sunny."),
        ),
    ),
    "anthropic 529 after thinking": (
        (ScriptedReply(text="Paris has light rain."),),
        (_THOUGHT, ScriptedAnthropicReply(error="Overloaded", error_status=529)),
    ),
    "anthropic 529": (
        (ScriptedReply(text="Paris has light rain."),),
        (ScriptedAnthropicReply(error="Overloaded", error_status=529),),
    ),
}


@library(scope="SUITE")
class FallbackLibrary:
    """Runs an agent with a fallback model across two scripted providers and checks the
    answer, the ledger, the events and the requests each server received."""

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._servers: list[ScriptedOpenAIServer | ScriptedAnthropicServer] = []
        self._directory = tempfile.TemporaryDirectory(prefix="fallback-")
        self._store: SqlStore | None = None
        self._executor: ActorExecutor | None = None
        self._outcomes: list[Consumption] = []
        self._openai: ScriptedOpenAIServer | None = None
        self._anthropic: ScriptedAnthropicServer | None = None
        self._started = 0
        self._spans = InMemorySpanExporter()
        self._tracer_provider = TracerProvider()
        self._tracer_provider.add_span_processor(SimpleSpanProcessor(self._spans))

    def close(self) -> None:
        """Called by Robot when the suite ends: stop servers, close the store and the loop."""
        self.stop_fallback_servers()
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        self._directory.cleanup()

    # -- setup and runs ---------------------------------------------------------------------

    @keyword
    def stop_fallback_servers(self) -> None:
        """Stops every server started, and closes the store."""
        for server in self._servers:
            server.stop()
        self._servers.clear()
        if self._store is not None:
            self._run(self._store.aclose())
            self._store = None

    @keyword
    def start_fallback_actor(
        self,
        script: str,
        first: Literal["openai", "anthropic"] = "openai",
        max_retries: int = 1,
        sticky: Literal["run", "session"] = "run",
        thinking: bool = False,
    ) -> None:
        """Serves `script` from a new OpenAI server and a new Anthropic server and builds an
        executor (with a SQLite store) whose agent's model is the `first` provider's and whose
        fallback is the other's, each retried `max_retries` times."""
        openai_script, anthropic_script = _SCRIPTS[script]
        self._openai = ScriptedOpenAIServer(openai_script, checks_messages=True)
        self._anthropic = ScriptedAnthropicServer(anthropic_script)
        for server in (self._openai, self._anthropic):
            server.start()
            self._servers.append(server)
        openai_model = ChatOpenAI(
            model=_OPENAI_MODEL,
            base_url=self._openai.base_url,
            api_key=_API_KEY,  # type: ignore[arg-type]  # a str is accepted at run time
            max_retries=0,
            stream_usage=True,
        )
        anthropic_model = _anthropic_model(self._anthropic, thinking=thinking)
        models: list[BaseChatModel] = [openai_model, anthropic_model]
        if first == "anthropic":
            models.reverse()
        retry = RetryPolicy(max_retries=max_retries, backoff_s=0.0)
        agent = LLMAgent(
            models[0],
            tools=[get_weather],
            retry=retry,
            fallback_models=[FallbackModel(models[1], retry=retry)],
            fallback=FallbackPolicy(sticky=sticky),
        )
        self._started += 1
        database = Path(self._directory.name) / f"actor-{self._started}.db"
        self._store = SqlStore(f"sqlite:///{database}")
        self._executor = ActorExecutor(
            agent, store=self._store, tracer_provider=self._tracer_provider
        )
        self._spans.clear()
        self._outcomes.clear()

    @keyword
    def ask_the_fallback_actor(self, message: str = _QUESTION, mode: Mode = "blocking") -> None:
        """Sends `message` in session `s1`, blocking (`execute`) or as events."""
        executor = self._executor
        assert executor is not None, "no actor started"
        turn = NewMessage(message, session_id="s1")
        outcome = self._run(consume(executor, turn, mode=mode))  # type: ignore[arg-type]  # a Turn
        self._outcomes.append(outcome)
        if outcome.last_result is not None:
            logger.info(f"last_result: {outcome.last_result.model_dump_json(indent=2)}")
        if outcome.error is not None:
            logger.info(f"error: {outcome.error!r}")

    # -- assertions -------------------------------------------------------------------------

    @keyword
    def the_answer_should_be(self, text: str) -> None:
        """The last run answered `text`."""
        outcome = self._outcomes[-1]
        if outcome.error is not None:
            raise AssertionError(f"the run failed: {outcome.error!r}")
        result = outcome.last_result
        assert result is not None
        _should_equal(result.answer, text, "answer")

    @keyword
    def the_run_should_have_failed_with(self, type_name: str) -> None:
        """The last run's error, or one it was raised from, is of the named type."""
        error = self._outcomes[-1].error
        chain = []
        while error is not None:
            chain.append(type(error).__name__)
            error = error.__cause__ or error.__context__
        if type_name not in chain:
            raise AssertionError(f"expected {type_name} in the error chain, got {chain}")

    @keyword
    def the_servers_should_have_received(self, openai: int, anthropic: int) -> None:
        """How many requests each server received in all."""
        assert self._openai is not None
        assert self._anthropic is not None
        received = (len(self._openai.requests), len(self._anthropic.requests))
        _should_equal(received, (openai, anthropic), "requests received (openai, anthropic)")

    @keyword
    def the_last_run_should_have_been_answered_by(self, model: str, *fell_back_from: str) -> None:
        """The result names the model that answered and the models it fell back from; its
        events (when read) said the same."""
        outcome = self._outcomes[-1]
        result = outcome.last_result
        assert result is not None
        _should_equal(
            (result.model, result.fell_back_from), (model, fell_back_from), "model, fell_back_from"
        )
        if outcome.mode == "events":
            fell_back = [e for e in outcome.events if isinstance(e, ModelFellBack)]
            took_over = (*fell_back_from[1:], model)
            _should_equal(
                [(e.from_model, e.to_model) for e in fell_back],
                list(zip(fell_back_from, took_over, strict=False)),
                "model_fell_back events (from, to)",
            )

    @keyword
    def each_chat_span_should_name_its_model_and_server(self) -> None:
        """Every attempt's `chat` span names the provider and model it went to and that
        provider's server; the first attempt of the fallback names the model it took over from."""
        assert self._openai is not None
        assert self._anthropic is not None
        ports = {
            "openai": (_OPENAI_MODEL, int(self._openai.origin.rsplit(":", 1)[1])),
            "anthropic": (_ANTHROPIC_MODEL, int(self._anthropic.origin.rsplit(":", 1)[1])),
        }
        chats = [s for s in self._spans.get_finished_spans() if s.name.startswith("chat")]
        seen = []
        for span in chats:
            attributes = span.attributes or {}
            provider = str(attributes["gen_ai.provider.name"])
            seen.append(
                (
                    provider,
                    attributes["gen_ai.request.model"],
                    attributes["server.port"],
                    attributes.get("cleveractors.call.fell_back_from"),
                )
            )
        expected = [
            (provider, *ports[provider], None if n < 2 else _OPENAI_MODEL)
            for n, provider in enumerate(("openai", "openai", "anthropic"))
        ]
        _should_equal(seen, expected, "chat spans (provider, model, server port, fell back from)")

    @keyword
    def the_ledger_should_hold(self, *rows: str) -> None:
        """The store's ledger rows of session `s1`, each `provider model attempt status`."""
        store = self._store
        assert store is not None
        report = self._run(store.usage(session_id="s1"))
        _should_equal(
            [f"{r.provider} {r.model} {r.attempt} {r.status}" for r in report.rows],
            list(rows),
            "ledger rows",
        )

    @keyword
    def refused_rows_should_cost_nothing_and_answers_be_priced_at_their_model(self) -> None:
        """Every failed row is 0 tokens at $0; every answered row is priced at its own model's
        rates for what its server billed it."""
        store = self._store
        assert store is not None
        report = self._run(store.usage(session_id="s1"))
        for row in report.rows:
            if row.status == "failed":
                _should_equal((row.total_tokens, row.cost_usd), (0, Decimal(0)), "refused row")
            elif row.cost_usd is None or row.cost_usd != _table_price(row):
                raise AssertionError(f"{row.model} priced {row.cost_usd}, not at its own rates")
        answered = [r for r in report.rows if r.status == "ok"]
        billed = [
            *(self._openai.billed if self._openai else ()),
            *(self._anthropic.billed if self._anthropic else ()),
        ]
        _should_equal(
            sorted((r.prompt_tokens, r.completion_tokens) for r in answered),
            sorted((b.prompt_tokens, b.completion_tokens) for b in billed),
            "answered rows against the servers' bills",
        )

    @keyword
    def the_openai_request_should_carry_the_tool_call_without_thinking(self) -> None:
        """The request the OpenAI server answered holds the Anthropic reply as text and its tool
        call (id kept), answered by its tool result; no content part but text."""
        assert self._openai is not None
        body = self._openai.requests[-1]
        logger.info(json.dumps(body, indent=1))
        assistant = next(m for m in body["messages"] if m["role"] == "assistant")
        tool = next(m for m in body["messages"] if m["role"] == "tool")
        _should_equal([c["id"] for c in assistant["tool_calls"]], ["toolu_paris"], "call ids")
        _should_equal(tool["tool_call_id"], "toolu_paris", "the tool result's call id")
        content = assistant.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        _should_equal({part["type"] for part in parts}, {"text"}, "content part types")

    @keyword
    def the_openai_server_should_refuse_the_transcript_as_anthropic_wrote_it(self) -> None:
        """The same transcript sent to the OpenAI server as written (through `ChatOpenAI`,
        without the agent's care) is refused with HTTP 400, as the API refuses it."""
        server = ScriptedAnthropicServer([_THOUGHT])
        server.start()
        self._servers.append(server)
        written = _anthropic_model(server, thinking=True).invoke([HumanMessage(_QUESTION)])
        transcript = [
            HumanMessage(_QUESTION),
            written,
            ToolMessage("Paris: 18 C, light rain", tool_call_id="toolu_paris"),
        ]
        assert self._openai is not None
        model = ChatOpenAI(
            model=_OPENAI_MODEL,
            base_url=self._openai.base_url,
            api_key=_API_KEY,  # type: ignore[arg-type]  # a str is accepted at run time
            max_retries=0,
        )
        try:
            model.invoke(transcript)
        except BadRequestError as exc:
            logger.info(f"refused: {exc}")
            if "redacted_thinking" not in str(exc):
                raise AssertionError(f"refused for another reason: {exc}") from exc
            return
        raise AssertionError("the OpenAI server accepted a transcript with Anthropic blocks")

    # -- plumbing ---------------------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coroutine)


def _anthropic_model(server: ScriptedAnthropicServer, *, thinking: bool) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]  # the integration's own field names
        model=_ANTHROPIC_MODEL,
        base_url=server.base_url,
        api_key=_API_KEY,
        max_retries=0,
        max_tokens=2048,
        thinking=_THINKING if thinking else None,
    )


def _table_price(row: LedgerRow) -> Decimal | None:
    usage = TokenUsage(prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens)
    return price_call(usage, provider=row.provider, models=(row.model,))


def _should_equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")
