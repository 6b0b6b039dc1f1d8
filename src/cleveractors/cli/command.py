"""The `cleveractors` app, its consoles and how a command ends with an error line."""

from __future__ import annotations

import signal
import warnings
from importlib.metadata import version
from typing import Annotated, Any, NoReturn, TextIO

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand

from cleveractors.cli.render import one_line
from cleveractors.errors import ConfigurationError

_ACTOR_HELP = "The actor's YAML config."
ACTOR_ARGUMENT = typer.Argument(help=_ACTOR_HELP, metavar="ACTOR", show_default=False)
SIGTERM_EXIT = 128 + signal.SIGTERM  # 143, what a shell reports for a process SIGTERM ended


class Command(TyperCommand):
    """A command whose help reads `run [OPTIONS] ACTOR MESSAGE`, the usual notation: Typer
    writes required arguments as `{ACTOR}` in the usage line and `ACTOR <path>` in the list."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [piece.strip("{}") for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None and param.param_type_name == "argument":
                arguments.append((param.metavar or (param.name or "").upper(), record[1]))
            elif record is not None:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


_APP_HELP = (
    "Run LLM actors with tools from a terminal, and see every token they spend.\n\n"
    "Exit codes: 0 success; 1 the run or the config failed; 2 wrong usage or a missing extra; "
    "3 the run paused: tool calls wait for a person's approval (`cleveractors resume`); "
    "130 interrupted (Ctrl-C); 143 terminated (SIGTERM)."
)
app = typer.Typer(
    help=_APP_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: the rich layout labels every flag `<bool>` and every argument `<str>`.
    rich_markup_mode=None,
)
# Model text is shown as sent: no Rich markup, emoji codes or highlighting applied to it.
out = Console(soft_wrap=True, markup=False, emoji=False, highlight=False)
err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)


def main() -> None:
    """The console script's entry point."""
    _show_warnings_as_lines()
    app()


def _show_warnings_as_lines() -> None:
    """Every warning as one line on stderr, and the library's deprecations (a renamed config key)
    shown at all: Python hides a DeprecationWarning that is not raised from `__main__`."""
    warnings.filterwarnings("default", category=DeprecationWarning, module=r"cleveractors(\.|$)")
    warnings.showwarning = _print_warning


def _print_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    err.print(f"{category.__name__}: {message}")


def _show_version(value: bool) -> None:
    if value:
        out.print(f"cleveractors {version('cleveractors')}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Run LLM actors with tools from a terminal, and see every token they spend."""


def fail(message: str, *, code: int = 1) -> NoReturn:
    err.print(Text.assemble(("error: ", "bold red"), one_line(message)))
    raise typer.Exit(code)


def fail_configured(exc: ConfigurationError) -> NoReturn:
    """End with a config's problems one per line, as `validate` lists them: joined into one
    line, a config with several problems is hard to read."""
    err.print(Text.assemble(("error: ", "bold red"), str(exc)))
    raise typer.Exit(1)


STORE_URL_OPTION = typer.Option(
    "--store", help="The store's database URL; overrides the actor's store.url.", metavar="URL"
)
