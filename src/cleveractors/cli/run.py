"""`cleveractors run`: send a message; see the answer and its tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cleveractors.cli.actor import (
    BASE_URL_OPTION,
    VERBOSE_OPTION,
    build_executor,
    check_run_options,
    export_telemetry,
    show_library_logs,
)
from cleveractors.cli.command import ACTOR_ARGUMENT, Command, app, fail_configured, out
from cleveractors.cli.render import EventRenderer
from cleveractors.cli.turn import Output, run_shown
from cleveractors.errors import ConfigurationError
from cleveractors.turns import NewMessage


@app.command(cls=Command, short_help="Send a message; see the answer and its tokens.")
def run(
    actor: Annotated[Path, ACTOR_ARGUMENT],
    message: Annotated[str, typer.Argument(help="The user's message.", metavar="MESSAGE")],
    no_stream: Annotated[bool, typer.Option("--no-stream", help="Wait for the answer.")] = False,
    events: Annotated[bool, typer.Option("--events", help="Print events as JSON lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    base_url: Annotated[str | None, BASE_URL_OPTION] = None,
    verbose: Annotated[bool, VERBOSE_OPTION] = False,
    session: Annotated[
        str | None,
        typer.Option(help="Continue (or start) this stored session; needs `store:`.", metavar="ID"),
    ] = None,
) -> None:
    """Send MESSAGE to the actor: the answer streams live, then a table of the tokens spent.

    A tool declared `approval: required` pauses the run: on a terminal you are asked to
    approve, edit (new JSON arguments) or reject (with a reason) each such call, and the run
    goes on; the usage table then lists the calls of every segment. Not on a terminal (or with
    --json / --events, or Ctrl-D at the question), it prints the run id and the pending calls
    and exits 3: decide later with `cleveractors resume` (only with a store: without one, the
    pause is gone when the command exits).
    """
    check_run_options(message, base_url, events=events, as_json=as_json, no_stream=no_stream)
    export_telemetry()
    output = Output(no_stream=no_stream, events=events, as_json=as_json, base_url=base_url)
    view = None if as_json or events else EventRenderer(out)
    show_library_logs(verbose, view)
    try:
        executor = build_executor(actor, base_url=base_url)
    except ConfigurationError as exc:
        fail_configured(exc)
    run_shown(actor, executor, NewMessage(message, session_id=session), output, view)
