"""Regressions found by the outside probe of issue 9's stores (probe/probe9.py).

Each test failed on the code before its fix: bad input that was silently
dropped, hand-edited topic files skipped without a word, and rows of
``semantic.sqlite`` damaged in place that made a whole scope unreadable.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import Memory
from agentmem.errors import CorruptStoreError, InvalidArgumentError, MemoryNotFoundError
from agentmem.semantic import LocalMemoryClient
from agentmem.topics import TopicStore


def texts(records: Any) -> set[str]:
    return {r.memory for r in records}


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("content", [5, 2.5, {"text": "hi"}, b"bytes", ("a", "tuple")])
def test_a_user_turn_with_content_of_a_wrong_type_is_refused_not_dropped(content: Any) -> None:
    client = LocalMemoryClient(None)
    client.add("kept", user_id="u")
    messages = [{"role": "user", "content": "fine words"}, {"role": "user", "content": content}]
    with pytest.raises(InvalidArgumentError, match=r"messages\[1\]\['content'\]"):
        client.add(messages, user_id="u", infer=False)
    assert texts(client.get_all(user_id="u")) == {"kept"}  # nothing of the call was stored


def test_user_turns_with_none_or_parts_content_are_still_accepted() -> None:
    client = LocalMemoryClient(None)
    events = client.add(
        [
            {"role": "user", "content": None},
            {"role": "user", "content": [{"type": "text", "text": "parts work"}]},
            {"role": "assistant", "content": 5},  # not the user's words: ignored as before
        ],
        user_id="u",
        infer=False,
    )
    assert [e["memory"] for e in events] == ["parts work"]


# --------------------------------------------------------------------------- hand-edited topics


def hand_edited(tmp_path: Path) -> tuple[TopicStore, Path]:
    store = TopicStore(tmp_path / "root" / "memories")
    store.write("good", "a good topic\n")
    directory = tmp_path / "root" / "memories"
    (directory / "adir.md").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE SECRET\n")
    (directory / "link.md").symlink_to(outside)
    (directory / "..hidden.md").write_text("unsafe name\n")
    (directory / "badutf8.md").write_bytes(b"caf\xe9 text\n")
    return store, directory


def test_entries_named_like_topics_that_are_not_topic_files_are_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, directory = hand_edited(tmp_path)
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    assert {i.topic for i in store.list()} == {"good", "badutf8"}
    for name in ("adir.md", "link.md", "..hidden.md"):
        assert any(str(directory / name) in p for p in store.problems), name
        assert any(str(directory / name) in r.getMessage() for r in caplog.records), name
        assert (directory / name).exists() or (directory / name).is_symlink()  # left in place
    count = len(store.problems)
    store.list()
    assert len(store.problems) == count  # reported once, not on every listing


def test_a_topic_that_is_not_utf8_is_read_with_replacements_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, directory = hand_edited(tmp_path)
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    assert store.read("badutf8") == "caf\ufffd text\n"
    assert (directory / "badutf8.md").read_bytes() == b"caf\xe9 text\n"  # never rewritten
    assert any("badutf8.md" in p and "not UTF-8" in p for p in store.problems)
    assert any("badutf8.md" in r.getMessage() for r in caplog.records)
    assert store.read("good") == "a good topic\n"
    assert not any("good.md" in p for p in store.problems)


def test_the_next_sessions_prompt_reports_what_it_left_out(tmp_path: Path) -> None:
    mem = Memory(root=tmp_path / "root", working_dir=tmp_path)
    mem.topics.write("good", "a good topic\n")
    (tmp_path / "root" / "memories" / "adir.md").mkdir()
    (tmp_path / "outside.txt").write_text("OUTSIDE SECRET\n")
    (tmp_path / "root" / "memories" / "link.md").symlink_to(tmp_path / "outside.txt")
    with mem.session(name="next") as s:
        assert "a good topic" in s.topics_prompt
        assert "OUTSIDE" not in s.topics_prompt
    assert any("adir.md" in p for p in mem.topics.problems)
    assert any("link.md" in p and "symlink" in p for p in mem.topics.problems)


# --------------------------------------------------------------------------- rows damaged in place


def damaged_store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A semantic.sqlite with four memories, two of them then damaged in place."""
    with LocalMemoryClient(tmp_path, durability="normal") as client:
        ids = {
            text: client.add(text, user_id="u", infer=False)[0]["id"]
            for text in ("apple pie", "banana bread", "cherry tart", "damson jam")
        }
    path = tmp_path / "semantic.sqlite"
    conn = sqlite3.connect(path)
    with conn:  # what a flipped byte does: SQLite cannot notice, the row still parses
        conn.execute(
            "UPDATE memories SET hash = CAST(X'3966ff35' AS TEXT) WHERE id = ?",
            (ids["banana bread"],),
        )
        conn.execute(
            "UPDATE memories SET metadata = CAST('{\"a\": 1' AS TEXT) WHERE id = ?",
            (ids["cherry tart"],),
        )
    conn.close()
    return path, ids


