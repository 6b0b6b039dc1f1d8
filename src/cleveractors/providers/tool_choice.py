"""Declaring tools while forbidding the model to call them, in each provider's own words.

The synthesis request (answer now, from what the tools returned) must still declare the tools
whenever the transcript holds tool calls: Bedrock and Anthropic reject a request whose messages
hold tool blocks but which declares no tools. Forbidding calls is spelled differently per
provider, and some cannot say it at all.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.runnables import Runnable

__all__ = ["bind_tools_forbidding_calls"]

logger = logging.getLogger(__name__)

ToolChoice = str | dict[str, str]

_NO_CALLS = "none"
"""OpenAI (Chat Completions and Responses), Gemini, Mistral, Groq and most others."""

_NO_CALLS_BY_PROVIDER: Mapping[str, ToolChoice | None] = {
    # ChatAnthropic reads any other string as a tool name; the API's own form is a dict.
    "anthropic": {"type": "none"},
    # The Bedrock Converse API has no "none" (only auto, any, tool): declare the tools only.
    # ChatBedrockConverse is traced as `amazon_bedrock`; an actor config names it
    # `bedrock_converse` (init_chat_model's name), and `bedrock` is the older integration.
    "amazon_bedrock": None,
    "bedrock_converse": None,
    "bedrock": None,
}


def bind_tools_forbidding_calls(
    model: BaseChatModel, tools: Sequence[dict[str, Any]], *, provider: str | None
) -> Runnable[LanguageModelInput, Any]:
    """`model` with `tools` declared and calling them forbidden where the provider can say so.

    `provider` is LangChain's name of the provider the model speaks to, as the agent resolved it
    once for its prices too. A model whose `bind_tools` rejects the choice gets the tools
    declared without it; a call it makes anyway is for the caller to ignore.
    """
    choice = _NO_CALLS_BY_PROVIDER.get((provider or "").lower(), _NO_CALLS)
    if choice is None:
        return model.bind_tools(tools)
    try:
        # BaseChatModel types tool_choice as a string; integrations (ChatAnthropic) take dicts.
        return model.bind_tools(tools, tool_choice=choice)  # type: ignore[arg-type]  # a dict
    except (NotImplementedError, TypeError, ValueError) as exc:
        logger.info(
            "%s does not accept tool_choice=%r (%s); its synthesis requests declare the tools "
            "without forbidding calls",
            type(model).__name__,
            choice,
            exc,
        )
        return model.bind_tools(tools)
