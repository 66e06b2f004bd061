"""TopicStore: the memory updater's topic files, one markdown file per topic in ``memories/``.

At the end of a long task the memory updater (:mod:`agentmem.memory_updater`)
consolidates what the task taught the agent into *topic files*:
``<root>/memories/<topic>.md``, plain markdown the model writes and later
sessions read (DESIGN section 5). The file *is* the content: no header, so
a person can read and edit it, and what the model reads back is exactly
what it wrote (after scrubbing and the size limit).

Guarantees:

* **Names cannot escape.** A topic names a file, so it follows the notes'
  key rule (:func:`agentmem.notes.check_key`): no path separators, no
  ``..``, no leading ``.``/``~``, no NUL or control characters, not empty,
  at most 128 characters, no reserved (device) names; otherwise
  :class:`~agentmem.errors.UnsafePathError`. A trailing ``.md`` is taken as
  the file suffix (``"deploy.md"`` is the topic ``deploy``). The path must
  sit directly in ``memories/`` with no symlink between the root and the
  file (:func:`~agentmem._storage.files.check_inside`): a symlinked
  ``memories/``, ``locks/`` or topic file raises ``UnsafePathError`` on a
  read or write (a listing skips and reports a symlinked topic file).
* **Whole-document, atomic writes.** Topics are kept through a
  :class:`~agentmem._storage.documents.Documents`: ``TopicStore(directory)``
  is one file per topic (:func:`~agentmem._storage.backend.topic_files`),
  ``TopicStore(None)`` keeps them in this object (incognito, nothing
  written), ``TopicStore(documents)`` any implementation, such as rows in
  PostgreSQL. :meth:`TopicStore.write` replaces the document atomically
  (for a file :func:`~agentmem._storage.files.atomic_write_bytes`:
  same-directory temp file, fsync, ``os.replace``) while holding the
  store's cross-process lock (``<root>/locks/memories.lock``; in PostgreSQL
  an advisory lock in the write's transaction). Writers of different topics
  never lose each other's files; writers of one topic: the last one wins,
  whole, never a mix.
* **Secrets are scrubbed** with the Memory's scrubber before anything is
  written (or kept in memory). Lone surrogates are replaced with U+FFFD
  (:func:`agentmem._json.sanitize_text`), so any string can be written.
* **A killed writer leaves no debris for long**: its temp file is removed
  when the store is next opened (:func:`~agentmem._storage.files.remove_stale_temps`).
* **The size limit is the library's.** Content over ``max_tokens_per_file``
  (counted with the token counter) is cut at a line boundary, keeping the
  beginning, and ends with :data:`TRUNCATION_MARKER`; the
  :class:`WriteResult` says so (``truncated``, ``tokens_before``,
  ``tokens_after``), so the model cannot grow a file past the limit even
  when it ignores the instructions.
* **Read-merge-write without lost updates.** :meth:`TopicStore.write_if_unchanged`
  writes only if the topic still holds what the caller read (checked under
  the lock), so two agents merging into one topic at once do not silently
  drop each other's additions: the second is told to read again. Inside
  ``with store.locked():`` a caller may read, edit and write (or
  :meth:`TopicStore.delete`) several topics as one step.

* **Nothing is skipped silently.** An entry of ``memories/`` named like a
  topic file that is not one (a directory, a symlink, an unsafe name), a
  file that cannot be read, or one that is not UTF-8 (read with U+FFFD in
  place of the bad bytes) is left where it is, logged once on the
  ``agentmem.storage`` logger and listed in :attr:`TopicStore.problems`.

A session puts :meth:`TopicStore.prompt_block` in its system prompt: whole
topics, newest first, under a token cap (the one renderer and budget rule of
:mod:`agentmem._prompt_budget`).
"""

from __future__ import annotations

