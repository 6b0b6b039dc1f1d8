"""Every other provider: LangChain's own integration package, imported when a config names it.

The providers and class names are those of LangChain's `init_chat_model`, kept in a table here
rather than depending on the `langchain` package for that one function: `langchain` brings
LangGraph and more with it, while each integration is a package of its own, installed with the
extra its error message names.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr, ValidationError

from cleveractors.config import LLMAgentConfig
from cleveractors.errors import ConfigurationError
from cleveractors.providers._client import CLIENT_MAX_RETRIES

__all__ = ["INTEGRATIONS", "Integration", "make_integration_model", "read_api_key"]


@dataclass(frozen=True, slots=True)
class Integration:
    """Where a provider's chat model class lives, and what its settings are called."""

    module: str
    class_name: str
    package: str
    """The PyPI package to install."""
    extra: str | None
    """cleveractors' extra that installs `package`, when there is one."""
    key_env: str | None
    """The usual API key variable; None: the provider takes no API key (local, or cloud IAM)."""
    key_arg: str | None
    url_arg: str | None
    """The class's name for `base_url`; None: it has none."""
    has_client_options: bool = True
    """Takes `max_retries` and `timeout`."""

    @property
    def install_hint(self) -> str:
        if self.extra is not None:
            return f"pip install 'cleveractors[{self.extra}]'"
        return f"pip install {self.package}"


INTEGRATIONS: dict[str, Integration] = {
    "anthropic": Integration(
        "langchain_anthropic",
        "ChatAnthropic",
        "langchain-anthropic",
        "anthropic",
        "ANTHROPIC_API_KEY",
        "api_key",
        "base_url",
    ),
    "google_genai": Integration(
        "langchain_google_genai",
        "ChatGoogleGenerativeAI",
        "langchain-google-genai",
        "google",
        "GOOGLE_API_KEY",
        "google_api_key",
        None,
    ),
    "google_vertexai": Integration(
        "langchain_google_vertexai",
        "ChatVertexAI",
        "langchain-google-vertexai",
        None,
        None,
        None,
        None,
    ),
    "ollama": Integration(
        "langchain_ollama",
        "ChatOllama",
        "langchain-ollama",
        "ollama",
        None,
        None,
        "base_url",
        has_client_options=False,
    ),
    "azure_openai": Integration(
        "langchain_openai",
        "AzureChatOpenAI",
        "langchain-openai",
        None,
        "AZURE_OPENAI_API_KEY",
        "api_key",
        "azure_endpoint",
    ),
    "bedrock_converse": Integration(
        "langchain_aws",
        "ChatBedrockConverse",
        "langchain-aws",
        "bedrock",
        None,
        None,
        "endpoint_url",
        has_client_options=False,
    ),
    "mistralai": Integration(
        "langchain_mistralai",
        "ChatMistralAI",
        "langchain-mistralai",
        None,
        "MISTRAL_API_KEY",
        "api_key",
        "endpoint",
    ),
    "groq": Integration(
        "langchain_groq", "ChatGroq", "langchain-groq", None, "GROQ_API_KEY", "api_key", "base_url"
    ),
    "deepseek": Integration(
        "langchain_deepseek",
        "ChatDeepSeek",
        "langchain-deepseek",
        None,
        "DEEPSEEK_API_KEY",
        "api_key",
        "api_base",
    ),
    "xai": Integration(
        "langchain_xai", "ChatXAI", "langchain-xai", None, "XAI_API_KEY", "api_key", None
    ),
    "fireworks": Integration(
        "langchain_fireworks",
        "ChatFireworks",
        "langchain-fireworks",
        None,
        "FIREWORKS_API_KEY",
        "api_key",
        "base_url",
    ),
    "together": Integration(
        "langchain_together",
        "ChatTogether",
        "langchain-together",
        None,
        "TOGETHER_API_KEY",
        "api_key",
        "base_url",
    ),
}


