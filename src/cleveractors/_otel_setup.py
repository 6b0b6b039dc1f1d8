"""The OpenTelemetry SDK of `cleveractors serve` and `run`, configured from the `OTEL_*` variables.

The library itself depends on `opentelemetry-api` only (see `cleveractors.tracing`); this module
is what the command line adds, with the `[otel]` extra, so that a run's spans and metrics leave
the process. It is imported only by those two commands, and imports the SDK only when the
environment asks for an export:

- traces are exported when `OTEL_TRACES_EXPORTER` names an exporter, or, when it is unset,
  when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set;
- metrics likewise, with `OTEL_METRICS_EXPORTER` and `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`;
- a signal's `OTEL_*_EXPORTER`, when set, wins over the endpoints (`none` turns it off);
- exporters are `otlp` (OTLP over HTTP with protobuf, the only protocol shipped), `console`
  (to stderr, so `run --json` stays readable) and `none`; `OTEL_SDK_DISABLED=true` turns all
  of it off.

Unlike the SDK's own auto-configuration, nothing is exported by default: with none of these set
no SDK is imported and a run costs what it costs without tracing. Everything else is the SDK's
and its exporters' to read as usual (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_BSP_*`, `OTEL_METRIC_EXPORT_INTERVAL`, the sampler). A
process without `OTEL_SERVICE_NAME` (nor `service.name` in the resource attributes) is
`service.name=cleveractors`.

An export that is asked for but cannot happen (the extra is missing, an exporter or protocol
we do not ship) is a `ConfigurationError` naming the variable: an operator who set an endpoint
expects traces, and a server that starts without them hides the fault until it matters.

`serve` instruments its FastAPI app (`opentelemetry-instrumentation-fastapi`): each request's
server span is current while it is handled, and the run it starts is that span's child.

Spans are batched (`BatchSpanProcessor`); the providers are shut down, which flushes them, when
the process exits: at interpreter exit (Ctrl-C, an error, the end of a run) and on SIGTERM,
whose default action would end the process before any exit handler runs.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from cleveractors.errors import ConfigurationError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["ExportPlan", "SdkTelemetry", "export_plan", "start_from_env"]

_OTEL_EXTRA = "pip install 'cleveractors[otel]'"
_EXPORTERS = frozenset({"otlp", "console"})
_HTTP_PROTOBUF = "http/protobuf"
_DEFAULT_SERVICE_NAME = "cleveractors"
# The ASGI middleware's spans per `receive` and `send` message: one per SSE frame of a stream,
# thousands for one long answer, and nothing a reader of the trace needs.
_EXCLUDED_ASGI_SPANS: list[Any] = ["receive", "send"]


@dataclass(frozen=True, slots=True)
class _Signal:
    """One signal's variables: the one choosing its exporters, and the endpoints that imply OTLP."""

    name: str
    exporter_variable: str
    endpoint_variables: tuple[str, ...]
    protocol_variable: str


_TRACES = _Signal(
    "traces",
    "OTEL_TRACES_EXPORTER",
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
)
_METRICS = _Signal(
    "metrics",
    "OTEL_METRICS_EXPORTER",
    ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
)


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """Which exporters each signal gets, and the variable that asked for the export (for an
    error message that names it)."""

    traces: tuple[str, ...]
    metrics: tuple[str, ...]
    asked_by: str


