"""Every use of langchain-core's private API, each behind a function that says why we need it.

langchain-core may change a `_`-prefixed method in any release. Keeping every call here, and
pinning what we rely on in `features/langchain.private_api.feature`, turns such a change into
a failing test rather than a wrong bill or a rejected request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.runnables import Runnable, RunnableBinding

__all__ = ["TracedModel", "streams_inside_ainvoke", "traced_model"]


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