def test_a_row_damaged_in_place_is_left_out_and_reported_not_the_whole_scope(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, ids = damaged_store(tmp_path)
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    client = LocalMemoryClient(tmp_path)
    assert client.recovery is None
    assert texts(client.get_all(user_id="u")) == {"apple pie", "damson jam"}
    assert {r.memory for r in client.search("apple banana cherry damson", user_id="u")} == {
        "apple pie",
        "damson jam",
    }
    assert len(client.problems) == 2
    assert any("'hash' is not UTF-8" in p for p in client.problems)
    assert any("'metadata'" in p for p in client.problems)
    assert sum("left out" in r.getMessage() for r in caplog.records) == 2  # logged once each
    client.get_all(user_id="u")
    assert len(client.problems) == 2
    client.add("elder wine", user_id="u", infer=False)  # the store stays writable
    assert texts(client.get_all(user_id="u")) == {"apple pie", "damson jam", "elder wine"}
    client.close()
    raw = sqlite3.connect(path)
    kept = {str(r[0]) for r in raw.execute("SELECT id FROM memories")}
    raw.close()
    assert {ids["banana bread"], ids["cherry tart"]} <= kept  # never removed on its own


def test_a_damaged_row_can_still_be_forgotten_by_id(tmp_path: Path) -> None:
    _, ids = damaged_store(tmp_path)
    with LocalMemoryClient(tmp_path) as client:
        with pytest.raises(MemoryNotFoundError):
            client.get(ids["cherry tart"])  # unreadable: not handed out as if whole
        client.delete(ids["cherry tart"])
        with pytest.raises(MemoryNotFoundError):
            client.delete(ids["cherry tart"])
        history = client.history(ids["cherry tart"])
        assert [(h.event, h.old_memory, h.new_memory) for h in history] == [
            ("ADD", None, "cherry tart"),
            ("DELETE", None, None),  # the damaged row's text is not copied into history
        ]


def test_a_damaged_full_text_index_is_rebuilt_and_the_store_stays_writable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalMemoryClient(tmp_path, durability="normal") as client:
        for i in range(200):
            client.add(f"memory {i} about subject {i % 9} " + "word " * (i % 40), user_id="u")
    path = tmp_path / "semantic.sqlite"
    conn = sqlite3.connect(path)
    # What a byte flipped inside one of the FTS5 index's blocks does: the b-tree is sound,
    # so PRAGMA quick_check (and so recovery on open) does not notice.
    rowid, block = conn.execute(
        "SELECT id, block FROM memories_fts_data ORDER BY length(block) DESC LIMIT 1"
    ).fetchone()
    damaged = bytearray(block)
    for offset in range(4, len(damaged), 3):
        damaged[offset] ^= 0xFF
    with conn:
        conn.execute("UPDATE memories_fts_data SET block = ? WHERE id = ?", (bytes(damaged), rowid))
    assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    conn.close()
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    client = LocalMemoryClient(tmp_path)
    assert client.recovery is None  # open does not notice: FTS5 pages are opaque to it
    with pytest.raises(CorruptStoreError, match="rebuilt from the memories"):
        client.search("memory subject word", user_id="u", limit=1000)  # meets the damage
    client.add("a fresh fact about subject 3", user_id="u", infer=False)  # writable again
    assert any("full-text index" in p and "rebuilt" in p for p in client.problems)
    assert any("rebuilt" in r.getMessage() for r in caplog.records)
    assert len(client.get_all(user_id="u", limit=1000)) == 201
    found = {r.memory for r in client.search("subject 3", user_id="u", limit=1000)}
    assert "a fresh fact about subject 3" in found and len(found) > 20
    client.close()


# --------------------------------------------------------------------------- recovery on open


@pytest.mark.parametrize("damage", [b"\xbb", b"Z"])
def test_rows_still_readable_in_a_file_moved_aside_are_recovered_row_by_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: bytes
) -> None:
    with LocalMemoryClient(tmp_path, durability="normal") as client:
        added = {
            client.add(f"fact {i} about {i % 5}", user_id=f"u{i % 2}", metadata={"i": i})[0]["id"]
            for i in range(120)
        }
        gone = client.add("a fact forgotten later", user_id="u0")[0]["id"]
        client.delete(gone)
    path = tmp_path / "semantic.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    at = data.index(b"memories_by_update ON memories")  # the schema's SQL text, on page 1
    data[at + 3 : at + 4] = damage  # SQLite still parses it; the schema check does not pass
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    with LocalMemoryClient(tmp_path) as client:
        assert client.recovery is not None and client.recovered_from is not None
        assert client.recovered_from.read_bytes() == bytes(data)  # moved aside untouched
        assert client.recovery.salvaged
        assert "120 memories" in client.recovery.outcome
        records = client.get_all(user_id="u0", limit=1000) + client.get_all(
            user_id="u1", limit=1000
        )
        assert {r.id for r in records} == added
        assert all(
            r.memory == f"fact {r.metadata['i']} about {r.metadata['i'] % 5}" for r in records
        )
        assert len(client.search("about 3", user_id="u1", limit=1000)) == 12  # index rebuilt
        assert [h.event for h in client.history(gone)] == ["ADD", "DELETE"]
        client.add("fact 1 about 1", user_id="u1")  # still deduplicated
        assert len(client.get_all(user_id="u1", limit=1000)) == 60
    assert any("row by row" in r.getMessage() for r in caplog.records)
    with LocalMemoryClient(tmp_path) as again:
        assert again.recovery is None


