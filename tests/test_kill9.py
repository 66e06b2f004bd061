"""kill -9 at random instants: every acknowledged append survives and the store stays readable.

A child process (``tests/_kill9_child.py``) opens a store with durability
"full" and appends to one session in a loop, printing each seq once the
append has returned. The parent kills it with SIGKILL after a random delay
(seeded; 5-60 ms), sometimes measured from the moment the child starts
opening the store (so kills land inside open and migration), usually from
the moment it is ready (so they land inside appends and commits). Each run
reopens the same store and continues the same session. Afterwards the
store must open without recovery, pass ``PRAGMA integrity_check``, hold
every acknowledged seq with its exact body, and have contiguous seqs.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from _kill9_child import expected_message, facade_message
from provider_rules import openai_violations

import agentmem
from agentmem.session_store import SessionStore

CHILD = Path(__file__).with_name("_kill9_child.py")
KILLS = 36
SEED = 20240501

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL"),
]


def _run_once(
    db: Path, session_id: str, delay: float, *, early: bool, mode: str = "append"
) -> list[int]:
    """Start the child, kill it ``delay`` seconds after its start/ready line; return acked seqs."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), mode, str(db), session_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if first != b"start\n":
            proc.kill()
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"child did not start: {first!r} {err.decode(errors='replace')}")
        if not early:
            ready = proc.stdout.readline()
            if not ready.startswith(b"ready"):
                proc.kill()
                _, err = proc.communicate(timeout=10)
                pytest.fail(f"child did not open the store: {ready!r} {err.decode()}")
        # Sleep without touching the child; it keeps appending meanwhile.
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            pass
        else:
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"child exited by itself ({proc.returncode}): {err.decode()}")
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, err.decode(errors="replace")
    acked = []
    for line in out.split(b"\n")[:-1]:  # the last piece may be a line cut off by the kill
        if line.isdigit():
            acked.append(int(line))
    return acked


def test_kill9_never_loses_an_acknowledged_append(tmp_path: Path) -> None:
    db = tmp_path / "sessions.sqlite"
    with SessionStore(db) as store:
        session_id = store.create(name="kill -9").id
    rng = random.Random(SEED)
    acknowledged: set[int] = set()
    for run in range(KILLS):
        delay = rng.uniform(0.005, 0.060)
        acknowledged.update(_run_once(db, session_id, delay, early=run % 4 == 0))

    assert len(acknowledged) > KILLS, "the children should have appended something"
    with SessionStore(db) as store:
        assert store.recovered_from is None
        record = store.load(session_id)
    assert record.quarantined == []
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        seqs = [row[0] for row in conn.execute("SELECT seq FROM messages ORDER BY seq")]
    finally:
        conn.close()
    assert seqs == list(range(len(seqs)))
    assert max(acknowledged) < len(record.messages)
    for seq, message in enumerate(record.messages):
        assert message == expected_message(seq), f"seq {seq} differs"
    assert not list(tmp_path.glob("*.corrupt-*"))


FACADE_KILLS = 16


def test_kill9_through_the_facade(tmp_path: Path) -> None:
    """Kill an agent loop (append, start_task, context with trims) at random instants."""
    root = tmp_path / "mem"
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        session = mem.session(name="kill -9 facade", context_window=2_000)
        session_id = session.id
        session.close()
    rng = random.Random(SEED + 1)
    acknowledged = 0
    for run in range(FACADE_KILLS):
        delay = rng.uniform(0.02, 0.15)
        acked = _run_once(root, session_id, delay, early=run % 5 == 0, mode="facade")
        acknowledged = max([acknowledged, *acked])
    assert acknowledged > FACADE_KILLS

    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        assert mem.sessions.recovered_from is None
        s = mem.session(session_id)
        history = list(s.history)
        assert len(history) >= acknowledged
        k = 0
        for message in history:
            if message["role"] == "user":
                assert message["content"].startswith("task number")
                continue
            expected = agentmem.normalize_message(facade_message(k))[0]
            assert {key: message[key] for key in expected} == expected, f"message {k} differs"
            k += 1
        payload = s.context()
        assert openai_violations(payload) == []
        assert s.window.start <= len(s.history)
