"""The shared format-header check every versioned structure is read through."""

from __future__ import annotations

from typing import Any

import pytest

from agentmem import InvalidArgumentError, LearningEstimator, ShortTermMemory
from agentmem._storage.formats import check_format


def test_accepts_current_and_older_versions() -> None:
    assert check_format({"format": "k", "version": 2}, kind="k", version=2, what="thing") == 2
    assert check_format({"format": "k", "version": 1}, kind="k", version=2, what="thing") == 1


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "expected a thing object, got list"),
        ({"format": "other", "version": 1}, "not a thing: format is 'other'"),
        ({"format": "k"}, "must be an integer >= 1, got None"),
        ({"format": "k", "version": True}, "must be an integer >= 1, got True"),
        ({"format": "k", "version": 0}, "must be an integer >= 1"),
        ({"format": "k", "version": 3}, "written by a newer agentmem (this one reads up to 2)"),
    ],
)
def test_refusals_name_the_problem(data: Any, fragment: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check_format(data, kind="k", version=2, what="thing")
    assert fragment in str(info.value)


def test_every_reader_uses_it() -> None:
    estimator = LearningEstimator()
    newer = {**estimator.state(), "version": 9}
    with pytest.raises(InvalidArgumentError, match="estimator state version 9"):
        estimator.restore(newer)
    window = ShortTermMemory()
    with pytest.raises(InvalidArgumentError, match="window state version must be"):
        window.restore({**window.state(), "version": True})
