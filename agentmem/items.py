"""ItemStore: namespaced JSON items with timestamps, durable and shared by processes.

An item is a JSON object (``value``) stored under a *namespace* (a non-empty tuple of
strings, ``("users", "42", "prefs")``) and a *key* (a string). The store keeps, for
each, when it was created and last updated (epoch seconds) and the order it was
created in, and lets several processes (or, on PostgreSQL, several hosts) read and
write at once. It is the storage under :class:`agentmem.integrations.langgraph.AgentMemStore`
(a LangGraph ``BaseStore``), which adds LangGraph's filters, ranking and listing;
``Memory.items`` is the memory's store.

**Layout.** Each namespace is one document of the backend's ``"items"`` namespace (a
:class:`~agentmem._storage.documents.Documents`): on the embedded backend the file
``<root>/items/<hash>.json``, on PostgreSQL a row of ``agentmem_documents``. The
hash (BLAKE2b-128 of the namespace) makes a safe, bounded name of any namespace; the
document holds it in full (a read checks it)::

    {"format": "agentmem.items", "version": 1, "namespace": ["users", "42"],
     "items": [{"key", "value", "created_at", "updated_at", "extra"?}, ...]}

its items in creation order (an item put with a ttl also holds ``"ttl"`` seconds
and ``"expires_at"``). A namespace whose last item is deleted loses its document.
One more document, ``index`` (``items/index.json``), holds ``{"format":
"agentmem.items.index", "version": 1, "next": <int>, "namespaces": [[[...], <n>],
...], "expiring": <bool>}``: every namespace ever written (put or delete) with the
number of that first write, so a namespace keeps its place after its items are
deleted: the order a dict
of dicts keeps (LangGraph's ``InMemoryStore``).

Why a document per namespace: everything LangGraph does is scoped by a namespace
prefix, so a search or a listing reads the documents of the namespaces it selects
and never lists or reads items one by one; the cost is that a put rewrites its
namespace's document (O(items in that namespace); docs/items.md has measurements).

**Expiry.** An item put with ``ttl`` expires ``ttl`` seconds after that put or its
last :meth:`ItemStore.refresh`. Every read compares the expiry with
:attr:`ItemStore.clock`, so an expired item is gone at once for every process; its
bytes go with the next write to its namespace or :meth:`ItemStore.sweep`. Once an
item was put with a ttl (the index's ``"expiring"``), :meth:`ItemStore.namespaces`
reads each namespace to leave out those whose items all expired.

**Order.** :meth:`ItemStore.items` returns items by namespace (the order of its first
write), then in the order they were created: an update keeps its place, a
delete-then-put goes to the end.

**Changes.** :meth:`ItemStore.apply` makes a list of puts and deletes under the
store's one lock (lock -> re-read -> apply -> write, DESIGN section 8): the index
first when a namespace is new (a crash after it leaves only an unused number), then
each namespace touched, each write atomic. So concurrent writers in several
processes never lose a put, ``created_at`` survives updates, and a process killed at
any instant leaves every namespace either as it was or as written. On PostgreSQL the
whole change is one transaction.

**Reads** take no lock: :meth:`ItemStore.get` reads one namespace's document;
:meth:`ItemStore.items` lists the documents and reads those under the prefix (each
namespace as it was last written, not a snapshot of all of them together). A
document that cannot be parsed is set aside under the lock (after checking it still
holds the bytes that failed: a writer may have just replaced it), logged on
``agentmem.storage`` and listed in :attr:`ItemStore.moved_aside`; :meth:`get` raises
:class:`~agentmem.errors.CorruptStoreError` for it, :meth:`items` leaves it out and
reports it in :attr:`ItemStore.problems`, and the next write to that namespace starts
it afresh. A document written by a newer agentmem is left in place: :meth:`get` and
:meth:`apply` raise :class:`~agentmem.errors.FormatVersionError`, :meth:`items`
reports it and leaves it out. An unreadable index is set aside and rebuilt from the
namespaces.

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
    "check_namespace",
    "doc_key",
]

logger = logging.getLogger("agentmem.storage")

ITEM_FORMAT = "agentmem.items"
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
    """(its namespace's first-write number, its place in the namespace): the store order."""
    extra: dict[str, Any]
    """What the writer stored beside the value (an integration's per-item data)."""
    expires_at: float | None = None
    """When it expires (epoch seconds), for an item put with a ``ttl``; else ``None``."""


class ItemChange(NamedTuple):
    """A put (``value`` a mapping) or a delete (``value`` ``None``) for :meth:`ItemStore.apply`."""

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    extra: Mapping[str, Any] | None = None
    """JSON data kept beside the value (``None``: none)."""
    ttl: float | None = None
    """Seconds the item lives after this put and after each :meth:`ItemStore.refresh`
    (``None``: for ever)."""


class _Index(NamedTuple):
    next: int
    namespaces: dict[tuple[str, ...], int]
    expiring: bool = False
    """Whether an item was ever put with a ttl (then a listing reads the namespaces)."""


_Entry = dict[str, Any]  # one item as its document holds it: key, value, created_at, ...
_Space = dict[str, _Entry]  # a namespace's items by key, in creation order


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def doc_key(namespace: tuple[str, ...]) -> str:
    """The name of the document that holds the namespace's items."""
    return _hash(json.dumps(list(namespace), ensure_ascii=True).encode("ascii"))


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


_NUMBERS = (int, float)


def _entry(entry: object) -> _Entry:
    """``entry`` when it is a well-formed item entry, else InvalidArgumentError."""
    if not isinstance(entry, dict):
        raise InvalidArgumentError(f"an item entry must be an object, got {type(entry).__name__}")
    key = entry.get("key")
    if not isinstance(key, str):
        raise InvalidArgumentError(f"an item key must be a string, got {key!r}")
    if not isinstance(entry.get("value"), dict) or not isinstance(entry.get("extra", {}), dict):
        raise InvalidArgumentError(f"item {key!r}: value and extra must be objects")
    if type(entry.get("created_at")) not in _NUMBERS or type(entry.get("updated_at")) not in (
        _NUMBERS
    ):
        raise InvalidArgumentError(f"item {key!r}: timestamps must be numbers")
    if ("ttl" in entry or "expires_at" in entry) and not (
        type(entry.get("ttl")) in _NUMBERS and type(entry.get("expires_at")) in _NUMBERS
    ):
        raise InvalidArgumentError(f"item {key!r}: ttl and expires_at must be numbers")
    return entry


def _live(entry: _Entry, now: float) -> bool:
    """Whether ``entry`` has not expired at ``now``."""
    expires = entry.get("expires_at")
    return expires is None or float(expires) > now


def _check_ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0 or ttl == math.inf:
        raise InvalidArgumentError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return float(ttl)


class _Unreadable(Exception):
    """Internal: a document's bytes are not readable (the message says why)."""


def _decoded(data: bytes, kind: str, what: str) -> dict[str, Any]:
    """The JSON object of ``data`` in format ``kind``; _Unreadable, or a newer version's error."""
    try:
        raw = json.loads(data)
        check_format(raw, kind=kind, version=ITEM_VERSION, what=what)
    except FormatVersionError as exc:
        if exc.found is not None and exc.supported is not None and exc.found > exc.supported:
            raise
        raise _Unreadable(str(exc)) from exc
    except (ValueError, TypeError, AgentMemError) as exc:
        raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc
    assert isinstance(raw, dict)
    return raw


class ItemStore:
    """Namespaced JSON items with timestamps (see the module docstring).

    Args:
        documents: The backend's ``"items"`` documents, or ``None`` to keep the
            items in this object only (incognito).
        clock: Epoch seconds for ``created_at``/``updated_at`` and expiry (tests
            pass a fake).

    Attributes:
        documents: Where the items are.
        clock: The clock (may be replaced).
        moved_aside: Where unreadable documents were set aside.
        problems: One line per document left out of a read (each reported once).
    """

    def __init__(
        self, documents: Documents | None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.documents: Documents = documents if documents is not None else MemoryDocuments()
        self.clock = clock
        self._report = ProblemLog(logger)
        self.problems = self._report.lines
        self.moved_aside: builtins.list[Any] = []
        self._names: dict[str, tuple[str, ...]] = {}  # document -> namespace (never changes)
        self._names_lock = threading.Lock()

    # ------------------------------------------------------------------ reads

    def get(self, namespace: tuple[str, ...], key: str) -> StoredItem | None:
        """The item ``(namespace, key)``, or ``None``.

        Raises:
            InvalidArgumentError: a bad namespace or key.
            CorruptStoreError: its namespace's document could not be read; it was set aside.
            FormatVersionError: a newer agentmem wrote it (left in place).
            StorageError: the backend failed.
        """
        namespace, key = check_namespace(namespace), _check_key(key)
        name = doc_key(namespace)
        data = self.documents.read(name)
        if data is None:
            return None
        try:  # only the header and the entry asked for are checked: O(parse)
            raw = self._header(data, name)
            for position, entry in enumerate(raw["items"]):
                if isinstance(entry, dict) and entry.get("key") == key:
                    entry = _entry(entry)
                    if not _live(entry, self.clock()):
                        return None
                    return self._item(namespace, key, entry, (0, position))
            return None
        except FormatVersionError:
            raise
        except _Unreadable as exc:
            reason = str(exc)
        except (KeyError, TypeError, ValueError, AgentMemError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        found = self._recover(name, data, reason, raising=True)
        return self.get(namespace, key) if found is not None else None

    def items(self, prefix: tuple[str, ...] = ()) -> builtins.list[StoredItem]:
        """Every item whose namespace starts with ``prefix``, in store order.

        A namespace whose document cannot be read is left out and reported (module
        docstring).
        """
        prefix = tuple(prefix)
        spaces: builtins.list[tuple[tuple[str, ...], _Space]] = []
        for name in self._names_listed():
            known = self._names.get(name)
            if known is not None and known[: len(prefix)] != prefix:
                continue
            try:
                space = self._space(name, raising=False)
            except FormatVersionError as exc:
                self._report.report(f"{self.documents.describe(name)} left out: {exc}")
                continue
            if space is not None and space[0][: len(prefix)] == prefix:
                spaces.append(space)
        orders = self._orders([namespace for namespace, _ in spaces])
        spaces.sort(key=lambda space: orders[space[0]])
        now = self.clock()
        return [
            self._item(namespace, key, record, (orders[namespace], position))
            for namespace, space in spaces
            for position, (key, record) in enumerate(space.items())
            if _live(record, now)
        ]

    def namespaces(self) -> builtins.list[tuple[str, ...]]:
        """The namespaces that hold at least one item, in store order.

        Once an item was put with a ttl, this reads every namespace's document, to
        leave out those whose items have all expired.
        """
        held: builtins.list[tuple[str, ...]] = []
        expiring = self._read_index().expiring
        now = self.clock()
        for name in self._names_listed():
            namespace = self._names.get(name)
            if expiring:
                try:
                    space = self._space(name, raising=False)
                except FormatVersionError as exc:
                    self._report.report(f"{self.documents.describe(name)} left out: {exc}")
                    continue
                if space is not None and any(_live(e, now) for e in space[1].values()):
                    held.append(space[0])
                continue
            if namespace is None:
                try:
                    space = self._space(name, raising=False)
                except FormatVersionError as exc:
                    self._report.report(f"{self.documents.describe(name)} left out: {exc}")
                    continue
                if space is None:
                    continue
                namespace = space[0]
            held.append(namespace)
        orders = self._orders(held)
        return sorted(held, key=lambda namespace: orders[namespace])

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
        each put gets ``updated_at`` = now. A namespace not written before gets its
        place in the store order from its first change, a put or a delete.

        Raises:
            InvalidArgumentError: a bad namespace, key, value or extra (nothing written).
            FormatVersionError: a namespace written by a newer agentmem (nothing written).
            StoreLockedError: another writer held the lock past its timeout.
            StorageError: the backend failed (on files, the namespaces written before
                the failure stay; each one is whole).
        """
        grouped: dict[tuple[str, ...], builtins.list[tuple[str, _Entry | None]]] = {}
        now = self.clock()
        for change in changes:
            namespace = check_namespace(change.namespace)
            key = _check_key(change.key)
            record = None
            ttl = _check_ttl(change.ttl)
            if change.value is not None:
                if not isinstance(change.value, Mapping):
                    raise InvalidArgumentError(
                        f"item value must be a mapping, got {type(change.value).__name__}"
                    )
                value = _plain(change.value, "value", 0)
                extra = _plain(change.extra or {}, "extra", 0)
                record = {"key": key, "value": value}
                if extra:
                    record["extra"] = extra
                if ttl is not None:
                    record["ttl"] = ttl
            grouped.setdefault(namespace, []).append((key, record))
        if not grouped:
            return
        with self.documents.locked():
            now = self.clock()  # the time of the change, once the lock is held
            index = self._read_index(locked=True)
            spaces = {ns: self._live_space(ns, now) for ns in grouped}
            fresh = [ns for ns in grouped if ns not in index.namespaces]
            expiring = index.expiring or any(
                record is not None and "ttl" in record
                for edits in grouped.values()
                for _, record in edits
            )
            if fresh or expiring != index.expiring:
                orders = dict(index.namespaces)
                for offset, namespace in enumerate(fresh):
                    orders[namespace] = index.next + offset
                self._write_index(_Index(index.next + len(fresh), orders, expiring))
            for namespace, edits in grouped.items():
                space = spaces[namespace]
                for key, record in edits:
                    if record is None:
                        space.pop(key, None)
                    else:
                        created = space[key]["created_at"] if key in space else now
                        space[key] = {**record, "created_at": created, "updated_at": now}
                        if "ttl" in record:
                            space[key]["expires_at"] = now + record["ttl"]
                self._write_space(namespace, space)
        with self._names_lock:
            for namespace in grouped:
                self._names[doc_key(namespace)] = namespace

    def refresh(self, keys: Iterable[tuple[tuple[str, ...], str]]) -> None:
        """Restart the ttl of each item in ``keys`` that has one and has not expired.

        Under the lock, re-reading each namespace: an item changed or deleted
        meanwhile is refreshed as it is now, or not at all.
        """
        grouped: dict[tuple[str, ...], set[str]] = {}
        for namespace, key in keys:
            grouped.setdefault(check_namespace(namespace), set()).add(_check_key(key))
        if not grouped:
            return
        with self.documents.locked():
            now = self.clock()
            for namespace, wanted in grouped.items():
                name = doc_key(namespace)
                data = self.documents.read(name)
                space = self._locked_space(namespace) if data is not None else {}
                live = {k: e for k, e in space.items() if _live(e, now)}
                changed = len(live) != len(space)
                for key in wanted & live.keys():
                    if "ttl" in live[key]:
                        live[key] = {**live[key], "expires_at": now + float(live[key]["ttl"])}
                        changed = True
                if changed:
                    self._write_space(namespace, live)

    def sweep(self) -> int:
        """Delete every expired item now; how many were deleted."""
        removed = 0
        with self.documents.locked():
            now = self.clock()
            for name in self._names_listed():
                data = self.documents.read(name)
                if data is None:
                    continue
                try:
                    namespace, space = self._decode_space(data, name)
                except FormatVersionError:
                    continue  # a newer agentmem's: left alone
                except _Unreadable as exc:
                    self._set_aside(name, str(exc))
                    continue
                live = {k: e for k, e in space.items() if _live(e, now)}
                if len(live) != len(space):
                    removed += len(space) - len(live)
                    self._write_space(namespace, live)
        return removed

    # ------------------------------------------------------------------ namespaces

    def _live_space(self, namespace: tuple[str, ...], now: float) -> _Space:
        """Under the lock: the unexpired items of ``namespace``."""
        return {k: e for k, e in self._locked_space(namespace).items() if _live(e, now)}

    def _write_space(self, namespace: tuple[str, ...], space: _Space) -> None:
        """Under the lock: write ``space`` as the namespace's document (none when empty)."""
        if space:
            self.documents.write(doc_key(namespace), self._encode_space(namespace, space))
        else:
            self.documents.delete(doc_key(namespace))

    def _names_listed(self) -> builtins.list[str]:
        return [doc.key for doc in self.documents.list().found if doc.key != _INDEX_KEY]

    def _item(
        self, namespace: tuple[str, ...], key: str, entry: _Entry, order: tuple[int, int]
    ) -> StoredItem:
        return StoredItem(
            namespace,
            key,
            entry["value"],
            float(entry["created_at"]),
            float(entry["updated_at"]),
            order,
            entry.get("extra", {}),
            float(entry["expires_at"]) if "expires_at" in entry else None,
        )

    def _space(self, name: str, *, raising: bool) -> tuple[tuple[str, ...], _Space] | None:
        """The namespace and items of the document ``name`` (``None``: none, or set aside)."""
        data = self.documents.read(name)
        if data is None:
            return None
        try:
            return self._decode_space(data, name)
        except _Unreadable as exc:
            return self._recover(name, data, str(exc), raising=raising)

    def _locked_space(self, namespace: tuple[str, ...]) -> _Space:
        """Under the lock: the items of ``namespace`` (an unreadable document is set aside)."""
        name = doc_key(namespace)
        data = self.documents.read(name)
        if data is None:
            return {}
        try:
            return self._decode_space(data, name)[1]
        except _Unreadable as exc:
            self._set_aside(name, str(exc))
            return {}

    def _header(self, data: bytes, name: str) -> dict[str, Any]:
        """The decoded document ``name`` with its format and namespace checked."""
        raw = _decoded(data, ITEM_FORMAT, "items of a namespace")
        try:
            namespace = check_namespace(raw["namespace"])
            if not isinstance(raw["items"], list):
                raise InvalidArgumentError("items must be a list")
        except (KeyError, AgentMemError) as exc:
            raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc
        if doc_key(namespace) != name:
            raise _Unreadable(f"it holds the namespace {namespace!r}, which is not its name")
        with self._names_lock:
            self._names.setdefault(name, namespace)
        raw["namespace"] = namespace
        return raw

    def _decode_space(self, data: bytes, name: str) -> tuple[tuple[str, ...], _Space]:
        raw = self._header(data, name)
        space: _Space = {}
        try:
            for entry in raw["items"]:
                key = _entry(entry)["key"]
                if key in space:
                    raise InvalidArgumentError(f"item {key!r} is there twice")
                space[key] = entry
        except AgentMemError as exc:
            raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc
        namespace: tuple[str, ...] = raw["namespace"]
        return namespace, space

    def _encode_space(self, namespace: tuple[str, ...], space: _Space) -> bytes:
        return _encode(
            {
                "format": ITEM_FORMAT,
                "version": ITEM_VERSION,
                "namespace": list(namespace),
                "items": list(space.values()),
            }
        )

    def _recover(
        self, name: str, data: bytes, reason: str, *, raising: bool
    ) -> tuple[tuple[str, ...], _Space] | None:
        """Set ``name`` aside under the lock if it still holds ``data``; else read it again."""
        with self.documents.locked():
            now = self.documents.read(name)
            if now is None:
                return None
            if now != data:
                try:
                    return self._decode_space(now, name)
                except _Unreadable as exc:
                    reason = str(exc)
            where = self._set_aside(name, reason)
        if raising:
            raise CorruptStoreError(
                f"{self.documents.describe(name)} is unreadable ({reason}); set aside to {where}"
            )
        return None

    def _set_aside(self, name: str, reason: str) -> object:
        what = f"items document {self.documents.describe(name)}"
        moved = self.documents.set_aside(name, what=what, reason=reason, logger=logger)
        self.moved_aside.append(moved.where)
        self._report.report(moved.message)
        return moved.where

    # ------------------------------------------------------------------ the index

    def _orders(self, namespaces: builtins.list[tuple[str, ...]]) -> dict[tuple[str, ...], int]:
        """The place of each of ``namespaces`` (the index is repaired if it misses one)."""
        index = self._read_index()
        if any(namespace not in index.namespaces for namespace in namespaces):
            with self.documents.locked():
                index = self._read_index(locked=True)
                if any(namespace not in index.namespaces for namespace in namespaces):
                    index = self._rebuild(index)
        return index.namespaces

    def _write_index(self, index: _Index) -> None:
        self.documents.write(
            _INDEX_KEY,
            _encode(
                {
                    "format": INDEX_FORMAT,
                    "version": ITEM_VERSION,
                    "next": index.next,
                    "namespaces": [[list(ns), order] for ns, order in index.namespaces.items()],
                    "expiring": index.expiring,
                }
            ),
        )

    def _decode_index(self, data: bytes) -> _Index:
        raw = _decoded(data, INDEX_FORMAT, "items index")
        try:
            counter = raw["next"]
            if type(counter) is not int:
                raise InvalidArgumentError("next must be an integer")
            orders: dict[tuple[str, ...], int] = {}
            for namespace, order in raw["namespaces"]:
                if type(order) is not int:
                    raise InvalidArgumentError("a namespace's place must be an integer")
                orders[check_namespace(namespace)] = order
            expiring = raw.get("expiring", False)
            if not isinstance(expiring, bool):
                raise InvalidArgumentError("expiring must be a boolean")
        except (KeyError, TypeError, ValueError, AgentMemError) as exc:
            raise _Unreadable(f"{type(exc).__name__}: {exc}") from exc
        return _Index(counter, orders, expiring)

    def _read_index(self, *, locked: bool = False) -> _Index:
        """The index; under the lock, an unreadable one is set aside and rebuilt."""
        data = self.documents.read(_INDEX_KEY)
        if data is None:
            return _Index(0, {})
        try:
            return self._decode_index(data)
        except _Unreadable as exc:
            if not locked:
                with self.documents.locked():
                    return self._read_index(locked=True)
            if self.documents.read(_INDEX_KEY) != data:
                return self._read_index(locked=True)
            self._set_aside(_INDEX_KEY, str(exc))
            return self._rebuild(_Index(0, {}))

    def _rebuild(self, index: _Index) -> _Index:
        """Under the lock: ``index`` plus every namespace that has a document, written.

        A namespace it did not know takes its place after the known ones, by the
        creation time of its oldest item.
        """
        orders = dict(index.namespaces)
        counter = max([index.next, *(order + 1 for order in orders.values())])
        expiring = index.expiring
        found: builtins.list[tuple[float, tuple[str, ...]]] = []
        for name in self._names_listed():
            data = self.documents.read(name)
            if data is None:
                continue
            try:
                namespace, space = self._decode_space(data, name)
            except (_Unreadable, FormatVersionError):
                continue  # reported by the read that meets it
            expiring = expiring or any("ttl" in e for e in space.values())
            if namespace not in orders:
                found.append((min(float(e["created_at"]) for e in space.values()), namespace))
        for _, namespace in sorted(found):  # the oldest item's namespace first
            orders[namespace], counter = counter, counter + 1
        rebuilt = _Index(counter, orders, expiring)
        self._write_index(rebuilt)
        self._report.report(
            f"items index {self.documents.describe(_INDEX_KEY)} rebuilt: {len(orders)} namespaces"
        )
        return rebuilt

    def __repr__(self) -> str:
        return f"ItemStore({self.documents.location})"
