"""Documents: one store's named documents (bytes), changed under one lock.

Long-term memory (one document, ``ltm``), the notes (one document per key)
and the memory updater's topics (one per topic) keep their data as whole
documents: the store decodes the bytes, applies a change and writes the
bytes back. :class:`Documents` is the one small interface they do that
through, so the stores hold the logic (formats, merging, confirmations) and
never touch a file or a connection themselves:

* :meth:`Documents.read` returns a document's bytes, or ``None``;
  :meth:`Documents.list` the documents there are (key, size, last change),
  plus one line per entry that looks like a document but is not one (a
  directory or a symlink named like a note), which the store reports.
* :meth:`Documents.locked` holds the store's one lock: exclusive across
  threads, processes and (for PostgreSQL) hosts, re-entrant for its holder,
  :class:`~agentmem.errors.StoreLockedError` after a bounded wait.
  :attr:`Documents.held` says whether the calling thread holds it: only a
  holder may write, delete or set aside, so every change is
  lock -> re-read -> apply -> write (DESIGN section 8).
* :meth:`Documents.write` replaces a document atomically;
  :meth:`Documents.delete` removes one.
* :meth:`Documents.set_aside` keeps the bytes of a document that cannot be
  read under another name and removes it from its key, so the store can
  start afresh without losing anything; it returns where they went and the
  warning it logged.

Three implementations: :class:`FileDocuments` (the embedded default: one
file per document in a directory under the memory root, exactly the files,
lock files, symlink refusals, temp-file cleanup and ``<name>.corrupt-<ts>``
set-asides of :mod:`agentmem._storage.files` and :mod:`agentmem._storage.locks`),
:class:`MemoryDocuments` (incognito: a dict, nothing written anywhere) and
``PostgresDocuments`` in :mod:`agentmem._storage.pg_documents` (rows of one
table, the lock a transaction-scoped advisory lock).

Errors: a read, write or delete that fails raises
:class:`~agentmem.errors.StorageError` naming the document
(``"cannot write note 'plan': ..."``); a path that leaves the root or passes
through a symlink :class:`~agentmem.errors.UnsafePathError`.
"""

from __future__ import annotations

import builtins
import logging
import os
import stat
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import NamedTuple

from agentmem._storage.files import (
    atomic_write_bytes,
    check_inside,
    file_in,
    make_dirs,
    remove_stale_temps,
    set_aside,
)
from agentmem._storage.locks import DEFAULT_LOCK_TIMEOUT, StoreLock
from agentmem.errors import StorageError, UnsafePathError

__all__ = [
    "DocInfo",
    "Documents",
    "FileDocuments",
    "Listing",
    "MemoryDocuments",
    "SetAside",
    "ThreadOwner",
]


class DocInfo(NamedTuple):
    """One stored document, as :meth:`Documents.list` describes it."""

    key: str
    size: int
    """Its size in bytes."""
    modified: float
    """Its last change, epoch seconds."""


class Listing(NamedTuple):
    """What :meth:`Documents.list` found."""

    found: builtins.list[DocInfo]
    """The documents, sorted by key."""
    skipped: builtins.list[str]
    """One line per entry named like a document that is not one (left in place)."""


class SetAside(NamedTuple):
    """Where :meth:`Documents.set_aside` put a document's unreadable bytes."""

    where: Path | str
    """The file they were renamed to, or a description of where else they are kept."""
    message: str
    """The warning that was logged."""


