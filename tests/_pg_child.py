"""Child process for the PostgreSQL tests (run with ``sys.executable``; never collected).

Modes (``dsn`` is a database's DSN)::

    python tests/_pg_child.py hold <dsn> <session_id>
        Open the store, take the session's lock, print "held", sleep until killed.

    python tests/_pg_child.py race <dsn> <session_id>
        Open the store, print "ready", wait for a line on stdin, try the lock once,
        print "got" or "locked", then hold what it got until stdin closes.

    python tests/_pg_child.py append <dsn> <session_id>
        Open the store, take the lock, print "ready", then append message after message
        (:func:`expected_message`), printing each seq once its append returned.

    python tests/_pg_child.py migrate <dsn>
        Wait for a line on stdin, then run :data:`RACE_MIGRATIONS` (the first sleeps
        inside its transaction, so racing migrators overlap) and print what it applied.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from agentmem._storage.postgres import Migration

RACE_FORMAT = "agentmem.test-race"
RACE_MIGRATIONS = (
    Migration(
        "0001_log",
        (
            "CREATE TABLE race_log (name TEXT NOT NULL)",
            "INSERT INTO race_log VALUES ('0001_log')",
            "SELECT pg_sleep(0.3)",
        ),
    ),
    Migration("0002_more", ("INSERT INTO race_log VALUES ('0002_more')",)),
)


def expected_message(seq: int) -> dict[str, Any]:
    """The message appended at ``seq``: sizes from a few bytes to ~5 KB."""
    return {
        "role": "user" if seq % 2 == 0 else "assistant",
        "content": f"message {seq}: " + "50% ? lorem ipsum " * ((seq * 37) % 300),
    }


def main(mode: str, dsn: str, *rest: str) -> None:
    from agentmem._storage.postgres import PgDatabase, migrate
    from agentmem.errors import StoreLockedError
    from agentmem.session_store import SessionStore

    if mode == "migrate":
        database = PgDatabase(dsn)
        sys.stdin.readline()
        applied = migrate(
            database, format_name=RACE_FORMAT, format_version=2, migrations=RACE_MIGRATIONS
        )
        print("applied " + ",".join(applied), flush=True)
        return
    session_id = rest[0]
    store = SessionStore.postgres(dsn)
    held = []  # the locks taken: a lock object that is collected is released
    if mode == "hold":
        held.append(store.lock(session_id))
        print("held", flush=True)
        time.sleep(3600)
    elif mode == "race":
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            held.append(store.lock(session_id))
        except StoreLockedError:
            print("locked", flush=True)
        else:
            print("got", flush=True)
        sys.stdin.read()  # hold it (or not) until the parent is done
    elif mode == "append":
        held.append(store.lock(session_id))
        writer = store.writer(session_id)
        seq = store.info(session_id).message_count
        print("ready", flush=True)
        while True:
            writer.on_append([expected_message(seq)])
            print(seq, flush=True)
            seq += 1
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
