"""`POST /ai-sdk`: the Vercel AI SDK's UI message stream protocol (v1, as `ai` 5 and later speak
it), so a `useChat` frontend (React, Vue, Svelte, Angular, or the framework-free `Chat`) talks to
an actor with its default transport and no adapter code:

    useChat({transport: new DefaultChatTransport({api: "http://127.0.0.1:8000/ai-sdk"})})

The request is what `DefaultChatTransport` sends: `{"id", "messages", "trigger"}`, the messages
being UI messages with parts. Unknown fields are ignored (a transport may add its own `body`);
a part of a type the protocol does not have is refused with 422 naming it, and so is a `file`
part (an actor takes text). How the conversation becomes an actor turn:

- the last message, the user's, is the message (its text parts joined by line breaks);
- earlier user and assistant messages with text are the history; `system` messages are ignored
  (the actor's own system prompt governs), and so are tool, reasoning, source, data and step
  parts: the actor runs its tools server-side;
- with a store, the chat `id` is the session id and the server holds the history: the earlier
  messages a client sends are not read;
- a last message from the assistant carrying approval responses (`addToolApprovalResponse`)
  resumes the paused run the approvals were asked for (see `cleveractors.web.frontends`).

The answer is the protocol's SSE (header `x-vercel-ai-ui-message-stream: v1`): `start` (message
metadata `{"run_id"}`), per model call a step (`start-step` / `finish-step`) with its text
(`text-start` / `text-delta` / `text-end`) and tool calls (`tool-input-available`, then
`tool-output-available` or `tool-output-error` with the tool's own error text); a gated call's
`tool-approval-request` (the gated calls of agents called as tools, at any depth, come as tool
parts asking for approval before `finish`, by the ids `pending_approvals` lists them under: a
decision resumes the whole run tree); a typed actor's object
(`output_schema`, `output_type`) as a `data-output` part,
`{"type": "data-output", "id": "{run_id}-output", "data": <the object so far>}`, sent again
as it grows under the same id, so the client replaces the part in place (the last is the validated
object, `ExecutionResult.output`); an `error` part for a failed run (the same generic wording as
the other routes); last `finish` with the message metadata `{"run_id", "usage": {"prompt_tokens",
"completion_tokens", "total_tokens", "details": {...}}, "cost_usd"}` (`cost_usd` a decimal string,
absent when unpriced) and `[DONE]`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import ServerSentEvent

from cleveractors.events import (
    AgentEvent,
    Event,
    OutputDelta,
    RoundStarted,
    RunFailed,
    RunFinished,
    RunPaused,
    TextDelta,
    ToolApprovalRequested,
    ToolCallDecided,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallSkipped,
)
from cleveractors.result import ExecutionResult
from cleveractors.turns import Turn
from cleveractors.web.frontends import (
    FrontendProtocol,
    OpenText,
    approval_id,
    new_message,
    one_paused_run,
    paused_call_of,
)
from cleveractors.web.requests import RequestRejected
from cleveractors.web.security import public_error
from cleveractors.web.sse import data_frame
from cleveractors.web.turns import OpenedRun

__all__ = [
    "AI_SDK",
    "UI_MESSAGE_STREAM_HEADERS",
    "UIMessage",
    "UIMessageChunks",
    "UIMessageFrames",
    "UIMessageRequest",
    "UIPart",
    "message_metadata",
    "read_turn",
]

UI_MESSAGE_STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "x-accel-buffering": "no"}
"""The headers `ai`'s `createUIMessageStreamResponse` sends beside `text/event-stream`."""

_DENIED: frozenset[str] = frozenset({"reject", "expired"})
"""Decisions after which a gated call never runs: the client shows it denied."""
_IGNORED_PARTS = frozenset({"step-start", "reasoning", "source-url", "source-document"})
"""Parts of the protocol that carry nothing for the actor's turn."""
_FINISH_REASONS = {"answered": "stop", "paused": "tool-calls", "failed": "error"}


