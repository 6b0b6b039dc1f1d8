"""Robot Framework keywords for running cleveractors actors, offline and over the real wire.

Actors live in `robot/actors/*.yaml`. On the `stub` provider an actor replays its own `script:`.
Over the wire, the same file's script is served by a `ScriptedOpenAIServer` on 127.0.0.1 and the
actor is loaded with provider `openai` (langchain-openai's `ChatOpenAI`) pointed at that server,
so token counts can be checked against what the server itself billed.
"""

from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
import os
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from robot.api import logger
from robot.api.deco import keyword, library
from support.harness import Consumption, Stop, StopStyle, after_items, consume, guarded, wait_until
from support.harness import Mode as HarnessMode

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent, load_actor_config
from cleveractors.agents.stream import ROUND_SEPARATOR
from cleveractors.demo import clear_invocations, invocations
from cleveractors.events import CallRetrying, event_adapter
from cleveractors.testing import (
    BilledCall,
    ScriptedAnthropicReply,
    ScriptedAnthropicServer,
    ScriptedChatModel,
    ScriptedOpenAIServer,
    ScriptedReply,
)
from cleveractors.tools import tool_from_config

ACTORS_DIR = Path(__file__).resolve().parent.parent / "actors"
API_KEY_ENV = "CLEVERACTORS_ROBOT_API_KEY"
DUMMY_API_KEY = "sk-robot-dummy-key"

Mode = Literal["blocking", "streaming", "events"]
_CONSUMED_AS: dict[Mode, HarnessMode] = {
    "blocking": "blocking",
    "streaming": "text",
    "events": "events",
}
T = TypeVar("T")


@dataclass
class _Turn:
    """One message sent to the actor, and everything the caller saw of it (`consumed`; its
    `chunk_times` are on the same clock as the server's)."""

    mode: Mode
    server: ScriptedOpenAIServer | None
    consumed: Consumption
    loop_errors: list[str] = field(default_factory=list)
    """What the event loop's exception handler was given during the turn (e.g. an exception of a
    task nobody awaited)."""


