"""What a chat span says about its call, read from LangChain's objects: the provider's name as
the conventions spell it, the server the calls go to, the usage and the reply's id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry.trace import Span

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

    from cleveractors.usage import LLMCallUsage

__all__ = ["gen_ai_provider", "reply_id", "server_of", "set_usage"]

# LangChain's provider names where the conventions spell them otherwise.
_PROVIDER_NAMES = {
    "google_genai": "gcp.gen_ai",
    "google_vertexai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "azure_openai": "azure.ai.openai",
    "mistralai": "mistral_ai",
}


def gen_ai_provider(provider: str) -> str:
    """`gen_ai.provider.name` of a LangChain provider name."""
    return _PROVIDER_NAMES.get(provider, provider)


# Where LangChain's integrations keep the URL they send to, and their default when unset.
_BASE_URL_FIELDS = ("openai_api_base", "anthropic_api_url", "base_url")
_DEFAULT_URLS = {
    "ChatOpenAI": "https://api.openai.com",
    "ChatAnthropic": "https://api.anthropic.com",
}


def server_of(chat_model: object) -> tuple[str, int] | None:
    """The host and port a chat model's calls go to, when its integration says."""
    url: object = None
    for field in _BASE_URL_FIELDS:
        url = getattr(chat_model, field, None)
        if url:
            break
    if not url:
        url = _DEFAULT_URLS.get(type(chat_model).__name__)
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


def set_usage(span: Span, record: LLMCallUsage) -> None:
    usage = record.usage
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)
    span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens)
    span.set_attribute("cleveractors.usage.estimated", usage.estimated)
    if record.cost_usd is not None:
        span.set_attribute("cleveractors.cost.usd", float(record.cost_usd))


def reply_id(reply: AIMessage | None, metadata: Mapping[str, Any]) -> str | None:
    """The provider's id of the reply: in its metadata (a whole reply), or as the message's id
    (a streamed one: the chunks carry it). Never one LangChain made up (`run-...`, `lc_...`)."""
    candidate = metadata.get("id")
    if not isinstance(candidate, str) or not candidate:
        candidate = None if reply is None else reply.id
    if not candidate or candidate.startswith(("run-", "lc_")):
        return None
    return candidate
