"""KeyValueStore: the agent's notes, one document per key (``memory/<key>.json``).

A note is a key and a text. Each note is its own document,
``{"format": "agentmem.note", "version": 1, "key", "content", "created_at",
"updated_at"}``, kept through a :class:`~agentmem._storage.documents.Documents`:
``KeyValueStore(directory)`` is one file per key in ``directory``
(:func:`~agentmem._storage.backend.note_files`, written atomically, so a crash
leaves the old note or the new one), ``KeyValueStore(None)`` (incognito) keeps
them in this object, and ``KeyValueStore(documents)`` any implementation, such
as rows in PostgreSQL. Writers of different keys never lose each other's
notes; two writers of one key: the last one wins, whole.

**Keys cannot escape.** A key names a file, so :func:`check_key` refuses,
with :class:`~agentmem.errors.UnsafePathError`: path separators (``/``,
``\\``), ``..`` anywhere, a leading ``.`` or ``~``, drive letters and other
``:``, NUL and control characters, an empty or over-long key (128
characters, 200 UTF-8 bytes), a trailing dot or space, and reserved names
(Windows device names such as ``CON`` or ``NUL``; ``session_progress``,
which belongs to the context pipeline). Before any read or write the path
is checked to sit directly in the notes directory with no symlink between
the root and the file (:func:`~agentmem._storage.files.check_inside`), so a
symlinked ``memory/``, ``locks/`` or note file raises
:class:`~agentmem.errors.UnsafePathError` and nothing outside the root is
read or written.

``memory/session_progress.md``, the checkpoint a session writes before each
trim, reads as the note ``session_progress`` (read-only); it stays a local
file on every backend (``progress=`` names its directory).

Writes and deletes hold the store's lock (``<root>/locks/notes.lock``; in
PostgreSQL an advisory lock in the write's transaction); a note that cannot
be parsed is set aside only under that lock, after checking it still holds
the bytes that failed (a writer may have just replaced it). It is set aside
(:meth:`~agentmem._storage.documents.Documents.set_aside`: the file renamed
``<key>.json.corrupt-<ts>``), logged on ``agentmem.storage``
and listed in :attr:`KeyValueStore.moved_aside`; ``retrieve`` of it raises
:class:`~agentmem.errors.CorruptStoreError`. A malformed ``version``
(missing, ``0``, negative, a string, a float, a bool) makes a note
unreadable in the same way; a *newer* version raises
:class:`~agentmem.errors.FormatVersionError` and the file is left for the
newer agentmem that wrote it.

**One bad file never takes the store down.** :meth:`KeyValueStore.search`
skips a note it cannot read (a newer version, a file moved aside, a
directory or symlink named like a note, a read error), reports each on the
``agentmem.storage`` logger and in :attr:`KeyValueStore.problems`, and
returns the rest as :class:`NoteHits` whose ``skipped`` says what was left
out of that search. :meth:`KeyValueStore.list` lists only regular files and
reports the other entries the same way. Lone surrogates in a note's content
are replaced with U+FFFD (:func:`agentmem._json.sanitize_text`). Temp files a
killed writer left in ``memory/`` are removed on open
(:func:`~agentmem._storage.files.remove_stale_temps`).
"""

from __future__ import annotations

import builtins
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from agentmem._json import sanitize_text
from agentmem._storage.backend import note_files, progress_files
from agentmem._storage.documents import Documents, FileDocuments, MemoryDocuments
from agentmem._storage.formats import check_format
from agentmem._storage.keys import MAX_KEY_CHARS, PROGRESS_KEY, check_key
from agentmem._storage.problems import ProblemLog
from agentmem._validate import check_int, check_str, config_path
from agentmem.errors import (
    AgentMemError,
    CorruptStoreError,
    FormatVersionError,
    InvalidArgumentError,
    StorageError,
    UnsafePathError,
)
from agentmem.scrub import refuse_secret_name

__all__ = [
    "MAX_KEY_CHARS",
    "NOTE_FORMAT",
    "NOTE_VERSION",
    "PROGRESS_KEY",
    "KeyValueStore",
    "NoteHits",
]

logger = logging.getLogger("agentmem.storage")

NOTE_FORMAT = "agentmem.note"
NOTE_VERSION = 1
MAX_CONTENT_CHARS = 1_000_000


class NoteHits(builtins.list[dict[str, Any]]):
    """What :meth:`KeyValueStore.search` found: a list of hits, plus what it had to skip.

    Attributes:
        skipped: One line per note that could not be read and was left out of
            this search (also logged and kept in :attr:`KeyValueStore.problems`).
    """

    def __init__(self, hits: Iterable[dict[str, Any]] = (), skipped: Iterable[str] = ()) -> None:
        super().__init__(hits)
        self.skipped: tuple[str, ...] = tuple(skipped)


