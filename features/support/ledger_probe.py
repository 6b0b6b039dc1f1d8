"""Tools for the store scenarios that reach into the store's SQLite file (named by
`CLEVERACTORS_PROBE_DB`) while the run is going, as another worker or a failing database would.

`count_ledger_rows` answers how many ledger rows the file holds at the moment the tool runs, so
a scenario can tell whether the round's LLM call was written before the round's tools ran.
"""

from __future__ import annotations

import os
import sqlite3
import time


def count_ledger_rows(city: str) -> str:
    """How many LLM calls the ledger holds right now (the city is ignored)."""
    with sqlite3.connect(os.environ["CLEVERACTORS_PROBE_DB"]) as connection:
        (count,) = connection.execute("SELECT count(*) FROM cleveractors_llm_calls").fetchone()
    return f"ledger rows: {count}"


def steal_session(city: str) -> str:
    """Hand the running session to another run, as a worker would after this run's lease ran
    out (the city is ignored)."""
    with sqlite3.connect(os.environ["CLEVERACTORS_PROBE_DB"]) as connection:
        connection.execute("UPDATE cleveractors_sessions SET running_run_id = 'another-run'")
    return "stolen"


def steal_session_and_wait(seconds: float) -> str:
    """Hand the running session to another run, then take `seconds` (long enough for the
    run's lease to come up for renewal)."""
    steal_session("")
    time.sleep(seconds)
    return "stolen"


def hide_sessions_table(seconds: float) -> str:
    """Make the sessions table unreachable for `seconds` (every lease renewal meanwhile fails),
    then bring it back as it was."""
    with sqlite3.connect(os.environ["CLEVERACTORS_PROBE_DB"]) as connection:
        connection.execute("ALTER TABLE cleveractors_sessions RENAME TO hidden_sessions")
    time.sleep(seconds)
    with sqlite3.connect(os.environ["CLEVERACTORS_PROBE_DB"]) as connection:
        connection.execute("ALTER TABLE hidden_sessions RENAME TO cleveractors_sessions")
    return "back"


def lose_runs_table(city: str) -> str:
    """Make the runs table unreachable for the rest of the run (the city is ignored)."""
    with sqlite3.connect(os.environ["CLEVERACTORS_PROBE_DB"]) as connection:
        connection.execute("ALTER TABLE cleveractors_runs RENAME TO lost_runs")
    return "lost"
