"""The one FTS5 index shape agentmem's SQLite stores use: its tokenizer, its table, its triggers.

Two stores keep a full-text index: the sessions database (``recall_fts`` over
``recall_docs``, :mod:`agentmem.session_store.recall_index`) and the semantic
memory (``memories_fts`` over ``memories``, :mod:`agentmem.semantic._schema`).
Both are *external-content* FTS5 tables over a ``text`` column keyed by an
integer ``docid``, with the same tokenizer, and the semantic store keeps its
index with the same three triggers the recall index had in its first release.
This module writes that SQL once.

The statements are returned with the exact text (whitespace included) the
stores wrote before this module existed: SQLite keeps a ``CREATE`` statement's
text in ``sqlite_master``, each store records a fingerprint of that text
(:func:`agentmem._storage.sqlite.record_schema`), and released migrations must
never change. ``tests/test_storage_fts.py`` compares it with the golden databases'
stored text.

:data:`TOKENIZER` is also what :mod:`agentmem.recall` re-implements in Python
to re-score the index's candidates with the very terms the index holds.
"""

from __future__ import annotations

from typing import Final

__all__ = ["TOKENIZER", "fts_sync_triggers", "fts_table"]

TOKENIZER: Final = "porter unicode61 remove_diacritics 2"
"""Porter stemming over unicode61, diacritics folded."""


def fts_table(name: str, content: str) -> str:
    """``CREATE VIRTUAL TABLE name USING fts5`` over ``content.text``, keyed by ``docid``."""
    return f"""
    CREATE VIRTUAL TABLE {name} USING fts5 (
        text, content = '{content}', content_rowid = 'docid',
        tokenize = '{TOKENIZER}'
    )
    """


def fts_sync_triggers(name: str, content: str) -> tuple[str, str, str]:
    """The three triggers that keep index ``name`` equal to ``content``'s ``text`` column.

    ``<content>_ai``, ``<content>_ad`` and ``<content>_au`` (an update of ``text``):
    each change of a row changes the index in the same statement, so in the same
    transaction.
    """
    return (
        f"""
    CREATE TRIGGER {content}_ai AFTER INSERT ON {content} BEGIN
        INSERT INTO {name} (rowid, text) VALUES (new.docid, new.text);
    END
    """,
        f"""
    CREATE TRIGGER {content}_ad AFTER DELETE ON {content} BEGIN
        INSERT INTO {name} ({name}, rowid, text) VALUES ('delete', old.docid, old.text);
    END
    """,
        f"""
    CREATE TRIGGER {content}_au AFTER UPDATE OF text ON {content} BEGIN
        INSERT INTO {name} ({name}, rowid, text) VALUES ('delete', old.docid, old.text);
        INSERT INTO {name} (rowid, text) VALUES (new.docid, new.text);
    END
    """,
    )
