"""Importing a config's tool handler (`module:function`), beside the config file first.

A handler module that sits next to the actor's YAML (`mytools.py`, or a package folder `mytools/`,
with or without `__init__.py`) is loaded from there under a name of its own
(`cleveractors_local_<hash>_mytools`), so it imports from any working directory, and the folder is
never put on `sys.path`, where it could shadow other code's imports. Anything else is imported as
usual, from `sys.path`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from cleveractors._config_tools import CallerHeaders, McpServer
from cleveractors.errors import ConfigurationError

__all__ = ["caller_headers_of", "import_callable", "import_handler_target"]


def import_handler_target(handler: str, *, where: str, search_dir: Path | None) -> object:
    """The object `handler` (`package.module:attribute.path`) names.

    Raises:
        ConfigurationError: it cannot be imported, saying where it looked and how to fix it.
    """
    module_name, _, attribute_path = handler.partition(":")
    module = _import_module(module_name, where=where, search_dir=search_dir)
    target: object = module
    for attribute in attribute_path.split("."):
        try:
            target = getattr(target, attribute)
        except AttributeError:
            raise ConfigurationError(
                f"{where} cannot be imported: module {module_name!r} "
                f"({_origin(module)}) has no {attribute_path!r}"
            ) from None
    return target


def import_callable(handler: str, *, where: str, search_dir: Path | None) -> Callable[..., Any]:
    """The callable `handler` names (a tool's handler, a server's `caller_headers`).

    Raises:
        ConfigurationError: it cannot be imported (saying where it was looked for), or is not
            callable.
    """
    target = import_handler_target(handler, where=where, search_dir=search_dir)
    if not callable(target):
        raise ConfigurationError(f"{where} is not callable")
    return cast(Callable[..., Any], target)


def caller_headers_of(server: McpServer, *, search_dir: Path | None) -> CallerHeaders | None:
    """An MCP server's `caller_headers` as a function, imported when the config names it.

    Raises:
        ConfigurationError: it cannot be imported, or is not callable.
    """
    named = server.caller_headers
    if named is None or callable(named):
        return named
    where = f"mcp server {server.name!r}: caller_headers {named!r}"
    return import_callable(named, where=where, search_dir=search_dir)


def _origin(module: ModuleType) -> str:
    """The module's file; a namespace package's folder."""
    file: str | None = getattr(module, "__file__", None)
    folders = list(getattr(module, "__path__", ()))
    return file or (folders[0] if folders else "built in")


def _import_module(module_name: str, *, where: str, search_dir: Path | None) -> ModuleType:
    local = _local_source(module_name, search_dir)
    try:
        if local is not None:
            return _load_local(module_name, local)
        return importlib.import_module(module_name)
    except Exception as exc:  # ImportError, a SyntaxError, or whatever the module raises on import
        raise ConfigurationError(
            f"{where} cannot be imported: {type(exc).__name__}: {exc}; "
            + _where_we_looked(module_name, search_dir, local)
        ) from None


def _local_source(module_name: str, search_dir: Path | None) -> Path | None:
    """The top-level module file, package `__init__.py` or namespace folder (a folder without
    `__init__.py`, as Python imports one) beside the config, if there is one."""
    if search_dir is None:
        return None
    top = module_name.split(".")[0]
    for candidate in (search_dir / f"{top}.py", search_dir / top / "__init__.py"):
        if candidate.is_file():
            return candidate
    folder = search_dir / top
    return folder if folder.is_dir() else None


def _load_local(module_name: str, source: Path) -> ModuleType:
    top, _, rest = module_name.partition(".")
    unique = _unique_name(top, source)
    if unique not in sys.modules:
        _register_local(unique, source)
    if not rest:
        return sys.modules[unique]
    try:
        return importlib.import_module(f"{unique}.{rest}")
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith(f"{unique}."):
            raise  # what the submodule itself imports is missing
        # The name the user wrote, not ours; and where it was looked for.
        missing = top + exc.name.removeprefix(unique)
        raise ModuleNotFoundError(
            f"No module named {missing!r} in {_location(source)}", name=missing
        ) from None


def _unique_name(top: str, source: Path) -> str:
    """The name a module beside the config is registered under: one per folder and name."""
    folder = _location(source).parent.resolve()
    return f"cleveractors_local_{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}_{top}"


def _location(source: Path) -> Path:
    """Where a module beside the config lives: its file, or its package's folder."""
    return source.parent if source.name == "__init__.py" else source


def _register_local(unique: str, source: Path) -> None:
    if source.is_dir():
        # A namespace package: no code to run, its submodules are found in the folder.
        spec = importlib.machinery.ModuleSpec(unique, None, is_package=True)
        spec.submodule_search_locations = [str(source)]
        sys.modules[unique] = importlib.util.module_from_spec(spec)
        return
    loader = importlib.machinery.SourceFileLoader(unique, str(source))
    is_package = source.name == "__init__.py"
    spec = importlib.machinery.ModuleSpec(unique, loader, origin=str(source), is_package=is_package)
    spec.has_location = True
    if is_package:
        spec.submodule_search_locations = [str(source.parent)]
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as the import system does: its own (relative) imports and
    # dataclasses look themselves up in sys.modules.
    sys.modules[unique] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise


def _where_we_looked(module_name: str, search_dir: Path | None, local: Path | None) -> str:
    if local is not None and local.is_dir():
        return (
            f"{local.name} is the folder {local} beside the actor config (a package without "
            "__init__.py): the module must be a file in it, or fix the error in that file"
        )
    if local is not None:
        return f"it was loaded from {local} (beside the actor config); fix the error in that file"
    top = module_name.split(".")[0]
    beside = (
        ""
        if search_dir is None
        else f"looked for {top}.py or {top}/ beside the actor config in {search_dir}, then "
    )
    return (
        f"{beside}on sys.path; put the module beside the actor config, or make it importable "
        "(pip install your package, or set PYTHONPATH)"
    )
