"""Semantic memory on both engines: SQLite (``semantic.sqlite``) and PostgreSQL.

The round trips run once per engine (the ``make`` fixture); a state machine drives
both engines with the same calls and compares every answer; then what only
PostgreSQL has to prove: six processes adding at once, a server crash-restart in the
middle of a call, a newer schema refused, the term index kept with the rows, and the
pgvector path. Without a server, the PostgreSQL cases skip with one line
(tests/pg.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from pg import PgCluster, child_env
from profiles import scaled

from agentmem import Memory
from agentmem._storage.postgres import PgDatabase, advisory_key
from agentmem.errors import (
    ConfigurationError,
    FormatVersionError,
    InvalidArgumentError,
    MemoryNotFoundError,
    StorageError,
)
from agentmem.recall._porter import terms
from agentmem.semantic import LocalMemoryClient, SemanticMemoryExtension
from agentmem.semantic import _pg as pg_engine
from agentmem.testing import ScriptedLLM

try:
    import psycopg
except ImportError:  # the PostgreSQL cases skip (tests/pg.py); the SQLite ones still run
    psycopg = None

CHILD = Path(__file__).parent / "_semantic_pg_child.py"

Make = Callable[..., LocalMemoryClient]


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def reply(data: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": json.dumps(data)}


class AxisEmbedder:
    """``alpha``, ``beta`` and ``car``/``automobile`` are axes; a text with none of them
    gets the zero vector."""

    def embed(self, texts: Any) -> list[list[float]]:
        return [
            [
                float("alpha" in t),
                float("beta" in t),
                float("car" in t or "automobile" in t) * 0.5,
            ]
            for t in texts
        ]


@pytest.fixture(params=["sqlite", "postgresql"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    """Clients on one engine: ``semantic.sqlite`` under tmp_path, or a fresh database."""
    backend = None if request.param == "sqlite" else request.getfixturevalue("pg_dsn")
    clients: list[LocalMemoryClient] = []

    def factory(**kwargs: Any) -> LocalMemoryClient:
        kwargs.setdefault("embedder", None)
        client = LocalMemoryClient(tmp_path, backend=backend, **kwargs)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        client.close()


def texts(records: list[Any]) -> set[str]:
    return {r.memory for r in records}


# --------------------------------------------------------------------------- round trips


def test_add_dedupe_get_search_delete_history(make: Make) -> None:
    client = make(clock=Clock())
    [added] = client.add("I prefer tabs over spaces", user_id="u", metadata={"k": "v"})
    assert added["event"] == "ADD"
    again = client.add("  i PREFER tabs   over spaces ", user_id="u")
    assert again == [{"id": added["id"], "memory": "I prefer tabs over spaces", "event": "NOOP"}]
    client.add("Running the tests every morning", user_id="u")
    record = client.get(added["id"])
    assert (record.memory, record.metadata, record.user_id) == (
        "I prefer tabs over spaces",
        {"k": "v"},
        "u",
    )
    # Stems, case and accents match as FTS5 matches them, on both engines.
    assert [h.memory for h in client.search("runs TEST", user_id="u")] == [
        "Running the tests every morning"
    ]
    client.add("Le café de Zoë est noir", user_id="u")
    assert [h.score for h in client.search("cafe zoe", user_id="u")] == [1.0]
    assert [h.score for h in client.search("tabs morning", user_id="u")] == [0.5, 0.5]
    assert [h.memory for h in client.get_all(user_id="u")] == [
        "Le café de Zoë est noir",
        "Running the tests every morning",
        "I prefer tabs over spaces",
    ]
    client.delete(added["id"])
    with pytest.raises(MemoryNotFoundError):
        client.get(added["id"])
    with pytest.raises(MemoryNotFoundError):
        client.delete(added["id"])
    assert client.search("tabs", user_id="u") == []
    assert [(h.event, h.old_memory, h.new_memory) for h in client.history(added["id"])] == [
        ("ADD", None, "I prefer tabs over spaces"),
        ("DELETE", "I prefer tabs over spaces", None),
    ]
    with pytest.raises(MemoryNotFoundError):
        client.history("no-such-id")


def test_scopes_write_exactly_and_read_by_the_ids_given(make: Make) -> None:
    client = make()
    client.add("plain fact", user_id="u")
    client.add("agent fact", user_id="u", agent_id="a")
    client.add("run fact", user_id="u", agent_id="a", run_id="r")
    client.add("other user fact", user_id="v")
    assert texts(client.get_all(user_id="u")) == {"plain fact", "agent fact", "run fact"}
    assert texts(client.get_all(user_id="u", agent_id="a")) == {"agent fact", "run fact"}
    assert texts(client.search("fact", user_id="u", run_id="r")) == {"run fact"}
    # The same words in another scope are another memory.
    assert client.add("plain fact", user_id="u", agent_id="a")[0]["event"] == "ADD"
    assert client.delete_all(user_id="u", agent_id="a") == 3
    assert texts(client.get_all(user_id="u")) == {"plain fact"}
    assert texts(client.get_all(user_id="v")) == {"other user fact"}


def test_filters_apply_before_the_limit(make: Make) -> None:
    client = make()
    for i in range(60):
        client.add(f"shared word number {i}", user_id="u", metadata={"n": i % 7})
    hits = client.search("shared word", user_id="u", filters={"n": 3}, limit=20)
    assert sorted(int(h.memory.rsplit(" ", 1)[1]) for h in hits) == list(range(3, 60, 7))


def test_llm_update_noop_add_delete_and_merge(make: Make) -> None:
    client = make(clock=Clock())
    ids = {
        t: client.add(t, user_id="u", infer=False)[0]["id"]
        for t in ("Prefers dark mode", "Works at Acme", "Lives in Lyon")
    }
    client.llm = ScriptedLLM(
        [
            reply(
                {"facts": ["Prefers light mode", "Works at Acme", "Has a cat", "Moved from Lyon"]}
            ),
            reply(
                {
                    "memory": [
                        {"event": "UPDATE", "id": "0", "text": "Prefers light mode"},
                        {"event": "NOOP", "id": "1"},
                        {"event": "ADD", "text": "Has a cat"},
                        {"event": "DELETE", "id": "2"},
                        {"event": "DELETE", "id": "9"},
                    ]
                }
            ),
        ]
    )
    events = client.add("light mode, acme, a cat, I moved", user_id="u")
    aliases = {e["id"] for e in events[:2]} | {events[3]["id"]}
    assert [e["event"] for e in events] == ["UPDATE", "NOOP", "ADD", "DELETE", "REJECTED"]
    assert aliases <= set(ids.values())
    updated = events[0]["id"]
    assert [h.event for h in client.history(updated)] == ["ADD", "UPDATE"]
    assert client.search("light", user_id="u")[0].id == updated
    assert client.search("dark", user_id="u") == []  # the index followed the update
    # An update to a text stored as another memory merges into it.
    client.llm = ScriptedLLM(
        [
            reply({"facts": ["Has a cat named Tom"]}),
            reply({"memory": [{"event": "UPDATE", "id": "0", "text": "has a cat"}]}),
        ]
    )
    client.add("a cat named Tom", user_id="u")
    assert len([m for m in client.get_all(user_id="u") if "cat" in m.memory]) == 1


def test_vectors_blend_and_zero_vectors_score_zero(make: Make) -> None:
    client = make(embedder=AxisEmbedder())
    client.add("alpha tea", user_id="u")
    client.add("green tea", user_id="u")  # the zero vector
    client.add("I drive a car", user_id="u")
    scores = {h.memory: h.score for h in client.search("beta tea", user_id="u")}
    assert scores == {"alpha tea": 0.25, "green tea": 0.25}
    assert [(h.memory, h.score) for h in client.search("automobile", user_id="u")] == [
        ("I drive a car", 0.5)
    ]
    plain = client.search("tea", user_id="u")  # a zero query vector: lexical alone
    assert sorted((h.memory, h.score) for h in plain) == [("alpha tea", 1.0), ("green tea", 1.0)]


def test_threads_sharing_one_client_lose_nothing(make: Make) -> None:
    client = make()

    def add(worker: int) -> None:
        for i in range(10):
            client.add(f"thread{worker} fact{i}", user_id="u")
            client.add(f"Shared fact {i}", user_id="u")

    threads = [threading.Thread(target=add, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stored = texts(client.get_all(user_id="u", limit=1000))
    assert stored == {f"thread{w} fact{i}" for w in range(4) for i in range(10)} | {
        f"Shared fact {i}" for i in range(10)
    }


def test_a_reopened_client_resumes_memories_and_history(make: Make) -> None:
    first = make(embedder=AxisEmbedder())
    [event] = first.add("alpha fact to keep", user_id="u", metadata={"source": "chat"})
    first.close()
    with pytest.raises(StorageError, match="closed"):
        first.get_all(user_id="u")
    second = make(embedder=AxisEmbedder())
    assert second.get(event["id"]).metadata == {"source": "chat"}
    assert [h.memory for h in second.search("alpha", user_id="u")] == ["alpha fact to keep"]
    assert second.add("alpha fact to keep", user_id="u")[0]["event"] == "NOOP"
    assert [h.event for h in second.history(event["id"])] == ["ADD"]


def test_a_session_with_the_extension_resumes_its_payload(make: Make, tmp_path: Path) -> None:
    client = make()
    for fact in ("I prefer tabs over spaces.", "I use vim for python files."):
        client.add(fact, user_id="martin", infer=False)
    root = tmp_path / ".agentmem"

    def extension() -> SemanticMemoryExtension:
        return SemanticMemoryExtension(client=client, user_id="martin", resident_persona=True)

    with Memory(root=root, working_dir=tmp_path, durability="normal") as mem:
        s = mem.session(extensions=[extension()])
        sid = s.id
        for text in ("Which indent do I prefer?", "What editor for python files?"):
            s.start_task(text)
            s.append({"role": "assistant", "content": "noted"})
        before = s.context()
        assert sum("<memory-context" in str(m["content"]) for m in before) == 2
        s.close()
    client.add("I moved to Lisbon and prefer spaces now.", user_id="martin", infer=False)
    with Memory(root=root, working_dir=tmp_path, durability="normal") as mem:
        resumed = mem.session(sid, extensions=[extension()])
        assert resumed.context() == before
        resumed.close()


# --------------------------------------------------------------------------- both engines agree


WORDS = [
    "run",
    "running",
    "runs",
    "café",
    "cafe",
    "test",
    "tests",
    "deploy",
    "alpha",
    "beta",
    "foo",
    "bar",
    "foo_bar",
    "bar_foo_run",
]
SCOPES = [("u1", None, None), ("u1", "a", None), ("u2", None, None)]


class SameAnswers(RuleBasedStateMachine):
    """The same calls on SQLite and on PostgreSQL give the same answers (ids aside)."""

    dsn = ""

    @initialize()
    def start(self) -> None:
        self.clients = [
            LocalMemoryClient(None, embedder=AxisEmbedder(), clock=Clock()),
            LocalMemoryClient(None, backend=self.dsn, embedder=AxisEmbedder(), clock=Clock()),
        ]
        for client in self.clients[1:]:
            client.delete_all(user_id="u1")
            client.delete_all(user_id="u2")
        self.ids: list[list[str]] = []  # the same memory's id on each engine

    def teardown(self) -> None:
        for client in self.clients:
            client.close()

    @rule(
        scope=st.sampled_from(SCOPES),
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    )
    def add(self, scope: tuple[str, str | None, str | None], words: list[str]) -> None:
        text = " ".join(words)
        out = [
            c.add(text, user_id=scope[0], agent_id=scope[1], run_id=scope[2]) for c in self.clients
        ]
        assert [[(e["event"], e["memory"]) for e in events] for events in out[1:]] == [
            [(e["event"], e["memory"]) for e in out[0]]
        ]
        if out[0][0]["event"] == "ADD":
            self.ids.append([events[0]["id"] for events in out])

    @rule(index=st.integers(0, 30))
    def delete(self, index: int) -> None:
        if self.ids:
            pair = self.ids.pop(index % len(self.ids))
            for client, memory_id in zip(self.clients, pair, strict=True):
                client.delete(memory_id)

    @invariant()
    def searches_agree(self) -> None:
        for query in (
            "run tests",
            "café",
            "beta test",
            "alpha running deploy",
            "the",
            "foo_bar",
            "bar_foo tests",
            "foo_run",
        ):
            for scope in SCOPES:
                answers = [
                    [
                        (h.memory, h.score)
                        for h in c.search(query, user_id=scope[0], agent_id=scope[1], limit=50)
                    ]
                    for c in self.clients
                ]
                assert answers[1] == answers[0], query


def test_both_engines_give_the_same_answers(pg_dsn: str) -> None:
    SameAnswers.dsn = pg_dsn
    run = SameAnswers.TestCase
    run.settings = settings(
        settings.default, max_examples=scaled(15), stateful_step_count=15, deadline=None
    )
    run().runTest()


# --------------------------------------------------------------------------- PostgreSQL only


def test_six_processes_adding_at_once_lose_nothing(pg_dsn: str, tmp_path: Path) -> None:
    workers, count = 6, 8
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), pg_dsn, str(w), str(workers), str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        for w in range(workers)
    ]
    acknowledged: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        acknowledged.extend(e for line in out.decode().splitlines() for e in json.loads(line))
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as client:
        stored = {r.id: r.memory for r in client.get_all(user_id="team", limit=1000)}
        assert len(stored) == workers * count + count
        for w in range(workers):
            for i in range(count):
                assert f"worker{w} statement{i} zz{w}x{i}" in stored.values()
        # Each round's shared statement was added once; every other add of it was a NOOP
        # naming that memory.
        for i in range(count):
            shared = [e for e in acknowledged if e["memory"].lower().endswith(f" day {i}")]
            assert Counter(e["event"] for e in shared) == {"ADD": 1, "NOOP": workers - 1}
            assert len({e["id"] for e in shared}) == 1
        for event in acknowledged:
            assert stored[event["id"]] == event["memory"]
            assert [h.event for h in client.history(event["id"])] == ["ADD"]


def test_six_processes_updating_and_adding_the_same_facts_keep_one_of_each(
    pg_dsn: str, tmp_path: Path
) -> None:
    workers, count = 6, 6
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as client:
        seeds = {
            client.add(f"tool{i}x alpha{i}y old{i}z", user_id="team")[0]["id"]: i
            for i in range(count)
        }
    go = (str(tmp_path / "go"), "update")
    procs = [
        subprocess.Popen(
            [*(sys.executable, str(CHILD), pg_dsn, str(w), str(workers), str(count)), *go],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        for w in range(workers)
    ]
    events: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        events.extend(e for line in out.decode().splitlines() for e in json.loads(line))
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as client:
        stored = client.get_all(user_id="team", limit=1000)
        for i in range(count):
            new = f"tool{i}x alpha{i}y new{i}z"
            assert [r.memory.lower() for r in stored].count(new) == 1, i
        for record in stored:
            # Every memory's history ends with the text it holds.
            last = client.history(record.id)[-1]
            assert last.event in ("ADD", "UPDATE") and last.new_memory == record.memory
        for memory_id in seeds:
            trail = [h.event for h in client.history(memory_id)]
            assert trail in (["ADD"], ["ADD", "UPDATE"], ["ADD", "DELETE"]), trail
    assert {e["event"] for e in events} <= {"ADD", "UPDATE", "DELETE", "NOOP", "REJECTED"}
    # An update is refused only when another process removed its memory since it was
    # shown to the model (merged into the same new fact), as on SQLite.
    assert all(
        e["reason"] == "the memory no longer exists" for e in events if e["event"] == "REJECTED"
    )
    assert sum(e["event"] in ("ADD", "UPDATE") for e in events) == count  # one per new fact


def _waiting_for_the_write_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_server_crash_mid_call_raises_storage_error_and_loses_nothing_acknowledged(
    pg_cluster: PgCluster,
) -> None:
    client = LocalMemoryClient(None, backend=pg_cluster.dsn, embedder=None)
    try:
        kept = [client.add(f"acknowledged fact {i}", user_id="u")[0] for i in range(5)]
        # Another session holds the store's write lock, so the next add waits inside its
        # transaction: the crash lands in the middle of that call.
        holder = psycopg.connect(pg_cluster.dsn, autocommit=True)
        holder.execute("SET search_path TO agentmem")
        holder.execute(
            "SELECT pg_advisory_lock(%s)", (advisory_key(pg_engine.LOCK_NAMESPACE, "agentmem"),)
        )
        failure: list[BaseException] = []

        def add_during_the_crash() -> None:
            try:
                client.add("the fact in flight", user_id="u")
            except BaseException as exc:
                failure.append(exc)

        writer = threading.Thread(target=add_during_the_crash)
        writer.start()
        for _ in range(1000):
            if _waiting_for_the_write_lock(pg_cluster.dsn):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the add never waited for the write lock")
        pg_cluster.restart_immediate()
        writer.join(60)
        holder.close()
        assert len(failure) == 1 and isinstance(failure[0], StorageError), failure
        # The next call reconnects; nothing acknowledged was lost, nothing half-written.
        assert client.add("after the restart", user_id="u")[0]["event"] == "ADD"
        stored = {r.memory for r in client.get_all(user_id="u")}
        assert stored == {e["memory"] for e in kept} | {"after the restart"}
        assert client.search("flight", user_id="u") == []
    finally:
        client.close()


def test_a_newer_schema_is_refused(pg_dsn: str) -> None:
    LocalMemoryClient(None, backend=pg_dsn, embedder=None).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE agentmem.agentmem_meta SET value = '2' "
            "WHERE format = 'agentmem.semantic' AND key = 'version'"
        )
    with pytest.raises(FormatVersionError, match="newer"):
        LocalMemoryClient(None, backend=pg_dsn, embedder=None)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE agentmem.agentmem_meta SET value = '1' "
            "WHERE format = 'agentmem.semantic' AND key = 'version'"
        )
        conn.execute(
            "INSERT INTO agentmem.agentmem_migrations (format, name) "
            "VALUES ('agentmem.semantic', '0002_from_the_future')"
        )
    with pytest.raises(FormatVersionError, match="0002_from_the_future"):
        LocalMemoryClient(None, backend=pg_dsn, embedder=None)


def test_the_term_index_and_its_counts_follow_every_change(pg_dsn: str) -> None:
    client = LocalMemoryClient(None, backend=pg_dsn, embedder=None, clock=Clock())
    ids = [client.add(f"Running fact {i} with café", user_id="u")[0]["id"] for i in range(4)]
    client.llm = ScriptedLLM(
        [
            reply({"facts": ["Walking fact"]}),
            reply({"memory": [{"event": "UPDATE", "id": "0", "text": "Walking fact now"}]}),
        ]
    )
    client.add("walking fact", user_id="u")
    client.delete(ids[1])
    client.delete_all(user_id="u", agent_id="nobody")
    client.close()
    assert _consistent(pg_dsn) == 3


def _consistent(dsn: str) -> int:
    """Check that every memory has its terms, its length, its ADD in the history, and
    that BM25's counts are right; the number of memories."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET search_path TO agentmem")
        rows = conn.execute("SELECT docid, id, text, terms FROM semantic_memories").fetchall()
        stats = conn.execute("SELECT memories, terms FROM semantic_stats").fetchall()
        indexed = Counter(
            (int(d), str(t), int(n))
            for d, t, n in conn.execute("SELECT docid, term, tf FROM semantic_terms").fetchall()
        )
        added = {
            str(memory_id)
            for (memory_id,) in conn.execute(
                "SELECT memory_id FROM semantic_history WHERE event = 'ADD'"
            ).fetchall()
        }
    want = Counter(
        (int(docid), term, count)
        for docid, _, text, _ in rows
        for term, count in Counter(terms(text)).items()
    )
    assert indexed == want
    assert all(length == len(terms(text)) for _, _, text, length in rows)
    assert {str(memory_id) for _, memory_id, _, _ in rows} <= added
    assert stats == [(len(rows), sum(len(terms(text)) for _, _, text, _ in rows))]
    return len(rows)


