"""One bad file never takes a store down (issue 13, A5).

A note with a newer or malformed version, a directory or a symlink named
like a note, junk bytes: the rest of the store still works, and what was
left out is reported. A failed long-term-memory write changes nothing in
memory. Malformed format versions are moved aside in every store that
carries one; temp files of dead writers are removed on the next open, a
live writer's never.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem import CorruptStoreError, FormatVersionError, StorageError
from agentmem._storage import files as storage_files
from agentmem.ltm import LongTermMemory
from agentmem.notes import NOTE_FORMAT, KeyValueStore
from agentmem.topics import TopicStore

REPO = Path(__file__).resolve().parents[1]

MALFORMED_VERSIONS: list[Any] = [0, -1, "1", 1.0, True, None, [1], {"v": 1}]
"""Versions that are not an int >= 1 (``None`` stands for a missing field)."""


def _note_doc(key: str, content: str, version: Any = 1) -> dict[str, Any]:
    doc: dict[str, Any] = {"format": NOTE_FORMAT, "key": key, "content": content}
    if version is not None:
        doc["version"] = version
    return doc


def _plant_note(directory: Path, key: str, doc: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{key}.json"
    path.write_text(json.dumps(doc))
    return path


# --------------------------------------------------------------------------- notes


@pytest.mark.parametrize("version", MALFORMED_VERSIONS, ids=repr)
def test_a_note_with_a_malformed_version_is_moved_aside_and_search_returns_the_rest(
    tmp_path: Path, version: Any, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "root"
    notes = KeyValueStore(root / "memory", root=root)
    notes.store("good", "deploy with make ship")
    bad = _plant_note(root / "memory", "bad", _note_doc("bad", "deploy by hand", version))
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    hits = notes.search("deploy")
    assert [h["key"] for h in hits] == ["good"]
    assert len(hits.skipped) == 1 and "'bad'" in hits.skipped[0]
    assert not bad.exists()  # moved aside, never overwritten or deleted
    assert len(notes.moved_aside) == 1 and notes.moved_aside[0].name.startswith("bad.json.corrupt-")
    assert any("bad" in r.getMessage() for r in caplog.records)
    _plant_note(root / "memory", "bad", _note_doc("bad", "again", version))
    with pytest.raises(CorruptStoreError):
        notes.retrieve("bad")


def test_a_note_from_a_newer_agentmem_is_skipped_reported_and_left(tmp_path: Path) -> None:
    root = tmp_path / "root"
    notes = KeyValueStore(root / "memory", root=root)
    notes.store("good", "deploy with make ship")
    newer = _plant_note(root / "memory", "newer", _note_doc("newer", "deploy v9", 99))
    before = newer.read_bytes()
    hits = notes.search("deploy")
    assert [h["key"] for h in hits] == ["good"]
    assert any("newer" in s and "newer agentmem" in s for s in hits.skipped)
    assert any("newer" in p for p in notes.problems)
    assert newer.read_bytes() == before  # left for the agentmem that wrote it
    with pytest.raises(FormatVersionError):
        notes.retrieve("newer")


def test_directories_and_symlinks_named_like_notes_do_not_break_search_or_list(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    notes = KeyValueStore(root / "memory", root=root)
    notes.store("good", "deploy with make ship")
    (root / "memory" / "adir.json").mkdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(_note_doc("link", "deploy secret")))
    (root / "memory" / "link.json").symlink_to(outside)
    assert notes.list() == ["good"]
    hits = notes.search("deploy")
    assert [h["key"] for h in hits] == ["good"]
    assert any("adir.json" in p and "not a regular file" in p for p in notes.problems)
    assert any("link.json" in p and "symlink" in p for p in notes.problems)
    assert (root / "memory" / "adir.json").is_dir() and (root / "memory" / "link.json").is_symlink()


def test_the_agents_search_skips_bad_notes_and_says_so(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "root", working_dir=tmp_path)
    mem.notes.store("good", "deploy with make ship")
    _plant_note(tmp_path / "root" / "memory", "newer", _note_doc("newer", "deploy v9", 7))
    (tmp_path / "root" / "memory" / "adir.json").mkdir()
    _plant_note(tmp_path / "root" / "memory", "zero", _note_doc("zero", "deploy zero", 0))
    out = mem.tools.dispatch({"operation": "search", "query": "deploy"})
    assert out["ok"], out
    assert [h["key"] for h in out["result"]["notes"]] == ["good"]
    skipped = " ".join(out["result"]["skipped"])
    assert "newer" in skipped and "zero" in skipped
    json.dumps(out)
    mem.close()


def test_the_agents_search_leaves_out_internal_notes_unless_asked(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "root", working_dir=tmp_path)
    mem.notes.store("plan", "refactor the parser progress notes")
    (tmp_path / "root" / "memory" / "session_progress.md").write_text(
        "# Session progress\nrefactor the parser\n"
    )
    plain = mem.tools.dispatch({"operation": "search", "query": "refactor parser"})
    assert [h["key"] for h in plain["result"]["notes"]] == ["plan"]
    asked = mem.tools.dispatch(
        {"operation": "search", "query": "refactor parser", "include_internal": True}
    )
    assert {h["key"] for h in asked["result"]["notes"]} == {"plan", "session_progress"}
    assert (
        mem.tools.dispatch({"operation": "search", "query": "x", "include_internal": "yes"})["ok"]
        is False
    )
    mem.close()


_JUNK = st.one_of(
    st.binary(max_size=40).map(lambda b: ("bytes", b)),
    st.sampled_from([*MALFORMED_VERSIONS, 2, 10**30]).map(lambda v: ("version", v)),
    st.just(("dir", None)),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=6,
    ).map(lambda v: ("json", v)),
)


@settings(max_examples=scaled(40), suppress_health_check=[HealthCheck.too_slow])
@given(
    good=st.lists(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=1, max_size=4, unique=True
    ),
    junk=st.lists(_JUNK, max_size=5),
)
def test_any_junk_in_note_slots_never_hides_the_good_notes(
    good: list[str], junk: list[tuple[str, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        directory = root / "memory"
        notes = KeyValueStore(directory, root=root)
        for key in good:
            notes.store(key, f"zebra note {key}")
        for index, (kind, value) in enumerate(junk):
            path = directory / f"junk{index}.json"
            if kind == "bytes":
                path.write_bytes(value)
            elif kind == "version":
                path.write_text(json.dumps(_note_doc(f"junk{index}", "zebra junk", value)))
            elif kind == "dir":
                path.mkdir()
            else:
                path.write_text(json.dumps(value))
        hits = notes.search("zebra", limit=100)
        found = {h["key"] for h in hits}
        assert set(good) <= found
        assert found - set(good) <= {f"junk{i}" for i in range(len(junk))}
        assert set(good) <= set(notes.list())
        for key in good:
            assert notes.retrieve(key) == f"zebra note {key}"


# --------------------------------------------------------------------------- long-term memory


def test_an_ltm_text_python_cannot_encode_is_sanitised_and_later_adds_work(tmp_path: Path) -> None:
    ltm = LongTermMemory(tmp_path / "ltm.json")
    entry = ltm.add_discovery("lone \ud800 surrogate in a fact")
    assert entry.text == "lone \ufffd surrogate in a fact"
    solved = ltm.add_solution("error \udfff here", "fix \ud800 there", examples=["src/\ud800.py"])
    assert (solved.text, solved.detail, solved.examples) == (
        "error \ufffd here",
        "fix \ufffd there",
        ("src/\ufffd.py",),
    )
    ltm.add_discovery("a later fact")
    again = LongTermMemory(tmp_path / "ltm.json")
    assert {e.text for e in again.entries()} == {
        "lone \ufffd surrogate in a fact",
        "error \ufffd here",
        "a later fact",
    }
    assert again.solutions()[0].examples == ("src/\ufffd.py",)


def test_an_unreadable_ltm_entry_holding_a_lone_surrogate_is_kept_and_adds_work(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ltm.json"
    kept = {"kind": "no-such-kind", "text": "\ud800 kept verbatim"}
    path.write_text(
        json.dumps({"format": "agentmem.ltm", "version": 1, "entries": [kept]}), "ascii"
    )
    ltm = LongTermMemory(path)
    ltm.add_discovery("a fact added after it")
    ltm.add_discovery("another one")
    data = json.loads(path.read_bytes().decode("utf-8"))  # valid UTF-8 on disk
    assert data["unreadable"] == [kept]
    assert {e.text for e in LongTermMemory(path).entries()} == {
        "a fact added after it",
        "another one",
    }


def test_a_failed_ltm_write_leaves_memory_equal_to_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ltm.json"
    ltm = LongTermMemory(path)
    ltm.add_discovery("the first fact")

    def fail(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage_files, "_create_temp", fail)  # the atomic write fails
    with pytest.raises(StorageError):
        ltm.add_discovery("a fact that never reached the disk")
    with pytest.raises(StorageError):
        ltm.add_discovery("the first fact")  # a confirmation that failed
    monkeypatch.undo()
    on_disk = LongTermMemory(path)
    assert ltm.entries() == on_disk.entries()
    assert [e.applications for e in ltm.entries()] == [1]
    ltm.add_discovery("a later fact")
    assert {e.text for e in LongTermMemory(path).entries()} == {"the first fact", "a later fact"}


def test_a_failed_incognito_change_changes_nothing() -> None:
    ltm = LongTermMemory(None)
    ltm.add_discovery("kept")
    with pytest.raises(agentmem.InvalidArgumentError):
        ltm.confirm("no-such-id")
    assert [e.text for e in ltm.entries()] == ["kept"]


@pytest.mark.parametrize("version", MALFORMED_VERSIONS, ids=repr)
def test_an_ltm_file_with_a_malformed_version_is_moved_aside(tmp_path: Path, version: Any) -> None:
    path = tmp_path / "ltm.json"
    doc: dict[str, Any] = {"format": "agentmem.ltm", "entries": []}
    if version is not None:
        doc["version"] = version
    path.write_text(json.dumps(doc))
    ltm = LongTermMemory(path)
    assert ltm.entries() == []
    assert len(ltm.moved_aside) == 1 and ltm.moved_aside[0].read_text() == json.dumps(doc)
    assert any("version" in p for p in ltm.problems)
    ltm.add_discovery("a fresh start")
    assert [e.text for e in LongTermMemory(path).entries()] == ["a fresh start"]


def test_an_ltm_file_from_a_newer_agentmem_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ltm.json"
    path.write_text(json.dumps({"format": "agentmem.ltm", "version": 42, "entries": []}))
    before = path.read_bytes()
    ltm = LongTermMemory(path)
    with pytest.raises(FormatVersionError):
        ltm.add_discovery("x y")
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("ltm.json.corrupt-*"))


# --------------------------------------------------------------------------- topics


def test_a_topic_with_a_lone_surrogate_is_written(tmp_path: Path) -> None:
    store = TopicStore(tmp_path / "root" / "memories")
    result = store.write("deploy", "step \ud800 one\n")
    assert result.content == "step \ufffd one\n"
    assert store.read("deploy") == "step \ufffd one\n"


# --------------------------------------------------------------------------- semantic memory


def test_a_semantic_database_with_a_malformed_meta_version_is_repaired_in_place(
    tmp_path: Path,
) -> None:
    from agentmem.semantic import LocalMemoryClient

    root = tmp_path / "root"
    mem = agentmem.Memory(root=root, working_dir=tmp_path)
    client = LocalMemoryClient(mem, embedder=None)
    client.add("I prefer tabs over spaces", user_id="u", infer=False)
    client.close()
    mem.close()
    db = root / "semantic.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = 'one' WHERE key = 'version'")
    conn.commit()
    conn.close()
    mem = agentmem.Memory(root=root, working_dir=tmp_path)
    client = LocalMemoryClient(mem, embedder=None)
    # Re-derived from the migrations table: nothing set aside, nothing lost.
    assert client.recovery is None
    assert [m.memory for m in client.get_all(user_id="u")] == ["I prefer tabs over spaces"]
    assert not list(root.glob("semantic.sqlite.corrupt-*"))
    client.close()
    mem.close()


# --------------------------------------------------------------------------- sessions database


@pytest.mark.parametrize("version", ["one", "0", "-1", "", "1.5", None])
def test_a_sessions_database_with_a_malformed_version_is_repaired_from_its_migrations(
    tmp_path: Path, version: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem, mem.session() as s:
        sid = s.id
        s.start_task("alpha zebra")
        s.append({"role": "assistant", "content": "beta"})
    db = root / "sessions.sqlite"
    conn = sqlite3.connect(db)
    if version is None:
        conn.execute("DELETE FROM meta WHERE key = 'version'")
    else:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'version'", (version,))
    conn.commit()
    conn.close()
    with (
        caplog.at_level("WARNING", logger="agentmem.storage"),
        agentmem.Memory(root=root, working_dir=tmp_path) as mem,
    ):
        # Nothing set aside, nothing lost: the version is the migrations table's.
        assert not list(root.glob("sessions.sqlite.corrupt-*"))
        with mem.session(sid, create=False) as s:
            assert [m["content"] for m in s.history.to_list()] == ["alpha zebra", "beta"]
        assert [hit.session_id for hit in mem.recall("zebra")] == [sid]
    assert any("unreadable agentmem.sessions version" in r.getMessage() for r in caplog.records)
    conn = sqlite3.connect(db)
    (stored,) = conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
    conn.close()
    assert stored.isdigit() and int(stored) >= 1


@pytest.mark.parametrize(
    "newer",
    [
        "UPDATE meta SET value = '999' WHERE key = 'version'",
        "INSERT INTO migrations (name, applied_at) VALUES ('9999_from_the_future', 'x')",
        # a malformed version does not hide a newer release's migration
        "UPDATE meta SET value = 'x' WHERE key = 'version';"
        "INSERT INTO migrations (name, applied_at) VALUES ('9999_from_the_future', 'x')",
    ],
)
def test_a_sessions_database_newer_than_this_release_is_still_refused(
    tmp_path: Path, newer: str
) -> None:
    root = tmp_path / "root"
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem, mem.session():
        pass
    conn = sqlite3.connect(root / "sessions.sqlite")
    conn.executescript(newer)
    conn.commit()
    conn.close()
    with pytest.raises(FormatVersionError):
        agentmem.Memory(root=root, working_dir=tmp_path).sessions.list()
    assert (root / "sessions.sqlite").exists()
    assert not list(root.glob("sessions.sqlite.corrupt-*"))


# --------------------------------------------------------------------------- temp files

_KILLED_WRITER = """
import os, sys
from pathlib import Path
from agentmem._storage.files import _create_temp
fd, name = _create_temp(Path(sys.argv[1]))
os.write(fd, b"half a write")
print(name, flush=True)
os.kill(os.getpid(), 9)
"""

_LIVE_WRITER = """
import os, sys, time
from pathlib import Path
from agentmem._storage.files import _create_temp
fd, name = _create_temp(Path(sys.argv[1]))
print(name, flush=True)
sys.stdin.read()
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _killed_temp(target: Path) -> Path:
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(target)],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    temp = Path(done.stdout.strip())
    assert temp.exists() and temp.parent == target.parent
    return temp


