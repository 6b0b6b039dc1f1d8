"""Quality gates. `nox` runs the default sessions; `nox -s demo` runs the offline demo actor.

Sessions reuse their virtualenvs, so a second run installs nothing new.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
# A Python version a session asks for that is not installed fails the run; never skipped.
nox.options.error_on_missing_interpreters = True
# Stopping and streaming behave differently across Python versions (3.11's wait_for swallows a
# cancellation that 3.12 delivers): these scenarios run on the oldest supported and the newest.
STOP_SCENARIO_PYTHONS = ["3.11", "3.13"]
STOP_SCENARIO_TAGS = ["cancellation", "streaming"]
# unit_tests and integration_tests run every scenario on the interpreter running nox: a stop
# scenarios session for that same version would install the project again to repeat them.
NOX_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
nox.options.sessions = [
    "format",
    "lint",
    "typecheck",
    "security_scan",
    "docs",
    "unit_tests",
    "integration_tests",
    *(f"stop_scenarios-{version}" for version in STOP_SCENARIO_PYTHONS if version != NOX_PYTHON),
    "coverage_report",
]

ROOT = Path(__file__).parent
SOURCES = ["src", "features", "robot", "benchmarks", "noxfile.py"]
REPORTS = ROOT / "reports"
NODE_CLIENTS = ROOT / "robot" / "node"
DEMO_MESSAGE = "What's the weather in Paris and in Rome?"
CHROMIUM_PACKAGES = ["chromium", "chromium-driver"]
POSTGRES_PACKAGES = ["postgresql"]
# What src/ imports (lazily, for the extras): all mypy needs to see.
TYPECHECK_EXTRAS = ["cli", "web", "store", "mcp", "ag-ui", "otel"]
# Robot's keyword libraries, and the test tree's support package (`support.harness`, the one
# harness that consumes runs, shared with the Behave steps).
ROBOT_PYTHONPATH = ["--pythonpath", "robot/libraries", "--pythonpath", "features"]


def _installed_python(version: str) -> str:
    """The path of the CPython `version` ("3.13") installed here, or `version` itself when none
    is found (nox then fails the session, naming it).

    pyenv's `python3.13` shim fails unless that version is selected, so ask pyenv where the
    version lives, then look in its versions folder, then on PATH; each candidate must run and
    report the version."""
    candidates: list[Path] = []
    if pyenv := shutil.which("pyenv"):
        prefix = subprocess.run(
            [pyenv, "prefix", version], capture_output=True, text=True, check=False
        )
        candidates += [Path(line) / "bin" / f"python{version}" for line in prefix.stdout.split()]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
    if on_path := shutil.which(f"python{version}"):
        candidates.append(Path(on_path))
    for candidate in candidates:
        if _runs_as(candidate, version):
            return str(candidate)
    return version


def _runs_as(interpreter: Path, version: str) -> bool:
    check = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        ran = subprocess.run(
            [str(interpreter), "-c", check], capture_output=True, text=True, check=False
        )
    except OSError:
        return False
    return ran.returncode == 0 and ran.stdout.strip() == version


def _install_project(session: nox.Session) -> None:
    session.install("-e", ".[cli,web,test]")


def _coverage_env(session: nox.Session) -> dict[str, str]:
    REPORTS.mkdir(exist_ok=True)
    return {
        "COVERAGE_FILE": str(ROOT / ".coverage"),
        "COVERAGE_PROCESS_START": str(ROOT / "pyproject.toml"),
        "PYTHONUNBUFFERED": "1",
    }


_APT_UPDATED: list[bool] = []


def _apt_install(session: nox.Session, packages: list[str], why: str) -> None:
    """Install Debian packages where we may (CI runs as root); warn where we may not."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        session.warn(f"{' '.join(packages)} missing and not root: {why} will fail")
        return
    if not _APT_UPDATED:  # once per nox run: unit_tests and integration_tests both may install
        session.run("apt-get", "update", "-qq", external=True)
        _APT_UPDATED.append(True)
    session.run(
        "apt-get",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        *packages,
        external=True,
        env={"DEBIAN_FRONTEND": "noninteractive"},
    )


def _ensure_chromium(session: nox.Session) -> None:
    """The browser test drives Debian's Chromium."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        _apt_install(session, CHROMIUM_PACKAGES, "the browser test")


def _install_node_clients(session: nox.Session) -> None:
    """The frontend protocols' client libraries (`ai`, `@ag-ui/client`), which the Robot suite
    drives under Node, installed from robot/node's lockfile into robot/node/node_modules: no
    global state. `npm ci` when the lockfile is there, else `npm install` (which writes it)."""
    npm = shutil.which("npm")
    if npm is None:
        session.warn("npm missing: the frontend protocol tests (robot/frontends.robot) will fail")
        return
    has_lock = (NODE_CLIENTS / "package-lock.json").is_file()
    install = ["ci"] if has_lock else ["install"]
    session.run(
        npm, *install, "--no-audit", "--no-fund", "--prefix", str(NODE_CLIENTS), external=True
    )


def _ensure_postgres(session: nox.Session) -> None:
    """The store scenarios start their own PostgreSQL server from Debian's binaries, which live
    off the PATH (features/support/postgres.py finds them)."""
    if not (shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb")):
        _apt_install(session, POSTGRES_PACKAGES, "the PostgreSQL store scenarios")


@nox.session
def format(session: nox.Session) -> None:
    """Check formatting (ruff format); `nox -s format -- --fix` rewrites."""
    session.install("ruff")
    if "--fix" in session.posargs:
        session.run("ruff", "format", *SOURCES)
        session.run("ruff", "check", "--select", "I", "--fix", *SOURCES)
    else:
        session.run("ruff", "format", "--check", *SOURCES)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", *SOURCES)


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on src/: zero errors, zero warnings. Only the extras src/ imports are
    installed, not the test tools."""
    session.install("-e", f".[{','.join(TYPECHECK_EXTRAS)}]")
    session.install("mypy", "types-pyyaml", "types-jsonschema")
    session.run("mypy", "--strict", "src/cleveractors")