class KeyValueStore:
    """Notes: store / retrieve / search / list / delete, one atomic file per key.

    Args:
        directory: The notes directory (``<root>/memory``), ``None`` to keep
            notes in memory only (incognito), or a
            :class:`~agentmem._storage.documents.Documents` holding them.
        scrubber: Applied to the content before it is stored (secret
            scrubbing); ``None`` stores content as given.
        root: The directory nothing may leave (default: ``directory``'s parent).
        progress: The directory of the trim checkpoint ``session_progress.md``
            when ``directory`` is a Documents (default: none); with a directory
            it is that directory.

    Raises:
        ConfigurationError: ``directory`` or ``root`` is not a usable path.

    Attributes:
        directory: The notes directory, or ``None`` when notes are not files.
        moved_aside: Where unreadable notes were set aside: a path for a file
            (``<key>.json.corrupt-<ts>``), a description otherwise.
        problems: One line per note file left out of a listing or a search
            (each reported once, oldest first).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | Documents | None,
        *,
        scrubber: Callable[[str], str] | None = None,
        root: str | os.PathLike[str] | None = None,
        progress: str | os.PathLike[str] | None = None,
    ) -> None:
        self._scrub = scrubber
        self._lock = threading.RLock()
        self._progress_docs: Documents | None = None
        if isinstance(directory, Documents):
            self._docs: Documents = directory
        elif directory is None:
            self._docs = MemoryDocuments()
        else:
            folder = config_path("directory", directory)
            top = config_path("root", root) if root is not None else folder.parent
            self._docs = note_files(folder, top)
            self._progress_docs = progress_files(folder, top)
        self.directory: Path | None = (
            self._docs.directory if isinstance(self._docs, FileDocuments) else None
        )
        if progress is not None:  # the checkpoint stays a file under the local root
            folder = config_path("progress", progress)
            self._progress_docs = progress_files(folder, folder.parent)
        self.moved_aside: builtins.list[Path | str] = []
        self._problems = ProblemLog(logger)
        self.problems: builtins.list[str] = self._problems.lines

    @property
    def documents(self) -> Documents:
        """Where the notes live (files, memory or PostgreSQL)."""
        return self._docs

    def _where(self) -> Path:
        return self.directory if self.directory is not None else Path("memory")

    # ------------------------------------------------------------------ operations

    def store(self, key: str, content: str) -> dict[str, Any]:
        """Store ``content`` under ``key`` (replacing it); durable when it returns.

        Returns:
            The stored note (key, content as stored, created_at, updated_at).

        Raises:
            UnsafePathError: the key is not a safe file name (see :func:`check_key`).
            InvalidArgumentError: ``content`` is not a string, or too long; or the key
                holds a secret (:func:`~agentmem.scrub.refuse_secret_name`).
            StorageError: the note could not be written.
        """
        check_key(key, self._where())
        refuse_secret_name(self._scrub, key, "note key")
        content = sanitize_text(check_str("content", content, max_chars=MAX_CONTENT_CHARS))
        if self._scrub is not None:
            content = sanitize_text(self._scrub(content))
        now = time.time()
        with self._lock, self._docs.locked():
            old, _ = self._try_load(key)  # an unreadable one is set aside and reported
            note = {
                "key": key,
                "content": content,
                "created_at": old["created_at"] if old else now,
                "updated_at": now,
            }
            document = {"format": NOTE_FORMAT, "version": NOTE_VERSION, **note}
            try:
                data = (json.dumps(document, ensure_ascii=False) + "\n").encode("utf-8")
            except UnicodeError as exc:  # not reached: the content was sanitised
                raise StorageError(f"cannot write note {key!r}: {exc}") from exc
            self._docs.write(key, data)
        return note

    def retrieve(self, key: str) -> str | None:
        """The content stored under ``key``, or ``None`` when there is none.

        ``"session_progress"`` returns ``memory/session_progress.md``.

        Raises:
            UnsafePathError: the key is not a safe file name.
            CorruptStoreError: the note was unreadable (it was set aside).
        """
        if isinstance(key, str) and key == PROGRESS_KEY:
            return self._progress()
        check_key(key, self._where())
        with self._lock:
            found = self._load(key)
            return found["content"] if found else None

    def delete(self, key: str) -> bool:
        """Delete the note; returns whether it existed.

        Raises:
            UnsafePathError: the key is not a safe file name (or is reserved).
        """
        check_key(key, self._where())
        with self._lock, self._docs.locked():
            return self._docs.delete(key)

    def list(self) -> builtins.list[str]:
        """Every key, sorted (``session_progress`` included when the checkpoint exists).

        An entry named like a note that is not a regular file (a directory, a
        symlink) is left out, left in place and reported (:attr:`problems`).

        Raises:
            UnsafePathError: the notes directory is (behind) a symlink.
            StorageError: the notes cannot be listed.
        """
        with self._lock:
            listing = self._docs.list()
            keys = [doc.key for doc in listing.found]
            skipped = builtins.list(listing.skipped)
            if self._progress_docs is not None:
                local = self._progress_docs.list()
                keys += [doc.key for doc in local.found]
                skipped += local.skipped
            for line in skipped:
                self._problems.report(line)
            return sorted(keys)

    def search(self, query: str, *, limit: int = 20, include_internal: bool = True) -> NoteHits:
        """Notes whose key or content contains words of ``query``, best first.

        A note that cannot be read is skipped and reported, never fatal: the
        search returns every other match (see :class:`NoteHits`).

        Args:
            query: Words to look for.
            limit: At most this many hits (an int >= 0).
            include_internal: Whether notes the library writes itself (the trim
                checkpoint ``session_progress``) may match. The agent's
                ``memory_operations`` search passes ``False`` unless asked.

        Returns:
            :class:`NoteHits`: ``[{"key", "score", "preview"}]``, where ``score``
            counts matched words (+2 for the exact phrase) and ``preview`` is up
            to 200 characters around the first match; ``.skipped`` names the
            notes left out.

        Raises:
            InvalidArgumentError: a wrong-typed argument.
        """
        check_str("query", query)
        limit = check_int("limit", limit, minimum=0)
        if not isinstance(include_internal, bool):
            raise InvalidArgumentError(
                f"include_internal must be True or False, got {include_internal!r}"
            )
        phrase = query.strip().casefold()
        words = set(re.findall(r"\w+", phrase))
        if not words:
            return NoteHits()
        hits: list[tuple[float, str, str]] = []
        skipped: list[str] = []
        for key in self.list():
            if key == PROGRESS_KEY and not include_internal:
                continue
            try:
                content = self.retrieve(key) or ""
            except (StorageError, UnsafePathError) as exc:
                message = f"note {key!r} left out of the search: {exc}"
                skipped.append(message)
                self._problems.report(message)
                continue
            haystack = f"{key}\n{content}".casefold()
            score = float(sum(1 for w in words if w in haystack))
            if phrase in haystack:
                score += 2
            if score:
                at = max(0, content.casefold().find(next(iter(sorted(words)))) - 60)
                hits.append((score, key, content[at : at + 200]))
        hits.sort(key=lambda h: (-h[0], h[1]))
        return NoteHits(({"key": k, "score": s, "preview": p} for s, k, p in hits[:limit]), skipped)

    # ------------------------------------------------------------------ documents

    def _progress(self) -> str | None:
        if self._progress_docs is None:
            return None
        data = self._progress_docs.read(PROGRESS_KEY)
        return data.decode("utf-8", errors="replace") if data is not None else None

    def _load(self, key: str) -> dict[str, Any] | None:
        """The note under ``key``, or ``None``; an unreadable one is set aside and raises
        :class:`CorruptStoreError` (once the lock is released: on PostgreSQL the set-aside
        is committed with it)."""
        note, aside = self._try_load(key)
        if aside is not None:
            raise aside
        return note

    def _try_load(self, key: str) -> tuple[dict[str, Any] | None, CorruptStoreError | None]:
        raw = self._docs.read(key)
        if raw is None:
            return None, None
        note, reason = self._decode(key, raw)
        if note is not None:
            return note, None
        if not self._docs.held:
            # Only a lock holder sets a note aside, after checking (by loading it again
            # under the lock) that it still holds the bad bytes: a writer may have replaced
            # it with a good note since it was read.
            with self._docs.locked():
                return self._try_load(key)
        return None, self._set_aside(key, reason)

    @staticmethod
    def _decode(key: str, raw: bytes) -> tuple[dict[str, Any] | None, str]:
        """The note, or ``None`` and why it cannot be read."""
        try:
            data = json.loads(raw)
            check_format(data, kind=NOTE_FORMAT, version=NOTE_VERSION, what="note")
            if not isinstance(data.get("content"), str):
                raise InvalidArgumentError("note content is not a string")
            note = {
                "key": key,
                "content": data["content"],
                "created_at": float(data.get("created_at", 0.0)),
                "updated_at": float(data.get("updated_at", 0.0)),
            }
            return note, ""
        except FormatVersionError as exc:
            if exc.found is not None:
                raise  # a newer agentmem wrote it: leave it for that one
            return None, str(exc)  # a malformed version: unreadable
        except (AgentMemError, ValueError, TypeError, RecursionError) as exc:
            return None, str(exc)

    def _set_aside(self, key: str, reason: str) -> CorruptStoreError:
        """Set the note aside; the error that reports it (raised by the caller)."""
        where = self._docs.describe(key)
        moved, message = self._docs.set_aside(
            key, what=f"note {key!r} ({where})", reason=reason, logger=logger
        )
        self.moved_aside.append(moved)
        return CorruptStoreError(
            message,
            path=where if isinstance(moved, Path) else None,
            moved_to=moved if isinstance(moved, Path) else None,
        )

    def __repr__(self) -> str:
        return f"KeyValueStore({self._docs.location})"
