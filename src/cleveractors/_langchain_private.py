"""Every use of langchain-core's (and the openai SDK's) private API, each behind a function that
says why we need it.

langchain-core may change a `_`-prefixed method in any release. Keeping every call here, and
pinning what we rely on in `features/langchain.private_api.feature`, turns such a change into
a failing test rather than a wrong bill or a rejected request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, cast
from uuid import uuid4

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.globals import get_llm_cache
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models._utils import _normalize_messages
from langchain_core.language_models.chat_models import _gen_info_and_msg_metadata
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.runnables.config import ensure_config
from langchain_core.utils.utils import LC_ID_PREFIX
from openai import AsyncStream

__all__ = [
    "ChunksAsSent",
    "TracedModel",
    "invoke_reply",
    "stream_reply",
    "streams_inside_ainvoke",
    "traced_model",
]


@dataclass(frozen=True, slots=True)
class TracedModel:
    """What a chat model says it is, by LangChain's tracing parameters."""

    provider: str | None
    """`ls_provider`, e.g. `openai`, `anthropic`, `amazon_bedrock`."""
    model: str | None
    """`ls_model_name`, the model as configured."""


def traced_model(model: BaseChatModel) -> TracedModel:
    """The provider and model name a chat model is traced under.

    Needed for an agent built in code and given no provider: no public attribute names the
    provider of every integration (the class does, by convention only), while
    `BaseChatModel._get_ls_params()` is what each integration overrides to fill in its
    `ls_provider` and `ls_model_name` for LangSmith.
    """
    traced = model._get_ls_params()
    return TracedModel(provider=traced.get("ls_provider"), model=traced.get("ls_model_name"))


def streams_inside_ainvoke(model: BaseChatModel, bound: Runnable[LanguageModelInput, Any]) -> bool:
    """Whether `ainvoke` on `bound` (the model, or the model with options bound) would stream
    the reply and fold the chunks itself.

    Needed because langchain-core's fold would then make the reply, not ours: it repairs broken
    tool arguments and bills nothing for a cut-off stream. `BaseChatModel._should_stream` is the
    test `ainvoke` itself applies (a model built with `streaming=True`, unless
    `disable_streaming` says otherwise for these options); no public method answers it.
    """
    options = bound.kwargs if isinstance(bound, RunnableBinding) else {}
    return model._should_stream(async_api=True, **options)


# -- calling a chat model with nothing listening -------------------------------------------------
#
# `ainvoke` and `astream` wrap the integration's `_agenerate` / `_astream` in LangChain's
# callback machinery: a callback manager, a run for tracing, the request formatted for tracers,
# and (for `astream`) every chunk of the reply kept in a list, to hand the whole reply to
# `on_llm_end`. When no handler would receive any of it (no callbacks on the model or in the
# context, no LangSmith tracing, no debug or verbose output), that work has no reader: the
# functions below call the integration directly and apply only what `ainvoke`/`astream` do to
# the reply itself (its id when the provider gave none, `generation_info` merged into
# `response_metadata`, the closing chunk). Anything else (a handler, a cache, v1 output,
# options bound through another wrapper) takes the public path unchanged.


@dataclass(frozen=True, slots=True)
class _DirectCall:
    model: BaseChatModel
    options: dict[str, Any]


def _direct_call(bound: Runnable[LanguageModelInput, Any], public: str) -> _DirectCall | None:
    """The chat model and options to call directly, or None when the public path is needed
    (also when the model's class overrides the `public` method itself: it is then called)."""
    if isinstance(bound, RunnableBinding):
        if bound.config or bound.config_factories:
            return None
        model, options = bound.bound, dict(bound.kwargs)
    else:
        model, options = bound, {}
    if not isinstance(model, BaseChatModel) or model.output_version == "v1":
        return None
    if getattr(type(model), public) is not getattr(BaseChatModel, public):
        return None
    if options.pop("stop", None) is not None:
        return None
    options.pop("ls_structured_output_format", None)
    options.pop("structured_output_format", None)
    if _has_listeners(model):
        return None
    return _DirectCall(model, options)


def _has_listeners(model: BaseChatModel) -> bool:
    """Whether any callback handler would see a call of `model` made here (the context's
    callbacks, the model's own, LangSmith tracing, global debug or verbose output). Tags and
    metadata are left out: they label a call's handlers and add none."""
    manager = AsyncCallbackManager.configure(
        ensure_config().get("callbacks"), model.callbacks, model.verbose
    )
    return bool(manager.handlers)