def test_kill9_of_a_writer_leaves_every_acknowledged_add_and_a_consistent_index(
    pg_dsn: str, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), pg_dsn, "0", "1", "10000", str(tmp_path / "go")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    )
    assert proc.stdout is not None
    acknowledged = [json.loads(proc.stdout.readline()) for _ in range(40)]
    proc.kill()  # SIGKILL, somewhere in an add
    out, _ = proc.communicate(timeout=30)
    acknowledged += [json.loads(line) for line in out.decode().splitlines()]
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as client:
        stored = {r.id: r.memory for r in client.get_all(user_id="team", limit=100_000)}
    for events in acknowledged:
        for event in events:
            assert stored[event["id"]] == event["memory"]
    assert _consistent(pg_dsn) == len(stored) >= len({e["id"] for es in acknowledged for e in es})


def test_a_memory_on_postgresql_gives_the_client_its_database(pg_dsn: str, tmp_path: Path) -> None:
    memory = SimpleNamespace(
        root=tmp_path, incognito=False, llm=None, backend=SimpleNamespace(dsn=pg_dsn)
    )
    with LocalMemoryClient(memory, embedder=None) as client:
        client.add("stored on the server", user_id="u")
        assert client.path is None
    assert not (tmp_path / "semantic.sqlite").exists()
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as again:
        assert texts(again.get_all(user_id="u")) == {"stored on the server"}
    incognito = SimpleNamespace(root=tmp_path, incognito=True, llm=None, backend=memory.backend)
    with LocalMemoryClient(incognito, embedder=None) as hidden:
        hidden.add("never written", user_id="u")
    with LocalMemoryClient(incognito, embedder=None, backend=pg_dsn) as hidden:
        hidden.add("never written either", user_id="u")
        assert hidden.path is None
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as again:
        assert texts(again.get_all(user_id="u")) == {"stored on the server"}


