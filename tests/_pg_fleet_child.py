"""A worker of tests/test_pg_fleet.py (run with ``sys.executable``; never collected).

Usage::

    python tests/_pg_fleet_child.py worker ROOT URI SESSION ACKS STOP
        Open the session (``Memory(root=ROOT, backend=URI).session(SESSION)``), retrying
        on StoreLockedError for up to :data:`OPEN_DEADLINE` seconds (a killed
        predecessor's lock dies with its connection), print "opened", then append
        :func:`message` after message until the file STOP exists, writing each
        message's index to ACKS once its append returned. A StorageError (the server
        crash-restarted) closes the session and opens it again, resuming at its length.

    python tests/_pg_fleet_child.py race ROOT URI SESSION
        Print "ready", wait for a line on stdin, open the session once and print "got"
        or "locked", then hold what it got until stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

OPEN_DEADLINE = 10.0


def message(worker: str, index: int) -> dict[str, Any]:
    """The message a worker appends at ``index``: a unique word ``<worker>m<index>``."""
    return {
        "role": "user" if index % 2 == 0 else "assistant",
        "content": f"{worker}m{index} fleet message {index} of {worker}: "
        + "run the tests again " * (index % 7),
    }


def _open(mem: Any, session_id: str) -> Any:
    from agentmem.errors import StorageError, StoreLockedError

    deadline = time.monotonic() + OPEN_DEADLINE
    while True:
        try:
            return mem.session(session_id=session_id)
        except (StoreLockedError, StorageError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def worker(root: str, uri: str, session_id: str, acks: str, stop: str) -> None:
    import agentmem
    from agentmem.errors import StorageError

    mem = agentmem.Memory(root=root, backend=uri, durability="full")
    session = _open(mem, session_id)
    print("opened", flush=True)
    ack = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    while not os.path.exists(stop):
        index = len(session.history)
        try:
            session.append(message(session_id, index))
        except StorageError:
            with contextlib.suppress(StorageError):
                session.close()
            session = _open(mem, session_id)
            continue
        os.write(ack, f"{index}\n".encode())
    session.close()
    mem.close()


def race(root: str, uri: str, session_id: str) -> None:
    import agentmem
    from agentmem.errors import StoreLockedError

    mem = agentmem.Memory(root=root, backend=uri)
    print("ready", flush=True)
    sys.stdin.readline()
    held = []
    try:
        held.append(mem.session(session_id=session_id))
    except StoreLockedError:
        print("locked", flush=True)
    else:
        print("got", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    if mode == "worker":
        worker(*args)
    elif mode == "race":
        race(*args)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
