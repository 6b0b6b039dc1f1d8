"""A run's hold on its caller's spend limits (`SpendAccount`), kept in one row per caller
(`cleveractors_spend`) that any number of workers share.

- Before each LLM call, one conditional UPDATE reserves the call's estimated cost: it adds the
  reservation only where every window's spent plus reserved plus it stays within the limit, so
  two workers reserving at once cannot both pass (the row's lock orders them; PostgreSQL checks
  the condition again on the row the first one left). The first call's reservation is made as
  the turn begins (`admit`), so a caller at the limit is refused before the run starts.
- The call's ledger row settles it: in the ledger's transaction, what it reserved is let go and
  what it cost is added to each window (on PostgreSQL in the same statement as the row's
  INSERT, and only if that INSERT wrote the row, so a retried write never counts twice).
- Whatever a run reserved and never settled (a call cut off before it was recorded) is let go
  when the run ends; a worker that died mid-call holds its reservations for `HOLD_S` at most.

Money is counted in whole nano-dollars, each call's cost rounded up.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    bindparam,
    case,
    exists,
    literal,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import Update

from cleveractors.errors import ConfigurationError, SpendLimitExceeded, StoreError
from cleveractors.result import SpendLeft
from cleveractors.spend_limits import SpendLimit, SpendLimits, period_start, resets_at
from cleveractors.store.dialects import insert_for
from cleveractors.store.schema import llm_calls, spend
from cleveractors.usage import LLMCallUsage

if TYPE_CHECKING:
    from cleveractors.store.engine import GatedEngine

__all__ = ["HOLD_S", "SpendAccount", "nano_usd", "spend_left"]

logger = logging.getLogger(__name__)

HOLD_S = 3600
"""How long a caller's reservations hold after the last one was made: longer than any call."""
_NANO = Decimal(10**9)
_UNITS = (("usd", "nusd"), ("tokens", "tokens"))


def nano_usd(cost: Decimal | None) -> int:
    """A cost in whole nano-dollars, rounded up (None costs nothing)."""
    return 0 if cost is None else math.ceil(cost * _NANO)


@dataclass(frozen=True, slots=True)
class _Amount:
    nusd: int
    tokens: int

    def __add__(self, other: _Amount) -> _Amount:
        return _Amount(self.nusd + other.nusd, self.tokens + other.tokens)


_NOTHING = _Amount(0, 0)


