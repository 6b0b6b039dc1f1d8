"""`make_chat_model(config)`: the only place that knows which provider builds which chat model."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from cleveractors.config import LLMAgentConfig

__all__ = ["make_chat_model"]


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
