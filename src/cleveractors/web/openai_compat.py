"""The OpenAI Chat Completions wire format: request and response models, and the translation
between them and an actor's turn.

Requests are read leniently where that is harmless: sampling hints (`temperature`, ...) and
bookkeeping fields (`user`, ...) are accepted and ignored, since the actor's config governs its
model, and unknown fields are ignored. A field that would change what the client gets back and
that an actor cannot deliver (`tools`, `tool_choice`, `n` > 1, a `response_format` it cannot
read, ...), and content that is not text (an `image_url` part), are refused with 400 naming the
field or the part (`ChatCompletionRequest.unsupported`); a conversation that does not end with a
user message is refused with 422.

`max_tokens` / `max_completion_tokens` (many frontends always send one) cap the output of each
LLM call of the run (`ChatCompletionRequest.max_output_tokens`): an answer may take several
calls (tool rounds), and each is held to the cap, never above the actor's own model limit.

How a conversation becomes an actor turn:

- the last message (which must be from the user) is the message;
- earlier `user` and `assistant` messages are the history, in order;
- `system` and `developer` messages are ignored: the actor's own `system_prompt` governs, and a chat
  UI's default "You are a helpful assistant" must not override it;
- `tool` messages and assistant messages without text are ignored: the actor runs its tools
  server-side, so a client has no tool calls of its own to report. Nor can a client approve one:
  the format has no item for it, so a tool call that needs a person's approval is never run here;
  the model reads it as declined ("approval ... is not available on this endpoint") and answers
  without it. Serve `/chat` and `/runs/{id}/decisions` to clients that can ask a person.

The `model` a client asks for is echoed in the reply: the actor answers whatever name is used.

`response_format` `json_object` or `json_schema` (strict or not) makes the run typed by that
schema (`NewMessage.output_schema`): the content is then the validated object as JSON, blocking
and streamed (one content chunk, once the object is valid), so the openai SDK's
`client.chat.completions.parse(response_format=Model)` returns it parsed. A schema that is not a
valid JSON Schema is refused with 400 naming the field.

Otherwise the answer is the run's text (`result.text`, see `cleveractors.result.RunText`): every
text the model wrote for the user during the turn, rounds separated by a blank line. The words a
model writes before calling tools ("Let me look that up.") are part of what a streaming client
shows, so the non-streamed content carries them too and both modes give the same text.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import to_jsonable_python

from cleveractors.events import TextDelta
from cleveractors.result import ErrorInfo, ExecutionResult, RunText

__all__ = [
    "AnswerText",
    "AssistantMessage",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ChatMessage",
    "Choice",
    "ChunkChoice",
    "CompletionReply",
    "CompletionTokensDetails",
    "CompletionUsage",
    "ContentPart",
    "Delta",
    "ErrorDetail",
    "ErrorResponse",
    "Model",
    "ModelList",
    "PromptTokensDetails",
    "StreamOptions",
    "error_response",
    "output_json",
    "run_error_response",
]


# -- requests ----------------------------------------------------------------------------------


class _Lenient(BaseModel):
    """A request part: unknown fields are ignored, as OpenAI-compatible servers do."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class ContentPart(_Lenient):
    """One part of a message's content; only `text` parts are supported (others are refused
    with 400 by `ChatCompletionRequest.unsupported`)."""

    type: str
    text: str = ""


