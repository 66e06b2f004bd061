"""Shared test setup: hypothesis profiles and a guard that no test reaches the network."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# `default` for local runs, `ci` (derandomised, bounded, no deadline) when CI is set,
# `nightly` for long fuzzing sessions: HYPOTHESIS_PROFILE=nightly pytest.
settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    print_blob=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("nightly", max_examples=5_000, deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default")
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
