"""Spend limits per caller: what a caller may spend (USD or tokens) per calendar day, per
calendar month (UTC) or per rolling window, across every run and every worker of one store.

    spend_limits:
      strict: false          # true: reserve each call's worst case, so a limit is never passed
      limits:
        - {window: day, usd: 5}
        - {window: month, tokens: 2000000}
        - {window: rolling, hours: 5, usd: 1}

The limits come from the actor's YAML (the same for every caller) or from a hook the
application gives (`ActorExecutor(spend_limits=...)`, `create_app(spend_limits=...)`) that
returns a caller's limits, asked at the start of each of that caller's turns, so a plan that
changes applies to the next turn. The store keeps the counters (`cleveractors.store.spend`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Literal, Self

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from cleveractors._config_rules import Frozen

__all__ = [
    "SpendLimit",
    "SpendLimits",
    "SpendLimitsHook",
    "SpendPolicy",
    "SpendWindow",
    "period_start",
    "resets_at",
]

SpendWindow = Literal["day", "month", "rolling"]
"""`day` and `month` are calendar periods in UTC; `rolling` opens at a caller's first call
after the last one closed and lasts `hours`."""


class SpendLimit(Frozen):
    """What a caller may spend in one window: in US dollars, in tokens, or both."""

    window: SpendWindow
    usd: Decimal | None = Field(default=None, gt=0)
    """The most the window's calls may cost, priced as the ledger prices them."""
    tokens: PositiveInt | None = None
    """The most input and output tokens the window's calls may use."""
    hours: PositiveFloat | None = None
    """The length of a `rolling` window (only there)."""

    @model_validator(mode="after")
    def _check_fields(self) -> Self:
        if self.usd is None and self.tokens is None:
            raise ValueError(f"a {self.window} spend limit needs usd, tokens or both")
        if (self.window == "rolling") != (self.hours is not None):
            raise ValueError("hours is required for a rolling window, and only there")
        return self

    @property
    def seconds(self) -> int:
        """A rolling window's length, in whole seconds (0 for a calendar window)."""
        return 0 if self.hours is None else max(1, round(self.hours * 3600))


class SpendLimits(Frozen):
    """A caller's limits: at most one per window."""

    limits: tuple[SpendLimit, ...] = Field(min_length=1)
    strict: bool = False
    """False: each call reserves its estimated prompt, so the calls in flight can pass a limit
    by what their replies cost. True: each call reserves its prompt plus its output cap at the
    model's price (the model needs a `max_tokens`), so the limit is never passed."""

    @model_validator(mode="after")
    def _check_windows(self) -> Self:
        windows = [limit.window for limit in self.limits]
        repeated = sorted({window for window in windows if windows.count(window) > 1})
        if repeated:
            raise ValueError(f"one limit per window; {', '.join(repeated)} is given twice")
        return self

    def of(self, window: SpendWindow) -> SpendLimit | None:
        return next((limit for limit in self.limits if limit.window == window), None)


SpendLimitsHook = Callable[[str | None], SpendLimits | Awaitable[SpendLimits | None] | None]
"""`(caller) -> limits`: a caller's limits now (None: no limit), sync or async."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class SpendPolicy:
    """Where a run's limits come from, and the clock the windows are read by."""

    limits: SpendLimits | SpendLimitsHook
    clock: Callable[[], datetime] = field(default=_utc_now)

    async def limits_for(self, caller: str | None) -> SpendLimits | None:
        """The caller's limits now."""
        if isinstance(self.limits, SpendLimits):
            return self.limits
        found = self.limits(caller)
        if inspect.isawaitable(found):
            found = await found
        return found


def period_start(window: Literal["day", "month"], now: datetime) -> int:
    """The start of the calendar day or month `now` is in, in seconds since the epoch (UTC)."""
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if window == "month":
        start = start.replace(day=1)
    return int(start.timestamp())


def resets_at(limit: SpendLimit, start: int) -> datetime:
    """When the window that started at `start` (seconds since the epoch) ends."""
    opened = datetime.fromtimestamp(start, UTC)
    if limit.window == "day":
        return opened + timedelta(days=1)
    if limit.window == "month":
        year, month = divmod(opened.month, 12)
        return opened.replace(year=opened.year + year, month=month + 1)
    return opened + timedelta(seconds=limit.seconds)
