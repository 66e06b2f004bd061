"""AgentMemStore: a LangGraph ``BaseStore`` kept in an agentmem memory (extra ``langgraph``).

``AgentMemStore(memory=mem)`` is a drop-in for LangGraph's ``InMemoryStore`` that
keeps its items in the memory's :class:`~agentmem.items.ItemStore` (``mem.items``):
durable when a write returns, shared by every process (and, on PostgreSQL, every
host) that opens the same memory, on both agentmem backends::

    from langgraph.graph import StateGraph
    from agentmem import Memory
    from agentmem.integrations.langgraph import AgentMemStore

    store = AgentMemStore(memory=Memory(root=".agentmem"))
    graph = builder.compile(store=store)   # nodes use get_store() / runtime.store

It answers every operation as ``InMemoryStore`` does (docs/integrations/langgraph.md
lists the few deliberate differences):

* ``batch``/``abatch`` run get, search and list-namespaces operations against the
  store as it was before the batch, then its puts and deletes (the last put of a
  ``(namespace, key)`` wins) in one locked change;
* ``search(prefix, filter=..., limit=..., offset=...)`` selects the items under the
  namespace prefix whose value matches the filter (plain equality, nested objects,
  lists, and ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``), in the order
  ``InMemoryStore`` keeps (namespaces by first use, items by creation);
* ``search(..., query=...)`` *orders* that same selection, never drops from it:
  with an embedding ``index`` configured, by cosine similarity of the item's vectors
  (as ``InMemoryStore`` does), then by agentmem's full-text ranking: BM25 over the
  terms agentmem's recall index uses (:func:`agentmem.session_store.postings_terms.terms`:
  unicode folding and Porter stems) of the item's indexed text (the ``index`` fields,
  else every string in the value), scored against the selected items; ties and
  items that match nothing keep the store order;
* ``list_namespaces`` with prefix/suffix (``"*"`` matches any label), ``max_depth``,
  limit and offset, sorted.

TTL is supported (``supports_ttl`` is ``True``): ``put(..., ttl=minutes)`` (or the
``default_ttl`` of ``ttl={...}``, a LangGraph ``TTLConfig``) makes the item expire that
many minutes after its last put or, with ``refresh_ttl`` (default: the config's
``refresh_on_read``, else ``True``), its last read by ``get`` or ``search``. An expired
item is gone at once for every read, on every process (it is compared with the clock
at each read), and its storage is reclaimed by the next write to its namespace,
:meth:`AgentMemStore.sweep_ttl`, or the background sweeper
(:meth:`AgentMemStore.start_ttl_sweeper`). ``abatch`` runs ``batch`` in a worker thread
(:func:`asyncio.to_thread`), so the event loop never waits on the disk or the database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agentmem._optional import require

require("langgraph.store.base", "agentmem.integrations.langgraph", "langgraph")

from langchain_core.embeddings import Embeddings  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from agentmem import Memory  # noqa: E402
from agentmem.errors import InvalidArgumentError  # noqa: E402
from agentmem.items import ItemChange, ItemStore, StoredItem  # noqa: E402
from agentmem.protocols import Embedder  # noqa: E402
from agentmem.session_store.postings_terms import terms  # noqa: E402

__all__ = ["AgentMemStore"]

_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_ORDERED = frozenset({"$gt", "$gte", "$lt", "$lte"})
_K1 = 1.2
_B = 0.75


class AgentMemStore(BaseStore):
    """A LangGraph ``BaseStore`` on an agentmem :class:`~agentmem.Memory` (module docstring).

    Args:
        memory: The memory whose :attr:`~agentmem.Memory.items` hold the store.
        index: A LangGraph ``IndexConfig`` (``{"dims", "embed", "fields"}``) to embed
            items on put and rank queries by vector similarity first; without it a
            query is ranked by full-text BM25 only. ``embed`` is what LangGraph takes
            (LangChain ``Embeddings``, a function of a list of texts, or a
            ``"provider:model"`` string) or an agentmem
            :class:`~agentmem.protocols.Embedder`; it must work synchronously
            (``abatch`` calls it from a worker thread).
        ttl: A LangGraph ``TTLConfig``: ``default_ttl`` (minutes, for puts that do
            not say), ``refresh_on_read`` (default ``True``) and
            ``sweep_interval_minutes`` (the default of :meth:`start_ttl_sweeper`).

    Raises:
        ConfigurationError: LangGraph is not installed (the ``langgraph`` extra).
        InvalidArgumentError: ``memory`` is not a :class:`~agentmem.Memory`.
    """

    supports_ttl = True

    def __init__(
        self, memory: Memory, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None
    ) -> None:
        if not isinstance(memory, Memory):
            raise InvalidArgumentError(
                f"memory must be an agentmem.Memory, got {type(memory).__name__}"
            )
        if ttl is not None:
            _minutes(ttl.get("default_ttl"), "ttl default_ttl")
            _minutes(ttl.get("sweep_interval_minutes"), "ttl sweep_interval_minutes")
            if not isinstance(ttl.get("refresh_on_read", True), bool):
                raise InvalidArgumentError("ttl refresh_on_read must be True or False")
        self.ttl_config = ttl
        self._sweeper: threading.Thread | None = None
        self._stop_sweeping = threading.Event()
        self.memory = memory
        self.items: ItemStore = memory.items
        self.index_config = index
        self.embeddings: Embeddings | None = None
        self._fields: list[tuple[str, str | list[str]]] = [("$", "$")]
        if index:
            embed: Any = index.get("embed")
            if isinstance(embed, Embedder) and not isinstance(embed, Embeddings):
                embed = embed.embed  # an agentmem Embedder: embed(texts) -> vectors
            self.embeddings = ensure_embeddings(embed)
            self._fields = [
                (path, tokenize_path(path) if path != "$" else "$")
                for path in (index.get("fields") or ["$"])
            ]

    # ------------------------------------------------------------------ BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``: reads see the store before the batch; then its puts, in one change.

        Raises:
            InvalidNamespaceError: a namespace label that LangGraph refuses, or a put
                into the empty namespace.
            InvalidArgumentError: a value that is not a JSON object, a ttl that is not
                a positive number of minutes, or an unknown filter operator (nothing
                is written).
            ValueError: an operation of an unknown type.
        """
        ops = list(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if not isinstance(op, GetOp | SearchOp | ListNamespacesOp | PutOp):
                raise ValueError(f"Unknown operation type: {type(op)}")
            validate_op_namespace(op)
            if isinstance(op, SearchOp):
                _check_filter(op.filter)
            if isinstance(op, PutOp):
                _minutes(op.ttl, "ttl")
                if not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                puts[(tuple(op.namespace), str(op.key))] = op
        changes = self._changes(puts.values())  # checked before anything is read or written
        results: list[Result] = []
        selected: dict[tuple[str, ...], list[StoredItem]] = {}
        refresh: list[tuple[tuple[str, ...], str]] = []
        for op in ops:
            if isinstance(op, GetOp):
                stored = self._get(op)
                if stored is not None and stored.expires_at is not None and op.refresh_ttl:
                    refresh.append((stored.namespace, stored.key))
                results.append(_item(stored) if stored is not None else None)
            elif isinstance(op, SearchOp):
                prefix = tuple(op.namespace_prefix)
                if prefix not in selected:
                    selected[prefix] = self.items.items(prefix)
                found = self._search(op, selected[prefix])
                if op.refresh_ttl:
                    refresh.extend((s.namespace, s.key) for s, _ in found if s.expires_at)
                results.append([_search_item(s, score) for s, score in found])
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                results.append(None)
        if refresh:  # before the puts: a put in this batch replaces what it refreshed
            self.items.refresh(refresh)
        if changes:
            self.items.apply(changes)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    # ------------------------------------------------------------------ operations

    # ------------------------------------------------------------------ TTL

    def sweep_ttl(self) -> int:
        """Delete every expired item now (they are already invisible); how many."""
        return self.items.sweep()

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the ttl
        config's, else 5) in a daemon thread until :meth:`stop_ttl_sweeper`.

        Returns:
            A future that completes when the sweeper stops (with the error that stopped
            it, if one did).
        """
        interval = _minutes(sweep_interval_minutes, "sweep_interval_minutes")
        if interval is None:
            interval = _minutes(
                (self.ttl_config or {}).get("sweep_interval_minutes"), "sweep_interval_minutes"
            )
        every = (interval if interval is not None else 5.0) * 60.0
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._sweeper is not None and self._sweeper.is_alive():
            raise InvalidArgumentError("the ttl sweeper is already running")
        self._stop_sweeping.clear()

        def run() -> None:
            try:
                while not self._stop_sweeping.wait(every):
                    self.sweep_ttl()
            except BaseException as exc:  # reported through the future
                done.set_exception(exc)
            else:
                done.set_result(None)

        self._sweeper = threading.Thread(target=run, name="agentmem-ttl-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds."""
        sweeper = self._sweeper
        if sweeper is None:
            return True
        self._stop_sweeping.set()
        sweeper.join(timeout)
        if not sweeper.is_alive():
            self._sweeper = None
        return not sweeper.is_alive()

    # ------------------------------------------------------------------ reads

    def _get(self, op: GetOp) -> StoredItem | None:
        if not op.namespace:
            return None  # nothing can be put there
        return self.items.get(tuple(op.namespace), str(op.key))

    def _search(
        self, op: SearchOp, items: list[StoredItem]
    ) -> list[tuple[StoredItem, float | None]]:
        chosen = [it for it in items if _matches(it.value, op.filter)]
        if not op.query:
            return [(it, None) for it in chosen[op.offset : op.offset + op.limit]]
        return self._rank(op.query, chosen)[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [
            ns
            for ns in self.items.namespaces()
            if all(_does_match(condition, ns) for condition in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        else:
            namespaces = sorted(namespaces)
        return namespaces[op.offset : op.offset + op.limit]

    def _changes(self, puts: Iterable[PutOp]) -> list[ItemChange]:
        """The item changes of ``puts`` (values embedded when an index is configured)."""
        puts = list(puts)
        wanted: list[tuple[int, str]] = []
        extras: list[dict[str, Any]] = []
        for i, op in enumerate(puts):
            extra: dict[str, Any] = {}
            if op.value is not None:
                if not isinstance(op.value, Mapping):
                    raise InvalidArgumentError(
                        f"the value of {op.namespace!r}/{op.key!r} must be a mapping, "
                        f"got {type(op.value).__name__}"
                    )
                if op.index is not None:
                    extra["index"] = op.index if op.index is False else list(op.index)
                if self.embeddings is not None and op.index is not False:
                    wanted.extend((i, text) for text in self._texts(op.value, op.index))
            extras.append(extra)
        if wanted and self.embeddings is not None:
            vectors = self.embeddings.embed_documents([text for _, text in wanted])
            if len(vectors) != len(wanted):
                raise InvalidArgumentError(
                    f"the embedder returned {len(vectors)} vectors for {len(wanted)} texts"
                )
            for (i, _), vector in zip(wanted, vectors, strict=True):
                extras[i].setdefault("vectors", []).append([float(x) for x in vector])
        return [
            ItemChange(
                tuple(op.namespace),
                str(op.key),
                op.value,
                extra if op.value is not None else None,
                op.ttl * 60.0 if op.ttl is not None and op.value is not None else None,
            )
            for op, extra in zip(puts, extras, strict=True)
        ]

    # ------------------------------------------------------------------ ranking

    def _texts(self, value: Mapping[str, Any], index: Sequence[str] | None) -> list[str]:
        """The texts of ``value`` that ``index`` (else the configured fields) names."""
        fields: list[tuple[str, str | list[str]]] = (
            [(path, tokenize_path(path) if path != "$" else "$") for path in index]
            if index is not None
            else self._fields
        )
        out: list[str] = []
        for path, tokens in fields:
            if path == "$":
                out.extend(_strings(value))
            else:
                out.extend(get_text_at_path(dict(value), tokens))
        return [text for text in out if text]

    def _rank(self, query: str, items: list[StoredItem]) -> list[tuple[StoredItem, float | None]]:
        """``items`` ordered for ``query``: vector score, then BM25, then store order."""
        bm25 = _bm25(
            query,
            [
                self._texts(it.value, None if "index" not in it.extra else _index_of(it))
                for it in items
            ],
        )
        vector: list[float | None] = [None] * len(items)
        if self.embeddings is not None:
            query_vector = self.embeddings.embed_query(query)
            for i, it in enumerate(items):
                vectors = it.extra.get("vectors")
                if isinstance(vectors, list) and vectors:
                    vector[i] = max(_cosine(query_vector, v) for v in vectors)
        order = sorted(
            range(len(items)),
            key=lambda i: (
                vector[i] is None,
                -(vector[i] or 0.0),
                -bm25[i],
                i,
            ),
        )
        return [(items[i], vector[i] if vector[i] is not None else bm25[i]) for i in order]


# ---------------------------------------------------------------------- helpers


def _minutes(value: object, what: str) -> float | None:
    """``value`` as minutes when it is ``None`` or a positive number, else InvalidArgumentError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InvalidArgumentError(f"{what} must be a positive number of minutes, got {value!r}")
    return float(value)


def _index_of(item: StoredItem) -> list[str]:
    index = item.extra.get("index")
    return [str(path) for path in index] if isinstance(index, list) else []


def _strings(value: Any) -> list[str]:
    """Every string in ``value`` (object values and list items, depth first)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def _bm25(query: str, documents: list[list[str]]) -> list[float]:
    """Okapi BM25 of each document (its texts) for ``query``, over these documents."""
    wanted = list(dict.fromkeys(terms(query)))
    if not wanted or not documents:
        return [0.0] * len(documents)
    counts: list[dict[str, int]] = []
    lengths: list[int] = []
    held: dict[str, int] = dict.fromkeys(wanted, 0)
    for texts in documents:
        words = [word for text in texts for word in terms(text)]
        lengths.append(len(words))
        count: dict[str, int] = {}
        for word in words:
            if word in held:
                count[word] = count.get(word, 0) + 1
        for word in count:
            held[word] += 1
        counts.append(count)
    total = len(documents)
    average = max(1.0, sum(lengths) / total)
    idf = {t: math.log(1.0 + (total - n + 0.5) / (n + 0.5)) for t, n in held.items()}
    scores = []
    for count, length in zip(counts, lengths, strict=True):
        norm = _K1 * (1 - _B + _B * length / average)
        scores.append(sum(idf[t] * f * (_K1 + 1) / (f + norm) for t, f in count.items()))
    return scores


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na > 0 and nb > 0 else 0.0


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def _item(stored: StoredItem) -> Item:
    return Item(
        value=stored.value,
        key=stored.key,
        namespace=stored.namespace,
        created_at=_when(stored.created_at),
        updated_at=_when(stored.updated_at),
    )


def _search_item(stored: StoredItem, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=stored.namespace,
        key=stored.key,
        value=stored.value,
        created_at=_when(stored.created_at),
        updated_at=_when(stored.updated_at),
        score=score,
    )


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` matches a prefix/suffix condition (``"*"``: any label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidArgumentError(
            f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}"
        )
    return all(want == "*" or have == want for have, want in pairs)


def _check_filter(filter: Mapping[str, Any] | None) -> None:
    """Refuse an unknown ``$`` operator before anything runs."""

    def walk(value: Any, where: str) -> None:
        if isinstance(value, Mapping):
            for name, inner in value.items():
                if isinstance(name, str) and name.startswith("$"):
                    if name not in _OPERATORS:
                        raise InvalidArgumentError(
                            f"filter {where}: unsupported operator {name!r}; "
                            f"supported: {', '.join(sorted(_OPERATORS))}"
                        )
                    if name in _ORDERED and _number(inner) is None:
                        raise InvalidArgumentError(
                            f"filter {where}: {name} needs a number, got {inner!r}"
                        )
                else:
                    walk(inner, f"{where}.{name}")

    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise InvalidArgumentError(f"filter must be a mapping, got {type(filter).__name__}")
    for name, value in filter.items():
        walk(value, str(name))


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    if not filter:
        return True
    return all(_compare(value.get(name), wanted) for name, wanted in filter.items())


def _compare(have: Any, wanted: Any) -> bool:
    """Whether a stored value matches a filter value (JSONB-like, as ``InMemoryStore``)."""
    if isinstance(wanted, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in wanted):
            return all(_operator(have, op, operand) for op, operand in wanted.items())
        if not isinstance(have, Mapping):
            return False
        return all(_compare(have.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(have, list | tuple)
            and len(have) == len(wanted)
            and all(_compare(h, w) for h, w in zip(have, wanted, strict=True))
        )
    return bool(have == wanted)


def _operator(have: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(have == operand)
    if operator == "$ne":
        return bool(have != operand)
    left, right = _number(have), _number(operand)
    if left is None or right is None:
        return False  # a missing or non-numeric field does not match (InMemoryStore raises)
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right
