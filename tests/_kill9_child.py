"""Child process for the crash tests (run with ``sys.executable``; never collected by pytest).

Modes::

    python tests/_kill9_child.py append <db> <session_id>
        Open the store (durability "full"), then append messages to the
        session forever through a SessionWriter. After each append returns,
        print the acknowledged seq numbers, one per line, flushed. Before
        opening the store print "start", after opening it "ready".

    python tests/_kill9_child.py hold-lock <db> <session_id>
        Take the session's lock, print "locked", then sleep until killed.

The parent kills the child with SIGKILL and checks what survived. The
message stored at each seq is a pure function of the seq
(:func:`expected_message`), so the parent can verify every body exactly.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def expected_message(seq: int) -> dict[str, Any]:
    """The message the child appends at ``seq``: sizes vary from a few bytes to ~10 KB."""
    return {
        "role": "user" if seq % 2 == 0 else "assistant",
        "content": f"message {seq}: " + "lorem ipsum dolor " * ((seq * 37) % 600),
        "task_id": seq // 10,
    }


def _append(db: str, session_id: str) -> None:
    from agentmem.session_store import SessionStore

    print("start", flush=True)
    store = SessionStore(db, durability="full")
    writer = store.writer(session_id)
    seq = store.info(session_id).message_count
    print(f"ready {seq}", flush=True)
    while True:
        batch = 2 if seq % 5 == 0 else 1
        writer.on_append([expected_message(seq + i) for i in range(batch)])
        # Acknowledged: the append returned, so it is on disk.
        sys.stdout.write("".join(f"{seq + i}\n" for i in range(batch)))
        sys.stdout.flush()
        seq += batch


def _hold_lock(db: str, session_id: str) -> None:
    from agentmem.session_store import SessionStore

    store = SessionStore(db)
    lock = store.lock(session_id)
    print("locked" if lock.locked else "not locked", flush=True)
    while True:
        time.sleep(60)


def main(argv: list[str]) -> None:
    mode, db, session_id = argv
    if mode == "append":
        _append(db, session_id)
    elif mode == "hold-lock":
        _hold_lock(db, session_id)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
