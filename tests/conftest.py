"""Shared test setup: hypothesis profiles and a guard that no test reaches the network."""

from __future__ import annotations

import socket
from typing import Any

import profiles  # noqa: F401  (registers and loads the hypothesis profiles)
import pytest
from pg import (  # noqa: F401  (PostgreSQL fixtures and their skip line: tests/pg.py)
    pg_cluster,
    pg_dsn,
    pg_server,
    pytest_runtest_makereport,
)


class NetworkAccessError(AssertionError):
    """Raised when a test tries to open a network connection."""


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if anything (a tokenizer download, a real LLM client) opens an IP socket."""
    real_connect = socket.socket.connect

    def guarded_connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise NetworkAccessError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)


@pytest.fixture(autouse=True)
def _no_automatic_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LocalMemoryClient(embedder="auto")`` searches lexically in tests, whatever is installed.

    With the ``minilm`` extra installed the default would load a 0.5 GB model and change
    every score; the tests of the automatic choice (test_semantic_auto_embedder.py) put
    the real check back and fake the extra.
    """
    from agentmem.semantic import _auto_embedder

    monkeypatch.setattr(_auto_embedder, "minilm_installed", lambda: False)
