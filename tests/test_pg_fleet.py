"""An agent fleet on one PostgreSQL memory (issue 15's "Judged by"), against a real server.

Four worker processes append to their own sessions of one ``Memory(backend=...)``; two
of them are killed (SIGKILL) at random instants and started again; the server is
crash-restarted once (``pg_ctl restart -m immediate``) mid-run; two processes race for
one session; six processes add long-term memory entries and notes at once. Then:

* nothing acknowledged is lost or reordered: each session holds exactly the messages
  its worker appended, in order, and every index a worker acknowledged (written to its
  file after ``append`` returned) is among them;
* each killed worker's session opened again (the child retries StoreLockedError up to
  a deadline of 10 s, and exits non-zero past it);
* recall finds acknowledged messages, and the recall index matches the messages;
* of the two racers exactly one got the session;
* the six LTM and note writers lost nothing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from _pg_fleet_child import message
from pg import PgCluster, child_env

import agentmem

psycopg = pytest.importorskip("psycopg", reason="pip install 'agentmem[postgres]'")

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")

CHILD = Path(__file__).with_name("_pg_fleet_child.py")
DOCUMENTS_CHILD = Path(__file__).with_name("_documents_writer_child.py")
SEED = 1511
WORKERS = ("w0", "w1", "w2", "w3")
KILLED = ("w1", "w2")


def _uri(dsn: str) -> str:
    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )


def _said(child: subprocess.Popen[str], line: str) -> None:
    assert child.stdout is not None
    got = child.stdout.readline().strip()
    if got != line:
        child.kill()
        _, err = child.communicate(timeout=30)
        pytest.fail(f"child said {got!r}, expected {line!r}: {err}")


def _acks(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _wait_for_acks(path: Path, more_than: int, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while len(_acks(path)) <= more_than:
        assert time.monotonic() < deadline, f"{path.name}: no progress"
        time.sleep(0.02)


def test_a_fleet_survives_kills_and_a_server_crash(pg_cluster: PgCluster, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    uri = _uri(pg_cluster.dsn)
    root, stop = tmp_path / "root", tmp_path / "stop"
    with agentmem.Memory(root=root, backend=uri) as mem:  # the schema, once
        for name in (*WORKERS, "contested"):
            mem.sessions.create(session_id=name, name=name)
    acks = {w: tmp_path / f"{w}.acks" for w in WORKERS}
    workers = {w: _spawn("worker", str(root), uri, w, str(acks[w]), str(stop)) for w in WORKERS}
    racers: list[subprocess.Popen[str]] = []
    writers: list[subprocess.Popen[bytes]] = []
    try:
        for child in workers.values():
            _said(child, "opened")
        # Two kills at random instants, each worker started again at once.
        for name in KILLED:
            _wait_for_acks(acks[name], rng.randrange(3, 15))
            time.sleep(rng.uniform(0.0, 0.2))
            workers[name].send_signal(signal.SIGKILL)
            workers[name].communicate(timeout=30)
            workers[name] = _spawn("worker", str(root), uri, name, str(acks[name]), str(stop))
            _said(workers[name], "opened")  # within the child's 10 s deadline
        # The server crash-restarts while everyone appends.
        before = {w: len(_acks(acks[w])) for w in WORKERS}
        time.sleep(rng.uniform(0.05, 0.3))
        pg_cluster.restart_immediate()
        for name in WORKERS:
            _wait_for_acks(acks[name], before[name] + 3)  # every worker carries on
        # Two processes race for one session; six write LTM entries and notes at once.
        racers = [_spawn("race", str(root), uri, "contested") for _ in range(2)]
        for racer in racers:
            _said(racer, "ready")
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        said = []
        for racer in racers:
            assert racer.stdout is not None
            said.append(racer.stdout.readline().strip())
        assert sorted(said) == ["got", "locked"]
        go = tmp_path / "go"
        writers = [
            subprocess.Popen(
                [sys.executable, str(DOCUMENTS_CHILD), str(root), uri, str(w), "3", str(go)],
                env=child_env(),
            )
            for w in range(6)
        ]
        go.touch()
        assert [p.wait(timeout=120) for p in writers] == [0] * 6
        stop.touch()
        for name, child in workers.items():
            _, err = child.communicate(timeout=60)
            assert child.returncode == 0, f"{name}: {err}"
    finally:
        stop.touch()
        for racer in racers:  # the one holding "contested" lets it go when stdin closes
            racer.communicate(timeout=30)
        for child in [*workers.values(), *writers]:
            if child.poll() is None:
                child.kill()
            child.communicate(timeout=30)

    with agentmem.Memory(root=root, backend=uri) as mem:
        for name in WORKERS:
            stored = [(m["role"], m["content"]) for m in mem.sessions.load(name).messages]
            wanted = [message(name, i) for i in range(len(stored))]
            assert stored == [(m["role"], m["content"]) for m in wanted], name
            acked = _acks(acks[name])
            assert acked == sorted(set(acked)), f"{name}: acknowledged twice or out of order"
            assert acked and acked[-1] < len(stored), f"{name}: an acknowledged append is lost"
            for index in {acked[0], acked[len(acked) // 2], acked[-1]}:
                hits = mem.recall(f"{name}m{index}", max_results=1)
                assert [(h.session_id, h.index) for h in hits] == [(name, index)]
        assert mem.sessions.check_recall_index(repair=False) == []
        expected = {f"w{w}-{i}" for w in range(6) for i in range(3)}
        facts = {e.text for e in mem.ltm.discoveries()}
        assert facts == {f"fact {k.replace('-', '-n')} from a worker" for k in expected}
        assert set(mem.notes.list()) == expected
        assert [p.applications for p in mem.ltm.patterns()] == [18, 18]
    assert os.path.exists(stop)
