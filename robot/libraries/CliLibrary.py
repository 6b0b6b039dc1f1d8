"""Keywords for the `cleveractors` command line, run as a real subprocess (the console script).

Actors are written as YAML under the test output; their scripts are the source of truth for the
answer and the tokens, as is the scripted OpenAI-compatible server's billing record when the CLI
talks to it with `--base-url`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError
from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

from cleveractors.events import Event, event_adapter
from cleveractors.result import ExecutionResult
from cleveractors.testing import ScriptedOpenAIServer, ScriptedReply

ROOT = Path(__file__).resolve().parents[2]
DEMO_ACTOR = ROOT / "examples" / "demo_actor.yaml"
ACTORS = ROOT / "robot" / "actors"
COMMAND = Path(sys.executable).parent / "cleveractors"
TIMEOUT_S = 60
# Counts: prompt, completion, the detail columns the run has (cached, reasoning...), total; then
# the cost in USD ("n/a" when unknown) and the estimate marker.
_ROW = re.compile(
    r"^\s*(\d+)\s+(round|synthesis|pruning)\s+(\d+)\s+([\d ]+?)\s+(n/a|\d+\.\d+)\s*(\S*)\s*$"
)
_TOTAL = re.compile(r"^\s*total\s+(\d+) calls?\s+([\d ]+?)\s+(n/a|\d+\.\d+)\s*(\S*)\s*$")
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_replies = TypeAdapter(list[ScriptedReply])


@dataclass(frozen=True)
class UsageRow:
    """One row of the usage table the CLI printed."""

    label: str
    prompt: int
    completion: int
    total: int
    estimated: bool
    details: tuple[int, ...] = ()
    """The cached / cache-write / reasoning counts, those the table shows."""
    cost_usd: Decimal | None = None


@dataclass(frozen=True)
class UsageTable:
    calls: list[UsageRow]
    total: UsageRow


@library(scope="SUITE")
class CliLibrary:
    """Runs `cleveractors` and checks what a user would see: the answer, tools, usage, errors."""

    def __init__(self) -> None:
        self._completed: subprocess.CompletedProcess[str] | None = None
        self._server: ScriptedOpenAIServer | None = None
        self._serving: subprocess.Popen[str] | None = None
        self._written = 0
        self._held: list[socket.socket] = []
        self._served_output = ""
        self._terminal: _TerminalSession | None = None

    # -- setup (never asserts) ------------------------------------------------------------------

    @keyword
    def demo_actor(self) -> str:
        """The path of the offline demo actor the README Quickstart runs."""
        return str(DEMO_ACTOR)

    @keyword
    def demo_actor_without_delays(self) -> str:
        """Writes the demo actor with its scripted pauses between chunks removed (faster tests)."""
        config = _read_yaml(str(DEMO_ACTOR))
        script = [{**reply, "chunk_delay_s": 0} for reply in config["agent"]["script"]]
        return self._write_actor({**config, "agent": {**config["agent"], "script": script}})

    @keyword
    def remote_copy_of_actor(self, actor: str) -> str:
        """Writes the actor with provider `openai` (no script), for a scripted server to answer."""
        config = _read_yaml(actor)
        agent = dict(config["agent"], provider="openai", model="scripted", max_retries=0)
        agent.pop("script")
        return self._write_actor({**config, "agent": agent})

    @keyword
    def start_scripted_openai_server(self, actor: str) -> str:
        """Starts an OpenAI-compatible server on 127.0.0.1 replaying the actor's script.

        Returns its base URL, for `--base-url`.
        """
        self._server = ScriptedOpenAIServer(scripted_replies(actor))
        self._server.start()
        return self._server.base_url

    @keyword
    def stop_scripted_openai_server(self) -> None:
        """Stops the scripted server, if one runs."""
        if self._server is not None:
            self._server.stop()

    @keyword
    def actor_whose_model_fails_after_a_tool_round(self) -> str:
        """Writes an actor whose second model call fails with a provider error `boom`."""
        return self._write_stub_actor(
            [
                {
                    "text": "Let me look.",
                    "tool_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}],
                    "prompt_tokens": 31,
                    "completion_tokens": 9,
                },
                {"error": "boom"},
            ],
            max_retries=0,  # the error reaches the user, not retried by the loop
        )

    @keyword
    def actor_whose_answer_is_cut_off(self) -> str:
        """Writes an actor whose streamed answer breaks off after three chunks, before its usage."""
        return self._write_stub_actor(
            [{"text": "It is sunny and warm in Paris today.", "cut_off_after_chunks": 3}]
        )

    @keyword
    def actor_that_reaches_its_limits(self) -> str:
        """Writes an actor that meets every limit in one message.

        Round 1 calls `get_weather` twice, once with arguments that are not JSON (that call
        fails); the good call's output is over `tool_output_max_tokens`, so it is condensed
        (reply 2); round 2 asks for another call past `max_tool_rounds: 1`, so the model is
        asked for a synthesis answer (reply 4).
        """
        replies = [
            {
                "text": "Checking.",
                "tool_calls": [
                    {"name": "get_weather", "args": {"city": "Paris"}},
                    {"name": "get_weather", "args": '{"city": '},
                ],
            },
            {"text": "Paris: 18 C, light rain."},
            {"tool_calls": [{"name": "get_weather", "args": {"city": "Rome"}}]},
            {"text": "Paris has light rain at 18 C; Rome could not be looked up."},
        ]
        return self._write_stub_actor(replies, max_tool_rounds=1, tool_output_max_tokens=5)

    @keyword
    def actor_with_a_tool_that_ends_the_turn(self) -> str:
        """Writes an actor whose `convert_temperature` ends the turn before `get_weather` runs."""
        tools = [
            {
                "name": "convert_temperature",
                "handler": "cleveractors.demo:convert_temperature",
                "ends_turn": True,
            },
            {"name": "get_weather", "handler": "cleveractors.demo:get_weather"},
        ]
        calls = [
            {"name": "convert_temperature", "args": {"celsius": 18, "to": "fahrenheit"}},
            {"name": "get_weather", "args": {"city": "Paris"}},
        ]
        return self._write_stub_actor([{"tool_calls": calls}], tools=tools)

    @keyword
    def scripted_reply_text(self, actor: str, position: int) -> str:
        """The text of the actor's scripted reply at this position, from 1."""
        return scripted_replies(actor)[position - 1].text

    @keyword
    def actor_with_a_long_running_tool(self) -> str:
        """Writes an actor that calls a tool sleeping for a minute (to be interrupted)."""
        wait = {
            "name": "wait",
            "handler": "asyncio:sleep",
            "parameters": {"type": "object", "properties": {"delay": {"type": "number"}}},
        }
        replies = [
            {
                "text": "Waiting.",
                "tool_calls": [{"name": "wait", "args": {"delay": 60}}],
                "prompt_tokens": 23,
                "completion_tokens": 4,
            },
            {"text": "Done."},
        ]
        return self._write_stub_actor(replies, tools=[wait])

    @keyword
    def actor_with_mistyped_field_and_unimportable_handler(self) -> str:
        """Writes an actor with `tool_max_round` (for `max_tool_rounds`) and a missing module."""
        tool = {"name": "get_weather", "handler": "nowhere.weather:get_weather"}
        return self._write_stub_actor([{"text": "Hi."}], tools=[tool], tool_max_round=3)

    @keyword
    def actor_with_five_problems(self) -> str:
        """Writes an actor with a mistyped temperature, an unknown key, a repeated tool name, a
        tool that ends the turn and is concurrent, and a scripted call of an undeclared tool."""
        tools = [
            {"name": "get_weather", "handler": "cleveractors.demo:get_weather"},
            {
                "name": "get_weather",
                "handler": "cleveractors.demo:book_table",
                "ends_turn": True,
                "concurrent": True,
            },
        ]
        script = [{"tool_calls": [{"name": "get_wether", "args": {"city": "Paris"}}]}]
        return self._write_stub_actor(script, tools=tools, temperature="hot", colour="blue")

    @keyword
    def openai_actor_with_a_bad_field_and_an_unimportable_handler(self) -> str:
        """Writes an `openai` actor with a mistyped temperature and a tool whose handler cannot
        be imported: two problems the fields alone do not show together."""
        agent = {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "PATH",
            "temperature": "hot",
            "tools": [{"name": "get_weather", "handler": "nowhere.weather:get_weather"}],
        }
        return self._write_actor({"name": "two-problems", "agent": agent})

    @keyword
    def actor_with_the_old_name_of_max_tool_rounds(self) -> str:
        """Writes an actor that sets `tool_max_rounds`, the deprecated name of `max_tool_rounds`."""
        return self._write_stub_actor([{"text": "Hi."}], tool_max_rounds=2)

    @keyword
    def actor_whose_script_calls_a_tool_with_arguments_its_schema_refuses(self) -> str:
        """Writes an actor whose second reply calls `get_weather` with a number for `city`."""
        return self._write_stub_actor(
            [
                {"text": "Hello."},
                {"tool_calls": [{"name": "get_weather", "args": {"city": 42}}]},
                {"text": "Done."},
            ]
        )

    @keyword
    def remote_actor_without_a_model_and_with_a_mistyped_field(self) -> str:
        """Writes an `openai` actor with no `model` and `tool_max_round` (a misspelt key)."""
        agent = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "tool_max_round": 3}
        return self._write_actor({"name": "modelless", "agent": agent})

    @keyword
    def actor_with_unimportable_handlers(self) -> str:
        """Writes an actor whose two tools' handlers cannot be imported, for different reasons."""
        tools = [
            {"name": "get_weather", "handler": "nowhere.weather:get_weather"},
            {"name": "convert", "handler": "cleveractors.demo:no_such_function"},
        ]
        return self._write_stub_actor([{"text": "Hi."}], tools=tools)

    @keyword
    def actor_with_a_handler_module_beside_it(self) -> str:
        """Writes `mytools.py` and an actor using `mytools:add` into a folder of their own."""
        folder = self._output_folder("beside") / f"actor-{time.time_ns()}"
        folder.mkdir(parents=True)
        (folder / "mytools.py").write_text(
            'def add(a: int, b: int) -> int:\n    "Add two numbers."\n    return a + b\n',
            encoding="utf-8",
        )
        config = {
            "name": "calculator",
            "agent": {
                "provider": "stub",
                "tools": [{"name": "add", "handler": "mytools:add"}],
                "script": [
                    {"tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}}]},
                    {"text": "2 + 3 is 5."},
                ],
            },
        }
        path = folder / "actor.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return str(path)

    @keyword
    def actor_with_a_store_beside_it(self, retention_days: int | None = None) -> str:
        """Writes an actor whose `store.url` is the relative `sqlite:///shop.db`, into a folder
        of its own; its stub answers every run "Noted." for 10 + 3 tokens. Returns the actor's
        path, resolved."""
        folder = (self._output_folder("stored") / f"actor-{time.time_ns()}").resolve()
        folder.mkdir(parents=True)
        store: dict[str, Any] = {"url": "sqlite:///shop.db"}
        if retention_days is not None:
            store["retention_days"] = int(retention_days)
        config = {
            "name": "shop",
            "agent": {
                "provider": "stub",
                "script": [{"text": "Noted.", "prompt_tokens": 10, "completion_tokens": 3}],
            },
            "store": store,
        }
        path = folder / "shop.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return str(path)

    @keyword
    def age_stored_sessions(self, database: str, days: int) -> None:
        """Makes every session in the SQLite file DATABASE look untouched for DAYS days."""
        import sqlite3  # the test's own view of the file

        with contextlib.closing(sqlite3.connect(database)) as connection, connection:
            connection.execute(
                "UPDATE cleveractors_sessions SET updated_at = datetime(updated_at, ?)",
                (f"-{int(days)} days",),
            )

    @keyword
    def another_folder(self) -> str:
        """An empty folder to run commands in, away from the actors."""
        folder = self._output_folder("elsewhere") / f"cwd-{time.time_ns()}"
        folder.mkdir(parents=True)
        return str(folder)

    @keyword
    def actor_with_a_failing_tool(self) -> str:
        """Writes an actor whose one tool call fails (arguments that are not JSON)."""
        replies = [
            {"tool_calls": [{"name": "get_weather", "args": '{"city": '}]},
            {"text": "I could not look it up."},
        ]
        return self._write_stub_actor(replies)

    @keyword
    def demo_actor_with_a_store(self) -> str:
        """Writes the demo actor, without delays, with a SQLite store of its own."""
        config = _read_yaml(self.demo_actor_without_delays())
        database = self._output_folder("cli-stores") / f"store-{time.time_ns()}.db"
        return self._write_actor({**config, "store": {"url": f"sqlite:///{database}"}})

    @keyword
    def actor_with_text_before_a_failing_tool(self) -> str:
        """Writes an actor that says a sentence, then makes a tool call that fails (arguments
        that are not JSON)."""
        replies = [
            {
                "text": "Let me look that up.",
                "tool_calls": [{"name": "get_weather", "args": '{"city": '}],
            },
            {"text": "I could not look it up."},
        ]
        return self._write_stub_actor(replies)

    @keyword
    def run_library_script_without_logging(self, actor: str) -> None:
        """Runs a Python script that uses the library on ACTOR and configures no logging."""
        code = (
            "import asyncio\n"
            "from cleveractors import ActorExecutor\n"
            "async def main() -> None:\n"
            f"    async with ActorExecutor.from_config({actor!r}) as executor:\n"
            "        print((await executor.execute('Weather in Paris?')).answer)\n"
            "asyncio.run(main())\n"
        )
        self._completed = _run([sys.executable, "-c", code])

    @keyword
    def openai_actor_with_base_url(self, base_url: str) -> str:
        """Writes an `openai` actor whose server is BASE_URL, with no retries."""
        agent = {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "base_url": base_url,
            "max_retries": 0,
        }
        return self._write_actor({"name": "remote", "agent": agent})

    @keyword
    def closed_local_url(self) -> str:
        """A URL on 127.0.0.1 where nothing listens."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    @keyword
    def hold_a_busy_port(self) -> int:
        """Listens on a free port of 127.0.0.1 (until the suite ends); returns the port."""
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        self._held.append(holder)
        return int(holder.getsockname()[1])

    @keyword
    def release_busy_ports(self) -> None:
        """Stops listening on the ports `Hold A Busy Port` took."""
        while self._held:
            self._held.pop().close()

    @keyword
    def remote_actor_without_api_key(self) -> str:
        """Writes an `openai` actor whose API key variable is not set."""
        return self._write_actor(
            {
                "name": "keyless",
                "agent": {
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                    "api_key_env": "CLEVERACTORS_TEST_UNSET_KEY",
                },
            }
        )

    @keyword
    def folder_of(self, path: str) -> str:
        """The folder a file is in, as the CLI names it."""
        return str(Path(path).parent)

    @keyword
    def module_file_of(self, module: str) -> str:
        """Where an installed module's source file is."""
        return str(importlib.import_module(module).__file__)

    @keyword
    def scripted_answer_of(self, actor: str) -> str:
        """The text of the last reply in the actor's script: the answer a run should show."""
        return scripted_replies(actor)[-1].text

    @keyword
    def scripted_tokens_before_failure(self, actor: str) -> int:
        """The tokens the script's replies report before its first failing or unfinished call."""
        total = 0
        for reply in scripted_replies(actor):
            if reply.error is not None or reply.prompt_tokens is None:
                break
            total += reply.prompt_tokens + (reply.completion_tokens or 0)
        return total

    @keyword
    def actor_whose_refunds_need_approval(
        self, store: bool = True, timeout_s: float | None = None, calls: int = 1
    ) -> str:
        """Copies robot/actors/cli_approvals.yaml and its refund tool (whose every call is gated)
        into a folder of their own, with its SQLite store there unless STORE is false; the tool
        records its refunds beside itself. TIMEOUT_S sets `approval_timeout_s`. With CALLS 2,
        the model asks for a second refund (15 on order B2, `call_refund_b2`) in the same
        round."""
        folder = (self._output_folder("approvals") / f"actor-{time.time_ns()}").resolve()
        folder.mkdir(parents=True)
        shutil.copy(ACTORS / "cli_refunds.py", folder)
        config = _read_yaml(str(ACTORS / "cli_approvals.yaml"))
        if not store:
            config.pop("store")
        if timeout_s is not None:
            config["agent"]["approval_timeout_s"] = float(timeout_s)
        if int(calls) == 2:
            second = {
                "name": "refund",
                "args": {"order": "B2", "amount": 15},
                "id": "call_refund_b2",
            }
            config["agent"]["script"][0]["tool_calls"].append(second)
        path = folder / "refunds.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return str(path)

    @keyword
    def refunds_made_by(self, actor: str) -> list[str]:
        """The refunds the actor's tool made (`ORDER AMOUNT`), in order; none if it never ran."""
        made = Path(actor).with_name("refunds.log")
        return made.read_text(encoding="utf-8").splitlines() if made.exists() else []

    @keyword
    def tool_output_read_in_session(self, actor: str, session: str) -> str:
        """What the model read as the last tool result of the actor's stored SESSION (as the
        next turn reads it too)."""
        from langchain_core.messages import ToolMessage

        from cleveractors.config import load_actor_config
        from cleveractors.store import SqlStore

        config = load_actor_config(actor)
        assert config.store is not None, f"{actor} has no store"
        store = SqlStore.from_config(config.store, config_dir=Path(actor).parent)

        async def read() -> list[Any]:
            async with store:
                return await store.history(session)

        turns = asyncio.run(read())
        outputs = [m.content for t in turns for m in t.messages if isinstance(m, ToolMessage)]
        if not outputs:
            raise AssertionError(f"session {session!r} holds no tool result: {turns}")
        return str(outputs[-1])

    # -- actions ----------------------------------------------------------------------------------

    @keyword
    def run_cleveractors(self, *arguments: str) -> None:
        """Runs the `cleveractors` console script with these arguments and waits for it."""
        self._completed = _run([str(COMMAND), *arguments])

    @keyword
    def run_cleveractors_without_a_terminal(self, *arguments: str) -> None:
        """Runs `cleveractors ARGUMENTS` with standard input not a terminal (as from a script
        or CI) and waits for it."""
        self._completed = _run([str(COMMAND), *arguments], stdin=subprocess.DEVNULL)

    @keyword
    def start_cleveractors_in_a_terminal(self, *arguments: str) -> None:
        """Starts `cleveractors ARGUMENTS` on a pseudo-terminal of its own, to be answered with
        `Type In Terminal` and read with `Terminal Should Show`."""
        self._terminal = _TerminalSession([str(COMMAND), *arguments])

    @keyword
    def type_in_terminal(self, line: str) -> None:
        """Types LINE and Enter."""
        self._chat().send(line + "\r")

    @keyword
    def end_input_in_terminal(self) -> None:
        """Presses Ctrl-D at the start of a line (the end of input)."""
        self._chat().send("\x04")

    @keyword
    def terminal_should_show(self, text: str) -> str:
        """Waits until the terminal shows TEXT after what was already read; returns what it
        showed up to and including it."""
        return self._chat().expect(text)

    @keyword
    def terminate_the_terminal_command(self) -> None:
        """Sends SIGTERM to the command on the terminal (as `timeout` or `docker stop` would)."""
        self._chat().terminate()

    @keyword
    def terminal_command_should_exit_with_code(self, code: int) -> str:
        """Waits for the exit; returns everything the terminal showed."""
        returned = self._chat().wait()
        if returned != int(code):
            raise AssertionError(f"the command exited with {returned}, not {code}")
        return self._chat().screen

    @keyword
    def paused_run_id_should_be_printed(self, calls: int = 1) -> str:
        """Standard output says a run paused for CALLS call(s); returns its run id."""
        plural = "" if int(calls) == 1 else "s"
        pattern = rf"^paused: run (run_\w+) waits for approval of {int(calls)} call{plural}$"
        shown = self._last().stdout + self._last().stderr
        found = re.search(pattern, shown, re.MULTILINE)
        if found is None:
            raise AssertionError(f"no paused run is named in:\n{shown}")
        return found.group(1)

    @keyword
    def pending_call_should_be_printed(self, call_id: str, tool: str, arguments: str) -> None:
        """A line names the pending call: its id, tool, ARGUMENTS (JSON, keys sorted) and the
        digest a decision binds to."""
        from cleveractors.approvals import call_digest

        digest = call_digest(tool, json.loads(arguments))
        self._should_show_line(
            f"  call {call_id}  tool {tool}  arguments {arguments}  digest {digest}"
        )

    @keyword
    def run_actor(self, actor: str, message: str, *options: str) -> None:
        """Runs `cleveractors run ACTOR MESSAGE [OPTIONS]`."""
        self.run_cleveractors("run", actor, message, *options)

    @keyword
    def run_cleveractors_in_folder(self, folder: str, *arguments: str) -> None:
        """Runs the `cleveractors` console script with FOLDER as its working directory."""
        self._completed = _run([str(COMMAND), *arguments], cwd=folder)

    @keyword
    def run_docs_snippet(self, page: str, section_title: str, actor: str) -> None:
        """Runs the first Python snippet of section SECTION_TITLE of the docs page PAGE (under
        docs/), verbatim except that its `actor.yaml` is ACTOR, as a user pasting it into a
        file would."""
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        section = text.split(f"\n## {section_title}\n", 1)[1]
        snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
        code = snippet.replace('"actor.yaml"', repr(actor))
        self._completed = _run([sys.executable, "-c", code])

    @keyword
    def run_cleveractors_in_a_terminal(self, *arguments: str) -> None:
        """Runs `cleveractors ARGUMENTS` attached to a pseudo-terminal, as a user at a shell
        would. Standard output and error both go to the terminal; both are kept, escape codes
        removed."""
        self._completed = _run_in_terminal([str(COMMAND), *arguments])

    @keyword
    def run_cleveractors_without_module(self, module: str, *arguments: str) -> None:
        """Runs the CLI in a Python where `module` cannot be imported, as if an extra is missing."""
        code = (
            f"import sys; sys.modules[{module!r}] = None; "
            "sys.argv = ['cleveractors', *sys.argv[1:]]; "
            "from cleveractors.cli import main; main()"
        )
        self._completed = _run([sys.executable, "-c", code, *arguments])

    @keyword
    def run_actor_in_a_terminal(self, actor: str, message: str, *options: str) -> None:
        """Runs `cleveractors run` attached to a pseudo-terminal, as a user at a shell would.

        Standard output and error both go to the terminal; both are kept, escape codes removed.
        """
        self._completed = _run_in_terminal([str(COMMAND), "run", actor, message, *options])

    @keyword
    def interrupt_actor_run_when_a_tool_starts(self, actor: str, message: str) -> None:
        """Runs the actor, presses Ctrl-C (SIGINT) once a tool has started, waits for the exit."""
        process = subprocess.Popen(
            [str(COMMAND), "run", actor, message],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
            # A shell may start tests with SIGINT ignored; the CLI must see the key press.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        watchdog = threading.Timer(TIMEOUT_S, process.kill)
        watchdog.start()
        try:
            assert process.stdout is not None
            seen = []
            while line := process.stdout.readline():
                seen.append(line)
                if " started" in line:
                    process.send_signal(signal.SIGINT)
                    break
            stdout, stderr = process.communicate(timeout=TIMEOUT_S)
        finally:
            watchdog.cancel()
        self._completed = subprocess.CompletedProcess(
            process.args, process.returncode, "".join(seen) + stdout, stderr
        )
        _log(self._completed)

    @keyword
    def start_serving_actor(self, actor: str, folder: str | None = None) -> str:
        """Starts `cleveractors serve ACTOR` on a free local port, in FOLDER when given; returns
        its URL once it is up."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._serving = subprocess.Popen(
            [str(COMMAND), "serve", actor, "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_environment(),
            cwd=folder,
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
    def stop_serving(self) -> None:
        """Stops the served app as Ctrl-C would, and waits for it to exit."""
        if self._serving is not None and self._serving.poll() is None:
            self._serving.send_signal(signal.SIGINT)
            output, _ = self._serving.communicate(timeout=TIMEOUT_S)
            logger.info(f"cleveractors serve exited with {self._serving.returncode}:\n{output}")
            self._served_output = output

    @keyword
    def served_output_should_show(self, text: str) -> None:
        """What `cleveractors serve` printed (read once it stopped) contains TEXT."""
        if text not in self._served_output:
            raise AssertionError(f"{text!r} is not in the output of serve:\n{self._served_output}")

    @keyword
    def chat_page_should_name_actor(self, url: str, name: str) -> None:
        """The page at `/` is HTML that shows the actor's name."""
        with urllib.request.urlopen(url + "/", timeout=TIMEOUT_S) as response:
            page = response.read().decode("utf-8")
            kind = response.headers.get_content_type()
        if kind != "text/html" or name not in page:
            raise AssertionError(f"the page at {url}/ ({kind}) does not name {name!r}")

    # -- checks -----------------------------------------------------------------------------------

    @keyword
    def command_should_succeed(self) -> None:
        """The command exited with 0."""
        completed = self._last()
        if completed.returncode != 0:
            raise AssertionError(
                f"cleveractors exited with {completed.returncode}: {completed.stderr.strip()}"
            )

    @keyword
    def command_should_fail_with_exit_code(self, code: int) -> None:
        """The command exited with this (non-zero) code."""
        if self._last().returncode != code:
            raise AssertionError(f"exit code was {self._last().returncode}, expected {code}")

    @keyword
    def output_should_show_answer(self, answer: str) -> None:
        """Standard output contains the answer's text, word for word."""
        if " ".join(answer.split()) not in " ".join(self._last().stdout.split()):
            raise AssertionError(f"output does not show the answer {answer!r}")

    @keyword
    def output_should_show_tool_call(self, name: str, **arguments: object) -> None:
        """A line says the call started and a later one that it finished, with a duration."""
        label = _call_label(name, arguments)
        shown = self._last().stdout
        started = re.search(rf"^tool {re.escape(label)} started$", shown, re.MULTILINE)
        finished = re.search(_finished_line(label), shown, re.MULTILINE)
        if started is None or finished is None or finished.start() < started.start():
            raise AssertionError(f"output does not show tool call {label} starting, then finishing")

    @keyword
    def output_should_show_finished_tool_call(self, name: str, **arguments: object) -> None:
        """A line says the call finished, with a duration (for runs that show no progress)."""
        label = _call_label(name, arguments)
        if re.search(_finished_line(label), self._last().stdout, re.MULTILINE) is None:
            raise AssertionError(f"output does not show tool call {label} finished")

    @keyword
    def output_should_show_failed_tool_call(self, name: str, raw_arguments: str) -> None:
        """A line says the call (with arguments that are not a JSON object) failed, and why."""
        label = f"{name}({raw_arguments})"
        pattern = rf"^tool {re.escape(label)} failed in \d+\.\d\ds: \S.*$"
        if re.search(pattern, self._last().stdout, re.MULTILINE) is None:
            raise AssertionError(f"output does not show tool call {label} failing")

    @keyword
    def output_should_show_skipped_tool_call(self, name: str, **arguments: object) -> None:
        """A line says the call was skipped."""
        self._should_show_line(f"tool {_call_label(name, arguments)} skipped")

    @keyword
    def output_should_show_condensed_output_of(self, name: str) -> None:
        """A line says the output of this tool was condensed for the model."""
        self._should_show_line(rf"output of {name} condensed \(\d+ tokens\)", is_pattern=True)

    @keyword
    def output_should_show_synthesis_because(self, reason: str) -> None:
        """A line says a limit was reached and the model answers without tools."""
        self._should_show_line(f"limit reached ({reason}): answering without tools")

    @keyword
    def output_should_show_line(self, expected: str) -> None:
        """Some line of standard output reads EXPECTED (spacing aside)."""
        wanted = " ".join(expected.split())
        if all(" ".join(line.split()) != wanted for line in self._last().stdout.splitlines()):
            raise AssertionError(f"no line reads {wanted!r}:\n{self._last().stdout}")

    @keyword
    def error_output_should_not_contain(self, text: str) -> None:
        """Standard error does not contain this text anywhere."""
        if text in self._last().stderr:
            raise AssertionError(f"error output shows {text!r}:\n{self._last().stderr}")

    @keyword
    def output_should_not_show(self, text: str) -> None:
        """Standard output does not contain this text anywhere."""
        if text in self._last().stdout:
            raise AssertionError(f"output shows {text!r}")

    @keyword
    def usage_table(self, stream: str = "stdout") -> UsageTable:
        """Reads the usage table the command printed on `stdout` or `stderr`."""
        return parse_usage_table(getattr(self._last(), stream))

    @keyword
    def usage_table_total_should_be(self, total: int, stream: str = "stdout") -> None:
        """The table's total row shows this many tokens, and its calls add up to it."""
        table = self.usage_table(stream)
        if table.total.total != total:
            raise AssertionError(f"usage table total is {table.total.total}, expected {total}")
        _table_should_add_up(table)

    @keyword
    def usage_table_should_list_every_scripted_call(self, actor: str) -> None:
        """One row per reply of the actor's script (one LLM call each), adding up to the total."""
        table = self.usage_table()
        replies = len(scripted_replies(actor))
        if [row.label for row in table.calls] != [str(n) for n in range(1, replies + 1)]:
            raise AssertionError(f"usage table has rows {table.calls}, the script {replies} calls")
        _table_should_add_up(table)

    @keyword
    def usage_table_should_mark_estimated(self, stream: str = "stdout") -> None:
        """Every call row and the total row are marked `estimated`."""
        table = self.usage_table(stream)
        if not table.calls or not all(row.estimated for row in [*table.calls, table.total]):
            raise AssertionError(f"usage table does not mark every row estimated: {table}")

    @keyword
    def usage_table_should_match_result(self, result: ExecutionResult) -> None:
        """Each call row and the total row show the tokens the result records."""
        table = self.usage_table()
        expected = [
            (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens)
            for c in result.usage_by_call
        ]
        shown = [(row.prompt, row.completion, row.total) for row in table.calls]
        if shown != expected:
            raise AssertionError(f"usage rows {shown} differ from the result's calls {expected}")
        totals = (result.prompt_tokens, result.completion_tokens, result.total_tokens)
        if (table.total.prompt, table.total.completion, table.total.total) != totals:
            raise AssertionError(f"usage total {table.total} differs from the result's {totals}")
        _details_and_cost_should_match(table, result)

    @keyword
    def usage_table_should_match_billed_calls(self) -> None:
        """Each call row shows what the scripted server billed for that request, in order."""
        assert self._server is not None, "no scripted server was started"
        billed = [(c.prompt_tokens, c.completion_tokens) for c in self._server.billed]
        table = self.usage_table()
        shown = [(row.prompt, row.completion) for row in table.calls]
        if shown != billed or not billed:
            raise AssertionError(f"usage rows {shown} differ from the server's billing {billed}")
        self.usage_table_total_should_be(self._server.billed_total.total_tokens)

    @keyword
    def scripted_server_should_have_answered_without_streaming(self) -> None:
        """Every request the scripted server received asked for a whole (non-streamed) reply."""
        assert self._server is not None, "no scripted server was started"
        streamed = [body.get("stream", False) for body in self._server.requests]
        if not streamed or any(streamed):
            raise AssertionError(f"requests asked for streaming: {streamed}")

    @keyword
    def output_should_show_spinner(self, label: str) -> None:
        """A spinner line with this label was drawn (only on a terminal)."""
        if not re.search(rf"^\S {re.escape(label)}\s*$", self._last().stdout, re.MULTILINE):
            raise AssertionError(f"output shows no spinner {label!r}")

    @keyword
    def output_should_be_an_execution_result(self) -> ExecutionResult:
        """Standard output is one `ExecutionResult` as JSON; returns it."""
        try:
            return ExecutionResult.model_validate_json(self._last().stdout)
        except ValidationError as exc:
            raise AssertionError(f"output is not an ExecutionResult: {exc}") from None

    @keyword
    def result_should_record_tool_call(
        self, result: ExecutionResult, name: str, **arguments: object
    ) -> None:
        """The result records a successful call of this tool with these arguments."""
        calls = [(call.name, call.arguments, call.status) for call in result.tool_calls]
        if (name, arguments, "ok") not in calls:
            raise AssertionError(f"result has no ok call {name}({arguments}); it has {calls}")

    @keyword
    def output_should_be_event_lines(self) -> list[Event]:
        """Every line of standard output is one typed event as JSON; returns the events."""
        events = []
        for number, line in enumerate(self._last().stdout.splitlines(), start=1):
            try:
                events.append(event_adapter.validate_json(line))
            except ValidationError as exc:
                raise AssertionError(f"line {number} is not an event: {line!r}: {exc}") from None
        return events

    @keyword
    def events_should_include_kinds(self, events: list[Event], *kinds: str) -> None:
        """Each of these kinds occurs among the events."""
        seen = {event.kind for event in events}
        missing = [kind for kind in kinds if kind not in seen]
        if missing:
            raise AssertionError(f"events lack {missing}; kinds seen: {sorted(seen)}")

    @keyword
    def streamed_text_of_events(self, events: list[Event], round_number: int) -> str:
        """The text deltas of one round, joined."""
        return "".join(e.text for e in events if e.kind == "text_delta" and e.round == round_number)

    @keyword
    def error_output_should_be(self, message: str) -> None:
        """Standard error holds exactly one error line, `error: <message>`, and no traceback."""
        stderr = self._last().stderr
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        if "Traceback" in stderr or errors != [f"error: {message}"]:
            raise AssertionError(f"error output is not the one line 'error: {message}':\n{stderr}")

    @keyword
    def error_output_should_start_with(self, message: str) -> None:
        """Standard error holds exactly one error line, starting `error: <message>`."""
        stderr = self._last().stderr
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        if (
            "Traceback" in stderr
            or len(errors) != 1
            or not errors[0].startswith(f"error: {message}")
        ):
            raise AssertionError(f"error output is not one line 'error: {message}...':\n{stderr}")

    @keyword
    def error_output_should_be_the_problems_of(self, actor: str, lead: str, *problems: str) -> None:
        """Standard error is exactly LEAD (`INVALID:` or `error:`), the heading naming ACTOR and
        the number of problems, then each problem on a line of its own."""
        heading = f"{lead} {actor}: invalid actor config ({len(problems)} problem(s))"
        expected = [heading, *(f"  {problem}" for problem in problems)]
        lines = self._last().stderr.splitlines()
        if lines != expected:
            raise AssertionError(
                "error output is not:\n" + "\n".join(expected) + "\nbut:\n" + "\n".join(lines)
            )

    @keyword
    def error_output_should_list_problems(self, *problems: str) -> None:
        """Standard error says the config is invalid and lists these problems, one per line."""
        stderr = self._last().stderr
        lines = [line.strip() for line in stderr.splitlines()]
        missing = [problem for problem in problems if problem not in lines]
        if "Traceback" in stderr or not lines[0].startswith("INVALID: ") or missing:
            raise AssertionError(f"invalid-config report lacks {missing}:\n{stderr}")

    @keyword
    def served_actor_should_answer_requests_in_a_row(
        self, url: str, count: int, answer: str
    ) -> None:
        """COUNT requests one after another, alternating `/v1/chat/completions` and `/chat`,
        each answered with a text ending in ANSWER."""
        import httpx

        for number in range(1, int(count) + 1):
            if number % 2:
                response = httpx.post(
                    f"{url}/v1/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": "Weather?"}]},
                    timeout=TIMEOUT_S,
                )
                shown = (
                    response.json()["choices"][0]["message"]["content"]
                    if response.is_success
                    else ""
                )
            else:
                response = httpx.post(
                    f"{url}/chat", json={"message": "Weather?"}, timeout=TIMEOUT_S
                )
                last = [line for line in response.text.splitlines() if line.startswith("data:")][-1]
                shown = json.loads(last[len("data:") :])["result"]["answer"]
            if response.status_code != 200 or not shown.endswith(answer):
                raise AssertionError(
                    f"request {number} of {count}: {response.status_code} {response.text[:500]}"
                )

    @keyword
    def output_should_have_one_line_per_failed_call(self, name: str) -> None:
        """What the person saw names the failed call of NAME on exactly one line, and holds no
        log line (WARNING ...)."""
        shown = self._last().stdout
        lines = [line for line in shown.splitlines() if name in line and "failed" in line]
        if len(lines) != 1 or "WARNING" in shown:
            raise AssertionError(f"expected one line about the failed {name} call:\n{shown}")

    @keyword
    def output_lines_should_start_in_order(self, *starts: str) -> None:
        """Standard output has lines starting with each of STARTS, in this order."""
        lines = iter(self._last().stdout.splitlines())
        for start in starts:
            if not any(line.startswith(start) for line in lines):
                raise AssertionError(
                    f"no line starting {start!r} in order in:\n{self._last().stdout}"
                )

    @keyword
    def output_should_show_a_line_matching(self, pattern: str) -> None:
        """Standard output has a whole line matching the regular expression PATTERN."""
        self._should_show_line(pattern, is_pattern=True)

    @keyword
    def log_lines_should_stand_on_their_own(self, level: str) -> None:
        """Every line showing LEVEL (e.g. WARNING) on the terminal starts with it: no streamed
        text before it on its line."""
        lines = [line for line in self._last().stdout.splitlines() if f"{level} " in line]
        if not lines or any(not line.startswith(f"{level} ") for line in lines):
            raise AssertionError(f"{level} lines split the text:\n{self._last().stdout}")

    @keyword
    def served_output_should_have_a_line_matching(self, pattern: str) -> None:
        """What `cleveractors serve` printed has a line matching PATTERN (a regular expression)."""
        if re.search(pattern, self._served_output, re.MULTILINE) is None:
            raise AssertionError(f"no line matches {pattern!r} in:\n{self._served_output}")

    @keyword
    def error_output_should_be_empty(self) -> None:
        if self._last().stderr:
            raise AssertionError(f"standard error is not empty:\n{self._last().stderr}")

    @keyword
    def error_output_should_contain(self, text: str) -> None:
        """Standard error (or the terminal) contains TEXT."""
        if text not in self._last().stderr:
            raise AssertionError(f"{text!r} is not in:\n{self._last().stderr}")

    @keyword
    def output_should_contain_times(self, text: str, times: int) -> None:
        """Standard output contains TEXT exactly TIMES times."""
        found = self._last().stdout.count(text)
        if found != int(times):
            raise AssertionError(
                f"{text!r} is shown {found} times, not {times}:\n{self._last().stdout}"
            )

    @keyword
    def help_should_use_plain_metavars(self) -> None:
        """The help printed names values by plain metavars (`ACTOR`, `--session ID`): no Typer
        type label (`<str>`, `<list[str]>`, `ACTOR <path>`), no `{actor}`, and no `--no-` twin
        of a flag that is off by default."""
        shown = self._last().stdout
        labels = re.findall(r"<(?:str|int|float|bool|path|list\[\w+\])>|\{\w+\}| / --no-\w+", shown)
        if not shown.startswith("Usage: ") or labels:
            raise AssertionError(f"help shows {labels}:\n{shown}")

    @keyword
    def output_should_be(self, expected: str) -> None:
        """Standard output is exactly this line."""
        if self._last().stdout != expected + "\n":
            raise AssertionError(f"output was {self._last().stdout!r}, expected {expected!r}")

    @keyword
    def output_should_be_empty(self) -> None:
        if self._last().stdout:
            raise AssertionError(f"standard output is not empty:\n{self._last().stdout}")

    @keyword
    def error_output_should_be_lines(self, *lines: str) -> None:
        """Standard error is exactly these lines."""
        if self._last().stderr.splitlines() != list(lines):
            expected = "\n".join(lines)
            raise AssertionError(f"error output is not:\n{expected}\nbut:\n{self._last().stderr}")

    @keyword
    def output_should_list_tools(self, first_line: str, *tools: str) -> None:
        """Standard output is `first_line`, then one line per tool, `name [source] ...`, in this
        order; each tool is given as `name [source]`."""
        lines = self._last().stdout.splitlines()
        assert lines[0] == first_line, f"first line was {lines[0]!r}"
        listed = [" ".join(line.split("]")[0].split()) + "]" for line in lines[1:]]
        assert listed == list(tools), f"tools listed: {listed}"

    # -- a chat in a terminal ------------------------------------------------------------------

    @keyword
    def start_chat_in_a_terminal(self, actor: str, *options: str) -> None:
        """Starts `cleveractors chat ACTOR` on a pseudo-terminal of its own (its controlling
        terminal: Ctrl-C there is the user's key press), and waits for its first prompt."""
        self._terminal = _TerminalSession([str(COMMAND), "chat", actor, *options])
        self._terminal.expect(_PROMPT)

    @keyword
    def type_in_chat(self, line: str) -> None:
        """Types LINE and Enter at the prompt."""
        self._chat().send(line + "\r")

    @keyword
    def chat_should_show(self, text: str) -> str:
        """Waits until the chat shows TEXT after what was already read; returns what the chat
        showed up to and including it."""
        return self._chat().expect(text)

    @keyword
    def chat_should_prompt_again(self) -> str:
        """Waits for the next prompt; returns what the chat showed before it."""
        return self._chat().expect(_PROMPT)

    @keyword("Press Ctrl-C In Chat")
    def press_ctrl_c_in_chat(self) -> None:
        """Presses Ctrl-C on the chat's terminal (the terminal sends SIGINT)."""
        self._chat().send("\x03")

    @keyword
    def chat_should_exit_with_code(self, code: int) -> None:
        returned = self._chat().wait()
        if returned != int(code):
            raise AssertionError(f"chat exited with {returned}, not {code}")

    @keyword
    def stop_chat(self) -> None:
        """Ends the chat process, if it still runs (a teardown)."""
        if self._terminal is not None:
            self._terminal.kill()

    @keyword
    def approvals_should_be_listed_as_json(self, run_id: str, decision: str, reason: str) -> None:
        """Standard output is the approvals audit as JSON: one record, of RUN_ID's call, with
        DECISION and REASON, and when it was decided."""
        from cleveractors.approvals import ApprovalRecord

        records = [ApprovalRecord.model_validate(row) for row in json.loads(self._last().stdout)]
        shown = [(r.run_id, r.call_id, r.name, r.decision, r.reason) for r in records]
        if shown != [(run_id, "call_refund", "refund", decision, reason)]:
            raise AssertionError(f"approvals listed: {shown}")

    @keyword
    def usage_table_shown_should_total(self, shown: str, total: int, calls: int) -> None:
        """The usage table in SHOWN has CALLS call rows adding up to its total of TOTAL tokens."""
        table = parse_usage_table(shown)
        _table_should_add_up(table)
        if (len(table.calls), table.total.total) != (int(calls), int(total)):
            raise AssertionError(f"expected {calls} calls, {total} tokens in:\n{shown}")

    @keyword
    def ledger_should_bill_tokens(self, actor: str, total: int, runs: int) -> None:
        """The actor's ledger (`cleveractors usage --json`) holds TOTAL tokens from RUNS runs."""
        completed = _run([str(COMMAND), "usage", actor, "--json"])
        report = json.loads(completed.stdout)
        billed_runs = {row["run_id"] for row in report["rows"]}
        if (report["total_tokens"], len(billed_runs)) != (int(total), int(runs)):
            raise AssertionError(f"expected {total} tokens from {runs} runs: {completed.stdout}")

    @keyword
    def chat_usage_table_should_have_calls(self, shown: str, count: int) -> UsageTable:
        """The usage table in SHOWN has COUNT call rows that add up to its total row."""
        table = parse_usage_table(shown)
        _table_should_add_up(table)
        if len(table.calls) != int(count):
            raise AssertionError(f"the chat's usage table has {len(table.calls)} calls:\n{shown}")
        return table

    @keyword
    def prompt_tokens_of_call_should_be(
        self, table: UsageTable, call: int, relation: str, other: int
    ) -> None:
        """Compares the prompt tokens of two calls of TABLE (numbered from 1): RELATION is
        `greater than` or `equal to`."""
        first, second = table.calls[int(call) - 1].prompt, table.calls[int(other) - 1].prompt
        holds = first > second if relation == "greater than" else first == second
        if not holds:
            raise AssertionError(
                f"call {call} read {first} prompt tokens, call {other} {second}: not {relation}"
            )

    def _chat(self) -> _TerminalSession:
        assert self._terminal is not None, "no chat was started"
        return self._terminal

    # -- internals --------------------------------------------------------------------------------

    def _last(self) -> subprocess.CompletedProcess[str]:
        assert self._completed is not None, "no cleveractors command was run yet"
        return self._completed

    def _should_show_line(self, line: str, *, is_pattern: bool = False) -> None:
        pattern = line if is_pattern else re.escape(line)
        if re.search(rf"^{pattern}$", self._last().stdout, re.MULTILINE) is None:
            raise AssertionError(f"output has no line {line!r}")

    def _write_stub_actor(
        self,
        script: list[Any],
        *,
        tools: list[Any] | None = None,
        **agent_fields: Any,
    ) -> str:
        weather = {"name": "get_weather", "handler": "cleveractors.demo:get_weather"}
        agent = {"provider": "stub", "tools": tools or [weather], "script": script, **agent_fields}
        return self._write_actor({"name": "cli-test", "agent": agent})

    def _output_folder(self, name: str) -> Path:
        folder = Path(BuiltIn().get_variable_value("${OUTPUT DIR}")) / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _write_actor(self, config: dict[str, Any]) -> str:
        folder = self._output_folder("cli-actors")
        self._written += 1
        path = (
            folder / f"{BuiltIn().get_variable_value('${TEST NAME}', 'suite')}-{self._written}.yaml"
        )
        path = path.with_name(re.sub(r"[^\w.-]+", "_", path.name))
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return str(path)


