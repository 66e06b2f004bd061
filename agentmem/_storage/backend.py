"""Which backend a memory's stores run on, and the embedded file layout.

A :class:`Backend` hands each store where it lives: the document stores their
:class:`~agentmem._storage.documents.Documents` by namespace (``"ltm"``: long-term
memory, one document; ``"notes"``: one document per key; ``"topics"``: one per
topic; ``"items"``: the namespaced JSON items of :class:`agentmem.items.ItemStore`,
one per item plus their index), and the sessions store its database
(:meth:`Backend.sessions_database`: messages, state, billing, threads and the
recall index). Semantic memory follows the memory's backend
(:class:`~agentmem.semantic.LocalMemoryClient` reads ``Memory.backend``). The
stores and the facade never know which backend they run on.

* :class:`EmbeddedBackend` (the default): ``<root>/sessions.sqlite`` and the
  hand-editable files under the memory root, exactly as they have always been:
  ``<root>/ltm.json``, ``<root>/memory/<key>.json``, ``<root>/memories/<topic>.md``,
  ``<root>/items/<namespace hash>.json`` (made on the first item), each store locked by
  its file in ``<root>/locks/`` (:func:`ltm_files`, :func:`note_files`,
  :func:`topic_files`, :func:`item_files`).
* :class:`PostgresBackend`: one PostgreSQL database for several agent hosts
  sharing one memory; every store shares its one connection pool
  (:mod:`agentmem._storage.postgres`); the documents are rows of one table
  (:mod:`agentmem._storage.pg_documents`). psycopg is imported only when one is
  made, so ``import agentmem`` never needs it.

:func:`open_backend` chooses: ``None``, ``"embedded"`` or ``"sqlite"`` is the
embedded backend; a ``postgresql://`` or ``postgres://`` DSN is PostgreSQL;
with ``backend=None`` the ``AGENTMEM_BACKEND`` environment variable decides.
Anything else raises :class:`~agentmem.errors.ConfigurationError` naming the
value with its password masked.

On every backend the time machine's blobs and the trim checkpoint stay under
the root by design: they describe that disk.
"""

from __future__ import annotations

import os
import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from agentmem._storage.documents import Documents, FileDocuments
from agentmem._storage.keys import (
    NOTE_SUFFIX,
    PROGRESS_FILE,
    PROGRESS_KEY,
    TOPIC_SUFFIX,
    TOPICS_DIR,
    check_key,
    check_topic,
)
from agentmem._storage.locks import DEFAULT_LOCK_TIMEOUT
from agentmem._storage.sqlite import Durability
from agentmem.errors import ConfigurationError, UnsafePathError

if TYPE_CHECKING:
    from agentmem._storage.pg_documents import PgDocumentStore
    from agentmem._storage.postgres import PgDatabase

__all__ = [
    "BACKEND_ENV",
    "ITEMS_DIR",
    "LTM_FILE",
    "NAMESPACES",
    "NOTES_DIR",
    "SESSIONS_FILE",
    "Backend",
    "EmbeddedBackend",
    "PostgresBackend",
    "item_files",
    "ltm_files",
    "mask_dsn",
    "note_files",
    "open_backend",
    "progress_files",
    "topic_files",
]

BACKEND_ENV = "AGENTMEM_BACKEND"
"""The environment variable read when ``Memory(backend=None)``."""
LTM_FILE = "ltm.json"
SESSIONS_FILE = "sessions.sqlite"
NOTES_DIR = "memory"
ITEMS_DIR = "items"
ITEM_SUFFIX = ".json"
NAMESPACES = ("ltm", "notes", "topics", "items")
"""The document stores a backend serves."""
_EMBEDDED = ("embedded", "sqlite")
_PG_SCHEMES = ("postgresql://", "postgres://")


# ---------------------------------------------------------------------- the file layout