def test_a_nul_character_is_refused_by_name_and_nothing_is_stored(pg_dsn: str) -> None:
    # PostgreSQL's text cannot hold U+0000 (SQLite's can): a clear error, nothing written.
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as client:
        client.add("kept", user_id="u")
        with pytest.raises(InvalidArgumentError, match="NUL"):
            client.add(
                [{"role": "user", "content": "first"}, {"role": "user", "content": "a\x00b"}],
                user_id="u",
            )
        assert texts(client.get_all(user_id="u")) == {"kept"}


@pytest.mark.parametrize("bad", [3, "", "   "])
def test_a_bad_backend_is_named(bad: object, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="backend"):
        LocalMemoryClient(tmp_path, backend=bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- pgvector

# The pgvector extension is not installable on the machines these tests were written
# on; its detection runs against the real server, and the server-side scoring runs
# against a stand-in with pgvector's interface (a ``vector`` type read from
# '[1,2,3]', ``<=>`` the cosine distance with NaN for a zero vector, ``vector_dims``),
# in ``public`` as a DBA's ``CREATE EXTENSION vector`` would put it: off agentmem's path.
STAND_IN = (
    "CREATE DOMAIN public.vector AS text",
    """CREATE FUNCTION public.vector_values(text) RETURNS float8[] LANGUAGE sql IMMUTABLE
       AS $$ SELECT string_to_array(btrim($1, '[]'), ',')::float8[] $$""",
    """CREATE FUNCTION public.vector_dims(public.vector) RETURNS int LANGUAGE sql IMMUTABLE
       AS $$ SELECT cardinality(public.vector_values($1)) $$""",
    """CREATE FUNCTION public.cosine_distance(text, text) RETURNS float8 LANGUAGE sql IMMUTABLE
       AS $$ SELECT CASE WHEN na = 0 OR nb = 0 THEN 'NaN'::float8 ELSE 1 - dot / sqrt(na * nb) END
             FROM (SELECT sum(a * b) AS dot, sum(a * a) AS na, sum(b * b) AS nb
                   FROM unnest(public.vector_values($1), public.vector_values($2)) AS t(a, b))
             AS s $$""",
    "CREATE OPERATOR public.<=> (LEFTARG = text, RIGHTARG = text, "
    "FUNCTION = public.cosine_distance)",
)


def test_pgvector_is_detected_never_required(pg_dsn: str) -> None:
    database = PgDatabase(pg_dsn)
    try:
        state, schema = pg_engine.pgvector_state(database)
    finally:
        database.close()
    assert state in ("installed", "available", "missing")
    assert (schema is not None) == (state == "installed")
    with LocalMemoryClient(None, backend=pg_dsn, embedder=AxisEmbedder()) as client:
        assert client._db.pgvector == (state != "missing")  # type: ignore[attr-defined]
        client.add("alpha tea", user_id="u")
        assert [h.score for h in client.search("alpha", user_id="u")] == [1.0]
    with LocalMemoryClient(None, backend=pg_dsn, embedder=None) as off:
        assert off.search("alpha", user_id="u")[0].memory == "alpha tea"


def test_a_pgvector_that_cannot_be_set_up_leaves_the_scoring_to_the_client(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Said to be installed in a schema that does not exist: adding the column fails.
    monkeypatch.setattr(pg_engine, "pgvector_state", lambda database: ("installed", "nowhere"))
    with caplog.at_level("WARNING", logger="agentmem.storage"):
        client = LocalMemoryClient(None, backend=pg_dsn, embedder=AxisEmbedder())
    with client:
        assert not client._db.pgvector  # type: ignore[attr-defined]
        assert any("pgvector not used" in r.getMessage() for r in caplog.records)
        client.add("alpha tea", user_id="u")
        client.add("green tea", user_id="u")
        scores = {h.memory: h.score for h in client.search("beta tea", user_id="u")}
        assert scores == {"alpha tea": 0.25, "green tea": 0.25}


def test_with_pgvector_the_server_scores_the_vectors(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for statement in STAND_IN:
            conn.execute(statement)
    plain = LocalMemoryClient(None, embedder=AxisEmbedder())
    before = LocalMemoryClient(None, backend=pg_dsn, embedder=AxisEmbedder())
    before.add("alpha tea written before pgvector", user_id="u")  # backfilled on open
    plain.add("alpha tea written before pgvector", user_id="u")
    monkeypatch.setattr(pg_engine, "pgvector_state", lambda database: ("installed", "public"))
    served = LocalMemoryClient(None, backend=pg_dsn, embedder=AxisEmbedder())
    try:
        assert served._db.pgvector  # type: ignore[attr-defined]
        assert not before._db.pgvector  # type: ignore[attr-defined]
        for text in ("alpha tea", "green tea", "I drive a car", "beta and alpha"):
            for client in (plain, served):
                client.add(text, user_id="u")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            missing = conn.execute(
                "SELECT count(*) FROM agentmem.semantic_memories WHERE embedding IS NULL"
            ).fetchone()
        assert missing == (0,)
        # A client opened before the column existed changes a memory's vector: the
        # server must not go on scoring the old one.
        changed = []
        for client in (before, plain):
            client.llm = ScriptedLLM(
                [
                    reply({"facts": ["beta tea now"]}),
                    reply({"memory": [{"event": "UPDATE", "id": "0", "text": "beta tea now"}]}),
                ]
            )
            changed.append(
                [(e["event"], e["previous_memory"]) for e in client.add("x", user_id="u")]
            )
        assert changed[0] == changed[1] and changed[0][0][0] == "UPDATE"
        for query in ("beta tea", "automobile", "alpha", "tea", "beta"):
            want = [(h.memory, h.score) for h in plain.search(query, user_id="u", limit=10)]
            got = [(h.memory, h.score) for h in served.search(query, user_id="u", limit=10)]
            assert got == want, query
    finally:
        for client in (served, before, plain):
            client.close()
