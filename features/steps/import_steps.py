"""Steps about what importing the library loads, checked in a fresh interpreter (this one has
loaded the test doubles long ago)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from behave import then, when
from behave.runner import Context

_ROOT = Path(__file__).resolve().parents[2]
_TIMEOUT_S = 120  # a hang guard for a loaded machine, not a speed target

_REPORT_LOADED = "print(json.dumps(sorted(sys.modules)))"


def _run_fresh(context: Context, program: str) -> None:
    """Run `program` in a new interpreter; its last output line lists the modules it loaded."""
    ran = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_S,
        cwd=_ROOT,
        check=False,
    )
    assert ran.returncode == 0, f"exit {ran.returncode}:\n{ran.stderr}"
    *printed, loaded = ran.stdout.strip().splitlines()
    context.fresh_output = "\n".join(printed)
    context.fresh_modules = set(json.loads(loaded))


def _loaded(context: Context, package: str) -> list[str]:
    return sorted(
        name for name in context.fresh_modules if name == package or name.startswith(f"{package}.")
    )


@when("a fresh Python interpreter imports these modules:")
def _when_fresh_imports(context: Context) -> None:
    imports = "\n".join(f"import {row['module']}" for row in context.table)
    _run_fresh(context, f"import json, sys\n{imports}\n{_REPORT_LOADED}")


@when('a fresh Python interpreter runs the stub actor "{message}" from {actor}')
def _when_fresh_stub_run(context: Context, message: str, actor: str) -> None:
    program = textwrap.dedent(
        f"""
        import asyncio, json, sys
        from cleveractors import ActorExecutor

        result = asyncio.run(ActorExecutor.from_config({actor!r}).execute({message!r}))
        print(json.dumps(result.answer))
        {_REPORT_LOADED}
        """
    )
    _run_fresh(context, program)


@then("that interpreter printed the demo actor's answer")
def _then_demo_answer(context: Context) -> None:
    answer = json.loads(context.fresh_output)
    assert answer.startswith("Here is the weather right now. In Paris it is 18 °C"), answer


@then("that interpreter has not loaded {package}")
def _then_not_loaded(context: Context, package: str) -> None:
    assert not _loaded(context, package), _loaded(context, package)


@then("that interpreter has loaded {package}")
def _then_loaded(context: Context, package: str) -> None:
    assert package in context.fresh_modules, f"{package} is not among the loaded modules"


def _imported_modules(path: Path) -> set[str]:
    """Every module a source file imports, by its absolute name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@when("the imports of the modules under {place} are read")
def _when_imports_read(context: Context, place: str) -> None:
    root = Path(place)
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    assert files, f"no Python files under {place}"
    context.imports = {str(path): _imported_modules(path) for path in files}


def _from_any(module: str, packages: list[str]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


@then("none of them is from {a}, {b} or {c}")
def _then_none_from(context: Context, a: str, b: str, c: str) -> None:
    offending = {
        path: sorted(m for m in modules if _from_any(m, [a, b, c]))
        for path, modules in context.imports.items()
    }
    assert not any(offending.values()), {path: m for path, m in offending.items() if m}


@then("one of them is from {package}")
def _then_one_from(context: Context, package: str) -> None:
    assert any(
        _from_any(module, [package]) for modules in context.imports.values() for module in modules
    ), context.imports
