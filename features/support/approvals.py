"""A shop agent for the approval scenarios: tools that count their calls, a scripted model, and
one executor (or several, on one database) that pauses and resumes its runs.

`Shop` holds the world of one scenario: the tools' record (`ran`), the model, every segment's
result and events, and the error a refused resumption raised. `ResumeTarget` makes a resumption
look like a message to `support.harness.consume`, so the stop scenarios consume resumed
segments with the same stops as ordinary runs.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from cleveractors import ActorExecutor, ExecutionResult, LLMAgent, Resumption, tool_from_callable
from cleveractors.agents import ApprovalPolicy
from cleveractors.agents.tool import ToolCallRequest
from cleveractors.approvals import ApprovalDecision
from cleveractors.config import McpServer
from cleveractors.events import Event
from cleveractors.store import SqlStore
from cleveractors.testing import ScriptedChatModel, ScriptedReply
from cleveractors.tools import Tool

__all__ = ["MCP_SERVER", "ResumeTarget", "Shop", "decision_of"]

MCP_SERVER = Path(__file__).resolve().parent / "mcp_servers" / "tool_server.py"

HOLD_LIMIT_S = 10.0
"""The longest a slow refund waits to be released: a scenario that never releases it fails
rather than hangs."""

Gating = str
"""How the shop's refund and send_mail tools are gated: `needs_approval` (declared on the
tools), `approval names` (`LLMAgent(approval=[...])`), or a policy: `sync policy`, `async
policy` (refunds over 50 and every mail need a person), `raising policy` (it raises)."""


def _over_fifty(call: ToolCallRequest) -> bool:
    if call.name == "send_mail":
        return True
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    return call.name == "refund" and float(arguments["amount"]) > 50


async def _async_over_fifty(call: ToolCallRequest) -> bool:
    await asyncio.sleep(0)
    return _over_fifty(call)


def _raising(call: ToolCallRequest) -> bool:
    if call.name == "lookup":
        return False
    raise RuntimeError("the refund rules service is down")


POLICIES: dict[str, ApprovalPolicy] = {
    "sync policy": _over_fifty,
    "async policy": _async_over_fifty,
    "raising policy": _raising,
}


@dataclass
class Shop:
    """One scenario's world: the tools' record, the model, the executors, what each segment
    gave back."""

    replies: list[ScriptedReply] = field(default_factory=list)
    gating: Gating = "needs_approval"
    store_url: str | None = None
    timeout_s: float = 3600.0
    mcp_approval: str | tuple[str, ...] | None = None
    ran: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    model: ScriptedChatModel | None = None
    chat_model: BaseChatModel | None = None
    """A model over a real wire instead of `model` (then `model` stays None)."""
    results: list[ExecutionResult] = field(default_factory=list)
    events: list[list[Event]] = field(default_factory=list)
    chunks: list[list[str]] = field(default_factory=list)
    """Per segment run in `text` mode, the text chunks it streamed."""
    error: BaseException | None = None
    executors: list[ActorExecutor] = field(default_factory=list)
    refund_started: threading.Event = field(default_factory=threading.Event)
    refund_released: threading.Event | None = None
    """When set, a refund waits for it (a slow tool, holding its run open)."""
    session_id: str | None = None

    # -- building ------------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        gated = self.gating == "needs_approval"
        return [
            tool_from_callable(self._lookup, name="lookup"),
            tool_from_callable(self._refund, name="refund", needs_approval=gated),
            tool_from_callable(self._send_mail, name="send_mail", needs_approval=gated),
        ]

    def _lookup(self, order: str) -> str:
        """Look an order up."""
        self.ran.append(("lookup", {"order": order}))
        return f"order {order}: 2 items"

    def _refund(self, order: str, amount: float) -> str:
        """Refund an amount on an order."""
        self.ran.append(("refund", {"order": order, "amount": amount}))
        self.refund_started.set()
        if self.refund_released is not None:
            self.refund_released.wait(timeout=HOLD_LIMIT_S)
        return f"refunded {amount:g} on {order}"

    def _send_mail(self, to: str) -> str:
        """Send a mail."""
        self.ran.append(("send_mail", {"to": to}))
        return f"mail sent to {to}"

    def agent(self) -> LLMAgent:
        if self.chat_model is None and self.model is None:
            self.model = ScriptedChatModel(replies=list(self.replies))
        approval: Sequence[str] | ApprovalPolicy | None = None
        if self.gating == "approval names":
            approval = ["refund", "send_mail"]
        elif self.gating in POLICIES:
            approval = POLICIES[self.gating]
        servers: list[McpServer] = []
        if self.mcp_approval is not None:
            servers.append(
                McpServer(
                    name="tools",
                    command=(sys.executable, str(MCP_SERVER)),
                    approval=self.mcp_approval,  # type: ignore[arg-type]  # a test's own value
                )
            )
        return LLMAgent(
            self.chat_model or self.model,  # type: ignore[arg-type]  # one of them is set
            tools=self.tools(),
            approval=approval,
            approval_timeout_s=self.timeout_s,
            mcp_servers=servers,
        )

    def executor(self) -> ActorExecutor:
        """The shop's first executor (made on first use)."""
        if not self.executors:
            self.executors.append(self.another_executor())
        return self.executors[0]

    def another_executor(self) -> ActorExecutor:
        """A new executor with its own agent and its own `SqlStore` on the shop's database, as
        another worker (or the same one after a restart) would have; the model is shared, so its
        script goes on."""
        store = None if self.store_url is None else SqlStore(self.store_url)
        return ActorExecutor(self.agent(), store=store)

    async def close(self) -> None:
        for executor in self.executors:
            await executor.aclose()

    # -- reading -------------------------------------------------------------------------------

    @property
    def last(self) -> ExecutionResult:
        assert self.results, f"no segment gave a result (error: {self.error!r})"
        return self.results[-1]

    def paused_segment(self, which: str) -> ExecutionResult:
        """The first or the latest segment that paused."""
        paused = [result for result in self.results if result.status == "paused"]
        assert paused, f"no segment paused: {[r.status for r in self.results]}"
        return paused[0] if which == "first" else paused[-1]


