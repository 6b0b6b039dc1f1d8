"""Steps that read the public names' docstrings (see support/public_docstrings.py)."""

from __future__ import annotations

from behave import given, then, when
from behave.runner import Context
from support.public_docstrings import public_docstrings


@given("the public names of the modules")
def _given_modules(context: Context) -> None:
    context.public_modules = [row["module"] for row in context.table]


@when("their docstrings are read as the API reference reads them")
def _when_read(context: Context) -> None:
    context.docstrings = public_docstrings(context.public_modules)


@then("every name has a docstring of at least {length:d} characters")
@then("every name has a docstring of at least {length:d} characters, except these known gaps")
def _then_documented(context: Context, length: int) -> None:
    known_gaps = {row["name"] for row in context.table or ()}
    undocumented = {name for name, text in context.docstrings.items() if len(text) < length}
    offenders = sorted(undocumented - known_gaps)
    closed_gaps = sorted(known_gaps - undocumented)
    problems = [f"no docstring (or under {length} characters): {name}" for name in offenders]
    problems += [f"documented now, drop it from the known gaps: {name}" for name in closed_gaps]
    assert not problems, "\n".join(problems)
