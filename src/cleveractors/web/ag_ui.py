"""`POST /ag-ui`: AG-UI (the `ag-ui-protocol` package's types and `EventEncoder`), so an AG-UI
client (`@ag-ui/client`'s `HttpAgent`, CopilotKit) runs an actor with no adapter code.

The request is a `RunAgentInput`. How it becomes an actor turn:

- the last message, the user's, is the message (text parts joined by line breaks; other content
  parts are refused with 422 naming them);
- earlier user and assistant messages with text are the history; system, developer, tool,
  activity and reasoning messages are ignored (the actor runs its own tools server-side);
- with a store, `threadId` is the session id and the server holds the history;
- `tools` (frontend tools) are refused with 400: an actor runs its own tools, and cannot call
  the client's; `state`, `context` and `forwardedProps` are ignored;
- `resume` entries answer the interrupts of a paused run, and resume it (below).

The server's run id replaces the client's `runId`: every event that names the run (`RUN_STARTED`,
`RUN_FINISHED`) carries the id the server gave it, as in `X-Run-Id`, the ledger and
`GET /runs/{id}`; the `runId` a client sends is not read.

The answer is AG-UI's SSE: `RUN_STARTED` (the run's own id, as in `X-Run-Id`), per round the
`TEXT_MESSAGE_START` / `CONTENT` / `END` of its text and per tool call `TOOL_CALL_START` /
`ARGS` / `END`, then `TOOL_CALL_RESULT` (the output, or the tool's own error text); last
`RUN_FINISHED` with `usage` (one entry per provider and model, in AG-UI's accounting) and
metadata `{"cleveractors": {"run_id", "cost_usd"}}` (a decimal string, absent when unpriced),
or `RUN_ERROR` with the error type as `code`, the generic message the other routes give, and
the usage spent.

A typed actor's object (`output_schema`, `output_type`) is the run's state, `{"output": <the object
so far>}`: first a `STATE_SNAPSHOT`, then, as the object grows, `STATE_DELTA`s (JSON Patch, RFC
6902, made by `jsonpatch`: the keys and items added, the last value replaced), so a client's
`state` holds the object so far and, at the end, the validated one (`ExecutionResult.output`). A
retry of an invalid answer starts again with a new snapshot.

A run that waits for a person ends with `RUN_FINISHED` whose outcome is an interrupt, one per
gated call (an agent's called as a tool too, at any depth, by the id `pending_approvals` lists
it under, its `metadata` naming the `agent_path`): `toolCallId` names the call, `metadata` holds
its name and arguments, and
`responseSchema` describes the answer, `{"approved": bool, "editedArgs": {...}, "reason":
"..."}` (`editedArgs` approves the call with other arguments). The next input's `resume` entries
answer them by interrupt id (`status: "cancelled"` rejects the call); the paused run is found,
and the answers checked, on the server's own records.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Interrupt,
    Message,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.core.token_usage import aggregate_token_usage
from ag_ui.core.types import TextPart
from ag_ui.encoder import EventEncoder
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette import ServerSentEvent

from cleveractors.approvals import PendingApproval
from cleveractors.events import (
    Event,
    OutputDelta,
    RoundStarted,
    RunFailed,
    RunFinished,
    RunPaused,
    RunStarted,
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
from cleveractors.web.requests import RequestRejected, refusal_of
from cleveractors.web.security import public_error
from cleveractors.web.turns import OpenedRun

__all__ = [
    "AG_UI",
    "APPROVAL_RESPONSE_SCHEMA",
    "AgUiEvents",
    "AgUiFrames",
    "ApprovalAnswer",
    "read_turn",
]

APPROVAL_INTERRUPT_REASON = "tool_approval"
APPROVAL_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Run the call (true) or decline it."},
        "editedArgs": {
            "type": "object",
            "description": "Run the call with these arguments instead (an approval).",
        },
        "reason": {"type": "string", "description": "Why; the model reads a refusal's reason."},
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""The `responseSchema` of an approval interrupt: what a `resume` entry's payload holds."""
_DENIED = frozenset({"reject", "expired"})
_STATE_KEY = "output"
"""The key of the run's state that holds a typed actor's object."""


class ApprovalAnswer(BaseModel):
    """The payload of a `resume` entry answering an approval interrupt."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    approved: bool
    edited_args: dict[str, Any] | None = Field(default=None, alias="editedArgs")
    reason: str | None = None

    def decision(self, call_id: str) -> dict[str, Any]:
        """The executor's decision (`cleveractors.approvals.ApprovalDecision`) for CALL_ID."""
        if not self.approved:
            return {"call_id": call_id, "decision": "reject", "reason": self.reason}
        if self.edited_args is not None:
            return {
                "call_id": call_id,
                "decision": "edit",
                "arguments": self.edited_args,
                "reason": self.reason,
            }
        return {"call_id": call_id, "decision": "approve", "reason": self.reason}


