"""LongTermMemory: project knowledge that survives across sessions (``ltm.json``).

Six kinds of entry (:data:`KINDS`): discoveries (facts about the project),
problem_solutions (an error and what fixed it), code_patterns, workflows,
failures and context_rules. Each :class:`LTMEntry` has a stable id, its
text, a confidence in 0..1, first-seen and last-confirmed timestamps,
example paths and an application count.

**Adding what is known confirms it.** Texts are compared by their
normalised form (:func:`normalise`: case-folded words without punctuation,
in sorted order), so "Tests run with `pytest -q`." and "pytest -q: tests
run with" are the same entry. Confirming raises ``last_confirmed``, the
application count and the confidence (``c + (1 - c) * 0.1`` over the larger
of the stored and the new confidence), and merges the example paths. The id
is derived from the kind and the normalised text, so two processes adding
the same fact at once make the same id.

**Where it lives.** The bytes of the one document ``ltm`` go through a
:class:`~agentmem._storage.documents.Documents` (the store never touches a
file or a connection itself): ``LongTermMemory(path)`` is the file
``ltm.json`` (:func:`~agentmem._storage.backend.ltm_files`),
``LongTermMemory(None)`` (incognito) keeps it in this object only, and
``LongTermMemory(documents)`` takes any implementation, such as a row in
PostgreSQL (:mod:`agentmem._storage.pg_documents`, what
``Memory(backend="postgresql://...")`` passes).

**Many writers, nothing lost.** Every change is lock -> re-read -> apply
-> atomic write: :meth:`Documents.locked` (for the file, a ``filelock`` on
``locks/ltm.json.lock`` under the root; in PostgreSQL, a transaction holding
an advisory lock), the document re-read under it, the change applied to
what is stored (not to a stale copy), and the result written atomically
(for the file :func:`~agentmem._storage.files.atomic_write_bytes`; in
PostgreSQL committed with the transaction). Reads re-read the document and
parse it again when its bytes changed.

**Persistence rules** (DESIGN section 8): the document carries
``{"format": "agentmem.ltm", "version": 1}``; an older CLIO-style file
(``{"patterns": {...}, "metadata": {...}}``) is read and converted on the
next write; a document that cannot be parsed is set aside
(:meth:`Documents.set_aside`: the file renamed ``ltm.json.corrupt-<ts>``, a
PostgreSQL body moved to ``agentmem_set_aside``), logged on
``agentmem.storage`` and listed in :attr:`LongTermMemory.moved_aside`;
single entries that cannot be read are kept verbatim under ``"unreadable"``
and written back unchanged. A document from a newer agentmem raises
:class:`~agentmem.errors.FormatVersionError` and is never written; a
document whose version is malformed (missing, ``0``, negative, ``"1"``,
``1.0``, ``true``) is unreadable: set aside and reported like any other.
Temp files a killed writer left beside ``ltm.json`` are removed on open
(:func:`~agentmem._storage.files.remove_stale_temps`).

**A failed write changes nothing.** A change is applied to a copy of the
decoded document; the copy replaces the in-memory state only after the
write succeeded (and, in PostgreSQL, committed), so an error (a full disk,
a symlink refused, a lost connection) leaves memory equal to what is
stored. Lone surrogates in texts are replaced with U+FFFD
(:func:`agentmem._json.sanitize_text`, the rule messages follow), so any
string can be stored. Nothing is read or written through a symlink under
the root (:func:`~agentmem._storage.files.check_inside`).

**In the system prompt** a session puts :meth:`LongTermMemory.prompt_block`:
the entries most worth knowing, under a token cap (the one renderer and
budget rule of :mod:`agentmem._prompt_budget`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agentmem._json import sanitize_text
from agentmem._prompt_budget import block_budget, render_within
from agentmem._storage.backend import ltm_files
from agentmem._storage.documents import Documents, FileDocuments, MemoryDocuments
from agentmem._storage.formats import check_format
from agentmem._validate import check_int, check_str, config_path
from agentmem.errors import (
    AgentMemError,
    FormatVersionError,
    InvalidArgumentError,
)
from agentmem.protocols import TokenCounter
from agentmem.tokens import HeuristicCounter

__all__ = ["KINDS", "LTM_FORMAT", "LTM_VERSION", "LTMEntry", "LongTermMemory", "normalise"]

logger = logging.getLogger("agentmem.storage")

LTM_FORMAT = "agentmem.ltm"
LTM_VERSION = 1
LTM_KEY = "ltm"
"""The key of the one document long-term memory is stored in."""
KINDS = (
    "discoveries",
    "problem_solutions",
    "code_patterns",
    "workflows",
    "failures",
    "context_rules",
)
MAX_TEXT_CHARS = 4000
MAX_EXAMPLES = 20
LOCK_TIMEOUT = 60.0
PROMPT_TOKENS = 2000
"""Most tokens of a session's long-term memory block (and at most a tenth of its window)."""
RENDER_LIMITS = {"discoveries": 15, "problem_solutions": 15, "code_patterns": 10}
_HEADINGS = {
    "discoveries": "Known facts about this project",
    "problem_solutions": "Problems solved before",
    "code_patterns": "Code patterns of this project",
}
_WORD = re.compile(r"\w+")


