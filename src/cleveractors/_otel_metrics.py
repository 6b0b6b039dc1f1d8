"""The GenAI client metrics of LLM calls (v1.41 conventions): the instruments and what one
call records on them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.metrics import Histogram, Meter

if TYPE_CHECKING:
    from cleveractors.usage import LLMCallUsage

__all__ = ["CallMetrics"]

# The conventions' advisory bucket boundaries (gen_ai metrics, v1.41): the duration's are also
# those of the time to the first chunk and of the time per output chunk.
_DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
_TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip


class CallMetrics:
    """The instruments every LLM call records on."""

    __slots__ = ("_cost", "_duration", "_first_chunk", "_per_chunk", "_spend_refusals", "_tokens")

    def __init__(self, meter: Meter) -> None:
        self._duration = _seconds(meter, "operation.duration", "GenAI operation duration")
        self._tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._first_chunk = _seconds(
            meter,
            "operation.time_to_first_chunk",
            "Time to receive the first chunk of a streamed response",
        )
        self._per_chunk = _seconds(
            meter,
            "operation.time_per_output_chunk",
            "Mean time between the chunks of a streamed response after the first",
        )
        self._cost = meter.create_counter(
            "cleveractors.client.cost", unit="USD", description="Cost of the LLM calls"
        )
        self._spend_refusals = meter.create_counter(
            "cleveractors.spend_limit.refusals",
            unit="{run}",
            description="Runs a caller's spend limit refused or stopped",
        )

    def count_spend_refusal(self, actor_name: str) -> None:
        """One run refused or stopped by a spend limit, by actor (never by caller: a caller id
        is neither low-cardinality nor free of personal data)."""
        self._spend_refusals.add(1, {"gen_ai.agent.name": actor_name})

    def record(
        self,
        record: LLMCallUsage,
        attributes: dict[str, str],
        *,
        started: float,
        ended: float,
        first_chunk_at: float | None,
        chunks: int,
    ) -> None:
        """One call's metrics: `attributes` are low-cardinality (no run, session or user)."""
        self._duration.record(ended - started, attributes)
        self._tokens.record(
            record.usage.prompt_tokens, {**attributes, "gen_ai.token.type": "input"}
        )
        self._tokens.record(
            record.usage.completion_tokens, {**attributes, "gen_ai.token.type": "output"}
        )
        if first_chunk_at is not None:
            self._first_chunk.record(first_chunk_at - started, attributes)
            if chunks > 1:  # once per call, the mean: no work per chunk
                self._per_chunk.record((ended - first_chunk_at) / (chunks - 1), attributes)
        if record.cost_usd is not None:
            self._cost.add(float(record.cost_usd), attributes)


def _seconds(meter: Meter, name: str, description: str) -> Histogram:
    """A `gen_ai.client.*` histogram of seconds, on the conventions' duration buckets."""
    return meter.create_histogram(
        f"gen_ai.client.{name}",
        unit="s",
        description=description,
        explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
    )
