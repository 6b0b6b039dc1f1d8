"""`make_chat_model(config)`: the only place that knows which provider builds which chat model."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from cleveractors.config import LLMAgentConfig
from cleveractors.errors import ConfigurationError

__all__ = ["make_chat_model", "make_fallback_models"]


def make_chat_model(config: LLMAgentConfig) -> BaseChatModel:
    """Build the chat model an agent config names.

    Raises:
        ConfigurationError: the provider's settings are incomplete (e.g. the API key variable is
            not set), or its integration package is not installed (naming the extra).
    """
    match config.provider:
        case "openai":
            from cleveractors.providers.openai import make_openai_model

            return make_openai_model(config)
        case "stub":
            from cleveractors.providers.stub import make_stub_model

            return make_stub_model(config)
        case _:
            from cleveractors.providers.integrations import make_integration_model

            return make_integration_model(config)


def make_fallback_models(config: LLMAgentConfig) -> tuple[BaseChatModel, ...]:
    """Build the chat model of each of the agent's `fallback_models`, in order, each as the
    agent's own is built (its client's retries off: the loop retries and bills each attempt).

    Raises:
        ConfigurationError: a fallback's provider settings are incomplete or its package is
            missing, named by its position (`agent.fallback_models.1: ...`).
    """
    models: list[BaseChatModel] = []
    for position, fallback in enumerate(config.fallback_models):
        try:
            models.append(make_chat_model(config.with_fallback(fallback)))
        except ConfigurationError as exc:
            problem = str(exc).removeprefix("agent.")
            raise ConfigurationError(f"agent.fallback_models.{position}.{problem}") from None
    return tuple(models)