class SpendAccount:
    """One run's reservations against its caller's limits. Made per run, never shared.

    Args:
        engine: The store's database.
        caller: Whose limits (None: the runs of no particular caller, counted together).
        limits: The caller's limits for this run.
        clock: What time it is (UTC), by which the windows are read.
    """

    def __init__(
        self,
        engine: GatedEngine,
        caller: str | None,
        limits: SpendLimits,
        clock: Callable[[], datetime],
    ) -> None:
        self._engine = engine
        self.caller = caller
        self.limits = limits
        self._clock = clock
        self._held: dict[int, _Amount] = {}
        """What each call reserved that its ledger row has not yet settled, by call index."""
        self._admitted: _Amount | None = None
        """What `admit` reserved for the run's first call, until that call takes it."""
        self.refused: tuple[SpendLeft, ...] = ()
        """The caller's windows as the last refusal found them."""
        self._row: Any = None
        """The caller's row as the run's last committed settle left it (read back by the
        settling statement itself, so telling what is left costs no query)."""
        self._settling_row: Any = None

    @property
    def is_strict(self) -> bool:
        return self.limits.strict

    @property
    def _key(self) -> str:
        return self.caller or ""

    # -- reserving -------------------------------------------------------------------------------

    async def admit(self, *, tokens: int, cost_usd: Decimal | None) -> None:
        """Reserve the run's first call as the turn begins.

        Raises:
            SpendLimitExceeded: the caller's limits have no room for it.
        """
        amount = self._amount(tokens, cost_usd)
        await self._reserve(amount)
        self._admitted = amount

    async def reserve(self, index: int, *, tokens: int, cost_usd: Decimal | None) -> None:
        """Reserve call `index` before it is sent (the first call has its admission's,
        topped up if it turned out larger)."""
        amount = self._amount(tokens, cost_usd)
        admitted, self._admitted = self._admitted, None
        if admitted is None:
            await self._reserve(amount)
            self._held[index] = amount
            return
        top_up = _Amount(
            max(0, amount.nusd - admitted.nusd), max(0, amount.tokens - admitted.tokens)
        )
        if top_up != _NOTHING:
            try:
                await self._reserve(top_up)
            except BaseException:
                self._admitted = admitted
                raise
        self._held[index] = admitted + top_up

    def _amount(self, tokens: int, cost_usd: Decimal | None) -> _Amount:
        if cost_usd is None and any(limit.usd is not None for limit in self.limits.limits):
            raise ConfigurationError(
                "spend_limits: a limit in USD needs the model's price; set agent.pricing "
                "(input_per_mtok, output_per_mtok) or limit tokens instead"
            )
        return _Amount(nano_usd(cost_usd), tokens)

    async def _reserve(self, amount: _Amount) -> None:
        try:
            await self._reserve_in_store(amount)
        except SQLAlchemyError as exc:
            # The type only: the database's own message may quote the data.
            raise StoreError(
                f"store: {type(exc).__name__} while reserving spend for {self.caller!r}"
            ) from exc

    async def _reserve_in_store(self, amount: _Amount) -> None:
        now = self._now()
        async with self._engine.connect() as connection:
            # One statement, committed by itself: one round trip when the row is there.
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            statement = _reserving(self.limits).where(spend.c.caller == self._key)
            params = self._params(now, added=amount, let_go=_NOTHING)
            if (await autocommit.execute(statement, params)).first() is not None:
                return
            created = await autocommit.execute(
                insert_for(autocommit)(spend)
                .values(_new_row(self._key))
                .on_conflict_do_nothing()
                .returning(spend.c.caller)
            )
            is_new = created.first() is not None
            if is_new and (await autocommit.execute(statement, params)).first():
                return
            row = (await autocommit.execute(select(spend).where(spend.c.caller == self._key))).one()
        self._refuse(row._mapping, amount, now)

    def _params(self, now: int, *, added: _Amount, let_go: _Amount) -> dict[str, int]:
        """The values of the statements' parameters at `now`."""
        rolling = self.limits.of("rolling")
        moment = _from_epoch(now)
        return {
            "now": now,
            "day": period_start("day", moment),
            "month": period_start("month", moment),
            "rolling_from": now - (0 if rolling is None else rolling.seconds),
            "hold_until": now + HOLD_S,
            "add_nusd": added.nusd,
            "add_tokens": added.tokens,
            "less_nusd": let_go.nusd,
            "less_tokens": let_go.tokens,
        }

    def _refuse(self, row: Any, amount: _Amount, now: int) -> None:
        left = spend_left(row, self.limits, now)
        refusing = [
            entry
            for entry in left
            if entry.spent + entry.reserved + _in_unit(amount, entry.unit) > entry.limit
        ] or list(left)
        last = max(refusing, key=lambda entry: entry.resets_at or _from_epoch(now))
        self.refused = tuple(
            entry.model_copy(update={"refused": True}) if entry is last else entry for entry in left
        )
        raise SpendLimitExceeded(
            caller=self.caller,
            window=last.window,
            unit=last.unit,
            resets_at=last.resets_at or _from_epoch(now),
        )

    # -- settling ---------------------------------------------------------------------------------

    async def write_settled(
        self, connection: AsyncConnection, insert: Any, calls: Sequence[LLMCallUsage]
    ) -> list[int]:
        """Write the ledger rows (`insert`, ON CONFLICT DO NOTHING) and settle the calls among
        them that hold a reservation, in the caller's transaction. Returns their indices: call
        `settled` with them once the transaction committed."""
        pending = [call for call in calls if call.index in self._held]
        if not pending:
            await connection.execute(insert)
            return []
        reserved = sum((self._held[call.index] for call in pending), _NOTHING)
        spent = sum(
            (_Amount(nano_usd(call.cost_usd), call.usage.total_tokens) for call in pending),
            _NOTHING,
        )
        settling = _settling(self.limits).where(spend.c.caller == self._key)
        params = self._params(self._now(), added=spent, let_go=reserved)
        written = insert.returning(llm_calls.c.call_index)
        self._settling_row = None
        if connection.dialect.name == "postgresql":
            rows = written.cte("written_calls")
            found = await connection.execute(
                settling.where(exists(select(rows.c.call_index))).add_cte(rows), params
            )
            self._settling_row = found.first()
        elif (await connection.execute(written)).first() is not None:
            self._settling_row = (await connection.execute(settling, params)).first()
        return [call.index for call in pending]

    def settled(self, indices: Sequence[int]) -> None:
        """The calls at `indices` are settled: their transaction committed."""
        for index in indices:
            self._held.pop(index, None)
        if indices and self._settling_row is not None:
            self._row = self._settling_row._mapping

    async def release(self) -> None:
        """Let go what the run reserved and no ledger row settled (a call never recorded)."""
        left = sum(self._held.values(), self._admitted or _NOTHING)
        self._held.clear()
        self._admitted = None
        if left == _NOTHING:
            return
        now = self._now()
        try:
            async with self._engine.begin() as connection:
                found = await connection.execute(
                    _releasing().where(spend.c.caller == self._key),
                    self._params(now, added=_NOTHING, let_go=left),
                )
                row = found.first()
            self._row = None if row is None else row._mapping
        except Exception as exc:  # the hold runs out by itself; the run's outcome stands
            logger.warning(
                "store: letting go the spend reserved for %r failed (%s); it is held for %d s",
                self.caller,
                type(exc).__name__,
                HOLD_S,
            )

    async def left(self) -> tuple[SpendLeft, ...]:
        """The caller's windows now: spent, reserved and left (as the run's last write left
        them, when it made one)."""
        if self._row is not None:
            return spend_left(self._row, self.limits, self._now())
        return await read_spend_left(self._engine, self.caller, self.limits, self._clock)

    def _now(self) -> int:
        return int(self._clock().timestamp())