def normalise(text: str) -> str:
    """The form two texts are compared in: case-folded words, punctuation dropped, sorted."""
    return " ".join(sorted(_WORD.findall(text.casefold())))


@dataclass(frozen=True)
class LTMEntry:
    """One piece of project knowledge.

    Attributes:
        id: Stable id (derived from the kind and the normalised text).
        kind: One of :data:`KINDS`.
        text: The fact, error, pattern, workflow, failure or rule.
        detail: The solution of a problem_solution (prevention of a failure,
            scope of a context rule), or ``""``.
        confidence: 0..1.
        first_seen: When it was first added (epoch seconds).
        last_confirmed: When it was last added again or confirmed.
        examples: Example paths, oldest first.
        applications: How many times it was added or confirmed (1 when new).
    """

    id: str
    kind: str
    text: str
    detail: str = ""
    confidence: float = 0.5
    first_seen: float = 0.0
    last_confirmed: float = 0.0
    examples: tuple[str, ...] = ()
    applications: int = 1

    @property
    def confirmations(self) -> int:
        """How many times the entry was confirmed after it was first added."""
        return self.applications - 1

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["examples"] = list(self.examples)
        return data

    @classmethod
    def from_json(cls, data: Any) -> LTMEntry:
        """Read one stored entry (``ValueError``/``TypeError``/``KeyError`` when unreadable)."""
        if not isinstance(data, Mapping):
            raise TypeError("entry is not an object")
        kind = data["kind"]
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        text, detail = data["text"], data.get("detail", "")
        if not isinstance(text, str) or not text.strip() or not isinstance(detail, str):
            raise ValueError("text must be a non-empty string")
        text, detail = sanitize_text(text), sanitize_text(detail)
        confidence = float(data.get("confidence", 0.5))
        if not 0.0 <= confidence <= 1.0:
            raise ValueError(f"confidence {confidence} outside 0..1")
        examples = data.get("examples", [])
        if not isinstance(examples, list) or not all(isinstance(e, str) for e in examples):
            raise ValueError("examples must be a list of strings")
        examples = [sanitize_text(e) for e in examples]
        applications = data.get("applications", 1)
        if type(applications) is not int or applications < 1:
            raise ValueError("applications must be a positive int")
        first_seen = float(data.get("first_seen", 0.0))
        last_confirmed = float(data.get("last_confirmed", first_seen))
        if not (math.isfinite(first_seen) and math.isfinite(last_confirmed)):
            raise ValueError("timestamps must be finite")
        return cls(
            id=entry_id(kind, text, detail),
            kind=kind,
            text=text,
            detail=detail,
            confidence=confidence,
            first_seen=first_seen,
            last_confirmed=last_confirmed,
            examples=tuple(examples),
            applications=applications,
        )


def entry_key(kind: str, text: str, detail: str = "") -> str:
    key = f"{kind}\x00{normalise(text)}"
    return f"{key}\x00{normalise(detail)}" if kind == "problem_solutions" else key


def entry_id(kind: str, text: str, detail: str = "") -> str:
    digest = hashlib.sha256(entry_key(kind, text, detail).encode("utf-8")).hexdigest()
    return f"{kind[:3]}-{digest[:12]}"