class Documents(ABC):
    """One store's named documents (bytes), changed under one lock.

    Attributes:
        location: Where the documents live, for messages: a directory, ``"in
            memory"``, or ``"postgresql://host/db (notes)"``.
    """

    location: str

    @abstractmethod
    def read(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or ``None`` when there are none.

        Outside :meth:`locked` a plain read of what was last committed; inside
        it, what the holder sees (its own writes included).

        Raises:
            StorageError: the document exists but cannot be read.
            UnsafePathError: (files) the path passes through a symlink.
        """

    @abstractmethod
    def list(self) -> Listing:
        """Every document (sorted by key) and the entries left out.

        Raises:
            StorageError: the documents cannot be listed.
        """

    @abstractmethod
    def locked(self) -> AbstractContextManager[None]:
        """Hold the store's lock for the ``with`` block (re-entrant for its holder).

        Raises:
            StoreLockedError: another holder kept it past the timeout.
            StorageError: the lock cannot be taken, or (PostgreSQL) the changes
                made under it could not be committed: none of them took effect.
        """

    @property
    @abstractmethod
    def held(self) -> bool:
        """Whether the calling thread holds :meth:`locked`."""

    @abstractmethod
    def _write(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _delete(self, key: str) -> bool: ...

    @abstractmethod
    def _set_aside(self, key: str, what: str, reason: str, logger: logging.Logger) -> SetAside: ...

    def describe(self, key: str) -> str:
        """How to name the document ``key`` in a message (a file's path)."""
        return f"{self.location} [{key}]"

    def write(self, key: str, data: bytes) -> None:
        """Replace the document ``key`` with ``data``, atomically (only under :meth:`locked`).

        Raises:
            StorageError: it could not be written; the old document is intact.
        """
        self._check_held("write")
        self._write(key, data)

    def delete(self, key: str) -> bool:
        """Remove the document ``key`` (only under :meth:`locked`); whether it existed."""
        self._check_held("delete")
        return self._delete(key)

    def set_aside(self, key: str, *, what: str, reason: str, logger: logging.Logger) -> SetAside:
        """Keep the unreadable bytes of ``key`` elsewhere and report it (only under :meth:`locked`).

        Args:
            key: The document that cannot be read.
            what: How to name it in the warning ("note 'plan' (/x/memory/plan.json)").
            reason: Why it cannot be read.
            logger: Where the warning goes.

        Raises:
            CorruptStoreError: the bytes could not be set aside (they stay where they were).
        """
        self._check_held("set aside")
        return self._set_aside(key, what, reason, logger)

    def close(self) -> None:  # noqa: B027 (nothing to release for files and memory)
        """Release what the documents hold open (nothing, for files and memory)."""

    def _check_held(self, action: str) -> None:
        if not self.held:
            raise RuntimeError(f"{self.location}: {action} outside locked() (a bug in agentmem)")


class ThreadOwner:
    """The thread that holds a store's lock: re-entrant for it, exclusive for the others."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._owner: int | None = None
        self._depth = 0

    @property
    def held(self) -> bool:
        return self._owner == threading.get_ident()

    @contextmanager
    def hold(self, acquire: Callable[[], AbstractContextManager[None]]) -> Iterator[None]:
        """Hold the thread lock, and ``acquire()`` around the outermost block."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with acquire():
                self._owner, self._depth = threading.get_ident(), 1
                try:
                    yield
                finally:
                    self._owner, self._depth = None, 0


class MemoryDocuments(Documents):
    """Documents kept in this object only (incognito): nothing is written anywhere.

    Bytes set aside are kept in :attr:`aside` under ``<key>.corrupt-<n>``.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.location = "in memory"
        self._docs: dict[str, tuple[bytes, float]] = {}
        self.aside: dict[str, bytes] = {}
        self._clock = clock
        self._owner = ThreadOwner()

    def read(self, key: str) -> bytes | None:
        found = self._docs.get(key)
        return found[0] if found is not None else None

    def list(self) -> Listing:
        found = [DocInfo(k, len(b), at) for k, (b, at) in sorted(self._docs.items())]
        return Listing(found, [])

    def locked(self) -> AbstractContextManager[None]:
        return self._owner.hold(_nothing)

    @property
    def held(self) -> bool:
        return self._owner.held

    def _write(self, key: str, data: bytes) -> None:
        self._docs[key] = (bytes(data), self._clock())

    def _delete(self, key: str) -> bool:
        return self._docs.pop(key, None) is not None

    def _set_aside(self, key: str, what: str, reason: str, logger: logging.Logger) -> SetAside:
        data, _ = self._docs.pop(key, (b"", 0.0))
        name = f"{key}.corrupt-{len(self.aside) + 1}"
        self.aside[name] = data
        message = f"{what} is unreadable ({reason}); kept aside in memory as {name!r}"
        logger.warning(message)
        return SetAside(name, message)

    def __repr__(self) -> str:
        return "MemoryDocuments()"


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _strerror(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


class FileDocuments(Documents):
    """One file per document in ``directory`` under ``root``: the embedded default.

    A key's file is ``aliases[key]`` or ``<key><suffix>``, checked to sit
    directly in ``directory`` with no symlink between ``root`` and the file
    (:func:`~agentmem._storage.files.file_in`) before every read, write,
    delete and set-aside. Writes are
    :func:`~agentmem._storage.files.atomic_write_bytes` (temp file, fsync,
    rename, directory fsync); the lock is a
    :class:`~agentmem._storage.locks.StoreLock` on ``lock_path``; unreadable
    files are renamed to ``<name>.corrupt-<UTC timestamp>``
    (:func:`~agentmem._storage.files.set_aside`). Temp files that killed
    writers left in ``directory`` are removed when the object is made.

    Args:
        directory: Where the files are.
        root: The memory root nothing may leave.
        suffix: The file name of a key is ``<key><suffix>``; ``None``: only the
            ``aliases`` are documents.
        lock_path: The lock file (under ``<root>/locks/``).
        lock_what: What the lock protects, for its errors ("long-term memory").
        name: How to name a key in errors (``lambda key: f"note {key!r}"``).
        inside: How to name ``directory`` in path errors ("the notes directory").
        key_of: The key of a listed file name that ends with ``suffix``
            (raises :class:`UnsafePathError` for a name that is no key).
        aliases: Keys whose file is named otherwise (``{"ltm": "ltm.json"}``).
        entry: How to name a skipped listing entry ("note file").
        report_unsafe: Whether a listed name ``key_of`` refuses is reported
            (``True``) or silently not a document (``False``).
        timeout: Seconds to wait for the lock.
    """

    def __init__(
        self,
        directory: Path,
        *,
        root: Path,
        suffix: str | None,
        lock_path: Path,
        lock_what: str,
        name: Callable[[str], str],
        inside: str,
        key_of: Callable[[str], str] | None = None,
        aliases: Mapping[str, str] | None = None,
        entry: str = "file",
        report_unsafe: bool = False,
        timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        self.directory = directory
        self.root = root
        self.location = str(directory)
        self._suffix = suffix
        self._name = name
        self._inside = inside
        self._key_of = key_of or (lambda file_name: file_name[: len(file_name) - len(suffix or "")])
        self._aliases = dict(aliases or {})
        self._alias_keys = {file_name: key for key, file_name in self._aliases.items()}
        self._entry = entry
        self._report_unsafe = report_unsafe
        self.lock = StoreLock(lock_path, what=lock_what, timeout=timeout, root=root)
        self._owner = ThreadOwner()
        remove_stale_temps(directory, root=root)

    def file_path(self, key: str) -> Path:
        """Where the file of ``key`` is (unchecked: for messages and attributes)."""
        if key in self._aliases:
            return self.directory / self._aliases[key]
        if self._suffix is None:
            raise UnsafePathError(key, self.directory, f"not a document of {self.location}")
        return self.directory / (key + self._suffix)

    def path(self, key: str) -> Path:
        """The file of ``key``, checked (see the class docstring).

        Raises:
            UnsafePathError: it leaves ``directory`` or passes through a symlink.
        """
        file_name = self.file_path(key).name
        return file_in(self.directory, file_name, self.root, key=key, what=self._inside)

    def describe(self, key: str) -> str:
        return str(self.file_path(key))

    def read(self, key: str) -> bytes | None:
        path = self.path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(
                f"cannot read {self._name(key)}: {_strerror(exc)}", path=path
            ) from exc

    def list(self) -> Listing:
        check_inside(self.root, self.directory, what="the memory root")
        try:
            entries = sorted(os.scandir(self.directory), key=lambda e: e.name)
        except FileNotFoundError:
            return Listing([], [])
        except OSError as exc:
            raise StorageError(
                f"cannot list {self.location}: {_strerror(exc)}", path=self.directory
            ) from exc
        found: builtins.list[DocInfo] = []
        skipped: builtins.list[str] = []
        for item in entries:
            where = self.directory / item.name

            def skip(reason: str, where: Path = where) -> None:
                skipped.append(f"{self._entry} {where} skipped: {reason}; it was left in place")

            if item.name in self._alias_keys:
                key = self._alias_keys[item.name]
            elif (
                self._suffix is not None
                and item.name.endswith(self._suffix)
                and len(item.name) > len(self._suffix)
            ):
                try:
                    key = self._key_of(item.name)
                except UnsafePathError as exc:
                    if self._report_unsafe:
                        skip(str(exc))
                    continue
            else:
                continue
            try:
                info = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since the listing
            except OSError as exc:
                skip(str(exc))
                continue
            if not stat.S_ISREG(info.st_mode):
                skip("a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file")
                continue
            found.append(DocInfo(key, info.st_size, info.st_mtime))
        found.sort(key=lambda doc: doc.key)
        return Listing(found, skipped)

    def locked(self) -> AbstractContextManager[None]:
        return self._owner.hold(self.lock)

    @property
    def held(self) -> bool:
        return self._owner.held

    def _write(self, key: str, data: bytes) -> None:
        path = self.path(key)
        try:
            make_dirs(self.root, self.directory)
            atomic_write_bytes(path, data, root=self.root)
        except OSError as exc:
            if isinstance(exc, StorageError):
                raise
            raise StorageError(
                f"cannot write {self._name(key)}: {_strerror(exc)}", path=path
            ) from exc

    def _delete(self, key: str) -> bool:
        path = self.path(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(
                f"cannot delete {self._name(key)}: {_strerror(exc)}", path=path
            ) from exc
        return True

    def _set_aside(self, key: str, what: str, reason: str, logger: logging.Logger) -> SetAside:
        moved, message = set_aside(self.path(key), what=what, reason=reason, logger=logger)
        return SetAside(moved, message)

    def __repr__(self) -> str:
        return f"FileDocuments({self.location})"