def read_turn(body: RunAgentInput, *, keeps_sessions: bool) -> Turn:
    """The actor turn a `RunAgentInput` asks for: a new message, or a resumption.

    Raises:
        RequestRejected: frontend tools (400); a conversation that does not end with the
            user's text, content that is not text, an answer that is not one (422).
    """
    if body.tools:
        raise RequestRejected(
            400, "tools: an actor runs its own tools server-side; it cannot call a client's"
        )
    if body.resume:
        return _resumption(body.resume)
    if not body.messages:
        raise RequestRejected(422, "messages: no message to answer")
    texts = [_text_of(message, f"messages.{n}") for n, message in enumerate(body.messages)]
    last = len(body.messages) - 1
    if not isinstance(body.messages[last], UserMessage):
        role = body.messages[last].role
        raise RequestRejected(
            422, f"messages.{last}: the last message must be from the user, not {role!r}"
        )
    earlier = [(message.role, text) for message, text in zip(body.messages, texts, strict=True)]
    session_id = body.thread_id if keeps_sessions else None
    return new_message(
        texts[last] or "", earlier[:-1], session_id=session_id, where=f"messages.{last}"
    )


def _text_of(message: Message, where: str) -> str | None:
    """The text of a user or assistant message (None for the roles the actor does not read)."""
    if isinstance(message, AssistantMessage):
        return message.content or ""
    if not isinstance(message, UserMessage):
        return None
    if isinstance(message.content, str):
        return message.content
    texts: list[str] = []
    for p, part in enumerate(message.content):
        if not isinstance(part, TextPart):
            raise RequestRejected(
                422, f"{where}.content.{p}: only text content is supported, not {part.type!r} parts"
            )
        texts.append(part.text)
    return "\n".join(texts)


def _resumption(entries: list[ResumeEntry]) -> Turn:
    answers: list[tuple[str, dict[str, Any]]] = []
    for n, entry in enumerate(entries):
        run_id, call_id = paused_call_of(entry.interrupt_id, f"resume.{n}.interruptId")
        if entry.status == "cancelled":
            decision = {"call_id": call_id, "decision": "reject", "reason": "cancelled"}
        else:
            try:
                answer = ApprovalAnswer.model_validate(entry.payload)
            except ValidationError as invalid:
                problem = refusal_of(invalid).message
                raise RequestRejected(422, f"resume.{n}.payload: {problem}") from None
            decision = answer.decision(call_id)
        answers.append((run_id, decision))
    return one_paused_run(answers, "resume")


def usage_entries(result: ExecutionResult) -> list[TokenUsage] | None:
    """Every token the run spent, one entry per provider and model; None when it called none."""
    entries = [
        TokenUsage(
            provider=call.provider,
            model=call.model,
            input_tokens=call.usage.prompt_tokens,
            output_tokens=call.usage.completion_tokens,
            total_tokens=call.usage.total_tokens,
            reasoning_tokens=call.usage.reasoning_tokens,
            cached_input_tokens=call.usage.cache_read_tokens,
            cache_write_input_tokens=call.usage.cache_write_tokens,
        )
        for call in result.usage_by_call
    ]
    return aggregate_token_usage(entries) or None


def _run_metadata(result: ExecutionResult) -> dict[str, Any]:
    ours: dict[str, Any] = {"run_id": result.run_id}
    if result.cost_usd is not None:
        ours["cost_usd"] = str(result.cost_usd)
    return {"cleveractors": ours}


