"""What a store left out or read with replacements: each line logged once and kept.

A store that skips a file it cannot read (and leaves it in place) reports it
through one :class:`ProblemLog`: a warning on the store's logger the first
time, and a line in :attr:`ProblemLog.lines`, which the store exposes as its
``problems`` attribute.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["ProblemLog"]


class ProblemLog:
    """Problems reported by one store object, oldest first, each once."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._lock = threading.Lock()
        self.lines: list[str] = []
        """The reported messages, oldest first."""

    def report(self, message: str) -> None:
        """Log ``message`` as a warning and keep it, unless it was reported already."""
        with self._lock:
            if message in self.lines:
                return
            self.lines.append(message)
        self._logger.warning("%s", message)