def test_damage_met_after_open_is_checked_and_recovered_on_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalMemoryClient(tmp_path, durability="normal") as client:
        added = {client.add(f"fact {i}", user_id="u")[0]["id"] for i in range(300)}
    path = tmp_path / "semantic.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE name = 'memories_by_update'"
    ).fetchone()
    conn.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size : root * page_size] = bytes(page_size)  # a torn/zeroed page
    path.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING, logger="agentmem.storage")
    client = LocalMemoryClient(tmp_path)
    assert client.recovery is None  # open reads page 1, not every page
    with pytest.raises(CorruptStoreError, match="reopen"):
        client.get_all(user_id="u", limit=1000)
    client.close()
    with LocalMemoryClient(tmp_path) as reopened:
        assert reopened.recovery is not None
        assert reopened.recovered_from is not None
        assert reopened.recovered_from.read_bytes() == bytes(data)  # kept as found
        assert {r.id for r in reopened.get_all(user_id="u", limit=1000)} == added
        assert len(reopened.search("fact", user_id="u", limit=1000)) == 300
    assert not any(p.name.startswith("@damaged") for p in (tmp_path / "locks").iterdir())
    with LocalMemoryClient(tmp_path) as again:
        assert again.recovery is None
        assert len(again.get_all(user_id="u", limit=1000)) == 300


def test_an_index_damaged_beyond_a_rebuild_is_recovered_on_the_next_open(tmp_path: Path) -> None:
    with LocalMemoryClient(tmp_path, durability="normal") as client:
        added = {
            client.add(f"fact {i} about subject {i % 9}", user_id="u")[0]["id"] for i in range(200)
        }
    conn = sqlite3.connect(tmp_path / "semantic.sqlite")
    (block,) = conn.execute("SELECT block FROM memories_fts_data WHERE id = 10").fetchone()
    damaged = bytes(b ^ 0xFF for b in block)  # the index's structure record
    with conn:
        conn.execute("UPDATE memories_fts_data SET block = ? WHERE id = 10", (damaged,))
    conn.close()
    client = LocalMemoryClient(tmp_path)
    with pytest.raises(CorruptStoreError, match="reopen"):
        client.search("subject", user_id="u")
    assert any("could not be rebuilt" in p for p in client.problems)
    client.close()
    with LocalMemoryClient(tmp_path) as reopened:
        assert reopened.recovery is not None
        assert {r.id for r in reopened.get_all(user_id="u", limit=1000)} == added
        assert len(reopened.search("subject 4", user_id="u", limit=1000)) == 200
        reopened.add("a new fact", user_id="u")


