"""Steps that check the imports of a package against a layer table (see support/layers.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from behave import given, then, when
from behave.runner import Context
from support.layers import SourceTree, check_layers, read_layer_table

_ROOT = Path(__file__).resolve().parents[2]


@given("the layer table of docs/architecture.md")
def _given_project_table(context: Context) -> None:
    context.layers = read_layer_table((_ROOT / "docs" / "architecture.md").read_text("utf-8"))


@given("the layer table:")
def _given_table(context: Context) -> None:
    context.layers = read_layer_table(context.text)


@given('a package "{package}" in a temporary folder with these modules:')
def _given_package(context: Context, package: str) -> None:
    folder = tempfile.TemporaryDirectory(prefix="layers-")
    context.add_cleanup(folder.cleanup)
    context.package_dir = Path(folder.name) / package
    for row in context.table:
        path = context.package_dir / row["module"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(row["source"].replace("\\n", "\n") + "\n", encoding="utf-8")


@when("the imports of every module under src/cleveractors are checked against it")
def _when_project_checked(context: Context) -> None:
    context.problems = check_layers(SourceTree.read(_ROOT / "src" / "cleveractors"), context.layers)


@when("the imports of every module of that package are checked against it")
def _when_package_checked(context: Context) -> None:
    context.problems = check_layers(SourceTree.read(context.package_dir), context.layers)


@then("there is no problem")
def _then_no_problem(context: Context) -> None:
    found = [problem.message for problem in context.problems]
    assert not found, "\n".join(found)


@then("the problems are exactly:")
def _then_problems(context: Context) -> None:
    found = [problem.message for problem in context.problems]
    expected = [row["problem"] for row in context.table]
    assert found == expected, "\n".join(found)
