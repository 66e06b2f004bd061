"""AgentMemStore, the LangGraph BaseStore on an agentmem memory, on both backends.

* LangGraph's own store behaviours (ported from langgraph's libs/checkpoint/tests/
  test_store.py and the SQL stores' tests): namespaces, wildcards, max_depth,
  pagination, namespace validation, batch ordering, filters with every operator;
* a hypothesis state machine running random operation sequences against
  AgentMemStore and LangGraph's InMemoryStore side by side, reopening the memory
  between steps, comparing every answer (ordering included, scores aside);
* search(query=...) orders the selection and never drops from it;
* durability (a new Memory on the same root or database sees everything), several
  processes writing at once (tests/_lgstore_child.py), a compiled StateGraph,
  unreadable documents set aside, TTL refused, and the example script.

The PostgreSQL cases need a server (tests/pg.py: without one they skip with one line).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from profiles import scaled

import agentmem
from agentmem.errors import CorruptStoreError, InvalidArgumentError

pytest.importorskip("langgraph.store.base")

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from agentmem.integrations.langgraph import AgentMemStore

WORKTREE = Path(agentmem.__file__).resolve().parent.parent
MakeStore = Callable[[], AgentMemStore]


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


class Opener:
    """Memories (and stores) on one backend and one root: each call a new Memory."""

    def __init__(self, root: Path, backend: str | None) -> None:
        self.root, self.backend = root, backend
        self.opened: list[agentmem.Memory] = []

    def memory(self) -> agentmem.Memory:
        mem = agentmem.Memory(root=self.root, working_dir=self.root.parent, backend=self.backend)
        self.opened.append(mem)
        return mem

    def __call__(self, **kwargs: Any) -> AgentMemStore:
        return AgentMemStore(memory=self.memory(), **kwargs)

    def close(self) -> None:
        for mem in self.opened:
            mem.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    backend = None
    if request.param == "postgresql":
        backend = pg_uri(request.getfixturevalue("pg_dsn"))
    (tmp_path / "work").mkdir()
    made = Opener(tmp_path / "work" / ".agentmem", backend)
    yield made
    made.close()


# ---------------------------------------------------------------------- ported behaviours

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


def test_list_namespaces_basic(opener: Opener) -> None:
    store = opener()
    for i, ns in enumerate(NAMESPACES):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b")) == ab
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == ab[:2]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == ab[2:]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]
    assert store.list_namespaces() == sorted(NAMESPACES)


def test_list_namespaces_with_wildcards(opener: Opener) -> None:
    store = opener()
    for i, ns in enumerate(
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ]
    ):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []


def test_list_namespaces_pagination_and_depth(opener: Opener) -> None:
    store = opener()
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]
    for i, ns in enumerate(
        [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "g"), ("h", "i", "j")]
    ):
        store.put(ns, f"x{i}", {"n": i})
    subs = [("namespace", f"sub_{i:02d}") for i in range(20)]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i"), *subs]
    assert store.list_namespaces(max_depth=1) == [("a",), ("h",), ("namespace",)]


def test_empty_store_and_namespace_rules(opener: Opener) -> None:
    store = opener()
    assert store.list_namespaces() == []
    assert store.search(("anything",)) == []
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.aput(bad, "foo", doc))
    with pytest.raises(InvalidNamespaceError):  # past the public put, straight to batch
        store.batch([PutOp(("a.b",), "k", doc)])
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", doc)])
    ns = ("foo", "langgraph", "foo")
    store.put(ns, "bar", doc)
    assert store.get(ns, "bar").value == doc  # type: ignore[union-attr]
    assert store.search(ns)[0].value == doc
    store.delete(ns, "bar")
    assert store.get(ns, "bar") is None
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])  # as InMemoryStore: batch allows it
    assert store.get(("langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    assert opener().list_namespaces() == [("langgraph", "foo")]


def test_basic_ops_keep_created_at_and_advance_updated_at(opener: Opener) -> None:
    store = opener()
    store.put(("test",), "k", {"data": "one"})
    first = store.get(("test",), "k")
    assert isinstance(first, Item) and first.value == {"data": "one"}
    assert first.created_at == first.updated_at and first.created_at.tzinfo is not None
    store.put(("test",), "k", {"data": "two"})
    second = opener().get(("test",), "k")  # a new Memory: it was durable
    assert second is not None and second.value == {"data": "two"}
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    store.delete(("test",), "k")
    assert opener().get(("test",), "k") is None
    assert store.get(("missing",), "k") is None


def test_batch_reads_see_the_store_before_its_puts(opener: Opener) -> None:
    store = opener()
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value3"}),
            SearchOp(("test",), {"data": "value2"}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("test",)),), limit=10),
            PutOp(("test", "new"), "key3", {"data": "x"}),
            PutOp(("test", "new"), "key3", {"data": "last wins"}),
            GetOp(("test", "new"), "key3"),
        ]
    )
    assert results[0].value == {"data": "value1"}  # type: ignore[union-attr]
    assert [r.key for r in results[2]] == ["key2"]  # type: ignore[union-attr]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[1] is None and results[4] is None and results[6] is None
    assert store.get(("test", "new"), "key3").value == {"data": "last wins"}  # type: ignore[union-attr]
    assert store.get(("test", "bar"), "key2").value == {"data": "value3"}  # type: ignore[union-attr]


def test_async_api(opener: Opener) -> None:
    store = opener()

    async def run() -> None:
        await asyncio.gather(*(store.aput(("a",), f"k{i}", {"i": i}) for i in range(5)))
        assert {it.key for it in await store.asearch(("a",), limit=10)} == {
            f"k{i}" for i in range(5)
        }
        assert (await store.aget(("a",), "k3")).value == {"i": 3}  # type: ignore[union-attr]
        await store.adelete(("a",), "k3")
        assert await store.aget(("a",), "k3") is None
        assert await store.alist_namespaces() == [("a",)]

    asyncio.run(run())


FILTER_ITEMS = [
    ("a", {"color": "red", "score": 4.5, "tags": ["x", "y"], "meta": {"size": 3, "kind": "k"}}),
    ("b", {"color": "blue", "score": 3.0, "tags": ["y"], "meta": {"size": 5}}),
    ("c", {"color": "red", "score": 2, "meta": {"size": 5, "kind": "k"}}),
    ("d", {"color": "green", "score": 5, "flag": True}),
    ("e", {"color": "red", "name": "no score"}),
]
FILTERS: list[dict[str, Any]] = [
    {"color": "red"},
    {"color": "red", "score": {"$gte": 3}},
    {"score": {"$gt": 2}},
    {"score": {"$gte": 2, "$lt": 5}},
    {"score": {"$lte": 3}},
    {"score": {"$ne": 3.0}},
    {"color": {"$eq": "blue"}},
    {"color": {"$ne": "red"}},
    {"tags": ["y"]},
    {"tags": ["x", "y"]},
    {"meta": {"size": 5}},
    {"meta": {"size": {"$gt": 3}, "kind": "k"}},
    {"flag": True},
    {"score": 5.0},
    {"missing": None},
]


@pytest.mark.parametrize("query", FILTERS, ids=[json.dumps(f) for f in FILTERS])
def test_filters_match_in_memory_store(query: dict[str, Any], tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / ".agentmem", working_dir=tmp_path)
    store, oracle = AgentMemStore(memory=mem), InMemoryStore()
    for key, value in FILTER_ITEMS:
        store.put(("docs",), key, value)
        oracle.put(("docs",), key, value)
    # InMemoryStore raises on an ordered operator over an item without a numeric value
    # (float(None)); AgentMemStore leaves such an item out, as the SQL stores do.
    expected = [it.key for it in _oracle_filter(oracle, query)]
    assert [it.key for it in store.search(("docs",), filter=query, limit=100)] == expected
    mem.close()


def _oracle_filter(oracle: InMemoryStore, query: dict[str, Any]) -> list[Item]:
    out = []
    for item in oracle.search(("docs",), limit=100):
        single = InMemoryStore()
        single.put(("docs",), item.key, item.value)
        with contextlib.suppress(TypeError, ValueError):  # InMemoryStore's float(None):
            out.extend(single.search(("docs",), filter=query))  # the item does not match
    return out


@pytest.mark.parametrize(
    ("namespace", "key"),
    [
        (("users", "ann@example"), "../../etc/passwd.json"),
        (("Ünïcødé", "日本語", "emoji 🎉"), "key with spaces / and \\ slashes"),
        (("x" * 5000,), "k" * 10_000),
        (("lone \udc80 surrogate",), "nul \x00 and \udcff"),
        (("CON", "NUL"), "session_progress"),
    ],
    ids=["path-like", "unicode", "long", "surrogates", "reserved-names"],
)
def test_any_namespace_and_key_round_trip(
    opener: Opener, namespace: tuple[str, ...], key: str
) -> None:
    store = opener()
    value = {"text": key, "nested": {"list": [1, 2.5, None, True, "\udc80"]}}
    store.put(namespace, key, value)
    store.put(namespace, key.upper(), {"other": 1})  # keys differing only in case stay apart
    again = opener()
    found = again.get(namespace, key)
    assert found is not None and found.value == value and found.namespace == namespace
    assert again.get(namespace, key.upper()).value == {"other": 1}  # type: ignore[union-attr]
    assert again.list_namespaces() == [namespace]
    assert [it.key for it in again.search(namespace[:1])] == [key, key.upper()]


def test_bad_input_raises_and_writes_nothing(opener: Opener) -> None:
    store = opener()
    store.put(("a",), "kept", {"v": 1})
    with pytest.raises(InvalidArgumentError, match=r"value\.when"):
        store.batch([PutOp(("a",), "x", {"ok": 1}), PutOp(("a",), "y", {"when": object()})])
    with pytest.raises(InvalidArgumentError, match="object keys must be strings"):
        store.put(("a",), "z", {1: "int key"})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgumentError, match="not a JSON number"):
        store.put(("a",), "z", {"n": float("nan")})
    with pytest.raises(InvalidArgumentError, match="unsupported operator"):
        store.search(("a",), filter={"v": {"$regex": "x"}})
    for ttl in (0, -1, float("inf"), "5", True):
        with pytest.raises(InvalidArgumentError, match="ttl"):
            store.batch([PutOp(("a",), "t", {"v": 1}, ttl=ttl)])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="default_ttl"):
        AgentMemStore(memory=opener.memory(), ttl={"default_ttl": -5})
    assert [(it.key, it.value) for it in opener().search(("a",))] == [("kept", {"v": 1})]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def test_ttl_expires_and_refreshes_on_read(opener: Opener) -> None:
    clock = FakeClock()

    def open_store(**kwargs: Any) -> AgentMemStore:
        store = opener(**kwargs)
        store.items.clock = clock
        return store

    store = open_store()
    assert store.supports_ttl is True
    store.put(("t",), "short", {"v": 1}, ttl=1)  # one minute
    store.put(("t",), "forever", {"v": 2})
    clock.now += 50
    assert store.get(("t",), "short") is not None  # a read restarts the minute: +110
    clock.now += 50
    other = open_store()  # another process's view, same clock
    assert [it.key for it in other.search(("t",), refresh_ttl=False)] == ["short", "forever"]
    clock.now += 15  # +115: expired (that search did not refresh)
    assert store.get(("t",), "short") is None
    assert [it.key for it in other.search(("t",))] == ["forever"]
    store.put(("u",), "k", {"v": 3}, ttl=1)  # +115, until +175
    clock.now += 50
    assert [it.key for it in store.search(("u",))] == ["k"]  # refreshed: until +225
    clock.now += 50
    assert store.get(("u",), "k", refresh_ttl=False) is not None
    clock.now += 20  # +235
    assert store.get(("u",), "k") is None
    assert store.list_namespaces() == [("t",)]  # ("u",) holds only an expired item
    store.put(("u",), "k", {"v": 4})  # a put after expiry makes a new item
    assert store.get(("u",), "k").created_at == store.get(("u",), "k").updated_at  # type: ignore[union-attr]
    # the config's default ttl, an explicit ttl=None, and refresh_on_read=False
    conf = open_store(ttl={"default_ttl": 1, "refresh_on_read": False})
    conf.put(("d",), "a", {"v": 1})
    conf.put(("d",), "b", {"v": 1}, ttl=None)
    conf.put(("d",), "c", {"v": 1}, ttl=1)
    conf.put(("d",), "c", {"v": 2})  # a put without ttl keeps the default here
    clock.now += 30
    assert conf.get(("d",), "a") is not None  # not refreshed
    clock.now += 31
    assert [it.key for it in conf.search(("d",))] == ["b"]
    assert conf.sweep_ttl() == 3  # ("t","short"), ("d","a"), ("d","c")
    assert conf.sweep_ttl() == 0
    assert [it.key for it in open_store().search(())] == ["forever", "k", "b"]


def test_the_ttl_sweeper_runs_and_stops(opener: Opener) -> None:
    clock = FakeClock()
    store = opener()
    store.items.clock = clock
    store.put(("s",), "gone", {"v": 1}, ttl=1)
    store.put(("s",), "kept", {"v": 1})
    clock.now += 61
    from agentmem.items import doc_key

    stored = store.items.documents
    assert b'"gone"' in (stored.read(doc_key(("s",))) or b"")  # expired, not yet reclaimed
    done = store.start_ttl_sweeper(sweep_interval_minutes=0.0005)  # every 30 ms
    deadline = time.monotonic() + 30
    while b'"gone"' in (stored.read(doc_key(("s",))) or b""):  # until the sweeper got there
        assert time.monotonic() < deadline, "the sweeper never swept"
        time.sleep(0.01)
    assert store.stop_ttl_sweeper(timeout=10) is True
    assert done.result(timeout=1) is None
    assert [it.key for it in store.search(("s",))] == ["kept"]


# ---------------------------------------------------------------------- search with a query

DOCS = [
    ("d1", {"text": "the cat sat on the mat"}),
    ("d2", {"text": "dogs chase cats", "n": 1}),
    ("d3", {"text": "nothing relevant here", "n": 2}),
    ("d4", {"title": "cat", "body": {"more": ["cats", "and", "kittens"]}, "n": 1}),
    ("d5", {"text": "a cat? no: a tiger", "n": 2}, ["other"]),
    ("d6", {"text": "cat cat cat"}, False),
]


def _fill_docs(store: Any) -> None:
    for key, value, *index in DOCS:
        store.put(("docs", "x"), key, value, index=index[0] if index else None)


def test_a_query_orders_the_selection_and_never_drops(opener: Opener) -> None:
    store = opener()
    _fill_docs(store)
    ranked = store.search(("docs",), query="cats", limit=100)
    assert sorted(it.key for it in ranked) == [f"d{i}" for i in range(1, 7)]
    scores = [it.score for it in ranked]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert {it.key for it in ranked if it.score} == {"d1", "d2", "d4"}  # porter: cat = cats
    # the unmatched keep the store order; index=False and a field-list without text score 0
    assert [it.key for it in ranked if not it.score] == ["d3", "d5", "d6"]
    # limit/offset page through that one ranking
    assert [it.key for it in store.search(("docs",), query="cats", limit=2, offset=1)] == [
        it.key for it in ranked[1:3]
    ]
    # the filter selects, the query orders
    assert [it.key for it in store.search(("docs",), query="cats", filter={"n": 1})] == [
        it.key for it in ranked if it.value.get("n") == 1
    ]


class _LetterEmbeddings(Embeddings):
    """A deterministic offline embedder: letter counts a..z."""

    def _vector(self, text: str) -> list[float]:
        return [float(text.lower().count(chr(97 + i))) for i in range(26)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_a_vector_index_ranks_like_in_memory_store(opener: Opener) -> None:
    index: Any = {"dims": 26, "embed": _LetterEmbeddings(), "fields": ["text"]}
    store, oracle = opener(index=index), InMemoryStore(index=index)
    docs = [("p", "zebra zoo"), ("q", "apple banana"), ("r", "aardvark"), ("s", "quiz jazz")]
    for key, text in docs:
        store.put(("v",), key, {"text": text})
        oracle.put(("v",), key, {"text": text})
    store.put(("v",), "none", {"other": "no text field"})
    oracle.put(("v",), "none", {"other": "no text field"})
    for query in ("aaa", "zz", "banana"):
        mine = store.search(("v",), query=query, limit=10)
        theirs = oracle.search(("v",), query=query, limit=10)
        assert [it.key for it in mine] == [it.key for it in theirs]
        assert [it.score for it in mine[:-1]] == pytest.approx([it.score for it in theirs[:-1]])
    # the vectors were stored with the item: a new memory ranks the same
    assert [it.key for it in opener(index=index).search(("v",), query="zz")] == [
        it.key for it in oracle.search(("v",), query="zz")
    ]

    class AgentMemEmbedder:  # agentmem's Embedder protocol: embed(texts) -> vectors
        def embed(self, texts: Any) -> list[list[float]]:
            return _LetterEmbeddings().embed_documents(list(texts))

    own = opener(index={"dims": 26, "embed": AgentMemEmbedder(), "fields": ["text"]})
    own.put(("v",), "p", {"text": "zebra zoo"})  # re-embedded by this embedder
    assert [it.key for it in own.search(("v",), query="zz")] == [
        it.key for it in oracle.search(("v",), query="zz")
    ]
    assert own.embeddings is not None and len(own.embeddings.embed_query("zz")) == 26


def test_sql_store_behaviours(opener: Opener) -> None:
    # Ported from langgraph's checkpoint-sqlite tests: namespaces given as lists,
    # a vector update re-ranks the item, index=False keeps it out of the vector ranking.
    index: Any = {"dims": 26, "embed": _LetterEmbeddings(), "fields": ["text"]}
    store = opener(index=index)
    store.put(["test", "docs"], "doc1", {"text": "zany zebra xerxes", "author": "Alice"})  # type: ignore[arg-type]
    store.put(("test", "docs"), "doc2", {"text": "something about dogs", "author": "Bob"})
    store.put(("test", "images"), "doc3", {"text": "text about birds", "author": "Alice"})
    assert len(store.search(["test"])) == 3  # type: ignore[arg-type]
    assert [it.key for it in store.search(["test"], filter={"author": "Alice"})] == ["doc1", "doc3"]  # type: ignore[arg-type]
    assert store.list_namespaces(prefix=["test"]) == [("test", "docs"), ("test", "images")]  # type: ignore[arg-type]
    assert store.get(["test", "docs"], "doc2").value["author"] == "Bob"  # type: ignore[arg-type, union-attr]
    first = store.search(("test",), query="zany xerxes")
    assert first[0].key == "doc1"
    store.put(("test", "docs"), "doc1", {"text": "new text about dogs"})
    after = {it.key: it.score for it in store.search(("test",), query="zany xerxes")}
    assert after["doc1"] < first[0].score  # type: ignore[operator]
    store.put(("test", "docs"), "doc4", {"text": "new text about dogs"}, index=False)
    top = store.search(("test",), query="new text about dogs", limit=3)
    assert "doc4" not in [it.key for it in top]
    assert [it.key for it in store.search(("test",), query="new text about dogs", limit=10)][
        -1
    ] == "doc4"
    assert (
        len(store.search(("test",), query="")) == 4
    )  # an empty query: no ranking, nothing dropped


# ---------------------------------------------------------------------- random sequences

LABELS = st.sampled_from(["a", "b", "c"])
NS = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
PATTERN = st.lists(st.sampled_from(["a", "b", "c", "*"]), min_size=1, max_size=2).map(tuple)
KEYS = st.sampled_from(["k1", "k2", "k3"])
VALUES = st.fixed_dictionaries(
    {"n": st.integers(0, 4), "s": st.sampled_from(["red fox", "blue cat", "red cat"])},
    optional={
        "m": st.fixed_dictionaries({"x": st.integers(0, 2)}),
        "l": st.lists(st.integers(0, 2), max_size=2),
    },
)
FILTER = st.one_of(
    st.none(),
    st.fixed_dictionaries({"n": st.integers(0, 4)}),
    st.fixed_dictionaries({"s": st.sampled_from(["red fox", "blue cat"])}),
    st.builds(
        lambda op, v: {"n": {op: v}},
        st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
        st.integers(0, 4),
    ),
    st.fixed_dictionaries({"m": st.fixed_dictionaries({"x": st.integers(0, 2)})}),
)
PAGE = st.tuples(st.integers(0, 12), st.integers(0, 4))


def _triples(items: list[Any]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return [(it.namespace, it.key, it.value) for it in items]


class StoreMachine(RuleBasedStateMachine):
    """AgentMemStore against InMemoryStore on the same random operations.

    The oracle is LangGraph's own store, used through its public API, with two
    deliberate differences taken into account: InMemoryStore.get() on a namespace
    it never held creates an empty entry (its defaultdict) that then shows in
    list_namespaces and fixes the namespace's search position, and it keeps
    namespaces whose items were all deleted in list_namespaces. So the oracle's get
    is read through its search, and its namespaces are those that hold items
    (asked of a copy of it made through put). Timestamps are checked apart.
    """

    open_store: Callable[[], AgentMemStore]

    def __init__(self) -> None:
        super().__init__()
        self.oracle = InMemoryStore()
        self.store = self.open_store()

    def _oracle_get(self, ns: tuple[str, ...], key: str) -> Item | None:
        found = [
            it for it in self.oracle.search(ns, limit=10**6) if it.namespace == ns and it.key == key
        ]
        return found[0] if found else None

    def _oracle_namespaces(self) -> InMemoryStore:
        copy = InMemoryStore()
        for it in self.oracle.search((), limit=10**6):
            copy.put(it.namespace, it.key, it.value)
        return copy

    @rule(ns=NS, key=KEYS, value=VALUES)
    def put(self, ns: tuple[str, ...], key: str, value: dict[str, Any]) -> None:
        self.store.put(ns, key, value)
        self.oracle.put(ns, key, value)

    @rule(ns=NS, key=KEYS)
    def delete(self, ns: tuple[str, ...], key: str) -> None:
        self.store.delete(ns, key)
        self.oracle.delete(ns, key)

    @rule(ns=NS, key=KEYS)
    def get(self, ns: tuple[str, ...], key: str) -> None:
        mine, theirs = self.store.get(ns, key), self._oracle_get(ns, key)
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            assert (mine.namespace, mine.key, mine.value) == (
                theirs.namespace,
                theirs.key,
                theirs.value,
            )
            assert mine.created_at <= mine.updated_at

    @rule(prefix=st.lists(LABELS, max_size=2).map(tuple), filter=FILTER, page=PAGE)
    def search(self, prefix: tuple[str, ...], filter: Any, page: tuple[int, int]) -> None:
        limit, offset = page
        mine = self.store.search(prefix, filter=filter, limit=limit, offset=offset)
        theirs = self.oracle.search(prefix, filter=filter, limit=limit, offset=offset)
        assert _triples(mine) == _triples(theirs)

    @rule(
        prefix=st.lists(LABELS, max_size=2).map(tuple),
        filter=FILTER,
        query=st.sampled_from(["red", "cat", "fox blue"]),
    )
    def search_query(self, prefix: tuple[str, ...], filter: Any, query: str) -> None:
        mine = self.store.search(prefix, query=query, filter=filter, limit=100)
        theirs = self.oracle.search(prefix, filter=filter, limit=100)
        key = lambda t: (t[0], t[1])  # noqa: E731
        assert sorted(_triples(mine), key=key) == sorted(_triples(theirs), key=key)
        scores = [it.score for it in mine]
        assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]

    @rule(
        prefix=st.none() | PATTERN,
        suffix=st.none() | PATTERN,
        depth=st.none() | st.integers(1, 3),
        page=PAGE,
    )
    def list_namespaces(
        self, prefix: Any, suffix: Any, depth: int | None, page: tuple[int, int]
    ) -> None:
        limit, offset = page
        kwargs = {
            "prefix": prefix,
            "suffix": suffix,
            "max_depth": depth,
            "limit": limit,
            "offset": offset,
        }
        assert self.store.list_namespaces(**kwargs) == self._oracle_namespaces().list_namespaces(
            **kwargs
        )

    @rule(ops=st.lists(
        st.one_of(
            st.builds(lambda ns, k: GetOp(ns, k), NS, KEYS),
            st.builds(lambda ns, k, v: PutOp(ns, k, v), NS, KEYS, VALUES),
            st.builds(lambda ns, k: PutOp(ns, k, None), NS, KEYS),
            st.builds(lambda ns, f: SearchOp(ns, f, 5, 0), NS, FILTER),
        ),
        min_size=1, max_size=5,
    ))  # fmt: skip
    def batch(self, ops: list[Any]) -> None:
        mine = self.store.batch(ops)
        # the oracle's reads first (a batch's reads see the store before its puts)
        for op, got in zip(ops, mine, strict=True):
            if isinstance(op, GetOp):
                want = self._oracle_get(op.namespace, op.key)
                assert (got is None) == (want is None)
                if got is not None and want is not None:
                    assert got.value == want.value
            elif isinstance(op, SearchOp):
                assert _triples(got) == _triples(self.oracle.batch([op])[0])  # type: ignore[arg-type]
            else:
                assert got is None
        self.oracle.batch([op for op in ops if isinstance(op, PutOp)])

    @rule()
    def reopen(self) -> None:
        self.store.memory.close()  # one open memory at a time (PostgreSQL connections)
        self.store = self.open_store()

    def teardown(self) -> None:
        self.store.memory.close()

    @invariant()
    def everything_is_there(self) -> None:
        assert _triples(self.store.search((), limit=10**6)) == _triples(
            self.oracle.search((), limit=10**6)
        )


def _run_machine(
    base: type, backend: str, request: pytest.FixtureRequest, tmp_path: Path, examples: int
) -> None:
    """Run the state machine ``base`` on ``backend``, each run on a fresh root (and, on
    PostgreSQL, the one test database emptied of items first)."""
    dsn = pg_uri(request.getfixturevalue("pg_dsn")) if backend == "postgresql" else None
    runs = iter(range(10**6))
    opened: list[agentmem.Memory] = []

    def open_store(self: Any) -> AgentMemStore:
        if not hasattr(self, "_root"):
            self._root = tmp_path / f"run{next(runs)}"
            self._root.mkdir()
            if dsn is not None:  # one database: start each run from no items
                mem = agentmem.Memory(root=self._root / "m", working_dir=self._root, backend=dsn)
                with mem.items.documents.locked():
                    for doc in mem.items.documents.list().found:
                        mem.items.documents.delete(doc.key)
                mem.close()
        mem = agentmem.Memory(root=self._root / "m", working_dir=self._root, backend=dsn)
        opened.append(mem)
        return AgentMemStore(memory=mem)

    machine = type("Machine", (base,), {"open_store": open_store})
    run = settings(
        max_examples=scaled(examples),
        stateful_step_count=25,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )(machine).TestCase
    try:
        run().runTest()
    finally:
        for mem in opened:
            mem.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_random_sequences_match_in_memory_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    _run_machine(StoreMachine, backend, request, tmp_path, 30 if backend == "sqlite" else 15)


# ---------------------------------------------------------------------- processes, graphs, damage

CHILD = Path(__file__).parent / "_lgstore_child.py"


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(WORKTREE)}


def test_several_processes_writing_lose_no_put(opener: Opener, tmp_path: Path) -> None:
    workers, count = 3, 8
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(CHILD),
                str(opener.root),
                opener.backend or "embedded",
                f"w{w}",
                str(count),
                str(go),
            ],
            env=_child_env(),
            stderr=subprocess.PIPE,
        )
        for w in range(workers)
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("go.ready-*"))) < workers:  # all imported and open
        assert all(p.poll() is None for p in procs), "a worker died before it was ready"
        assert time.monotonic() < deadline, "the workers never got ready"
        time.sleep(0.01)
    go.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    store = opener()
    found = store.search(("shared", "items"), limit=1000)
    assert sorted(it.key for it in found) == sorted(
        f"w{w}-{i}" for w in range(workers) for i in range(count)
    )
    assert all(
        it.value == {"worker": it.key.split("-")[0], "i": int(it.key.split("-")[1])} for it in found
    )
    last = store.get(("shared",), "last")
    assert last is not None and last.value["i"] == count - 1  # whole: one worker's final put
    for w in range(workers):
        assert [it.key for it in store.search(("per", f"w{w}"), limit=100)] == [
            f"b{i}" for i in range(0, count, 3)
        ]
    # every item has its own place: the store order is a total order with no duplicates
    orders = [it.order for it in opener.memory().items.items()]
    assert (
        len(set(orders)) == len(orders) == workers * count + 1 + workers * len(range(0, count, 3))
    )


@pytest.mark.parametrize("delay", [0.3, 0.6, 0.9])
def test_a_killed_writer_leaves_every_acknowledged_change(tmp_path: Path, delay: float) -> None:
    root = tmp_path / "work" / ".agentmem"
    root.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "kill", str(root)],
        env=_child_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.kill()  # SIGKILL, wherever it is: inside a write, between two, in the lock
    lines = proc.stdout.read().splitlines()
    proc.stdout.close()
    proc.wait()
    assert lines, "the writer acknowledged nothing"
    expected: dict[tuple[str, ...], set[str]] = {}
    for line in lines:
        action, space, key = line.split()
        keys = expected.setdefault(("kill", f"n{space}"), set())
        (keys.add if action == "put" else keys.discard)(key)
    # the change after the last acknowledged one may or may not have been made, whole
    n = len(lines)
    pending = (("kill", f"n{n % 3}"), f"k{n - 3}" if n % 5 == 4 else f"k{n}")
    mem = agentmem.Memory(root=root, working_dir=root.parent)
    store = AgentMemStore(memory=mem)
    for namespace in {*expected, pending[0]}:
        found = {it.key for it in store.search(namespace, limit=10**6)}
        keys = expected.get(namespace, set())
        differ = found ^ keys
        assert differ <= ({pending[1]} if namespace == pending[0] else set()), (namespace, differ)
        for it in store.search(namespace, limit=10**6):
            assert it.value["i"] == int(it.key[1:])  # every value whole
    assert store.items.problems == [] and store.items.moved_aside == []
    store.put(("kill", "n0"), "after", {"ok": True})  # and it is writable
    mem.close()


class _State(TypedDict):
    user: str
    said: str
    answer: str


def _graph(store: AgentMemStore) -> Any:
    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    def remember(state: _State) -> dict[str, Any]:
        memories = get_store()
        ns = ("memories", state["user"])
        seen = memories.get(ns, "count")
        count = (seen.value["n"] if seen is not None else 0) + 1
        memories.put(ns, "count", {"n": count})
        memories.put(ns, f"said-{count}", {"text": state["said"]})
        return {}

    def answer(state: _State, runtime: Runtime[None]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = runtime.store.search(("memories", state["user"]), query="tea", limit=1, filter=None)
        return {"answer": hits[0].value.get("text", "") if hits else ""}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def test_a_compiled_state_graph_uses_the_store(opener: Opener) -> None:
    graph = _graph(opener())
    graph.invoke({"user": "ann", "said": "I like coffee", "answer": ""})
    out = graph.invoke({"user": "ann", "said": "I drink green tea daily", "answer": ""})
    assert out["answer"] == "I drink green tea daily"
    # a new process-like start: a new Memory, a new graph, the same memories
    again = _graph(opener())
    out = asyncio.run(again.ainvoke({"user": "ann", "said": "and water", "answer": ""}))
    assert out["answer"] == "I drink green tea daily"
    assert opener().get(("memories", "ann"), "count").value == {"n": 3}  # type: ignore[union-attr]
    assert opener().list_namespaces(prefix=("memories",)) == [("memories", "ann")]


def test_an_unreadable_namespace_is_set_aside_and_reported(tmp_path: Path) -> None:
    from agentmem.items import doc_key

    mem = agentmem.Memory(root=tmp_path / ".agentmem", working_dir=tmp_path)
    store = AgentMemStore(memory=mem)
    store.put(("a",), "good", {"v": 1})
    store.put(("b",), "bad", {"v": 2})
    bad = tmp_path / ".agentmem" / "items" / f"{doc_key(('b',))}.json"
    bad.write_bytes(b'{"format": "agentmem.items", "version": 1, "namespace": ["b"], trunc')
    fresh = AgentMemStore(memory=agentmem.Memory(root=tmp_path / ".agentmem", working_dir=tmp_path))
    assert [it.key for it in fresh.search(())] == ["good"]
    assert any("unreadable" in line for line in fresh.items.problems)
    aside = list(bad.parent.glob(bad.name + ".corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().endswith(b"trunc")  # kept byte for byte
    assert fresh.get(("b",), "bad") is None  # set aside: gone from its namespace
    assert fresh.list_namespaces() == [("a",)]
    bad.write_bytes(b"not json")
    with pytest.raises(CorruptStoreError, match="unreadable"):
        fresh.get(("b",), "bad")
    assert len(list(bad.parent.glob(bad.name + ".corrupt-*"))) == 2
    fresh.put(("b",), "new", {"v": 3})  # the namespace starts afresh
    # an unreadable index is set aside and rebuilt from the namespaces
    index = tmp_path / ".agentmem" / "items" / "index.json"
    index.write_bytes(b"{")
    again = AgentMemStore(memory=agentmem.Memory(root=tmp_path / ".agentmem", working_dir=tmp_path))
    assert again.list_namespaces() == [("a",), ("b",)]
    assert [(it.namespace, it.key) for it in again.search(())] == [
        (("a",), "good"),
        (("b",), "new"),
    ]
    assert json.loads(index.read_bytes())["format"] == "agentmem.items.index"
    assert len(list(index.parent.glob("index.json.corrupt-*"))) == 1


def test_a_namespace_from_a_newer_agentmem_is_left_in_place(tmp_path: Path) -> None:
    from agentmem.errors import FormatVersionError
    from agentmem.items import doc_key

    mem = agentmem.Memory(root=tmp_path / ".agentmem", working_dir=tmp_path)
    store = AgentMemStore(memory=mem)
    store.put(("a",), "new", {"v": 1})
    store.put(("b",), "old", {"v": 2})
    path = tmp_path / ".agentmem" / "items" / f"{doc_key(('a',))}.json"
    raw = json.loads(path.read_bytes())
    raw["version"] = 99
    path.write_text(json.dumps(raw))
    with pytest.raises(FormatVersionError):
        store.get(("a",), "new")
    with pytest.raises(FormatVersionError):
        store.put(("a",), "other", {"v": 3})
    assert [it.key for it in store.search(())] == ["old"]  # left out of a search, and reported
    assert any("newer agentmem" in line for line in store.items.problems)
    assert json.loads(path.read_bytes())["version"] == 99


def test_import_agentmem_does_not_import_langgraph() -> None:
    code = (
        "import sys, agentmem; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain_core')]; "
        "assert not bad, bad; "
        "import agentmem.integrations; assert 'langgraph' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_child_env())


TTL_NS = st.sampled_from([("a",), ("a",), ("b",)])
TTL_KEYS = st.sampled_from(["k1", "k2"])


class TTLMachine(RuleBasedStateMachine):
    """AgentMemStore with TTLs against a dict model, on a fake clock.

    InMemoryStore does not support TTL, so the oracle here is a plain dict of
    (namespace, key) -> (value, expires_at or None, ttl seconds or None), kept in
    creation order, independent of the store's code.
    """

    open_store: Callable[[], AgentMemStore]

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.model: dict[tuple[tuple[str, ...], str], tuple[Any, float | None, float | None]] = {}
        self.store = self._open()

    def _open(self) -> AgentMemStore:
        if hasattr(self, "store"):
            self.store.memory.close()  # one open memory at a time (PostgreSQL connections)
        store = self.open_store()
        store.items.clock = self.clock
        return store

    def teardown(self) -> None:
        self.store.memory.close()

    def _live(self) -> dict[tuple[tuple[str, ...], str], Any]:
        return {
            k: v for k, (v, exp, _) in self.model.items() if exp is None or exp > self.clock.now
        }

    def _purge(self, ns: tuple[str, ...]) -> None:
        for k in [k for k in self.model if k[0] == ns and k not in self._live()]:
            del self.model[k]

    @rule(ns=TTL_NS, key=TTL_KEYS, n=st.integers(0, 3), ttl=st.sampled_from([None, 1.0, 1.0]))
    def put(self, ns: tuple[str, ...], key: str, n: int, ttl: float | None) -> None:
        self.store.put(ns, key, {"n": n}, ttl=ttl)
        self._purge(ns)  # a write to a namespace drops its expired items
        value = {"n": n}
        seconds = ttl * 60 if ttl is not None else None
        expires = self.clock.now + seconds if seconds is not None else None
        self.model[(ns, key)] = (value, expires, seconds)

    @rule(ns=TTL_NS, key=TTL_KEYS)
    def delete(self, ns: tuple[str, ...], key: str) -> None:
        self.store.delete(ns, key)
        self._purge(ns)
        self.model.pop((ns, key), None)

    def _refresh(self, keys: list[tuple[tuple[str, ...], str]]) -> None:
        live = self._live()
        for k in keys:
            if k in live and self.model[k][2] is not None:
                value, _, seconds = self.model[k]
                self.model[k] = (value, self.clock.now + seconds, seconds)  # type: ignore[operator]

    @rule(ns=TTL_NS, key=TTL_KEYS, refresh=st.booleans())
    def get(self, ns: tuple[str, ...], key: str, refresh: bool) -> None:
        got = self.store.get(ns, key, refresh_ttl=refresh)
        want = self._live().get((ns, key))
        assert (got.value if got is not None else None) == want
        if refresh and got is not None:
            self._refresh([(ns, key)])

    @rule(
        prefix=st.sampled_from([(), ("a",)]),
        refresh=st.booleans(),
        limit=st.integers(0, 6),
    )
    def search(self, prefix: tuple[str, ...], refresh: bool, limit: int) -> None:
        got = self.store.search(prefix, limit=limit, refresh_ttl=refresh)
        live = self._live()
        wanted = {k for k in live if k[0][: len(prefix)] == prefix}
        keys = [(it.namespace, it.key) for it in got]
        assert len(keys) == min(limit, len(wanted)) and set(keys) <= wanted
        assert all(it.value == live[(it.namespace, it.key)] for it in got)
        if refresh:
            self._refresh(keys)

    @rule(minutes=st.just(0.6))
    def advance(self, minutes: float) -> None:
        self.clock.now += minutes * 60

    @rule()
    def sweep(self) -> None:
        expired = len(self.model) - len(self._live())
        assert self.store.sweep_ttl() == expired
        self.model = {k: self.model[k] for k in self._live()}

    @rule()
    def reopen(self) -> None:
        self.store = self._open()

    @invariant()
    def namespaces_hold_live_items(self) -> None:
        assert self.store.list_namespaces(limit=1000) == sorted({k[0] for k in self._live()})


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_ttl_sequences_match_a_model(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    _run_machine(TTLMachine, backend, request, tmp_path, 60 if backend == "sqlite" else 25)
