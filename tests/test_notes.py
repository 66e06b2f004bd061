"""KeyValueStore (mem.notes): operations, key validation, escapes refused, corrupt notes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem._storage.locks import StoreLock, held_lock
from agentmem.errors import (
    AgentMemError,
    CorruptStoreError,
    InvalidArgumentError,
    StoreLockedError,
    UnsafePathError,
)
from agentmem.notes import KeyValueStore, check_key


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def mem(tmp_path: Path) -> agentmem.Memory:
    memory = agentmem.Memory(root=tmp_path / "root")
    yield memory
    memory.close()


def test_store_retrieve_list_search_delete(mem: agentmem.Memory, tmp_path: Path) -> None:
    first = mem.notes.store("build", "Run make build before the tests.")
    mem.notes.store("deploy-notes_v2", "Deploy with fly deploy; tests first.")
    assert mem.notes.retrieve("build") == "Run make build before the tests."
    assert mem.notes.retrieve("missing") is None
    assert mem.notes.list() == ["build", "deploy-notes_v2"]
    hits = mem.notes.search("tests first")
    assert [h["key"] for h in hits] == ["deploy-notes_v2", "build"]
    assert hits[0]["score"] > hits[1]["score"]
    again = mem.notes.store("build", "make build")
    assert again["created_at"] == first["created_at"]
    assert mem.notes.retrieve("build") == "make build"
    on_disk = json.loads((tmp_path / "root" / "memory" / "build.json").read_text())
    assert (on_disk["format"], on_disk["version"], on_disk["content"]) == (
        "agentmem.note",
        1,
        "make build",
    )
    assert mem.notes.delete("build") is True
    assert mem.notes.delete("build") is False
    assert mem.notes.list() == ["deploy-notes_v2"]


def test_unicode_keys_and_content(mem: agentmem.Memory) -> None:
    mem.notes.store("café-naïve", "über ✓")
    assert mem.notes.retrieve("café-naïve") == "über ✓"


ESCAPES = [
    "../outside",
    "..",
    ".",
    "a/../../b",
    "a/b",
    "a\\b",
    "..\\..\\x",
    "/etc/passwd",
    "C:evil",
    "C:\\Windows\\x",
    "nul\x00byte",
    "tab\tkey",
    "line\nbreak",
    "esc\x1b[31m",
    "",
    "k" * 129,
    "é" * 101,
    "CON",
    "nul",
    "com1.txt",
    "LPT9",
    "session_progress",
    ".hidden",
    "~home",
    "trailing.",
    "trailing ",
    "x..y",
]


@pytest.mark.parametrize("key", ESCAPES)
def test_escape_attempts_are_refused_and_write_nothing(
    mem: agentmem.Memory, tmp_path: Path, key: str
) -> None:
    before = _files(tmp_path)
    for call in (
        lambda: mem.notes.store(key, "pwned"),
        lambda: mem.notes.delete(key),
    ):
        with pytest.raises(UnsafePathError) as info:
            call()
        assert isinstance(info.value, AgentMemError)
    if key != "session_progress":  # readable on purpose (the trim checkpoint)
        with pytest.raises(UnsafePathError):
            mem.notes.retrieve(key)
    assert _files(tmp_path) == before


@pytest.mark.parametrize("key", [None, 3, b"bytes", ["a"]])
def test_non_string_keys_are_refused(mem: agentmem.Memory, key: object) -> None:
    with pytest.raises(UnsafePathError, match="must be a string"):
        mem.notes.store(key, "x")  # type: ignore[arg-type]


@settings(max_examples=scaled(100))
@given(key=st.text(min_size=0, max_size=40))
def test_any_accepted_key_lands_in_the_notes_directory(key: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        notes = KeyValueStore(base / "root" / "memory")
        try:
            check_key(key)
        except UnsafePathError:
            with pytest.raises(UnsafePathError):
                notes.store(key, "x")
            assert _files(base) == set()
            return
        notes.store(key, "x")
        assert _files(base) == {
            "root",
            "root/memory",
            f"root/memory/{key}.json",
            "root/locks",
            "root/locks/notes.lock",
        }
        assert notes.list() == [key]
        assert notes.retrieve(key) == "x"


def test_symlinked_note_or_directory_cannot_lead_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("{}")
    root = tmp_path / "root"
    mem = agentmem.Memory(root=root)
    (root / "memory").mkdir()
    (root / "memory" / "link.json").symlink_to(outside / "secret.json")
    with pytest.raises(UnsafePathError):
        mem.notes.store("link", "pwned")
    with pytest.raises(UnsafePathError):
        mem.notes.retrieve("link")
    assert (outside / "secret.json").read_text() == "{}"
    mem.close()
    # The notes directory itself a symlink out of the root.
    root2 = tmp_path / "root2"
    root2.mkdir()
    (root2 / "memory").symlink_to(outside, target_is_directory=True)
    mem2 = agentmem.Memory(root=root2)
    with pytest.raises(UnsafePathError):
        mem2.notes.store("fine", "pwned")
    assert sorted(os.listdir(outside)) == ["secret.json"]
    mem2.close()


def test_session_progress_is_readable(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "root")
    assert mem.notes.retrieve("session_progress") is None
    (tmp_path / "root" / "memory").mkdir()
    (tmp_path / "root" / "memory" / "session_progress.md").write_text("# Session progress\n")
    assert mem.notes.retrieve("session_progress") == "# Session progress\n"
    assert "session_progress" in mem.notes.list()
    assert mem.notes.search("progress")[0]["key"] == "session_progress"
    mem.close()


def test_corrupt_note_is_moved_aside_and_reported(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "root")
    mem.notes.store("good", "fine")
    bad = tmp_path / "root" / "memory" / "bad.json"
    bad.write_bytes(b"\xff not json")
    with pytest.raises(CorruptStoreError) as info:
        mem.notes.retrieve("bad")
    assert info.value.moved_to is not None
    assert info.value.moved_to.read_bytes() == b"\xff not json"
    assert mem.notes.moved_aside == [info.value.moved_to]
    assert mem.notes.list() == ["good"]
    mem.notes.store("bad", "rewritten")
    assert mem.notes.retrieve("bad") == "rewritten"
    assert info.value.moved_to.exists()
    mem.close()


def test_a_reader_never_moves_aside_a_note_a_writer_just_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = agentmem.Memory(root=tmp_path / "root")
    mem.notes.store("k", "good")
    real = Path.read_bytes
    calls = []

    def stale_first(self: Path) -> bytes:
        calls.append(self)
        return b"{torn" if len(calls) == 1 else real(self)

    monkeypatch.setattr(Path, "read_bytes", stale_first)
    assert mem.notes.retrieve("k") == "good"
    assert mem.notes.moved_aside == []
    assert len(calls) == 2
    monkeypatch.undo()
    mem.close()


def test_bad_content_and_query(mem: agentmem.Memory) -> None:
    with pytest.raises(InvalidArgumentError, match="content"):
        mem.notes.store("k", 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="query"):
        mem.notes.search(None)  # type: ignore[arg-type]
    assert mem.notes.search("!!!") == []


def test_notes_are_scrubbed(mem: agentmem.Memory, tmp_path: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    mem.notes.store("ci", f"GITHUB_TOKEN={token}")
    assert token not in (tmp_path / "root" / "memory" / "ci.json").read_text()
    assert mem.notes.retrieve("ci") == "GITHUB_TOKEN=[REDACTED:github_token]"


def test_custom_scrubber(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "r", scrub_secrets=lambda text: text.replace("x", "*"))
    mem.notes.store("k", "xyz")
    mem.ltm.add_discovery("xylophone fact")
    assert mem.notes.retrieve("k") == "*yz"
    assert mem.ltm.discoveries()[0].text == "*ylophone fact"
    mem.close()
    with pytest.raises(agentmem.ConfigurationError, match="scrub_secrets"):
        agentmem.Memory(root=tmp_path / "r", scrub_secrets="yes")  # type: ignore[arg-type]


def test_in_memory_store() -> None:
    notes = KeyValueStore(None)
    notes.store("a", "one")
    assert notes.retrieve("a") == "one"
    assert notes.list() == ["a"]
    assert notes.retrieve("session_progress") is None
    assert notes.delete("a") is True
    with pytest.raises(UnsafePathError):
        notes.store("../a", "x")


@pytest.mark.parametrize(
    "scrubber", [lambda text: 1 / 0, lambda text: None], ids=["raises", "returns-none"]
)
def test_a_failing_custom_scrubber_stores_nothing(tmp_path: Path, scrubber: object) -> None:
    mem = agentmem.Memory(root=tmp_path / "r", scrub_secrets=scrubber)  # type: ignore[arg-type]
    with pytest.raises(agentmem.ConfigurationError, match="scrub_secrets"):
        mem.notes.store("k", "v")
    with pytest.raises(agentmem.ConfigurationError, match="scrub_secrets"):
        mem.ltm.add_discovery("a fact")
    assert mem.notes.list() == []
    assert not (tmp_path / "r" / "ltm.json").exists()
    out = mem.tools.dispatch({"operation": "add_discovery", "fact": "a fact"})
    assert out["ok"] is False and "scrub_secrets" in out["error"]
    mem.close()


def test_the_real_trim_checkpoint_is_readable(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "r", token_counter=agentmem.HeuristicCounter())
    with mem.session(context_window=512) as s:
        for i in range(40):
            s.start_task(f"task {i}: " + "words " * 20)
            s.append({"role": "assistant", "content": "done " * 20})
            s.context()
    text = mem.notes.retrieve("session_progress")
    assert text is not None and text.startswith("# Session progress")
    assert "session_progress" in mem.notes.list()
    mem.close()


def test_store_lock_is_reentrant_within_its_object_and_excludes_others(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "x.lock"
    lock = StoreLock(path, what="things", timeout=0.2)
    assert not lock.held
    with lock():
        assert lock.held
        with lock():  # nested in the same object: no second acquire, no wait
            assert lock.held
        assert lock.held, "the inner block does not release the outer one"
        with (
            pytest.raises(StoreLockedError, match="things"),
            held_lock(path, what="things", timeout=0.05),
        ):
            pass
    assert not lock.held
    with held_lock(path, what="things", timeout=0.05):
        pass  # released
    in_memory = StoreLock(None, what="things")
    with in_memory():
        assert not in_memory.held
