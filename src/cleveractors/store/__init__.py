"""The store extra (`pip install 'cleveractors[store]'`, `[postgres]` for PostgreSQL): sessions
and an append-only usage ledger in one SQL database.

- `SqlStore(url, history_turns=50, retention_days=None)`: open it with `async with store:`;
  `SqlStore.from_config(config.store, config_dir=...)` takes a relative SQLite path from the
  actor file's folder (`resolve_sqlite_path()`).
- `store.run(session_id=..., caller=...)`: one run's hold on its session, its history and its
  ledger rows; `store.history()`, `store.session_turns()`, `store.delete_session()`,
  `store.usage()`, `store.prune()`, `store.idle_sessions()`.
- `store.claim_idempotency_key()`, `renew_idempotency_key()` (or `idempotency_lease()`, which
  renews it while a run goes), `settle_idempotency_key()`: one run per request sent under an
  idempotency key (`request_digest()` tells requests apart).
- `store.paused_run()`, `store.run_status()`, `store.approvals()`: paused runs and the audit of
  decisions. Leases (a run's hold on its session or key) are judged by the database's clock.
"""

try:
    import sqlalchemy  # noqa: F401  # only checked for here
except ImportError as exc:
    # ModuleNotFoundError naming the missing module, so callers can tell it from other errors.
    raise ModuleNotFoundError(
        f"cleveractors.store needs the store extra ({exc.name} is missing): "
        "pip install 'cleveractors[store]'",
        name=exc.name,
    ) from exc

from cleveractors.store.idempotency import Claimed, IdempotencyClaim, Replay, request_digest
from cleveractors.store.records import LedgerRow, RunStatus, StoredTurn, UsageReport
from cleveractors.store.sql import DEFAULT_STORE_URL, SqlStore, StoreRun, resolve_sqlite_path

__all__ = [
    "DEFAULT_STORE_URL",
    "Claimed",
    "IdempotencyClaim",
    "LedgerRow",
    "Replay",
    "RunStatus",
    "SqlStore",
    "StoreRun",
    "StoredTurn",
    "UsageReport",
    "request_digest",
    "resolve_sqlite_path",
]
