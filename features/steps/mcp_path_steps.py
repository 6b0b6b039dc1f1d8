"""Steps of tools.mcp_paths.feature: where a stdio MCP server's relative paths point. The actor
files and folders are made in temporary folders; `cleveractors validate` runs as a process
started in another one."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from behave import given, then, when
from behave.runner import Context

from cleveractors.config import load_actor_config
from cleveractors.tools.mcp import with_server_paths_beside

_SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_servers" / "tool_server.py"
_COMMAND = Path(sys.executable).parent / "cleveractors"
_TIMEOUT_S = 60


def _new_folder(context: Context, prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"cleveractors-{prefix}-")).resolve()
    context.add_cleanup(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _actor(command: list[str], cwd: str | None = None) -> dict[str, object]:
    server: dict[str, object] = {"name": "files", "command": command, "timeout_s": 20}
    if cwd is not None:
        server["cwd"] = cwd
    return {
        "name": "paths",
        "agent": {"provider": "stub", "mcp_servers": [server], "script": [{"text": "Done."}]},
    }


def _write_actor(folder: Path, actor: dict[str, object]) -> Path:
    path = folder / "actor.yaml"
    path.write_text(yaml.safe_dump(actor), encoding="utf-8")
    return path


@given(
    'an actor file whose stdio MCP server "{name}" runs "{command}", the server\'s script beside it'
)
def _given_beside(context: Context, name: str, command: str) -> None:
    folder = _new_folder(context, "mcp-actor")
    shutil.copy(_SERVER, folder / "tool_server.py")
    context.actor_file = _write_actor(folder, _actor(command.split()))


@given(
    'an actor file whose stdio MCP server "{name}" runs "{command}" in the cwd "{cwd}", the '
    "server's script in that folder"
)
def _given_in_cwd(context: Context, name: str, command: str, cwd: str) -> None:
    folder = _new_folder(context, "mcp-actor")
    (folder / cwd).mkdir()
    shutil.copy(_SERVER, folder / cwd / "tool_server.py")
    context.actor_file = _write_actor(folder, _actor(command.split(), cwd=cwd))


@given(
    'a folder holding the files "{first}", "{second}" and "{third}", and the folders "{fourth}" '
    'and "{fifth}"'
)
def _given_folder(
    context: Context, first: str, second: str, third: str, fourth: str, fifth: str
) -> None:
    # The actor's folder is one below a folder of its own, so `../` stays in that one.
    context.actor_folder = _new_folder(context, "mcp-paths") / "actor"
    for file in (first, second, third):
        path = context.actor_folder / file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
    for folder in (fourth, fifth):
        (context.actor_folder / folder).mkdir(parents=True)


@when("cleveractors validate checks the actor file from another folder")
def _when_validate(context: Context) -> None:
    elsewhere = _new_folder(context, "elsewhere")
    completed = subprocess.run(
        [str(_COMMAND), "validate", str(context.actor_file)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        check=False,
    )
    context.validated = completed


@when('an actor file in that folder runs its stdio MCP server as "{command}"')
def _when_read(context: Context, command: str) -> None:
    _read(context, command.split(), cwd=None)


@when('an actor file in that folder runs its stdio MCP server in the cwd "{cwd}" as "{command}"')
def _when_read_with_cwd(context: Context, command: str, cwd: str) -> None:
    _read(context, command.split(), cwd=cwd)


def _read(context: Context, command: list[str], *, cwd: str | None) -> None:
    context.written = command
    path = _write_actor(context.actor_folder, _actor(command, cwd=cwd))
    config = with_server_paths_beside(load_actor_config(path), path.parent)
    (context.mcp_server,) = config.agent.mcp_servers


@then("validate says the actor is OK, with the tool {tool} from mcp server '{name}'")
def _then_ok(context: Context, tool: str, name: str) -> None:
    completed = context.validated
    screen = completed.stdout + completed.stderr
    assert completed.returncode == 0, screen
    assert completed.stdout.startswith("OK: paths ("), screen
    lines = [line.split() for line in completed.stdout.splitlines()[1:]]
    assert [tool, "[mcp", "server", f"'{name}']"] in [line[:4] for line in lines], screen


@then("validate says the actor is INVALID, naming mcp server '{name}'")
def _then_invalid(context: Context, name: str) -> None:
    completed = context.validated
    screen = completed.stdout + completed.stderr
    assert completed.returncode == 1, screen
    assert "\nINVALID: " in f"\n{completed.stderr}", screen
    assert f"mcp server '{name}'" in completed.stderr, screen


def _expected(word: str, taken: str, folder: Path) -> str:
    if taken == "taken from the actor's folder":
        return str(folder / word)
    assert taken == "passed as written", taken
    return word


@then('the server\'s program is "{program}" and its argument is {taken}')
def _then_argument(context: Context, program: str, taken: str) -> None:
    command = context.mcp_server.command
    argument = _expected(context.written[1], taken, context.actor_folder)
    assert command == (program, argument), command
    assert context.mcp_server.cwd is None, context.mcp_server


@then("the server's program is {taken} and its argument is passed as written")
def _then_program(context: Context, taken: str) -> None:
    command = context.mcp_server.command
    program = _expected(context.written[0], taken, context.actor_folder)
    assert command == (program, *context.written[1:]), command


@then('the server runs in the actor\'s folder\'s "{cwd}", its command "{command}" as written')
def _then_cwd(context: Context, cwd: str, command: str) -> None:
    server = context.mcp_server
    assert server.cwd == str(context.actor_folder / cwd), server
    assert server.command == tuple(command.split()), server


@when('an actor file in that folder uses the streamable HTTP MCP server "{url}"')
def _when_http(context: Context, url: str) -> None:
    actor = _actor(["unused"])
    actor["agent"]["mcp_servers"] = [{"name": "web", "url": url}]  # type: ignore[index]
    path = _write_actor(context.actor_folder, actor)
    config = with_server_paths_beside(load_actor_config(path), path.parent)
    (context.mcp_server,) = config.agent.mcp_servers


@then('the server\'s entry is the URL "{url}" with no command and no cwd')
def _then_http(context: Context, url: str) -> None:
    server = context.mcp_server
    assert (server.url, server.command, server.cwd) == (url, None, None), server
