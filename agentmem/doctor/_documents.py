"""Long-term memory, notes, topics and items, checked on a scratch copy of their files.

Each store is built on a copy of its files (``ltm.json``, ``memory/``, ``memories/``,
``items/``) and made to read everything it holds, exactly as the library reads it.
What that did to the copy is the prediction: a file renamed to
``<name>.corrupt-<timestamp>`` is one opening would move aside, a temp file removed
is one a killed writer left, a file rewritten is a repair; lines the store
reported without changing anything (an entry kept unread, a file that is not UTF-8,
an entry that is not a regular file) become warnings; a file written by a newer
agentmem (which the stores refuse and leave alone) is damage to report as is.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from agentmem._storage.backend import ITEMS_DIR, LTM_FILE, NOTES_DIR, EmbeddedBackend
from agentmem._storage.documents import Documents
from agentmem._storage.keys import TOPICS_DIR
from agentmem.doctor._report import NEWER, Finding, Sink, failure
from agentmem.doctor._scratch import copy_tree
from agentmem.errors import AgentMemError, CorruptStoreError
from agentmem.items import ItemStore
from agentmem.ltm import LongTermMemory
from agentmem.notes import KeyValueStore
from agentmem.topics import TopicStore

__all__ = ["check_documents", "read_store"]
_STORES = (("ltm", LTM_FILE), ("notes", NOTES_DIR), ("topics", TOPICS_DIR), ("items", ITEMS_DIR))


def _hashes(folder: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for base, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(base, name)
            if path.is_symlink():
                out[str(path.relative_to(folder))] = "symlink"
            else:
                out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def check_documents(root: Path, scratch: Path, add: Sink, progress: Callable[[str], None]) -> None:
    """Check the four document stores of an embedded root (see the module docstring)."""
    copy = scratch / "documents"
    copy.mkdir()
    if (root / LTM_FILE).is_file() or (root / LTM_FILE).is_symlink():
        copy_tree_file(root / LTM_FILE, copy / LTM_FILE)
    linked: set[str] = set()
    for store, folder in _STORES[1:]:
        if (root / folder).is_symlink():
            linked.add(store)
        elif (root / folder).is_dir():
            copy_tree(root / folder, copy / folder)
    backend = EmbeddedBackend(copy)
    for store, name in _STORES:
        progress(store)
        if store in linked:
            add(
                Finding(
                    store,
                    str(root / name),
                    "damaged",
                    "its directory is a symbolic link",
                    "nothing: opening refuses it with StorageError (a store never follows links)",
                )
            )
            continue
        before = _hashes(copy)
        problems: list[str] = []
        try:
            problems = read_store(store, backend.documents(store), progress=copy / NOTES_DIR)
        except AgentMemError as exc:
            add(failure(store, str(root / name), exc, _here(str(exc), copy, root)))
        after = _hashes(copy)
        _report(store, root, copy, before, after, problems, add)


def copy_tree_file(source: Path, target: Path) -> None:
    """Copy one file (a symlink as a symlink)."""
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    else:
        target.write_bytes(source.read_bytes())


def read_store(store: str, documents: Documents, *, progress: Path | None = None) -> list[str]:
    """Make ``store`` (``"ltm"``, ``"notes"``, ``"topics"`` or ``"items"``) on ``documents``
    read everything it holds, as the library reads it; returns the problems it reported.

    A note that cannot be read is set aside by the store (on a copy, or refused on a
    read-only database) and the others are still read.

    Raises:
        AgentMemError: what the store raised (a newer format, an unsafe path...).
    """
    if store == "ltm":
        ltm = LongTermMemory(documents)
        ltm.stats()
        return list(ltm.problems)
    if store == "notes":
        notes = KeyValueStore(documents, progress=progress)
        extra: list[str] = []
        for key in notes.list():
            try:
                notes.retrieve(key)
            except CorruptStoreError as exc:
                extra.append(str(exc))
        return [*notes.problems, *extra]
    if store == "topics":
        topics = TopicStore(documents)
        for info in topics.list():
            topics.read(info.topic)
        return list(topics.problems)
    items = ItemStore(documents)
    items.items()
    return list(items.problems)


_DONE_ON_COPY = re.compile(r"; (?:moved|set) aside to \S+$")


def _here(text: str, copy: Path, root: Path) -> str:
    """``text`` about the copy, said of the real files (without what was done to the copy)."""
    return _DONE_ON_COPY.sub("", text.replace(str(copy), str(root)))


def _report(
    store: str,
    root: Path,
    copy: Path,
    before: dict[str, str],
    after: dict[str, str],
    problems: list[str],
    add: Sink,
) -> None:
    explained: set[int] = set()

    def reason_for(rel: str) -> str:
        for i, line in enumerate(problems):
            if str(copy / rel) in line:
                explained.add(i)
                return _here(line, copy, root)
        return "it could not be read"

    touched = False
    for rel in sorted(set(before) - set(after)):
        touched = True
        moved = [r for r in after if r not in before and r.startswith(rel + ".corrupt-")]
        if moved:
            add(
                Finding(
                    store,
                    str(root / rel),
                    "damaged",
                    reason_for(rel),
                    f"opening moves it aside to {rel}.corrupt-<timestamp> and "
                    + ("continues without it" if store != "ltm" else "starts empty"),
                )
            )
        else:
            add(
                Finding(
                    store,
                    str(root / rel),
                    "warning",
                    "a temp file left by a writer that was killed",
                    "opening removes it",
                )
            )
    for rel in sorted(set(before) & set(after)):
        if before[rel] != after[rel]:
            touched = True
            add(
                Finding(
                    store,
                    str(root / rel),
                    "warning",
                    reason_for(rel),
                    "reading it rewrites it (a repair)",
                )
            )
    for i, line in enumerate(problems):
        if i in explained:
            continue
        touched = True
        newer = "newer agentmem" in line or "upgrade agentmem" in line
        add(
            Finding(
                store,
                _target(line, copy, root, store),
                "damaged" if newer else "warning",
                _here(line, copy, root),
                NEWER if newer else "nothing: it is left as it is and reported",
            )
        )
    if not touched:
        name = dict(_STORES)[store]
        count = sum(1 for rel in before if rel == name or rel.startswith(name + os.sep))
        add(Finding(store, str(root / name), "ok", f"files read: {count}", "nothing"))


def _target(line: str, copy: Path, root: Path, store: str) -> str:
    for word in line.replace("(", " ").replace(")", " ").split():
        if word.startswith(str(copy)):
            return _here(word.rstrip(".,:;"), copy, root)
    return str(root / dict(_STORES)[store])
