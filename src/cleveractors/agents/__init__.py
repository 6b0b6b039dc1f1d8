"""Agents: `LLMAgent` (a chat model with tools) and `ToolAgent` (one tool call)."""

from cleveractors.agents._approval import ApprovalPolicy
from cleveractors.agents.base import Agent, History, ResultCallback
from cleveractors.agents.llm import FallbackModel, LLMAgent, LoopLimits, RetryPolicy
from cleveractors.agents.stream import EventStream, TextStream
from cleveractors.agents.tool import ToolAgent, ToolCallRequest, ToolOutcome

__all__ = [
    "Agent",
    "ApprovalPolicy",
    "EventStream",
    "FallbackModel",
    "History",
    "LLMAgent",
    "LoopLimits",
    "ResultCallback",
    "RetryPolicy",
    "TextStream",
    "ToolAgent",
    "ToolCallRequest",
    "ToolOutcome",
]
