"""The Documents contract, on files, in memory and in PostgreSQL.

Every implementation of :class:`agentmem._storage.documents.Documents` must
behave like a plain dict of bytes under one lock: a hypothesis state machine
runs the same random operations on an implementation and on a dict (an
independent oracle: it reuses nothing of the code under test) and compares
every read and listing. The PostgreSQL runs skip with one line when no
server can be started (tests/pg.py).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from profiles import scaled

from agentmem._storage.backend import EmbeddedBackend, ltm_files
from agentmem._storage.documents import Documents, FileDocuments, MemoryDocuments
from agentmem.errors import StoreLockedError, UnsafePathError

LOG = logging.getLogger("agentmem.test")
KEYS = st.sampled_from(["a", "b", "plan", "deploy-notes", "x_1"])
BODIES = st.binary(max_size=64)


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``open_backend`` accepts)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


def _file_documents(root: Path, namespace: str) -> Documents:
    return EmbeddedBackend(root).documents(namespace)


@pytest.fixture(params=["files", "memory", "postgresql"])
def make_docs(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], Documents]]:
    """A factory of Documents by namespace, on one backend (the same storage per call)."""
    if request.param == "files":
        yield lambda namespace: _file_documents(tmp_path / "root", namespace)
    elif request.param == "memory":
        shared: dict[str, MemoryDocuments] = {}
        yield lambda namespace: shared.setdefault(namespace, MemoryDocuments())
    else:
        from agentmem._storage.pg_documents import PgDocumentStore

        store = PgDocumentStore(pg_uri(request.getfixturevalue("pg_dsn")), lock_timeout=2.0)
        yield store.documents
        store.close()


def test_round_trip_list_and_delete(make_docs: Callable[[str], Documents]) -> None:
    notes, topics = make_docs("notes"), make_docs("topics")
    assert notes.read("plan") is None
    assert notes.list().found == []
    with notes.locked():
        notes.write("plan", b'{"x": 1}\n')
        notes.write("b", b"\xff\x00 raw bytes")
        assert notes.read("plan") == b'{"x": 1}\n'  # the holder reads its own write
    with topics.locked():
        topics.write("plan", b"a topic, not a note")
    again = make_docs("notes")  # another object on the same storage
    assert again.read("plan") == b'{"x": 1}\n'
    assert again.read("b") == b"\xff\x00 raw bytes"
    listing = again.list()
    assert [(d.key, d.size) for d in listing.found] == [("b", 12), ("plan", 9)]
    assert listing.skipped == []
    assert [d.key for d in make_docs("topics").list().found] == ["plan"]
    with again.locked():
        assert again.delete("plan") is True
        assert again.delete("plan") is False
    assert notes.read("plan") is None
    assert make_docs("topics").read("plan") == b"a topic, not a note"


def test_changes_need_the_lock(make_docs: Callable[[str], Documents]) -> None:
    docs = make_docs("notes")
    for change in (
        lambda: docs.write("k", b"x"),
        lambda: docs.delete("k"),
        lambda: docs.set_aside("k", what="k", reason="r", logger=LOG),
    ):
        with pytest.raises(RuntimeError, match="outside locked"):
            change()
    assert docs.read("k") is None


def test_the_lock_is_reentrant_for_its_holder_and_excludes_other_threads(
    make_docs: Callable[[str], Documents],
) -> None:
    docs = make_docs("ltm")
    order: list[str] = []
    with docs.locked():
        assert docs.held
        with docs.locked():
            assert docs.held
            docs.write("ltm", b"inner")
        assert docs.held, "the inner block does not release the outer one"

        def other() -> None:
            assert not docs.held
            with docs.locked():
                order.append("other")

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(0.2)
        order.append("holder")
    thread.join(10)
    assert order == ["holder", "other"]
    assert not docs.held


def test_set_aside_keeps_the_bytes_and_frees_the_key(
    make_docs: Callable[[str], Documents], caplog: pytest.LogCaptureFixture
) -> None:
    docs = make_docs("notes")
    with docs.locked():
        docs.write("bad", b"\xff garbage")
        where, message = docs.set_aside("bad", what="note 'bad'", reason="not JSON", logger=LOG)
    assert docs.read("bad") is None
    assert "note 'bad' is unreadable (not JSON)" in message and str(where) in message
    assert message in caplog.text
    if isinstance(docs, FileDocuments):
        assert isinstance(where, Path) and where.read_bytes() == b"\xff garbage"
        assert where.name.startswith("bad.json.corrupt-")
    elif isinstance(docs, MemoryDocuments):
        assert docs.aside[str(where)] == b"\xff garbage"
    else:
        rows = _set_aside_rows(docs)
        assert rows == [("notes", "bad", b"\xff garbage", "not JSON")]


def _set_aside_rows(docs: Documents) -> list[tuple[Any, ...]]:
    from agentmem._storage.pg_documents import PostgresDocuments

    assert isinstance(docs, PostgresDocuments)
    with docs.db.transaction("read the set-aside rows") as cursor:
        rows = cursor.execute(
            "SELECT namespace, key, body, reason FROM agentmem_set_aside ORDER BY id"
        ).fetchall()
    return [(n, k, bytes(b), r) for n, k, b, r in rows]


def test_files_refuse_a_symlinked_document_and_report_odd_entries(tmp_path: Path) -> None:
    root = tmp_path / "root"
    docs = _file_documents(root, "notes")
    with docs.locked():
        docs.write("good", b"{}")
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"secret")
    (root / "memory" / "link.json").symlink_to(outside)
    (root / "memory" / "dir.json").mkdir()
    (root / "memory" / ".hidden.json").write_bytes(b"{}")  # not a key: not a note, not reported
    with pytest.raises(UnsafePathError):
        docs.read("link")
    with docs.locked(), pytest.raises(UnsafePathError):
        docs.write("link", b"overwrite")
    assert outside.read_bytes() == b"secret"
    listing = docs.list()
    assert [d.key for d in listing.found] == ["good"]
    assert len(listing.skipped) == 2
    assert any("link.json skipped: a symlink" in line for line in listing.skipped)
    assert any("dir.json skipped: not a regular file" in line for line in listing.skipped)


def test_the_file_lock_times_out_as_store_locked(tmp_path: Path) -> None:
    """Another holder of the lock file (another object, as another process would be) waits,
    then gets StoreLockedError."""
    first = ltm_files(tmp_path / "ltm.json")
    second = ltm_files(tmp_path / "ltm.json", timeout=0.1)
    with first.locked():
        result: list[BaseException] = []

        def take() -> None:
            try:
                with second.locked():
                    pass
            except BaseException as exc:
                result.append(exc)

        thread = threading.Thread(target=take)
        thread.start()
        thread.join(10)
    assert len(result) == 1 and isinstance(result[0], StoreLockedError)


def test_postgres_lock_times_out_as_store_locked(pg_dsn: str) -> None:
    from agentmem._storage.pg_documents import PgDocumentStore

    holder = PgDocumentStore(pg_uri(pg_dsn))
    waiter = PgDocumentStore(pg_uri(pg_dsn), lock_timeout=0.2)
    try:
        with holder.documents("ltm").locked():
            with (
                pytest.raises(StoreLockedError, match="locked by another process"),
                waiter.documents("ltm").locked(),
            ):
                pass
            with waiter.documents("notes").locked():  # another namespace: its own lock
                pass
    finally:
        holder.close()
        waiter.close()


# ---------------------------------------------------------------------- the contract


class DocumentsMachine(RuleBasedStateMachine):
    """Random reads, writes, deletes and set-asides against a dict of bytes."""

    def __init__(self, make: Callable[[], tuple[Documents, Callable[[], None]]]) -> None:
        super().__init__()
        self.docs, self._cleanup = make()
        self.model: dict[str, bytes] = {}
        self.aside: list[bytes] = []

    @rule(key=KEYS, body=BODIES)
    def write(self, key: str, body: bytes) -> None:
        with self.docs.locked():
            self.docs.write(key, body)
        self.model[key] = body

    @rule(key=KEYS, first=BODIES, second=BODIES)
    def write_twice_in_one_cycle(self, key: str, first: bytes, second: bytes) -> None:
        with self.docs.locked():
            self.docs.write(key, first)
            assert self.docs.read(key) == first
            self.docs.write(key, second)
        self.model[key] = second

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        with self.docs.locked():
            existed = self.docs.delete(key)
        assert existed == (key in self.model)
        self.model.pop(key, None)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def set_aside(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        with self.docs.locked():
            self.docs.set_aside(key, what=key, reason="test", logger=LOG)
        self.aside.append(self.model.pop(key))

    @rule(key=KEYS)
    def read(self, key: str) -> None:
        assert self.docs.read(key) == self.model.get(key)

    @invariant()
    def listing_matches(self) -> None:
        listing = self.docs.list()
        assert [(d.key, d.size) for d in listing.found] == [
            (k, len(v)) for k, v in sorted(self.model.items())
        ]
        assert listing.skipped == []

    def teardown(self) -> None:
        self._cleanup()


def _files() -> tuple[Documents, Callable[[], None]]:
    where = Path(tempfile.mkdtemp(prefix="agentmem-docs-"))
    return _file_documents(where, "notes"), lambda: shutil.rmtree(where, ignore_errors=True)


def _memory() -> tuple[Documents, Callable[[], None]]:
    return MemoryDocuments(), lambda: None


@pytest.mark.parametrize("make", [_files, _memory], ids=["files", "memory"])
def test_documents_behave_like_a_dict(
    make: Callable[[], tuple[Documents, Callable[[], None]]],
) -> None:
    run_state_machine_as_test(
        lambda: DocumentsMachine(make),
        settings=settings(max_examples=scaled(40), stateful_step_count=20),
    )


def test_postgres_documents_behave_like_a_dict(pg_dsn: str) -> None:
    from agentmem._storage.pg_documents import PgDocumentStore

    store = PgDocumentStore(pg_uri(pg_dsn))
    runs = iter(range(1_000_000))

    def make() -> tuple[Documents, Callable[[], None]]:
        return store.documents(f"machine-{next(runs)}"), lambda: None  # a fresh namespace

    try:
        run_state_machine_as_test(
            lambda: DocumentsMachine(make),
            settings=settings(max_examples=scaled(15), stateful_step_count=15),
        )
    finally:
        store.close()


def test_a_documents_database_from_a_newer_agentmem_is_refused(pg_dsn: str) -> None:
    import psycopg

    from agentmem._storage.pg_documents import DOCUMENTS_FORMAT, PgDocumentStore
    from agentmem.errors import FormatVersionError

    store = PgDocumentStore(pg_uri(pg_dsn))
    notes = store.documents("notes")
    with notes.locked():
        notes.write("k", b"kept")
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE agentmem.agentmem_meta SET value = '2' WHERE format = %s AND key = 'version'",
            (DOCUMENTS_FORMAT,),
        )
    with pytest.raises(FormatVersionError, match="newer agentmem"):
        PgDocumentStore(pg_uri(pg_dsn))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT body FROM agentmem.agentmem_documents").fetchone()
    assert row is not None and bytes(row[0]) == b"kept"
