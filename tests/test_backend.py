"""Choosing a backend: Memory(backend=...), AGENTMEM_BACKEND, and what is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_documents import pg_uri

import agentmem
from agentmem._storage.backend import (
    EmbeddedBackend,
    PostgresBackend,
    mask_dsn,
    open_backend,
)
from agentmem._storage.documents import FileDocuments
from agentmem.errors import ConfigurationError, StorageError


@pytest.mark.parametrize("value", [None, "embedded", "sqlite", " Embedded ", "SQLITE"])
def test_embedded_names(tmp_path: Path, value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTMEM_BACKEND", raising=False)
    chosen = open_backend(tmp_path, value)
    assert isinstance(chosen, EmbeddedBackend)
    docs = chosen.documents("notes")
    assert isinstance(docs, FileDocuments) and docs.directory == tmp_path / "memory"


@pytest.mark.parametrize(
    "dsn", ["postgresql://u@h:5432/db", "postgres://u:pw@h/db", "POSTGRESQL://h/db"]
)
def test_postgres_dsns_make_a_postgres_backend_without_connecting(tmp_path: Path, dsn: str) -> None:
    chosen = open_backend(tmp_path, dsn)
    assert isinstance(chosen, PostgresBackend)
    assert "pw" not in chosen.name
    chosen.close()  # nothing was opened


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("mysql://admin:hunter2@db/x", "mysql://admin:***@db/x"),
        ("host=db password=hunter2 dbname=x", "host=db password=*** dbname=x"),
        ("postgresq://u:hunter2@h/db", "postgresq://u:***@h/db"),
        ("files", "files"),
        ("", ""),
    ],
)
def test_anything_else_is_refused_naming_the_value_without_its_password(
    tmp_path: Path, value: str, shown: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        agentmem.Memory(root=tmp_path / "root", working_dir=tmp_path, backend=value)
    assert repr(shown) in str(info.value)
    assert "hunter2" not in str(info.value)
    assert not (tmp_path / "root").exists(), "refused before anything was written"


def test_a_backend_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="must be a string"):
        agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path, backend=5)  # type: ignore[arg-type]


def test_the_environment_variable_chooses_when_backend_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTMEM_BACKEND", "oracle://scott:tiger@h/db")
    with pytest.raises(ConfigurationError, match="AGENTMEM_BACKEND") as info:
        agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path)
    assert "tiger" not in str(info.value)
    # An explicit argument wins over the environment.
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path, backend="embedded") as mem:
        mem.notes.store("k", "v")
    assert (tmp_path / "r" / "memory" / "k.json").exists()
    monkeypatch.setenv("AGENTMEM_BACKEND", "")
    assert isinstance(open_backend(tmp_path, None), EmbeddedBackend)


def test_mask_dsn() -> None:
    assert mask_dsn("postgresql://u:p%40ss@h:5/db?sslmode=require") == (
        "postgresql://u:***@h:5/db?sslmode=require"
    )
    assert mask_dsn("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_dsn("dbname=x password='a b' user=u") == "dbname=x password=*** user=u"
    assert mask_dsn("postgresql://h/db?password=secret") == "postgresql://h/db?password=***"


def test_unknown_namespace(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="namespace"):
        EmbeddedBackend(tmp_path).documents("sessions")


def test_import_and_an_embedded_memory_never_import_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys, agentmem\n"
        f"with agentmem.Memory(root={str(tmp_path / 'r')!r}, working_dir={str(tmp_path)!r}) as m:\n"
        "    m.ltm.add_discovery('a fact'); m.notes.store('k', 'v'); m.topics.write('t', 'x')\n"
        "assert not [n for n in sys.modules if n.startswith('psycopg')], sys.modules.keys()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": ":".join(sys.path)})


def test_an_unreachable_server_raises_storage_error_from_the_constructor(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StorageError, match="PostgreSQL"):
        agentmem.Memory(
            root=tmp_path / "r",
            working_dir=tmp_path,
            backend="postgresql://nobody@127.0.0.1:1/none?connect_timeout=2",
        )


def test_memory_on_postgres_keeps_sessions_and_documents_in_the_database(
    tmp_path: Path, pg_dsn: str
) -> None:
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=tmp_path, backend=pg_uri(pg_dsn)) as mem:
        mem.ltm.add_discovery("kept in PostgreSQL")
        mem.notes.store("k", "v")
        mem.topics.write("t", "topic")
        with mem.session(name="s") as s:
            s.start_task("hello")
        assert "postgresql://" in repr(mem.ltm) and "(ltm)" in repr(mem.ltm)
    assert not (root / "ltm.json").exists()
    assert not (root / "memory" / "k.json").exists()
    assert not (root / "memories").exists()
    assert not (root / "sessions.sqlite").exists()
    assert "postgresql://" in repr(mem.sessions)
    with agentmem.Memory(root=root, working_dir=tmp_path, backend=pg_uri(pg_dsn)) as again:
        assert [e.text for e in again.ltm.entries()] == ["kept in PostgreSQL"]
        assert again.notes.list() == ["k"]
        assert [s.name for s in again.sessions.list()] == ["s"]


def test_the_trim_checkpoint_stays_a_local_file_on_postgres(tmp_path: Path, pg_dsn: str) -> None:
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=tmp_path, backend=pg_uri(pg_dsn)) as mem:
        (root / "memory").mkdir(parents=True)
        (root / "memory" / "session_progress.md").write_text("# Session progress\nstep 3")
        mem.notes.store("k", "v")
        assert mem.notes.list() == ["k", "session_progress"]
        assert mem.notes.retrieve("session_progress") == "# Session progress\nstep 3"


def test_incognito_checks_the_backend_but_never_connects(tmp_path: Path) -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    with agentmem.Memory(
        root=tmp_path / "r", working_dir=tmp_path, incognito=True, backend=unreachable
    ) as mem:
        mem.ltm.add_discovery("only in memory")
        mem.notes.store("k", "v")
        assert mem.notes.retrieve("k") == "v"
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigurationError):
        agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path, incognito=True, backend="x")
