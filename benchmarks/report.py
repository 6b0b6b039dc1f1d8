"""Rows of the benchmark table, their targets, and writing them as markdown and JSON."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Target:
    """A limit a measured value must stay under (`value <= limit`, or `<` when strict)."""

    limit: float
    is_strict: bool = False

    def is_met(self, value: float) -> bool:
        return value < self.limit if self.is_strict else value <= self.limit

    def describe(self, unit: str) -> str:
        return f"{'<' if self.is_strict else '≤'} {_number(self.limit, unit)}"


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the table: a measured value, its target (None: shown for comparison only)."""

    section: str
    measure: str
    value: float
    unit: str
    target: Target | None = None
    detail: str = ""

    @property
    def passed(self) -> bool | None:
        return None if self.target is None else self.target.is_met(self.value)

    @property
    def verdict(self) -> str:
        return {None: "info", True: "PASS", False: "MISSED"}[self.passed]


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def spread_ms(samples: Sequence[float]) -> str:
    """The 10th and 90th percentile (or min/max of few samples), to judge a median's stability."""
    if len(samples) < 10:
        return f"min {min(samples) * 1000:.1f}, max {max(samples) * 1000:.1f} ms"
    deciles = statistics.quantiles(samples, n=10)
    return f"p10 {deciles[0] * 1000:.1f}, p90 {deciles[-1] * 1000:.1f} ms"


def render_markdown(rows: Sequence[Row]) -> str:
    lines = [
        "| Section | Measure | Value | Target | Result | Detail |",
        "|---|---|---:|---|---|---|",
    ]
    for row in rows:
        target = "—" if row.target is None else row.target.describe(row.unit)
        verdict = f"**{row.verdict}**" if row.verdict == "MISSED" else row.verdict
        lines.append(
            f"| {row.section} | {row.measure} | {_number(row.value, row.unit)} | {target} "
            f"| {verdict} | {row.detail} |"
        )
    return "\n".join(lines)


def missed(rows: Sequence[Row]) -> list[Row]:
    return [row for row in rows if row.passed is False]


def environment() -> dict[str, Any]:
    packages = ("cleveractors", "langchain-core", "langchain-openai", "openai", "httpx")
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": {name: version(name) for name in packages},
        "source": _source_state(),
    }


def _source_state() -> str:
    """The commit measured, and whether the library's sources differed from it."""
    root = Path(__file__).parent.parent
    try:
        commit = _git(root, "rev-parse", "--short", "HEAD")
        changed = _git(root, "status", "--porcelain", "--", "src")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{commit}{' with uncommitted changes in src/' if changed else ''}"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def write_results(
    directory: Path, rows: Sequence[Row], settings: dict[str, Any], samples: dict[str, Any]
) -> tuple[Path, Path]:
    """Write `bench.md` (the table) and `bench.json` (rows, raw samples, settings, environment)."""
    directory.mkdir(parents=True, exist_ok=True)
    env = environment()
    markdown = directory / "bench.md"
    header = (
        f"# cleveractors benchmark\n\n{env['date']}, source {env['source']}, Python "
        f"{env['python']} on {env['platform']} ({env['cpus']} CPUs)\n\n"
    )
    markdown.write_text(header + render_markdown(rows) + "\n", encoding="utf-8")
    payload = {
        "environment": env,
        "settings": settings,
        "rows": [
            {
                **asdict(row),
                "target": None if row.target is None else asdict(row.target),
                "result": row.verdict,
            }
            for row in rows
        ],
        "samples": samples,
    }
    data = directory / "bench.json"
    data.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return markdown, data


def _number(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.1f} {unit}"