async def read_spend_left(
    engine: GatedEngine,
    caller: str | None,
    limits: SpendLimits,
    clock: Callable[[], datetime],
) -> tuple[SpendLeft, ...]:
    """A caller's windows as the store has them now.

    Raises:
        StoreError: the store could not be read.
    """
    try:
        async with engine.connect() as connection:
            autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
            found = await autocommit.execute(select(spend).where(spend.c.caller == (caller or "")))
            row = found.first()
    except Exception as exc:
        raise StoreError(
            f"store: reading the spend of {caller!r} failed ({type(exc).__name__})"
        ) from exc
    now = int(clock().timestamp())
    return spend_left(_new_row(caller or "") if row is None else row._mapping, limits, now)


def spend_left(row: Any, limits: SpendLimits, now: int) -> tuple[SpendLeft, ...]:
    """Each limit of `limits`, per unit, as the caller's row stands at `now`."""
    is_held = row["reserved_until"] > now
    entries: list[SpendLeft] = []
    for limit in limits.limits:
        start, is_open = _start_of(limit, row, now)
        for name, unit in _UNITS:
            most = getattr(limit, name)
            if most is None:
                continue
            scale = _NANO if unit == "nusd" else Decimal(1)
            spent = Decimal(row[f"{limit.window}_{unit}"] if is_open else 0) / scale
            reserved = Decimal(row[f"reserved_{unit}"] if is_held else 0) / scale
            entries.append(
                SpendLeft(
                    window=limit.window,
                    unit=name,
                    limit=Decimal(most),
                    spent=spent,
                    reserved=reserved,
                    left=max(Decimal(0), Decimal(most) - spent - reserved),
                    resets_at=_resets(limit, start, is_open=is_open),
                )
            )
    return tuple(entries)


def _resets(limit: SpendLimit, start: int, *, is_open: bool) -> datetime | None:
    """When the window ends: a calendar one always has an end, a rolling one only when open."""
    return resets_at(limit, start) if is_open or limit.window != "rolling" else None


