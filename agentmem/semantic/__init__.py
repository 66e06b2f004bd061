"""Semantic memory (mem0-style): facts about the user, remembered across sessions.

Two implementations of :class:`~agentmem.protocols.MemoryClient`:

* :class:`LocalMemoryClient` -- embedded, in ``<root>/semantic.sqlite``: BM25
  over an FTS5 index plus optional vectors from an
  :class:`~agentmem.protocols.Embedder` (by default MiniLM when the
  ``minilm`` extra is installed, loaded on first use); with an LLM it extracts facts from
  the user's words and reconciles them with what is stored (ADD / UPDATE /
  DELETE / NOOP), and every memory keeps its history of changes.
* :class:`Mem0Client` -- the same calls against a mem0 server's REST API,
  with the standard library only (timeouts, retries on 5xx, mapped errors).

And the per-turn machinery:

* :class:`SemanticMemoryExtension`: attach to a session
  (``mem.session(extensions=[ext])``); captures the user's words and
  injects a ``<memory-context>`` block of what was remembered.
* :class:`Recorder`: the bounded, non-blocking background queue that hands
  the user's words to a :class:`~agentmem.protocols.MemoryClient`.

Both clients remember only the user's own words. The clients are imported
on first use (``urllib`` and SQLite setup stay out of ``import agentmem``).
See docs/semantic.md and docs/semantic-extension.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentmem.semantic.extension import SemanticMemoryExtension, strip_memory_context
from agentmem.semantic.recorder import CloseReport, Recorder

if TYPE_CHECKING:
    from agentmem.semantic.local import SEMANTIC_FILE, HistoryEntry, LocalMemoryClient
    from agentmem.semantic.mem0 import Mem0Client

__all__ = [
    "SEMANTIC_FILE",
    "CloseReport",
    "HistoryEntry",
    "LocalMemoryClient",
    "Mem0Client",
    "Recorder",
    "SemanticMemoryExtension",
    "strip_memory_context",
]

_LAZY = {
    "SEMANTIC_FILE": "agentmem.semantic.local",
    "HistoryEntry": "agentmem.semantic.local",
    "LocalMemoryClient": "agentmem.semantic.local",
    "Mem0Client": "agentmem.semantic.mem0",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentmem.semantic' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
