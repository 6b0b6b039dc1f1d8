"""Where a run stands in its run tree: the agents above it, the recorder of the tree's ledger,
and the limits it inherits. The root run's lineage is its agent's own; a run an agent calls as a
tool gets its caller's, one agent deeper (`agents._delegate`)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from cleveractors.usage import CallRecorder

__all__ = ["DEFAULT_MAX_AGENT_DEPTH", "Lineage"]

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

    @property
    def depth(self) -> int:
        return len(self.path) - 1
