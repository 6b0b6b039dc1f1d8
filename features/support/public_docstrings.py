"""The docstrings of the public names, read as the API reference reads them (griffe, from src/).

Reading the source rather than importing the package is what mkdocstrings does, so a type
alias or a constant is documented by the string literal right after its assignment, and a
re-exported name by the docstring at its definition.
"""

from __future__ import annotations

from pathlib import Path

import griffe

SOURCES = Path(__file__).resolve().parents[2] / "src"


def public_docstrings(module_names: list[str]) -> dict[str, str]:
    """`module.name` -> its docstring ("" when it has none), for every name in each module's
    `__all__`, in order.

    Raises:
        KeyError: a module is not part of the package, or a name in its `__all__` is not
            defined there.
    """
    package = griffe.load(
        "cleveractors", search_paths=[str(SOURCES)], resolve_aliases=True, store_source=False
    )
    docstrings: dict[str, str] = {}
    for module_name in module_names:
        module = package if module_name == "cleveractors" else package[_inner(module_name)]
        for export in module.exports or ():
            name = str(export)
            found = module[name]
            target = found.final_target if found.is_alias else found
            docstring = target.docstring.value if target.docstring else ""
            docstrings[f"{module_name}.{name}"] = docstring.strip()
    return docstrings


def _inner(module_name: str) -> str:
    return module_name.removeprefix("cleveractors.")
