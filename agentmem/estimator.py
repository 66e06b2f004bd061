"""The learning estimator's import path of earlier releases (now :mod:`agentmem.tokens.estimator`).

``from agentmem.estimator import LearningEstimator`` keeps working; new code
imports it from :mod:`agentmem` or :mod:`agentmem.tokens`.
"""

from agentmem.tokens.estimator import (
    ESTIMATOR_FORMAT,
    ESTIMATOR_VERSION,
    INITIAL_MARGIN,
    MAX_MARGIN,
    MIN_OBSERVATION_UNITS,
    LearningEstimator,
)

__all__ = [
    "ESTIMATOR_FORMAT",
    "ESTIMATOR_VERSION",
    "INITIAL_MARGIN",
    "MAX_MARGIN",
    "MIN_OBSERVATION_UNITS",
    "LearningEstimator",
]
