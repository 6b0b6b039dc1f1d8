"""Keywords for an actor file whose stdio MCP server sits beside it, run with `cleveractors` from
another folder: the server's path is taken from the actor file's folder, not the working one.

The actor runs on the stub provider and uses our MCP test server
(features/support/mcp_servers/tool_server.py), copied beside it; the server writes its pid into
the file named by MCP_TEST_LOG (see `Record MCP Server Processes`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from robot.api import logger
from robot.api.deco import keyword, library

ROOT = Path(__file__).resolve().parents[2]
COMMAND = Path(sys.executable).parent / "cleveractors"
TOOL_SERVER = ROOT / "features" / "support" / "mcp_servers" / "tool_server.py"
TIMEOUT_S = 60


@library(scope="TEST")
class McpPathsLibrary:
    def __init__(self) -> None:
        self._folders: list[Path] = []
        self._completed: subprocess.CompletedProcess[str] | None = None

    @keyword
    def actor_file_with_its_mcp_server_beside_it(self) -> str:
        """Writes an actor file whose stdio MCP server is `python tool_server.py`, with that
        script beside it, in a new folder; its script calls the server's echo. Returns its path."""
        folder = self._new_folder("actor")
        shutil.copy(TOOL_SERVER, folder / "tool_server.py")
        actor = {
            "name": "beside",
            "agent": {
                "provider": "stub",
                "mcp_servers": [
                    {
                        "name": "files",
                        "command": ["python", "tool_server.py"],
                        "env": {"MCP_TEST_LOG": "${MCP_TEST_LOG}"},
                        "timeout_s": 20,
                    }
                ],
                "script": [
                    {
                        "tool_calls": [
                            {"name": "echo", "args": {"text": "Paris"}, "id": "call_echo"}
                        ]
                    },
                    {"text": "Echoed."},
                ],
            },
        }
        path = folder / "beside.yaml"
        path.write_text(yaml.safe_dump(actor), encoding="utf-8")
        return str(path)

    @keyword
    def run_cleveractors_from_another_folder(self, *arguments: str) -> None:
        """Runs `cleveractors ARGUMENTS...` as a process whose working directory is a new,
        empty folder."""
        self._completed = subprocess.run(
            [str(COMMAND), *arguments],
            cwd=self._new_folder("elsewhere"),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        logger.info(f"exit code {self._completed.returncode}\n{self._screen()}")

    @keyword
    def cleveractors_should_have_succeeded(self) -> None:
        completed = self._finished()
        if completed.returncode != 0:
            raise AssertionError(f"exit code {completed.returncode}:\n{self._screen()}")

    @keyword
    def output_should_start_with(self, text: str) -> None:
        if not self._finished().stdout.startswith(text):
            raise AssertionError(f"the output does not start with {text!r}:\n{self._screen()}")

    @keyword
    def json_result_should_have_tool_output(self, call_id: str, output: str) -> None:
        """The `--json` result's call CALL_ID succeeded with OUTPUT."""
        result: dict[str, Any] = json.loads(self._finished().stdout)
        calls = {call["call_id"]: call for call in result["tool_calls"]}
        call = calls.get(call_id)
        if call is None or call["status"] != "ok" or call["output"] != output:
            raise AssertionError(f"call {call_id!r} is not {output!r}: {result['tool_calls']}")

    def _finished(self) -> subprocess.CompletedProcess[str]:
        if self._completed is None:
            raise AssertionError("cleveractors was not run")
        return self._completed

    def _screen(self) -> str:
        completed = self._finished()
        return completed.stdout + completed.stderr

    def _new_folder(self, prefix: str) -> Path:
        folder = Path(tempfile.mkdtemp(prefix=f"cleveractors-mcp-{prefix}-")).resolve()
        self._folders.append(folder)
        return folder

    @keyword
    def remove_the_folders(self) -> None:
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)
        self._folders.clear()
