"""YaRN side threads in a session: rows of the store's threads table, not state JSON.

A session's side threads (``s.yarn.archive(messages, thread_id)``) are appended to the
threads table, in the same transaction as the state, on each state save: a save costs
O(new messages), the state stays O(1) in the archive's size, and a resume reads them back
exactly. States written by earlier releases (side threads inside the state JSON, the
golden ``side-threads-state-v4.sqlite``) still resume exactly and move to the table on
the next save.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem import Memory
from agentmem.errors import StorageError
from agentmem.session_store.sql import SessionsSQL

GOLDEN = Path(__file__).resolve().parent / "golden"
REPO = Path(__file__).resolve().parent.parent
NAME = "side-threads-state-v4.sqlite"  # made by golden/make_golden_side_threads.py
CONTEXT = "side-threads-state-v4.context.json"  # its context() and threads, as saved
SESSION_ID = "side-threads"


def side_thread(tag: str, count: int) -> list[dict[str, object]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} step {i}: " + "x" * i}
        for i in range(count)
    ]


def _memory(root: Path) -> Memory:
    return Memory(root, working_dir=root.parent)


def _rows(root: Path, sid: str) -> list[tuple[str, int, bytes]]:
    conn = sqlite3.connect(root / "sessions.sqlite")
    try:
        return [
            (str(t), int(seq), bytes(body))
            for t, seq, body in conn.execute(
                "SELECT thread_id, seq, CAST(body AS BLOB) FROM threads WHERE session_id = ? "
                "ORDER BY thread_id, seq",
                (sid,),
            )
        ]
    finally:
        conn.close()


def _state(root: Path, sid: str) -> dict[str, Any]:
    conn = sqlite3.connect(root / "sessions.sqlite")
    try:
        (text,) = conn.execute("SELECT state FROM sessions WHERE id = ?", (sid,)).fetchone()
    finally:
        conn.close()
    state: dict[str, Any] = orjson.loads(text)
    return state


def _threads(session: Any) -> dict[str, list[dict[str, Any]]]:
    return {t: session.yarn.thread(t) for t in session.yarn.thread_ids()}


def _build(root: Path, sid: str = "s") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A session with a summary and side threads "b" then "a"; its context and threads."""
    with _memory(root) as memory:
        s = memory.session(sid, context_window=1_000)
        for i in range(10):
            s.append({"role": "user", "content": f"question {i} " + "word " * 40})
            s.append({"role": "assistant", "content": f"answer {i} " + "word " * 40})
            s.context()
        s.yarn.archive(side_thread("b", 4), "b")
        s.record_usage(10, 1)
        s.yarn.archive(side_thread("a", 3), "a")
        s.yarn.archive(side_thread("b2", 2), "b")
        context, threads = s.context(), _threads(s)
        s.close()
    return context, threads


def test_resume_with_side_threads_is_exact(tmp_path: Path) -> None:
    root = tmp_path / "root"
    context, threads = _build(root)
    assert list(threads) == ["main", "b", "a"]
    with _memory(root) as memory:
        s = memory.session("s")
        assert s.context() == context
        assert _threads(s) == threads
        assert list(_threads(s)) == ["main", "b", "a"]  # creation order, not ids' order


