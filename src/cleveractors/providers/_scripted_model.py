"""`ScriptedChatModel`: a real LangChain chat model that replays a script, for tests and demos.

The model behind the `stub` provider; users import it from `cleveractors.testing`.

Unlike langchain-core's fakes it binds tools, streams tool calls as `tool_call_chunks` (arguments
split across chunks, id and name on the first only), reports usage on its last chunk, and fails on
request: a provider error, a stream cut off after n chunks, a reply with no usage.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.messages.utils import convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from cleveractors._script import (
    ScriptedReply,
    call_arguments_text,
    completion_words,
    delay_before_chunk,
    prompt_words,
    text_pieces,
)
from cleveractors.config import HANDOFF_TOOL_PREFIX
from cleveractors.errors import ScriptExhaustedError
from cleveractors.runs import RunScope, current_run_var

__all__ = ["ScriptedChatModel", "ScriptedRequest"]

_ERRORS_BY_STATUS: dict[int, type[ModelError]] = {
    400: ModelInvalidRequestError,
    401: ModelAuthenticationError,
    403: ModelPermissionDeniedError,
    404: ModelNotFoundError,
    429: ModelRateLimitError,
}


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    """The HTTP response a scripted error carries, as provider SDK errors carry theirs."""

    status_code: int
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """One call the scripted model received: the messages sent, the names of the tools bound,
    whether it was streamed, and the `tool_choice` bound with the tools (None when none was)."""

    messages: tuple[BaseMessage, ...]
    tool_names: tuple[str, ...]
    streamed: bool
    tool_choice: str | dict[str, Any] | None = None
    """The `tool_choice` the tools were bound with (`"none"`: declared, calling forbidden)."""

    @property
    def may_call_tools(self) -> bool:
        """Tools were bound, and calling them was not forbidden."""
        return bool(self.tool_names) and self.tool_choice != "none"


@dataclass(frozen=True, slots=True)
class _Turn:
    reply: ScriptedReply
    number: int
    """Which call this is, from 1: makes default call ids unique across the script."""


class ScriptedChatModel(BaseChatModel):
    """Replays `replies`, one per call, through `ainvoke`/`invoke` and `astream`/`stream`.

    Example:
        >>> model = ScriptedChatModel(replies=[ScriptedReply(text="Hello there")])
        >>> model.invoke("hi").content
        'Hello there'

    Running out of replies raises `ScriptExhaustedError`; the script never wraps around.

    Raises:
        ScriptExhaustedError: a call finds no reply left in its run's script.
        langchain_core.exceptions.ModelError: a reply scripted with `error` (a subclass by its
            `error_status`: 429 is `ModelRateLimitError`, ...); `ModelConnectionError` for a
            stream cut off by `cut_off_after_chunks`.

    With `replay_per_run=True` (what the `stub` provider uses) every run of an agent replays the
    script from its first reply, so one model serves any number of runs, concurrent ones each
    with its own replay; within a run it still never wraps around. A run that resumes a paused
    one (`cleveractors.approvals`), whose request already holds replies of the current turn,
    goes on after those replies, on whichever worker it runs. Calls made outside any run
    share one position, as without the option. `remaining` and `assert_consumed()` look at the
    run of the latest call.
    """

    replies: list[ScriptedReply]
    replay_per_run: bool = False

    _position: int = PrivateAttr(default=0)
    _latest_position: int = PrivateAttr(default=0)
    _run_positions: weakref.WeakKeyDictionary[RunScope, int] = PrivateAttr(
        default_factory=weakref.WeakKeyDictionary
    )
    _requests: list[ScriptedRequest] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "cleveractors-scripted"

    @property
    def requests(self) -> tuple[ScriptedRequest, ...]:
        """Every call received so far, in order."""
        return tuple(self._requests)

    @property
    def remaining(self) -> int:
        """Replies the latest call's run (or, outside runs, the script) has not used yet."""
        return len(self.replies) - self._latest_position

    def assert_consumed(self) -> None:
        """Fail when some scripted replies were never asked for.

        Raises:
            AssertionError: replies are left, naming how many.
        """
        if self.remaining:
            raise AssertionError(
                f"{self.remaining} of {len(self.replies)} scripted replies were not used"
            )

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    # -- blocking -------------------------------------------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = self._take_reply(messages, kwargs, streamed=False)
        time.sleep(turn.reply.chunk_delay_s)
        return self._result(turn, messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = self._take_reply(messages, kwargs, streamed=False)
        await asyncio.sleep(turn.reply.chunk_delay_s)
        return self._result(turn, messages)

    # -- streaming ------------------------------------------------------------------------------

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        turn = self._take_reply(messages, kwargs, streamed=True)
        for number, chunk in enumerate(self._chunks(turn, messages)):
            time.sleep(delay_before_chunk(turn.reply, number))
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        turn = self._take_reply(messages, kwargs, streamed=True)
        for number, chunk in enumerate(self._chunks(turn, messages)):
            await asyncio.sleep(delay_before_chunk(turn.reply, number))
            yield chunk

    # -- the script -----------------------------------------------------------------------------

    def _take_reply(
        self, messages: list[BaseMessage], options: dict[str, Any], *, streamed: bool
    ) -> _Turn:
        tool_names = tuple(tool["function"]["name"] for tool in options.get("tools") or ())
        scope = current_run_var.get() if self.replay_per_run else None
        with self._lock:
            self._requests.append(
                ScriptedRequest(tuple(messages), tool_names, streamed, options.get("tool_choice"))
            )
            position = (
                self._position
                if scope is None
                else self._run_positions.get(scope, _replies_in_turn(messages))
            )
            if position >= len(self.replies):
                raise ScriptExhaustedError(
                    f"scripted model has no reply left for call {position + 1} "
                    f"(the script has {len(self.replies)})"
                )
            reply = self.replies[position]
            number = position + 1
            self._latest_position = number
            if scope is None:
                self._position = number
            else:
                self._run_positions[scope] = number
        if reply.error is not None:
            raise _scripted_error(reply, reply.error)
        return _Turn(reply, number)

    @staticmethod
    def _call_id(turn: _Turn, index: int) -> str:
        scripted = turn.reply.tool_calls[index].id
        return scripted if scripted is not None else f"call_{turn.number}_{index}"

    def _usage(self, reply: ScriptedReply, messages: list[BaseMessage]) -> UsageMetadata:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = prompt_words(convert_to_openai_messages(messages))
        completion = reply.completion_tokens
        if completion is None:
            completion = completion_words(reply)
        usage = UsageMetadata(
            input_tokens=prompt, output_tokens=completion, total_tokens=prompt + completion
        )
        if reply.cache_read_tokens or reply.cache_write_tokens:
            usage["input_token_details"] = {
                "cache_read": reply.cache_read_tokens,
                "cache_creation": reply.cache_write_tokens,
            }
        if reply.reasoning_tokens:
            usage["output_token_details"] = {"reasoning": reply.reasoning_tokens}
        return usage

    def _result(self, turn: _Turn, messages: list[BaseMessage]) -> ChatResult:
        reply = turn.reply
        valid, invalid = [], []
        for index, call in enumerate(reply.tool_calls):
            call_id = self._call_id(turn, index)
            if isinstance(call.args, dict):
                valid.append(tool_call(name=call.name, args=dict(call.args), id=call_id))
            else:
                invalid.append(
                    invalid_tool_call(
                        name=call.name, args=call.args, id=call_id, error="invalid JSON"
                    )
                )
        message = AIMessage(
            content=reply.text,
            tool_calls=valid,
            invalid_tool_calls=invalid,
            usage_metadata=None if reply.omit_usage else self._usage(reply, messages),
            response_metadata=_reported_model(reply),
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _chunks(self, turn: _Turn, messages: list[BaseMessage]) -> Iterator[ChatGenerationChunk]:
        reply = turn.reply
        for sent, chunk in enumerate(self._content_chunks(turn)):
            if reply.cut_off_after_chunks is not None and sent >= reply.cut_off_after_chunks:
                raise ModelConnectionError(f"stream cut off after {sent} chunks")
            yield ChatGenerationChunk(message=chunk)
        usage = None if reply.omit_usage else self._usage(reply, messages)
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                usage_metadata=usage,
                response_metadata=_reported_model(reply),
                chunk_position="last",
            )
        )

    def _content_chunks(self, turn: _Turn) -> Iterator[AIMessageChunk]:
        reply = turn.reply
        for piece in text_pieces(reply.text):
            yield AIMessageChunk(content=piece)
        size = reply.args_chunk_size
        for index, call in enumerate(reply.tool_calls):
            arguments = call_arguments_text(call)
            yield AIMessageChunk(
                content="",
                tool_call_chunks=[
                    tool_call_chunk(
                        name=call.name,
                        args=arguments[:size],
                        id=self._call_id(turn, index),
                        index=index,
                    )
                ],
            )
            for start in range(size, len(arguments), size):
                yield AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        tool_call_chunk(args=arguments[start : start + size], index=index)
                    ],
                )