def scripted_replies(actor: str) -> list[ScriptedReply]:
    """The script of a stub actor's YAML."""
    return _replies.validate_python(_read_yaml(actor)["agent"]["script"])


def parse_usage_table(output: str) -> UsageTable:
    """Reads the rows after the `Token usage` title; fails when there is no total row."""
    _, found, table = output.partition("Token usage")
    calls: list[UsageRow] = []
    total = None
    for line in table.splitlines() if found else ():
        if row := _ROW.match(line):
            calls.append(_usage_row(row.group(1), row.group(4), row.group(5), row.group(6)))
        elif row := _TOTAL.match(line):
            total = _usage_row("total", row.group(2), row.group(3), row.group(4))
    if total is None:
        raise AssertionError(f"no usage table with a total row in:\n{output}")
    return UsageTable(calls, total)


def _usage_row(label: str, counts: str, cost: str, marker: str) -> UsageRow:
    prompt, completion, *details, total = (int(count) for count in counts.split())
    return UsageRow(
        label,
        prompt,
        completion,
        total,
        estimated=marker == "estimated",
        details=tuple(details),
        cost_usd=None if cost == "n/a" else Decimal(cost),
    )


def _table_should_add_up(table: UsageTable) -> None:
    sums = [sum(getattr(row, field) for row in table.calls) for field in ("prompt", "completion")]
    if sums != [table.total.prompt, table.total.completion]:
        raise AssertionError(f"usage rows add up to {sums}, but the total row says {table.total}")
    if any(row.prompt + row.completion != row.total for row in [*table.calls, table.total]):
        raise AssertionError(f"a usage row's total is not prompt + completion: {table}")