class _Lenient(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class UIApproval(_Lenient):
    """The `approval` of a tool part: the server's approval id, and once answered, the answer."""

    id: str
    approved: bool | None = None
    reason: str | None = None


class UIPart(BaseModel):
    """One part of a UI message; the fields read here, the others kept as sent."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    type: str
    text: str | None = None
    state: str | None = None
    tool_call_id: str | None = Field(default=None, alias="toolCallId")
    approval: UIApproval | None = None

    @property
    def is_tool(self) -> bool:
        return self.type.startswith("tool-") or self.type == "dynamic-tool"


class UIMessage(_Lenient):
    id: str = ""
    role: Literal["system", "user", "assistant"]
    parts: list[UIPart]

    @property
    def text(self) -> str:
        """The message's text parts, joined by line breaks."""
        return "\n".join(part.text or "" for part in self.parts if part.type == "text")


class UIMessageRequest(_Lenient):
    """The body `DefaultChatTransport` sends."""

    id: str = Field(min_length=1, max_length=200)
    """The chat's id: the session's id on a server with a store."""
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(default=None, alias="messageId")


def read_turn(body: UIMessageRequest, *, keeps_sessions: bool) -> Turn:
    """The actor turn a request asks for: a new message, or a resumption.

    Raises:
        RequestRejected: 422 naming the part of a type the protocol lacks or an actor cannot
            take (`file`); a conversation that ends neither with the user's text nor with
            approval responses.
    """
    for m, message in enumerate(body.messages):
        for p, part in enumerate(message.parts):
            _check_part(part, f"messages.{m}.parts.{p}")
    last_index = len(body.messages) - 1
    last = body.messages[last_index]
    if last.role == "assistant":
        return _resumption(last, f"messages.{last_index}")
    if last.role != "user":
        raise RequestRejected(422, f"messages.{last_index}: the last message must be from the user")
    earlier = [(m.role, m.text) for m in body.messages[:-1] if m.role != "system"]
    session_id = body.id if keeps_sessions else None
    return new_message(last.text, earlier, session_id=session_id, where=f"messages.{last_index}")


def _check_part(part: UIPart, where: str) -> None:
    if part.type == "text" or part.is_tool or part.type.startswith("data-"):
        return
    if part.type in _IGNORED_PARTS:
        return
    if part.type == "file":
        raise RequestRejected(422, f"{where}: 'file' parts are not supported: an actor takes text")
    raise RequestRejected(422, f"{where}: unknown part type {part.type!r}")


def _resumption(message: UIMessage, where: str) -> Turn:
    """The paused run that the approval responses of MESSAGE answer, with their decisions."""
    answers: list[tuple[str, dict[str, Any]]] = []
    for p, part in enumerate(message.parts):
        if not (part.is_tool and part.state == "approval-responded" and part.approval):
            continue
        part_where = f"{where}.parts.{p}"
        run_id, call_id = paused_call_of(part.approval.id, f"{part_where}.approval.id")
        if part.tool_call_id != call_id:
            raise RequestRejected(
                422, f"{part_where}: the approval {part.approval.id!r} is not for this tool call"
            )
        decision = "approve" if part.approval.approved else "reject"
        answers.append(
            (run_id, {"call_id": call_id, "decision": decision, "reason": part.approval.reason})
        )
    if not answers:
        raise RequestRejected(
            422, f"{where}: the last message is the assistant's and answers no approval request"
        )
    return one_paused_run(answers, where)


def message_metadata(result: ExecutionResult) -> dict[str, Any]:
    """What `finish` tells of the run: its id, every token it spent, and its cost when priced."""
    metadata: dict[str, Any] = {
        "run_id": result.run_id,
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.total_tokens,
            "details": {
                "cache_read_tokens": result.cache_read_tokens,
                "cache_write_tokens": result.cache_write_tokens,
                "reasoning_tokens": result.reasoning_tokens,
                "llm_calls": result.llm_calls,
                "estimated": result.usage_estimated,
            },
        },
    }
    if result.cost_usd is not None:
        metadata["cost_usd"] = str(result.cost_usd)
    return metadata