@nox.session
def security_scan(session: nox.Session) -> None:
    session.install("bandit[toml]")
    session.run("bandit", "-q", "-c", "pyproject.toml", "-r", "src")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site (docs/, mkdocs.yml) with --strict: a broken link, a missing
    reference or any warning fails it. Only the `docs` extra's tools are installed: mkdocstrings
    reads the docstrings from src/ without importing the package, and nothing is fetched at
    build time. `nox -s docs -- serve` serves it on 127.0.0.1:8000 instead."""
    extras = nox.project.load_toml("pyproject.toml")["project"]["optional-dependencies"]
    session.install(*extras["docs"])
    env = {"NO_MKDOCS_2_WARNING": "1"}
    if session.posargs[:1] == ["serve"]:
        session.run("mkdocs", "serve", "--strict", "--dev-addr", "127.0.0.1:8000", env=env)
    else:
        session.run("mkdocs", "build", "--strict", env=env)  # into reports/site
        _reference_should_hide_model_config(session)


def _reference_should_hide_model_config(session: nox.Session) -> None:
    """pydantic's `model_config` is a class's settings, not its API: mkdocs.yml filters it out
    of the reference, and a page that shows it again fails the session."""
    shown = [
        str(page.relative_to(REPORTS))
        for page in sorted((REPORTS / "site" / "reference").rglob("*.html"))
        if "model_config" in page.read_text(encoding="utf-8")
    ]
    if shown:
        session.error(f"the API reference shows pydantic's model_config: {', '.join(shown)}")


@nox.session
def unit_tests(session: nox.Session) -> None:
    """Behave scenarios in features/, under coverage."""
    _install_project(session)
    _ensure_postgres(session)
    env = _coverage_env(session)
    session.run("coverage", "erase", env=env)
    session.run(
        "coverage",
        "run",
        "-m",
        "behave",
        "--format",
        "progress",
        "--no-capture-stderr",
        "--junit",
        "--junit-directory",
        str(REPORTS / "behave"),
        *session.posargs,
        env=env,
    )


@nox.session
def integration_tests(session: nox.Session) -> None:
    """Robot Framework suites in robot/: the executor, the real wire, the CLI, the web app."""
    _install_project(session)
    _ensure_chromium(session)
    _ensure_postgres(session)
    _install_node_clients(session)
    env = _coverage_env(session)
    session.run(
        "coverage",
        "run",
        "-m",
        "robot",
        "--outputdir",
        str(REPORTS / "robot"),
        *ROBOT_PYTHONPATH,
        *session.posargs,
        "robot",
        env=env,
    )


def _stop_scenarios(session: nox.Session) -> None:
    """The cancellation and streaming scenarios (Behave and Robot, tagged) on one Python."""
    _install_project(session)
    session.run(
        "behave",
        "--format",
        "progress",
        "--no-capture-stderr",
        "--tags",
        " or ".join(f"@{tag}" for tag in STOP_SCENARIO_TAGS),
        "features",
    )
    session.run(
        "robot",
        "--outputdir",
        str(REPORTS / session.name),
        *ROBOT_PYTHONPATH,
        "--include",
        "OR".join(STOP_SCENARIO_TAGS),
        "robot",
    )


for _version in STOP_SCENARIO_PYTHONS:
    nox.session(
        name=f"stop_scenarios-{_version}",
        python=_installed_python(_version),
        download_python="never",
    )(_stop_scenarios)


@nox.session
def coverage_report(session: nox.Session) -> None:
    """Combine the unit and integration coverage; fail under 97%."""
    session.install("coverage[toml]>=7.10")
    env = _coverage_env(session)
    session.run("coverage", "combine", env=env, success_codes=[0, 1])
    session.run("coverage", "report", env=env)
    session.run("coverage", "xml", "-o", str(REPORTS / "coverage.xml"), env=env)


@nox.session(venv_backend="venv", reuse_venv=False)
def build(session: nox.Session) -> None:
    """Build the wheel and install it, with its extras and every dependency from the package
    index, into a fresh virtualenv; then run an actor and `serve` the chat page from it
    (robot/package.robot). Not a default session: the install takes a few minutes. The
    integration suite checks the same wheel against the dependencies it declares, linked from
    the suite's own environment."""
    session.install("robotframework>=7", "packaging")
    session.run(
        "python",
        "-m",
        "robot",
        "--outputdir",
        str(REPORTS / "build"),
        "--pythonpath",
        "robot/libraries",
        "--variable",
        "WHEEL_DEPENDENCIES:installed",
        "robot/package.robot",
    )


@nox.session
def demo(session: nox.Session) -> None:
    """The offline demo actor: streamed answer, tool progress and a usage table."""
    _install_project(session)
    session.run(
        "cleveractors", "run", "examples/demo_actor.yaml", *(session.posargs or [DEMO_MESSAGE])
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks (not a default session): latency to first token, CPU per turn, concurrency."""
    _install_project(session)
    session.run("python", "benchmarks/run.py", *session.posargs)


@nox.session
def property_tests(session: nox.Session) -> None:
    """The billing property with many more Hypothesis examples than the default run."""
    _install_project(session)
    session.run(
        "behave",
        "--format",
        "progress",
        "--tags",
        "@property",
        "features",
        env={"CLEVERACTORS_PROPERTY_EXAMPLES": session.posargs[0] if session.posargs else "20000"},
    )
