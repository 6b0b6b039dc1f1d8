"""Runs the Python and YAML code blocks of a Markdown page, the way a reader would use them.

The conventions a page follows (docs/testing.md says the same for contributors):

- A ```python block runs. The blocks of one page run in order, in one namespace, in one fresh
  empty working directory, so a later block may use what an earlier one defined. A block may
  use top-level `await`; such blocks share one event loop for the page.
- `<!-- prints -->` after a block, followed by a ```text block: the block must print exactly
  that text (trailing spaces and blank lines aside).
- A ```yaml block is an actor config, or a fragment of one. A complete actor (top-level `name`
  and `agent`) must load through the config loader; one on the `stub` provider is also run
  with a message and must answer. A fragment is laid over a minimal `stub` actor and loaded.
- `<!-- file: NAME -->` before a block writes it into the working directory under NAME (a
  Python block so marked is a module for later blocks: it is compiled, not run).
- `<!-- not-run: REASON -->` before a block: it is not run, and REASON must say why.

Any other HTML comment right before a block is an error, so a misspelled marker cannot silently
turn a test off. Blocks in other languages (bash, text, ...) are not run.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cleveractors import ActorExecutor, load_actor_config

RUN_LANGUAGES = ("python", "yaml")
# Placeholders for the key variables an actor config names: loading a config checks that its
# key variable is set, and nothing in an example is ever sent to a provider.
PLACEHOLDER_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "MISTRAL_API_KEY",
    "FILES_TOKEN",
    "SEARCH_TOKEN",
)
STUB_MESSAGE = "What's the weather in Paris and in Rome?"

_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w+-]*)\s*$")
_COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
_NOT_RUN = re.compile(r"^not-run:?(?P<reason>.*)$")
_FILE = re.compile(r"^file:\s*(?P<name>[\w./-]+)$")
_PRINTS = "prints"


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block of a page, with the markers written right before (and after) it."""

    page: str
    line: int
    language: str
    code: str
    markers: tuple[str, ...] = ()
    expected_output: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        for marker in self.markers:
            if found := _NOT_RUN.match(marker):
                return found.group("reason").strip()
        return None

    @property
    def file_name(self) -> str | None:
        for marker in self.markers:
            if found := _FILE.match(marker):
                return found.group("name")
        return None

    def unknown_markers(self) -> list[str]:
        return [
            marker
            for marker in self.markers
            if not (_NOT_RUN.match(marker) or _FILE.match(marker) or marker == _PRINTS)
        ]


@dataclass
class PageReport:
    """What running a page's blocks found: failures as `page:line: problem` lines."""

    failures: list[str] = field(default_factory=list)
    ran: int = 0
    skipped: int = 0


def code_blocks(text: str, page: str) -> list[CodeBlock]:
    """Every fenced block of `text`, with the HTML-comment markers on the lines just before it,
    and the expected output of a following `<!-- prints -->` text block.

    Raises:
        ValueError: a fence is never closed.
    """
    lines = text.splitlines()
    blocks: list[CodeBlock] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        closing = _closing_fence(lines, index, opening.group("indent"), page)
        indent = len(opening.group("indent"))
        code = "\n".join(line[indent:] for line in lines[index + 1 : closing]) + "\n"
        blocks.append(
            CodeBlock(
                page=page,
                line=index + 1,
                language=opening.group("language"),
                code=code,
                markers=_markers_before(lines, index),
            )
        )
        index = closing + 1
    return _with_expected_output(blocks)


def _closing_fence(lines: list[str], opening: int, indent: str, page: str) -> int:
    for index in range(opening + 1, len(lines)):
        if lines[index].strip() == "```" and lines[index].startswith(indent):
            return index
    raise ValueError(f"{page}:{opening + 1}: a code block that is never closed")


def _markers_before(lines: list[str], fence: int) -> tuple[str, ...]:
    markers: list[str] = []
    index = fence - 1
    while index >= 0 and (comment := _COMMENT.match(lines[index])):
        markers.insert(0, comment.group("body"))
        index -= 1
    return tuple(markers)


def _with_expected_output(blocks: list[CodeBlock]) -> list[CodeBlock]:
    """Fold each `<!-- prints -->` text block into the block before it as its output."""
    folded: list[CodeBlock] = []
    for block in blocks:
        if _PRINTS in block.markers and block.language == "text" and folded:
            previous = folded.pop()
            folded.append(
                CodeBlock(
                    page=previous.page,
                    line=previous.line,
                    language=previous.language,
                    code=previous.code,
                    markers=previous.markers,
                    expected_output=block.code,
                )
            )
        else:
            folded.append(block)
    return folded


