"""Checks of what an agent built in code is given, made before anything is built from it."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from cleveractors.errors import ConfigurationError

__all__ = ["check_chat_model"]


def check_chat_model(model: object, *, agent_name: str) -> None:
    """Refuse anything but a LangChain chat model, naming what was given.

    Raises:
        ConfigurationError: `model` is not a `BaseChatModel`: a runnable made from one
            (`with_structured_output()`, `bind_tools()`, `bind()`), a model's name, or any
            other object. Without this check it fails later, deep in LangChain, with an
            `AttributeError` about a private method.
    """
    if isinstance(model, BaseChatModel):
        return
    kind = type(model)
    given = f"{kind.__module__}.{kind.__qualname__}"
    message = (
        f"agent {agent_name!r}: model must be a LangChain chat model (a BaseChatModel, such as "
        f"ChatOpenAI or ChatAnthropic), not {given}"
    )
    if isinstance(model, Runnable):
        message += (
            "; with_structured_output(), bind_tools() and bind() return runnables the agent "
            "cannot drive: pass the chat model itself (the agent binds its own tools)"
        )
    elif isinstance(model, str):
        message += f"; to use the model {model!r}, build its chat model, e.g. ChatOpenAI(model=...)"
    raise ConfigurationError(message)
