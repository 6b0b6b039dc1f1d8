"""Steps that run a Python block of README.md, found by the marker comment before it."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from behave import given, then, when
from behave.runner import Context

_README = Path(__file__).resolve().parents[2] / "README.md"


def _marked_block(readme: str, marker: str) -> str:
    """The fenced Python block right after `<!-- example: MARKER -->`."""
    pattern = rf"<!-- example: {re.escape(marker)} -->\n```python\n(.*?)\n```\n"
    found = re.search(pattern, readme, flags=re.DOTALL)
    assert found is not None, f"README.md has no Python block marked {marker!r}"
    return found.group(1)


@given('the README\'s Python block marked "{marker}"')
def _given_block(context: Context, marker: str) -> None:
    context.readme_block = _marked_block(_README.read_text(encoding="utf-8"), marker)


@when("that README block is run as a script from an empty working directory")
def _when_block_runs(context: Context) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-readme-"))
    context.add_cleanup(shutil.rmtree, folder)
    previous, saved_environment = Path.cwd(), dict(os.environ)
    context.readme_error = None
    os.chdir(folder)
    try:
        exec(compile(context.readme_block, "README.md", "exec"), {"__name__": "__main__"})
    except Exception as exc:  # its own failed assert, or anything the library raised
        context.readme_error = exc
    finally:
        os.chdir(previous)
        os.environ.clear()
        os.environ.update(saved_environment)


@then("that README block ran to its end")
def _then_ran(context: Context) -> None:
    error = context.readme_error
    assert error is None, f"the README block failed: {type(error).__name__}: {error}"
