"""The `cleveractors` command: run an actor from a terminal, check its config, or serve it.

    cleveractors run actor.yaml "What's the weather in Paris?"   # live answer, tools, usage
    cleveractors chat actor.yaml                                   # turn after turn, /usage, /new
    cleveractors validate actor.yaml
    cleveractors serve actor.yaml --port 8000                      # needs cleveractors[web]
    cleveractors run actor.yaml "And tomorrow?" --session s-1      # a stored session
    cleveractors usage actor.yaml --since 2026-01-01               # the ledger and its totals
    cleveractors store prune actor.yaml                            # sessions past retention_days
    cleveractors resume actor.yaml RUN_ID --approve CALL_ID        # decide on a paused run
    cleveractors approvals actor.yaml --run RUN_ID                 # who decided what, when

A thin client of `ActorExecutor`, like `cleveractors.web`. Exit codes: 0 success, 1 the run or
the config failed, or `serve` cannot listen (one line on stderr, never a traceback), 2 wrong
usage (a bad option or argument), a missing extra or `OTEL_*` variables asking for an export
that cannot happen, 3 the run paused: tool calls wait for a person's approval (not on a
terminal, or left undecided), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM: stopped as
Ctrl-C stops it).

`run` and `serve` export OpenTelemetry traces and metrics when the `OTEL_*` variables ask for it
(`cleveractors[otel]`; the rule is in `cleveractors._otel_setup`).

One module per command family (`run`, `chat`, `validate`, `serve`, `store` for `usage` and
`store prune`, `approvals` for `resume` and `approvals`), over what they share: `turn` (a turn
shown live, asked about, billed; `turn.run_turn` is the one call of the executor's run
methods), `actor` (the config and executor a command needs), `asking`, `schema` and `segments`
(a person's decisions and their check, a run's segments), `command` (the app, its consoles,
the error lines) and `render` (events, usage tables). Nothing below imports a command module.
"""

from __future__ import annotations

import sys

try:  # the console script is installed even without the extra
    import typer  # noqa: F401
    from rich import console  # noqa: F401
except ImportError as _missing:
    sys.stderr.write(
        f"error: the command line needs {_missing.name!r}: pip install 'cleveractors[cli]'\n"
    )
    raise SystemExit(2) from None

# Each command family registers its commands on `app` when imported, in the order `--help`
# lists them.
# isort: off
from cleveractors.cli import run as _run  # noqa: F401
from cleveractors.cli import chat as _chat  # noqa: F401
from cleveractors.cli import validate as _validate  # noqa: F401
from cleveractors.cli.serve import serve
from cleveractors.cli.store import ledger_table
from cleveractors.cli import approvals as _approvals  # noqa: F401
from cleveractors.cli.command import app, main
from cleveractors.cli.render import EventRenderer, usage_table
# isort: on

__all__ = ["EventRenderer", "app", "ledger_table", "main", "serve", "usage_table"]
