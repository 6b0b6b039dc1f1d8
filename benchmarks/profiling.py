"""Where a library turn's CPU goes: cProfile of library turns against hand-written ones.

The profiler adds a fixed cost to every Python call, so call-heavy code looks dearer than it is;
read the tables for where the time goes, and the benchmark rows for how much. Three views:

- the difference in self time per function, library minus hand-written loop (same server, same
  conversation): what the library adds, including the asyncio and pydantic work it causes;
- the same difference summed per package;
- cleveractors' own functions by cumulative time (calls count coroutine resumptions).
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import cleveractors

_LIBRARY_DIR = str(Path(cleveractors.__file__).parent)
_BENCHMARKS_DIR = str(Path(__file__).parent)
_TOP = 20
_PACKAGE_ANCHORS = ("/site-packages/", "/lib/python3")

# pstats' key: (filename, line, function name)
_Function = tuple[str, int, str]
# and its value: (primitive calls, calls, self time, cumulative time, {caller: same four})
_Entry = tuple[int, int, float, float, dict[_Function, tuple[int, int, float, float]]]
_Table = dict[_Function, _Entry]
_NO_ENTRY: _Entry = (0, 0, 0.0, 0.0, {})


@dataclass(frozen=True, slots=True)
class ProfileReport:
    mode: str
    turns: int
    text: str


async def profile_turns(
    mode: str,
    library_turn: Callable[[], Awaitable[None]],
    handwritten_turn: Callable[[], Awaitable[None]],
    *,
    turns: int,
    directory: Path,
) -> ProfileReport:
    """Profile `turns` turns of each; write the stats and a summary to `directory`."""
    library = await _profile(library_turn, turns)
    handwritten = await _profile(handwritten_turn, turns)
    report = ProfileReport(mode, turns, _summary(mode, turns, _table(library), _table(handwritten)))
    _write(directory, mode, library, report)
    return report


async def _profile(turn: Callable[[], Awaitable[None]], turns: int) -> cProfile.Profile:
    # CPU time, not wall time: waiting in epoll for the server is nobody's CPU.
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(turns):
        await turn()
    profiler.disable()
    return profiler


def _table(profiler: cProfile.Profile) -> _Table:
    table: _Table = pstats.Stats(profiler).stats  # type: ignore[attr-defined]  # untyped in pstats
    return table


def _write(directory: Path, mode: str, library: cProfile.Profile, report: ProfileReport) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    library.dump_stats(directory / f"profile_{mode}.pstats")
    (directory / f"profile_{mode}.txt").write_text(report.text + "\n", encoding="utf-8")


def _summary(mode: str, turns: int, library: _Table, handwritten: _Table) -> str:
    def per_turn_ms(seconds: float) -> float:
        return seconds / turns * 1000

    library_s, hand_s = _self_total(library), _self_total(handwritten)
    own_s = sum(entry[2] for key, entry in library.items() if _is_library(key))
    extra = _self_time_differences(library, handwritten)
    by_package: defaultdict[str, float] = defaultdict(float)
    for difference, key in extra:
        by_package[_package(key)] += difference
    return "\n".join(
        [
            f"## Profile, {mode} turn: library vs hand-written loop ({turns} turns each)",
            f"CPU per turn under the profiler: library {per_turn_ms(library_s):.2f} ms, "
            f"hand-written {per_turn_ms(hand_s):.2f} ms; self time in cleveractors' own code "
            f"{per_turn_ms(own_s):.2f} ms",
            "",
            "### Self time the library adds, by function (ms/turn; calls/turn library, hand)",
            *(
                f"{per_turn_ms(difference):+8.3f}  {_calls(library, key, turns):>6} "
                f"{_calls(handwritten, key, turns):>6}  {_name(key)}"
                for difference, key in extra[:_TOP]
            ),
            "",
            "### Self time the library adds (or saves, negative), by package (ms/turn)",
            *(
                f"{per_turn_ms(difference):+8.3f}  {package}"
                for package, difference in sorted(
                    by_package.items(), key=lambda item: item[1], reverse=True
                )
                if abs(per_turn_ms(difference)) >= 0.02
            ),
            "",
            "### cleveractors functions by cumulative time (ms/turn: cumulative, self; calls)",
            *(
                f"{per_turn_ms(entry[3]):8.3f} {per_turn_ms(entry[2]):8.3f} "
                f"{entry[1] / turns:7.1f}  {_name(key)}"
                for key, entry in sorted(
                    ((key, entry) for key, entry in library.items() if _is_library(key)),
                    key=lambda item: item[1][3],
                    reverse=True,
                )[:_TOP]
            ),
        ]
    )


def _self_total(table: _Table) -> float:
    return sum(entry[2] for entry in table.values())


def _self_time_differences(library: _Table, handwritten: _Table) -> list[tuple[float, _Function]]:
    """(library self time - hand-written self time, function), largest first."""
    keys = library.keys() | handwritten.keys()
    differences = [
        (library.get(key, _NO_ENTRY)[2] - handwritten.get(key, _NO_ENTRY)[2], key) for key in keys
    ]
    return sorted(differences, reverse=True)


def _calls(table: _Table, key: _Function, turns: int) -> str:
    return f"{table.get(key, _NO_ENTRY)[1] / turns:.0f}"


def _is_library(key: _Function) -> bool:
    return key[0].startswith(_LIBRARY_DIR)


def _package(key: _Function) -> str:
    """The top-level package (or stdlib module) a function belongs to."""
    filename = key[0]
    if _is_library(key):
        return "cleveractors"
    if filename == "~":
        return "builtins"
    if filename.startswith(_BENCHMARKS_DIR):
        return "the hand-written loop" if Path(filename).stem == "handwritten" else "harness"
    for anchor in _PACKAGE_ANCHORS:
        if anchor in filename:
            relative = filename.split(anchor, 1)[1]
            if anchor == "/lib/python3":  # e.g. ".11/asyncio/queues.py"
                relative = relative.split("/", 1)[1]
            return relative.split("/", 1)[0].removesuffix(".py")
    return Path(filename).stem


def _name(key: _Function) -> str:
    filename, line, function = key
    if filename == "~":
        return function
    if _is_library(key):
        filename = "cleveractors" + filename.removeprefix(_LIBRARY_DIR)
    for anchor in _PACKAGE_ANCHORS:
        if anchor in filename:
            filename = filename.split(anchor, 1)[1]
            if anchor == "/lib/python3":
                filename = filename.split("/", 1)[1]
            break
    return f"{filename}:{line} {function}"