def _start_of(limit: SpendLimit, row: Any, now: int) -> tuple[int, bool]:
    """The window's start, and whether the row's amounts are of it."""
    if limit.window == "rolling":
        start = int(row["rolling_start"])
        return start, start > now - limit.seconds
    start = period_start(limit.window, _from_epoch(now))
    return start, row[f"{limit.window}_start"] == start


def _param(name: str) -> BindParameter[int]:
    return bindparam(name, type_=BigInteger)


@functools.lru_cache(maxsize=256)
def _reserving(limits: SpendLimits) -> Update:
    """Add `add_*` to what is reserved, where every limit has room for it (one statement per
    set of limits, built once: only its parameters change)."""
    room = [
        _spent(limit.window, unit) + _held(unit) + _param(f"add_{unit}") <= _limit(limit, name)
        for limit in limits.limits
        for name, unit in _UNITS
        if getattr(limit, name) is not None
    ]
    values: dict[str, Any] = {
        "reserved_nusd": _held("nusd") + _param("add_nusd"),
        "reserved_tokens": _held("tokens") + _param("add_tokens"),
        "reserved_until": _param("hold_until"),
        **_carried(limits, is_adding=False),
    }
    return update(spend).where(*room).values(values).returning(spend.c.caller)


@functools.lru_cache(maxsize=256)
def _settling(limits: SpendLimits) -> Update:
    """Let go `less_*` of what is reserved and add `add_*` to each window."""
    return (
        update(spend)
        .values(
            reserved_nusd=_less(_held("nusd"), "less_nusd"),
            reserved_tokens=_less(_held("tokens"), "less_tokens"),
            **_carried(limits, is_adding=True),
        )
        .returning(*spend.columns)
    )


@functools.lru_cache(maxsize=256)
def _releasing() -> Update:
    return (
        update(spend)
        .values(
            reserved_nusd=_less(_held("nusd"), "less_nusd"),
            reserved_tokens=_less(_held("tokens"), "less_tokens"),
        )
        .returning(*spend.columns)
    )


def _is_current(window: str) -> ColumnElement[bool]:
    """Whether the row's amounts of `window` are of the current one (a passed one counts 0)."""
    if window == "rolling":
        return spend.c.rolling_start > _param("rolling_from")
    return spend.c[f"{window}_start"] == _param(window)


def _spent(window: str, unit: str) -> ColumnElement[int]:
    return case((_is_current(window), spend.c[f"{window}_{unit}"]), else_=literal(0))


def _carried(limits: SpendLimits, *, is_adding: bool) -> dict[str, Any]:
    """Each window brought to `now` (a passed one starts again at 0), plus `add_*` when adding."""
    values: dict[str, Any] = {"day_start": _param("day"), "month_start": _param("month")}
    windows = ["day", "month"]
    if limits.of("rolling") is not None:
        values["rolling_start"] = case(
            (_is_current("rolling"), spend.c.rolling_start), else_=_param("now")
        )
        windows.append("rolling")
    for window in windows:
        for unit in ("nusd", "tokens"):
            amount = _spent(window, unit)
            values[f"{window}_{unit}"] = amount + _param(f"add_{unit}") if is_adding else amount
    return values


def _held(unit: str) -> ColumnElement[int]:
    """What calls in flight reserved, unless the hold ran out."""
    return case(
        (spend.c.reserved_until > _param("now"), spend.c[f"reserved_{unit}"]), else_=literal(0)
    )


def _less(amount: ColumnElement[int], name: str) -> ColumnElement[int]:
    less = _param(name)
    return case((amount > less, amount - less), else_=literal(0))


def _limit(limit: SpendLimit, name: str) -> int:
    most = getattr(limit, name)
    return nano_usd(most) if name == "usd" else int(most)


def _in_unit(amount: _Amount, unit: str) -> Decimal:
    return Decimal(amount.nusd) / _NANO if unit == "usd" else Decimal(amount.tokens)


def _new_row(caller: str) -> dict[str, Any]:
    return {column.name: 0 for column in spend.columns if column.name != "caller"} | {
        "caller": caller
    }


def _from_epoch(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