def _run_id() -> str:
    return f"{LC_ID_PREFIX}-{uuid4()}"


async def invoke_reply(
    bound: Runnable[LanguageModelInput, Any], messages: Sequence[BaseMessage]
) -> AIMessage:
    """`bound.ainvoke(messages)`, without the callback machinery when nothing listens.

    Needed for the cost of a blocking call: `ainvoke` builds a callback manager, a traced copy
    of the request and a task per call even with no handler. Calls the integration's private
    `_agenerate` (what `ainvoke` ends in) when the model has no cache, does not stream inside
    `ainvoke` and nothing listens; else `ainvoke` itself.
    """
    call = _direct_call(bound, "ainvoke")
    if (
        call is None
        or not _is_uncached(call.model)
        or call.model._should_stream(async_api=True, **call.options)
    ):
        return cast(AIMessage, await bound.ainvoke(list(messages)))
    model = call.model
    if model.rate_limiter is not None:
        await model.rate_limiter.aacquire(blocking=True)
    result = await model._agenerate(_normalize_messages(list(messages)), **call.options)
    generation = result.generations[0]
    message = generation.message
    if message.id is None:
        message.id = f"{_run_id()}-0"
    message.response_metadata = _gen_info_and_msg_metadata(generation)
    if len(result.generations) == 1 and result.llm_output is not None:
        message.response_metadata = {**result.llm_output, **message.response_metadata}
    return cast(AIMessage, message)


def _is_uncached(model: BaseChatModel) -> bool:
    return model.cache is False or (model.cache is None and get_llm_cache() is None)


async def stream_reply(
    bound: Runnable[LanguageModelInput, Any], messages: Sequence[BaseMessage]
) -> AsyncIterator[BaseMessage]:
    """`bound.astream(messages)`, without the callback machinery when nothing listens.

    Needed for the memory of a stream: `astream` keeps every chunk of the reply in a list (for
    `on_llm_end`) until the stream ends, so a stream's memory would grow with its answer
    whatever our fold does. Reads the integration's private `_astream` (what `astream` ends in)
    when it streams and nothing listens, each chunk finished as `astream` finishes it and
    nothing kept; else `astream` itself.
    """
    call = _direct_call(bound, "astream")
    if call is None or not call.model._should_stream(
        async_api=True, **{**call.options, "stream": True}
    ):
        async for piece in bound.astream(list(messages)):
            yield piece
        return
    model = call.model
    if model.rate_limiter is not None:
        await model.rate_limiter.aacquire(blocking=True)
    run_id = _run_id()
    last: AIMessageChunk | None = None
    async for chunk in model._astream(_normalize_messages(list(messages)), **call.options):
        message = chunk.message
        if message.id is None:
            message.id = run_id
        message.response_metadata = _gen_info_and_msg_metadata(chunk)
        last = cast(AIMessageChunk, message)
        yield last
    if isinstance(last, AIMessageChunk) and not last.chunk_position:
        empty: str | list[str | dict[str, Any]] = "" if isinstance(last.content, str) else []
        yield AIMessageChunk(content=empty, chunk_position="last", id=run_id)


# -- the openai SDK's streamed chunks, as the server sent them -----------------------------------


class ChunksAsSent:
    """An openai `chat.completions` resource whose streams yield each chunk as the JSON object
    the server sent (a dict), not as a `ChatCompletionChunk`; everything else is the resource's.

    Needed for the cost of a streamed call through `ChatOpenAI`: the SDK builds a
    `ChatCompletionChunk` model per chunk (the largest single cost of a streamed turn) and
    langchain-openai turns it straight back into a dict (`model_dump()`) to read it. Given a dict,
    langchain-openai reads it as it is. The SDK's `AsyncStream` decides what a chunk becomes by
    its private `_cast_to`, read when iteration starts; `object` means the JSON as it is (its own
    rule for undocumented endpoints). Server errors inside the stream are raised as before.
    """

    __slots__ = ("_completions",)

    def __init__(self, completions: Any) -> None:
        self._completions = completions

    def __getattr__(self, name: str) -> Any:
        if name == "_completions":  # a copy made without __init__ (copy, pickle)
            raise AttributeError(name)
        return getattr(self._completions, name)

    async def create(self, **params: Any) -> Any:
        """`create(**params)`; a stream it returns yields dicts."""
        response = await self._completions.create(**params)
        if isinstance(response, AsyncStream) and "_cast_to" in vars(response):
            response._cast_to = object
        return response
