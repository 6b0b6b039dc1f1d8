"""Keywords for the tracing suite: `cleveractors serve` and `run` exporting OTLP/HTTP to a
receiver on 127.0.0.1 that the suite starts, and what the received spans say against the
scripted server's bill and the store's ledger.

The receiver is a plain HTTP server decoding the OTLP protobuf payloads with
`opentelemetry-proto`, as a collector would; the model is a `ScriptedOpenAIServer`, whose
record of what it billed is the provider's invoice.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import yaml
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage
from opentelemetry.proto.trace.v1.trace_pb2 import Status
from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from cleveractors.config import StoreConfig
from cleveractors.store import LedgerRow, SqlStore
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0
_CLIENT_TIMEOUT_S = 30.0
_SETTLE_TIMEOUT_S = 30.0
_PROVIDER_KEY_VARIABLE = "CLEVERACTORS_TEST_PROVIDER_KEY"
_DATABASE = "traced.db"
_CLI = str(Path(sys.executable).with_name("cleveractors"))
_ANSWER = (
    "It is sunny and mild in Lisbon today, with a light breeze from the sea, clear skies "
    "until the evening and a cool night ahead, so a jacket will do after sunset."
)


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver decoded it; ids in lowercase hex, as the ledger keeps them."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    status: str
    attributes: dict[str, Any]
    service_name: str


@dataclass
class _Received:
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _OtlpHandler(BaseHTTPRequestHandler):
    server: _OtlpServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
            with self.server.received.lock:
                self.server.received.spans.extend(_decoded_spans(request))
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        elif self.path == "/v1/metrics":
            metrics = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
            with self.server.received.lock:
                self.server.received.metrics.append(metrics)
            reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        else:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(f"OTLP receiver: {format % args}")


class _OtlpServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OtlpHandler)
        self.received = _Received()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return None if kind is None else getattr(value, kind)


def _decoded_spans(request: Any) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        kind=SpanMessage.SpanKind.Name(span.kind),
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        status=Status.StatusCode.Name(span.status.code),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        service_name=str(resource.get("service.name", "")),
                    )
                )
    return spans


@dataclass
class _Serving:
    process: subprocess.Popen[bytes]
    log_path: Path
    base_url: str


@library(scope="SUITE", auto_keywords=False)
class TracingLibrary:
    """Export a server's and a command's telemetry to a local OTLP receiver and check it."""

    def __init__(self) -> None:
        self._receiver: _OtlpServer | None = None
        self._model: ScriptedOpenAIServer | None = None
        self._serving: _Serving | None = None
        self._hung_up_message: str | None = None
        self._sent: list[str] = []

    # -- setup ---------------------------------------------------------------------------------

    @keyword
    def start_otlp_receiver(self) -> str:
        """An OTLP/HTTP receiver on 127.0.0.1 (`/v1/traces`, `/v1/metrics`); returns its URL,
        the `OTEL_EXPORTER_OTLP_ENDPOINT` to give a process."""
        self._receiver = _OtlpServer()
        threading.Thread(target=self._receiver.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._receiver.server_address[1]}"

    @keyword
    def start_scripted_model(self) -> str:
        """A `ScriptedOpenAIServer` where each conversation gets a `slow_lookup` tool call,
        then an answer streamed a word every 30 ms (slow enough to hang up in); returns its
        base URL."""
        lookup = ScriptedToolCall(name="slow_lookup", args={"query": "Lisbon", "seconds": 0.05})
        script = [
            ScriptedReply(tool_calls=(lookup,)),
            ScriptedReply(text=_ANSWER, chunk_delay_s=0.03),
        ]
        self._model = ScriptedOpenAIServer(script, per_conversation=True)
        self._model.start()
        return self._model.base_url

    @keyword
    def write_traced_actor(self, path: str, base_url: str) -> str:
        """Write an `openai` actor (ChatOpenAI) against BASE_URL with the `slow_lookup` tool
        and a SQLite store beside it, empty (an earlier run's file is removed); returns PATH."""
        for leftover in Path(path).parent.glob(f"{_DATABASE}*"):
            leftover.unlink()
        os.environ[_PROVIDER_KEY_VARIABLE] = "sk-scripted"
        config = {
            "name": "traced-actor",
            "agent": {
                "type": "llm",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "base_url": base_url,
                "api_key_env": _PROVIDER_KEY_VARIABLE,
                "max_retries": 0,
                "tools": [
                    {
                        "name": "slow_lookup",
                        "description": "Look something up; takes a while.",
                        "handler": "cleveractors.demo:slow_lookup",
                    }
                ],
            },
            "store": {"url": f"sqlite:///{_DATABASE}"},
        }
        Path(path).write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    @keyword
    def start_traced_server(self, actor: str, endpoint: str, service_name: str) -> str:
        """Run `cleveractors serve ACTOR` exporting to ENDPOINT as SERVICE_NAME (spans batched
        for 100 ms); returns its base URL once it answers."""
        port = _free_port()
        environment = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_SERVICE_NAME": service_name,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        command = [_CLI, "serve", actor, "--host", "127.0.0.1", "--port", str(port)]
        log_dir = Path(BuiltIn().get_variable_value("${OUTPUT DIR}")) / "servers"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"traced-{port}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment
            )
        self._serving = _Serving(process, log_path, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(
                    f"serve exited with {process.returncode}:\n{log_path.read_text()}"
                )
            try:
                if httpx.get(self._serving.base_url + "/", timeout=1.0).status_code == 200:
                    return self._serving.base_url
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"serve did not answer within {_READY_TIMEOUT_S:g}s")

    @keyword
    def terminate_traced_server(self) -> int:
        """Send the server SIGTERM (as `docker stop` does) and wait for it to end; returns its
        exit status. Its output goes to the log."""
        serving = self._serving
        if serving is None:
            return 0
        self._serving = None
        serving.process.send_signal(signal.SIGTERM)
        try:
            status = serving.process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            serving.process.kill()
            status = serving.process.wait()
            logger.warn("the traced server did not stop on SIGTERM; killed")
        logger.info(f"serve output:\n{serving.log_path.read_text(errors='replace')}")
        return status

    @keyword
    def stop_tracing_servers(self) -> None:
        """Stop whatever this suite started."""
        self.terminate_traced_server()
        if self._model is not None:
            self._model.stop()
        if self._receiver is not None:
            self._receiver.shutdown()
            self._receiver.server_close()

    # -- clients -------------------------------------------------------------------------------

    @keyword
    def chat_to_the_end(self, base_url: str, message: str) -> str:
        """POST MESSAGE to `/chat` and read the stream to its last event; returns its kind."""
        self._sent.append(message)
        last = ""
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/chat", json={"message": message}) as response,
        ):
            response.raise_for_status()
            for line in response.iter_lines():
                if line.startswith("event:"):
                    last = line.removeprefix("event:").strip()
        return last

    @keyword
    def chat_and_hang_up_mid_answer(self, base_url: str, message: str) -> None:
        """POST MESSAGE to `/chat` and close the connection once the answer (the text after the
        tool call) has begun streaming."""
        self._sent.append(message)
        self._hung_up_message = message
        deltas = 0
        tool_done = False
        with (
            httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client,
            client.stream("POST", f"{base_url}/chat", json={"message": message}) as response,
        ):
            response.raise_for_status()
            for line in response.iter_lines():
                tool_done = tool_done or line == "event: tool_call_finished"
                deltas += tool_done and line == "event: text_delta"
                if deltas >= 3:
                    break

    @keyword
    def complete_with_openai_api(self, base_url: str, message: str, stream: bool = False) -> int:
        """POST MESSAGE to `/v1/chat/completions` (streamed with usage when STREAM) and read
        the whole answer; returns the total tokens it reports."""
        self._sent.append(message)
        body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": message}]}
        if stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        url = f"{base_url}/v1/chat/completions"
        with httpx.Client(timeout=_CLIENT_TIMEOUT_S) as client:
            if not stream:
                return int(
                    client.post(url, json=body).raise_for_status().json()["usage"]["total_tokens"]
                )
            total = 0
            with client.stream("POST", url, json=body) as response:
                for line in response.raise_for_status().iter_lines():
                    data = line.removeprefix("data: ")
                    if line.startswith("data: {") and json.loads(data).get("usage"):
                        total = int(json.loads(data)["usage"]["total_tokens"])
            return total

    @keyword
    def wait_until_every_call_is_billed_and_recorded(self, actor: str) -> None:
        """Wait until the scripted model has billed every request it received (a client that
        left is billed when its handler next writes) and the ledger holds a row for each."""
        model = self._require_model()
        deadline = time.monotonic() + _SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            rows = _ledger_rows(actor)
            if len(model.billed) == len(model.requests) == len(rows):
                return
            time.sleep(0.1)
        raise AssertionError(
            f"the model received {len(model.requests)} requests, billed {len(model.billed)}; "
            f"the ledger has {len(_ledger_rows(actor))} rows"
        )

    # -- what was received ---------------------------------------------------------------------

    @keyword
    def received_spans(self) -> list[ReceivedSpan]:
        """Every span the receiver decoded so far."""
        receiver = self._require_receiver()
        with receiver.received.lock:
            return list(receiver.received.spans)

    @keyword
    def wait_for_spans_named(self, prefix: str, count: int) -> list[ReceivedSpan]:
        """Wait until COUNT spans whose name starts with PREFIX have been received."""
        deadline = time.monotonic() + _SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            spans = [s for s in self.received_spans() if s.name.startswith(prefix)]
            if len(spans) >= int(count):
                return spans
            time.sleep(0.1)
        raise AssertionError(f"received {len(spans)} spans named {prefix!r}, not {count}")

    @keyword
    def every_span_should_have_ended_once(self) -> None:
        """Each received span has an end after its start, and no span id arrived twice."""
        spans = self.received_spans()
        ids = [span.span_id for span in spans]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise AssertionError(f"spans received more than once: {repeated}")
        open_ = [span.name for span in spans if not span.end_ns >= span.start_ns > 0]
        if open_:
            raise AssertionError(f"spans without an end: {open_}")
        logger.info(f"{len(spans)} spans: {sorted({span.name for span in spans})}")

    @keyword
    def every_run_should_be_a_child_of_its_http_server_span(self, service_name: str) -> None:
        """Each `invoke_agent` span's parent is a received SERVER span of the same trace (the
        request that started it), and every span names SERVICE_NAME as its service."""
        spans = self.received_spans()
        by_id = {span.span_id: span for span in spans}
        runs = [span for span in spans if span.name.startswith("invoke_agent ")]
        if len(runs) != len(self._sent):
            raise AssertionError(f"{len(self._sent)} requests, but {len(runs)} run spans")
        for run in runs:
            parent = by_id.get(run.parent_span_id)
            if parent is None or parent.kind != "SPAN_KIND_SERVER":
                raise AssertionError(f"run {run.attributes} has parent {parent}, not an HTTP span")
            if parent.trace_id != run.trace_id:
                raise AssertionError(f"run {run.span_id} is not in its request's trace")
            logger.info(f"{parent.name} -> {run.name}")
        services = {span.service_name for span in spans}
        if services != {service_name}:
            raise AssertionError(f"spans came from services {services}, not {service_name!r}")

    @keyword
    def chat_spans_should_equal_the_bill_and_the_ledger(self, actor: str) -> None:
        """Per LLM call: its `chat` span's `gen_ai.usage.*` equal its ledger row (named by the
        row's trace and span ids), and for a call the provider reported (not estimated) what
        the scripted model billed for that request. The calls are in the order the model
        received them: the requests were sent one after the other."""
        rows = _ledger_rows(actor)
        chats = sorted(self._chat_spans(), key=lambda span: span.start_ns)
        model = self._require_model()
        billed = {call.request_index: call for call in model.billed}
        if not len(chats) == len(rows) == len(model.requests):
            raise AssertionError(
                f"{len(chats)} chat spans, {len(rows)} ledger rows, {len(model.requests)} requests"
            )
        by_id = {(span.trace_id, span.span_id): span for span in chats}
        for row in rows:
            span = by_id.get((row.trace_id or "", row.span_id or ""))
            if span is None:
                raise AssertionError(f"ledger row {row.run_id}#{row.call_index} names no span")
            _should_match_row(span, row)
        for index, span in enumerate(chats):
            usage = _usage_of(span)
            if span.attributes["cleveractors.usage.estimated"]:
                logger.info(f"request {index}: estimated {usage}, billed {billed[index]}")
                continue
            bill = (billed[index].prompt_tokens, billed[index].completion_tokens)
            if usage[:2] != bill:
                raise AssertionError(f"request {index}: span {usage[:2]}, model billed {bill}")
        logger.info(f"{len(rows)} calls: spans, ledger and bill agree")

    @keyword
    def the_hung_up_run_should_end_in_error(self) -> None:
        """The run of the request whose client hung up, and its cut-off call, end with status
        ERROR; every other span ends without one."""
        runs = [s for s in self.received_spans() if s.name.startswith("invoke_agent ")]
        hung_up_index = self._sent.index(self._hung_up_message or "")
        hung_up = sorted(runs, key=lambda span: span.start_ns)[hung_up_index]
        if hung_up.status != "STATUS_CODE_ERROR":
            raise AssertionError(f"the hung-up run ended {hung_up.status}: {hung_up.attributes}")
        outcome = hung_up.attributes.get("cleveractors.run.outcome")
        if outcome != "cancelled":
            raise AssertionError(f"the hung-up run's outcome is {outcome!r}, not 'cancelled'")
        chats = [s for s in self._chat_spans() if s.parent_span_id == hung_up.span_id]
        last = max(chats, key=lambda span: span.start_ns)
        if last.status != "STATUS_CODE_ERROR" or "error.type" not in last.attributes:
            raise AssertionError(f"the cut-off call ended {last.status}: {last.attributes}")
        others = [
            span.name
            for span in self.received_spans()
            if span.status == "STATUS_CODE_ERROR" and span not in (hung_up, last)
        ]
        if others:
            raise AssertionError(f"other spans ended in error: {others}")

    @keyword
    def token_metrics_should_equal_the_ledger(self, actor: str) -> None:
        """The `gen_ai.client.token.usage` histogram's sums (by token type) equal the ledger's
        prompt and completion totals."""
        rows = _ledger_rows(actor)
        sums = self._token_sums()
        expected = {
            "input": sum(row.prompt_tokens for row in rows),
            "output": sum(row.completion_tokens for row in rows),
        }
        if sums != expected:
            raise AssertionError(f"token metrics {sums}, ledger {expected}")

    # -- `cleveractors run` ----------------------------------------------------------------------

    @keyword
    def run_command_with_environment(self, *arguments: str, **environment: str) -> Any:
        """Run `cleveractors ARGUMENTS` with ENVIRONMENT added; returns the finished process
        (`returncode`, `stdout`, `stderr`)."""
        env = {**os.environ, **environment}
        return subprocess.run(
            [_CLI, *arguments], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    @keyword
    def directory_hiding_the_sdk(self, path: str) -> str:
        """A folder to put first on PYTHONPATH where `opentelemetry.sdk` cannot be imported,
        as in an install without the `[otel]` extra; returns its path."""
        package = Path(path) / "opentelemetry" / "sdk"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(
            "raise ModuleNotFoundError(\"No module named 'opentelemetry.sdk'\", "
            "name='opentelemetry.sdk')\n",
            encoding="utf-8",
        )
        return str(path)

    @keyword
    def run_spans_should_be_a_tree(self, service_name: str, calls: int) -> None:
        """The received spans are one `invoke_agent` root (no parent) from SERVICE_NAME with
        CALLS `chat` children and its tool calls' `execute_tool` children."""
        spans = self.received_spans()
        roots = [s for s in spans if s.name.startswith("invoke_agent ") and not s.parent_span_id]
        if len(roots) != 1:
            raise AssertionError(f"{len(roots)} root run spans in {[s.name for s in spans]}")
        root = roots[0]
        children = [s for s in spans if s.parent_span_id == root.span_id]
        chats = [s for s in children if s.name.startswith("chat")]
        tools = [s for s in children if s.name.startswith("execute_tool ")]
        if len(chats) != int(calls) or len(tools) + len(chats) != len(children):
            raise AssertionError(f"the run's children: {[s.name for s in children]}")
        if root.service_name != service_name:
            raise AssertionError(f"service {root.service_name!r}, not {service_name!r}")

    # -- helpers ---------------------------------------------------------------------------------

    def _chat_spans(self) -> list[ReceivedSpan]:
        return [
            s for s in self.received_spans() if s.attributes.get("gen_ai.operation.name") == "chat"
        ]

    def _token_sums(self) -> dict[str, int]:
        """The latest cumulative sum of each token type (the exports are cumulative)."""
        receiver = self._require_receiver()
        latest: dict[str, tuple[int, int]] = {}
        with receiver.received.lock:
            exports = list(receiver.received.metrics)
        for export in exports:
            for resource in export.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name != "gen_ai.client.token.usage":
                            continue
                        for point in metric.histogram.data_points:
                            attributes = {a.key: _value(a.value) for a in point.attributes}
                            key = f"{attributes['gen_ai.token.type']}|{sorted(attributes.items())}"
                            if point.time_unix_nano >= latest.get(key, (0, 0))[0]:
                                latest[key] = (point.time_unix_nano, int(point.sum))
        sums: dict[str, int] = {}
        for key, (_, total) in latest.items():
            token_type = key.split("|", 1)[0]
            sums[token_type] = sums.get(token_type, 0) + total
        return sums

    def _require_receiver(self) -> _OtlpServer:
        if self._receiver is None:
            raise RuntimeError("no OTLP receiver was started")
        return self._receiver

    def _require_model(self) -> ScriptedOpenAIServer:
        if self._model is None:
            raise RuntimeError("no scripted model was started")
        return self._model


def _usage_of(span: ReceivedSpan) -> tuple[int, int, int, int]:
    attributes = span.attributes
    return (
        attributes["gen_ai.usage.input_tokens"],
        attributes["gen_ai.usage.output_tokens"],
        attributes["gen_ai.usage.cache_read.input_tokens"],
        attributes["gen_ai.usage.reasoning.output_tokens"],
    )


def _should_match_row(span: ReceivedSpan, row: LedgerRow) -> None:
    from_span = (*_usage_of(span), span.attributes["cleveractors.usage.estimated"])
    from_row = (
        row.prompt_tokens,
        row.completion_tokens,
        row.cache_read_tokens,
        row.reasoning_tokens,
        row.estimated,
    )
    if from_span != from_row:
        raise AssertionError(
            f"ledger row {row.run_id}#{row.call_index} {from_row}, its span {from_span}"
        )


def _ledger_rows(actor: str) -> list[LedgerRow]:
    """The ledger of ACTOR's store (its SQLite file beside it)."""
    config = StoreConfig(url=f"sqlite:///{Path(actor).parent / _DATABASE}")

    async def read() -> list[LedgerRow]:
        store = SqlStore.from_config(config, should_create=False)
        async with store:
            return list((await store.usage()).rows)

    return asyncio.run(read())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
