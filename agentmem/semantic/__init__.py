"""Semantic memory (mem0-style): memories of the user, captured and recalled per turn.

* :class:`~agentmem.semantic.extension.SemanticMemoryExtension`: attach to a
  session (``mem.session(extensions=[ext])``); captures the user's words and
  injects a ``<memory-context>`` block of what was remembered.
* :class:`~agentmem.semantic.recorder.Recorder`: the bounded, non-blocking
  background queue that hands the user's words to a
  :class:`~agentmem.protocols.MemoryClient`.

See docs/semantic-extension.md.
"""

from agentmem.semantic.extension import SemanticMemoryExtension, strip_memory_context
from agentmem.semantic.recorder import CloseReport, Recorder

__all__ = ["CloseReport", "Recorder", "SemanticMemoryExtension", "strip_memory_context"]
