"""cleveractors: run LLM agents with tools, blocking or streaming, and bill every token."""

import logging

from cleveractors.agents import (
    EventStream,
    FallbackModel,
    LLMAgent,
    LoopLimits,
    RetryPolicy,
    TextStream,
    ToolAgent,
)
from cleveractors.config import (
    ActorConfig,
    FallbackPolicy,
    LLMAgentConfig,
    McpServer,
    ToolConfig,
    load_actor_config,
)
from cleveractors.context import RunContext, RunUsage
from cleveractors.errors import (
    CleverActorsError,
    ConfigurationError,
    DepsMissingError,
    ExecutionError,
    GuardrailTripped,
    McpServerError,
    OutputValidationError,
    StreamStalledError,
    ToolExecutionError,
)
from cleveractors.executor import ActorExecutor
from cleveractors.guardrails import GuardrailInput, GuardrailResult, InputGuardrail, OutputGuardrail
from cleveractors.output import ModelRetry, OutputMode
from cleveractors.pricing import ModelPrices
from cleveractors.result import ErrorInfo, ExecutionResult, ResultCallback, ToolCallRecord
from cleveractors.tools import Tool, tool_from_callable
from cleveractors.turns import NewMessage, Resumption, Turn
from cleveractors.usage import LLMCallUsage, TokenUsage, last_token_usage_var

__all__ = [
    "ActorConfig",
    "ActorExecutor",
    "CleverActorsError",
    "ConfigurationError",
    "DepsMissingError",
    "ErrorInfo",
    "EventStream",
    "ExecutionError",
    "ExecutionResult",
    "FallbackModel",
    "FallbackPolicy",
    "GuardrailInput",
    "GuardrailResult",
    "GuardrailTripped",
    "InputGuardrail",
    "LLMAgent",
    "LLMAgentConfig",
    "LLMCallUsage",
    "LoopLimits",
    "McpServer",
    "McpServerError",
    "ModelPrices",
    "ModelRetry",
    "NewMessage",
    "OutputGuardrail",
    "OutputMode",
    "OutputValidationError",
    "ResultCallback",
    "Resumption",
    "RetryPolicy",
    "RunContext",
    "RunUsage",
    "StreamStalledError",
    "TextStream",
    "TokenUsage",
    "Tool",
    "ToolAgent",
    "ToolCallRecord",
    "ToolConfig",
    "ToolExecutionError",
    "Turn",
    "last_token_usage_var",
    "load_actor_config",
    "tool_from_callable",
]

# A library never decides where its log lines go: without this, Python's last-resort handler
# prints every WARNING (a failed tool call) of a script that configured no logging.
logging.getLogger("cleveractors").addHandler(logging.NullHandler())
