"""Typed answers: how an agent is asked for an object instead of text, and how a check of the
object asks the model again.

An `LLMAgent(output_type=...)` (or an actor file's `output_schema:`) answers with a validated
object, `ExecutionResult.output`. `OutputMode` says how the model is asked for it; an output
validator (a function, sync or async, taking the object) raises `ModelRetry` to send the model
a reason and ask again, within the agent's `output_retries`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

__all__ = ["OUTPUT_TOOL", "ModelRetry", "OutputMode", "OutputValidator"]

OUTPUT_TOOL = "final_result"
"""The output tool's name in `tool` mode: the model answers by calling it."""

OutputMode = Literal["auto", "native", "tool", "prompted"]
"""How the model is asked for the typed answer: `native`, the provider's structured output
(OpenAI's `response_format` `json_schema`, Anthropic's `output_config.format`); `tool`, an output
tool the model calls to answer; `prompted`, the schema in the system prompt; `auto`, `native`
where the model's LangChain profile says it supports structured output, else `tool`."""

OutputValidator = Callable[[Any], object | Awaitable[object]]
"""Takes the validated object; returns it (changed, if it likes) or None to keep it as it is,
or raises `ModelRetry` to ask the model again."""


class ModelRetry(Exception):
    """Raised by an output validator: the object is not acceptable, ask the model again.

    Args:
        reason: What is wrong, in words the model reads in the retry message.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
