"""Fixtures for tests against a real PostgreSQL server (registered in conftest.py).

* ``pg_server`` (session): the server. ``AGENTMEM_TEST_PG_DSN`` names one (``.ci/run``
  starts a throwaway cluster and sets it, with ``AGENTMEM_TEST_PG_DATA``, its data
  directory); without it, a throwaway cluster is started for the test session when
  PostgreSQL's binaries are installed (``scripts/pg_test_cluster.py``); else every
  PostgreSQL test skips with one line saying how to get a server.
* ``pg_dsn`` (function): the DSN of a fresh, empty database, dropped after the test, so
  tests are isolated from each other.
* ``pg_cluster`` (function): ``pg_dsn`` plus :meth:`PgCluster.restart_immediate`
  (``pg_ctl restart -m immediate``); skips unless we own the server's data directory.

Without a server, the summary folds every skip into one line (``pytest_runtest_makereport``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agentmem

WORKTREE = Path(agentmem.__file__).resolve().parent.parent
SKIP_LINE = (
    "no PostgreSQL server: set AGENTMEM_TEST_PG_DSN, or install PostgreSQL and run "
    '`eval "$(python scripts/pg_test_cluster.py start)"` (see docs/backends.md)'
)


def _cluster_script() -> ModuleType:
    """scripts/pg_test_cluster.py, imported once."""
    name = "pg_test_cluster"
    if name in sys.modules:
        return sys.modules[name]
    path = WORKTREE / "scripts" / "pg_test_cluster.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'agentmem[postgres]'")
    return psycopg


@dataclass(frozen=True)
class PgServer:
    """A server the tests may use: its admin DSN, and its data directory when we own it."""

    dsn: str
    data: Path | None


@dataclass(frozen=True)
class PgCluster:
    """A fresh database (``dsn``) on a server whose data directory we own."""

    dsn: str
    data: Path

    def restart_immediate(self) -> None:
        """Crash-restart the whole server: every connection is cut, nothing checkpointed."""
        _cluster_script().restart_immediate(self.data)


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    _psycopg()
    dsn = os.environ.get("AGENTMEM_TEST_PG_DSN")
    if dsn:
        yield PgServer(dsn=dsn, data=_env_path("AGENTMEM_TEST_PG_DATA"))
        return
    if not (WORKTREE / "scripts" / "pg_test_cluster.py").exists():  # an sdist without it
        pytest.skip(SKIP_LINE)
    script = _cluster_script()
    if script.find_bin() is None:
        pytest.skip(SKIP_LINE)
    try:
        cluster = script.start()
    except (OSError, RuntimeError, KeyError) as exc:  # KeyError: no `postgres` user
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        pytest.skip(f"{SKIP_LINE}; starting a throwaway cluster failed: {first}")
    try:
        yield PgServer(dsn=cluster.dsn, data=cluster.data)
    finally:
        script.stop(cluster.directory)


def database_dsn(dsn: str, dbname: str) -> str:
    """``dsn`` pointed at database ``dbname``."""
    psycopg = _psycopg()
    return str(psycopg.conninfo.make_conninfo(dsn, dbname=dbname))


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    psycopg = _psycopg()
    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    psycopg = _psycopg()
    name = f"agentmem_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_dsn(pg_server.dsn, name)
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_cluster(pg_server: PgServer, pg_dsn: str) -> PgCluster:
    if pg_server.data is None:
        pytest.skip("the PostgreSQL server is not ours to restart (AGENTMEM_TEST_PG_DATA unset)")
    return PgCluster(dsn=pg_dsn, data=pg_server.data)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Report every "no PostgreSQL server" skip at this file, so ``-ra`` folds them into
    one line instead of one per test."""
    report = yield
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and SKIP_LINE in str(longrepr[2]):
        report.longrepr = (__file__, None, longrepr[2])
    return report


def child_env() -> dict[str, str]:
    """The environment for a child process that must import this worktree's agentmem."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(WORKTREE), *filter(None, [env.get("PYTHONPATH")])])
    return env