def export_plan(environ: Mapping[str, str] | None = None) -> ExportPlan | None:
    """What the environment asks to export; None when nothing (the SDK is then never imported).

    Raises:
        ConfigurationError: an exporter other than `otlp`, `console` and `none`, or an OTLP
            protocol other than `http/protobuf`.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    traces, traces_asked_by = _exporters(_TRACES, env)
    metrics, metrics_asked_by = _exporters(_METRICS, env)
    if not traces and not metrics:
        return None
    return ExportPlan(traces, metrics, traces_asked_by or metrics_asked_by)


def _exporters(kind: _Signal, env: Mapping[str, str]) -> tuple[tuple[str, ...], str]:
    """The exporters `kind` gets and the variable that chose them ("" when none)."""
    chosen = env.get(kind.exporter_variable, "").strip().lower()
    if chosen:
        names = tuple(name.strip() for name in chosen.split(",") if name.strip())
        unknown = sorted(set(names) - _EXPORTERS - {"none"})
        if unknown:
            raise ConfigurationError(
                f"{kind.exporter_variable}={chosen!r}: cleveractors exports {kind.name} with "
                f"'otlp' (OTLP over HTTP), 'console' or 'none', not {', '.join(unknown)}"
            )
        exporters = tuple(name for name in names if name != "none")
        asked_by = kind.exporter_variable
    else:
        asked_by = next((name for name in kind.endpoint_variables if env.get(name)), "")
        exporters = ("otlp",) if asked_by else ()
    if "otlp" in exporters:
        _check_protocol(kind, env)
    return exporters, asked_by if exporters else ""


def _check_protocol(kind: _Signal, env: Mapping[str, str]) -> None:
    for variable in (kind.protocol_variable, "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env.get(variable, "").strip()
        if protocol:
            if protocol != _HTTP_PROTOBUF:
                raise ConfigurationError(
                    f"{variable}={protocol!r}: cleveractors sends OTLP over HTTP only; set it "
                    f"to {_HTTP_PROTOBUF!r} (and the endpoint to the collector's HTTP port, "
                    "4318 by default)"
                )
            return


class SdkTelemetry:
    """The SDK's providers of this process, set as the global ones; `shutdown()` flushes them."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider

    def shutdown(self) -> None:
        """Export what is still batched and stop the exporters (once: the SDK warns after)."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def start_from_env(*, app: FastAPI | None = None) -> SdkTelemetry | None:
    """Configure the SDK as the environment asks (see the module docstring) and make its
    providers the global ones, shut down at exit and on SIGTERM; None, having imported nothing,
    when the environment asks for no export.

    Args:
        app: A server's FastAPI app: each request gets a server span, current while the
            request is handled, so that a run it starts is that span's child.

    Raises:
        ConfigurationError: the export cannot happen as asked: the `[otel]` extra is not
            installed, or a variable names an exporter or a protocol that is not shipped.
    """
    plan = export_plan()  # the SDK and its exporters read `os.environ` too
    if plan is None:
        return None
    try:
        if app is not None:  # first: a missing instrumentation sets no global provider
            _instrument(app)
        telemetry = _sdk_telemetry(plan)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"{plan.asked_by} asks for OpenTelemetry export, which needs {exc.name!r}: "
            f"{_OTEL_EXTRA}"
        ) from None
    atexit.register(telemetry.shutdown)
    _shut_down_on_sigterm(telemetry)
    return telemetry


def _sdk_telemetry(plan: ExportPlan) -> SdkTelemetry:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: _DEFAULT_SERVICE_NAME}))
    # The exit handler below shuts them down, in order: traces first, then the metrics.
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for name in plan.traces:
        tracer_provider.add_span_processor(BatchSpanProcessor(_span_exporter(name)))
    readers: list[MetricReader] = [
        PeriodicExportingMetricReader(_metric_exporter(name)) for name in plan.metrics
    ]
    meter_provider = MeterProvider(
        resource=resource, metric_readers=readers, shutdown_on_exit=False
    )
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    return SdkTelemetry(tracer_provider, meter_provider)


def _span_exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _metric_exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stderr)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


_SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _shut_down_on_sigterm(telemetry: SdkTelemetry) -> None:
    """On SIGTERM, flush, then let the handler that was there before act (the default ends the
    process). uvicorn puts this handler back after its graceful shutdown and raises the signal
    it caught again; without it that default would end the server with its last spans unsent."""
    previous: _SignalHandler = signal.getsignal(signal.SIGTERM)

    def flush_then_terminate(signum: int, frame: FrameType | None) -> None:
        atexit.unregister(telemetry.shutdown)  # a handler before may exit by SystemExit
        telemetry.shutdown()
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        signal.raise_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, flush_then_terminate)


def _instrument(app: FastAPI) -> None:
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, exclude_spans=_EXCLUDED_ASGI_SPANS)