import builtins
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from agentmem._json import sanitize_text
from agentmem._prompt_budget import block_budget, render_within
from agentmem._storage.backend import topic_files
from agentmem._storage.documents import Documents, FileDocuments, MemoryDocuments
from agentmem._storage.keys import TOPICS_DIR, check_topic
from agentmem._storage.problems import ProblemLog
from agentmem._validate import check_str, config_path
from agentmem.errors import ConfigurationError, InvalidArgumentError, StorageError, UnsafePathError
from agentmem.protocols import TokenCounter
from agentmem.scrub import refuse_secret_name
from agentmem.tokens import HeuristicCounter

_log = logging.getLogger("agentmem.storage")

__all__ = [
    "DEFAULT_MAX_TOKENS_PER_FILE",
    "MIN_TOKENS_PER_FILE",
    "TOPICS_DIR",
    "TRUNCATION_MARKER",
    "TopicInfo",
    "TopicStore",
    "WriteResult",
    "check_topic",
]

DEFAULT_MAX_TOKENS_PER_FILE = 4000
"""Largest topic file, in tokens, unless the Memory is told otherwise."""
MIN_TOKENS_PER_FILE = 64
"""The smallest limit accepted: room for some text and the truncation marker."""
_ANY = object()  # write whatever the topic holds now
TRUNCATION_MARKER = "\n[... truncated by agentmem: topic files are limited to {limit} tokens ...]\n"
"""Appended to content that was cut to the per-file limit (``{limit}`` is filled in)."""


@dataclass(frozen=True)
class TopicInfo:
    """One topic file, as :meth:`TopicStore.list` describes it."""

    topic: str
    """The topic name (the file is ``<topic>.md``)."""
    size: int
    """Size in bytes (UTF-8)."""
    updated_at: float
    """Last modification, epoch seconds."""


@dataclass(frozen=True)
class WriteResult:
    """What :meth:`TopicStore.write` stored."""

    topic: str
    """The topic written."""
    created: bool
    """Whether the topic did not exist before."""
    truncated: bool
    """Whether the content was cut to the per-file token limit."""
    tokens_before: int
    """Tokens of the (scrubbed) content as given."""
    tokens_after: int
    """Tokens of what was stored."""
    chars: int
    """Characters stored."""
    content: str = field(default="", repr=False)
    """What was stored (scrubbed, cut to the limit)."""


def cut_to_tokens(text: str, max_tokens: int, counter: TokenCounter, marker: str) -> str:
    """The longest beginning of ``text`` that, with ``marker``, fits ``max_tokens``.

    The cut falls at a line boundary when at least one whole line fits, else
    inside the first line. Binary search over prefixes: the counter is only
    assumed to grow with the text.
    """
    if counter.count_text(marker) > max_tokens:
        return ""
    ends = [i + 1 for i, char in enumerate(text) if char == "\n"]
    if not ends or ends[-1] != len(text):
        ends.append(len(text))

    def fits(end: int) -> bool:
        return counter.count_text(text[:end].rstrip("\n") + marker) <= max_tokens

    lo, hi = 0, len(ends) - 1
    best = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(ends[mid]):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    if best >= 0:
        return text[: ends[best]].rstrip("\n") + marker
    lo, hi, chars = 0, ends[0], 0  # not even the first line fits: cut inside it
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            chars, lo = mid, mid + 1
        else:
            hi = mid - 1
    return text[:chars] + marker


