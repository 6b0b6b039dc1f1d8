"""The `openai` provider: langchain-openai's `ChatOpenAI`, for OpenAI or any compatible server."""

from __future__ import annotations

from langchain_openai import ChatOpenAI

from cleveractors.config import LLMAgentConfig
from cleveractors.providers._client import CLIENT_MAX_RETRIES
from cleveractors.providers.integrations import check_model_options, read_api_key

__all__ = ["make_openai_model"]


def make_openai_model(config: LLMAgentConfig) -> ChatOpenAI:
    """Build `ChatOpenAI` from an agent config, reading the API key from `api_key_env`
    (default `OPENAI_API_KEY`); `model_options` are passed through.

    The client never retries (`CLIENT_MAX_RETRIES`): the loop does, per config `max_retries`.

    Raises:
        ConfigurationError: the API key variable is not set (its value never appears in
            messages), or `model_options` sets what the agent's own fields set.
    """
    api_key = read_api_key(config, "OPENAI_API_KEY")
    options = check_model_options(config, owned=frozenset({"base_url", "api_key"}))
    return ChatOpenAI(
        **options,
        model=config.model,
        base_url=config.base_url,
        api_key=api_key,
        temperature=config.temperature,
        max_retries=CLIENT_MAX_RETRIES,
        timeout=config.request_timeout_s,
        # ChatOpenAI asks for streamed usage only on OpenAI's own URL; without this every other
        # OpenAI-compatible server would bill zero tokens for streamed calls.
        stream_usage=True,
    )
