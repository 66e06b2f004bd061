"""A small in-memory MemoryClient for the semantic tests (a dict model, no agentmem code).

Search scores memories by the share of the query's words they contain, so a
test knows exactly which memories a query finds. ``gate`` (an Event) makes
``add`` wait until the test releases it; ``fail_on`` makes ``add`` raise for
texts containing a marker; every call is recorded in ``calls``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agentmem.protocols import MemoryRecord

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class FakeClient:
    """Memories in a dict; ``add`` stores the user-role text as is."""

    def __init__(self) -> None:
        self.memories: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, Any]] = []
        self.added: list[str] = []  # every text add() stored, in order
        self.gate: threading.Event | None = None
        self.entered = threading.Event()  # set when add() is first entered
        self.fail_on: str | None = None
        self.search_error: Exception | None = None
        self.lock = threading.Lock()
        self._next = 0

    # -- the protocol
    def add(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool = True,
    ) -> list[dict[str, Any]]:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(30)
        if isinstance(messages, str):
            text = messages
        else:
            text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        with self.lock:
            self.calls.append(("add", (text, user_id, infer)))
            if self.fail_on is not None and self.fail_on in text:
                raise RuntimeError(f"refused: {self.fail_on}")
            self._next += 1
            memory_id = f"m{self._next}"
            self.memories[memory_id] = {"memory": text, "user_id": user_id, "order": self._next}
            self.added.append(text)
        return [{"id": memory_id, "memory": text, "event": "ADD"}]

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
    ) -> list[MemoryRecord]:
        self.calls.append(("search", (query, user_id, limit, threshold)))
        if self.search_error is not None:
            raise self.search_error
        q = words(query)
        hits = []
        with self.lock:
            for memory_id, m in self.memories.items():
                if m["user_id"] != user_id or not q:
                    continue
                score = len(q & words(m["memory"])) / len(q)
                if score > 0:
                    hits.append((score, m["order"], memory_id, m["memory"]))
        hits.sort(key=lambda h: (-h[0], -h[1]))
        return [
            MemoryRecord(id=i, memory=text, user_id=user_id, score=score)
            for score, _, i, text in hits[:limit]
        ]

    def get_all(
        self,
        *,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> list[MemoryRecord]:
        self.calls.append(("get_all", user_id))
        with self.lock:
            rows = sorted(
                (
                    (m["order"], i, m["memory"])
                    for i, m in self.memories.items()
                    if m["user_id"] == user_id
                ),
                reverse=True,
            )
        return [MemoryRecord(id=i, memory=text, user_id=user_id) for _, i, text in rows[:limit]]

    def delete(self, memory_id: str) -> None:
        with self.lock:
            del self.memories[memory_id]

    def delete_all(
        self, *, user_id: str, agent_id: str | None = None, run_id: str | None = None
    ) -> int:
        with self.lock:
            gone = [i for i, m in self.memories.items() if m["user_id"] == user_id]
            for i in gone:
                del self.memories[i]
        return len(gone)

    # -- test helpers
    def remember(self, text: str, user_id: str = "martin") -> None:
        """Store a memory directly (as a previous session would have)."""
        with self.lock:
            self._next += 1
            self.memories[f"m{self._next}"] = {
                "memory": text,
                "user_id": user_id,
                "order": self._next,
            }


class FileClient(FakeClient):
    """A MemoryClient double that persists: every call reloads and saves a JSON file.

    Two instances on one path (one per session, or per process) see each
    other's memories, like a real store would.
    """

    def __init__(self, path: Any) -> None:
        super().__init__()
        self.path = path

    def _load(self) -> None:
        import json

        if self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.memories, self._next = data["memories"], data["next"]

    def _save(self) -> None:
        import json
        import os

        # Atomic, like a real store: the recorder's worker saves while the turn's
        # prefetch reads, and a reader must never see a half-written file.
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{id(self)}.tmp")
        tmp.write_text(
            json.dumps({"memories": self.memories, "next": self._next}), encoding="utf-8"
        )
        os.replace(tmp, self.path)

    def add(self, messages: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self._load()
        out = super().add(messages, **kwargs)
        self._save()
        return out

    def search(self, query: str, **kwargs: Any) -> list[MemoryRecord]:
        self._load()
        return super().search(query, **kwargs)

    def get_all(self, **kwargs: Any) -> list[MemoryRecord]:
        self._load()
        return super().get_all(**kwargs)