def _reported_model(reply: ScriptedReply) -> dict[str, Any]:
    return {} if reply.model_name is None else {"model_name": reply.model_name}


def _scripted_error(reply: ScriptedReply, message: str) -> ModelError:
    """The langchain-core error a provider integration raises for the scripted failure; with an
    HTTP status, it carries `status_code` and `response.headers` as the `openai` SDK's do."""
    status = reply.error_status
    if status is None:
        return ModelAPIError(message)
    kind = _ERRORS_BY_STATUS.get(status, ModelAPIError if status >= 500 else ModelError)
    error = kind(message)
    headers = {} if reply.retry_after is None else {"retry-after": reply.retry_after}
    # The attributes of the SDK errors that langchain-openai's errors subclass (mypy knows only
    # langchain-core's classes, which do not declare them).
    error.status_code = status  # type: ignore[attr-defined]  # as the SDK's errors carry it
    error.response = ScriptedResponse(status, headers)  # type: ignore[attr-defined]  # likewise
    if reply.error_type is not None:  # the SDK's `body`: the error object the API sent
        body = {"message": message, "type": reply.error_type, "code": reply.error_type}
        error.body = body  # type: ignore[attr-defined]  # likewise
    return error


def _replies_in_turn(messages: Sequence[BaseMessage]) -> int:
    """How many of the model's replies the request holds after the user's last message, or
    after the handoff that gave it the conversation: the script position a run starts from (0
    for a new message or a handoff; after the earlier rounds for a resumed run)."""
    replies = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage) or _is_handoff(message):
            break
        replies += isinstance(message, AIMessage)
    return replies


def _is_handoff(message: BaseMessage) -> bool:
    return isinstance(message, ToolMessage) and (message.name or "").startswith(HANDOFF_TOOL_PREFIX)
