"""What the product defines, and whether the docs name it: the event kinds, the result's fields,
the CLI's commands, options and exit codes.

Everything is read from the code as it runs, not from a list kept by hand:

- event kinds from the `kind` of each class in the `cleveractors.events.Event` union;
- result fields from `ExecutionResult`'s model fields, computed fields and public properties;
- commands and options from the Click command Typer builds (`typer.main.get_command(app)`,
  read by duck typing: Typer may ship its own copy of Click);
- extras from pyproject.toml's `[project.optional-dependencies]`;
- exit codes from the app's help ("Exit codes: 0 ...; 1 ...") and from the source of the
  modules that implement the CLI: the command callbacks' modules and every module of the package
  named `cli` or `_cli...`, whatever their layout. A code is an int given to `Exit(...)`,
  `SystemExit(...)`, `sys.exit(...)` or as any call's `code=`, or a module's `..._EXIT` constant;
  a name is resolved in its module.

Each is looked for on its page, as the reader would look:

- an event kind in backticks on docs/streaming.md;
- a result field in backticks in the first cell of a table row on docs/results-and-errors.md;
- a command in the synopsis of docs/cli.md (a line of a ```bash block starting
  `cleveractors <command>`, continued by the more-indented lines under it), and each of the
  command's options in that synopsis entry;
- an exit code as the first cell of a row of the table headed "exit code" on docs/cli.md;
- an extra in backticks in the first cell of a row of the table headed "extra" on
  docs/getting-started.md.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from support.doc_examples import code_blocks

STREAMING_PAGE = "docs/streaming.md"
RESULTS_PAGE = "docs/results-and-errors.md"
INSTALL_PAGE = "docs/getting-started.md"
CLI_PAGE = "docs/cli.md"
COMMAND = "cleveractors"

_EXIT_CALLS = {"Exit", "SystemExit", "exit"}
_EXIT_CONSTANT = re.compile(r"^_?[A-Z0-9_]*EXIT[A-Z0-9_]*$")
_HELP_CODES = re.compile(r"Exit codes:(?P<list>[^\n]*(?:\n[^\n]+)*)")
_CLI_MODULE = re.compile(r"^_?cli(_\w+)?$")
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Definition:
    """One thing the product defines and the page that must name it."""

    what: str  # "event kind", "result field", "command", "option" or "exit code"
    name: str
    page: str

    def __str__(self) -> str:
        return f"{self.page} does not name the {self.what} `{self.name}`"


@dataclass(frozen=True)
class CliSource:
    """A module of the CLI to read exit codes from: its source and the namespace its names
    resolve in (empty for a file that is not imported)."""

    path: Path
    namespace: dict[str, Any]


def event_kinds(union: Any) -> list[str]:
    """The `kind` of every class of an `Annotated[A | B | ..., Field(discriminator="kind")]`."""
    members = typing.get_args(typing.get_args(union)[0])
    return [member.model_fields["kind"].default for member in members]


def result_fields(model: type[BaseModel]) -> list[str]:
    """The model's fields, computed fields and public properties of its own (not BaseModel's)."""
    names = [*model.model_fields, *model.model_computed_fields]
    for name, value in inspect.getmembers(model):
        is_own = not name.startswith("_") and not hasattr(BaseModel, name)
        if isinstance(value, property) and is_own and name not in names:
            names.append(name)
    return names


def cli_options(group: Any) -> dict[str, list[str]]:
    """`command path` ("" for the root, "store prune") -> its long options, help aside."""
    found: dict[str, list[str]] = {}

    def visit(command: Any, path: str) -> None:
        found[path] = [
            _longest(parameter.opts)
            for parameter in command.params
            if parameter.param_type_name == "option"
        ]
        for name, sub in getattr(command, "commands", {}).items():
            visit(sub, f"{path} {name}".strip())

    visit(group, "")
    return found


def _longest(opts: list[str]) -> str:
    return max(opts, key=len)


def cli_sources(group: Any, package: types.ModuleType) -> list[CliSource]:
    """The modules of the CLI: the command callbacks' modules and every module of `package`
    whose own name is `cli` or starts `_cli`, each with its namespace."""
    names: set[str] = set()

    def visit(command: Any) -> None:
        if command.callback is not None:
            names.add(command.callback.__module__)
        for sub in getattr(command, "commands", {}).values():
            visit(sub)

    visit(group)
    package_dir = Path(package.__file__ or "").parent
    for path in package_dir.rglob("*.py"):
        parts = path.relative_to(package_dir).with_suffix("").parts
        if any(_CLI_MODULE.match(part) for part in parts):
            dotted = [package.__name__, *parts]
            names.add(".".join(dotted[:-1] if dotted[-1] == "__init__" else dotted))
    sources = []
    for name in sorted(names):
        module = importlib.import_module(name)
        if module.__file__ and name.startswith(package.__name__):
            sources.append(CliSource(Path(module.__file__), vars(module)))
    return sources


def exit_codes(group: Any, sources: Iterable[CliSource]) -> list[int]:
    """Every exit code the CLI's help lists or its source uses, 0 included, in order."""
    codes = {0}
    if (listed := _HELP_CODES.search(group.help or "")) is not None:
        codes |= {int(code) for code in re.findall(r"(?:^|;)\s*(\d+)\b", listed.group("list"))}
    for source in sources:
        codes |= set(_codes_in(source))
    return sorted(codes)


