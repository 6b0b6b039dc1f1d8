"""The chat model as the loop runs it: any integration, with the switches the loop relies on set.

An agent is given a ready `BaseChatModel`; these copies (which share the model's clients) only
turn on what billing needs and turn off what the loop does itself.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from openai.resources.chat.completions import AsyncCompletions

from cleveractors._langchain_private import ChunksAsSent

__all__ = ["prepared_model"]


def prepared_model(model: BaseChatModel, *, has_stall_limit: bool) -> BaseChatModel:
    """`model` with streamed usage requested, and, when the loop watches streams for stalls
    (`has_stall_limit`), its client's own per-chunk timeout off."""
    model = _with_chunks_as_sent(_with_streamed_usage(model))
    return _without_client_chunk_timeout(model) if has_stall_limit else model


def _with_chunks_as_sent(model: BaseChatModel) -> BaseChatModel:
    """The model reading streamed chunks as the server's JSON, where its client is the openai
    SDK's (`ChatOpenAI`, `AzureChatOpenAI`): the SDK would build a model object per chunk that
    the integration only turns back into a dict. The same dicts, at a fraction of the cost."""
    client = getattr(model, "async_client", None)
    if "async_client" in type(model).model_fields and isinstance(client, AsyncCompletions):
        return model.model_copy(update={"async_client": ChunksAsSent(client)})
    return model


def _with_streamed_usage(model: BaseChatModel) -> BaseChatModel:
    """The model with streamed usage requested. Integrations with a `stream_usage` switch
    (ChatOpenAI, AzureChatOpenAI, ChatAnthropic, ...) may leave it off: ChatOpenAI turns it on only
    for OpenAI's own URL, so a model built in code for another server would bill streamed calls
    by estimate only. A copy shares the model's clients."""
    if (
        "stream_usage" in type(model).model_fields
        and getattr(model, "stream_usage", None) is not True
    ):
        return model.model_copy(update={"stream_usage": True})
    return model


def _without_client_chunk_timeout(model: BaseChatModel) -> BaseChatModel:
    """The model with its client's per-chunk stream timeout off, where it has one
    (`ChatOpenAI`, `AzureChatOpenAI`): the loop's stall limit gives the same protection with
    one timer per call, where the client's reads each chunk through `asyncio.wait_for` (a task
    per chunk on Python 3.11)."""
    if (
        "stream_chunk_timeout" in type(model).model_fields
        and getattr(model, "stream_chunk_timeout", None) is not None
    ):
        return model.model_copy(update={"stream_chunk_timeout": None})
    return model
