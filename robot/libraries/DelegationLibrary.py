"""Robot Framework keywords for an agent that calls another agent as a tool, over the real wire.

The parent and the child are each langchain-openai's `ChatOpenAI` against a scripted
OpenAI-compatible server of their own on 127.0.0.1 (every conversation walks its own copy of
the script), the parent's executor keeps its ledger in a SQLite store, and the checks compare
the ledger's rows of the run tree with the parent's result and with what both servers billed.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Coroutine
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from robot.api.deco import keyword, library
from support.harness import guarded

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent
from cleveractors.agents import LoopLimits
from cleveractors.events import AgentEvent, TextDelta
from cleveractors.store import SqlStore
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from cleveractors.tools import tool_from_callable

T = TypeVar("T")

_CHILD_SCRIPT = (
    ScriptedReply(tool_calls=(ScriptedToolCall(name="get_weather", args={"city": "Paris"}),)),
    ScriptedReply(text="It is raining in Paris, twelve degrees, with a light wind from the west."),
)
_PARENT_SCRIPT = (
    ScriptedReply(
        tool_calls=(
            ScriptedToolCall(name="researcher", args={"message": "Find the weather in Paris"}),
        )
    ),
    ScriptedReply(text="The researcher says it is raining in Paris."),
)


def _get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: rain, 12 C"


@library(scope="SUITE")
class DelegationLibrary:
    """A parent agent and a child agent called as its tool, both over the wire."""

    def __init__(self) -> None:
        self._runner = asyncio.Runner()
        self._servers: dict[str, ScriptedOpenAIServer] = {}
        self._executor: ActorExecutor | None = None
        self._folder = Path(tempfile.mkdtemp(prefix="cleveractors-delegation-"))
        self._result: ExecutionResult | None = None
        self._billed_before: dict[str, int] = {}

    def close(self) -> None:
        """Called by Robot when the suite ends."""
        self.stop_the_servers_of_the_run_tree()
        self._runner.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(guarded(work))

    # -- setup (never asserts) -----------------------------------------------------------------

    @keyword
    def start_a_parent_and_a_child_over_the_wire(
        self, child_token_budget: int | None = None, child_token_interval_s: float = 0.0
    ) -> None:
        """Starts the two scripted servers and builds the parent's executor (a fresh SQLite
        store) with the child as its tool `researcher`; the child's tokens stream every
        `child_token_interval_s` seconds and it has `child_token_budget`, when given."""
        self.stop_the_servers_of_the_run_tree()
        child_server = ScriptedOpenAIServer(
            list(_CHILD_SCRIPT), per_conversation=True, token_interval_s=child_token_interval_s
        )
        parent_server = ScriptedOpenAIServer(list(_PARENT_SCRIPT), per_conversation=True)
        for name, server in (("child", child_server), ("parent", parent_server)):
            server.start()
            self._servers[name] = server
        child = LLMAgent(
            _chat_model(child_server),
            name="researcher",
            tools=[tool_from_callable(_get_weather, name="get_weather")],
            limits=LoopLimits(token_budget=child_token_budget),
        )
        parent = LLMAgent(
            _chat_model(parent_server), name="boss", tools=[child.as_tool(description="Asks.")]
        )
        database = self._folder / f"ledger-{len(list(self._folder.iterdir()))}.db"
        store = SqlStore(f"sqlite:///{database}")
        self._executor = ActorExecutor(parent, store=store)

    @keyword
    def stop_the_servers_of_the_run_tree(self) -> None:
        """Stops both servers and closes the executor (safe when none runs)."""
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
        if self._executor is not None:
            self._run(self._executor.aclose())
            self._executor = None

    # -- actions -------------------------------------------------------------------------------

    @keyword
    def ask_the_parent(self, message: str, mode: str = "blocking") -> None:
        """Sends `message` to the parent, `blocking` or `streamed` (its events read)."""
        executor = self._ready()
        self._note_billed()
        if mode == "blocking":
            self._result = self._run(executor.execute(message))
            return

        async def read() -> ExecutionResult | None:
            async with executor.execute_events(message) as events:
                async for _ in events:
                    pass
            return executor.last_result

        self._result = self._run(read())

    @keyword
    def ask_the_parent_and_stop_it_while_the_child_streams(self, message: str) -> None:
        """Streams `message` to the parent and closes the stream at the child's first text
        delta, so the parent is cancelled while the child's reply is on the wire."""
        executor = self._ready()
        self._note_billed()

        async def read() -> ExecutionResult | None:
            events = executor.execute_events(message)
            async for event in events:
                if isinstance(event, AgentEvent) and isinstance(event.event, TextDelta):
                    break
            await events.aclose()
            return events.result

        self._result = self._run(read())

    # -- checks --------------------------------------------------------------------------------

    @keyword
    def the_ledger_rows_of_the_run_tree_should_sum_to_the_parent_totals(self) -> None:
        """Every ledger row of the parent's run and its child's (naming the parent) summed is
        exactly the parent's result: tokens and cost; and the child made at least one row."""
        result = self._finished()
        store = self._ready().store
        assert store is not None
        rows = self._run(store.usage()).rows
        tree = [
            row for row in rows if row.run_id == result.run_id or row.parent_run_id == result.run_id
        ]
        _equal(len(tree), result.llm_calls, "ledger rows of the tree against llm_calls")
        if not any(row.parent_run_id == result.run_id for row in tree):
            raise AssertionError(f"no row of the child run: {tree}")
        _equal(sum(row.prompt_tokens for row in tree), result.prompt_tokens, "prompt tokens")
        _equal(
            sum(row.completion_tokens for row in tree),
            result.completion_tokens,
            "completion tokens",
        )
        cost = sum((row.cost_usd or Decimal(0) for row in tree), Decimal(0))
        _equal(cost, result.cost_usd or Decimal(0), "cost")

    @keyword
    def the_parent_totals_should_be_what_both_servers_billed(self) -> None:
        """The parent's totals are the sum of what the parent's and the child's servers billed
        for this run."""
        result = self._finished()
        billed = [
            call
            for name, server in self._servers.items()
            for call in server.billed[self._billed_before[name] :]
        ]
        _equal(sum(c.prompt_tokens for c in billed), result.prompt_tokens, "prompt tokens")
        _equal(sum(c.completion_tokens for c in billed), result.completion_tokens, "completion")
        _equal(result.usage_estimated, False, "usage_estimated")

    @keyword
    def the_parent_should_have(self, status: str) -> None:
        """The parent's run ended as `status` (answered, cancelled...)."""
        _equal(self._finished().status, status, "the parent's status")

    @keyword
    def the_child_should_have_answered_by_synthesis_for(self, reason: str) -> None:
        """The child run answered, from what it had, because of `reason`."""
        (child,) = self._finished().child_runs
        _equal((child.status, child.synthesis_reason), ("answered", reason), "the child run")

    @keyword
    def the_child_calls_should_be_billed_with_one_cut_off(self) -> None:
        """The child's calls are in the parent's result, the last one cancelled mid-stream."""
        result = self._finished()
        calls = [call for call in result.usage_by_call if call.agent == "researcher"]
        if not calls or calls[-1].status != "cancelled":
            raise AssertionError(f"the child's calls: {calls}")
        if calls[-1].usage.total_tokens == 0:
            raise AssertionError(f"the cut-off call billed nothing: {calls[-1]}")

    # -- helpers -------------------------------------------------------------------------------

    def _ready(self) -> ActorExecutor:
        if self._executor is None:
            raise RuntimeError("Start A Parent And A Child Over The Wire first")
        return self._executor

    def _finished(self) -> ExecutionResult:
        if self._result is None:
            raise AssertionError("the parent has not been asked")
        return self._result

    def _note_billed(self) -> None:
        self._billed_before = {name: len(s.billed) for name, s in self._servers.items()}


def _chat_model(server: ScriptedOpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=server.base_url,
        api_key=SecretStr("sk-robot-dummy-key"),
        stream_usage=True,
        max_retries=0,
    )


def _equal(actual: object, expected: object, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: {actual!r} != {expected!r}")
