"""`Agent`: what an executor can run, blocking or streaming."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage

from cleveractors.agents.stream import EventStream
from cleveractors.result import ExecutionResult

__all__ = ["Agent", "History", "ResultCallback"]

History = Sequence[BaseMessage | dict[str, object]]
"""Prior chat turns: LangChain messages, or `{"role": ..., "content": ...}` dicts."""

ResultCallback = Callable[[ExecutionResult], None]
"""Called once per run with its final result, also when the run failed or was cancelled."""


class Agent(ABC):
    """Runs one user message to an answer."""

    name: str

    @abstractmethod
    async def process_message(
        self,
        message: str,
        *,
        history: History | None = None,
        on_result: ResultCallback | None = None,
    ) -> ExecutionResult:
        """Run the message to its answer; on failure, record the usage, then raise the cause."""

    async def aopen(self) -> None:  # noqa: B027 (a hook: most agents hold nothing to open)
        """Acquire what the agent holds for its life (e.g. MCP sessions); a no-op by default."""

    async def aclose(self) -> None:  # noqa: B027 (a hook: most agents hold nothing to close)
        """Release what `aopen()` or a run acquired; a no-op by default."""

    @abstractmethod
    def stream_message(
        self,
        message: str,
        *,
        history: History | None = None,
        on_result: ResultCallback | None = None,
    ) -> EventStream:
        """Run the message, yielding its events as they happen."""