def test_temp_files_of_killed_writers_are_removed_on_open_and_live_ones_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memories").mkdir()
    (root / "snapshots" / "sessions").mkdir(parents=True)
    (root / "snapshots" / "blobs" / "ab").mkdir(parents=True)
    blob_temp = _killed_temp(root / "snapshots" / "blobs" / "ab" / ("c" * 62))
    dead = [
        _killed_temp(root / "ltm.json"),
        _killed_temp(root / "memory" / "plan.json"),
        _killed_temp(root / "memories" / "deploy.md"),
        _killed_temp(root / "snapshots" / "sessions" / "s1.json"),
    ]
    live = subprocess.Popen(
        [sys.executable, "-c", _LIVE_WRITER, str(root / "memory" / "busy.json")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert live.stdout is not None
        live_temp = Path(live.stdout.readline().strip())
        ours_fd, ours = storage_files._create_temp(root / "memory" / "mine.json")
        os.close(ours_fd)
        foreign = root / "memory" / ".other.json.0123abcd4567.tmp"  # not ours: no pid
        foreign.write_text("x")
        mem = agentmem.Memory(root=root, working_dir=tmp_path)
        with mem.session(session_id="s1") as s:  # opens the session's time machine
            assert blob_temp.exists()  # blob temps wait for a collection
            s.time_machine.collect_garbage()
            assert not blob_temp.exists()
        for temp in dead:
            assert not temp.exists(), temp
        assert live_temp.exists()  # its writer is alive
        assert Path(ours).exists()  # this process is alive
        assert foreign.exists()
        mem.close()
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait(timeout=60)
        if live.stdout is not None:
            live.stdout.close()
    # Once its writer is gone, the next open removes it.
    KeyValueStore(root / "memory", root=root)
    assert not live_temp.exists()


@settings(max_examples=scaled(30), suppress_health_check=[HealthCheck.too_slow])
@given(
    good=st.lists(
        st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=1, max_size=4, unique=True
    ),
    junk=st.lists(
        st.one_of(
            st.binary(max_size=40).map(lambda b: ("bytes", b)),
            st.just(("dir", None)),
            st.just(("link", None)),
        ),
        max_size=5,
    ),
)
def test_any_junk_in_topic_slots_never_hides_the_good_topics(
    good: list[str], junk: list[tuple[str, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        store = TopicStore(root / "memories", root=root)
        for topic in good:
            store.write(topic, f"zebra topic {topic}\n")
        outside = Path(tmp) / "outside.md"
        outside.write_text("outside\n")
        for index, (kind, value) in enumerate(junk):
            path = root / "memories" / f"junk{index}.md"
            if kind == "bytes":
                path.write_bytes(value)
            elif kind == "dir":
                path.mkdir()
            else:
                path.symlink_to(outside)
        assert set(good) <= {t.topic for t in store.list()}
        prompt = store.render_for_prompt(10_000)
        for topic in good:
            assert store.read(topic) == f"zebra topic {topic}\n"
            assert f"zebra topic {topic}" in prompt
        assert "outside" not in prompt