class UIMessageChunks:
    """Turns a run's events into UI message stream chunks; holds only what is open (a step, a
    text part), so a long run costs no memory here."""

    def __init__(self, run_id: str, *, is_resumption: bool) -> None:
        self._run_id = run_id
        self._is_resumption = is_resumption
        self._text = OpenText(run_id)
        self._in_step = False

    def start(self) -> dict[str, Any]:
        """The `start` chunk; a resumption goes on with the client's paused message."""
        start: dict[str, Any] = {"type": "start", "messageMetadata": {"run_id": self._run_id}}
        if not self._is_resumption:
            start["messageId"] = self._run_id
        return start

    def of(self, event: Event, request_id: str) -> list[dict[str, Any]]:
        """The chunks EVENT becomes (often none)."""
        match event:
            case RoundStarted():
                return [*self._end_step(), self._start_step()]
            case TextDelta(text=text) if text:
                return [
                    *self._open_text(),
                    {"type": "text-delta", "id": self._text.id, "delta": text},
                ]
            case OutputDelta(output=output):
                return [{"type": "data-output", "id": f"{self._run_id}-output", "data": output}]
            case ToolCallRequested(call_id=call_id, name=name, arguments=arguments):
                available = {"toolCallId": call_id, "toolName": name, "input": arguments}
                return [*self._end_text(), {"type": "tool-input-available", **available}]
            case ToolApprovalRequested(call_id=call_id):
                approval = approval_id(self._run_id, call_id)
                return [
                    {"type": "tool-approval-request", "approvalId": approval, "toolCallId": call_id}
                ]
            case ToolCallFinished(call_id=call_id, output=output, error=None):
                return [{"type": "tool-output-available", "toolCallId": call_id, "output": output}]
            case (
                ToolCallFinished(call_id=call_id, error=str(error))
                | ToolCallSkipped(call_id=call_id, reason=error)
            ):
                return [{"type": "tool-output-error", "toolCallId": call_id, "errorText": error}]
            case ToolCallDecided(call_id=call_id, decision=decision) if (
                self._is_resumption and decision in _DENIED
            ):
                return [{"type": "tool-output-denied", "toolCallId": call_id}]
            case AgentEvent():
                # An agent called as a tool: its events as transient data parts (its answer
                # is the tool's output).
                data = event.model_dump(mode="json", exclude={"kind"})
                return [{"type": "data-agent-event", "data": data, "transient": True}]
            case RunPaused(result=result):
                asked = _asked_below(result, self._run_id)
                return [*asked, *self._end_step(), self._finish(result)]
            case RunFinished(result=result):
                return [*self._end_step(), self._finish(result)]
            case RunFailed(error=error, result=result):
                told = public_error(error, request_id)
                failed = {"type": "error", "errorText": f"{told.type}: {told.message}"}
                return [*self._end_step(), failed, self._finish(result, reason="error")]
            case _:
                return []

    def _start_step(self) -> dict[str, Any]:
        self._in_step = True
        return {"type": "start-step"}

    def _end_step(self) -> list[dict[str, Any]]:
        chunks = self._end_text()
        if self._in_step:
            self._in_step = False
            chunks.append({"type": "finish-step"})
        return chunks

    def _open_text(self) -> list[dict[str, Any]]:
        opened = self._text.open()
        return [] if opened is None else [{"type": "text-start", "id": opened}]

    def _end_text(self) -> list[dict[str, Any]]:
        closed = self._text.close()
        return [] if closed is None else [{"type": "text-end", "id": closed}]

    @staticmethod
    def _finish(result: ExecutionResult, *, reason: str | None = None) -> dict[str, Any]:
        return {
            "type": "finish",
            "finishReason": reason or _FINISH_REASONS.get(result.status, "other"),
            "messageMetadata": message_metadata(result),
        }


class UIMessageFrames:
    """The UI message stream's frames: `start`, the chunks of each event, `[DONE]` at the end."""

    def __init__(self, opened: OpenedRun, request_id: str) -> None:
        self._chunks = UIMessageChunks(opened.run_id or "", is_resumption=opened.is_resumption)
        self._request_id = request_id

    def start(self) -> list[ServerSentEvent]:
        return [data_frame(_json(self._chunks.start()))]

    def of(self, event: Event) -> list[ServerSentEvent]:
        frames = [data_frame(_json(chunk)) for chunk in self._chunks.of(event, self._request_id)]
        if isinstance(event, RunFinished | RunPaused | RunFailed):
            frames.append(data_frame("[DONE]"))
        return frames


def _json(chunk: dict[str, Any]) -> str:
    return json.dumps(chunk, ensure_ascii=False, separators=(",", ":"), default=str)


def _read_turn(body: UIMessageRequest, keeps_sessions: bool) -> Turn:
    return read_turn(body, keeps_sessions=keeps_sessions)


def _frames(
    _body: UIMessageRequest, _request: Request, opened: OpenedRun, request_id: str
) -> UIMessageFrames:
    return UIMessageFrames(opened, request_id)


AI_SDK = FrontendProtocol(
    path="/ai-sdk",
    summary="Run a useChat turn (or resume one after approvals); answer the UI message stream",
    body=UIMessageRequest,
    read_turn=_read_turn,
    encoder=_frames,
    headers=UI_MESSAGE_STREAM_HEADERS,
)
"""`POST /ai-sdk`: the run as the Vercel AI SDK's UI message stream."""


def _asked_below(result: ExecutionResult, run_id: str) -> list[dict[str, Any]]:
    """The calls of agents called as tools (at any depth) that wait for a person, each as a
    tool part asking for approval, by the id the paused run lists it under: the client
    answers them as the run's own, and a decision resumes the whole run tree."""
    chunks: list[dict[str, Any]] = []
    for pending in result.pending_approvals:
        if len(pending.agent_path) < 2:  # the run's own call: asked for as it was announced
            continue
        call_id = pending.call_id
        available = {"toolCallId": call_id, "toolName": pending.name, "input": pending.arguments}
        chunks.append({"type": "tool-input-available", **available})
        approval = approval_id(run_id, call_id)
        chunks.append(
            {"type": "tool-approval-request", "approvalId": approval, "toolCallId": call_id}
        )
    return chunks
