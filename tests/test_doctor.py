"""agentmem.doctor: every store checked, the root never written, and its predictions true.

Each fault is injected into a healthy root built with ``agentmem.Memory``; the doctor
must report it (store, target, recovery), leave every byte of the root as it was (no
new file either: no lock, no ``-wal``/``-shm``), and say what opening would do. Then
the root is opened with ``Memory`` and what it did is compared with the prediction.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentmem
from agentmem.doctor import DoctorReport, Finding, RootNotFoundError, diagnose
from agentmem.errors import AgentMemError, FormatVersionError
from agentmem.semantic import LocalMemoryClient

REPO = Path(__file__).resolve().parent.parent


def _snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` -> a hash of its bytes (directories and links named)."""
    out: dict[str, str] = {}
    for base, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(base, name), root)] = "dir"
        for name in files:
            path = Path(base, name)
            rel = os.path.relpath(path, root)
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _build(base: Path) -> tuple[Path, Path, str]:
    """A healthy root (sessions, LTM, a note, a topic, a file edit, semantic memory)."""
    work = base / "work"
    work.mkdir()
    (work / "a.txt").write_text("one\n")
    root = base / "root"
    with agentmem.Memory(root=root, working_dir=work) as mem:
        mem.ltm.add_discovery("the build uses make", confidence=0.9)
        mem.notes.store("plan", "ship the doctor")
        mem.topics.write("build", "# Build\nuse make\n")
        mem.items.put(("prefs", "martin"), "editor", {"tabs": True})
        with mem.session(name="one") as s:
            sid = s.id
            s.start_task("edit the file")
            s.time_machine.record_file_before_change(str(work / "a.txt"))
            (work / "a.txt").write_text("two\n")
            for i in range(5):
                s.append({"role": "assistant", "content": f"step {i} of the edit, zebra"})
                s.append({"role": "user", "content": f"ok {i}"})
            s.finish_task()
        assert mem.recall("zebra")  # indexes the queued messages
        with LocalMemoryClient(mem, embedder=None) as client:
            client.add("I prefer tabs over spaces.", user_id="martin", infer=False)
    return root, work, sid


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("doctor-template")
    _, _, sid = _build(base)
    return base, sid


@pytest.fixture
def healthy(template: tuple[Path, str], tmp_path: Path) -> tuple[Path, Path, str]:
    base, sid = template
    shutil.copytree(base / "root", tmp_path / "root", symlinks=True)
    shutil.copytree(base / "work", tmp_path / "work", symlinks=True)
    return tmp_path / "root", tmp_path / "work", sid


def _diagnose_unchanged(root: Path, **kw: Any) -> DoctorReport:
    before = _snapshot(root)
    report = diagnose(root, **kw)
    assert _snapshot(root) == before, "diagnose changed the root"
    for finding in report.findings:  # the scratch copy is never named: the real files are
        text = finding.target + finding.problem + finding.recovery
        assert "agentmem-doctor-" not in text, finding
        assert "\n" not in text and "\t" not in text, finding
    if any("moves it aside" in f.recovery for f in _damaged(report, "sessions")):
        # What follows a recovery describes the recovered copy: no "ok" may say otherwise.
        assert not [
            f
            for f in report.findings
            if f.store in ("sessions", "recall-index") and f.severity == "ok"
        ]
    return report


def _damaged(report: DoctorReport, store: str) -> list[Finding]:
    return [f for f in report.findings if f.store == store and f.severity == "damaged"]


# ---------------------------------------------------------------------- healthy


def test_a_healthy_root_is_ok_and_untouched(healthy: tuple[Path, Path, str]) -> None:
    root, _, _ = healthy
    events: list[tuple[str, dict[str, Any]]] = []

    class Reporter:
        def report(self, event: str, data: Any) -> None:
            events.append((event, dict(data)))

    report = _diagnose_unchanged(root, progress=Reporter())
    assert report.ok, [f for f in report.findings if f.severity != "ok"]
    assert {f.store for f in report.findings} == {
        "root",
        "sessions",
        "recall-index",
        "ltm",
        "notes",
        "topics",
        "items",
        "semantic",
        "time-machine",
    }
    assert report.backend == "embedded"
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True
    # The time machine's blob of the edited file was verified.
    tm = [f for f in report.findings if f.store == "time-machine"]
    assert "1 referenced blobs verified" in tm[-1].problem
    names = [e for e, _ in events]
    assert names[0] == "doctor.started" and names[-1] == "doctor.finished"
    stores = [d for e, d in events if e == "doctor.store"]
    assert [d["index"] for d in stores] == list(range(1, len(stores) + 1))
    assert {d["total"] for d in stores} == {len(stores)}
    assert events[-1][1]["ok"] is True and events[-1][1]["error"] is None


