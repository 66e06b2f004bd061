"""``LocalMemoryClient(embedder="auto")``: MiniLM when its extra is installed, built on first use.

The extra is faked present or absent by replacing :func:`importlib.util.find_spec` for
its packages, and :class:`~agentmem.embedders.MiniLMEmbedder` by a fake class: no model
is loaded here. (conftest.py turns the automatic choice off for every other test; these
tests put the real check back.)
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmem import embedders
from agentmem.errors import ConfigurationError
from agentmem.semantic import LocalMemoryClient
from agentmem.semantic import _auto_embedder as auto

REAL_CHECK = auto.minilm_installed  # conftest replaces it per test; this is the real one
REAL_FIND_SPEC = importlib.util.find_spec

AXES = {"car": 0, "automobile": 0, "dog": 1, "puppy": 1, "tea": 2}


def concept_vectors(texts: Any) -> list[list[float]]:
    """Synonyms share an axis, so "automobile" finds "car" with no keyword in common."""
    out = []
    for text in texts:
        vec = [0.0, 0.0, 0.0]
        for word in text.lower().split():
            if word in AXES:
                vec[AXES[word]] += 1.0
        out.append(vec)
    return out


class Fakes:
    """Counts of what the fake MiniLMEmbedder class was asked to do."""

    def __init__(self) -> None:
        self.built = 0
        self.embedded: list[list[str]] = []
        self.fail_build: Exception | None = None
        self.fail_embed_after: int | None = None
        self.build_delay = 0.0


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Fakes:
    state = Fakes()

    class FakeMiniLM:
        def __init__(self) -> None:
            time.sleep(state.build_delay)
            state.built += 1
            if state.fail_build is not None:
                raise state.fail_build

        def embed(self, texts: Any) -> list[list[float]]:
            if state.fail_embed_after is not None and len(state.embedded) >= state.fail_embed_after:
                raise RuntimeError("torch fell over")
            state.embedded.append(list(texts))
            return concept_vectors(texts)

    monkeypatch.setattr(auto, "minilm_installed", REAL_CHECK)
    monkeypatch.setattr(embedders, "MiniLMEmbedder", FakeMiniLM)
    return state


def fake_find_spec(present: set[str], error: type[Exception] | None = None) -> Callable[..., Any]:
    def find_spec(name: str, package: str | None = None) -> Any:
        if name in auto.AUTO_PACKAGES:
            if error is not None:
                raise error(f"cannot look up {name}")
            if name in present:
                return importlib.machinery.ModuleSpec(name, None)
            return None
        return REAL_FIND_SPEC(name, package)

    return find_spec


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, fakes: Fakes) -> Fakes:
    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec(set(auto.AUTO_PACKAGES)))
    return fakes


def fill(client: LocalMemoryClient) -> None:
    client.add("I drive a red car", user_id="u")
    client.add("My puppy barks", user_id="u")


def found(client: LocalMemoryClient, query: str) -> list[str]:
    return [hit.memory for hit in client.search(query, user_id="u")]


# ---------------------------------------------------------------- extra installed


def test_the_default_builds_minilm_on_the_first_add_not_before(installed: Fakes) -> None:
    client = LocalMemoryClient(None)
    assert installed.built == 0 and client.embedder is None
    # Reads that need no vector do not build it either.
    assert client.get_all(user_id="u") == []
    assert client.search("   ", user_id="u") == []
    assert installed.built == 0
    fill(client)
    assert installed.built == 1
    assert client.embedder is not None and client.embedder_error is None
    # Vector similarity is on: a synonym with no keyword in common is found.
    assert found(client, "automobile") == ["I drive a red car"]
    assert installed.built == 1  # built once per client
    assert ["automobile"] in installed.embedded


def test_the_default_builds_minilm_on_the_first_search(installed: Fakes) -> None:
    client = LocalMemoryClient(None)
    assert client.search("anything", user_id="u") == []
    assert installed.built == 1


def test_concurrent_first_calls_build_the_model_once(installed: Fakes) -> None:
    installed.build_delay = 0.05
    client = LocalMemoryClient(None)
    errors: list[BaseException] = []

    def search() -> None:
        try:
            client.search("car", user_id="u")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=search) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and installed.built == 1


def test_none_forces_lexical_search(installed: Fakes) -> None:
    client = LocalMemoryClient(None, embedder=None)
    fill(client)
    assert found(client, "automobile") == []
    assert found(client, "red car") == ["I drive a red car"]
    assert installed.built == 0 and client.embedder is None


def test_a_given_embedder_is_used_as_given_and_its_errors_propagate(installed: Fakes) -> None:
    class Mine:
        def __init__(self) -> None:
            self.fail = False

        def embed(self, texts: Any) -> list[list[float]]:
            if self.fail:
                raise RuntimeError("my embedder broke")
            return concept_vectors(texts)

    mine = Mine()
    client = LocalMemoryClient(None, embedder=mine)
    fill(client)
    assert client.embedder is mine and installed.built == 0
    assert found(client, "automobile") == ["I drive a red car"]
    mine.fail = True
    with pytest.raises(RuntimeError, match="my embedder broke"):
        client.search("automobile", user_id="u")
    assert client.embedder_error is None


def test_memories_stored_without_vectors_stay_searchable(installed: Fakes, tmp_path: Path) -> None:
    with LocalMemoryClient(tmp_path, embedder=None) as old:
        old.add("I drink green tea daily", user_id="u")
    with LocalMemoryClient(tmp_path) as client:
        client.add("My puppy barks", user_id="u")
        assert installed.built == 1
        hits = client.search("green tea", user_id="u")
        # The old memory has no vector: scored by its keywords alone (both match).
        assert [(h.memory, h.score) for h in hits] == [("I drink green tea daily", 1.0)]
        assert found(client, "dog") == ["My puppy barks"]


def test_assigning_auto_or_none_switches_the_mode(installed: Fakes) -> None:
    client = LocalMemoryClient(None, embedder=None)
    client.embedder = "auto"
    fill(client)
    assert installed.built == 1
    assert found(client, "automobile") == ["I drive a red car"]
    client.embedder = None
    assert found(client, "automobile") == []
    with pytest.raises(ConfigurationError, match="embedder"):
        client.embedder = "minilm"  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match="embedder"):
        LocalMemoryClient(None, embedder="wordllama")  # type: ignore[arg-type]


# ---------------------------------------------------------------- broken install


def test_a_failing_build_warns_once_and_falls_back_to_lexical(
    installed: Fakes, caplog: pytest.LogCaptureFixture
) -> None:
    installed.fail_build = ConfigurationError("MiniLMEmbedder: cannot load the bundled model: boom")
    client = LocalMemoryClient(None)
    with caplog.at_level(logging.WARNING, logger="agentmem.semantic"):
        fill(client)  # never raises into an add
        assert found(client, "red car") == ["I drive a red car"]
        assert found(client, "automobile") == []
    assert installed.built == 1  # not retried on every call
    warnings = [r for r in caplog.records if r.name == "agentmem.semantic"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert client.embedder is None
    assert client.embedder_error is not None and "boom" in client.embedder_error
    assert "ConfigurationError" in client.embedder_error


def test_an_embedder_failing_at_run_time_falls_back_to_lexical(
    installed: Fakes, caplog: pytest.LogCaptureFixture
) -> None:
    installed.fail_embed_after = 1
    client = LocalMemoryClient(None)
    client.add("I drive a red car", user_id="u")  # embedded
    with caplog.at_level(logging.WARNING, logger="agentmem.semantic"):
        client.add("My puppy barks", user_id="u")  # embed fails: stored without a vector
        assert found(client, "puppy") == ["My puppy barks"]
        assert found(client, "automobile") == []  # lexical from now on
    assert [r.levelno for r in caplog.records if r.name == "agentmem.semantic"] == [logging.WARNING]
    assert client.embedder is None
    assert client.embedder_error is not None and "torch fell over" in client.embedder_error
    assert len(client.get_all(user_id="u")) == 2


# ---------------------------------------------------------------- extra missing


@pytest.mark.parametrize("missing", auto.AUTO_PACKAGES)
def test_without_the_extra_search_is_lexical_and_nothing_is_built(
    fakes: Fakes,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    missing: str,
) -> None:
    present = set(auto.AUTO_PACKAGES) - {missing}
    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec(present))
    with caplog.at_level(logging.DEBUG, logger="agentmem.semantic"):
        client = LocalMemoryClient(None)
        fill(client)
        assert found(client, "automobile") == []
        assert found(client, "red car") == ["I drive a red car"]
    assert fakes.built == 0 and client.embedder is None and client.embedder_error is None
    records = [r for r in caplog.records if r.name == "agentmem.semantic"]
    assert [r.levelno for r in records] == [logging.DEBUG]
    assert "minilm" in records[0].getMessage()


@pytest.mark.parametrize("error", [ImportError, ValueError])
def test_a_find_spec_error_counts_as_not_installed(
    fakes: Fakes, monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec(set(), error))
    assert auto.minilm_installed() is False
    client = LocalMemoryClient(None)
    fill(client)
    assert fakes.built == 0 and found(client, "automobile") == []


def test_constructing_a_client_imports_no_model_library() -> None:
    """With the real environment (the extra may well be installed): no torch at construction."""
    code = (
        "import sys, agentmem\n"
        "from agentmem.semantic import LocalMemoryClient\n"
        "c = LocalMemoryClient(None)\n"
        "assert c.get_all(user_id='u') == []\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'numpy')"
        " if m in sys.modules)\n"
        "assert heavy == [], heavy\n"
        "assert c.embedder is None\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
