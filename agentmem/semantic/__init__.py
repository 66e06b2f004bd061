"""Semantic memory: mem0-style facts about the user, remembered across sessions.

Two implementations of :class:`~agentmem.protocols.MemoryClient`:

* :class:`LocalMemoryClient` -- embedded, in ``<root>/semantic.sqlite``: BM25
  over an FTS5 index plus optional vectors from an
  :class:`~agentmem.protocols.Embedder`; with an LLM it extracts facts from
  the user's words and reconciles them with what is stored (ADD / UPDATE /
  DELETE / NOOP), and every memory keeps its history of changes.
* :class:`Mem0Client` -- the same calls against a mem0 server's REST API,
  with the standard library only (timeouts, retries on 5xx, mapped errors).

Both remember only the user's own words. See ``docs/semantic.md``.
"""

from __future__ import annotations

from agentmem.semantic.local import SEMANTIC_FILE, HistoryEntry, LocalMemoryClient
from agentmem.semantic.mem0 import Mem0Client

__all__ = ["SEMANTIC_FILE", "HistoryEntry", "LocalMemoryClient", "Mem0Client"]
