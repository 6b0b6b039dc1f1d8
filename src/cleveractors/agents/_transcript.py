"""The transcript of one run: the messages the model reads, and where this turn's begin.

It opens with the system prompt, the history and the user's message; each round appends the
model's reply with tool calls and one tool message per call. The turn (the user's message
onwards, with the answer) is what a session stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from cleveractors.agents.base import History
from cleveractors.errors import ConfigurationError

__all__ = ["Transcript"]


class Transcript:
    """The messages of one run. Made per run, never shared.

    Attributes:
        messages: Everything the model is sent next, in order.
        user_message: The text of the user's message that began the turn.
    """

    __slots__ = ("_turn_start", "messages", "user_message")

    def __init__(
        self, messages: Iterable[BaseMessage] = (), *, user_message: str = "", turn_start: int = 0
    ) -> None:
        self.messages = list(messages)
        self.user_message = user_message
        self._turn_start = turn_start
        """Where this turn's messages begin in `messages` (the user's message)."""

    @classmethod
    def of(cls, message: str, history: History | None, *, system_prompt: str | None) -> Transcript:
        """The transcript a run begins with.

        Raises:
            ConfigurationError: the message is not a non-empty string, or the history is not a
                list of chat turns.
        """
        if not isinstance(message, str) or not message.strip():
            raise ConfigurationError(f"message must be a non-empty string, got {message!r}")
        if isinstance(history, (str, bytes, Mapping)) or not isinstance(history, Iterable | None):
            raise ConfigurationError(
                f"history must be a list of chat turns, got {type(history).__name__}"
            )
        messages: list[BaseMessage] = []
        if system_prompt:
            messages.append(SystemMessage(system_prompt))
        for position, turn in enumerate(history or ()):
            try:
                messages.extend(convert_to_messages([turn]))
            except (ValueError, TypeError, NotImplementedError) as exc:
                raise ConfigurationError(f"history[{position}] is not a chat turn: {exc}") from None
        messages.append(HumanMessage(message))
        return cls(messages, user_message=message, turn_start=len(messages) - 1)

    @property
    def holds_tool_calls(self) -> bool:
        """Whether any message is a tool call or its answer (which providers accept only while
        the request declares tools)."""
        return any(
            isinstance(message, ToolMessage)
            or (
                isinstance(message, AIMessage)
                and bool(message.tool_calls or message.invalid_tool_calls)
            )
            for message in self.messages
        )

    def append(self, message: BaseMessage) -> None:
        self.messages.append(message)

    def turn(self, answer: AIMessage) -> tuple[BaseMessage, ...]:
        """The turn as a session stores it: the user's message, tool calls and results, answer."""
        return (*self.messages[self._turn_start :], answer)