def _merge_examples(old: Sequence[str], new: Iterable[str]) -> tuple[str, ...]:
    merged = list(old)
    for example in new:
        if example not in merged:
            merged.append(example)
    return tuple(merged[-MAX_EXAMPLES:])


def _confirmed(entry: LTMEntry, confidence: float, examples: Sequence[str], now: float) -> LTMEntry:
    base = max(entry.confidence, confidence)
    return replace(
        entry,
        confidence=min(1.0, base + (1.0 - base) * 0.1),
        last_confirmed=max(entry.last_confirmed, now),
        examples=_merge_examples(entry.examples, examples),
        applications=entry.applications + 1,
    )


class _Doc:
    """The decoded file: entries by id, plus what could not be read (kept verbatim)."""

    def __init__(self) -> None:
        self.entries: dict[str, LTMEntry] = {}
        self.unreadable: list[Any] = []

    def copy(self) -> _Doc:
        """A copy a change can be applied to (entries are frozen; kept items are not changed)."""
        twin = _Doc()
        twin.entries = dict(self.entries)
        twin.unreadable = list(self.unreadable)
        return twin

    def encode(self) -> bytes:
        """The file's bytes: readable UTF-8; JSON escapes only for what UTF-8 cannot hold
        (a lone surrogate inside an unreadable entry kept verbatim)."""
        data = self.to_json()
        try:
            return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
        except UnicodeEncodeError:
            return (json.dumps(data, ensure_ascii=True, indent=1) + "\n").encode("ascii")

    def add(self, entry: LTMEntry) -> None:
        known = self.entries.get(entry.id)
        if known is None:
            self.entries[entry.id] = entry
        else:  # the same normalised text stored twice (an old file): fold them
            self.entries[entry.id] = replace(
                known,
                confidence=max(known.confidence, entry.confidence),
                first_seen=min(known.first_seen, entry.first_seen),
                last_confirmed=max(known.last_confirmed, entry.last_confirmed),
                examples=_merge_examples(known.examples, entry.examples),
                applications=known.applications + entry.applications,
            )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "format": LTM_FORMAT,
            "version": LTM_VERSION,
            "entries": [e.to_json() for e in self.entries.values()],
        }
        if self.unreadable:
            data["unreadable"] = self.unreadable
        return data


def _clio_entries(patterns: Mapping[str, Any], metadata: Mapping[str, Any]) -> Iterator[Any]:
    """Entries (as stored dicts) from a CLIO-style ``{"patterns": ..., "metadata": ...}`` file."""
    fallback = metadata.get("last_updated") or metadata.get("created") or 0

    def stamp(item: Mapping[str, Any]) -> tuple[Any, Any]:
        first = item.get("timestamp", fallback)
        return first, item.get("updated", first)

    fields = {
        "discoveries": ("fact", None, "confidence", None),
        "problem_solutions": ("error", "solution", None, "solved_count"),
        "code_patterns": ("pattern", None, "confidence", None),
        "failures": ("what", "prevention", None, "occurrences"),
        "workflows": ("sequence", None, "success_rate", "count"),
    }
    for kind, (text_key, detail_key, conf_key, count_key) in fields.items():
        items = patterns.get(kind) or []
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, Mapping):
                yield item
                continue
            text = item.get(text_key)
            if isinstance(text, list):
                text = " -> ".join(map(str, text))
            first, last = stamp(item)
            yield {
                "kind": kind,
                "text": text,
                "detail": str(item.get(detail_key) or "") if detail_key else "",
                "confidence": item.get(conf_key, 0.5) if conf_key else 0.5,
                "first_seen": first,
                "last_confirmed": last,
                "examples": item.get("examples", []),
                "applications": item.get(count_key, 1) if count_key else 1,
            }
    rules = patterns.get("context_rules") or {}
    if isinstance(rules, Mapping):
        for context, texts in rules.items():
            for rule in texts if isinstance(texts, list) else [texts]:
                yield {
                    "kind": "context_rules",
                    "text": rule,
                    "detail": str(context),
                    "first_seen": fallback,
                    "last_confirmed": fallback,
                }