def run_page(text: str, page: str) -> PageReport:
    """Run every Python and YAML block of one page, as the module docstring describes."""
    report = PageReport()
    try:
        blocks = code_blocks(text, page)
    except ValueError as exc:
        report.failures.append(str(exc))
        return report
    with _example_world() as loop:
        namespace: dict[str, Any] = {"__name__": "__main__"}
        for block in blocks:
            _run_block(block, namespace, loop, report)
    return report


@contextlib.contextmanager
def _example_world() -> Iterator[asyncio.AbstractEventLoop]:
    """A fresh working directory, placeholder keys, and an event loop, all undone after."""
    folder = Path(tempfile.mkdtemp(prefix="cleveractors-docs-"))
    previous, saved_environment = Path.cwd(), dict(os.environ)
    loop = asyncio.new_event_loop()
    os.chdir(folder)
    for name in PLACEHOLDER_KEYS:
        os.environ.setdefault(name, "placeholder-for-the-docs-examples")
    try:
        yield loop
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        os.chdir(previous)
        os.environ.clear()
        os.environ.update(saved_environment)
        shutil.rmtree(folder, ignore_errors=True)


def _run_block(
    block: CodeBlock,
    namespace: dict[str, Any],
    loop: asyncio.AbstractEventLoop,
    report: PageReport,
) -> None:
    if unknown := block.unknown_markers():
        report.failures.append(f"{block.where}: unknown marker {unknown[0]!r} before a block")
        return
    if block.language not in RUN_LANGUAGES:
        return
    if (reason := block.skip_reason) is not None:
        report.skipped += 1
        if not reason:
            report.failures.append(f"{block.where}: a not-run marker must give its reason")
        return
    report.ran += 1
    if block.file_name is not None:
        Path(block.file_name).parent.mkdir(parents=True, exist_ok=True)
        Path(block.file_name).write_text(block.code, encoding="utf-8")
    try:
        if block.language == "python":
            _run_python(block, namespace, loop, report)
        else:
            _run_yaml(block, loop)
    except Exception as exc:  # the example's own failure, whatever it is, is the finding
        report.failures.append(f"{block.where}: {_one_line(exc)}")


def _run_python(
    block: CodeBlock,
    namespace: dict[str, Any],
    loop: asyncio.AbstractEventLoop,
    report: PageReport,
) -> None:
    code = compile(
        block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    if block.file_name is not None:
        return  # a module the next blocks import: compiled (a syntax check), not run
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # running the page's own example, code compiled from it, is the test
        outcome = eval(code, namespace)
        if asyncio.iscoroutine(outcome):
            loop.run_until_complete(outcome)
    if block.expected_output is not None:
        shown, got = _normalised(block.expected_output), _normalised(printed.getvalue())
        if shown != got:
            report.failures.append(f"{block.where}: printed {got!r}, but the page shows {shown!r}")


def _run_yaml(block: CodeBlock, loop: asyncio.AbstractEventLoop) -> None:
    document = yaml.safe_load(block.code)
    if not isinstance(document, dict):
        raise ValueError("a YAML block that is not a mapping (an actor config or a fragment)")
    is_actor = "name" in document and "agent" in document
    actor: Any = document if is_actor else _over_minimal_actor(document)
    if block.file_name is not None and is_actor:
        actor = block.file_name  # loaded from its file, so its relative paths resolve there
    # Building the executor is the whole load: the schema, the handlers' imports, the key
    # variables, the provider's integration. It connects nothing until a run or open().
    ActorExecutor.from_config(actor)
    if is_actor and load_actor_config(actor).agent.provider == "stub":
        loop.run_until_complete(_answers(actor))


def _over_minimal_actor(fragment: dict[str, Any]) -> dict[str, Any]:
    agent = {"provider": "stub", **fragment.get("agent", {})}
    if agent["provider"] == "stub":
        agent.setdefault("script", [{"text": "A scripted answer."}])
    return {"name": "docs-example", **fragment, "agent": agent}


async def _answers(actor: Any) -> None:
    async with ActorExecutor.from_config(actor) as executor:
        result = await executor.execute(STUB_MESSAGE)
    if result.error is not None:
        error = result.error
        raise RuntimeError(f"the stub actor did not answer: {error.type}: {error.message}")


def _normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _one_line(exc: BaseException) -> str:
    frames = [
        frame for frame in traceback.extract_tb(exc.__traceback__) if ".md:" in frame.filename
    ]
    where = f" (line {frames[-1].lineno} of the block)" if frames else ""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}{where}"
