"""Chat models of the test tree for issue 7: how a model streams changes nothing in the loop.

- `StreamingScriptedChatModel`: `ScriptedChatModel` with the `streaming` field ChatOpenAI and
  ChatAnthropic have. Set, `ainvoke` streams and langchain-core folds the chunks itself
  (leniently repairing broken tool arguments, and billing nothing for a cut-off stream). It can
  also pose as another provider (`ls_provider`) or refuse any `tool_choice`.
- `ShapedChatModel`: streams each reply the way a provider's integration does (`fold_shapes`),
  answers `ainvoke` with what langchain-core makes of the same chunks (the provider's own
  `AIMessage`), records the messages of every request, and can break a stream off.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import ModelConnectionError
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.chat_models import LangSmithParams, generate_from_stream
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from cleveractors import ActorExecutor, LLMAgent
from cleveractors.config import load_actor_config
from cleveractors.testing import ScriptedChatModel
from support.fold_shapes import ReplySpec, Shape, integration_chunks


class StreamingScriptedChatModel(ScriptedChatModel):
    streaming: bool = False
    provider: str | None = None
    """Traced under this provider's name (`ls_provider`), so the loop speaks its tool_choice."""
    refuses_tool_choice: bool = False
    """`bind_tools` raises on any `tool_choice`, as some integrations do."""

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        if self.provider is not None:
            params["ls_provider"] = self.provider
        return params

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        if tool_choice is not None and self.refuses_tool_choice:
            raise NotImplementedError("tool_choice is not supported by this model")
        return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)


def executor_with_model(actor: dict[str, Any], settings: dict[str, Any]) -> ActorExecutor:
    """The executor of the actor config `actor`, around a `StreamingScriptedChatModel` built
    with `settings` (such as `disable_streaming=True`) replaying the config's script."""
    config = load_actor_config(actor)
    model = StreamingScriptedChatModel(replies=list(config.agent.script or ()), **settings)
    return ActorExecutor(LLMAgent.from_config(config.agent, model=model, name=config.name))


class ShapedChatModel(BaseChatModel):
    replies: list[ReplySpec]
    shape: Shape = "anthropic"
    cut_off_after_chunks: int | None = None
    """Every streamed reply breaks off after this many chunks, as a dropped connection does."""

    _position: int = PrivateAttr(default=0)
    _requests: list[tuple[BaseMessage, ...]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "cleveractors-shaped"

    @property
    def requests(self) -> tuple[tuple[BaseMessage, ...], ...]:
        return tuple(self._requests)

    def reply_chunks(self, number: int) -> list[AIMessageChunk]:
        """Reply `number` (from 1) as the integration streams it. Every chunk carries the
        provider's message id, so that two runs of one script compare equal."""
        made = integration_chunks(self.replies[number - 1], self.shape)
        for chunk in made:
            chunk.id = f"msg_0{number}"
        return made

    def provider_reply(self, number: int) -> AIMessage:
        """Reply `number` as `ainvoke` returns it."""
        chunks = (ChatGenerationChunk(message=chunk) for chunk in self.reply_chunks(number))
        message = generate_from_stream(chunks).generations[0].message
        assert isinstance(message, AIMessage)
        return message

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _take(self, messages: list[BaseMessage]) -> int:
        self._requests.append(tuple(messages))
        self._position += 1
        return self._position

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        number = self._take(messages)
        chunks = (ChatGenerationChunk(message=chunk) for chunk in self.reply_chunks(number))
        return generate_from_stream(chunks)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        number = self._take(messages)
        for sent, chunk in enumerate(self.reply_chunks(number)):
            if sent == self.cut_off_after_chunks:
                raise ModelConnectionError(f"stream cut off after {sent} chunks")
            yield ChatGenerationChunk(message=chunk)
