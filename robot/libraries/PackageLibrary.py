"""Keywords that build the project's wheel and use it from a fresh virtualenv, as someone who
installs cleveractors without its source tree would.

The virtualenv is new and has no site packages of its own. The wheel is installed into it
(`pip --python <venv> install --no-deps`), so `cleveractors` there can only come from the wheel.
Its dependencies are, by default, the ones the wheel declares for the extras asked for, taken
from this interpreter's environment: the wheel's `Requires-Dist` is followed through every
installed distribution's own requirements (markers and extras evaluated), and each
distribution's top-level packages are linked into a folder the venv reads through a `.pth`
file, so an undeclared dependency is missing there as it would be for a user. (A namespace
package, such as `opentelemetry`, is linked whole: its other distributions show through.)
With `--variable WHEEL_DEPENDENCIES:installed` (`nox -s build`), pip installs the wheel with its
extras and resolves every dependency from the package index instead.
"""

from __future__ import annotations

import contextlib
import email.parser
import importlib.metadata
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import urllib.request
import venv
import zipfile
from html.parser import HTMLParser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "cleveractors"
TIMEOUT_S = 60
STARTED = "Application startup complete."


@library(scope="SUITE")
class PackageLibrary:
    def __init__(self) -> None:
        self._made_folder: Path | None = None
        self._wheel: Path | None = None
        self._venv: Path | None = None
        self._serving: subprocess.Popen[str] | None = None
        self._served_lines: list[str] = []
        self._ran: subprocess.CompletedProcess[str] | None = None

    @keyword
    def build_the_wheel(self) -> str:
        """Builds the project's wheel as pip builds it for an install (an isolated build
        environment with the build backend); returns its path."""
        dist = self._folder / "dist"
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(dist)])
        (self._wheel,) = dist.glob("cleveractors-*.whl")
        return str(self._wheel)

    @keyword
    def install_the_wheel_in_a_fresh_virtualenv(self, extras: str = "cli,web") -> None:
        """A new virtualenv with the wheel installed (see the library's documentation for where
        its dependencies come from)."""
        assert self._wheel is not None, "build the wheel first"
        self._venv = self._folder / "venv"
        mode = BuiltIn().get_variable_value("${WHEEL_DEPENDENCIES}", "borrowed")
        if mode == "installed":
            venv.create(self._venv, with_pip=True)
            _run([str(self._python), "-m", "pip", "install", "-q", f"{self._wheel}[{extras}]"])
            return
        venv.create(self._venv, with_pip=False)
        install = ["install", "-q", "--no-deps", str(self._wheel)]
        _run([sys.executable, "-m", "pip", "--python", str(self._python), *install])
        declared = self._folder / "declared-dependencies"
        linked = _link_declared_dependencies(self._wheel, extras.split(","), declared)
        (_site_packages(self._python) / "_declared_dependencies.pth").write_text(f"{declared}\n")
        logger.info(f"{len(linked)} declared distributions: {', '.join(sorted(linked))}")

    @keyword
    def wheel_should_hold_every_file_of_the_package(self) -> None:
        """Every file under src/cleveractors (the chat page's static files, `py.typed`) is in
        the wheel at the same path."""
        assert self._wheel is not None, "build the wheel first"
        with zipfile.ZipFile(self._wheel) as wheel:
            held = set(wheel.namelist())
        expected = {
            path.relative_to(PACKAGE.parent).as_posix()
            for path in PACKAGE.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        }
        missing = sorted(expected - held)
        assert not missing, f"the wheel lacks {len(missing)} file(s): {', '.join(missing)}"
        logger.info(f"{len(expected)} files of the package, all in {self._wheel.name}")

    @keyword
    def package_should_be_imported_from_the_fresh_virtualenv(self) -> None:
        """`import cleveractors` in the venv loads the wheel's copy, not the source tree."""
        found = _run([str(self._python), "-c", "import cleveractors; print(cleveractors.__file__)"])
        location = Path(found.stdout.strip())
        assert self._venv is not None, "install the wheel first"
        assert location.is_relative_to(self._venv), (
            f"cleveractors was imported from {location}, not from {self._venv}"
        )

    @keyword
    def run_the_installed_command(self, *arguments: str) -> str:
        """Runs the venv's `cleveractors ARGUMENTS` in a folder of its own; returns its output
        (stdout then stderr). The exit code is kept for `Command Should Have Succeeded`."""
        self._ran = subprocess.run(
            [str(self._command), *arguments],
            capture_output=True,
            text=True,
            cwd=self._folder,
            env=_environment(),
            timeout=TIMEOUT_S,
            check=False,
        )
        logger.info(f"exit {self._ran.returncode}\n{self._ran.stdout}\n{self._ran.stderr}")
        return self._ran.stdout + self._ran.stderr

    @keyword
    def command_should_have_succeeded(self) -> None:
        assert self._ran is not None, "run a command first"
        assert self._ran.returncode == 0, (
            f"exit code {self._ran.returncode}: {self._ran.stdout}{self._ran.stderr}"
        )

    @keyword
    def stub_actor_file(self) -> str:
        """An actor on the stub provider whose tool is the demo's `get_weather`; its path."""
        actor = self._folder / "actor.yaml"
        actor.write_text(
            "name: weather\n"
            "agent:\n"
            "  provider: stub\n"
            "  tools:\n"
            '    - {name: get_weather, handler: "cleveractors.demo:get_weather"}\n'
            "  script:\n"
            "    - tool_calls: [{name: get_weather, args: {city: Paris}}]\n"
            "    - text: Light rain in Paris.\n",
            encoding="utf-8",
        )
        return str(actor)

    @keyword
    def serve_from_the_fresh_virtualenv(self, actor: str) -> str:
        """Starts the venv's `cleveractors serve ACTOR` on a free port of 127.0.0.1; returns its
        URL once the app has started (its log says so)."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._serving = subprocess.Popen(
            [str(self._command), "serve", actor, "--host", "127.0.0.1", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self._folder,
            env=_environment(),
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_served, args=(lines,), daemon=True).start()
        while (line := lines.get(timeout=TIMEOUT_S)) is not None:
            if STARTED in line:
                return f"http://127.0.0.1:{port}"
        raise RuntimeError("serve ended before it started:\n" + "".join(self._served_lines))

    @keyword
    def chat_page_and_its_files_should_be_served(self, url: str) -> None:
        """`GET /` answers the chat page (HTML), and every file the page loads from the server
        (scripts, styles, the icon) answers 200 with content."""
        page = _get(f"{url}/")
        assert 'id="message"' in page, f"not the chat page: {page[:300]}"
        loaded = _LoadedFiles()
        loaded.feed(page)
        assert loaded.paths, "the chat page loads no file of its own"
        for path in loaded.paths:
            body = _get(f"{url}/{path.lstrip('/')}")
            assert body, f"{path} answered an empty body"
        logger.info(f"served: / and {', '.join(loaded.paths)}")

    @keyword
    def stop_serving(self) -> None:
        """SIGTERM to `serve` (if it runs), then waits for it to exit; removes the folder."""
        if self._serving is not None and self._serving.poll() is None:
            self._serving.send_signal(signal.SIGTERM)
            try:
                self._serving.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._serving.kill()
                self._serving.wait()
        logger.info("".join(self._served_lines))
        if self._made_folder is not None:
            shutil.rmtree(self._made_folder, ignore_errors=True)

    @property
    def _folder(self) -> Path:
        """The suite's temporary folder, made on first use (a dry run makes none)."""
        if self._made_folder is None:
            self._made_folder = Path(tempfile.mkdtemp(prefix="cleveractors-wheel-"))
        return self._made_folder

    @property
    def _python(self) -> Path:
        assert self._venv is not None, "install the wheel first"
        return self._venv / "bin" / "python"

    @property
    def _command(self) -> Path:
        assert self._venv is not None, "install the wheel first"
        return self._venv / "bin" / "cleveractors"

    def _read_served(self, lines: queue.Queue[str | None]) -> None:
        assert self._serving is not None
        assert self._serving.stdout is not None
        for line in self._serving.stdout:
            self._served_lines.append(line)
            lines.put(line)
        lines.put(None)


