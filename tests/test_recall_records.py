"""SessionStore's recall reads return named records, decoded, not bare tuples."""

from __future__ import annotations

from pathlib import Path

from agentmem.session_store import SessionStore
from agentmem.session_store.recall_records import RecallRow, RecallStats


def test_recall_reads_are_named_records(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    sid = store.create(name="quartz notes").id
    store.writer(sid).on_append(
        [
            {"role": "user", "content": "where is the quartz clock"},
            {"role": "assistant", "content": "the quartz clock is upstairs"},
        ]
    )
    stats = store.recall_stats(["quartz", "nowhere"])
    assert isinstance(stats, RecallStats)
    assert (stats.docs, stats.messages, stats.tokens, stats.sessions) == ({"quartz": 2}, 2, 10, 1)
    rows = store.recall_rows('"quartz"', 10)
    assert rows and all(isinstance(row, RecallRow) for row in rows)
    by_seq = {row.seq: row for row in rows}
    assert by_seq[1].role == "assistant" and by_seq[1].text == "the quartz clock is upstairs"
    assert by_seq[0].session_id == sid and by_seq[0].session_name == "quartz notes"
    assert by_seq[0].length == 5 and by_seq[0].bm25 > 0
    assert by_seq[0].created_at <= by_seq[0].updated_at
    store.close()