def _codes_in(source: CliSource) -> Iterator[int]:
    tree = ast.parse(source.path.read_text(encoding="utf-8"), str(source.path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else None
            called = node.func.id if isinstance(node.func, ast.Name) else called
            if called in _EXIT_CALLS and node.args:
                yield from _value(node.args[0], source.namespace)
            for keyword in node.keywords:
                if keyword.arg == "code":
                    yield from _value(keyword.value, source.namespace)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and _EXIT_CONSTANT.match(target.id):
                    yield from _value(node.value, {})
                    yield from _value(target, source.namespace)


def _value(node: ast.expr, namespace: dict[str, Any]) -> Iterator[int]:
    """The int an expression stands for: a literal, or a name or attribute of the module (an
    expression the module computes, `128 + signal.SIGTERM`, is read through the name it is
    assigned to); anything else (a local variable) is not a constant."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        yield node.value
    elif isinstance(node, ast.Name | ast.Attribute) and namespace:
        path: list[str] = []
        while isinstance(node, ast.Attribute):
            path.insert(0, node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in namespace:
            value = namespace[node.id]
            for attribute in path:
                value = getattr(value, attribute, None)
            if isinstance(value, int) and not isinstance(value, bool):
                yield int(value)


def extras(pyproject: Path) -> list[str]:
    """The extras a project offers: the keys of its `[project.optional-dependencies]`."""
    with pyproject.open("rb") as file:
        return list(tomllib.load(file)["project"]["optional-dependencies"])


def definitions(
    *,
    kinds: list[str],
    fields: list[str],
    options: dict[str, list[str]],
    codes: list[int],
    extra_names: list[str],
) -> list[Definition]:
    found = [Definition("event kind", kind, STREAMING_PAGE) for kind in kinds]
    found += [Definition("result field", name, RESULTS_PAGE) for name in fields]
    for path, names in options.items():
        command = f"{COMMAND} {path}".strip()
        if path:
            found.append(Definition("command", command, CLI_PAGE))
        found += [Definition("option", f"{command} {option}", CLI_PAGE) for option in names]
    found += [Definition("exit code", str(code), CLI_PAGE) for code in codes]
    found += [Definition("extra", name, INSTALL_PAGE) for name in extra_names]
    return found


def unnamed(found: list[Definition], pages: dict[str, str]) -> list[Definition]:
    """The definitions their page does not name, in order."""
    synopsis = _synopsis(pages.get(CLI_PAGE, ""))
    table_codes = _first_cells(pages.get(CLI_PAGE, ""), header="exit code")
    result_names = {
        name
        for cell in _first_cells(pages.get(RESULTS_PAGE, ""), header=None)
        for name in _CODE.findall(cell)
    }
    streaming = set(_CODE.findall(pages.get(STREAMING_PAGE, "")))
    extra_names = {
        name
        for cell in _first_cells(pages.get(INSTALL_PAGE, ""), header="extra")
        for name in _CODE.findall(cell)
    }
    missing = []
    for definition in found:
        match definition.what:
            case "event kind":
                named = definition.name in streaming
            case "result field":
                named = definition.name in result_names
            case "command":
                named = any(
                    entry == definition.name or entry.startswith(f"{definition.name} ")
                    for entry in synopsis
                )
            case "extra":
                named = definition.name in extra_names
            case "option":
                command, _, option = definition.name.rpartition(" ")
                entry = synopsis.get(command, "")
                named = re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", entry) is not None
            case _:
                named = definition.name in table_codes
        if not named:
            missing.append(definition)
    return missing


def _synopsis(page: str) -> dict[str, str]:
    """`cleveractors <command path>` -> its synopsis entry, from the page's ```bash blocks: the
    command's line and the more-indented lines that continue it."""
    entries: dict[str, str] = {}
    in_bash = False
    current: str | None = None
    for line in page.splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash" and not in_bash
            current = None
            continue
        if not in_bash:
            continue
        if line.startswith(f"{COMMAND} ") or line == COMMAND:
            words = []
            for word in line.split()[1:]:
                if not re.fullmatch(r"[a-z][a-z-]*", word):
                    break
                words.append(word)
            current = " ".join([COMMAND, *words])
            entries[current] = entries.get(current, "") + " " + line
        elif current is not None and line.startswith(" "):
            entries[current] += " " + line
        else:
            current = None
    return entries


def _first_cells(page: str, header: str | None) -> list[str]:
    """The first cells of the body rows of the page's tables (only of those whose first header
    cell is `header`, when given)."""
    cells: list[str] = []
    rows = iter(page.splitlines())
    for line in rows:
        if not line.startswith("|"):
            continue
        title = line.strip("| ").split("|")[0].strip()
        take = header is None or title == header
        next(rows, None)  # the | --- | row
        for row in rows:
            if not row.startswith("|"):
                break
            if take:
                cells.append(row.strip().strip("|").split("|")[0].strip())
    return cells


def top_level_await_pages(pages: dict[str, str]) -> dict[str, int]:
    """page -> the line of its first Python block with a top-level `await` (or `async for`,
    `async with`), for every page that has one."""
    found: dict[str, int] = {}
    for page, text in pages.items():
        for block in code_blocks(text, page):
            if block.language == "python" and _awaits_at_top(block.code):
                found.setdefault(page, block.line)
    return found


def _awaits_at_top(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

    def visit(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, scopes):
                continue
            if isinstance(child, ast.Await | ast.AsyncFor | ast.AsyncWith):
                return True
            if isinstance(child, ast.comprehension) and child.is_async:
                return True
            if visit(child):
                return True
        return False

    return visit(tree)


def lacks_how_to_run(pages: dict[str, str], phrase: str) -> list[str]:
    """`page:line` of each page with a top-level `await` that does not say `phrase` before
    its first such block."""
    lacking = []
    for page, line in top_level_await_pages(pages).items():
        before = "\n".join(pages[page].splitlines()[: line - 1])
        if phrase not in before:
            lacking.append(f"{page}:{line}")
    return lacking