class _LoadedFiles(HTMLParser):
    """The same-server paths a page loads: `src` of scripts and images, `href` of links."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "img": "src", "link": "href"}.get(tag)
        for name, value in attrs:
            if name == wanted and value and "//" not in value and not value.startswith("data:"):
                self.paths.append(value)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
        assert response.status == 200, f"GET {url}: {response.status}"
        return response.read().decode("utf-8")


def _link_declared_dependencies(wheel: Path, extras: list[str], into: Path) -> set[str]:
    """Links the top-level packages of every distribution the wheel requires for `extras`,
    and theirs in turn, into `into`; returns the distributions' names."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata_name,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode("utf-8"))
    own = canonicalize_name(metadata["Name"])
    own_requires = metadata.get_all("Requires-Dist") or []
    seen: dict[str, set[str]] = {}
    wanted = [(text, set(extras)) for text in own_requires]
    while wanted:
        text, active = wanted.pop()
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is not None and not any(marker.evaluate({"extra": e}) for e in active | {""}):
            continue
        name = canonicalize_name(requirement.name)
        if name in seen and requirement.extras <= seen[name]:
            continue
        seen[name] = seen.get(name, set()) | requirement.extras
        if name == own:
            requires = own_requires
        else:
            requires = importlib.metadata.distribution(name).requires or []
        wanted += [(child, seen[name]) for child in requires]
    into.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for name in seen.keys() - {own}:
        for top in _top_levels(importlib.metadata.distribution(name)):
            if not (into / top).exists() and (site / top).exists():
                (into / top).symlink_to(site / top)
    return seen.keys() - {own}


def _top_levels(distribution: importlib.metadata.Distribution) -> set[str]:
    """The names a distribution puts at the top of site-packages (its dist-info included)."""
    tops = {file.parts[0] for file in distribution.files or ()}
    return {top for top in tops if top not in {"..", "__pycache__"} and not top.endswith(".pth")}


def _site_packages(python: Path) -> Path:
    found = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Path(found.stdout.strip())


def _environment() -> dict[str, str]:
    """Our environment without our venv's bin folder on PATH, and no coverage hook: the fresh
    venv is the user's, not ours."""
    ours = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != ours)
    environment = {**os.environ, "PATH": path, "PYTHONUNBUFFERED": "1"}
    for name in ("COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG", "PYTHONPATH", "VIRTUAL_ENV"):
        environment.pop(name, None)
    return environment


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(
        command, capture_output=True, text=True, env=_environment(), timeout=600, check=False
    )
    if ran.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {ran.returncode}:\n{ran.stderr}")
    with contextlib.suppress(Exception):
        logger.info(f"{' '.join(command)}\n{ran.stdout}{ran.stderr}")
    return ran