def test_side_threads_are_rows_of_the_threads_table_not_state(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _, threads = _build(root)
    rows = _rows(root, "s")
    stored = {t: [orjson.loads(b) for tt, _, b in rows if tt == t] for t in ("a", "b")}
    assert stored == {"a": threads["a"], "b": threads["b"]}
    yarn_part = _state(root, "s")["yarn"]
    assert "threads" not in yarn_part
    assert yarn_part["thread_order"] == ["b", "a"]


def test_state_size_does_not_grow_with_the_archive(tmp_path: Path) -> None:
    """The state saved every turn stays O(1) in the side threads' size (old code: O(archive))."""
    root = tmp_path / "root"
    sizes = []
    with _memory(root) as memory:
        s = memory.session("s")
        s.append({"role": "user", "content": "hi"})
        for n in (1, 200):
            s.yarn.archive([{"role": "user", "content": "y" * 1_000}] * n, "sub")
            s.record_usage(1, 1)
            sizes.append(len(orjson.dumps(_state(root, "s"))))
    assert sizes[0] == sizes[1]


def test_each_save_appends_only_the_new_messages(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with _memory(root) as memory:
        s = memory.session("s")
        s.yarn.archive(side_thread("x", 3), "x")
        s.record_usage(1, 1)
        first = _rows(root, "s")
        s.record_usage(1, 1)  # nothing new: nothing written
        assert _rows(root, "s") == first
        s.yarn.archive(side_thread("y", 2), "x")
        s.record_usage(1, 1)
        after = _rows(root, "s")
    assert after[:3] == first  # earlier rows untouched
    assert [seq for _, seq, _ in after] == [0, 1, 2, 3, 4]
    assert [orjson.loads(b) for _, _, b in after] == side_thread("x", 3) + side_thread("y", 2)


def test_export_lists_the_side_threads(tmp_path: Path) -> None:
    """The export's ``threads`` (read from the table) now holds them; the state no longer."""
    root = tmp_path / "root"
    _, threads = _build(root)
    with _memory(root) as memory:
        data = orjson.loads(memory.sessions.export("s", tmp_path / "out.json").read_bytes())
    assert {t: [m["content"] for m in ms] for t, ms in data["threads"].items()} == {
        t: [m["content"] for m in threads[t]] for t in ("a", "b")
    }


# ---------------------------------------------------------------- the golden (state JSON)


def _golden_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    shutil.copyfile(GOLDEN / NAME, root / "sessions.sqlite")
    return root


def test_golden_state_with_side_threads_resumes_exactly_then_migrates(tmp_path: Path) -> None:
    root = _golden_root(tmp_path)
    golden = orjson.loads((GOLDEN / CONTEXT).read_bytes())
    assert _rows(root, SESSION_ID) == []
    with _memory(root) as memory:
        s = memory.session(SESSION_ID)
        assert s.context() == golden["context"]
        assert _threads(s) == golden["threads"]
        s.record_usage(1, 1)  # the next save moves the threads to the table
    assert "threads" not in _state(root, SESSION_ID)["yarn"]
    rows = _rows(root, SESSION_ID)
    for tid in ("sub-a", "sub-b"):
        assert [orjson.loads(b) for t, _, b in rows if t == tid] == golden["threads"][tid]
    with _memory(root) as memory:
        s = memory.session(SESSION_ID)
        assert s.context() == golden["context"]
        assert _threads(s) == golden["threads"]
        assert list(_threads(s)) == ["main", "sub-b", "sub-a"]


def test_a_failed_save_writes_neither_threads_nor_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crash injection at the state write, after the thread rows went in: all rolls back."""
    root = _golden_root(tmp_path)
    golden = orjson.loads((GOLDEN / CONTEXT).read_bytes())
    with _memory(root) as memory:
        s = memory.session(SESSION_ID)
        before = _state(root, SESSION_ID)
        s.yarn.archive(side_thread("new", 2), "sub-a")

        def fail(self: SessionsSQL, *args: Any) -> bool:
            raise sqlite3.OperationalError("disk I/O error (injected)")

        with monkeypatch.context() as patch:
            patch.setattr(SessionsSQL, "save_state", fail)
            with pytest.raises(StorageError):
                s.record_usage(1, 1)
        assert _rows(root, SESSION_ID) == []
        assert _state(root, SESSION_ID) == before
        s.record_usage(1, 1)  # the retry writes every message once
        expected = _threads(s)
    assert expected["sub-a"] == golden["threads"]["sub-a"] + side_thread("new", 2)
    with _memory(root) as memory:
        assert _threads(memory.session(SESSION_ID)) == expected


_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from agentmem import Memory
    from agentmem.session_store.sql import SessionsSQL

    def side_thread(tag, count):
        return [{"role": "user", "content": f"{tag} {i}"} for i in range(count)]

    root, sid, step = sys.argv[1], sys.argv[2], sys.argv[3]
    memory = Memory(root, working_dir=os.path.dirname(root))
    s = memory.session(sid)
    s.yarn.archive(side_thread("late-a", 2), "sub-a")
    s.yarn.archive(side_thread("late-z", 2), "zz")
    real = getattr(SessionsSQL, step)

    def kill(self, *args):
        real(self, *args)  # the write happened (uncommitted): now die
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(SessionsSQL, step, kill)
    s.record_usage(1, 1)
    """
)


@pytest.mark.parametrize("step", ["insert_thread_rows", "save_state"])
def test_kill9_at_a_write_step_leaves_a_consistent_resume(tmp_path: Path, step: str) -> None:
    """kill -9 after the thread rows (or the state) were written, before the commit."""
    root = _golden_root(tmp_path)
    golden = orjson.loads((GOLDEN / CONTEXT).read_bytes())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), SESSION_ID, step],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode(errors="replace")
    with _memory(root) as memory:
        s = memory.session(SESSION_ID)
        assert s.context() == golden["context"]
        assert _threads(s) == golden["threads"]  # as before the killed save, nothing doubled
        s.record_usage(1, 1)
    with _memory(root) as memory:
        assert _threads(memory.session(SESSION_ID)) == golden["threads"]


