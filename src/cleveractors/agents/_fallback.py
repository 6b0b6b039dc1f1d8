"""Fallback models: when the agent's model fails, the next one takes over the same call.

An agent's models form a `ModelChain`: its own model first, then its fallbacks in order. A call
goes to the run's current model with that model's retries (`_retry`); when they are spent, or at
once on an error the `FallbackPolicy` lists as immediate, and only when none of that call's
text reached the caller, the next model is asked the same thing (`call_with_fallbacks`). Every
attempt is billed at its own model's prices (the bill is told which model each call went to).

The transcript a model reads is made valid for its provider (`ModelChain.messages_for`): a
reply another provider wrote loses its provider-specific blocks (Anthropic `thinking` and
`redacted_thinking`, OpenAI reasoning items) and keeps its text and its tool calls, ids and all.
A reply says which model wrote it in its `response_metadata` (`MODEL_KEY`): the run, and with
`sticky: session` the session's next runs, start on the model that answered last.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable

from cleveractors._otel_attributes import server_of
from cleveractors.agents._checks import check_chat_model
from cleveractors.agents._loop import _Run
from cleveractors.agents._model import prepared_model
from cleveractors.agents._prompt_cache import PromptCaching
from cleveractors.agents._retry import MovingOn, RetryPolicy, call_with_retries
from cleveractors.agents._toolset import ToolSet
from cleveractors.config import (
    FallbackPolicy,
    ImmediateFallback,
    PromptCacheMode,
    PromptCacheTTL,
)
from cleveractors.errors import ConfigurationError, describe_failure, http_status
from cleveractors.events import ModelFellBack
from cleveractors.pricing import CallPricer, ModelPrices
from cleveractors.providers.tool_choice import bind_tools_forbidding_calls

__all__ = [
    "MODEL_KEY",
    "Binding",
    "FallbackModel",
    "ModelChain",
    "ModelChoice",
    "call_with_fallbacks",
    "error_code",
]

MODEL_KEY = "cleveractors_model"
"""The `response_metadata` key of a reply of an agent with fallbacks: `provider:model` of the
model that wrote it (kept with the session's turns, which is how `sticky: session` knows)."""

Binding = Literal["tools", "declaring_tools", "plain"]
"""How a call binds the agent's tools: bound (a round), declared with calls forbidden (a
synthesis over a transcript with tool calls), or not at all."""


@dataclass(frozen=True, slots=True)
class FallbackModel:
    """A model that takes over when the agent's model (or the fallback before it) fails.

    Attributes:
        model: Any LangChain chat model. Turn its client's own retries off (e.g.
            `ChatAnthropic(max_retries=0)`) so that every attempt is the loop's, seen and billed.
        provider: LangChain's provider name, for records, prices and the synthesis request's
            words; read from the model when omitted.
        model_name: The model's name for records and prices; read from the model when omitted.
        pricing: Your own prices for it, instead of genai-prices' table.
        retry: The loop's retries of its calls; by default the agent's `retry`.
    """

    model: BaseChatModel
    provider: str | None = None
    model_name: str | None = None
    pricing: ModelPrices | None = None
    retry: RetryPolicy | None = None


@dataclass(slots=True)
class ModelChoice:
    """One of the agent's models as the loop runs it: prepared, named, priced, with its retries."""

    position: int
    """0 for the agent's own model, then its fallbacks in order."""
    model: BaseChatModel
    pricer: CallPricer
    retry: RetryPolicy
    caching: PromptCaching
    """What its requests ask its provider to cache."""
    server: tuple[str, int] | None = None
    """Where a fallback's calls go, for its spans (the agent's own model's is the tracer's)."""
    _bound_for: Mapping[str, Any] | None = field(default=None, init=False, repr=False)
    """The tools the fallback's bindings were made for (the tool set's dict, replaced on change)."""
    _bound: tuple[Runnable[LanguageModelInput, Any], Runnable[LanguageModelInput, Any]] | None = (
        field(default=None, init=False, repr=False)
    )

    @property
    def key(self) -> str:
        """`provider:model`, as a reply it wrote is marked."""
        return f"{self.pricer.provider}:{self.pricer.model}"

    def bound(self, binding: Binding, toolset: ToolSet) -> Runnable[LanguageModelInput, Any]:
        """The model with the agent's current tools bound as `binding` says. The agent's own
        model uses the tool set's binding; a fallback binds once per version of the tools."""
        if binding == "plain" or not toolset.tools:
            return self.model
        if self.position == 0:
            if binding == "tools":
                return toolset.model_with_tools
            return toolset.model_declaring_tools
        if self._bound is None or self._bound_for is not toolset.tools:
            schemas = self.caching.tool_schemas(
                [tool.openai_schema() for tool in toolset.tools.values()]
            )
            provider = self.pricer.provider
            self._bound = (
                self.model.bind_tools(schemas),
                bind_tools_forbidding_calls(self.model, schemas, provider=provider),
            )
            self._bound_for = toolset.tools
        return self._bound[0] if binding == "tools" else self._bound[1]


@dataclass(frozen=True, slots=True)
class ModelChain:
    """The agent's models in the order they take over, and when they do."""

    choices: tuple[ModelChoice, ...]
    policy: FallbackPolicy = field(default_factory=FallbackPolicy)

    @classmethod
    def of(
        cls,
        models: Sequence[BaseChatModel | FallbackModel],
        policy: FallbackPolicy,
        *,
        agent_name: str,
        retry: RetryPolicy,
        has_stall_limit: bool,
        needs_price: bool,
        prompt_cache: PromptCacheMode = "auto",
        prompt_cache_ttl: PromptCacheTTL = "5m",
    ) -> ModelChain:
        """An agent's models (its own first), each prepared for the loop and priced.

        Raises:
            ConfigurationError: a model is not a chat model, or `needs_price` (a cost budget)
                and a model's price is unknown, named by its place in the agent's config.
        """
        choices = []
        for position, entry in enumerate(models):
            if not isinstance(entry, FallbackModel):
                entry = FallbackModel(entry)
            check_chat_model(entry.model, agent_name=agent_name)
            model = prepared_model(entry.model, has_stall_limit=has_stall_limit)
            pricer = CallPricer.of(
                model, provider=entry.provider, model=entry.model_name, override=entry.pricing
            )
            if needs_price and not pricer.is_priceable:
                where = "agent" if position == 0 else f"agent.fallback_models.{position - 1}"
                raise ConfigurationError(
                    f"{where}.cost_budget_usd: agent {agent_name!r} has a cost budget, but model "
                    f"{pricer.model!r} of provider {pricer.provider!r} has no known price; "
                    f"set {where}.pricing (input_per_mtok, output_per_mtok)"
                )
            server = server_of(model) if position else None
            caching = PromptCaching.of(pricer.provider, mode=prompt_cache, ttl=prompt_cache_ttl)
            retries = entry.retry or retry
            choices.append(ModelChoice(position, model, pricer, retries, caching, server))
        return cls(tuple(choices), policy)

    @property
    def has_fallbacks(self) -> bool:
        return len(self.choices) > 1

    def order(self, start: int) -> tuple[ModelChoice, ...]:
        """The models a call tries: the run's current one, then the others in their order."""
        first = self.choices[start]
        return (first, *(choice for choice in self.choices if choice is not first))

    def first_position(self, messages: Sequence[BaseMessage], turn_start: int) -> int:
        """Where a run starts: on the model that wrote the last reply of its turn (a resumed
        run), or with `sticky: session` of its whole transcript; else on the agent's model."""
        if not self.has_fallbacks:
            return 0
        since = 0 if self.policy.sticky == "session" else turn_start
        written = (_written_by(message) for message in reversed(messages[since:]))
        last = next((key for key in written if key is not None), None)
        # A model the agent no longer has (its config changed) leaves the run on its own model.
        return next((choice.position for choice in self.choices if choice.key == last), 0)

    def messages_for(
        self, choice: ModelChoice, messages: Sequence[BaseMessage]
    ) -> Sequence[BaseMessage]:
        """The transcript as `choice`'s provider accepts it: replies of other providers
        without their provider-specific blocks."""
        if not self.has_fallbacks:
            return messages
        provider = choice.pricer.provider
        return [
            _portable(message)
            if isinstance(message, AIMessage) and _is_foreign(message, provider)
            else message
            for message in messages
        ]

    def is_immediate(self, error: BaseException) -> bool:
        """Whether the next model takes over at once, without retrying this one."""
        status, code = http_status(error), error_code(error)
        return any(_matches(rule, status, code) for rule in self.policy.immediate)


async def call_with_fallbacks(
    run: _Run,
    chain: ModelChain,
    attempt: Callable[[ModelChoice, int, str | None], Awaitable[AIMessage]],
) -> AIMessage:
    """Make one LLM call on the run's current model, each next model taking over the same
    call when the one before gives up (see `MovingOn`); `attempt(choice, number,
    fell_back_from)` makes one attempt and records it. The last model's failure is raised."""
    *earlier, last = chain.order(run.models.position)
    fell_back_from: str | None = None
    for choice in earlier:
        try:
            reply = await call_with_retries(
                run,
                choice.retry,
                _attempts_on(attempt, choice, fell_back_from),
                moves_on=chain.is_immediate,
            )
        except MovingOn as moving:
            fell_back_from = _fall_back(run, chain, choice, moving)
            continue
        return _answered(run, chain, choice, reply)
    reply = await call_with_retries(run, last.retry, _attempts_on(attempt, last, fell_back_from))
    return _answered(run, chain, last, reply)


def _attempts_on(
    attempt: Callable[[ModelChoice, int, str | None], Awaitable[AIMessage]],
    choice: ModelChoice,
    fell_back_from: str | None,
) -> Callable[[int], Awaitable[AIMessage]]:
    def attempt_on(number: int) -> Awaitable[AIMessage]:
        return attempt(choice, number, fell_back_from)

    return attempt_on


def _fall_back(run: _Run, chain: ModelChain, failed: ModelChoice, moving: MovingOn) -> str | None:
    order = chain.order(run.models.position)
    following = order[order.index(failed) + 1]
    run.models.fell_back(failed.pricer.model, to=following.position)
    run.sink(
        ModelFellBack(
            round=run.round,
            from_provider=failed.pricer.provider,
            from_model=failed.pricer.model,
            to_provider=following.pricer.provider,
            to_model=following.pricer.model,
            reason=describe_failure(moving.error),
            immediate=moving.immediate,
        )
    )
    return failed.pricer.model


def _answered(run: _Run, chain: ModelChain, choice: ModelChoice, reply: AIMessage) -> AIMessage:
    run.models.answered(choice.position, choice.pricer.model)
    if not chain.has_fallbacks:
        return reply
    metadata = {**reply.response_metadata, MODEL_KEY: choice.key}
    return reply.model_copy(update={"response_metadata": metadata})


def error_code(error: BaseException) -> str | None:
    """The code of a provider's error body: OpenAI's `code` (`insufficient_quota`), else its
    `type`; Anthropic's `{"error": {"type": "overloaded_error"}}`."""
    body = getattr(error, "body", None)
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    code = body.get("code") or body.get("type") if isinstance(body, Mapping) else None
    return code if isinstance(code, str) else None


def _matches(rule: ImmediateFallback, status: int | None, code: str | None) -> bool:
    return (rule.status is None or rule.status == status) and (
        rule.code is None or rule.code == code
    )


def _written_by(message: BaseMessage) -> str | None:
    if not isinstance(message, AIMessage):
        return None
    key = message.response_metadata.get(MODEL_KEY)
    return key if isinstance(key, str) else None


def _is_foreign(message: AIMessage, provider: str | None) -> bool:
    """Whether a reply may hold what `provider` rejects: written by another provider (or by an
    unknown one, when it holds more than plain text)."""
    written_by = _written_by(message)
    if written_by is not None:
        return written_by.partition(":")[0] != str(provider)
    reported = message.response_metadata.get("model_provider")
    if isinstance(reported, str):
        return reported != provider
    return not isinstance(message.content, str) or bool(message.additional_kwargs)


def _portable(message: AIMessage) -> AIMessage:
    """A reply as any provider reads it: its text (LangChain's standard text blocks, joined)
    and its tool calls with their ids; thinking, reasoning and provider metadata dropped."""
    text = "".join(block["text"] for block in message.content_blocks if block["type"] == "text")
    written_by = _written_by(message)
    return AIMessage(
        content=text,
        tool_calls=message.tool_calls,
        invalid_tool_calls=message.invalid_tool_calls,
        id=message.id,
        name=message.name,
        response_metadata={} if written_by is None else {MODEL_KEY: written_by},
    )