@library(scope="SUITE", listener="SELF")
class CleverActorsLibrary:
    """Loads actors, sends them chat messages and checks answers, tool calls and token counts.

    All runs of a suite share one event loop, as in a chat server: langchain-openai keeps one HTTP
    client per `base_url` for the whole process, and such a client cannot move between loops.
    """

    ROBOT_LISTENER_API_VERSION = 3

    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None
        self._executor: ActorExecutor | None = None
        self._script: tuple[ScriptedReply, ...] = ()
        self._server: ScriptedOpenAIServer | None = None
        self._servers: list[ScriptedOpenAIServer] = []
        self._anthropic: ScriptedAnthropicServer | None = None
        self._turns: list[_Turn] = []
        self._log_capture: _LogCapture | None = None
        self._loop_errors: list[str] = []

    def close(self) -> None:
        """Called by Robot when the suite ends: stop servers, close the event loop."""
        self.stop_scripted_openai_servers()
        self.stop_capturing_logs()
        os.environ.pop(API_KEY_ENV, None)
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    # -- setup: actors and servers (never assert) ------------------------------------------------

    @keyword
    def load_actor(self, actor_file: str, stream_tool_rounds: bool | None = None) -> None:
        """Loads an actor from `robot/actors/<actor_file>` as written (usually provider `stub`).

        `stream_tool_rounds` overrides the file's setting when given. Clears the record of tool
        handler calls.
        """
        config = _read_actor(actor_file)
        self._script = _script_of(config)
        self._load(config, stream_tool_rounds)
        self._server = None

    @keyword("Start Scripted OpenAI Server")
    def start_scripted_openai_server(
        self, actor_file: str, first_token_delay_s: float = 0.0, token_interval_s: float = 0.0
    ) -> str:
        """Starts an OpenAI-compatible server on 127.0.0.1 replaying the actor file's `script:`.

        Streamed replies wait `first_token_delay_s` before the first chunk and `token_interval_s`
        between the next ones. Returns the server's `base_url`; `Load Actor Over The Wire` uses
        the latest server started. Stop it with `Stop Scripted OpenAI Servers`.
        """
        script = _script_of(_read_actor(actor_file))
        server = ScriptedOpenAIServer(
            script, first_token_delay_s=first_token_delay_s, token_interval_s=token_interval_s
        )
        server.start()
        self._servers.append(server)
        self._server = server
        self._script = script
        return server.base_url

    @keyword
    def load_actor_over_the_wire(
        self,
        actor_file: str,
        api_key: str = DUMMY_API_KEY,
        stream_tool_rounds: bool | None = None,
        max_retries: int = 0,
    ) -> None:
        """Loads the actor with provider `openai` against the latest scripted server.

        The file's `script:` is left to the server; the actor gets `base_url` of the server,
        `max_retries` (by default 0: a scripted HTTP 500 is not retried by the loop; the client
        never retries), the model `scripted` unless the file names one, and reads `api_key` from
        an environment variable this keyword sets.
        """
        if self._server is None:
            raise RuntimeError("Start Scripted OpenAI Server first")
        config = _read_actor(actor_file)
        agent = {"model": "scripted", **config["agent"]}
        agent.pop("script", None)
        agent.update(
            provider="openai",
            base_url=self._server.base_url,
            api_key_env=API_KEY_ENV,
            max_retries=max_retries,
        )
        os.environ[API_KEY_ENV] = api_key
        self._load({**config, "agent": agent}, stream_tool_rounds)

    @keyword
    def load_actor_with_a_streaming_chatopenai(self, actor_file: str) -> None:
        """Loads the actor around `ChatOpenAI(streaming=True)` against the latest scripted
        server, built here in code (config has no `streaming`): a model whose `ainvoke` streams
        and would let langchain-core fold the chunks."""
        if self._server is None:
            raise RuntimeError("Start Scripted OpenAI Server first")
        config = load_actor_config(_read_actor(actor_file))
        model = ChatOpenAI(
            model="scripted",
            base_url=self._server.base_url,
            api_key=SecretStr(DUMMY_API_KEY),
            streaming=True,
            stream_usage=True,
            max_retries=0,
        )
        self._executor = ActorExecutor(LLMAgent.from_config(config.agent, model=model))
        clear_invocations()

    @keyword("Stop Scripted OpenAI Servers")
    def stop_scripted_openai_servers(self) -> None:
        """Stops every scripted server this suite started (safe to call when none runs)."""
        for server in self._servers:
            server.stop()
        self._servers.clear()
        if self._anthropic is not None:
            self._anthropic.stop()
            self._anthropic = None

    @keyword
    def start_capturing_logs(self) -> None:
        """Captures every log record of every logger, down to DEBUG, until `Stop Capturing Logs`."""
        if self._log_capture is None:
            self._log_capture = _LogCapture()

    @keyword
    def stop_capturing_logs(self) -> None:
        """Stops capturing logs and restores the root logger's level."""
        if self._log_capture is not None:
            self._log_capture.stop()
            self._log_capture = None

    def _load(self, config: dict[str, Any], stream_tool_rounds: bool | None) -> None:
        if stream_tool_rounds is not None:
            config = {
                **config,
                "agent": {**config["agent"], "stream_tool_rounds": stream_tool_rounds},
            }
        self._executor = ActorExecutor.from_config(config)
        clear_invocations()

    @keyword
    def record_mcp_server_processes(self) -> None:
        """MCP test servers started from now on write their pid into a fresh file (named by
        MCP_TEST_LOG, which the actors pass them), for `No MCP Server Process Should Be Running`.
        """
        handle, path = tempfile.mkstemp(prefix="mcp-robot-", suffix=".log")
        os.close(handle)
        os.environ["MCP_TEST_LOG"] = path

    @keyword
    def close_actor(self) -> None:
        """Closes the loaded actor's executor (its MCP sessions; stdio servers are terminated)."""
        if self._executor is not None:
            self._run(self._executor.aclose())

    # -- actions ------------------------------------------------------------------------------

    @keyword
    def send_chat_message(self, message: str, mode: Mode = "blocking") -> str:
        """Sends `message` to the actor and returns the answer.

        `mode` is `blocking` (`execute()`), `streaming` (`execute_stream()`, the answer is the
        chunks joined) or `events` (`execute_events()`, the answer is its text deltas joined).
        An exception the run raises reaches the test unchanged.
        """
        executor = self._loaded_executor()
        consumed = self._run(guarded(consume(executor, message, mode=_CONSUMED_AS[mode])))
        self._add_turn(mode, consumed)
        if consumed.error is not None:
            raise consumed.error
        if mode == "blocking" and consumed.result is not None:
            return consumed.result.text
        return "".join(consumed.chunks)

    @keyword
    def send_chat_message_and_stop_reading(
        self, message: str, after_chunks: int, style: StopStyle = "async with"
    ) -> str:
        """Streams `message` and stops reading after `after_chunks` chunks; returns those chunks.

        `style` is how the caller stops: `async with` (breaks inside `async with stream`),
        `aclose` (breaks, then awaits `stream.aclose()`), `break` (only breaks out of
        `async for`), `cancel task` or `cancel scope`. Records which tasks the run left running
        once the caller had stopped (for `break`, once the stream had the chance to settle).
        """
        executor = self._loaded_executor()
        errors_before = len(self._loop_errors)
        stop = Stop(style, at=after_items(int(after_chunks)))
        consumed = self._run(self._read_then_stop(executor, message, stop))
        turn = self._add_turn("streaming", consumed)
        turn.loop_errors = self._loop_errors[errors_before:]
        if consumed.error is not None:
            raise consumed.error
        return "".join(consumed.chunks)

    @staticmethod
    async def _read_then_stop(executor: ActorExecutor, message: str, stop: Stop) -> Consumption:
        consumed = await guarded(consume(executor, message, mode="text", stop=stop))
        # Collect what the stop set off, so that an exception nobody retrieved is reported to
        # the loop now, inside this turn.
        gc.collect()
        await asyncio.sleep(0)
        return consumed

    # -- assertions: answers and streams ----------------------------------------------------

    @keyword
    def answer_should_be_the_last_scripted_reply(self) -> None:
        """The result's answer is the text of the script's last reply, and its text is what the
        stream showed (if it streamed): every reply's text, rounds set apart by a blank line."""
        expected = self._script[-1].text
        _should_equal(self._result().answer, expected, "answer")
        if self._turn().mode == "streaming":
            _should_equal(self._result().text, "".join(self._turn().consumed.chunks), "text")

    @keyword
    def streamed_text_should_be_every_scripted_text_in_order(self) -> None:
        """The chunks, joined, are every scripted reply's text in order, rounds set apart by a
        blank line: text written before tool calls reached the caller too, and nothing else did."""
        turn = self._turn()
        # execute_stream() sets rounds apart; the events' text deltas are the provider's text only
        separator = ROUND_SEPARATOR if turn.mode == "streaming" else ""
        expected = separator.join(reply.text for reply in self._script if reply.text)
        _should_equal("".join(turn.consumed.chunks), expected, "streamed text")

    @keyword
    def streamed_chunks_should_not_be_empty(self) -> None:
        """The stream yielded at least one chunk, and no empty chunk."""
        chunks = self._turn().consumed.chunks
        if not chunks:
            raise AssertionError("the stream yielded no chunk")
        if "" in chunks:
            raise AssertionError(f"the stream yielded an empty chunk: {chunks!r}")

    @keyword
    def answer_should_have_arrived_as_one_chunk(self) -> None:
        """The stream yielded exactly one chunk, and it is the whole answer."""
        turn = self._turn()
        if turn.consumed.chunks != [self._result().text]:
            raise AssertionError(f"expected the answer as one chunk, got {turn.consumed.chunks!r}")

    @keyword
    def answer_should_have_streamed_chunk_by_chunk(self) -> None:
        """The answer reached the caller in as many chunks (at least two) as the server sent for
        the final request, and the chunks make up the answer."""
        turn, server = self._turn(), self._wire_server()
        sent = len(server.chunk_times[-1])
        if sent < 2:
            raise AssertionError(
                f"the server sent the answer in {sent} chunk(s); script more words"
            )
        _should_equal(len(turn.consumed.chunks), sent, "number of chunks received")
        _should_equal("".join(turn.consumed.chunks), self._result().text, "chunks joined")

    @keyword
    def first_chunk_should_have_arrived_before_the_server_sent_the_last_token(self) -> None:
        """The first answer chunk reached the caller before the server flushed the answer's last
        chunk: the answer was streamed through, not collected first."""
        turn, server = self._turn(), self._wire_server()
        last_sent = server.chunk_times[-1][-1]
        first_received = turn.consumed.chunk_times[0]
        logger.info(
            f"first chunk received {(last_sent - first_received) * 1000:.1f} ms before "
            "the server sent the last one"
        )
        if not first_received < last_sent:
            raise AssertionError(
                f"the first chunk arrived {(first_received - last_sent) * 1000:.1f} ms after the "
                "server sent the last token: the answer was not streamed through"
            )

    @keyword
    def no_task_should_be_left_running(self) -> None:
        """No task was left running in the event loop once the caller stopped reading."""
        tasks = self._turn().consumed.tasks_left
        if tasks:
            raise AssertionError("tasks still running:\n" + "\n".join(tasks))

    @keyword
    def event_loop_should_have_reported_no_error(self) -> None:
        """The event loop was handed no error during the latest turn: no task failed with an
        exception that nobody retrieved."""
        errors = self._turn().loop_errors
        if errors:
            raise AssertionError("the event loop reported:\n" + "\n".join(errors))

    # -- assertions: tools ------------------------------------------------------------------

    @keyword
    def tool_handlers_should_have_run_for_calls(self, *call_ids: str) -> None:
        """The tool handlers ran exactly for the scripted calls `call_ids`, in that order, with
        the scripted arguments; no other handler ran."""
        scripted = {call.id: call for reply in self._script for call in reply.tool_calls}
        expected = [(scripted[call_id].name, scripted[call_id].args) for call_id in call_ids]
        actual = [(call.tool, call.arguments) for call in invocations()]
        _should_equal(actual, expected, "tool handler calls (name, arguments)")

    @keyword
    def tool_call_should_have_been_skipped(self, call_id: str) -> None:
        """The call `call_id` is recorded as skipped and its handler never ran."""
        record = next((r for r in self._result().tool_calls if r.call_id == call_id), None)
        if record is None:
            raise AssertionError(f"no tool call {call_id!r} in {self._result().tool_calls!r}")
        _should_equal(record.status, "skipped", f"status of {call_id}")
        ran = [
            call
            for call in invocations()
            if call.tool == record.name and call.arguments == record.arguments
        ]
        if ran:
            raise AssertionError(f"the handler of skipped call {call_id} ran: {ran!r}")

    @keyword
    def answer_should_be_the_output_of_tool_call(self, call_id: str) -> None:
        """The answer is what the handler of `call_id` returned, and the stream (if any) carried
        exactly that."""
        record = next((r for r in self._result().tool_calls if r.call_id == call_id), None)
        if record is None:
            raise AssertionError(f"no tool call {call_id!r} in {self._result().tool_calls!r}")
        returned = [c.output for c in invocations() if c.tool == record.name]
        _should_equal(returned, [record.output], f"what the {record.name} handler returned")
        _should_equal(self._result().answer, record.output, "answer")
        if self._turn().mode != "blocking":
            _should_equal("".join(self._turn().consumed.chunks), record.output, "streamed text")

    @keyword
    def server_should_have_received_one_tool_message_per_call_in_model_order(self) -> None:
        """After each scripted reply with tool calls, the next request carries that reply's calls
        and, right behind them, one `tool` message per call id in the model's order, each holding
        what that call's handler returned."""
        requests = self._wire_server().requests
        outputs = {(c.tool, repr(c.arguments)): _as_model_reads(c.output) for c in invocations()}
        checked = 0
        for position, reply in enumerate(self._script):
            if not reply.tool_calls or position + 1 >= len(requests):
                continue
            where = f"request {position + 2}"
            messages = requests[position + 1]["messages"]
            asked = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")][-1]
            ids = [call.id for call in reply.tool_calls]
            _should_equal([c["id"] for c in asked["tool_calls"]], ids, f"call ids in {where}")
            start = messages.index(asked) + 1
            answers = [
                (m["role"], m.get("tool_call_id"), m.get("content")) for m in messages[start:]
            ]
            expected = [
                ("tool", call.id, outputs.get((call.name, repr(call.args))))
                for call in reply.tool_calls
            ]
            _should_equal(answers, expected, f"(role, call id, content) after the calls in {where}")
            checked += 1
        if not checked:
            raise AssertionError("no request followed a scripted reply with tool calls")

    # -- assertions: limits -----------------------------------------------------------------

    @keyword
    def turn_should_have_ended_in_synthesis(
        self, reason: Literal["max_rounds", "budget", "stuck"]
    ) -> None:
        """The loop stopped for `reason` (max_rounds, budget or stuck) and the synthesis call,
        which may call no tool, gave the answer: the script's last reply."""
        result = self._result()
        _should_equal(result.synthesis_reason, reason, "synthesis reason")
        _should_equal(
            result.budget_exhausted, reason in ("budget", "cost_budget"), "budget_exhausted"
        )
        _should_equal(result.usage_by_call[-1].purpose, "synthesis", "purpose of the last call")
        _should_equal(result.answer, self._script[-1].text, "answer")
        if self._turn().mode != "blocking":
            _should_equal("".join(self._turn().consumed.chunks), result.text, "streamed text")
        last_request = _stub_model(self._loaded_executor()).requests[-1]
        _should_equal(last_request.may_call_tools, False, "tools callable in the synthesis call")

    # -- assertions: tokens -----------------------------------------------------------------

    @keyword
    def reported_tokens_should_equal_the_script(self) -> None:
        """Every scripted reply was used, and the result reports, call by call and in total,
        the tokens scripted for each reply; a reply that failed is a record costing 0."""
        model = _stub_model(self._loaded_executor())
        _should_equal(model.remaining, 0, "scripted replies left unused")
        completed = [r for r in self._script if r.error is None]
        if any(r.prompt_tokens is None or r.completion_tokens is None for r in completed):
            raise RuntimeError("stub actors for this check must script every reply's tokens")
        result = self._result()
        per_call = [
            (c.usage.prompt_tokens, c.usage.completion_tokens) for c in result.usage_by_call
        ]
        _should_equal(
            per_call,
            [
                (0, 0) if r.error is not None else (r.prompt_tokens, r.completion_tokens)
                for r in self._script
            ],
            "tokens per call (prompt, completion)",
        )
        _check_totals(result, sum(p for p, _ in per_call), sum(c for _, c in per_call))
        _should_equal(result.llm_calls, len(self._script), "llm_calls")
        _should_equal(result.usage_estimated, False, "usage_estimated")

    @keyword
    def tool_call_should_have_output(self, call_id: str, output: str) -> None:
        """The last turn's call `call_id` succeeded with exactly this output."""
        record = next(r for r in self._result().tool_calls if r.call_id == call_id)
        _should_equal((record.status, record.output), ("ok", output), f"call {call_id}")

    @keyword
    def tool_call_should_have_failed_mentioning(self, call_id: str, text: str) -> None:
        """The last turn's call `call_id` failed, and the error the model read mentions `text`."""
        record = next(r for r in self._result().tool_calls if r.call_id == call_id)
        if record.status != "error" or text not in record.output:
            raise AssertionError(f"call {call_id}: {record.status} {record.output!r}")

    @keyword
    def no_mcp_server_process_should_be_running(self) -> None:
        """Every MCP test server started since `Record MCP Server Processes` has exited."""
        lines = Path(os.environ["MCP_TEST_LOG"]).read_text(encoding="utf-8").splitlines()
        pids = [int(line.split()[1]) for line in lines if line.startswith("pid ")]
        if not pids:
            raise AssertionError("no MCP server process was started")
        deadline = time.monotonic() + 10
        while any(_is_running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        running = [pid for pid in pids if _is_running(pid)]
        if running:
            raise AssertionError(f"MCP server processes still running: {running}")

    @keyword
    def reported_tokens_should_equal_billed(self) -> None:
        """The result reports, call by call and in total, exactly what the server billed: one
        record per request the server received, a refused one (an HTTP error) costing 0."""
        result, server = self._result(), self._wire_server()
        billed = {b.request_index: b for b in server.billed}
        per_call = [
            (c.usage.prompt_tokens, c.usage.completion_tokens) for c in result.usage_by_call
        ]
        _should_equal(
            per_call,
            [
                (billed[i].prompt_tokens, billed[i].completion_tokens) if i in billed else (0, 0)
                for i in range(len(server.requests))
            ],
            "tokens per call (prompt, completion) against the server's bill",
        )
        total = server.billed_total
        _check_totals(result, total.prompt_tokens, total.completion_tokens)
        _should_equal(result.llm_calls, len(server.requests), "llm_calls")
        _should_equal(result.usage_estimated, False, "usage_estimated")
        if not result.prompt_tokens or not result.completion_tokens:
            raise AssertionError(f"nothing was billed: {result!r}")

    @keyword
    def token_details_and_cost_should_equal_billed(
        self,
        input_per_mtok: str,
        cached_per_mtok: str,
        output_per_mtok: str,
        reported_model: bool = True,
    ) -> None:
        """Each call's cached and reasoning tokens are what the server's usage said, its cost is
        what the given published prices (USD per million tokens) make of the server's bill, and
        the result's cost is their sum. With `reported_model`, each call names the model the
        server said answered."""
        result, billed = self._result(), self._wire_server().billed
        _should_equal(
            [(c.usage.cache_read_tokens, c.usage.reasoning_tokens) for c in result.usage_by_call],
            [(b.cached_tokens, b.reasoning_tokens) for b in billed],
            "cached and reasoning tokens per call against the server's bill",
        )
        prices = Decimal(input_per_mtok), Decimal(cached_per_mtok), Decimal(output_per_mtok)
        expected = [_billed_cost(b, *prices) for b in billed]
        _should_equal([c.cost_usd for c in result.usage_by_call], expected, "cost per call")
        _should_equal(result.cost_usd, sum(expected), "the result's cost")
        if reported_model:
            _should_equal(
                [c.model for c in result.usage_by_call], [b.model for b in billed], "models"
            )

    @keyword
    def load_actor_over_the_anthropic_wire(
        self, actor_file: str, usage_in_message_start_only: bool = False, cache_ttl: str = "5m"
    ) -> None:
        """Serves the actor file's `script:` from `ScriptedAnthropicServer` on 127.0.0.1 and
        loads the actor as written (`provider: anthropic`, its `model_options`), pointed at it
        with `base_url`, reading a dummy key from `ANTHROPIC_API_KEY`. The server reports every
        cache write with lifetime `cache_ttl` (`5m` or `1h`)."""
        config = _read_actor(actor_file)
        endpoint = ScriptedAnthropicServer(
            [
                ScriptedAnthropicReply(
                    **reply.model_dump(exclude_defaults=True),
                    usage_in_message_start_only=usage_in_message_start_only,
                    cache_write_ttl=cache_ttl,
                )
                for reply in _script_of(config)
            ]
        )
        endpoint.start()
        self._anthropic = endpoint
        self._script = _script_of(config)
        agent = {key: value for key, value in config["agent"].items() if key != "script"}
        agent.update(base_url=endpoint.base_url, max_retries=0)
        os.environ["ANTHROPIC_API_KEY"] = DUMMY_API_KEY
        self._load({**config, "agent": agent}, None)

    @keyword
    def anthropic_requests_should_carry(self, field: str, value: str) -> None:
        """Every request body the Anthropic endpoint received has `field` equal to `value`
        (YAML), e.g. what `model_options` set."""
        endpoint = self._anthropic_endpoint()
        expected = yaml.safe_load(value)
        for body in endpoint.requests:
            _should_equal(body.get(field), expected, f"request field {field}")

    @keyword
    def usage_and_cost_should_equal_anthropic_bill(
        self,
        input_per_mtok: str,
        cache_read_per_mtok: str,
        cache_write_per_mtok: str,
        output_per_mtok: str,
    ) -> None:
        """Every call reports exactly what the Anthropic endpoint billed: the whole prompt
        (uncached + cache reads + cache writes), its cache parts, the output; each call's cost is
        what the given published prices (USD per million tokens) make of the bill."""
        result, billed = self._result(), self._anthropic_endpoint().billed
        _should_equal(
            [
                (
                    c.usage.prompt_tokens,
                    c.usage.cache_read_tokens,
                    c.usage.cache_write_tokens,
                    c.usage.completion_tokens,
                    c.usage.estimated,
                )
                for c in result.usage_by_call
            ],
            [
                (
                    b.prompt_tokens,
                    b.cache_read_tokens,
                    b.cache_write_tokens,
                    b.completion_tokens,
                    False,
                )
                for b in billed
            ],
            "usage per call against the Anthropic bill",
        )
        prices = [
            Decimal(price)
            for price in (
                input_per_mtok,
                cache_read_per_mtok,
                cache_write_per_mtok,
                output_per_mtok,
            )
        ]
        expected = [
            (
                (b.prompt_tokens - b.cache_read_tokens - b.cache_write_tokens) * prices[0]
                + b.cache_read_tokens * prices[1]
                + b.cache_write_tokens * prices[2]
                + b.completion_tokens * prices[3]
            )
            / Decimal(1_000_000)
            for b in billed
        ]
        _should_equal([c.cost_usd for c in result.usage_by_call], expected, "cost per call")
        _should_equal(result.cost_usd, sum(expected), "the result's cost")
        _should_equal({c.provider for c in result.usage_by_call}, {"anthropic"}, "provider")

    @keyword
    def every_call_should_estimate_the_prompt_and_keep_the_anthropic_output(self) -> None:
        """The endpoint sent the input usage only in message_start, which langchain-anthropic
        reads as 0 prompt tokens: each call is flagged estimated with a non-zero prompt, and
        keeps the output count the endpoint reported."""
        result, billed = self._result(), self._anthropic_endpoint().billed
        _should_equal(len(result.usage_by_call), len(billed), "calls against requests")
        for call, bill in zip(result.usage_by_call, billed, strict=True):
            _should_equal(call.usage.estimated, True, f"call {call.index} estimated")
            _should_equal(call.usage.completion_tokens, bill.completion_tokens, "output tokens")
            if call.usage.prompt_tokens <= 0:
                raise AssertionError(f"call {call.index} was billed no prompt: {call}")

    def _anthropic_endpoint(self) -> ScriptedAnthropicServer:
        if self._anthropic is None:
            raise RuntimeError("Load Actor Over The Anthropic Wire first")
        return self._anthropic

    @keyword
    def load_chatopenai_built_in_code(self, actor_file: str) -> None:
        """An agent with the actor file's tools around a `ChatOpenAI` built in code for the latest
        scripted server, without `stream_usage` (which ChatOpenAI then leaves off for any URL but
        OpenAI's own)."""
        if self._server is None:
            raise RuntimeError("Start Scripted OpenAI Server first")
        model = ChatOpenAI(
            model="gpt-4o",
            base_url=self._server.base_url,
            api_key=SecretStr(DUMMY_API_KEY),
            max_retries=0,
        )
        config = load_actor_config(_read_actor(actor_file))
        tools = [tool_from_config(tool) for tool in config.agent.tools]
        self._executor = ActorExecutor(LLMAgent(model, tools=tools))
        clear_invocations()

    @keyword
    def every_streamed_request_should_have_asked_for_usage(self) -> None:
        """Every streamed request body the server received asked for the usage chunk."""
        bodies = [body for body in self._wire_server().requests if body.get("stream")]
        if not bodies:
            raise AssertionError("no streamed request was received")
        for body in bodies:
            _should_equal(body.get("stream_options"), {"include_usage": True}, "stream_options")

    @keyword("Reported Tokens Should Hold Billed Calls And Estimate The Cut-Off One")
    def reported_tokens_should_hold_billed_calls_and_estimate_the_cut_off_one(
        self, cancelled: bool = True
    ) -> None:
        """Every call but the last matches the server's bill exactly; the last, cut off before the
        server sent its usage, is estimated (non-zero) and flagged, and so is the result, which
        is marked `cancelled` when the caller stopped the run (not when the server cut it)."""
        result, server = self._result(), self._wire_server()
        calls = result.usage_by_call
        _should_equal(len(calls), len(server.requests), "LLM calls reported vs requests received")
        *exact, cut_off = calls
        billed = [b for b in server.billed if b.completed]
        _should_equal(
            [(c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.estimated) for c in exact],
            [(b.prompt_tokens, b.completion_tokens, False) for b in billed[: len(exact)]],
            "completed calls against the server's bill",
        )
        if not (
            cut_off.usage.estimated
            and cut_off.usage.prompt_tokens
            and cut_off.usage.completion_tokens
        ):
            raise AssertionError(f"the cut-off call is not a flagged, non-zero estimate: {cut_off}")
        _should_equal(result.usage_estimated, True, "usage_estimated")
        _should_equal(result.cancelled, cancelled, "cancelled")
        _check_totals(
            result,
            sum(c.usage.prompt_tokens for c in calls),
            sum(c.usage.completion_tokens for c in calls),
        )

    @keyword
    def every_attempt_should_be_on_the_bill(self, *attempts: str) -> None:
        """One record per request the server received, in order, each `<attempt>:<status>` as
        given (e.g. `1:failed 2:ok 1:ok`): a completed request has exactly the server's figures;
        one the server cut off is a flagged estimate with a prompt; a refused one (HTTP error)
        costs 0. The result's totals are the records' sums."""
        result, server = self._result(), self._wire_server()
        billed = {b.request_index: b for b in server.billed}
        calls = result.usage_by_call
        _should_equal(len(calls), len(server.requests), "records vs requests received")
        _should_equal([f"{c.attempt}:{c.status}" for c in calls], list(attempts), "attempts")
        for index, call in enumerate(calls):
            bill = billed.get(index)
            usage = call.usage
            if bill is None:
                seen, expected = (usage.total_tokens, usage.estimated), (0, False)
            elif bill.completed:
                seen = (usage.prompt_tokens, usage.completion_tokens, usage.estimated)
                expected = (bill.prompt_tokens, bill.completion_tokens, False)
            else:
                seen, expected = (usage.estimated, usage.prompt_tokens > 0), (True, True)
            _should_equal(seen, expected, f"record {index + 1} against the server's bill")
        _check_totals(
            result,
            sum(c.usage.prompt_tokens for c in calls),
            sum(c.usage.completion_tokens for c in calls),
        )

    @keyword
    def retries_should_have_waited(self, *delays: str) -> None:
        """The latest turn's `call_retrying` events asked for these delays, in order: a number
        of seconds (`Retry-After`, honoured exactly) or `backoff` (at most the actor's
        `retry_backoff_s` for a first retry). Read from the events, not from a clock."""
        waited = [e.delay_s for e in self._turn().consumed.events if isinstance(e, CallRetrying)]
        _should_equal(len(waited), len(delays), "call_retrying events")
        agent = self._loaded_executor().agent
        backoff = agent.retry.backoff_s if isinstance(agent, LLMAgent) else 0.0
        for seen, expected in zip(waited, delays, strict=True):
            if expected == "backoff":
                if not 0 < seen <= backoff:
                    raise AssertionError(f"a backoff of {seen} s, not within (0, {backoff}]")
            else:
                _should_equal(seen, float(expected), "the delay Retry-After asked for")

    @keyword
    def streaming_and_blocking_turns_should_match(self) -> None:
        """The latest blocking and streaming turns (each against its own server with the same
        script) made the same number of requests and reported the same tokens, call by call."""
        blocking = self._latest_turn("blocking")
        streaming = self._latest_turn("streaming")
        if blocking.server is None or streaming.server is None:
            raise RuntimeError("both turns must run over the wire")
        if blocking.consumed.last_result is None or streaming.consumed.last_result is None:
            raise AssertionError("executor.last_result was not set by both turns")
        _should_equal(
            len(streaming.server.requests),
            len(blocking.server.requests),
            "requests made streaming vs blocking",
        )

        def usage(result: ExecutionResult) -> list[tuple[int, int]]:
            return [
                (c.usage.prompt_tokens, c.usage.completion_tokens) for c in result.usage_by_call
            ]

        _should_equal(
            usage(streaming.consumed.last_result),
            usage(blocking.consumed.last_result),
            "tokens per call, streaming vs blocking",
        )

    # -- assertions: the server -------------------------------------------------------------

    @keyword
    def server_should_have_received_requests(self, count: int) -> None:
        """The latest scripted server received exactly `count` chat requests."""
        _should_equal(len(self._wire_server().requests), count, "requests received")

    @keyword
    def server_should_have_billed_calls(self, count: int) -> None:
        """The latest scripted server billed exactly `count` calls (a failed request bills none)."""
        _should_equal(len(self._wire_server().billed), count, "calls billed")

    @keyword
    def server_requests_should_be(self, kind: Literal["streamed", "blocking"]) -> None:
        """Every request the latest server received was streamed, or every one was blocking."""
        flags = [bool(body.get("stream")) for body in self._wire_server().requests]
        _should_equal(flags, [kind == "streamed"] * len(flags), "request `stream` flags")

    @keyword
    def last_server_request_should_declare_tools_and_forbid_calls(self, *names: str) -> None:
        """The latest server's last request (the synthesis) declared the tools `names` and set
        `tool_choice` to "none", while its messages hold tool calls and their results."""
        _should_equal(self._result().usage_by_call[-1].purpose, "synthesis", "last call")
        body = self._wire_server().requests[-1]
        declared = tuple(tool["function"]["name"] for tool in body.get("tools") or ())
        _should_equal(declared, names, "tools declared in the synthesis request")
        _should_equal(body.get("tool_choice"), "none", "tool_choice of the synthesis request")
        roles = {message["role"] for message in body["messages"]}
        _should_equal("tool" in roles, True, "the synthesis request holds tool results")

    @keyword
    def server_should_have_seen_the_client_leave(self) -> None:
        """The latest server's last reply was cut short because the client went away (waits a
        while for the server to notice, up to the harness's hang guard)."""
        server = self._wire_server()

        def noticed() -> bool:
            billed = server.billed
            return len(billed) == len(server.requests) and not billed[-1].completed

        if not self._run(wait_until(noticed)):
            raise AssertionError(f"the server finished its last reply: {server.billed!r}")

    @keyword("Server Should Have Received API Key")
    def server_should_have_received_api_key(self, api_key: str) -> None:
        """Every request the latest server received carried `Authorization: Bearer <api_key>`."""
        server = self._wire_server()
        received = [headers.get("authorization", "") for headers in server.request_headers]
        _should_equal(
            received, [f"Bearer {api_key}"] * len(server.requests), "Authorization headers"
        )

    # -- assertions: errors and secrets -----------------------------------------------------

    @keyword
    def last_error_should_be_an_instance_of(self, *type_names: str) -> None:
        """The exception of the latest turn is an instance of every class named (dotted path),
        and `last_result.error` names its type and message."""
        error = self._turn().consumed.error
        if error is None:
            raise AssertionError("the latest turn raised nothing")
        for name in type_names:
            module, _, attribute = name.rpartition(".")
            cls = getattr(__import__(module, fromlist=[attribute]), attribute)
            if not isinstance(error, cls):
                raise AssertionError(f"{type(error).__mro__} does not include {name}")
        info = self._result().error
        _should_equal(
            (info.type, info.message) if info else None,
            (type(error).__name__, str(error)),
            "last_result.error (type, message)",
        )

    @keyword
    def secret_should_appear_nowhere(self, secret: str) -> None:
        """`secret` appears in no captured log record, answer, chunk, event, result, exception
        (message, repr, arguments, body, causes) nor in the repr of the executor or its model."""
        places: dict[str, str] = {}
        if self._log_capture is not None:
            places["logs"] = self._log_capture.text()
        executor = self._loaded_executor()
        places["executor repr"] = repr(executor) + repr(vars(executor))
        places["agent repr"] = repr(executor.agent) + repr(vars(executor.agent))
        model = getattr(executor.agent, "model", None)
        places["model repr"] = repr(model) + str(model)
        for n, turn in enumerate(self._turns, start=1):
            places[f"turn {n} chunks"] = repr(turn.consumed.chunks)
            places[f"turn {n} events"] = "\n".join(
                event_adapter.dump_json(event).decode() for event in turn.consumed.events
            )
            if (result := turn.consumed.last_result) is not None:
                places[f"turn {n} result"] = result.model_dump_json() + repr(result)
            places[f"turn {n} exception"] = _describe_exception_chain(turn.consumed.error)
        leaks = [place for place, text in places.items() if secret in text]
        logger.info(f"searched {len(places)} places, {sum(map(len, places.values()))} characters")
        if leaks:
            raise AssertionError(f"the secret appears in: {', '.join(leaks)}")

    # -- plumbing ---------------------------------------------------------------------------

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            self._runner = asyncio.Runner()
            self._runner.get_loop().set_exception_handler(self._on_loop_error)
        return self._runner.run(coroutine)

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self._loop_errors.append(f"{context.get('message')}: {context.get('exception')!r}")
        loop.default_exception_handler(context)

    def _add_turn(self, mode: Mode, consumed: Consumption) -> _Turn:
        turn = _Turn(mode=mode, server=self._server, consumed=consumed)
        self._turns.append(turn)
        self._log_turn(turn)
        return turn

    def _loaded_executor(self) -> ActorExecutor:
        if self._executor is None:
            raise RuntimeError("load an actor first")
        return self._executor

    def _turn(self) -> _Turn:
        if not self._turns:
            raise RuntimeError("send a chat message first")
        return self._turns[-1]

    def _latest_turn(self, mode: Mode) -> _Turn:
        turn = next((t for t in reversed(self._turns) if t.mode == mode), None)
        if turn is None:
            raise RuntimeError(f"no {mode} turn was run")
        return turn

    def _result(self) -> ExecutionResult:
        result = self._turn().consumed.last_result
        if result is None:
            raise AssertionError("executor.last_result was not set by the latest turn")
        return result

    def _wire_server(self) -> ScriptedOpenAIServer:
        server = self._turn().server
        if server is None:
            raise RuntimeError("the latest turn did not run over the wire")
        return server

    @staticmethod
    def _log_turn(turn: _Turn) -> None:
        if turn.consumed.chunks:
            logger.info(f"{len(turn.consumed.chunks)} chunk(s): {turn.consumed.chunks!r}")
        if turn.consumed.last_result is not None:
            logger.info(f"last_result: {turn.consumed.last_result.model_dump_json(indent=2)}")


class _LogCapture:
    """Collects every log record (DEBUG and up) on the root logger, formatted with its args."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._handler = logging.StreamHandler(self._buffer)
        self._handler.setLevel(logging.DEBUG)
        self._handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        root = logging.getLogger()
        self._previous_level = root.level
        root.addHandler(self._handler)
        root.setLevel(logging.DEBUG)

    def text(self) -> str:
        return self._buffer.getvalue()

    def stop(self) -> None:
        root = logging.getLogger()
        root.removeHandler(self._handler)
        root.setLevel(self._previous_level)


def _billed_cost(call: BilledCall, input: Decimal, cached: Decimal, output: Decimal) -> Decimal:
    """What published per-million-token prices make of one billed call; reasoning tokens are
    completion tokens, priced once."""
    fresh = call.prompt_tokens - call.cached_tokens
    micro_dollars = fresh * input + call.cached_tokens * cached + call.completion_tokens * output
    return micro_dollars / Decimal(1_000_000)


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's bookkeeping is left


def _read_actor(actor_file: str) -> dict[str, Any]:
    path = ACTORS_DIR / actor_file
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict) or not isinstance(config.get("agent"), dict):
        raise RuntimeError(f"{path} is not an actor config")
    return config


def _script_of(config: dict[str, Any]) -> tuple[ScriptedReply, ...]:
    return tuple(
        ScriptedReply.model_validate(reply) for reply in config["agent"].get("script") or ()
    )


def _stub_model(executor: ActorExecutor) -> ScriptedChatModel:
    model = getattr(executor.agent, "model", None)
    if not isinstance(model, ScriptedChatModel):
        raise RuntimeError(f"the actor does not run on the stub provider: {model!r}")
    return model


def _describe_exception_chain(error: BaseException | None) -> str:
    parts: list[str] = []
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        parts += [str(error), repr(error), repr(error.args), repr(getattr(error, "body", None))]
        error = error.__cause__ or error.__context__
    return "\n".join(parts)


def _check_totals(result: ExecutionResult, prompt: int, completion: int) -> None:
    _should_equal(
        (result.prompt_tokens, result.completion_tokens, result.total_tokens),
        (prompt, completion, prompt + completion),
        "tokens (prompt, completion, total)",
    )


def _as_model_reads(output: object) -> object:
    """A handler's return value as the tool message carries it: text as is, objects as JSON."""
    return output if isinstance(output, str) else json.dumps(output)


def _should_equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


__all__ = ["CleverActorsLibrary"]
