#!/usr/bin/env python3
"""A throwaway PostgreSQL cluster for agentmem's tests (standard library only).

Usage::

    eval "$(python scripts/pg_test_cluster.py start)"   # exports AGENTMEM_TEST_PG_DSN, ...
    python -m pytest tests/test_pg_sessions.py
    python scripts/pg_test_cluster.py stop              # stops it, removes its directory

``start`` runs ``initdb`` into a fresh temporary directory, picks a free TCP
port, listens on a unix socket inside that directory (and on 127.0.0.1),
trusts every local connection (no password: the cluster lives only as long
as the test run), keeps ``fsync`` on (the crash tests need real
durability), starts the server and prints shell ``export`` lines:

* ``AGENTMEM_TEST_PG_DSN``: a libpq URI over the unix socket, database ``postgres``;
* ``AGENTMEM_TEST_PG_DATA``: the data directory (``pg_ctl -D``), so tests may
  crash-restart the server (``pg_ctl restart -m immediate``);
* ``AGENTMEM_TEST_PG_DIR``: the cluster's directory, which ``stop`` removes.

The same lines are written to ``<dir>/env``; ``env [DIR]`` prints them again.
``stop [DIR]`` (default: ``$AGENTMEM_TEST_PG_DIR``) stops the server and
removes the directory.

PostgreSQL refuses to run as root. When this script runs as root, the
directory is given to the ``postgres`` user and every server binary runs as
that user (``runuser -u postgres``). The binaries are taken from
``$PG_BIN``, else the newest ``/usr/lib/postgresql/*/bin`` (Debian, Ubuntu),
else ``$PATH``. Without them, ``start`` exits with status 2 and says how to
install PostgreSQL.

``tests/pg.py`` imports this file to start a cluster for a test session when
no server is configured.
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cluster", "find_bin", "restart_immediate", "start", "stop"]

INSTALL_HINT = (
    "PostgreSQL's server binaries (initdb, pg_ctl) were not found: install them "
    "(apt-get install postgresql, brew install postgresql) or set PG_BIN to their directory"
)


@dataclass(frozen=True)
class Cluster:
    """A running throwaway cluster."""

    directory: Path
    """Holds ``data/`` (the cluster), ``sock/`` (the unix socket), ``log`` and ``env``."""
    port: int
    bin_dir: Path

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def socket_dir(self) -> Path:
        return self.directory / "sock"

    @property
    def dsn(self) -> str:
        """A libpq URI over the unix socket, for the ``postgres`` database."""
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={self.port}"

    def env(self) -> dict[str, str]:
        return {
            "AGENTMEM_TEST_PG_DSN": self.dsn,
            "AGENTMEM_TEST_PG_DATA": str(self.data),
            "AGENTMEM_TEST_PG_DIR": str(self.directory),
        }


def find_bin() -> Path | None:
    """The directory of PostgreSQL's server binaries, or ``None``."""
    configured = os.environ.get("PG_BIN")
    if configured:
        return Path(configured) if (Path(configured) / "initdb").exists() else None
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if found:
        newest = max(found, key=lambda p: int(Path(p).parent.parent.name.split(".")[0]))
        return Path(newest).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _as_server_user(command: list[str]) -> list[str]:
    """``command``, run as ``postgres`` when we are root (the server refuses root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _run(command: list[str]) -> None:
    done = subprocess.run(
        _as_server_user(command), capture_output=True, text=True, check=False, cwd="/"
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(base: str | None = None, *, shared_buffers: str = "32MB") -> Cluster:
    """initdb a fresh cluster in a new temporary directory and start it.

    ``shared_buffers``: PostgreSQL's buffer cache (small for the tests; the benches
    size it to the store they measure, as a production server is sized).

    Raises:
        FileNotFoundError: no PostgreSQL binaries (see :data:`INSTALL_HINT`).
        RuntimeError: initdb or pg_ctl failed (their output is in the message).
    """
    bin_dir = find_bin()
    if bin_dir is None:
        raise FileNotFoundError(INSTALL_HINT)
    directory = Path(tempfile.mkdtemp(prefix="agentmem-pg-", dir=base))
    try:
        (directory / "sock").mkdir()
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            for path in (directory, directory / "sock"):
                os.chown(path, user.pw_uid, user.pw_gid)
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(directory / "data"),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",  # a fresh, empty cluster: nothing in it to lose yet
            ]
        )
        for _ in range(5):  # the port may be taken between probing and listening
            port = _free_port()
            settings = {
                "port": str(port),
                "listen_addresses": "'127.0.0.1'",
                "unix_socket_directories": f"'{directory / 'sock'}'",
                "fsync": "on",
                "synchronous_commit": "on",
                "full_page_writes": "on",
                "max_connections": "200",
                "shared_buffers": shared_buffers,
                "logging_collector": "off",
            }
            with open(directory / "data" / "postgresql.auto.conf", "a") as conf:
                conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
            try:
                _run(
                    [
                        str(bin_dir / "pg_ctl"),
                        "-D",
                        str(directory / "data"),
                        "-l",
                        str(directory / "log"),
                        "-w",
                        "-t",
                        "60",
                        "start",
                    ]
                )
                break
            except RuntimeError:
                log = (directory / "log").read_text(errors="replace")
                if "could not bind" not in log and "already in use" not in log:
                    raise
        else:
            raise RuntimeError(f"no free port for PostgreSQL after 5 tries (see {directory}/log)")
        cluster = Cluster(directory=directory, port=port, bin_dir=bin_dir)
        (directory / "env").write_text(_exports(cluster))
        return cluster
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _exports(cluster: Cluster) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in cluster.env().items())


def restart_immediate(data: str | Path, bin_dir: Path | None = None) -> None:
    """Crash-restart the server (``pg_ctl restart -m immediate``): no shutdown checkpoint,
    every connection cut; the server replays its WAL when it starts again."""
    bin_dir = bin_dir or find_bin()
    if bin_dir is None:
        raise FileNotFoundError(INSTALL_HINT)
    log = Path(data).parent / "log"
    _run(
        [
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log),
            "-m",
            "immediate",
            "-w",
            "-t",
            "60",
            "restart",
        ]
    )


def stop(directory: str | Path) -> None:
    """Stop the cluster in ``directory`` and remove the directory.

    A fast shutdown, else an immediate one; when both fail the directory is kept (a
    server still running in it must not lose its files) and the error raised.
    """
    directory = Path(directory)
    data = directory / "data"
    bin_dir = find_bin()
    if bin_dir is not None and (data / "postmaster.pid").exists():
        pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-t", "30"]
        try:
            _run([*pg_ctl, "-m", "fast", "stop"])
        except RuntimeError:
            _run([*pg_ctl, "-m", "immediate", "stop"])
    shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start_cmd = sub.add_parser("start", help="start a cluster and print its export lines")
    start_cmd.add_argument("--base", help="parent of the cluster's directory (default: $TMPDIR)")
    for name in ("stop", "env"):
        cmd = sub.add_parser(name)
        cmd.add_argument("dir", nargs="?", default=os.environ.get("AGENTMEM_TEST_PG_DIR"))
    args = parser.parse_args(argv)
    if args.command == "start":
        try:
            cluster = start(args.base)
        except FileNotFoundError as exc:
            print(exc, file=sys.stderr)
            return 2
        sys.stdout.write(_exports(cluster))
        return 0
    if not args.dir:
        print("which cluster? pass its directory or set AGENTMEM_TEST_PG_DIR", file=sys.stderr)
        return 2
    if args.command == "env":
        sys.stdout.write((Path(args.dir) / "env").read_text())
        return 0
    stop(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