class TopicStore:
    """Topic files: list / read / write / delete, one atomic markdown file per topic.

    Args:
        directory: The topics directory (``<root>/memories``), ``None`` to
            keep topics in memory only (incognito), or a
            :class:`~agentmem._storage.documents.Documents` holding them.
        scrubber: Applied to content before it is stored; ``None`` stores it as given.
        token_counter: Counts tokens for the per-file limit (a heuristic
            counter when omitted).
        max_tokens_per_file: Largest file in tokens; longer content is cut.
        root: The directory nothing may leave (default: ``directory``'s
            parent); the lock lives in its ``locks/``.

    Raises:
        ConfigurationError: ``max_tokens_per_file`` is not an int >= :data:`MIN_TOKENS_PER_FILE`,
            or ``directory``/``root`` is not a usable path.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | Documents | None,
        *,
        scrubber: Callable[[str], str] | None = None,
        token_counter: TokenCounter | None = None,
        max_tokens_per_file: int = DEFAULT_MAX_TOKENS_PER_FILE,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        if type(max_tokens_per_file) is not int or max_tokens_per_file < MIN_TOKENS_PER_FILE:
            raise ConfigurationError(
                f"max_tokens_per_file must be an int >= {MIN_TOKENS_PER_FILE}, "
                f"got {max_tokens_per_file!r}"
            )
        if isinstance(directory, Documents):
            self._docs: Documents = directory
        elif directory is None:
            self._docs = MemoryDocuments()
        else:
            folder = config_path("directory", directory)
            self._docs = topic_files(
                folder, config_path("root", root) if root is not None else None
            )
        self.directory: Path | None = (
            self._docs.directory if isinstance(self._docs, FileDocuments) else None
        )
        self._scrub = scrubber
        self.token_counter: TokenCounter = token_counter or HeuristicCounter()
        self.max_tokens_per_file = max_tokens_per_file
        self._lock = threading.RLock()
        self._problems = ProblemLog(_log)
        self.problems: builtins.list[str] = self._problems.lines
        """What was left out or read with replacements (one line each, oldest first)."""

    @property
    def documents(self) -> Documents:
        """Where the topics live (files, memory or PostgreSQL)."""
        return self._docs

    def _where(self) -> Path:
        return self.directory if self.directory is not None else Path(TOPICS_DIR)

    # ------------------------------------------------------------------ operations

    def list(self) -> builtins.list[TopicInfo]:
        """Every topic, sorted by name.

        Raises:
            StorageError: the topics cannot be listed.
        """
        with self._lock:
            listing = self._docs.list()
            for line in listing.skipped:
                self._problems.report(line)
            return [TopicInfo(doc.key, doc.size, doc.modified) for doc in listing.found]

    def read(self, topic: str) -> str | None:
        """The content of ``topic``, or ``None`` when there is no such topic.

        Bytes that are not UTF-8 (a file edited by hand) read as U+FFFD, and
        that is reported (:attr:`problems`, the ``agentmem.storage`` log).

        Raises:
            UnsafePathError: the name is not a safe topic name.
            StorageError: the file exists but cannot be read.
        """
        topic = check_topic(topic, self._where())
        with self._lock:
            return self._read(topic)

    def _read(self, topic: str) -> str | None:
        data = self._docs.read(topic)
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._problems.report(
                f"topic file {self._docs.describe(topic)} is not UTF-8 (byte {exc.start}): "
                "read with U+FFFD in place of the bad bytes; the file was left as it is"
            )
            return data.decode("utf-8", errors="replace")

    def write(self, topic: str, content: str) -> WriteResult:
        """Replace ``topic``'s file with ``content`` (scrubbed, cut to the limit); durable.

        Raises:
            UnsafePathError: the name is not a safe topic name.
            InvalidArgumentError: ``content`` is not a string, or the name holds a secret.
            StorageError: the file could not be written (the old one is intact).
        """
        result = self._write(topic, content, _ANY)
        assert result is not None
        return result

    def write_if_unchanged(
        self, topic: str, content: str, *, expected: str | None
    ) -> WriteResult | None:
        """:meth:`write`, but only if the topic still holds ``expected`` (``None``: absent).

        A compare-and-swap under the cross-process lock: a caller that read a
        topic, merged into it and writes it back does not overwrite what another
        process wrote in between. Returns ``None`` (nothing written) when the
        topic changed since; read it again and merge.

        Raises:
            As :meth:`write`.
        """
        if expected is not None:
            check_str("expected", expected)
        return self._write(topic, content, expected)

    def _write(self, topic: str, content: str, expected: object) -> WriteResult | None:
        topic = check_topic(topic, self._where())
        refuse_secret_name(self._scrub, topic, "topic name")
        content = sanitize_text(check_str("content", content))
        if self._scrub is not None:
            content = sanitize_text(self._scrub(content))
        before = self.token_counter.count_text(content)
        stored = content
        if before > self.max_tokens_per_file:
            marker = TRUNCATION_MARKER.format(limit=self.max_tokens_per_file)
            stored = cut_to_tokens(content, self.max_tokens_per_file, self.token_counter, marker)
        after = before if stored is content else self.token_counter.count_text(stored)
        with self._lock, self._docs.locked():
            found = self._read(topic)
            if expected is not _ANY and found != expected:
                return None
            created = found is None
            self._docs.write(topic, stored.encode("utf-8"))
        return WriteResult(
            topic=topic,
            created=created,
            truncated=stored is not content,
            tokens_before=before,
            tokens_after=after,
            chars=len(stored),
            content=stored,
        )

    def delete(self, topic: str) -> bool:
        """Remove ``topic``'s file, under the store's lock; whether it existed.

        Raises:
            UnsafePathError: the name is not a safe topic name.
            StorageError: the file exists but could not be removed (it is intact).
        """
        topic = check_topic(topic, self._where())
        with self._lock, self._docs.locked():
            return self._docs.delete(topic)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's cross-process lock for the ``with`` block (re-entrant).

        :meth:`read`, :meth:`write` and :meth:`delete` inside the block see and
        make changes no other thread or process interleaves with, so a caller can
        read a topic, edit it and write it back (or move several topics) without
        losing a concurrent change. On PostgreSQL the block is one transaction:
        its writes and deletes take effect together, or (on an error) none do.
        Keep it short: other writers wait for it.

        Raises:
            StoreLockedError: another holder kept the lock past the timeout.
            StorageError: the lock cannot be taken, or (PostgreSQL) the block's
                changes could not be committed.
        """
        with self._lock, self._docs.locked():
            yield

    def render_for_prompt(
        self, max_tokens: int, *, token_counter: TokenCounter | None = None
    ) -> str:
        """The topic files as markdown for a system prompt, most recently updated first.

        Whole topics are added, newest first, while the text stays within
        ``max_tokens``; a topic that does not fit is left out (a smaller,
        older one may still fit: :func:`agentmem._prompt_budget.render_within`).
        ``""`` when there is nothing to show.
        Unreadable files are skipped (reading never stops a session), and
        reported (:attr:`problems`, the ``agentmem.storage`` log).
        """
        if type(max_tokens) is not int or max_tokens < 0:
            raise InvalidArgumentError(f"max_tokens must be a non-negative int, got {max_tokens!r}")
        if token_counter is not None and not isinstance(token_counter, TokenCounter):
            raise InvalidArgumentError(
                f"token_counter must provide count_text(text), got {type(token_counter).__name__}"
            )
        heading = (
            "# Memory topics\n"
            "Notes this project's earlier tasks left in memories/<topic>.md, newest first."
        )
        counter = token_counter or self.token_counter
        return render_within(
            self._prompt_blocks(), max_tokens, counter, head=heading, separator="\n\n"
        )

    def prompt_block(
        self, context_window: int, max_tokens: int, token_counter: TokenCounter
    ) -> str:
        """What a session with ``context_window`` puts in its system prompt.

        :meth:`render_for_prompt` within ``max_tokens`` (the memory update's
        ``prompt_tokens``), and at most a tenth of the window
        (:func:`agentmem._prompt_budget.block_budget`).

        Raises:
            AgentMemError: ``memories/`` cannot be listed (a session logs it and
                opens without the block).
        """
        budget = block_budget(max_tokens, context_window)
        return self.render_for_prompt(budget, token_counter=token_counter)

    def _prompt_blocks(self) -> Iterator[tuple[None, str]]:
        """``## <topic>`` and its content per non-empty topic, newest first."""
        for info in sorted(self.list(), key=lambda i: (-i.updated_at, i.topic)):
            try:
                content = self.read(info.topic)
            except (StorageError, UnsafePathError) as exc:
                self._problems.report(f"topic {info.topic!r} left out of the prompt: {exc}")
                continue
            if content and content.strip():
                yield None, f"## {info.topic}\n{content.strip()}"

    def __repr__(self) -> str:
        return f"TopicStore({self._docs.location})"
