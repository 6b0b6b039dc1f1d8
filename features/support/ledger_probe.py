"""A tool for the store scenarios that reads the ledger while the run is going.

It answers how many ledger rows the SQLite file named by `CLEVERACTORS_PROBE_DB` holds at the
moment the tool runs, so a scenario can tell whether the round's LLM call was written before
the round's tools ran.
"""

from __future__ import annotations

import os
import sqlite3


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
