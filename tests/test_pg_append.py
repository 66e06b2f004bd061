"""An append on PostgreSQL (agentmem.session_store.pg_recall's write path), against a real server.

The numbers and index terms of an append travel as one space-joined text parameter
each, split by the server. Whatever the messages (several at once, tool results after
an assistant's calls, no index term at all, NUL characters, non-ASCII letters):

* the messages load back as appended, every row with its checksum;
* the index rows, postings and term counts are exactly what the full check
  (``check_recall_index``, an independent recomputation from the messages) expects;
* the totals count every message and token.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem.session_store import SessionStore
from agentmem.session_store.pg_recall import _spaced_terms, stored_text
from agentmem.session_store.postings_terms import terms as index_terms
from agentmem.session_store.records import row_crc

pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")

_WORDS = st.sampled_from(
    ["zebra", "Crossing", "the", "café", "naïve", "ÜBER", "x", "42", "a_b", "日本語", "!!", ""]
)
_TEXT = st.lists(st.one_of(_WORDS, st.text(max_size=6)), max_size=12).map(" ".join)


@st.composite
def _batch(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A batch of messages for one append: plain ones, or an assistant's tool call and
    its result (whose index text takes the call's name and arguments)."""
    out: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            role = draw(st.sampled_from(["user", "assistant", "system"]))
            out.append({"role": role, "content": draw(_TEXT)})
        else:
            call = {"name": "grep", "arguments": json.dumps({"q": draw(_TEXT)})}
            out.append(
                {
                    "role": "assistant",
                    "content": draw(_TEXT),
                    "tool_calls": [{"id": f"c{n}", "type": "function", "function": call}],
                }
            )
            out.append({"role": "tool", "tool_call_id": f"c{n}", "content": draw(_TEXT)})
    return out


def _totals(store: SessionStore) -> tuple[int, int]:
    with store._engine.read("totals") as sql:
        row = sql.conn.execute(
            "SELECT (SELECT count(*) FROM recall_docs), "
            "(SELECT COALESCE(SUM(length), 0) FROM recall_docs)"
        ).fetchone()
    stats = store.recall_stats([])
    assert (stats.messages, stats.tokens) == (int(row[0]), int(row[1]))
    return stats.messages, stats.tokens


@settings(
    max_examples=scaled(15),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(_batch(), min_size=1, max_size=4))
def test_appended_rows_load_back_and_pass_the_full_check(
    pg_dsn: str, batches: list[list[dict[str, Any]]]
) -> None:
    store = SessionStore.postgres(pg_dsn)
    try:
        before = _totals(store)
        sid = store.create().id
        writer = store.writer(sid)
        for batch in batches:
            writer.on_append(batch)
        # Every row checksummed (before a load, which would set a NULL one).
        with store._engine.read("rows") as sql:
            rows = sql.message_rows(sid)
        assert [crc for _, _, crc in rows] == [row_crc(seq, body) for seq, body, _ in rows]
        record = store.load(sid)
        appended = [m for batch in batches for m in batch]
        assert [dict(m) for m in record.messages] == appended
        assert record.quarantined == [] and record.checksum_failed == []
        assert store.check_recall_index(repair=False) == []
        last: Any = None
        tokens = 0
        for message in appended:
            body = json.dumps(message)
            tokens += len(index_terms(stored_text(message["role"], body, last)))
            if message["role"] == "assistant":
                last = message
        assert _totals(store) == (before[0] + len(appended), before[1] + tokens)
    finally:
        store.close()


@pytest.mark.parametrize("terms", [["a b"], ["ok", ""], [""], ["x", "y z"]])
def test_terms_that_cannot_be_split_back_are_refused(terms: list[str]) -> None:
    with pytest.raises(ValueError, match="cannot be empty or hold a space"):
        _spaced_terms(terms)


def test_terms_join_to_what_splits_back() -> None:
    assert _spaced_terms([]) == ""
    assert _spaced_terms(["zebra", "caf", "日本語"]).split(" ") == ["zebra", "caf", "日本語"]
