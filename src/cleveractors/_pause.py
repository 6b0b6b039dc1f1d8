"""The paused runs of an executor without a store: a bounded book, in this process only.

A pause is kept until it is resumed or its last pending call expires (`approval_timeout_s`): at
its expiry it leaves the book, and a resumption of it is told it expired. What became of a
pause that left (resumed in which segment, or expired) is remembered for a bounded number of
pauses, so a late decision is answered with a conflict rather than "not found".
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from datetime import UTC, datetime

from cleveractors.approvals import PausedRun
from cleveractors.errors import ApprovalConflictError, ApprovalExpiredError, RunNotFoundError

__all__ = ["MemoryPauses"]


class MemoryPauses:
    """The paused runs of an executor without a store: in this process only, gone with it."""

    MAX_REMEMBERED_ENDINGS = 10_000
    """How many ended pauses (resumed or expired) are remembered, to answer a repeated decision
    with a conflict rather than "not found"; the oldest are forgotten first."""

    def __init__(self) -> None:
        self._paused: dict[str, PausedRun] = {}
        self._expiries: list[tuple[datetime, str]] = []
        """(expiry, run id) of every pause kept, soonest first: what the next sweep evicts."""
        self._ended: OrderedDict[str, tuple[str | None, str | None, datetime | None]] = (
            OrderedDict()
        )
        """By paused run id: the segment that resumed it (None: it expired), the caller it
        belonged to, and when it expired."""

    def __len__(self) -> int:
        """How many pauses wait now (expired ones are swept out first)."""
        self._sweep(datetime.now(UTC))
        return len(self._paused)

    def keep(self, paused: PausedRun) -> None:
        self._sweep(datetime.now(UTC))
        self._paused[paused.run_id] = paused
        heapq.heappush(self._expiries, (_expiry(paused), paused.run_id))
        if len(self._expiries) > 2 * len(self._paused) + 64:  # entries of pauses resumed since
            self._expiries = [(_expiry(kept), run_id) for run_id, kept in self._paused.items()]
            heapq.heapify(self._expiries)

    def find(self, run_id: str, caller: str | None) -> PausedRun:
        """The paused run, for its own caller only.

        Raises:
            RunNotFoundError: no such paused run for this caller.
            ApprovalExpiredError: its calls waited past their expiry: none of them was run.
            ApprovalConflictError: it was resumed already.
        """
        self._sweep(datetime.now(UTC))
        paused = self._paused.get(run_id)
        ended = self._ended.get(run_id)
        # Another caller's ended run is "not found", like its paused one: never revealed.
        if paused is None and ended is not None and ended[1] == caller:
            resumed_in, _, expired_at = ended
            if expired_at is not None:
                raise ApprovalExpiredError(
                    f"run {run_id!r} expired at {expired_at.isoformat()}: its calls were not run",
                    run_id=run_id,
                )
            raise ApprovalConflictError(
                f"run {run_id!r} was already resumed (by run {resumed_in})", run_id=run_id
            )
        if paused is None or paused.caller != caller:
            raise RunNotFoundError(f"no paused run {run_id!r}", run_id=run_id)
        return paused

    def take(self, run_id: str, *, resumed_in: str) -> None:
        """Claim the paused run for one resumption: nothing awaits between a `find` and this,
        so two resumptions in one process cannot both take it."""
        paused = self._paused.pop(run_id)
        self._remember(run_id, (resumed_in, paused.caller, None))

    def _sweep(self, now: datetime) -> None:
        """Evict every pause whose last pending call has expired."""
        while self._expiries and self._expiries[0][0] <= now:
            expired_at, run_id = heapq.heappop(self._expiries)
            paused = self._paused.get(run_id)
            if paused is not None and _expiry(paused) == expired_at:
                del self._paused[run_id]
                self._remember(run_id, (None, paused.caller, expired_at))

    def _remember(
        self, run_id: str, ending: tuple[str | None, str | None, datetime | None]
    ) -> None:
        self._ended[run_id] = ending
        if len(self._ended) > self.MAX_REMEMBERED_ENDINGS:
            self._ended.popitem(last=False)


def _expiry(paused: PausedRun) -> datetime:
    """When the pause ends on its own: when the last of its pending calls expires."""
    return max(pending.expires_at for pending in paused.pending)
