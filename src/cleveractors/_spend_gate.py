"""The run's spend gate as the loop sees it: each LLM call reserves its estimated cost before it
is sent (`CallSpend.reserve`), and the store settles it with the call's ledger row. The executor's
path sets it for the run (`current_call_spend`); the run's bill reads it once, as it reads the
run's trace."""

from __future__ import annotations

from contextvars import ContextVar
from decimal import Decimal
from typing import Protocol

__all__ = ["CallSpend", "current_call_spend"]


class CallSpend(Protocol):
    """A run's hold on its caller's spend limits (`cleveractors.store.spend.SpendAccount`)."""

    @property
    def is_strict(self) -> bool:
        """Whether a call reserves its worst case (prompt plus output cap), not its prompt."""

    async def reserve(self, index: int, *, tokens: int, cost_usd: Decimal | None) -> None:
        """Reserve what call `index` of the run may cost, before it is sent.

        Raises:
            SpendLimitExceeded: the caller's limit has no room for it; nothing is reserved.
            ConfigurationError: a limit in USD for a call that cannot be priced.
            StoreError: the store could not be written.
        """


current_call_spend: ContextVar[CallSpend | None] = ContextVar("current_call_spend", default=None)
"""The spend gate of the run in this context, when its caller has limits."""
