"""The hypothesis profiles the suite runs under (tests/profiles.py, docs/testing.md)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from profiles import NIGHTLY_FACTOR, profile_name, scaled


def test_ci_profile_is_reproducible_and_big_enough() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize
    assert ci.database is None
    assert ci.max_examples >= 150
    assert ci.deadline is None


def test_nightly_profile_runs_long_and_scales_explicit_sizes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nightly = settings.get_profile("nightly")
    assert nightly.max_examples == 5_000
    assert nightly.stateful_step_count >= 100
    assert not nightly.derandomize
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "nightly")
    assert profile_name() == "nightly"
    assert scaled(60) == 60 * NIGHTLY_FACTOR
    monkeypatch.delenv("HYPOTHESIS_PROFILE")
    monkeypatch.setenv("CI", "1")
    assert (profile_name(), scaled(60)) == ("ci", 60)