class AgUiEvents:
    """Turns a run's events into AG-UI events; holds only what is open (a text message) and the
    run's pending interrupts."""

    def __init__(self, thread_id: str, run_id: str, *, is_resumption: bool) -> None:
        self._thread_id = thread_id
        self._run_id = run_id
        self._is_resumption = is_resumption
        self._text = OpenText(run_id)
        self._round_text_id: str | None = None
        self._interrupts: list[Interrupt] = []
        self._output: tuple[int, object] | None = None
        """The attempt and object the client's state holds, once a typed answer streams."""

    def of(self, event: Event, request_id: str) -> list[BaseEvent]:
        """The AG-UI events EVENT becomes (often none)."""
        match event:
            case RunStarted(run_id=run_id):
                return [RunStartedEvent(thread_id=self._thread_id, run_id=run_id)]
            case RoundStarted():
                self._round_text_id = None
                return self._end_text()
            case TextDelta(text=text) if text:
                return [
                    *self._open_text(),
                    TextMessageContentEvent(message_id=self._text.id, delta=text),
                ]
            case OutputDelta(attempt=attempt, output=output):
                return self._state(attempt, output)
            case ToolCallRequested(call_id=call_id, name=name, arguments=arguments):
                return [*self._end_text(), *self._tool_call(call_id, name, arguments)]
            case ToolApprovalRequested():
                self._interrupts.append(self._interrupt(event))
                return []
            case ToolCallFinished(call_id=call_id, output=output, error=error):
                return [self._result(call_id, error if error is not None else output or "")]
            case ToolCallSkipped(call_id=call_id, reason=reason):
                return [self._result(call_id, reason)]
            case ToolCallDecided(call_id=call_id, decision=decision, reason=reason) if (
                self._is_resumption and decision in _DENIED
            ):
                return [
                    self._result(call_id, f"declined ({decision}): {reason or 'no reason given'}")
                ]
            case RunFinished(result=result):
                return [*self._end_text(), self._finished(result)]
            case RunPaused(result=result):
                # The calls of agents called as tools (at any depth) wait too: each is an
                # interrupt by the id the paused run lists it under.
                below = [
                    self._interrupt(p) for p in result.pending_approvals if len(p.agent_path) > 1
                ]
                outcome = RunFinishedInterruptOutcome(interrupts=[*self._interrupts, *below])
                return [*self._end_text(), self._finished(result, outcome)]
            case RunFailed(error=error, result=result):
                told = public_error(error, request_id)
                failed = RunErrorEvent(
                    message=f"{told.type}: {told.message}",
                    code=told.type,
                    usage=usage_entries(result),
                    metadata=_run_metadata(result),
                )
                return [*self._end_text(), failed]
            case _:
                return []

    def _state(self, attempt: int, output: object) -> list[BaseEvent]:
        """A snapshot of the object's first version in an attempt; a patch for each next one."""
        held, self._output = self._output, (attempt, output)
        if held is None or held[0] != attempt:
            return [StateSnapshotEvent(snapshot={_STATE_KEY: output})]
        patch = jsonpatch.make_patch({_STATE_KEY: held[1]}, {_STATE_KEY: output}).patch
        return [StateDeltaEvent(delta=patch)] if patch else []

    def _open_text(self) -> list[BaseEvent]:
        opened = self._text.open()
        if opened is None:
            return []
        self._round_text_id = opened
        return [TextMessageStartEvent(message_id=opened, role="assistant")]

    def _end_text(self) -> list[BaseEvent]:
        closed = self._text.close()
        return [] if closed is None else [TextMessageEndEvent(message_id=closed)]

    def _tool_call(
        self, call_id: str, name: str, arguments: dict[str, object] | str
    ) -> list[BaseEvent]:
        # A round's calls belong to its text message, when it wrote one before them.
        text = (
            arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        )
        return [
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=self._round_text_id
            ),
            ToolCallArgsEvent(tool_call_id=call_id, delta=text),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    def _result(self, call_id: str, content: str) -> ToolCallResultEvent:
        return ToolCallResultEvent(
            message_id=f"{self._run_id}-result-{call_id}",
            tool_call_id=call_id,
            content=content,
            role="tool",
        )

    def _interrupt(self, call: ToolApprovalRequested | PendingApproval) -> Interrupt:
        about: dict[str, Any] = {"tool": call.name, "arguments": call.arguments}
        if isinstance(call, PendingApproval):  # a call of an agent called as a tool: whose
            about["agent_path"] = list(call.agent_path)
        return Interrupt(
            id=approval_id(self._run_id, call.call_id),
            reason=APPROVAL_INTERRUPT_REASON,
            message=f"Run the tool {call.name!r}?",
            tool_call_id=call.call_id,
            response_schema=APPROVAL_RESPONSE_SCHEMA,
            expires_at=call.expires_at.isoformat(),
            metadata={"cleveractors": about},
        )

    def _finished(
        self, result: ExecutionResult, outcome: RunFinishedInterruptOutcome | None = None
    ) -> RunFinishedEvent:
        return RunFinishedEvent(
            thread_id=self._thread_id,
            run_id=self._run_id,
            outcome=outcome,
            usage=usage_entries(result),
            metadata=_run_metadata(result),
        )


class _EncodedFrame(ServerSentEvent):
    """A frame as `EventEncoder` wrote it, sent as it is."""

    def __init__(self, encoded: str) -> None:
        super().__init__()
        self._encoded = encoded.encode()

    def encode(self) -> bytes:
        return self._encoded


class AgUiFrames:
    """AG-UI's events, each encoded as the client's `Accept` header asks (`EventEncoder`)."""

    def __init__(
        self, thread_id: str, opened: OpenedRun, encoder: EventEncoder, request_id: str
    ) -> None:
        run_id = opened.run_id or ""
        self._events = AgUiEvents(thread_id, run_id, is_resumption=opened.is_resumption)
        self._encoder = encoder
        self._request_id = request_id

    def start(self) -> list[ServerSentEvent]:
        return []

    def of(self, event: Event) -> list[ServerSentEvent]:
        return [
            _EncodedFrame(self._encoder.encode(ag_ui_event))
            for ag_ui_event in self._events.of(event, self._request_id)
        ]


def _read_turn(body: RunAgentInput, keeps_sessions: bool) -> Turn:
    return read_turn(body, keeps_sessions=keeps_sessions)


def _frames(
    body: RunAgentInput, request: Request, opened: OpenedRun, request_id: str
) -> AgUiFrames:
    encoder = EventEncoder(accept=request.headers.get("accept", ""))
    return AgUiFrames(body.thread_id, opened, encoder, request_id)


AG_UI = FrontendProtocol(
    path="/ag-ui",
    summary="Run an AG-UI RunAgentInput (or resume a paused run); answer AG-UI's events",
    body=RunAgentInput,
    read_turn=_read_turn,
    encoder=_frames,
    headers={},
)
"""`POST /ag-ui`: the run as AG-UI events."""