def _details_and_cost_should_match(table: UsageTable, result: ExecutionResult) -> None:
    """The detail columns are those the result has any of; every cost is the result's, to the
    millionth of a dollar the table shows ("n/a" for an unknown one)."""
    kinds = [
        kind
        for kind in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
        if getattr(result, kind)
    ]
    expected = [tuple(getattr(call.usage, kind) for kind in kinds) for call in result.usage_by_call]
    expected.append(tuple(getattr(result, kind) for kind in kinds))
    shown = [row.details for row in [*table.calls, table.total]]
    if shown != expected:
        raise AssertionError(f"usage detail columns {shown} differ from the result's {expected}")
    costs = [call.cost_usd for call in result.usage_by_call] + [result.cost_usd]
    rounded = [None if cost is None else cost.quantize(Decimal("0.000001")) for cost in costs]
    shown_costs = [row.cost_usd for row in [*table.calls, table.total]]
    if shown_costs != rounded:
        raise AssertionError(f"usage costs {shown_costs} differ from the result's {rounded}")


def _call_label(name: str, arguments: dict[str, object]) -> str:
    """A tool call as the CLI shows it: `get_weather(city="Paris")`."""
    return f"{name}({', '.join(f'{key}={json.dumps(value)}' for key, value in arguments.items())})"