@dataclass(frozen=True, slots=True)
class ResumeTarget:
    """A resumption of `run_id` posing as a message target for `support.harness.consume`: the
    message is ignored; the decisions are carried out in the mode the harness asks."""

    executor: ActorExecutor
    run_id: str
    decisions: tuple[ApprovalDecision, ...]

    @property
    def last_result(self) -> ExecutionResult | None:
        return self.executor.last_result

    async def execute(self, message: str, history: Any = None) -> ExecutionResult:
        return await self.executor.execute(Resumption(self.run_id, self.decisions))

    def execute_events(self, message: str, history: Any = None) -> Any:
        return self.executor.execute_events(Resumption(self.run_id, self.decisions))

    def execute_stream(self, message: str, history: Any = None) -> Any:
        return self.executor.execute_stream(Resumption(self.run_id, self.decisions))


def decision_of(row: Mapping[str, str], paused: ExecutionResult) -> dict[str, Any]:
    """A decision's JSON from a table row (`call`, `decision`, and optional `arguments`,
    `reason`, `output`, `digest`: `right` (the pending call's, the default), `stale` or
    `none`); an unknown call id gets no digest."""
    import json

    call_id = row["call"]
    decision: dict[str, Any] = {"call_id": call_id, "decision": row["decision"]}
    pending = {call.call_id: call for call in paused.pending_approvals}
    digest = row.get("digest") or "right"
    if digest == "right" and call_id in pending:
        decision["digest"] = pending[call_id].digest
    elif digest == "stale":
        decision["digest"] = "0" * 32
    for key in ("reason", "output"):
        if row.get(key):
            decision[key] = row[key]
    if row.get("arguments"):
        decision["arguments"] = json.loads(row["arguments"])
    if row.get("extra"):
        decision.update(json.loads(row["extra"]))
    return decision
