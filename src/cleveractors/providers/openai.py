"""The `openai` provider: langchain-openai's `ChatOpenAI`, for OpenAI or any compatible server."""

from __future__ import annotations

import os

from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from cleveractors.config import LLMAgentConfig
from cleveractors.errors import ConfigurationError
from cleveractors.providers._client import CLIENT_MAX_RETRIES

__all__ = ["make_openai_model"]


def make_openai_model(config: LLMAgentConfig) -> ChatOpenAI:
    """Build `ChatOpenAI` from an agent config, reading the API key from `api_key_env`.

    The client never retries (`CLIENT_MAX_RETRIES`): the loop does, per config `max_retries`.

    Raises:
        ConfigurationError: the API key variable is not set. Its value never appears in messages.
    """
    api_key = os.environ.get(config.api_key_env)
    if not api_key:
        raise ConfigurationError(
            f"agent.api_key_env: environment variable {config.api_key_env!r} is not set "
            "(provider 'openai' needs an API key; any value works for a server that ignores it)"
        )
    return ChatOpenAI(
        model=config.model,
        base_url=config.base_url,
        api_key=SecretStr(api_key),
        temperature=config.temperature,
        max_retries=CLIENT_MAX_RETRIES,
        timeout=config.request_timeout_s,
        # ChatOpenAI asks for streamed usage only on OpenAI's own URL; without this every other
        # OpenAI-compatible server would bill zero tokens for streamed calls.
        stream_usage=True,
    )
