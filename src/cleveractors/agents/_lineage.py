"""Where a run stands in its run tree: the agents above it, the recorder of the tree's ledger,
and the limits it inherits. The root run's lineage is its agent's own; a run an agent calls as a
tool gets its caller's, one agent deeper (`agents._delegate`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TypeVar

from cleveractors.usage import CallRecorder

__all__ = ["DEFAULT_MAX_AGENT_DEPTH", "Lineage", "least"]

_Amount = TypeVar("_Amount", int, Decimal)

DEFAULT_MAX_AGENT_DEPTH = 3
"""How deep agents may call agents by default: a root run, its children, their children and
theirs."""


@dataclass(frozen=True, slots=True)
class Lineage:
    """What a run inherits from the runs above it."""

    path: tuple[str, ...]
    """The agents from the root run's down to this run's, by name."""
    parent_run_id: str | None = None
    """The run that called this run's agent as a tool; None for the root."""
    recorder: CallRecorder | None = None
    """The tree's recorder (the root run's ledger): every run of the tree hands its calls to it."""
    max_depth: int = DEFAULT_MAX_AGENT_DEPTH
    """The deepest a run of this tree may be (the root is at depth 0)."""
    token_budget: int | None = None
    """This run's token budget: its agent's, but never more than what its caller has left."""
    cost_budget_usd: Decimal | None = None
    """This run's cost budget, as `token_budget`."""
    token_cap: int | None = None
    """What the caller had left of its token budget when this run began; None for the root."""
    cost_cap_usd: Decimal | None = None
    """What the caller had left of its cost budget, as `token_cap`."""

    def under_budgets(self, token_budget: int | None, cost_budget_usd: Decimal | None) -> Lineage:
        """The lineage of the run once another agent's budgets apply (a handoff), still never
        more than what the caller left it."""
        return replace(
            self,
            token_budget=least(token_budget, self.token_cap),
            cost_budget_usd=least(cost_budget_usd, self.cost_cap_usd),
        )

    @property
    def depth(self) -> int:
        return len(self.path) - 1


def least(own: _Amount | None, cap: _Amount | None) -> _Amount | None:
    """The smaller of a budget and a cap, either of which may be absent."""
    if own is None or cap is None:
        return cap if own is None else own
    return min(own, cap)
