"""A throwaway PostgreSQL server for the store scenarios.

`initdb` in a temporary folder, listening on 127.0.0.1 only (and a socket in that folder), run as
an unprivileged user (`postgres` when we are root, since PostgreSQL refuses to run as root), with
trust authentication for one superuser. Debian's `postgresql` package provides the binaries
(the noxfile installs it); they live in /usr/lib/postgresql/<version>/bin, off the PATH.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess  # nosec B404  # runs PostgreSQL's own tools, with fixed arguments
import tempfile
from pathlib import Path

_USER = "cleveractors"


def _binary(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed: apt-get install postgresql "
            "(nox installs it when it runs as root)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TemporaryPostgres:
    """`new_database()` gives each scenario an empty database of its own, starting the server on
    first use; `stop()` stops it (a no-op when it never started)."""

    def __init__(self) -> None:
        self._folder: Path | None = None
        self._port = 0
        self._databases = 0

    def _start(self) -> None:
        self._folder = Path(tempfile.mkdtemp(prefix="cleveractors-pg-"))
        data = self._folder / "data"
        self._port = _free_port()
        self._run(_binary("initdb"), "-D", str(data), "-U", _USER, "--auth=trust", "-E", "UTF8")
        options = f"-c listen_addresses=127.0.0.1 -p {self._port} -k {self._folder} -c fsync=off"
        log = self._folder / "server.log"
        self._run(_binary("pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start")

    def new_database(self) -> str:
        if self._folder is None:
            self._start()
        self._databases += 1
        name = f"scenario_{os.getpid()}_{self._databases}"
        createdb = _binary("createdb")
        subprocess.run(  # nosec B603  # fixed arguments
            [createdb, "-h", "127.0.0.1", "-p", str(self._port), "-U", _USER, name],
            check=True,
            capture_output=True,
        )
        return f"postgresql://{_USER}@127.0.0.1:{self._port}/{name}"

    def stop(self) -> None:
        folder = self._folder
        if folder is None:
            return
        try:
            self._run(_binary("pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop")
        finally:
            self._folder = None
            shutil.rmtree(folder, ignore_errors=True)

    def _run(self, *command: str) -> None:
        assert self._folder is not None
        if os.geteuid() == 0:
            # PostgreSQL will not run as root: hand the folder to its own system user.
            shutil.chown(self._folder, "postgres", "postgres")
            for path in self._folder.rglob("*"):
                shutil.chown(path, "postgres", "postgres")
            command = ("runuser", "-u", "postgres", "--", *command)
        subprocess.run(command, check=True, capture_output=True)  # nosec B603  # fixed arguments
