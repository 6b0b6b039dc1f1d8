"""Steps that run the code blocks of README.md and docs/ (see support/doc_examples.py)."""

from __future__ import annotations

from pathlib import Path

from behave import given, then, when
from behave.runner import Context
from support.doc_examples import PageReport, run_page

_ROOT = Path(__file__).resolve().parents[2]


@given("the README and every page under docs/")
def _given_project_pages(context: Context) -> None:
    paths = [_ROOT / "README.md", *sorted((_ROOT / "docs").rglob("*.md"))]
    context.pages = {
        str(path.relative_to(_ROOT)): path.read_text(encoding="utf-8") for path in paths
    }


@given('a page "{name}":')
def _given_page(context: Context, name: str) -> None:
    context.pages = {name: context.text}


@when("every example on them is run")
@when("every example on it is run")
def _when_examples_run(context: Context) -> None:
    total = PageReport()
    for name, text in context.pages.items():
        report = run_page(text, name)
        total.failures += report.failures
        total.ran += report.ran
        total.skipped += report.skipped
    context.examples = total


@then("no example failed")
def _then_none_failed(context: Context) -> None:
    failures = context.examples.failures
    assert not failures, f"{len(failures)} example(s) failed:\n" + "\n".join(failures)


@then("at least {count:d} examples ran")
def _then_ran(context: Context, count: int) -> None:
    ran = context.examples.ran
    assert ran >= count, f"only {ran} examples ran ({context.examples.skipped} marked not-run)"


@then("the failures are exactly:")
def _then_failures(context: Context) -> None:
    expected = [row["failure"] for row in context.table]
    assert context.examples.failures == expected, "\n".join(context.examples.failures)
