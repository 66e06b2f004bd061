"""Child process for the crash tests (run with ``sys.executable``; never collected by pytest).

Modes::

    python tests/_kill9_child.py append <db> <session_id>
        Open the store (durability "full"), then append messages to the
        session forever through a SessionWriter. After each append returns,
        print the acknowledged seq numbers, one per line, flushed. Before
        opening the store print "start", after opening it "ready".

    python tests/_kill9_child.py hold-lock <db> <session_id>
        Take the session's lock, print "locked", then sleep until killed.

    python tests/_kill9_child.py facade <root> <session_id>
        Open ``agentmem.Memory(root)`` and the session through the facade
        (a 2,000-token window, so trims and state saves happen often), then
        loop: start a task every 8 messages, append the next message with
        ``s.append``, build ``s.context()``; print each acknowledged history
        length after ``s.append`` returns.

    python tests/_kill9_child.py churn <db> <seed>
        Open the store (durability "normal"; print "start" before and "ready"
        after, so kills also land inside the format-3 migration), then loop
        over random writer changes: create sessions, append, replace,
        rewrite a tail, delete a session. Prints nothing else; the parent
        checks the recall index against the messages after the kill.

The parent kills the child with SIGKILL and checks what survived. The
message stored at each seq is a pure function of the seq
(:func:`expected_message`), so the parent can verify every body exactly.
"""

from __future__ import annotations

import os
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


def _churn(db: str, seed: str) -> None:
    import random

    from agentmem.session_store import SessionStore

    rng = random.Random(int(seed))
    words = ["zebra", "quartz", "violin", "mango", "harbor", "copper", "nebula", "tulip"]

    def message(role: str) -> dict[str, Any]:
        return {"role": role, "content": " ".join(rng.choices(words, k=rng.randint(1, 6)))}

    print("start", flush=True)
    store = SessionStore(db, durability="normal")
    print("ready", flush=True)
    live = [info.id for info in store.list()]
    while True:
        op = rng.random()
        if not live or op < 0.1:
            live.append(store.create(name=rng.choice(words)).id)
            continue
        sid = rng.choice(live)
        writer = store.writer(sid)
        count = store.info(sid).message_count
        if op < 0.6:
            writer.on_append([message(rng.choice(["user", "assistant"])) for _ in range(3)])
        elif op < 0.75 and count:
            writer.on_replace(rng.randrange(count), message("user"))
        elif op < 0.9:
            writer.on_rewrite(rng.randint(0, count), [message("assistant")])
        elif len(live) > 1:
            store.delete(sid)
            live.remove(sid)


def _hold_lock(db: str, session_id: str) -> None:
    from agentmem.session_store import SessionStore

    store = SessionStore(db)
    lock = store.lock(session_id)
    print("locked" if lock.locked else "not locked", flush=True)
    while True:
        time.sleep(60)


def facade_message(k: int) -> dict[str, Any]:
    """The k-th message the facade child appends (after its task's user turn)."""
    if k % 3 == 0:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{k}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "f{k}.py"}}'},
                }
            ],
        }
    if k % 3 == 1:
        return {"role": "tool", "tool_call_id": f"call_{k - 1}", "content": f"result {k} " * 40}
    return {"role": "assistant", "content": f"step {k} done " * 10}


def _facade(root: str, session_id: str) -> None:
    import agentmem

    print("start", flush=True)
    os.makedirs(root, exist_ok=True)  # the working directory must exist
    mem = agentmem.Memory(root=root, working_dir=root)
    s = mem.session(session_id, context_window=2_000)
    k = sum(1 for m in s.history if m["role"] != "user")
    print(f"ready {len(s.history)}", flush=True)
    while True:
        if k % 8 == 0 and not s.history.pending_tool_calls():
            # (a user turn would drop a dangling tool call by design; keep the log simple)
            s.start_task(f"task number {k // 8}: keep going with the refactoring please")
            sys.stdout.write(f"{len(s.history)}\n")
        s.append(facade_message(k))
        sys.stdout.write(f"{len(s.history)}\n")
        sys.stdout.flush()
        s.context()
        k += 1


def main(argv: list[str]) -> None:
    mode, db, session_id = argv
    if mode == "append":
        _append(db, session_id)
    elif mode == "hold-lock":
        _hold_lock(db, session_id)
    elif mode == "facade":
        _facade(db, session_id)
    elif mode == "churn":
        _churn(db, session_id)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
