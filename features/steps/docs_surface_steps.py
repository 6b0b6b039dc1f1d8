"""Steps that compare what the product defines with what the docs name (support/doc_surface.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args

import typer
from behave import given, then, when
from behave.runner import Context
from pydantic import BaseModel, create_model
from support.doc_surface import (
    CliSource,
    Definition,
    cli_options,
    cli_sources,
    definitions,
    event_kinds,
    exit_codes,
    extras,
    lacks_how_to_run,
    result_fields,
    unnamed,
)

import cleveractors
from cleveractors.cli import app
from cleveractors.events import Event
from cleveractors.result import ExecutionResult

_ROOT = Path(__file__).resolve().parents[2]


@given(
    "the event kinds, result fields, commands, options, exit codes and extras the product defines"
)
def _given_product(context: Context) -> None:
    context.event_union = Event
    context.result_model = ExecutionResult
    context.cli = typer.main.get_command(app)  # a fresh Click command each time: ours to extend
    context.cli_sources = cli_sources(context.cli, cleveractors)
    context.extras = extras(_ROOT / "pyproject.toml")


@given('a new event kind "{kind}"')
def _given_event_kind(context: Context, kind: str) -> None:
    event = create_model(
        "NewEvent",
        __module__=__name__,
        kind=(Literal[kind], kind),  # type: ignore[valid-type]
    )
    context.event_union = _with_member(context.event_union, event)


@given('a new result field "{name}"')
def _given_result_field(context: Context, name: str) -> None:
    context.result_model = create_model(
        "NewResult", __module__=__name__, __base__=context.result_model, **{name: (int, 0)}
    )


@given('a new command "{name}" with the option "{option}"')
def _given_command(context: Context, name: str, option: str) -> None:
    context.cli.commands[name] = _command_with_option(name, option)


@given('a new option "{option}" of the command "{name}"')
def _given_option(context: Context, option: str, name: str) -> None:
    context.cli.commands[name].params.extend(_command_with_option(name, option).params)


@given("a new module of the CLI that exits with code {code:d}")
def _given_exit_code(context: Context, code: int) -> None:
    folder = tempfile.TemporaryDirectory(prefix="cli-source-")
    context.add_cleanup(folder.cleanup)
    source = Path(folder.name) / "_cli_new.py"
    source.write_text(f"import typer\n\n\ndef leave() -> None:\n    raise typer.Exit({code})\n")
    context.cli_sources = [*context.cli_sources, CliSource(source, {})]


@given('a new extra "{name}"')
def _given_extra(context: Context, name: str) -> None:
    context.extras = [*context.extras, name]


@when("the docs are searched for each of them")
def _when_searched(context: Context) -> None:
    context.definitions = definitions(
        kinds=event_kinds(context.event_union),
        fields=result_fields(context.result_model),
        options=cli_options(context.cli),
        codes=exit_codes(context.cli, context.cli_sources),
        extra_names=context.extras,
    )
    pages = {page: (_ROOT / page).read_text("utf-8") for page in _pages(context.definitions)}
    context.unnamed = unnamed(context.definitions, pages)


@then("every one is named on its page")
def _then_all_named(context: Context) -> None:
    assert not context.unnamed, "\n".join(str(missing) for missing in context.unnamed)


@then("the product defines at least these, all read from the code:")
def _then_defines(context: Context) -> None:
    found = {(definition.what, definition.name) for definition in context.definitions}
    expected = {(row["what"], row["name"]) for row in context.table}
    assert expected <= found, f"not found in the code: {sorted(expected - found)}"


@then("the docs are found not to name exactly:")
def _then_unnamed(context: Context) -> None:
    found = [str(missing) for missing in context.unnamed]
    expected = [row["missing"] for row in context.table]
    assert found == expected, "\n".join(found)


@given("the README and every page under docs/, as they are")
def _given_pages(context: Context) -> None:
    paths = [_ROOT / "README.md", *sorted((_ROOT / "docs").rglob("*.md"))]
    context.pages = {str(path.relative_to(_ROOT)): path.read_text("utf-8") for path in paths}


@given('a page "{name}" as:')
def _given_one_page(context: Context, name: str) -> None:
    context.pages = {name: context.text}


@when('the pages with a top-level `await` are searched for "{phrase}"')
def _when_await_pages(context: Context, phrase: str) -> None:
    context.lacking = lacks_how_to_run(context.pages, phrase)


@then("every such page says it before its first such example")
def _then_every_page_says(context: Context) -> None:
    assert not context.lacking, "top-level await, but not how to run it:\n" + "\n".join(
        context.lacking
    )


@then("the pages that do not say it are exactly:")
def _then_lacking(context: Context) -> None:
    assert context.lacking == [row["page"] for row in context.table], "\n".join(context.lacking)


def _command_with_option(name: str, option: str) -> Any:
    """The Click command of a one-command Typer app whose one option is `option`."""
    extra = typer.Typer(add_completion=False)

    @extra.command(name=name)
    def _command(value: str = typer.Option("", option)) -> None:
        """A command the docs have never heard of."""

    return typer.main.get_command(extra)


def _with_member(union: object, member: type[BaseModel]) -> object:
    members, *metadata = get_args(union)
    return Annotated[Union[*get_args(members), member], *metadata]


def _pages(found: list[Definition]) -> set[str]:
    return {definition.page for definition in found}
