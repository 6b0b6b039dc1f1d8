"""Keywords for stopping `cleveractors run` and `serve` with SIGTERM, as `timeout`, `docker
stop`, systemd and Kubernetes do, and for MCP servers that fail to start.

The actors use our MCP test server (features/support/mcp_servers/tool_server.py), which writes
its pid and the calls it saw into the file named by MCP_TEST_LOG; with a SQLite store beside
them, the ledger (`cleveractors usage --json`) shows what was billed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).parent / "cleveractors"
TOOL_SERVER = ROOT / "features" / "support" / "mcp_servers" / "tool_server.py"
TIMEOUT_S = 60
AFTER_EXIT_S = 1.0  # how long the terminal is watched once the command has exited
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@library(scope="TEST")
class SignalsLibrary:
    def __init__(self) -> None:
        self._folder: Path | None = None
        self._screen = ""
        self._after_exit = ""
        self._code: int | None = None
        self._terminal_held = False
        self._serving: subprocess.Popen[bytes] | None = None
        self._stream: list[bytes] = []
        self._stream_reader: threading.Thread | None = None

    # -- setup ----------------------------------------------------------------------------------

    @keyword
    def actor_with_a_slow_mcp_tool_and_a_store(self, seconds: float = 30) -> str:
        """An actor whose first reply calls the MCP tool `slow` for SECONDS (to be stopped),
        with a SQLite store beside it; its MCP server is started as `python`, whatever PATH
        holds."""
        folder = self._new_folder()
        script = [
            {
                "text": "Waiting.",
                "tool_calls": [
                    {"name": "slow", "args": {"seconds": float(seconds)}, "id": "call_slow"}
                ],
                "prompt_tokens": 23,
                "completion_tokens": 4,
            },
            {"text": "Done."},
        ]
        server = {
            "name": "files",
            "command": ["python", str(TOOL_SERVER)],
            "env": {"MCP_TEST_LOG": str(folder / "mcp.log")},
            "timeout_s": 60,
        }
        config = {
            "name": "slow-mcp",
            "agent": {"provider": "stub", "mcp_servers": [server], "script": script},
            "store": {"url": f"sqlite:///{folder / 'store.db'}"},
        }
        return _write(folder / "actor.yaml", config)

    @keyword
    def actor_with_a_tool_slow_to_stop_and_a_store(self) -> str:
        """An actor (no MCP server) whose first reply calls a lookup that takes a minute and,
        cancelled, a second to stop, with a SQLite store beside it."""
        folder = self._new_folder()
        lookup = {"query": "Louvre", "seconds": 60, "cleanup_seconds": 1}
        script = [
            {
                "text": "Looking it up.",
                "tool_calls": [{"name": "slow_lookup", "args": lookup, "id": "call_louvre"}],
                "prompt_tokens": 23,
                "completion_tokens": 4,
            },
            {"text": "Never asked for."},
        ]
        tool = {
            "name": "slow_lookup",
            "description": "Look something up, slowly.",
            "handler": "cleveractors.demo:slow_lookup",
        }
        config = {
            "name": "slow-to-stop",
            "agent": {"provider": "stub", "tools": [tool], "script": script},
            "store": {"url": f"sqlite:///{folder / 'store.db'}"},
        }
        return _write(folder / "actor.yaml", config)

    @keyword
    def actor_whose_mcp_server_dies_at_start(self) -> str:
        """An actor whose MCP server fails to import a module and exits."""
        folder = self._new_folder()
        code = "import sys; print('loading the weather', file=sys.stderr); import weather_xyz"
        server = {"name": "weather", "command": ["python", "-c", code]}
        agent = {"provider": "stub", "mcp_servers": [server], "script": [{"text": "Sunny."}]}
        config = {"name": "broken-mcp", "agent": agent}
        return _write(folder / "actor.yaml", config)

    @keyword
    def actor_whose_mcp_server_never_answers(self) -> str:
        """An actor whose MCP server logs its pid and then sleeps, never answering."""
        folder = self._new_folder()
        code = (
            "import os, time; log = open(os.environ['MCP_TEST_LOG'], 'a'); "
            "log.write(f'pid {os.getpid()}\\n'); log.close(); time.sleep(60)"
        )
        server = {
            "name": "silent",
            "command": ["python", "-c", code],
            "env": {"MCP_TEST_LOG": str(folder / "mcp.log")},
        }
        agent = {"provider": "stub", "mcp_servers": [server], "script": [{"text": "Hi."}]}
        return _write(folder / "actor.yaml", {"name": "silent-mcp", "agent": agent})

    @keyword
    def terminate_validate_once_the_mcp_server_runs(self, actor: str) -> None:
        """Runs `cleveractors validate ACTOR`, sends SIGTERM once its MCP server logged its pid."""
        process = subprocess.Popen(
            [str(COMMAND), "validate", actor],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_environment(),
        )
        self._wait_for_log(Path(actor).parent / "mcp.log", "pid ")
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=TIMEOUT_S)
        self._code, self._screen = process.returncode, output.decode(errors="replace")
        logger.info(f"exit code {self._code}\n{self._screen}")

    # -- actions --------------------------------------------------------------------------------

    @keyword
    def terminate_run_in_a_terminal_when_the_mcp_tool_starts(
        self, actor: str, message: str
    ) -> None:
        """Runs `cleveractors run` in a pseudo-terminal, without the venv on PATH; sends SIGTERM
        once the MCP server logged the call's start; keeps what the terminal showed until the
        exit and, separately, in the second after it."""
        controller, terminal = pty.openpty()
        process = subprocess.Popen(
            [str(COMMAND), "run", actor, message],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            env=_environment(),
        )
        os.close(terminal)
        screen = bytearray()
        reader = threading.Thread(target=_read_all, args=(controller, screen), daemon=True)
        reader.start()
        try:
            self._wait_for_log(Path(actor).parent / "mcp.log", "slow started")
            process.send_signal(signal.SIGTERM)
            self._code = process.wait(timeout=TIMEOUT_S)
            reader.join(timeout=AFTER_EXIT_S)
            at_exit = len(screen)
            time.sleep(AFTER_EXIT_S)  # a holder left behind (a child) may still print
        finally:
            if process.poll() is None:
                process.kill()
        self._terminal_held = reader.is_alive()
        self._screen = _clean(bytes(screen[:at_exit]))
        self._after_exit = _clean(bytes(screen[at_exit:]))
        with contextlib.suppress(OSError):
            os.close(controller)
        logger.info(
            f"exit code {self._code}\n{self._screen}\n--- after exit ---\n{self._after_exit}"
        )

    @keyword
    def serve_actor(self, actor: str, *options: str) -> str:
        """Starts `cleveractors serve ACTOR OPTIONS` on a free port; its URL once it answers."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        command = [str(COMMAND), "serve", actor, "--port", str(port), *options]
        self._serving = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_environment()
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + TIMEOUT_S
        while self._serving.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url, timeout=1).close()
                return url
            time.sleep(0.1)
        raise RuntimeError(f"cleveractors serve did not answer on {url}")

    @keyword
    def start_a_chat_stream(self, url: str, message: str) -> None:
        """POSTs MESSAGE to /chat in the background, keeping the stream's bytes as they come."""
        self.start_a_stream(url, "/chat", message)

    @keyword
    def start_a_stream(self, url: str, route: str, message: str) -> None:
        """POSTs MESSAGE to ROUTE (`/chat`, `/v1/chat/completions`, `/ai-sdk`, `/ag-ui`) in the
        route's own body, in the background, keeping the stream's bytes as they come."""
        body = json.dumps(_STREAM_BODIES[route](message)).encode()
        request = urllib.request.Request(
            url + route,
            data=body,
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )

        def read() -> None:
            # A stream cut when the server stops ends without its last chunk.
            with (
                contextlib.suppress(OSError, http.client.IncompleteRead),
                urllib.request.urlopen(request) as response,
            ):
                while chunk := response.read1(4096):
                    self._stream.append(chunk)

        self._stream_reader = threading.Thread(target=read, daemon=True)
        self._stream_reader.start()

    @keyword
    def terminate_serving_when_the_mcp_tool_starts(self, actor: str) -> None:
        """Sends SIGTERM to `serve` once the MCP server logged the call's start; waits for the
        exit and the stream's end."""
        assert self._serving is not None, "serve was not started"
        self._wait_for_log(Path(actor).parent / "mcp.log", "slow started")
        self._serving.send_signal(signal.SIGTERM)
        output, _ = self._serving.communicate(timeout=TIMEOUT_S)
        self._code = self._serving.returncode
        self._screen = output.decode(errors="replace")
        if self._stream_reader is not None:
            self._stream_reader.join(timeout=TIMEOUT_S)
        logger.info(f"exit code {self._code}\n{self._screen}\n--- stream ---\n{self.stream()}")

    @keyword
    def terminate_serving_when_the_stream_shows(self, text: str) -> None:
        """Sends SIGTERM to `serve` once the stream holds TEXT; waits for the exit and the
        stream's end."""
        assert self._serving is not None, "serve was not started"
        deadline = time.monotonic() + TIMEOUT_S
        while text not in self.stream() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._serving.send_signal(signal.SIGTERM)
        output, _ = self._serving.communicate(timeout=TIMEOUT_S)
        self._code = self._serving.returncode
        self._screen = output.decode(errors="replace")
        if self._stream_reader is not None:
            self._stream_reader.join(timeout=TIMEOUT_S)
        logger.info(f"exit code {self._code}\n{self._screen}\n--- stream ---\n{self.stream()}")

    @keyword
    def validate_in_another_path(self, actor: str) -> None:
        """Runs `cleveractors validate ACTOR` without the venv on PATH."""
        completed = subprocess.run(
            [str(COMMAND), "validate", actor],
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=TIMEOUT_S,
        )
        self._code, self._screen = completed.returncode, completed.stdout + completed.stderr
        logger.info(f"exit code {self._code}\n{self._screen}")

    @keyword
    def run_the_example_mcp_actor(self) -> dict[str, Any]:
        """Runs examples/mcp_weather_actor.yaml from the repo root (`--json`), without the venv
        on PATH; returns the result."""
        completed = subprocess.run(
            [str(COMMAND), "run", "examples/mcp_weather_actor.yaml", "Weather in Paris?", "--json"],
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=TIMEOUT_S,
            cwd=ROOT,
        )
        self._code, self._screen = completed.returncode, completed.stdout + completed.stderr
        logger.info(f"exit code {self._code}\n{self._screen}")
        result: dict[str, Any] = json.loads(completed.stdout)
        return result

    @keyword
    def docs_mcp_server_example_should_be_the_example_file(self) -> None:
        """Every line of the server in the MCP docs page is in the example server."""
        page = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
        block = page.partition("<!-- file: weather_server.py -->\n```python\n")[2].partition("```")[
            0
        ]
        example = (ROOT / "examples" / "mcp_weather_server.py").read_text(encoding="utf-8")
        missing = [line for line in block.splitlines() if line.strip() and line not in example]
        if not block.strip() or missing:
            raise AssertionError(f"docs lines not in the example server: {missing or block!r}")

    # -- checks ---------------------------------------------------------------------------------

    @keyword
    def exit_code_should_be(self, code: int) -> None:
        if self._code != int(code):
            raise AssertionError(f"exit code {self._code}, expected {code}:\n{self._screen}")

    @keyword
    def output_should_not_contain(self, text: str) -> None:
        if text in self._screen:
            raise AssertionError(f"{text!r} is in the output:\n{self._screen}")

    @keyword
    def output_should_contain(self, text: str) -> None:
        if text not in self._screen:
            raise AssertionError(f"{text!r} is not in the output:\n{self._screen}")

    @keyword
    def usage_table_total_should_be(self, total: int) -> None:
        """The `Token usage` table the command printed ends with a total of TOTAL tokens."""
        table = self._screen.partition("Token usage")[2]
        found = re.search(r"^\s*total\s+\d+ calls?\s+\d+\s+\d+\s+(\d+)", table, re.MULTILINE)
        if found is None or int(found.group(1)) != int(total):
            raise AssertionError(f"no usage total of {total}:\n{self._screen}")

    @keyword
    def nothing_should_be_printed_after_the_exit(self) -> None:
        """No process holds the terminal once the command has exited (so nothing can print
        there), and nothing was printed after it, nor a traceback at all."""
        if self._terminal_held or self._after_exit.strip() or "Traceback" in self._screen:
            raise AssertionError(
                f"terminal still held: {self._terminal_held}; printed after the exit:\n"
                f"{self._after_exit}\n--- before ---\n{self._screen}"
            )

    @keyword
    def ledger_should_bill_tokens(self, actor: str, total: int, runs: int = 1) -> None:
        """The actor's ledger holds TOTAL tokens, from RUNS run(s)."""
        completed = subprocess.run(
            [str(COMMAND), "usage", actor, "--json"],
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=TIMEOUT_S,
            check=True,
        )
        report: dict[str, Any] = json.loads(completed.stdout)
        billed_runs = {row["run_id"] for row in report["rows"]}
        if report["total_tokens"] != int(total) or len(billed_runs) != int(runs):
            raise AssertionError(f"ledger: {completed.stdout}")

    @keyword
    def streamed_total_tokens(self) -> int:
        """The run's total tokens, as the stream's last `usage_recorded` event gave them."""
        totals = re.findall(r'"total":\{[^}]*"total_tokens":(\d+)\}', self.stream())
        if not totals:
            raise AssertionError(f"no usage in the stream:\n{self.stream()}")
        return int(totals[-1])

    @keyword
    def mcp_servers_should_have_exited(self, actor: str) -> None:
        """Every MCP test server the actor started is gone from /proc, its call cancelled."""
        log = (Path(actor).parent / "mcp.log").read_text(encoding="utf-8")
        pids = [int(line.split()[1]) for line in log.splitlines() if line.startswith("pid ")]
        if not pids or any(Path(f"/proc/{pid}").exists() for pid in pids):
            raise AssertionError(f"MCP servers {pids} still running (or none started):\n{log}")

    @keyword
    def stream_should_end_with(self, *texts: str) -> None:
        """The stream's last two events (SSE messages, `[DONE]` aside) hold every one of TEXTS:
        its terminal event, and the one before it (the AI SDK's `error` part comes before its
        `finish`)."""
        events = [event for event in self.stream().split("\n\n") if event.strip()]
        events = [event for event in events if event.strip() != "data: [DONE]"]
        last = "\n\n".join(events[-2:])
        missing = [text for text in texts if text not in last]
        if missing:
            raise AssertionError(f"{missing} not in the last event {last!r} of:\n{self.stream()}")

    @keyword
    def stream(self) -> str:
        return b"".join(self._stream).decode(errors="replace")

    # -- helpers --------------------------------------------------------------------------------

    def _new_folder(self) -> Path:
        output = Path(BuiltIn().get_variable_value("${OUTPUT DIR}"))
        name = re.sub(r"\W+", "_", BuiltIn().get_variable_value("${TEST NAME}", "suite"))
        folder = output / "signals" / name
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.iterdir():
            stale.unlink()
        return folder

    @staticmethod
    def _wait_for_log(log: Path, text: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if log.exists() and text in log.read_text(encoding="utf-8"):
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared in {log}")


_STREAM_BODIES: dict[str, Any] = {
    "/chat": lambda message: {"message": message},
    "/v1/chat/completions": lambda message: {
        "model": "slow-mcp",
        "messages": [{"role": "user", "content": message}],
        "stream": True,
    },
    "/ai-sdk": lambda message: {
        "id": "chat-1",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": message}]}],
    },
    "/ag-ui": lambda message: {
        "threadId": "thread-1",
        "runId": "client-run-1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": message}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    },
}
"""Each streaming route's body for one user message."""


def _write(path: Path, config: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return str(path)


def _environment() -> dict[str, str]:
    """Our environment without the venv's bin folder on PATH: `python` is not ours there."""
    bin_folder = str(COMMAND.parent)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bin_folder
    )
    return {**os.environ, "PATH": path, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}


def _read_all(controller: int, screen: bytearray) -> None:
    with contextlib.suppress(OSError):  # EIO: every process holding the terminal has closed it
        while chunk := os.read(controller, 4096):
            screen += chunk


def _clean(raw: bytes) -> str:
    return _ESCAPE.sub("", raw.decode("utf-8", errors="replace")).replace("\r", "\n")