class ChatMessage(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    @property
    def parts(self) -> list[ContentPart]:
        """The content's parts (none for text given as a string)."""
        return self.content if isinstance(self.content, list) else []

    @property
    def is_text(self) -> bool:
        return all(part.type == "text" for part in self.parts)

    @property
    def text(self) -> str:
        """The message's text; text parts are joined by line breaks."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content)


class StreamOptions(_Lenient):
    include_usage: bool = False


class ChatCompletionRequest(_Lenient):
    """A `POST /v1/chat/completions` body.

    Honoured: `model` (echoed), `messages`, `stream`, `stream_options.include_usage`,
    `max_tokens` / `max_completion_tokens` (a cap on each LLM call's output), `response_format`
    (`text`, `json_object`, `json_schema`: the answer is an object of that schema). Sampling
    hints (`temperature`, `top_p`, `presence_penalty`, `frequency_penalty`, `seed`) and
    bookkeeping (`user`, `metadata`, `store`, `service_tier`, `parallel_tool_calls`) are accepted
    and ignored: the actor's config governs its model. Fields that would change what the client
    gets back, which an actor cannot deliver, are refused (`unsupported()`), never ignored.
    """

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    """The older name of `max_completion_tokens`; either caps each LLM call of the run."""
    max_completion_tokens: int | None = Field(default=None, ge=1)
    # Read only to be refused (see `unsupported`).
    tools: list[object] | None = None
    tool_choice: object = None
    functions: list[object] | None = None
    function_call: object = None
    n: int | None = None
    response_format: dict[str, object] | None = None
    """Read by `output_schema`; one it cannot read is refused by `unsupported`."""
    logprobs: bool | None = None
    top_logprobs: int | None = None
    stop: str | list[str] | None = None
    logit_bias: dict[str, object] | None = None
    audio: object = None
    modalities: list[str] | None = None
    prediction: object = None

    def unsupported(self) -> tuple[str, str] | None:
        """The first field set to something an actor cannot honour (or the first content part
        that is not text), and why: `(param, message)`."""
        for n, message in enumerate(self.messages):
            for p, part in enumerate(message.parts):
                if part.type != "text":
                    where = f"messages.{n}.content.{p}"
                    return where, (
                        f"{where}: {part.type!r} parts are not supported by this endpoint: "
                        "an actor takes text"
                    )
        for param, is_refused, why in (
            ("tools", bool(self.tools), _SERVER_SIDE_TOOLS),
            ("tool_choice", self.tool_choice not in _NO_CHOICE, _SERVER_SIDE_TOOLS),
            ("functions", bool(self.functions), _SERVER_SIDE_TOOLS),
            ("function_call", self.function_call not in _NO_CHOICE, _SERVER_SIDE_TOOLS),
            ("n", self.n not in (None, 1), "an actor gives one answer per request (n=1)"),
            ("logprobs", bool(self.logprobs), "no log probabilities"),
            ("top_logprobs", self.top_logprobs is not None, "no log probabilities"),
            ("stop", bool(self.stop), "no stop sequences"),
            ("logit_bias", bool(self.logit_bias), "no logit bias"),
            ("audio", self.audio is not None, "only text answers"),
            ("modalities", self.modalities not in (None, ["text"]), "only text answers"),
            ("prediction", self.prediction is not None, "no predicted outputs"),
        ):
            if is_refused:
                return param, f"{param!r} is not supported by this endpoint: {why}"
        return _format_problem(self.response_format)

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema the answer must match, from `response_format` (None for text); read
        once `unsupported()` found nothing wrong."""
        response_format = self.response_format
        kind = None if response_format is None else response_format.get("type")
        if response_format is None or kind == "text":
            return None
        if kind == "json_object":
            return {"type": "object"}
        described = cast("Mapping[str, Any]", response_format["json_schema"])  # `unsupported`
        schema = dict(described.get("schema") or {"type": "object"})
        schema.setdefault("title", described["name"])
        return schema

    @field_validator("messages")
    @classmethod
    def _ends_with_user_text(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        last = messages[-1]
        if last.role != "user":
            raise ValueError(f"the last message must be from the user, not {last.role!r}")
        if last.is_text and not last.text.strip():  # other parts are refused by `unsupported`
            raise ValueError("the last message (the user's) has no text")
        return messages

    @property
    def max_output_tokens(self) -> int | None:
        """The cap on each LLM call's output: the smaller of the two names, if both are sent."""
        caps = [cap for cap in (self.max_tokens, self.max_completion_tokens) if cap is not None]
        return min(caps, default=None)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def message(self) -> str:
        """The user's message: the text of the last message."""
        return self.messages[-1].text

    @property
    def history(self) -> list[dict[str, object]]:
        """The earlier user and assistant turns with text, as `{"role", "content"}` dicts."""
        return [
            {"role": turn.role, "content": turn.text}
            for turn in self.messages[:-1]
            if turn.role in ("user", "assistant") and turn.text
        ]


_NO_CHOICE = (None, "none", "auto")
_SERVER_SIDE_TOOLS = "the actor runs its own tools server-side; a client cannot add tools"


def _format_problem(response_format: Mapping[str, object] | None) -> tuple[str, str] | None:
    """What in `response_format` this endpoint cannot honour, as `(param, message)`."""
    if response_format is None:
        return None
    kind = response_format.get("type")
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return "response_format.type", (
            f"'response_format.type' must be 'text', 'json_object' or 'json_schema', not {kind!r}"
        )
    described = response_format.get("json_schema")
    if not isinstance(described, Mapping):
        return "response_format.json_schema", "'response_format.json_schema' must be an object"
    name = described.get("name")
    if not isinstance(name, str) or not name:
        return "response_format.json_schema.name", (
            "'response_format.json_schema.name' must be a non-empty string"
        )
    schema = described.get("schema", {})
    where = "response_format.json_schema.schema"
    if not isinstance(schema, Mapping):
        return where, f"{where!r} must be a JSON Schema object"
    problem = _schema_problem(json.dumps(schema, sort_keys=True))
    return None if problem is None else (where, f"{where!r} is not a valid JSON Schema: {problem}")


@functools.lru_cache(maxsize=128)
def _schema_problem(schema: str) -> str | None:
    """What makes a schema (as JSON) invalid, if anything; kept per schema, since checking one
    costs milliseconds and clients send theirs with every request."""
    try:
        Draft202012Validator.check_schema(json.loads(schema))
    except SchemaError as exc:
        return exc.message
    return None


def output_json(result: ExecutionResult) -> str:
    """A typed run's answer as the content a client parses: its object, as JSON."""
    return json.dumps(to_jsonable_python(result.output))


# -- responses ---------------------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True)


def _is_none(value: object) -> bool:
    return value is None


class PromptTokensDetails(_Wire):
    cached_tokens: int


class CompletionTokensDetails(_Wire):
    reasoning_tokens: int


class CompletionUsage(_Wire):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails
    completion_tokens_details: CompletionTokensDetails

    @classmethod
    def of(cls, result: ExecutionResult) -> CompletionUsage:
        """Every token the turn spent, over all its LLM calls (tool rounds included), with the
        cached and reasoning parts where OpenAI reports them."""
        return cls(
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            total_tokens=result.total_tokens,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=result.cache_read_tokens),
            completion_tokens_details=CompletionTokensDetails(
                reasoning_tokens=result.reasoning_tokens
            ),
        )


class AssistantMessage(_Wire):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(_Wire):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class _Completion(_Wire):
    """What a completion and each of its chunks begin with."""

    id: str
    object: str
    created: int
    model: str


class ChatCompletion(_Completion):
    object: Literal["chat.completion"] = "chat.completion"
    choices: list[Choice]
    usage: CompletionUsage


class Delta(_Wire):
    """What a chunk adds; unset fields are left out (`{}` on the last chunk), as OpenAI does."""

    role: Literal["assistant"] | None = Field(default=None, exclude_if=_is_none)
    content: str | None = Field(default=None, exclude_if=_is_none)


class ChunkChoice(_Wire):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop"] | None = None
    logprobs: None = None


class ChatCompletionChunk(_Completion):
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChunkChoice]
    usage: CompletionUsage | None = None


class Model(_Wire):
    """One entry of `GET /v1/models`: the served actor, as OpenAI describes a model."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "cleveractors"


class ModelList(_Wire):
    object: Literal["list"] = "list"
    data: list[Model]


class ErrorDetail(_Wire):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(_Wire):
    """OpenAI's error body, `{"error": {...}}`: the `openai` client raises with its message."""

    error: ErrorDetail


def error_response(
    message: str, *, type: str, param: str | None = None, code: str | None = None
) -> ErrorResponse:
    return ErrorResponse(error=ErrorDetail(message=message, type=type, param=param, code=code))


def run_error_response(error: ErrorInfo) -> ErrorResponse:
    """A failed run (the actor's model failed) as an OpenAI `api_error`, coded by exception type."""
    return error_response(error.message, type="api_error", code=error.type)


@dataclass(frozen=True, slots=True)
class CompletionReply:
    """The identity of one completion (id, time, model), shared by all of its chunks."""

    model: str
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def completion(self, text: str, result: ExecutionResult) -> ChatCompletion:
        return ChatCompletion(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[Choice(message=AssistantMessage(content=text))],
            usage=CompletionUsage.of(result),
        )

    def chunk(self, delta: Delta, *, is_last: bool = False) -> ChatCompletionChunk:
        choice = ChunkChoice(delta=delta, finish_reason="stop" if is_last else None)
        return ChatCompletionChunk(
            id=self.id, created=self.created, model=self.model, choices=[choice]
        )

    def usage_chunk(self, result: ExecutionResult) -> ChatCompletionChunk:
        """The chunk `stream_options.include_usage` asks for: no choices, the turn's usage."""
        return ChatCompletionChunk(
            id=self.id,
            created=self.created,
            model=self.model,
            choices=[],
            usage=CompletionUsage.of(result),
        )


class AnswerText:
    """The text a turn wrote for the user, collected from its text deltas by the one rule of
    `cleveractors.result.RunText`, so it equals the run's `result.text`."""

    def __init__(self) -> None:
        self._text = RunText()

    @property
    def text(self) -> str:
        return self._text.text

    def add(self, delta: TextDelta) -> str:
        """Take the next delta; returns the piece to show (its text, after a separator when it
        begins a new round's text)."""
        return self._text.add(delta.round, delta.text)
