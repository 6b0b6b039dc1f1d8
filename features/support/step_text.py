"""Reading what a step's text lists."""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["listed_names"]


def listed_names(text: str, known: Collection[str], *, what: str) -> tuple[str, ...]:
    """The names a step lists ("a, b and c"), each one of `known`; a typo fails the step,
    naming `what` was listed and what is known."""
    chosen = tuple(name.strip() for name in text.replace(" and ", ",").split(","))
    unknown = set(chosen) - set(known)
    if unknown:
        raise ValueError(f"unknown {what} {sorted(unknown)}; known: {', '.join(known)}")
    return chosen