def test_a_missing_root_and_a_non_root_raise(tmp_path: Path) -> None:
    with pytest.raises(RootNotFoundError, match="does not exist"):
        diagnose(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("x")
    with pytest.raises(RootNotFoundError, match="not an agentmem root"):
        diagnose(tmp_path / "plain")
    assert os.listdir(tmp_path / "plain") == ["x.txt"]


def test_a_live_session_is_a_warning_with_its_pid(healthy: tuple[Path, Path, str]) -> None:
    root, work, sid = healthy
    with agentmem.Memory(root=root, working_dir=work) as mem, mem.session(sid):
        before = _snapshot(root)
        report = diagnose(root)
        assert _snapshot(root) == before
    locked = [f for f in report.findings if f.target == sid and f.severity == "warning"]
    assert locked and f"pid {os.getpid()}" in locked[0].problem
    # The database itself was read through a consistent snapshot, not copied under a writer.
    (db,) = [f for f in report.findings if f.store == "sessions" and "open in another" in f.problem]
    assert f"pid {os.getpid()}" in db.problem and db.severity == "warning"
    assert report.ok  # open is not damage


def test_a_stale_session_lock_file_is_a_warning(healthy: tuple[Path, Path, str]) -> None:
    root, _, _ = healthy
    (root / "locks" / "gone-session.lock").write_bytes(b"")
    report = _diagnose_unchanged(root)
    stale = [f for f in report.findings if f.target == str(root / "locks" / "gone-session.lock")]
    assert [f.severity for f in stale] == ["warning"] and "stale lock" in stale[0].problem
    assert report.ok
    # The stores' own lock files are not sessions'.
    assert not [f for f in report.findings if f.target.endswith(("notes.lock", "ltm.json.lock"))]


# ---------------------------------------------------------------------- one fault per store


def _sql(root: Path, *statements: str) -> None:
    conn = sqlite3.connect(root / "sessions.sqlite")
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        assert not (root / f"sessions.sqlite{suffix}").exists()


def _blob_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "snapshots" / "blobs").rglob("*") if p.is_file())


