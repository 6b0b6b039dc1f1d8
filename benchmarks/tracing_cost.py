"""What tracing costs a turn: the library's turns with the OpenTelemetry SDK recording (a
`BatchSpanProcessor` to an exporter that drops the batch, a metric reader that keeps the
aggregates in memory) against the same turns with no SDK at all. Zero latency, the server in
its own process, the variants interleaved as in `cpu.py`.

`time.process_time()` counts every thread of this process, so the batch processor's own
worker thread is in the figure: the cost of recording, batching and handing spans over, without
an exporter's serialisation and network (which is the exporter's, not ours).
"""

from __future__ import annotations

from collections.abc import Sequence

from cpu import CpuSamples, Turn, measure_cpu, server_process
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from report import Row, Target, spread_ms
from scenario import ANSWER, USER_MESSAGE, openai_actor_config

from cleveractors import ActorExecutor

SECTION = "Tracing"
STREAMED_TARGET = Target(1.05)
VARIANTS = ("untraced_blocking", "traced_blocking", "untraced_streamed", "traced_streamed")


class _DroppingExporter(SpanExporter):
    """Takes each batch and drops it; counts the spans, to check that the turns were traced."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def _turns(executor: ActorExecutor, label: str) -> dict[str, Turn]:
    async def blocking() -> None:
        result = await executor.execute(USER_MESSAGE)
        _check(result.text, result.llm_calls)

    async def streamed() -> None:
        stream = executor.execute_stream(USER_MESSAGE)
        async for _text in stream:
            pass
        if stream.result is None:
            raise RuntimeError("the streamed turn settled no result")
        _check(stream.result.text, stream.result.llm_calls)

    return {f"{label}_blocking": blocking, f"{label}_streamed": streamed}


def _check(text: str, llm_calls: int) -> None:
    if text != ANSWER or llm_calls != 2:
        raise RuntimeError(f"unexpected turn: {llm_calls} LLM calls, answer {text!r}")


async def measure_tracing(*, repetitions: int, warmup: int) -> tuple[list[Row], CpuSamples]:
    """CPU per turn, traced / untraced, blocking and streamed; the streamed ratio has the
    issue's target (at most 5% more)."""
    exporter = _DroppingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    with server_process() as server:
        config = openai_actor_config(server.base_url)
        traced = ActorExecutor.from_config(
            config, tracer_provider=tracer_provider, meter_provider=meter_provider
        )
        turns = {
            **_turns(ActorExecutor.from_config(config), "untraced"),
            **_turns(traced, "traced"),
        }
        samples = await measure_cpu(turns, repetitions=repetitions, warmup=warmup)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    # A traced turn is a run span, two chat spans and a tool span.
    expected_spans = 4 * (repetitions + warmup) * 2
    if exporter.spans != expected_spans:
        raise RuntimeError(f"{exporter.spans} spans exported, {expected_spans} expected")
    rows = [
        _row(samples, "streamed", STREAMED_TARGET),
        _row(samples, "blocking", None),
    ]
    return rows, samples


def _row(samples: CpuSamples, mode: str, target: Target | None) -> Row:
    traced, untraced = f"traced_{mode}", f"untraced_{mode}"
    return Row(
        SECTION,
        f"{mode.capitalize()} turn, SDK + batch exporter / no SDK",
        samples.ratio(traced, untraced),
        "x",
        target,
        f"median of {len(samples.by_variant[traced])} paired ratios; median CPU "
        f"{samples.median_s(traced) * 1000:.2f} ms vs {samples.median_s(untraced) * 1000:.2f} ms; "
        f"traced {spread_ms(samples.by_variant[traced])}",
    )