def _finished_line(label: str) -> str:
    return rf"^tool {re.escape(label)} finished in \d+\.\d\ds$"


def _read_yaml(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return loaded


def _environment() -> dict[str, str]:
    # Any key works for the scripted server; the bin folder makes the console script findable.
    path = f"{COMMAND.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "OPENAI_API_KEY": "test-key", "PATH": path, "PYTHONUNBUFFERED": "1"}


def _run(
    command: list[str], cwd: str | None = None, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        command,
        stdin=stdin,
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=TIMEOUT_S,
        check=False,
        cwd=cwd,
    )
    _log(completed)
    return completed


def _run_in_terminal(command: list[str]) -> subprocess.CompletedProcess[str]:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        command,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**_environment(), "TERM": "xterm-256color", "COLUMNS": "200"},
    )
    os.close(terminal)
    watchdog = threading.Timer(TIMEOUT_S, process.kill)
    watchdog.start()
    screen = bytearray()
    with contextlib.suppress(OSError):  # EIO: the command exited and closed the terminal
        while chunk := os.read(controller, 4096):
            screen += chunk
    watchdog.cancel()
    os.close(controller)
    text = _ESCAPE.sub("", screen.decode("utf-8", errors="replace")).replace("\r", "\n")
    completed = subprocess.CompletedProcess(
        process.args, process.wait(timeout=TIMEOUT_S), text, text
    )
    _log(completed)
    return completed