# ---------------------------------------------------------------- any sequence of changes

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("archive"), st.sampled_from(["t1", "t0", "t2"]), st.integers(0, 3)),
        st.tuples(st.sampled_from(["save", "failed save", "reopen"]), st.none(), st.none()),
    ),
    max_size=12,
)


@settings(max_examples=scaled(25))
@given(ops=_OPS)
def test_any_archives_saves_and_reopens_come_back_exactly(ops: list[Any]) -> None:
    """Archive, save, fail a save, reopen, in any order: the threads come back as archived."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, _memory(Path(tmp) / "root") as memory:
        s = memory.session("p")
        model: dict[str, list[dict[str, Any]]] = {}
        for n, (op, tid, count) in enumerate(ops):
            if op == "archive":
                batch = side_thread(f"{n}", count)
                s.yarn.archive(batch, tid)
                model.setdefault(tid, []).extend(batch)  # an empty batch still makes the thread
            elif op == "save":
                s.record_usage(1, 1)
            elif op == "failed save":
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(SessionsSQL, "save_state", _fail)
                    with pytest.raises(StorageError):
                        s.record_usage(1, 1)
            else:
                s.close()
                s = memory.session("p")
            assert {t: m for t, m in _threads(s).items() if t != "main"} == model
            assert list(_threads(s))[1:] == list(model)
        s.close()
        rows = _rows(Path(tmp) / "root", "p")
    assert sorted((t, orjson.loads(b)["content"]) for t, _, b in rows) == sorted(
        (t, m["content"]) for t, ms in model.items() for m in ms
    )


def _fail(self: SessionsSQL, *args: Any) -> bool:
    raise sqlite3.OperationalError("disk I/O error (injected)")


def test_saves_from_several_threads_store_each_message_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with _memory(root) as memory:
        s = memory.session("c")
        barrier = threading.Barrier(4)

        def work(n: int) -> None:
            barrier.wait()
            for i in range(15):
                s.yarn.archive(side_thread(f"w{n}-{i}", 2), f"w{n % 2}")
                s.record_usage(1, 1)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        expected = _threads(s)
    assert sum(len(m) for t, m in expected.items() if t != "main") == 4 * 15 * 2
    assert len(_rows(root, "c")) == 4 * 15 * 2
    with _memory(root) as memory:
        assert _threads(memory.session("c")) == expected