def test_row_salvage_does_not_drop_rows_when_the_fresh_database_already_has_some(
    tmp_path: Path,
) -> None:
    # Another process may add to the fresh database while this one copies the old rows
    # in: the copy must not collide with the new rows' keys (it kept the old docids).
    from agentmem.semantic import _store

    old_root, new_root = tmp_path / "old", tmp_path / "new"
    with LocalMemoryClient(old_root, durability="normal") as old:
        kept = {old.add(f"old fact {i}", user_id="u")[0]["id"] for i in range(5)}
        old.add("shared fact", user_id="u")
    with LocalMemoryClient(new_root, durability="normal") as new:
        fresh = {new.add(f"new fact {i}", user_id="u")[0]["id"] for i in range(3)}
        new.add("Shared  FACT", user_id="u")  # the same fact, added meanwhile
    conn = sqlite3.connect(new_root / "semantic.sqlite", isolation_level=None)
    copied, entries, unreadable = _store._copy_readable(old_root / "semantic.sqlite", conn)
    conn.close()
    assert (copied, entries, unreadable) == (5, 6, 0)  # the shared fact is not stored twice
    with LocalMemoryClient(new_root) as new:
        records = new.get_all(user_id="u", limit=100)
        assert kept | fresh <= {r.id for r in records}
        assert len(records) == 9
        assert [h.event for r in records for h in new.history(r.id)] == ["ADD"] * 9


_DAMAGEABLE = ("id", "user_id", "text", "hash", "metadata", "created_at", "updated_at")


@settings(max_examples=scaled(25), deadline=None)
@given(
    count=st.integers(1, 12),
    damage=st.dictionaries(
        st.integers(0, 11),
        st.tuples(st.sampled_from(_DAMAGEABLE), st.binary(min_size=1, max_size=3)),
        max_size=5,
    ),
)
def test_property_exactly_the_damaged_rows_are_left_out_and_each_is_reported(
    count: int, damage: dict[int, tuple[str, bytes]]
) -> None:
    """Any set of rows, any of them damaged in any text column by bytes that are not UTF-8:
    get_all lists exactly the others, and problems names each damaged row once."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with LocalMemoryClient(root, durability="normal") as client:
            ids = [client.add(f"fact {i}", user_id="u")[0]["id"] for i in range(count)]
        damaged = {i: spec for i, spec in damage.items() if i < count}
        conn = sqlite3.connect(root / "semantic.sqlite")
        with conn:
            for i, (column, junk) in damaged.items():
                bad = b"\xff" + bytes([i]) + junk  # 0xFF never occurs in UTF-8; distinct
                conn.execute(
                    f"UPDATE memories SET {column} = CAST(? AS TEXT) WHERE docid = ?",
                    (bad, i + 1),
                )
        conn.close()
        with LocalMemoryClient(root) as client:
            got = {r.memory for r in client.get_all(user_id="u", limit=100)}
            visible = {f"fact {i}" for i in range(count) if i not in damaged}
            if all(column != "user_id" for column, _ in damaged.values()):
                assert got == visible
            else:  # a damaged user_id can no longer be found by scope: never shown as whole
                assert got <= visible
            client.get_all(user_id="u", limit=100)
            rows = [p for p in client.problems if "memory row" in p]
            assert len(rows) == len(set(rows))  # once each
            for i, (column, _) in damaged.items():
                if column != "user_id":
                    assert any(f"memory row {i + 1}:" in p and column in p for p in rows)
            for i in range(count):
                if i not in damaged:
                    assert client.get(ids[i]).memory == f"fact {i}"


def test_salvage_reads_past_a_damaged_last_page_of_the_table(tmp_path: Path) -> None:
    with LocalMemoryClient(tmp_path, durability="normal") as client:
        for i in range(400):
            client.add(f"fact number {i} " + "padding " * 10, user_id="u")
    path = tmp_path / "semantic.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'memories'").fetchone()
    conn.close()
    data = bytearray(path.read_bytes())
    header = (root - 1) * page_size
    assert data[header] == 0x05  # an interior table page: the table spans several leaves
    last_leaf = int.from_bytes(data[header + 8 : header + 12], "big")  # its rightmost child
    data[(last_leaf - 1) * page_size : last_leaf * page_size] = bytes(page_size)
    path.write_bytes(bytes(data))
    readable = 0
    raw = sqlite3.connect(path)
    for docid in range(1, 401):
        with contextlib.suppress(sqlite3.DatabaseError):
            readable += len(
                raw.execute("SELECT 1 FROM memories WHERE docid = ?", (docid,)).fetchall()
            )
    raw.close()
    assert 0 < readable < 400
    client = LocalMemoryClient(tmp_path)
    with pytest.raises(CorruptStoreError, match="reopen"):
        client.get_all(user_id="u", limit=1000)
    client.close()
    with LocalMemoryClient(tmp_path) as reopened:
        assert reopened.recovery is not None
        assert len(reopened.get_all(user_id="u", limit=1000)) == readable