def test_truncated_session_database(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    db = root / "sessions.sqlite"
    db.write_bytes(db.read_bytes()[:60])
    report = _diagnose_unchanged(root)
    found = _damaged(report, "sessions")
    assert found and found[0].target == str(db)
    assert "truncated header" in found[0].problem
    assert "moves it aside to sessions.sqlite.corrupt-" in found[0].recovery
    assert not report.ok
    with agentmem.Memory(root=root, working_dir=work) as mem:
        assert mem.sessions.recovery is not None
        assert mem.sessions.recovery.outcome in found[0].recovery
    assert list(root.glob("sessions.sqlite.corrupt-*"))


def test_bit_flipped_session_pages(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    db = root / "sessions.sqlite"
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for offset in range(page + 8, min(len(data), 4 * page), 97):  # pages 2-4, not the header
        data[offset] ^= 0xFF
    db.write_bytes(bytes(data))
    report = _diagnose_unchanged(root)
    assert not report.ok
    found = _damaged(report, "sessions") + _damaged(report, "recall-index")
    assert found
    moved = [f for f in found if "moves it aside" in f.recovery]
    with agentmem.Memory(root=root, working_dir=work) as mem:
        # Opening did what the doctor said: moved the file aside exactly when it said so.
        assert (mem.sessions.recovery is not None) == bool(moved)


def test_a_truncated_database_has_no_ok_about_its_recovered_copy(
    healthy: tuple[Path, Path, str],
) -> None:
    root = healthy[0]
    db = root / "sessions.sqlite"
    db.write_bytes(db.read_bytes()[: len(db.read_bytes()) // 2])
    report = _diagnose_unchanged(root)  # asserts: no "ok" after the "moves it aside"
    assert [f for f in _damaged(report, "sessions") if "moves it aside" in f.recovery]


def test_an_empty_database_file_next_to_session_records(
    healthy: tuple[Path, Path, str],
) -> None:
    root, work, _ = healthy
    (root / "sessions.sqlite").write_bytes(b"")
    records = root / "snapshots" / "sessions"
    records.mkdir(parents=True, exist_ok=True)
    (records / "gone.json").write_text("{}")  # a session whose rows went with the file
    recorded = len(list(records.glob("*.json")))
    report = _diagnose_unchanged(root)
    sessions = [f for f in report.findings if f.store == "sessions"]
    assert [f.severity for f in sessions] == ["damaged"], sessions
    assert "empty database file" in sessions[0].problem
    assert f"{recorded} sessions have time-machine records but no rows" in sessions[0].problem
    assert "opening starts an empty store" in sessions[0].recovery
    assert not [f for f in report.findings if f.store == "recall-index" and f.severity == "ok"]
    with agentmem.Memory(root=root, working_dir=work) as mem:
        assert mem.sessions.list() == []  # as predicted: an empty store


def test_a_damaged_log_of_a_killed_writer_is_reported(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    child = (
        "import os, signal, sys, agentmem\n"
        "m = agentmem.Memory(root=sys.argv[1], working_dir=sys.argv[2], memory_update=False)\n"
        "s = m.session('gamma', name='killed')\n"
        "s.start_task('do stuff')\n"
        "for i in range(20): s.append({'role': 'assistant', 'content': f'msg {i} ' * 200})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", child, str(root), str(work)], env=env, check=False, timeout=60
    )
    assert done.returncode == -9
    wal = root / "sessions.sqlite-wal"
    data = bytearray(wal.read_bytes())
    assert len(data) > 40_004  # committed frames the killed writer left in the log
    for at in range(40_000, 40_004):
        data[at] ^= 0xFF
    wal.write_bytes(bytes(data))
    report = _diagnose_unchanged(root)
    moved = [f for f in _damaged(report, "sessions") if "moves it aside" in f.recovery]
    assert moved and not report.ok
    with agentmem.Memory(root=root, working_dir=work) as mem:
        recovery = mem.sessions.recovery
        assert recovery is not None  # opening did what the doctor said it would
        assert recovery.outcome and recovery.outcome in moved[0].recovery


def test_a_session_that_cannot_be_loaded_names_the_real_file(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=work) as mem, mem.session(name="big") as s:
        for i in range(40):
            s.append({"role": "assistant", "content": f"line {i} " * 300})
    db = root / "sessions.sqlite"
    healthy = db.read_bytes()
    for page in range(2, len(healthy) // 4096):  # the first page whose damage fails a load
        data = bytearray(healthy)
        for at in range((page - 1) * 4096, (page - 1) * 4096 + 8):
            data[at] ^= 0xFF
        db.write_bytes(bytes(data))
        report = _diagnose_unchanged(root)  # asserts: no finding names the scratch copy
        unloadable = [f for f in report.findings if "cannot be loaded" in f.problem]
        if unloadable:
            assert f"{db} is damaged" in unloadable[0].problem
            return
    pytest.fail("no page's damage made a session fail to load")


@pytest.mark.parametrize(
    ("linked", "store"),
    [
        ("sessions.sqlite", "sessions"),
        ("memory", "notes"),
        ("memories", "topics"),
        ("items", "items"),
    ],
)
def test_a_symlinked_store_is_reported(
    healthy: tuple[Path, Path, str], linked: str, store: str
) -> None:
    root, work, _ = healthy
    elsewhere = root.parent / f"elsewhere-{linked}"
    (root / linked).rename(elsewhere)
    (root / linked).symlink_to(elsewhere)
    report = _diagnose_unchanged(root)
    found = [f for f in _damaged(report, store) if f.target == str(root / linked)]
    assert found and "opening refuses it" in found[0].recovery
    assert "symbolic link" in found[0].problem

    def read_it() -> None:
        with agentmem.Memory(root=root, working_dir=work) as mem:
            readers = {
                "sessions": mem.sessions.list,
                "notes": mem.notes.list,
                "topics": mem.topics.list,
                "items": mem.items.items,
            }
            readers[store]()

    with pytest.raises(AgentMemError, match="symbolic link"):
        read_it()


@pytest.mark.parametrize("copier", ["_sessions.copy_database", "_documents.copy_tree"])
def test_a_full_scratch_directory_is_an_error_not_a_finding(
    healthy: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, copier: str
) -> None:
    import errno

    import agentmem.doctor as doctor_pkg
    from agentmem.errors import StorageError

    root, _, _ = healthy
    tmp = tmp_path / "small-tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    module, name = copier.split(".")

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(getattr(doctor_pkg, module), name, full)
    before = _snapshot(root)
    with pytest.raises(StorageError) as caught:
        diagnose(root)
    assert str(tmp) in str(caught.value) and "TMPDIR" in str(caught.value)
    assert "ran out of space" in str(caught.value)
    assert list(tmp.iterdir()) == []  # the scratch copy is removed
    assert _snapshot(root) == before


def test_damaged_rows_are_named_by_session_and_seq(healthy: tuple[Path, Path, str]) -> None:
    root, work, sid = healthy
    _sql(
        root,
        f"UPDATE messages SET body = '{{not json' WHERE session_id = '{sid}' AND seq = 3",
        f"UPDATE messages SET body = replace(body, 'zebra', 'zebrA') "
        f"WHERE session_id = '{sid}' AND seq = 5",
    )
    report = _diagnose_unchanged(root)
    rows = [f for f in _damaged(report, "sessions") if f.target == sid]
    text = " | ".join(f.problem + " -> " + f.recovery for f in rows)
    assert "seq 3 do not parse" in text and "quarantine" in text
    assert "seq 5 changed after they were written" in text
    with agentmem.Memory(root=root, working_dir=work) as mem:
        record = mem.sessions.load(sid)
        assert record.quarantined == [3]
        assert record.checksum_failed == [5]  # as stored, and as the doctor named it
    assert _diagnose_unchanged(root).ok  # repaired for good by that load


def test_newer_session_database_version(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    _sql(root, "UPDATE meta SET value = '99' WHERE key = 'version'")
    report = _diagnose_unchanged(root)
    found = _damaged(report, "sessions")
    assert (
        found
        and "newer agentmem" in found[0].problem
        and "upgrade agentmem"
        in found[0].problem.lower().replace("upgrade agentmem to open it", "upgrade agentmem")
    )
    assert "refuses it with FormatVersionError" in found[0].recovery
    with pytest.raises(FormatVersionError):
        agentmem.Memory(root=root, working_dir=work)


def test_recall_index_out_of_step(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    _sql(root, "DELETE FROM recall_docs WHERE docid IN (SELECT docid FROM recall_docs LIMIT 2)")
    report = _diagnose_unchanged(root)
    found = _damaged(report, "recall-index")
    assert found and found[0].target == str(root / "sessions.sqlite")
    with agentmem.Memory(root=root, working_dir=work) as mem:
        if "opening rebuilds" in found[0].recovery:
            assert mem.sessions.recall_repairs
        else:
            assert "check_recall_index() rebuilds" in found[0].recovery
            assert not mem.sessions.recall_repairs
            assert mem.sessions.check_recall_index()
        assert mem.recall("zebra")
    assert _diagnose_unchanged(root).ok


def test_damaged_ltm_file(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    (root / "ltm.json").write_text('{"format": "agentmem.ltm", "version": 1, "entries": [')
    report = _diagnose_unchanged(root)
    found = _damaged(report, "ltm")
    assert found and found[0].target == str(root / "ltm.json")
    assert "not valid JSON" in found[0].problem
    assert "corrupt-" not in found[0].problem  # what was done to the scratch copy is not said
    assert "moves it aside to ltm.json.corrupt-<timestamp>" in found[0].recovery
    with agentmem.Memory(root=root, working_dir=work) as mem:
        mem.ltm.stats()
        assert mem.ltm.moved_aside
    assert list(root.glob("ltm.json.corrupt-*"))


def test_damaged_note_and_bad_topic_file(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    (root / "memory" / "plan.json").write_text("[1, 2")
    (root / "memories" / "build.md").write_bytes(b"# Build\n\xff\xfe broken\n")
    report = _diagnose_unchanged(root)
    notes = _damaged(report, "notes")
    assert notes and notes[0].target == str(root / "memory" / "plan.json")
    assert "moves it aside" in notes[0].recovery
    topics = [f for f in report.findings if f.store == "topics" and f.severity == "warning"]
    assert topics and "not UTF-8" in topics[0].problem
    assert topics[0].target == str(root / "memories" / "build.md")
    with agentmem.Memory(root=root, working_dir=work) as mem:
        with pytest.raises(AgentMemError):
            mem.notes.retrieve("plan")
        assert list((root / "memory").glob("plan.json.corrupt-*"))
        assert mem.topics.read("build") is not None and mem.topics.problems
    assert (root / "memories" / "build.md").exists()  # left as it is, as predicted


def test_damaged_items_document(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    (doc,) = [p for p in (root / "items").glob("*.json") if p.name != "index.json"]
    doc.write_text('{"format": "agentmem.items"')
    report = _diagnose_unchanged(root)
    found = _damaged(report, "items")
    assert found and found[0].target == str(doc)
    assert f"moves it aside to items/{doc.name}.corrupt-<timestamp>" in found[0].recovery
    with agentmem.Memory(root=root, working_dir=work) as mem:
        assert mem.items.items() == []
        assert mem.items.moved_aside
    assert list((root / "items").glob(f"{doc.name}.corrupt-*"))


@pytest.mark.parametrize("file", ["ltm.json", "memory/plan.json"])
def test_a_document_from_a_newer_agentmem(healthy: tuple[Path, Path, str], file: str) -> None:
    root, work, _ = healthy
    path = root / file
    data = json.loads(path.read_text())
    data["version"] = 99
    path.write_text(json.dumps(data))
    report = _diagnose_unchanged(root)
    found = [f for f in report.findings if f.severity == "damaged"]
    assert len(found) == 1 and "upgrade agentmem" in found[0].problem
    assert "refuses it with FormatVersionError" in found[0].recovery
    with (
        agentmem.Memory(root=root, working_dir=work) as mem,
        pytest.raises(FormatVersionError),
    ):
        mem.ltm.stats() if file == "ltm.json" else mem.notes.retrieve("plan")
    assert path.exists()


@pytest.mark.parametrize("fault", ["missing", "corrupted"])
def test_time_machine_blob(healthy: tuple[Path, Path, str], fault: str) -> None:
    root, work, sid = healthy
    (blob,) = _blob_files(root)
    if fault == "missing":
        blob.unlink()
    else:
        blob.write_bytes(b"not zlib at all")
    report = _diagnose_unchanged(root)
    found = _damaged(report, "time-machine")
    assert found[0].target == str(blob)
    assert "RestoreError" in found[0].recovery
    with agentmem.Memory(root=root, working_dir=work) as mem, mem.session(sid) as s:
        with pytest.raises(AgentMemError):
            s.undo()
        assert (work / "a.txt").read_text() == "two\n"  # left as it was


def test_damaged_time_machine_record(healthy: tuple[Path, Path, str]) -> None:
    root, work, sid = healthy
    record = root / "snapshots" / "sessions" / f"{sid}.json"
    record.write_text("{ nope")
    report = _diagnose_unchanged(root)
    found = [f for f in _damaged(report, "time-machine") if f.target == str(record)]
    assert found and f"{sid}.json.corrupt-<timestamp>" in found[0].recovery
    with agentmem.Memory(root=root, working_dir=work) as mem, mem.session(sid):
        pass
    assert list(record.parent.glob(f"{sid}.json.corrupt-*"))


def test_damaged_semantic_memory(healthy: tuple[Path, Path, str]) -> None:
    root, work, _ = healthy
    (root / "semantic.sqlite").write_bytes(b"garbage" * 20)
    report = _diagnose_unchanged(root)
    found = _damaged(report, "semantic")
    assert found and "moves it aside to semantic.sqlite.corrupt-" in found[0].recovery
    with (
        agentmem.Memory(root=root, working_dir=work) as mem,
        LocalMemoryClient(mem, embedder=None) as client,
    ):
        assert client.recovery is not None


# ---------------------------------------------------------------------- never raises, never writes


@pytest.fixture(scope="module")
def session_db(template: tuple[Path, str]) -> bytes:
    return (template[0] / "root" / "sessions.sqlite").read_bytes()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1, max_size=8)
)
def test_random_byte_flips_are_findings_never_crashes(
    session_db: bytes, flips: list[tuple[int, int]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        data = bytearray(session_db)
        for at, mask in flips:
            data[at % len(data)] ^= mask
        (root / "sessions.sqlite").write_bytes(bytes(data))
        report = _diagnose_unchanged(root)
        assert all(f.severity in ("ok", "warning", "damaged") for f in report.findings)
        assert any(f.store == "sessions" for f in report.findings)


# ---------------------------------------------------------------------- python -m agentmem doctor


def _cli() -> None:
    if importlib.util.find_spec("agentmem.cli") is None:
        pytest.skip("agentmem.cli is not here yet (the cli helper's branch adds it)")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("AGENTMEM_ROOT", None)
    env.pop("AGENTMEM_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-m", "agentmem", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_cli_doctor_healthy_json(healthy: tuple[Path, Path, str]) -> None:
    _cli()
    root, _, _ = healthy
    before = _snapshot(root)
    done = _run("--root", str(root), "--json", "doctor")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert _snapshot(root) == before


def test_cli_doctor_damaged(healthy: tuple[Path, Path, str]) -> None:
    _cli()
    root, _, _ = healthy
    (root / "ltm.json").write_text("{")
    done = _run("--root", str(root), "doctor")
    assert done.returncode == 1, done.stderr
    assert "ltm.json" in done.stdout


def test_cli_doctor_missing_root(tmp_path: Path) -> None:
    _cli()
    done = _run("--root", str(tmp_path / "nowhere"), "doctor")
    assert done.returncode == 3
    assert done.stderr.startswith("agentmem: error:") and len(done.stderr.splitlines()) == 1


# ---------------------------------------------------------------------- PostgreSQL


def _pg_digest(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'agentmem' "
            "ORDER BY table_name"
        ).fetchall()
        digest = hashlib.sha256()
        for (table,) in rows:
            for row in conn.execute(f'SELECT * FROM agentmem."{table}" ORDER BY 1'):
                digest.update(repr((table, row)).encode())
        return digest.hexdigest()


def test_postgresql_backend(tmp_path: Path, pg_dsn: str) -> None:
    import psycopg
    from test_documents import pg_uri

    uri = pg_uri(pg_dsn)
    work = tmp_path / "work"
    work.mkdir()
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=work, backend=uri) as mem:
        mem.ltm.add_discovery("the build uses make", confidence=0.9)
        mem.notes.store("plan", "ship it")
        with mem.session(name="pg") as s:
            sid = s.id
            for i in range(6):
                s.append({"role": "user", "content": f"zebra message {i}"})
        assert mem.recall("zebra")
    before = _pg_digest(pg_dsn)
    report = _diagnose_unchanged(root, backend=uri)
    assert _pg_digest(pg_dsn) == before, "diagnose wrote to PostgreSQL"
    assert report.ok, [f for f in report.findings if f.severity != "ok"]
    assert report.backend == uri  # no password to mask here
    assert {"sessions", "recall-index", "ltm", "notes"} <= {f.store for f in report.findings}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE agentmem.messages SET body = '{not json' WHERE session_id = %s AND seq = 2",
            (sid,),
        )
        conn.execute("DELETE FROM agentmem.recall_docs WHERE session_id = %s AND seq = 4", (sid,))
    before = _pg_digest(pg_dsn)
    report = _diagnose_unchanged(root, backend=uri)
    assert _pg_digest(pg_dsn) == before, "diagnose wrote to PostgreSQL"
    rows = [f for f in _damaged(report, "sessions") if f.target == sid]
    assert rows and "seq 2 do not parse" in rows[0].problem and "quarantine" in rows[0].recovery
    assert _damaged(report, "recall-index")
    with agentmem.Memory(root=root, working_dir=work, backend=uri) as mem:
        assert mem.sessions.load(sid).quarantined == [2]
        assert mem.sessions.check_recall_index()  # the drift the doctor reported, rebuilt
    assert _diagnose_unchanged(root, backend=uri).ok


def test_an_unparsable_dsn_is_a_configuration_error(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    from agentmem.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        diagnose(tmp_path, backend="postgresql://u:secret@localhost/db?nosuch=1")
    assert "cannot parse the PostgreSQL DSN" in str(caught.value)
    assert "secret" not in str(caught.value)


def test_finding_text_is_one_line() -> None:
    found = Finding("root", "a\nb", "damaged", "cannot connect: x\n\tDETAIL: y", "nothing\n")
    assert (found.target, found.problem, found.recovery) == (
        "a b",
        "cannot connect: x DETAIL: y",
        "nothing",
    )
