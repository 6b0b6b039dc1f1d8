"""The layer rule of docs/architecture.md, checked against the imports of the source.

The page's layer table is data: each row is a layer (the top row the highest), its "Modules"
cell names files (`executor.py`) and folders (`web/`, a whole folder in one layer) relative to
the package. The checker reads every module's imports with `ast` (function-local imports and
`if TYPE_CHECKING:` ones included: a dependency is a dependency, whenever it is loaded) and
reports, one line each:

- a module that no row of the table names, and a name in the table that matches no module;
- an import from a higher layer than the importer's;
- every import circle between modules (a strongly connected part of the import graph).

Each problem has a `key` without line numbers (stable while code moves) and a `message` that
names the modules, the import's place and the layers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path, PurePosixPath

_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Import:
    """One import statement's edge between two modules of the package."""

    importer: str
    imported: str
    path: str
    line: int
    where: str  # "top level", "function-local" or "TYPE_CHECKING"


@dataclass(frozen=True)
class Layer:
    name: str
    entries: tuple[str, ...]


@dataclass(frozen=True)
class Problem:
    key: str
    message: str


@dataclass(frozen=True)
class SourceTree:
    """The modules of one package: dotted name -> path relative to the package's folder."""

    package: str
    root: Path
    modules: dict[str, PurePosixPath]

    @classmethod
    def read(cls, package_dir: Path) -> SourceTree:
        modules: dict[str, PurePosixPath] = {}
        for path in sorted(package_dir.rglob("*.py")):
            relative = PurePosixPath(path.relative_to(package_dir).as_posix())
            parts = [package_dir.name, *relative.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = relative
        return cls(package=package_dir.name, root=package_dir, modules=modules)

    def is_package(self, module: str) -> bool:
        return self.modules[module].name == "__init__.py"

    def imports(self) -> list[Import]:
        """Every import of one module of the package by another, once per statement."""
        found: dict[tuple[str, str, int], Import] = {}
        for module, relative in self.modules.items():
            tree = ast.parse((self.root / relative).read_text(encoding="utf-8"), str(relative))
            for node, where in _import_nodes(tree):
                for imported in self._targets(module, node):
                    if imported != module:
                        edge = Import(module, imported, str(relative), node.lineno, where)
                        found.setdefault((module, imported, node.lineno), edge)
        return list(found.values())

    def _targets(self, module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in self.modules:
                    yield alias.name
            return
        base = self._resolve(module, node.module, node.level)
        if base not in self.modules:
            return
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            yield submodule if submodule in self.modules else base

    def _resolve(self, module: str, name: str | None, level: int) -> str:
        if level == 0:
            return name or ""
        parts = module.split(".")
        package = parts if self.is_package(module) else parts[:-1]
        base = package[: len(package) - (level - 1)]
        return ".".join([*base, name] if name else base)


def _import_nodes(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    def visit(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, where
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from visit(child, "function-local")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    yield from visit(ast.Module(body=[statement], type_ignores=[]), "TYPE_CHECKING")
                for statement in child.orelse:
                    yield from visit(ast.Module(body=[statement], type_ignores=[]), where)
            else:
                yield from visit(child, where)

    yield from visit(tree, "top level")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def read_layer_table(markdown: str) -> list[Layer]:
    """The rows of the first table whose header has "Layer" and "Modules" columns, top first."""
    lines = iter(markdown.splitlines())
    for line in lines:
        cells = _cells(line)
        if "Layer" in cells and "Modules" in cells:
            name_at, modules_at = cells.index("Layer"), cells.index("Modules")
            break
    else:
        raise ValueError("no table with a 'Layer' and a 'Modules' column")
    next(lines, None)  # the | --- | row
    layers: list[Layer] = []
    for line in lines:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        entries = tuple(
            code for code in _CODE.findall(cells[modules_at]) if code.endswith((".py", "/"))
        )
        layers.append(Layer(cells[name_at].strip("`* "), entries))
    return layers


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def check_layers(tree: SourceTree, layers: list[Layer]) -> list[Problem]:
    """Every problem of `tree` against `layers`: unplaced modules, stale names, imports from a
    higher layer and import circles."""
    placed, problems = _place(tree, layers)
    edges = tree.imports()
    for edge in edges:
        importer, imported = placed.get(edge.importer), placed.get(edge.imported)
        if importer is None or imported is None or imported[0] >= importer[0]:
            continue
        problems.append(
            Problem(
                f"{edge.importer} imports {edge.imported}",
                f"{edge.importer} (layer {importer[1]!r}) imports {edge.imported} "
                f"(layer {imported[1]!r}, higher) at {edge.path}:{edge.line} ({edge.where})",
            )
        )
    problems += _circles(edges)
    return problems


def _place(
    tree: SourceTree, layers: list[Layer]
) -> tuple[dict[str, tuple[int, str]], list[Problem]]:
    """module -> (layer's depth, layer's name), by the longest entry that names the module."""
    problems: list[Problem] = []
    placed: dict[str, tuple[int, str]] = {}
    used: set[str] = set()
    for module, relative in tree.modules.items():
        best: tuple[str, int, str] | None = None
        for depth, layer in enumerate(layers):
            for entry in layer.entries:
                if _names(entry, relative) and (best is None or len(entry) > len(best[0])):
                    best = (entry, depth, layer.name)
        if best is None:
            problems.append(
                Problem(
                    f"{module} is in no layer",
                    f"{module} ({relative}) is in no layer of the table: add it to a row",
                )
            )
            continue
        used.add(best[0])
        placed[module] = (best[1], best[2])
    for layer in layers:
        for entry in layer.entries:
            if entry not in used:
                problems.append(
                    Problem(
                        f"`{entry}` names no module",
                        f"the table's layer {layer.name!r} names `{entry}`, which is no module "
                        f"of {tree.package} (moved or removed?)",
                    )
                )
    return placed, problems


def _names(entry: str, relative: PurePosixPath) -> bool:
    if entry.endswith("/"):
        return relative.as_posix().startswith(entry)
    return relative.as_posix() == entry


def _circles(edges: Iterable[Import]) -> list[Problem]:
    graph: dict[str, dict[str, Import]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, {}).setdefault(edge.imported, edge)
        graph.setdefault(edge.imported, {})
    problems: list[Problem] = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        members = sorted(component)
        cycle = _cycle_through(graph, members[0], set(component))
        steps = ", ".join(
            f"{a} -> {b} ({graph[a][b].path}:{graph[a][b].line}, {graph[a][b].where})"
            for a, b in pairwise(cycle)
        )
        problems.append(
            Problem(
                "import circle: " + ", ".join(members),
                f"import circle between {', '.join(members)}; one loop: {steps}",
            )
        )
    return problems


def _strongly_connected(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _cycle_through(graph: dict[str, dict[str, Import]], start: str, within: set[str]) -> list[str]:
    """The shortest loop from `start` back to it inside one component (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in within:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no loop through {start}")
