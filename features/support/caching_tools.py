"""A tool for the prompt-caching scenarios: one whose output is empty, which no breakpoint can
sit on (the Messages API refuses an empty text block)."""

from __future__ import annotations


def find_nothing(query: str) -> str:
    """Look something up, and find nothing."""
    return ""
