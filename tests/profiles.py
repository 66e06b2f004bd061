"""Hypothesis profiles for the suite, and the one knob tests use to size themselves.

Profiles (chosen by ``HYPOTHESIS_PROFILE``, else ``ci`` when ``CI`` is set,
else ``default``):

* ``default`` -- local runs: 100 examples, random, with the example database.
* ``ci`` -- derandomised (the same examples on every run, so a failure is
  reproducible from the log), no database, no deadline, 150 examples: enough
  for the core property tests (history state machine, context loops, the
  store machine) to reach the multi-step cases that found real bugs, while
  the whole suite stays around a minute on 2 cores.
* ``nightly`` -- ``HYPOTHESIS_PROFILE=nightly``: 5,000 examples, 100 steps per
  state-machine run, random, no deadline. Hours, for scheduled fuzzing.

A test that wants a different size than the profile's writes
``@settings(max_examples=scaled(n))``: ``n`` under ``default`` and ``ci``,
``n * 50`` under ``nightly``, so an explicit size never caps a nightly run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

NIGHTLY_FACTOR = 50

# Every profile states derandomize explicitly: hypothesis loads its own
# built-in "ci" profile (derandomised) when it detects CI, and a profile
# registered without a parent inherits whatever is loaded at the time.
settings.register_profile("default", max_examples=100, deadline=None, derandomize=False)
settings.register_profile(
    "ci",
    max_examples=150,
    derandomize=True,
    deadline=None,
    print_blob=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly",
    max_examples=5_000,
    stateful_step_count=100,
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def profile_name() -> str:
    """The profile this run uses."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default")


def scaled(examples: int) -> int:
    """``examples``, multiplied by :data:`NIGHTLY_FACTOR` under the nightly profile."""
    return examples * NIGHTLY_FACTOR if profile_name() == "nightly" else examples


settings.load_profile(profile_name())
