"""What an LLM call cost in US dollars: genai-prices' table, or prices the config names.

Prices come from the table bundled in the installed `genai-prices` package, read once, never
fetched: genai-prices can refresh its table from the network (`UpdatePrices`), and a process
that starts that updater must not change what we bill, so we build our own snapshot of the
bundled data instead of using the package's process-wide one. Upgrade `genai-prices` for new
prices; set `agent.pricing` for a model it does not know or a price you negotiated.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field

from cleveractors._langchain_private import traced_model
from cleveractors.usage import TokenUsage

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot

__all__ = [
    "CallPricer",
    "ModelPrices",
    "is_priceable",
    "price_call",
    "price_table_provider",
    "warm_up",
]

_PER_MTOK = Decimal(1_000_000)

# LangChain's provider names (init_chat_model's, and the `ls_provider` integrations report) to
# genai-prices' provider ids. A provider missing here (ollama, a local server) has no table price.
_TABLE_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google_genai": "google",
    "google_vertexai": "google",
    "google": "google",
    "azure_openai": "azure",
    "azure": "azure",
    "bedrock": "aws",
    "bedrock_converse": "aws",
    "amazon_bedrock": "aws",
    "mistralai": "mistral",
    "mistral": "mistral",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x-ai",
    "fireworks": "fireworks",
    "together": "together",
    "cohere": "cohere",
    "perplexity": "perplexity",
}


class ModelPrices(BaseModel):
    """Your own prices for a model, in US dollars per million tokens (`agent.pricing`).

    Cache reads and writes default to the input price when not given; every cache write, of
    whatever lifetime, costs `cache_write_per_mtok`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_mtok: Decimal = Field(ge=0)
    output_per_mtok: Decimal = Field(ge=0)
    cache_read_per_mtok: Decimal | None = Field(default=None, ge=0)
    cache_write_per_mtok: Decimal | None = Field(default=None, ge=0)

    def cost(self, usage: TokenUsage) -> Decimal:
        """The price of `usage`; reasoning tokens are completion tokens, priced once as output."""
        fresh = usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        cache_read = self.cache_read_per_mtok
        cache_write = self.cache_write_per_mtok
        micro_dollars = (
            fresh * self.input_per_mtok
            + usage.cache_read_tokens * (self.input_per_mtok if cache_read is None else cache_read)
            + usage.cache_write_tokens
            * (self.input_per_mtok if cache_write is None else cache_write)
            + usage.completion_tokens * self.output_per_mtok
        )
        return micro_dollars / _PER_MTOK


@functools.cache
def _bundled_table() -> DataSnapshot:
    # Imported on first use: genai-prices takes most of a second to import, which neither an
    # offline stub actor nor `import cleveractors` should pay.
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


def warm_up() -> None:
    """Load the price table now, so no run pays for it inside the event loop."""
    _bundled_table()


def price_table_provider(provider: str | None) -> str | None:
    """genai-prices' id for a LangChain provider name, or None when the table has no prices."""
    return None if provider is None else _TABLE_PROVIDERS.get(provider.lower())


def price_call(
    usage: TokenUsage,
    *,
    provider: str | None,
    models: tuple[str | None, ...],
    override: ModelPrices | None = None,
) -> Decimal | None:
    """The call's cost: `override` when given, else the table's price of the first of `models`
    it knows (the provider-reported name first, then the configured one); None when unknown, or
    when the counts contradict themselves (a price below zero is no price)."""
    if not usage.has_consistent_details:
        return None
    if override is not None:
        return override.cost(usage)
    table_provider = price_table_provider(provider)
    if table_provider is None:
        return None
    known = [
        model for model in dict.fromkeys(models) if model and _is_in_table(table_provider, model)
    ]
    if not known:
        return None
    from genai_prices import Usage

    tokens = Usage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
        output_tokens=usage.completion_tokens,
    )
    try:
        return _bundled_table().calc(tokens, known[0], table_provider, None, None).total_price
    except ValueError:  # counts the table cannot price
        return None


@functools.lru_cache(maxsize=1024)
def _is_in_table(table_provider: str, model: str) -> bool:
    """Whether the table knows the model; remembered, because a miss scans every model of the
    provider (most of a millisecond) and an unknown model stays unknown for the process."""
    try:
        _bundled_table().find_provider_model(model, None, table_provider, None)
    except LookupError:
        return False
    return True


def is_priceable(
    *, provider: str | None, model: str | None, override: ModelPrices | None = None
) -> bool:
    """Whether calls to this model can be priced (checked when a cost budget is set)."""
    cost = price_call(TokenUsage(), provider=provider, models=(model,), override=override)
    return cost is not None


_UNCACHED = {"cache_read_tokens": 0, "cache_write_tokens": 0, "cache_write_1h_tokens": 0}
"""A call's usage as if nothing were cached: every prompt token at the input price."""


@dataclass(frozen=True, slots=True)
class CallPricer:
    """Names and prices the calls of one agent's model."""

    provider: str | None
    """LangChain's provider name, e.g. `openai`, `anthropic`, `google_genai`."""
    model: str | None
    """The model as configured; a reply may name the exact snapshot that answered."""
    override: ModelPrices | None = None
    can_price: bool = field(init=False)
    """Whether any call can be priced: an override, or a provider the table has. When not,
    every call's cost is None, known here once instead of looked up per call."""

    def __post_init__(self) -> None:
        can_price = self.override is not None or price_table_provider(self.provider) is not None
        object.__setattr__(self, "can_price", can_price)

    @classmethod
    def of(
        cls,
        chat_model: BaseChatModel,
        *,
        provider: str | None = None,
        model: str | None = None,
        override: ModelPrices | None = None,
    ) -> CallPricer:
        """Read provider and model from the chat model where not given (LangChain's tracing
        parameters, which every integration fills in)."""
        traced = traced_model(chat_model)
        pricer = cls(
            provider=provider or traced.provider,
            model=model or traced.model,
            override=override,
        )
        if override is None and pricer.can_price:
            warm_up()
        return pricer

    def cost(self, usage: TokenUsage, answering_model: str | None) -> Decimal | None:
        return price_call(
            usage,
            provider=self.provider,
            models=(answering_model, self.model),
            override=self.override,
        )

    def cache_savings(
        self, usage: TokenUsage, answering_model: str | None, cost: Decimal | None
    ) -> Decimal | None:
        """What the prompt cache saved on a call that cost `cost`: the price of the same tokens
        with no cached part, less `cost` (below zero when cache writes, priced above input, cost
        more than the reads saved); 0 with nothing cached; None when the call has no price."""
        if cost is None:
            return None
        if not (usage.cache_read_tokens or usage.cache_write_tokens):
            return Decimal(0)
        uncached = self.cost(usage.model_copy(update=_UNCACHED), answering_model)
        return None if uncached is None else uncached - cost

    @property
    def is_priceable(self) -> bool:
        return is_priceable(provider=self.provider, model=self.model, override=self.override)