def read_api_key(config: LLMAgentConfig, default_env: str) -> SecretStr:
    """The API key from `api_key_env` (or the provider's usual variable).

    Raises:
        ConfigurationError: the variable is not set. Its value never appears in messages.
    """
    variable = config.api_key_env or default_env
    api_key = os.environ.get(variable)
    if not api_key:
        raise ConfigurationError(
            f"agent.api_key_env: environment variable {variable!r} is not set "
            f"(provider {config.provider!r} needs an API key; any value works for a server "
            "that ignores it)"
        )
    return SecretStr(api_key)


def make_integration_model(config: LLMAgentConfig) -> BaseChatModel:
    """Build the chat model of a provider from `INTEGRATIONS`.

    Raises:
        ConfigurationError: its package is not installed (naming the extra), a setting it does
            not have is set, the API key variable is not set, or the class rejects an option.
    """
    integration = INTEGRATIONS[config.provider]
    # The config's own mistakes first: they are worth knowing before installing anything.
    options = {**_settings(config, integration), **_pass_through(config, integration)}
    model_class = _import_class(config.provider, integration)
    try:
        return model_class(**options)
    except ValidationError as exc:  # its text echoes the inputs, which may hold secrets
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ConfigurationError(
            f"agent.model_options: {integration.class_name} rejected the settings: {problems}"
        ) from None


def _import_class(provider: str, integration: Integration) -> type[BaseChatModel]:
    try:
        module = importlib.import_module(integration.module)
    except ImportError:
        raise ConfigurationError(
            f"agent.provider: provider {provider!r} needs the {integration.package} package: "
            f"{integration.install_hint}"
        ) from None
    model_class: type[BaseChatModel] = getattr(module, integration.class_name)
    return model_class


def _settings(config: LLMAgentConfig, integration: Integration) -> dict[str, Any]:
    settings: dict[str, Any] = {"model": config.model}
    if integration.key_arg is not None and integration.key_env is not None:
        settings[integration.key_arg] = read_api_key(config, integration.key_env)
    elif config.api_key_env is not None:
        raise ConfigurationError(
            f"agent.api_key_env: provider {config.provider!r} takes no API key "
            "(it authenticates its own way)"
        )
    if config.base_url is not None:
        if integration.url_arg is None:
            raise ConfigurationError(
                f"agent.base_url: provider {config.provider!r} has no base URL setting"
            )
        settings[integration.url_arg] = config.base_url
    if config.temperature is not None:
        settings["temperature"] = config.temperature
    if integration.has_client_options:
        settings["max_retries"] = CLIENT_MAX_RETRIES  # the loop retries, and bills each attempt
        if config.request_timeout_s is not None:
            settings["timeout"] = config.request_timeout_s
    return settings


CONFIG_OWNED_SETTINGS = frozenset(
    {"model", "temperature", "max_retries", "timeout", "stream_usage"}
)
"""Chat-model settings the agent's own fields decide, never `model_options`: above all the
client's retries, which must stay off so that every attempt is the loop's, seen and billed."""


def check_model_options(config: LLMAgentConfig, *, owned: frozenset[str]) -> dict[str, Any]:
    """`model_options`, refused where they set what the config's own fields set (`owned`).

    Raises:
        ConfigurationError: naming each clashing option.
    """
    clashes = sorted((CONFIG_OWNED_SETTINGS | owned) & config.model_options.keys())
    if clashes:
        raise ConfigurationError(
            f"agent.model_options: {', '.join(clashes)} must be set with the agent's own fields "
            "(model, api_key_env, base_url, temperature, max_retries, request_timeout_s)"
        )
    return dict(config.model_options)


def _pass_through(config: LLMAgentConfig, integration: Integration) -> dict[str, Any]:
    owned = frozenset(arg for arg in (integration.key_arg, integration.url_arg) if arg)
    return check_model_options(config, owned=owned)