def _check_text(label: str, value: object, *, empty_ok: bool = False) -> str:
    value = sanitize_text(check_str(label, value))
    if not empty_ok and not normalise(value):
        raise InvalidArgumentError(f"{label} must contain at least one word")
    if len(value) > MAX_TEXT_CHARS:
        raise InvalidArgumentError(f"{label} is longer than {MAX_TEXT_CHARS} characters")
    if "\x00" in value:
        raise InvalidArgumentError(f"{label} contains a NUL character")
    return value.strip()


def _check_confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidArgumentError(f"confidence must be a number from 0 to 1, got {value!r}")
    return float(value)


def _check_examples(value: object) -> tuple[str, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidArgumentError("examples must be a sequence of path strings")
    examples = tuple(value)
    for index, example in enumerate(examples):
        _check_text(f"examples[{index}]", example)
    return tuple(sanitize_text(e) for e in examples[-MAX_EXAMPLES:])


def _prompt_line(entry: LTMEntry) -> str:
    """One line of the prompt block: the entry's text (and detail), its confidence."""
    body = f"{entry.text} -> {entry.detail}" if entry.detail else entry.text
    return f"- {' '.join(body.split())} (confidence {entry.confidence:.2f})"


class LongTermMemory:
    """Project knowledge in ``ltm.json`` (or any Documents), safe for many concurrent writers.

    Args:
        path: The ``ltm.json`` file, ``None`` to keep everything in memory
            (incognito), or a :class:`~agentmem._storage.documents.Documents`
            holding the document ``ltm`` (then ``lock_path`` and ``root`` are unused).
        lock_path: The lock file (default ``<path's dir>/locks/ltm.json.lock``).
        root: The memory root nothing is written outside of, through no symlink
            (default: ``path``'s directory).
        scrubber: Applied to every text before it is stored (secret scrubbing);
            ``None`` stores text as given.
        clock: Returns the current time (tests pass a fake one).

    Raises:
        ConfigurationError: ``path`` or ``root`` is not a usable path.

    Attributes:
        path: The ``ltm.json`` file, or ``None`` when not stored in a file.
        moved_aside: Where unreadable documents were set aside: a path for a
            file (``ltm.json.corrupt-<ts>``), a description otherwise.
        problems: Human-readable reports of what could not be read.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Documents | None,
        *,
        lock_path: str | os.PathLike[str] | None = None,
        scrubber: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.time,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(path, Documents):
            self._docs: Documents = path
        elif path is None:
            self._docs = MemoryDocuments()
        else:
            file = config_path("path", path)
            self._docs = ltm_files(
                file,
                root=config_path("root", root) if root is not None else None,
                lock_path=Path(lock_path) if lock_path is not None else None,
                timeout=LOCK_TIMEOUT,
            )
        self.path: Path | None = (
            self._docs.file_path(LTM_KEY) if isinstance(self._docs, FileDocuments) else None
        )
        self._scrub = scrubber
        self._clock = clock
        self._thread_lock = threading.RLock()
        self._doc = _Doc()
        self._raw: bytes | None = None
        self.moved_aside: list[Path | str] = []
        self.problems: list[str] = []

    @property
    def documents(self) -> Documents:
        """Where the one document ``ltm`` lives (files, memory or PostgreSQL)."""
        return self._docs

    # ------------------------------------------------------------------ document cycle

    def _refresh(self) -> None:
        """Bring the in-memory copy up to date with the stored bytes (parsed again only when
        they changed).

        The bytes are compared rather than the file's stat: an atomic replace can reuse an
        inode within one timestamp tick, and a stale read must never be merged into.
        """
        raw = self._docs.read(LTM_KEY)
        if raw is not None and raw == self._raw:
            return
        self._doc = _Doc() if raw is None else self._parse(raw)
        self._raw = raw

    def _parse(self, raw: bytes) -> _Doc:
        try:
            data = json.loads(raw)
            return self._decode(data)
        except FormatVersionError as exc:
            if exc.found is not None:
                raise  # a newer agentmem wrote it: leave it alone, never overwrite it
            reason = str(exc)  # a malformed version: unreadable, moved aside below
        except AgentMemError as exc:
            reason = str(exc)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            reason = f"not valid JSON: {exc}"
        if not self._docs.held:
            # Only a lock holder may move the document: a reader that saw the bad bytes could
            # otherwise set aside the good one a writer has just put in its place.
            with self._docs.locked():
                now = self._docs.read(LTM_KEY)
                if now is None:
                    return _Doc()
                if now != raw:
                    return self._parse(now)
                return self._set_aside(reason)
        return self._set_aside(reason)

    def _set_aside(self, reason: str) -> _Doc:
        moved, message = self._docs.set_aside(
            LTM_KEY, what=f"long-term memory {self._where()}", reason=reason, logger=logger
        )
        self.moved_aside.append(moved)
        self.problems.append(message)
        return _Doc()

    def _where(self) -> str:
        return str(self.path) if self.path is not None else self._docs.describe(LTM_KEY)

    def _decode(self, data: Any) -> _Doc:
        doc = _Doc()
        if isinstance(data, Mapping) and "format" not in data and "patterns" in data:
            patterns, metadata = data.get("patterns"), data.get("metadata") or {}
            if not isinstance(patterns, Mapping) or not isinstance(metadata, Mapping):
                raise InvalidArgumentError("CLIO-style file: patterns/metadata are not objects")
            raw_entries: Iterable[Any] = _clio_entries(patterns, metadata)
        else:
            check_format(data, kind=LTM_FORMAT, version=LTM_VERSION, what="long-term memory")
            stored = data.get("entries", [])
            if not isinstance(stored, list):
                raise InvalidArgumentError("long-term memory: entries is not a list")
            raw_entries = stored
            kept = data.get("unreadable", [])
            doc.unreadable.extend(kept if isinstance(kept, list) else [kept])
        for raw in raw_entries:
            try:
                doc.add(LTMEntry.from_json(raw))
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                doc.unreadable.append(raw)
                message = f"long-term memory {self._where()}: entry kept unread ({exc!r})"
                if message not in self.problems:  # reported once, not on every re-read
                    logger.warning(message)
                    self.problems.append(message)
        return doc

    def _change(self, apply: Callable[[_Doc], Any]) -> Any:
        """Lock -> re-read -> apply -> atomic replace; returns what ``apply`` returned.

        ``apply`` changes a copy; the copy becomes the in-memory state only once the
        lock is released with the write done (for PostgreSQL: committed), so a failed
        write (or a failed ``apply``) leaves memory as it was.
        """
        with self._thread_lock:
            try:
                with self._docs.locked():
                    self._refresh()
                    doc = self._doc.copy()
                    result = apply(doc)
                    data = doc.encode()
                    self._docs.write(LTM_KEY, data)
            except BaseException:
                # The document may have changed under us (or, in PostgreSQL, a set-aside
                # made in this cycle was rolled back with it): read it again next time.
                self._raw = None
                raise
            self._doc, self._raw = doc, data
            return result

    def _snapshot(self) -> list[LTMEntry]:
        with self._thread_lock:
            self._refresh()
            return list(self._doc.entries.values())

    # ------------------------------------------------------------------ adding

    def add(
        self,
        kind: str,
        text: str,
        *,
        detail: str = "",
        confidence: float = 0.5,
        examples: Iterable[str] = (),
    ) -> LTMEntry:
        """Add an entry of any kind, or confirm the known one with the same normalised text.

        Args:
            kind: One of :data:`KINDS`.
            text: The fact, error, pattern, workflow, failure or rule.
            detail: The solution (problem_solutions), prevention (failures) or
                scope (context_rules); part of the identity for problem_solutions only.
            confidence: 0..1.
            examples: Example paths.

        Returns:
            The entry as stored after the change.

        Raises:
            InvalidArgumentError: unknown kind, empty or over-long text,
                confidence outside 0..1, examples not strings.
            StorageError: the file could not be read or written.
        """
        if kind not in KINDS:
            raise InvalidArgumentError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        text = _check_text("text", text)
        detail = _check_text("detail", detail, empty_ok=True)
        conf = _check_confidence(confidence)
        paths = _check_examples(examples)
        if self._scrub is not None:
            text, detail = self._scrub(text), self._scrub(detail)
            paths = tuple(self._scrub(p) for p in paths)
        new_id = entry_id(kind, text, detail)

        def apply(doc: _Doc) -> LTMEntry:
            now = self._clock()
            known = doc.entries.get(new_id)
            if known is not None:
                entry = _confirmed(known, conf, paths, now)
            else:
                entry = LTMEntry(new_id, kind, text, detail, conf, now, now, paths, 1)
            doc.entries[new_id] = entry
            return entry

        result: LTMEntry = self._change(apply)
        return result

    def add_discovery(
        self, fact: str, confidence: float = 0.8, examples: Iterable[str] = ()
    ) -> LTMEntry:
        """Add (or confirm) a fact about the project."""
        return self.add("discoveries", fact, confidence=confidence, examples=examples)

    def add_solution(
        self, error: str, solution: str, examples: Iterable[str] = (), confidence: float = 0.8
    ) -> LTMEntry:
        """Add (or confirm) how an error was solved."""
        _check_text("solution", solution)
        return self.add(
            "problem_solutions", error, detail=solution, confidence=confidence, examples=examples
        )

    def add_pattern(
        self, pattern: str, confidence: float = 0.7, examples: Iterable[str] = ()
    ) -> LTMEntry:
        """Add (or confirm) a code pattern of the project."""
        return self.add("code_patterns", pattern, confidence=confidence, examples=examples)

    def confirm(self, entry_id: str) -> LTMEntry:
        """Confirm an entry by id (it was applied again).

        Raises:
            InvalidArgumentError: no entry has that id (or it is not a string).
        """
        check_str("entry_id", entry_id)

        def apply(doc: _Doc) -> LTMEntry:
            known = doc.entries.get(entry_id)
            if known is None:
                raise InvalidArgumentError(f"no long-term memory entry with id {entry_id!r}")
            doc.entries[entry_id] = entry = _confirmed(known, 0.0, (), self._clock())
            return entry

        result: LTMEntry = self._change(apply)
        return result

    # ------------------------------------------------------------------ reading

    def entries(self, kind: str | None = None) -> list[LTMEntry]:
        """Entries (of one kind, or all), most confident and newest first."""
        if kind is not None and kind not in KINDS:
            raise InvalidArgumentError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        found = [e for e in self._snapshot() if kind is None or e.kind == kind]
        return sorted(found, key=lambda e: (-e.confidence, -e.last_confirmed, e.id))

    def discoveries(self) -> list[LTMEntry]:
        """Discoveries, most confident and newest first."""
        return self.entries("discoveries")

    def solutions(self) -> list[LTMEntry]:
        """Problem solutions, most confident and newest first."""
        return self.entries("problem_solutions")

    def patterns(self) -> list[LTMEntry]:
        """Code patterns, most confident and newest first."""
        return self.entries("code_patterns")

    def get(self, entry_id: str) -> LTMEntry | None:
        """The entry with that id, or ``None``.

        Raises:
            InvalidArgumentError: ``entry_id`` is not a string.
        """
        check_str("entry_id", entry_id)
        return next((e for e in self._snapshot() if e.id == entry_id), None)

    def search(self, query: str, *, limit: int = 20) -> list[LTMEntry]:
        """Entries sharing words with ``query``, best match first (ties: most confident).

        Raises:
            InvalidArgumentError: ``query`` is not a string, or ``limit`` not an int >= 0.
        """
        check_str("query", query)
        limit = check_int("limit", limit, minimum=0)
        words = set(normalise(query).split())
        if not words:
            return []
        scored = []
        for entry in self._snapshot():
            have = set(normalise(f"{entry.text} {entry.detail} {' '.join(entry.examples)}").split())
            hits = len(words & have)
            if hits:
                scored.append((-hits, -entry.confidence, -entry.last_confirmed, entry.id, entry))
        scored.sort(key=lambda row: row[:4])
        return [row[-1] for row in scored[: max(0, limit)]]

    def stats(self) -> dict[str, Any]:
        """Counts per kind, total, average confidence, oldest and newest timestamps."""
        entries = self._snapshot()
        return {
            "total": len(entries),
            "by_kind": {k: sum(1 for e in entries if e.kind == k) for k in KINDS},
            "average_confidence": (
                round(sum(e.confidence for e in entries) / len(entries), 4) if entries else 0.0
            ),
            "applications": sum(e.applications for e in entries),
            "confirmations": sum(e.confirmations for e in entries),
            "oldest": min((e.first_seen for e in entries), default=None),
            "newest": max((e.last_confirmed for e in entries), default=None),
            "unreadable": len(self._doc.unreadable),
            "path": self._stats_path(),
        }

    # ------------------------------------------------------------------ removing

    def remove(self, entry_id: str) -> bool:
        """Remove an entry; returns whether it existed."""
        check_str("entry_id", entry_id)
        removed: bool = self._change(lambda doc: doc.entries.pop(entry_id, None) is not None)
        return removed

    def prune(
        self, max_age_days: float = 90, min_confidence: float = 0.3, *, dry_run: bool = False
    ) -> list[LTMEntry]:
        """Remove entries not confirmed for ``max_age_days`` or below ``min_confidence``.

        Args:
            dry_run: Only say what would be removed: nothing is written.

        Returns:
            The removed entries (with ``dry_run``: those a prune would remove now).
        """
        if (
            isinstance(max_age_days, bool)
            or not isinstance(max_age_days, int | float)
            or not (0 <= max_age_days < math.inf)
        ):
            raise InvalidArgumentError(
                f"max_age_days must be a non-negative number, got {max_age_days!r}"
            )
        threshold = _check_confidence(min_confidence)
        if not isinstance(dry_run, bool):
            raise InvalidArgumentError(f"dry_run must be a bool, got {dry_run!r}")

        def stale(entries: Iterable[LTMEntry]) -> list[LTMEntry]:
            cutoff = self._clock() - max_age_days * 86400.0
            return [e for e in entries if e.last_confirmed < cutoff or e.confidence < threshold]

        if dry_run:
            return stale(self._snapshot())

        def apply(doc: _Doc) -> list[LTMEntry]:
            gone = stale(doc.entries.values())
            for entry in gone:
                del doc.entries[entry.id]
            return gone

        removed: list[LTMEntry] = self._change(apply)
        return removed

    # ------------------------------------------------------------------ prompt

    def render_for_prompt(
        self, max_tokens: int = PROMPT_TOKENS, *, token_counter: TokenCounter | None = None
    ) -> str:
        """Markdown for the system prompt, or ``""`` when there is nothing to say.

        Up to 15 discoveries, 15 solutions and 10 patterns, most confident and
        newest first, each kind under its heading. The whole text stays within
        ``max_tokens`` as counted by ``token_counter`` (a heuristic counter
        when omitted): a line that does not fit is left out and the next ones
        are still tried (:func:`agentmem._prompt_budget.render_within`).
        """
        if type(max_tokens) is not int or max_tokens < 0:
            raise InvalidArgumentError(f"max_tokens must be a non-negative int, got {max_tokens!r}")
        if token_counter is not None and not isinstance(token_counter, TokenCounter):
            raise InvalidArgumentError(
                f"token_counter must provide count_text(text), got {type(token_counter).__name__}"
            )
        lines = [
            (f"## {_HEADINGS[kind]}", _prompt_line(entry))
            for kind, limit in RENDER_LIMITS.items()
            for entry in self.entries(kind)[:limit]
        ]
        counter = token_counter or HeuristicCounter()
        return render_within(lines, max_tokens, counter, head="# Long-term memory")

    def prompt_block(self, context_window: int, token_counter: TokenCounter) -> str:
        """What a session with ``context_window`` puts in its system prompt.

        :meth:`render_for_prompt` within :data:`PROMPT_TOKENS`, and at most a
        tenth of the window (:func:`agentmem._prompt_budget.block_budget`).

        Raises:
            AgentMemError: ``ltm.json`` cannot be read (a session logs it and opens
                without the block).
        """
        budget = block_budget(PROMPT_TOKENS, context_window)
        return self.render_for_prompt(budget, token_counter=token_counter)

    def __len__(self) -> int:
        return len(self._snapshot())

    def _stats_path(self) -> str | None:
        if self.path is not None:
            return str(self.path)
        return None if isinstance(self._docs, MemoryDocuments) else self._docs.location

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else self._docs.location
        return f"LongTermMemory({where})"