_PROMPT = "you> "


class _TerminalSession:
    """A command on a pseudo-terminal that is its controlling terminal, as in a shell: what it
    shows is read as it comes (escape codes removed), keys are typed into it."""

    def __init__(self, command: list[str]) -> None:
        environment = {**_environment(), "TERM": "xterm-256color", "COLUMNS": "200"}
        self._pid, self._fd = pty.fork()
        if self._pid == 0:  # the child: the terminal is its own now
            os.execve(command[0], command, environment)
        self._raw = b""
        self._screen = ""
        self._read = 0
        self._status: int | None = None

    def send(self, keys: str) -> None:
        os.write(self._fd, keys.encode())

    def expect(self, text: str) -> str:
        """What was shown from the last match up to TEXT, once it is shown."""
        deadline = time.monotonic() + TIMEOUT_S
        while (found := self._screen.find(text, self._read)) < 0:
            if time.monotonic() > deadline or not self._read_more():
                logger.info(f"the terminal showed:\n{self._screen}")
                raise AssertionError(
                    f"the chat did not show {text!r}:\n{self._screen[self._read :]}"
                )
        shown, self._read = self._screen[self._read : found + len(text)], found + len(text)
        logger.info(shown)
        return shown

    def wait(self) -> int:
        deadline = time.monotonic() + TIMEOUT_S
        while self._read_more():
            if time.monotonic() > deadline:
                raise AssertionError(f"the chat did not exit:\n{self._screen[self._read :]}")
        logger.info(f"the terminal showed:\n{self._screen}")
        _, status = os.waitpid(self._pid, 0)
        self._status = os.waitstatus_to_exitcode(status)
        os.close(self._fd)
        return self._status

    @property
    def screen(self) -> str:
        return self._screen

    def terminate(self) -> None:
        os.kill(self._pid, signal.SIGTERM)

    def kill(self) -> None:
        if self._status is None:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(self._pid, signal.SIGKILL)
                self.wait()

    def _read_more(self) -> bool:
        """Read what the terminal shows next (waits up to a second); False once it is closed."""
        ready, _, _ = select.select([self._fd], [], [], 1.0)
        if not ready:
            return True
        try:
            chunk = os.read(self._fd, 4096)
        except OSError:  # EIO: the command exited and closed the terminal
            return False
        # Cleaned whole each time: an escape code may come in two chunks.
        self._raw += chunk
        text = self._raw.decode("utf-8", errors="replace")
        self._screen = _ESCAPE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
        return bool(chunk)


def _log(completed: subprocess.CompletedProcess[str]) -> None:
    logger.info(
        f"$ {' '.join(map(str, completed.args))}\nexit code {completed.returncode}\n"
        f"--- stdout ---\n{completed.stdout}\n--- stderr ---\n{completed.stderr}"
    )