def ltm_files(
    path: Path,
    *,
    root: Path | None = None,
    lock_path: Path | None = None,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> FileDocuments:
    """Long-term memory as the one file ``path`` (key ``"ltm"``), locked by
    ``<path's dir>/locks/<name>.lock`` unless told otherwise."""
    return FileDocuments(
        path.parent,
        root=root if root is not None else path.parent,
        suffix=None,
        aliases={"ltm": path.name},
        lock_path=lock_path or path.parent / "locks" / f"{path.name}.lock",
        lock_what="long-term memory",
        timeout=timeout,
        name=lambda _key: f"long-term memory {path}",
        inside="the memory root",
    )


def note_files(directory: Path, root: Path | None = None) -> FileDocuments:
    """The notes as ``<directory>/<key>.json``, locked by ``<root>/locks/notes.lock``.

    A file whose name is not a safe key (:func:`~agentmem._storage.keys.check_key`)
    is not a note, and is not reported.
    """
    top = root if root is not None else directory.parent
    return FileDocuments(
        directory,
        root=top,
        suffix=NOTE_SUFFIX,
        key_of=lambda name: check_key(name[: -len(NOTE_SUFFIX)]),
        lock_path=top / "locks" / "notes.lock",
        lock_what="notes",
        name=lambda key: f"note {key!r}",
        inside="the notes directory",
        entry="note file",
    )


def progress_files(directory: Path, root: Path | None = None) -> FileDocuments:
    """The trim checkpoint ``<directory>/session_progress.md`` (key ``"session_progress"``),
    read-only for the notes; it stays on the local disk on every backend."""
    top = root if root is not None else directory.parent
    return FileDocuments(
        directory,
        root=top,
        suffix=None,
        aliases={PROGRESS_KEY: PROGRESS_FILE},
        lock_path=top / "locks" / "notes.lock",
        lock_what="notes",
        name=lambda key: f"note {key!r}",
        inside="the notes directory",
        entry="note file",
    )


def topic_files(directory: Path, root: Path | None = None) -> FileDocuments:
    """The topics as ``<directory>/<topic>.md``, locked by ``<root>/locks/memories.lock``.

    A file named ``*.md`` whose name is not a safe topic is reported and left in place.
    """
    top = root if root is not None else directory.parent
    return FileDocuments(
        directory,
        root=top,
        suffix=TOPIC_SUFFIX,
        key_of=check_topic,
        lock_path=top / "locks" / "memories.lock",
        lock_what="topic files",
        name=lambda topic: f"topic {topic!r}",
        inside="the topics directory",
        entry="topic file",
        report_unsafe=True,
    )


def _item_key(file_name: str) -> str:
    key = file_name[: -len(ITEM_SUFFIX)]
    if not _ITEM_KEY.fullmatch(key):
        raise UnsafePathError(key, ITEMS_DIR, "not an item document name")
    return key


_ITEM_KEY = re.compile(r"index|[0-9a-f]{32}")


def item_files(directory: Path, root: Path | None = None) -> FileDocuments:
    """The items as ``<directory>/<key>.json``, locked by ``<root>/locks/items.lock``.

    Only ``index.json`` and ``<32 hex>.json`` are documents (the names
    :class:`agentmem.items.ItemStore` gives them); any other file is left alone.
    """
    top = root if root is not None else directory.parent
    return FileDocuments(
        directory,
        root=top,
        suffix=ITEM_SUFFIX,
        key_of=_item_key,
        lock_path=top / "locks" / "items.lock",
        lock_what="items",
        name=lambda key: f"item document {key!r}",
        inside="the items directory",
        entry="item file",
    )


# ---------------------------------------------------------------------- backends


class Backend(ABC):
    """Where a memory's document stores live.

    Attributes:
        name: ``"embedded"``, or the PostgreSQL DSN with its password masked.
    """

    name: str

    @abstractmethod
    def documents(self, namespace: str) -> Documents:
        """The documents of one store: ``"ltm"``, ``"notes"``, ``"topics"`` or ``"items"``.

        Raises:
            ConfigurationError: an unknown namespace.
        """

    @abstractmethod
    def sessions_database(self) -> Path | PgDatabase:
        """Where the sessions store (messages, state, billing, threads, recall index)
        lives: a SQLite file, or a PostgreSQL database shared with the other stores."""

    def close(self) -> None:  # noqa: B027 (the embedded backend holds nothing open)
        """Release connections (idempotent)."""

    def _check(self, namespace: str) -> None:
        if namespace not in NAMESPACES:
            raise ConfigurationError(
                f"unknown document namespace {namespace!r}; expected one of {NAMESPACES}"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class EmbeddedBackend(Backend):
    """The files under ``root``: ``ltm.json``, ``memory/<key>.json``, ``memories/<topic>.md``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = "embedded"

    def sessions_database(self) -> Path:
        return self.root / SESSIONS_FILE

    def documents(self, namespace: str) -> Documents:
        self._check(namespace)
        if namespace == "ltm":
            return ltm_files(self.root / LTM_FILE, root=self.root, timeout=60.0)
        if namespace == "notes":
            return note_files(self.root / NOTES_DIR, self.root)
        if namespace == "items":
            return item_files(self.root / ITEMS_DIR, self.root)
        return topic_files(self.root / TOPICS_DIR, self.root)


class PostgresBackend(Backend):
    """Every document store in one PostgreSQL database (``dsn``).

    The connection pool and the schema are made on the first
    :meth:`documents` call, so a bad DSN or an unreachable server raises
    :class:`~agentmem.errors.StorageError` from there (the ``Memory``
    constructor makes its stores at once, so it raises from ``Memory(...)``).
    """

    def __init__(self, dsn: str, *, durability: Durability = "full") -> None:
        self.dsn = dsn
        self.name = mask_dsn(dsn)
        self.durability: Durability = durability
        self._store: PgDocumentStore | None = None

    def _opened(self) -> PgDocumentStore:
        if self._store is None:
            from agentmem._storage.pg_documents import PgDocumentStore

            self._store = PgDocumentStore(self.dsn, durability=self.durability)
        return self._store

    @property
    def database(self) -> PgDatabase:
        """The connection pool the documents use (opened now if needed), shared by the
        memory's other PostgreSQL stores (sessions with their recall index)."""
        return self._opened().db

    def sessions_database(self) -> PgDatabase:
        return self.database

    def documents(self, namespace: str) -> Documents:
        self._check(namespace)
        return self._opened().documents(namespace)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


_PASSWORD_IN_URL = re.compile(r"^(?P<head>[a-z]+://[^:@/]*:)(?P<password>[^@/]*)(?P<at>@)", re.I)
_PASSWORD_KEYWORD = re.compile(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)")


def mask_dsn(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (in the URL or as ``password=``)."""
    masked = _PASSWORD_IN_URL.sub(r"\g<head>***\g<at>", dsn)
    return _PASSWORD_KEYWORD.sub(r"\g<1>***", masked)


def open_backend(root: Path, backend: str | None, *, durability: Durability = "full") -> Backend:
    """The backend a memory at ``root`` runs on.

    Args:
        root: The memory root (the embedded backend's files; what describes
            the local disk on every backend).
        backend: ``None`` (read ``AGENTMEM_BACKEND``; unset or empty: embedded),
            ``"embedded"``/``"sqlite"``, or a ``postgresql://`` / ``postgres://`` DSN.

    Raises:
        ConfigurationError: any other value (named with its password masked).
    """
    source = "backend"
    if backend is None:
        backend = os.environ.get(BACKEND_ENV) or None
        source = BACKEND_ENV
    if backend is None:
        return EmbeddedBackend(root)
    if not isinstance(backend, str):
        raise ConfigurationError(f"backend must be a string or None, got {type(backend).__name__}")
    value = backend.strip()
    if value.lower() in _EMBEDDED:
        return EmbeddedBackend(root)
    if value.lower().startswith(_PG_SCHEMES):
        return PostgresBackend(value, durability=durability)
    raise ConfigurationError(
        f"{source} must be 'embedded', 'sqlite' or a postgresql:// DSN, got {mask_dsn(value)!r}"
    )
