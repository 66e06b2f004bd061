"""The shared FTS5 SQL (agentmem._storage.fts) is, to the byte, what released databases hold.

SQLite keeps each CREATE statement's text in sqlite_master and the stores fingerprint
it, so the helper must reproduce the text the golden databases were written with.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from agentmem._storage.fts import fts_sync_triggers, fts_table

GOLDEN = Path(__file__).resolve().parent / "golden"


def _stored_sql(golden: Path, tmp_path: Path) -> dict[str, str]:
    # A copy: opening a WAL database, even read-only, leaves -shm/-wal files beside it.
    db = tmp_path / golden.name
    shutil.copyfile(golden, db)
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT name, sql FROM sqlite_master"))
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("db", "index", "content"),
    [
        ("sessions-v3.sqlite", "recall_fts", "recall_docs"),  # index rules 1 (migration 0003)
        ("semantic-v1.sqlite", "memories_fts", "memories"),
    ],
)
def test_the_shared_sql_is_the_released_text(
    db: str, index: str, content: str, tmp_path: Path
) -> None:
    stored = _stored_sql(GOLDEN / db, tmp_path)
    assert stored[index] == fts_table(index, content).strip()
    names = [f"{content}_ai", f"{content}_ad", f"{content}_au"]
    for name, sql in zip(names, fts_sync_triggers(index, content), strict=True):
        assert stored[name] == sql.strip()
