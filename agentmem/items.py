"""ItemStore: namespaced JSON items with timestamps, durable and shared by processes.

An item is a JSON object (``value``) stored under a *namespace* (a non-empty tuple of
strings, ``("users", "42", "prefs")``) and a *key* (a string). The store keeps, for
each, when it was created and last updated (epoch seconds) and the order it was
created in, and lets several processes (or, on PostgreSQL, several hosts) read and
write at once. It is the storage under :class:`agentmem.integrations.langgraph.AgentMemStore`
(a LangGraph ``BaseStore``), which adds LangGraph's filters, ranking and listing;
``Memory.items`` is the memory's store.

**Layout.** Each item is one document of the backend's ``"items"`` namespace (a
:class:`~agentmem._storage.documents.Documents`): on the embedded backend the file
``<root>/items/<ns hash>-<key hash>.json``, on PostgreSQL a row of
``agentmem_documents``. A document is ``{"format": "agentmem.item", "version": 1,
"namespace": [...], "key", "value", "created_at", "updated_at", "seq", "extra"}``:
the hashes (BLAKE2b-128 of the namespace and of the key) make a safe, bounded name of
any namespace and key, and the document holds them in full (a read checks them).
One more document, ``index`` (``items/index.json``), holds ``{"format":
"agentmem.items.index", "version": 1, "next": <int>, "namespaces": [[[...], <order>],
...]}``: the next creation number, and every namespace ever used with the creation
number of its first item. A namespace keeps its place after its items are deleted,
so the order is the one a dict of dicts keeps (LangGraph's ``InMemoryStore``).

**Order.** :meth:`ItemStore.items` returns items by (namespace order, creation
number): a namespace's items in the order they were created, an update keeping its
place and a delete-then-put going to the end.

**Changes.** :meth:`ItemStore.apply` makes a list of puts and deletes under the
store's one lock (lock -> re-read -> apply -> write, DESIGN section 8): the index
first (a crash after it leaves only an unused number), then each item, each write
atomic. So concurrent writers in several processes never lose a put, ``created_at``
survives updates, and a process killed at any instant leaves every item either as
it was or as written. On PostgreSQL the whole change is one transaction.

**Reads** take no lock: :meth:`ItemStore.get` reads one document;
:meth:`ItemStore.items` lists the documents and reads those under the namespace
prefix (each item as it was last written, not a snapshot of all of them together).
A document that cannot be parsed is set aside under the lock (after checking it
still holds the bytes that failed: a writer may have just replaced it), logged on
``agentmem.storage`` and listed in :attr:`ItemStore.moved_aside`; :meth:`get`
raises :class:`~agentmem.errors.CorruptStoreError` for it, :meth:`items` leaves it
out and reports it in :attr:`ItemStore.problems`. An item written by a newer
agentmem is left in place and reported the same way. An unreadable index is set
aside and rebuilt from the items.

Values are stored exactly: JSON objects with string keys, strings, finite numbers,
booleans, ``None``, lists (a tuple comes back as a list). Anything else raises
:class:`~agentmem.errors.InvalidArgumentError` and nothing is written. Values are not
secret-scrubbed: they are the host's data, returned as given.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from agentmem._storage.documents import Documents, MemoryDocuments
from agentmem._storage.formats import check_format
from agentmem._storage.problems import ProblemLog
from agentmem.errors import (
    AgentMemError,
    CorruptStoreError,
    FormatVersionError,
    InvalidArgumentError,
)

__all__ = [
    "INDEX_FORMAT",
    "ITEM_FORMAT",
    "ITEM_VERSION",
    "ItemChange",
    "ItemStore",
    "StoredItem",
]

logger = logging.getLogger("agentmem.storage")

ITEM_FORMAT = "agentmem.item"
INDEX_FORMAT = "agentmem.items.index"
ITEM_VERSION = 1
_INDEX_KEY = "index"
MAX_DEPTH = 100
"""Deepest nesting a value may have."""


class StoredItem(NamedTuple):
    """One item as the store holds it."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    """The JSON object stored (a fresh copy on every read)."""
    created_at: float
    """When it was first put (epoch seconds); kept by updates."""
    updated_at: float
    """When it was last put (epoch seconds)."""
    order: tuple[int, int]
    """(its namespace's creation number, its own): :meth:`ItemStore.items` sorts by it."""
    extra: dict[str, Any]
    """What the writer stored beside the value (an integration's per-item data)."""


class ItemChange(NamedTuple):
    """A put (``value`` a mapping) or a delete (``value`` ``None``) for :meth:`ItemStore.apply`."""

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    extra: Mapping[str, Any] | None = None
    """JSON data kept beside the value (``None``: none)."""


class _Index(NamedTuple):
    next: int
    namespaces: dict[tuple[str, ...], int]


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _ns_hash(namespace: tuple[str, ...]) -> str:
    return _hash(json.dumps(list(namespace), ensure_ascii=True).encode("ascii"))


def doc_key(namespace: tuple[str, ...], key: str) -> str:
    """The document name of the item ``(namespace, key)``."""
    return f"{_ns_hash(namespace)}-{_hash(key.encode('utf-8', 'surrogatepass'))}"


def check_namespace(namespace: object, what: str = "namespace") -> tuple[str, ...]:
    """``namespace`` as a tuple when it is a non-empty tuple/list of non-empty strings.

    Raises:
        InvalidArgumentError: anything else, naming what was wrong.
    """
    if isinstance(namespace, str) or not isinstance(namespace, tuple | list):
        raise InvalidArgumentError(
            f"{what} must be a tuple of strings, got {type(namespace).__name__}"
        )
    if not namespace:
        raise InvalidArgumentError(f"{what} must not be empty")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidArgumentError(
                f"{what} labels must be non-empty strings, got {label!r} in {tuple(namespace)!r}"
            )
    return tuple(namespace)


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise InvalidArgumentError(f"item key must be a string, got {type(key).__name__}")
    return key


def _plain(value: Any, where: str, depth: int) -> Any:
    """A deep copy of ``value`` in plain JSON types, or InvalidArgumentError naming ``where``."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{where}: {value!r} is not a JSON number")
        return float(value)
    if depth >= MAX_DEPTH:
        raise InvalidArgumentError(f"{where}: nested more than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise InvalidArgumentError(
                    f"{where}: object keys must be strings, got {type(name).__name__} {name!r}"
                )
            out[name] = _plain(item, f"{where}.{name}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise InvalidArgumentError(f"{where}: {type(value).__name__} is not JSON-serialisable")


def _encode(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class _Unreadable(Exception):
    """Internal: a document's bytes are not a readable item (the message says why)."""


class ItemStore:
    """Namespaced JSON items with timestamps (see the module docstring).

    Args:
        documents: The backend's ``"items"`` documents, or ``None`` to keep the
            items in this object only (incognito).
        clock: Epoch seconds for ``created_at``/``updated_at`` (tests pass a fake).

    Attributes:
        moved_aside: Where unreadable documents were set aside.
        problems: One line per document left out of a read (each reported once).
    """

    def __init__(
        self, documents: Documents | None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.documents: Documents = documents if documents is not None else MemoryDocuments()
        self._clock = clock
        self._report = ProblemLog(logger)
        self.problems = self._report.lines
        self.moved_aside: builtins.list[Any] = []
        self._names: dict[str, tuple[str, ...]] = {}  # ns hash -> namespace (immutable facts)
        self._names_lock = threading.Lock()

    # ------------------------------------------------------------------ reads

    def get(self, namespace: tuple[str, ...], key: str) -> StoredItem | None:
        """The item ``(namespace, key)``, or ``None``.

        Raises:
            InvalidArgumentError: a bad namespace or key.
            CorruptStoreError: its document could not be read; it was set aside.
            FormatVersionError: a newer agentmem wrote it (left in place).
            StorageError: the backend failed.
        """
        namespace, key = check_namespace(namespace), _check_key(key)
        name = doc_key(namespace, key)
        data = self.documents.read(name)
        if data is None:
            return None
        try:
            return self._decode(data, name)
        except _Unreadable as exc:
            return self._recover(name, data, str(exc), raising=True)

    def items(self, prefix: tuple[str, ...] = ()) -> builtins.list[StoredItem]:
        """Every item whose namespace starts with ``prefix``, in store order.

        An item that cannot be read is left out and reported (module docstring).
        """
        prefix = tuple(prefix)
        wanted = [
            doc.key
            for doc in self.documents.list().found
            if doc.key != _INDEX_KEY and self._starts(doc.key.partition("-")[0], prefix)
        ]
        found: builtins.list[StoredItem] = []
        for name in wanted:
            data = self.documents.read(name)
            if data is None:
                continue  # deleted since the listing
            try:
                item: StoredItem | None = self._decode(data, name)
            except _Unreadable as exc:
                item = self._recover(name, data, str(exc), raising=False)
            except FormatVersionError as exc:
                self._report.report(f"{self.documents.describe(name)} left out: {exc}")
                continue
            if item is not None and item.namespace[: len(prefix)] == prefix:
                found.append(item)
        orders = self._read_index().namespaces
        if any(item.namespace not in orders for item in found):
            orders = self._repair_index().namespaces
        found.sort(key=lambda item: (orders.get(item.namespace, item.order[0]), item.order[1]))
        return [
            item._replace(order=(orders.get(item.namespace, item.order[0]), item.order[1]))
            for item in found
        ]

    def namespaces(self) -> builtins.list[tuple[str, ...]]:
        """The namespaces that hold at least one item, in store order."""
        hashes = {
            doc.key.partition("-")[0]
            for doc in self.documents.list().found
            if doc.key != _INDEX_KEY
        }
        index = self._read_index()
        if any(h not in self._names for h in hashes):
            self._learn(index)
            if any(h not in self._names for h in hashes):
                index = self._repair_index()
                self._learn(index)
        held = [self._names[h] for h in hashes if h in self._names]
        return sorted(held, key=lambda ns: index.namespaces.get(ns, 0))

    # ------------------------------------------------------------------ writes

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Store ``value`` under ``(namespace, key)`` (see :meth:`apply`)."""
        if value is None:
            raise InvalidArgumentError("value must be a mapping; use delete() to remove an item")
        self.apply([ItemChange(namespace, key, value, extra)])

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Remove the item ``(namespace, key)`` if there is one."""
        self.apply([ItemChange(namespace, key, None)])

    def apply(self, changes: Iterable[ItemChange]) -> None:
        """Make the puts and deletes in ``changes``, in order, under the store's lock.

        Every change is checked before anything is written, so a bad one writes
        nothing. A put of an existing item keeps its ``created_at`` and its place;
        each put gets ``updated_at`` = now.

        Raises:
            InvalidArgumentError: a bad namespace, key, value or extra (nothing written).
            StoreLockedError: another writer held the lock past its timeout.
            StorageError: the backend failed (on files, the changes written before
                the failure stay; each one is whole).
        """
        checked: builtins.list[tuple[tuple[str, ...], str, dict[str, Any] | None, dict[str, Any]]]
        checked = []
        for change in changes:
            namespace = check_namespace(change.namespace)
            key = _check_key(change.key)
            value = None
            if change.value is not None:
                if not isinstance(change.value, Mapping):
                    raise InvalidArgumentError(
                        f"item value must be a mapping, got {type(change.value).__name__}"
                    )
                value = _plain(change.value, "value", 0)
            extra = _plain(change.extra or {}, "extra", 0)
            checked.append((namespace, key, value, extra))
        if not checked:
            return
        with self.documents.locked():
            index = self._read_index(locked=True)
            now = self._clock()
            plans: builtins.list[tuple[str, bytes | None]] = []
            counter, orders, touched = index.next, dict(index.namespaces), False
            current: dict[str, StoredItem | None] = {}
            for namespace, key, value, extra in checked:
                name = doc_key(namespace, key)
                if name not in current:
                    current[name] = self._locked_read(name)
                old = current[name]
                if namespace not in orders:  # a namespace's place: the first write naming it
                    orders[namespace], counter, touched = counter, counter + 1, True
                if value is None:
                    current[name] = None
                    plans.append((name, None))
                    continue
                if old is None:
                    seq, counter, created, touched = counter, counter + 1, now, True
                else:
                    seq, created = old.order[1], old.created_at
                item = StoredItem(namespace, key, value, created, now, (0, seq), extra)
                current[name] = item
                plans.append((name, self._encode_item(item)))
            if touched:
                self.documents.write(_INDEX_KEY, self._encode_index(_Index(counter, orders)))
            for name, data in plans:
                if data is None:
                    self.documents.delete(name)
                else:
                    self.documents.write(name, data)
        with self._names_lock:
            for namespace, *_ in checked:
                self._names[_ns_hash(namespace)] = namespace

    # ------------------------------------------------------------------ documents

    def _starts(self, ns_hash: str, prefix: tuple[str, ...]) -> bool:
        """Whether the namespace of ``ns_hash`` may start with ``prefix`` (unknown: maybe)."""
        known = self._names.get(ns_hash)
        return known is None or known[: len(prefix)] == prefix

    def _learn(self, index: _Index) -> None:
        with self._names_lock:
            for namespace in index.namespaces:
                self._names.setdefault(_ns_hash(namespace), namespace)

    def _decode(self, data: bytes, name: str) -> StoredItem:
        try:
            raw = json.loads(data)
            check_format(raw, kind=ITEM_FORMAT, version=ITEM_VERSION, what="item")
            namespace = check_namespace(raw["namespace"])
            key = _check_key(raw["key"])
            value, extra = raw["value"], raw.get("extra", {})
            created, updated, seq = raw["created_at"], raw["updated_at"], raw["seq"]
            if not isinstance(value, dict) or not isinstance(extra, dict):
                raise InvalidArgumentError("value and extra must be objects")
            if not all(type(t) in (int, float) for t in (created, updated)):
                raise InvalidArgumentError("created_at/updated_at must be numbers")
            if type(seq) is not int:
                raise InvalidArgumentError("seq must be an integer")
        except FormatVersionError as exc:
            if exc.found is not None and exc.supported is not None and exc.found > exc.supported:
                raise
            raise _Unreadable(str(exc)) from exc
        except (ValueError, KeyError, TypeError, AgentMemError) as exc:
            raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc
        if doc_key(namespace, key) != name:
            raise _Unreadable(f"it holds {namespace!r}/{key!r}, which is not its name")
        with self._names_lock:
            self._names.setdefault(name.partition("-")[0], namespace)
        return StoredItem(namespace, key, value, float(created), float(updated), (0, seq), extra)

    def _encode_item(self, item: StoredItem) -> bytes:
        return _encode(
            {
                "format": ITEM_FORMAT,
                "version": ITEM_VERSION,
                "namespace": list(item.namespace),
                "key": item.key,
                "value": item.value,
                "created_at": item.created_at,
                "updated_at": item.updated_at,
                "seq": item.order[1],
                "extra": item.extra,
            }
        )

    def _locked_read(self, name: str) -> StoredItem | None:
        """The item ``name`` as the lock holder sees it (an unreadable one is set aside)."""
        data = self.documents.read(name)
        if data is None:
            return None
        try:
            return self._decode(data, name)
        except _Unreadable as exc:
            self._set_aside(name, str(exc))
            return None

    def _recover(self, name: str, data: bytes, reason: str, *, raising: bool) -> StoredItem | None:
        """Set ``name`` aside under the lock if it still holds ``data``; else read it again."""
        with self.documents.locked():
            now = self.documents.read(name)
            if now is None:
                return None
            if now != data:
                try:
                    return self._decode(now, name)
                except _Unreadable as exc:
                    data, reason = now, str(exc)
            where = self._set_aside(name, reason)
        if raising:
            raise CorruptStoreError(
                f"{self.documents.describe(name)} is unreadable ({reason}); set aside to {where}"
            )
        return None

    def _set_aside(self, name: str, reason: str) -> object:
        what = f"item document {self.documents.describe(name)}"
        moved = self.documents.set_aside(name, what=what, reason=reason, logger=logger)
        self.moved_aside.append(moved.where)
        self._report.report(moved.message)
        return moved.where

    # ------------------------------------------------------------------ the index

    def _encode_index(self, index: _Index) -> bytes:
        return _encode(
            {
                "format": INDEX_FORMAT,
                "version": ITEM_VERSION,
                "next": index.next,
                "namespaces": [[list(ns), order] for ns, order in index.namespaces.items()],
            }
        )

    def _decode_index(self, data: bytes) -> _Index:
        try:
            raw = json.loads(data)
            check_format(raw, kind=INDEX_FORMAT, version=ITEM_VERSION, what="items index")
            counter = raw["next"]
            if type(counter) is not int:
                raise InvalidArgumentError("next must be an integer")
            orders: dict[tuple[str, ...], int] = {}
            for namespace, order in raw["namespaces"]:
                if type(order) is not int:
                    raise InvalidArgumentError("a namespace order must be an integer")
                orders[check_namespace(namespace)] = order
        except FormatVersionError as exc:
            if exc.found is not None and exc.supported is not None and exc.found > exc.supported:
                raise
            raise _Unreadable(str(exc)) from exc
        except (ValueError, KeyError, TypeError, AgentMemError) as exc:
            raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc
        return _Index(counter, orders)

    def _read_index(self, *, locked: bool = False) -> _Index:
        data = self.documents.read(_INDEX_KEY)
        if data is None:
            if locked and self._has_items():
                return self._rebuild()
            return _Index(0, {})
        try:
            return self._decode_index(data)
        except _Unreadable as exc:
            if not locked:
                return self._repair_index()
            self._set_aside(_INDEX_KEY, str(exc))
            return self._rebuild()

    def _has_items(self) -> bool:
        return any(doc.key != _INDEX_KEY for doc in self.documents.list().found)

    def _repair_index(self) -> _Index:
        """Under the lock: the index, rebuilt (and written) when it misses a namespace."""
        with self.documents.locked():
            index = self._read_index(locked=True)
            items = self._all_locked()
            if all(item.namespace in index.namespaces for item in items):
                return index
            rebuilt = self._rebuild(items, index)
            return rebuilt

    def _all_locked(self) -> builtins.list[StoredItem]:
        out = []
        for doc in self.documents.list().found:
            if doc.key != _INDEX_KEY and (item := self._locked_read(doc.key)) is not None:
                out.append(item)
        return out

    def _rebuild(
        self, items: builtins.list[StoredItem] | None = None, index: _Index | None = None
    ) -> _Index:
        """Under the lock: an index that knows every item's namespace, written."""
        items = self._all_locked() if items is None else items
        orders = dict(index.namespaces) if index is not None else {}
        counter = index.next if index is not None else 0
        for item in sorted(items, key=lambda it: it.order[1]):
            orders.setdefault(item.namespace, item.order[1])
            counter = max(counter, item.order[1] + 1)
        rebuilt = _Index(counter, orders)
        self.documents.write(_INDEX_KEY, self._encode_index(rebuilt))
        self._report.report(
            f"items index {self.documents.describe(_INDEX_KEY)} rebuilt from {len(items)} items"
        )
        return rebuilt

    def __repr__(self) -> str:
        return f"ItemStore({self.documents.location})"
