"""Steps about tool handlers imported from beside the actor's YAML."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from pathlib import Path

from behave import given, then, when
from behave.runner import Context

from cleveractors import ActorExecutor, ConfigurationError


def _actor_folder(context: Context) -> Path:
    if getattr(context, "actor_folder", None) is None:
        context.actor_folder = Path(tempfile.mkdtemp(prefix="cleveractors-beside-"))
        context.add_cleanup(shutil.rmtree, context.actor_folder)
    folder: Path = context.actor_folder
    return folder


@given('a folder holding the file "{name}":')
@given('in that folder the file "{name}":')
def _given_file(context: Context, name: str) -> None:
    path = _actor_folder(context) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(context.text, encoding="utf-8")


@given('a folder holding the actor config "{name}":')
@given('in that folder the actor config "{name}":')
def _given_actor_config(context: Context, name: str) -> None:
    _given_file(context, name)
    context.config_source = _actor_folder(context) / name


@when("the actor is loaded from that config while the working directory is elsewhere")
def _when_loaded_elsewhere(context: Context) -> None:
    elsewhere = Path(tempfile.mkdtemp(prefix="cleveractors-cwd-"))
    context.add_cleanup(shutil.rmtree, elsewhere)
    previous = Path.cwd()
    os.chdir(elsewhere)
    context.error = None
    try:
        context.executor = ActorExecutor.from_config(context.config_source)
    except ConfigurationError as exc:
        context.error = exc
    finally:
        os.chdir(previous)


@when('the loaded actor is asked "{message}"')
def _when_loaded_actor_asked(context: Context, message: str) -> None:
    assert context.error is None, context.error
    context.loaded_result = asyncio.run(context.executor.execute(message))


@then('the tool {name} returned "{output}"')
def _then_tool_returned(context: Context, name: str, output: str) -> None:
    records = [record for record in context.loaded_result.tool_calls if record.name == name]
    assert records, f"no call of {name}: {context.loaded_result.tool_calls}"
    assert records[0].status == "ok", records[0]
    assert records[0].output == output, records[0].output


@then("the folder of the config is not on sys.path")
def _then_not_on_path(context: Context) -> None:
    folder = str(context.actor_folder)
    assert not any(entry and Path(entry).resolve() == Path(folder).resolve() for entry in sys.path)


@then('a plain "import {module}" still fails')
def _then_import_fails(context: Context, module: str) -> None:
    try:
        __import__(module)
    except ModuleNotFoundError:
        return
    raise AssertionError(f"{module} became importable for other code")
