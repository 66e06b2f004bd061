"""Whether the prefix-anchored estimate lets a payload through a stage-1 or stage-2 threshold.

The manager's counts are per-message ratio counts: with a
:class:`~agentmem.tokens.LearningEstimator` they carry the ratio's margin,
which on real runs counts 8-17% high. When the repaired payload extends the
request the provider last billed (same messages, same tool schemas), the
estimator's :meth:`~agentmem.tokens.LearningEstimator.anchored_estimate` is
that bill plus the new part with a margin learned from its own residuals,
far closer. :func:`anchored_fits` is the one place the pipeline consults it:
the decision uses ``min(ratio count, anchored estimate - tool count)``.
Trim targets, stage 3 and builds after a trim keep the ratio count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentmem.context.types import ContextStats
from agentmem.protocols import TokenCounter

__all__ = ["anchored_fits"]

_log = logging.getLogger("agentmem.context")


def anchored_fits(
    counter: TokenCounter,
    messages: Callable[[], Sequence[Mapping[str, Any]]],
    ratio_tokens: int,
    threshold: float,
    *,
    limit: int,
    tools: Sequence[Mapping[str, Any]],
    tool_tokens: int,
    stats: ContextStats,
    known: int | None = None,
) -> bool:
    """Whether the anchored estimate keeps a payload the ratio count puts over ``threshold``.

    Only with a counter that has ``anchored_estimate(messages, tools=)`` (a
    :class:`~agentmem.tokens.LearningEstimator`), and only when it returns a
    count (the payload extends the last billed request). The anchored figure
    covers the tools, so ``tool_tokens`` (their count in the budget) is taken
    off before comparing with ``threshold`` (a share of the budget ``limit``).
    The ratio count must still fit ``limit``. ``messages`` is called only
    when needed (the repaired canonical payload, the form the session's
    ``record_usage`` anchors on). ``known``: the anchored estimate already
    computed for the same payload in this build (stage 1's, reused by stage 2
    when no trim ran in between), so the payload is hashed once.

    Sets ``stats.anchored_tokens`` when an anchored estimate was computed and
    ``stats.estimate_source`` to ``"anchored"`` when it decides, else ``"ratio"``.
    A counter whose estimate raises is logged and ignored (the ratio decides).
    """
    stats.estimate_source = "ratio"
    if ratio_tokens > limit:
        return False
    anchored: object = known
    if anchored is None:
        estimate = getattr(counter, "anchored_estimate", None)
        if not callable(estimate):
            return False
        try:
            anchored = estimate(messages(), tools=tools or None)
        except Exception:  # a counter's estimate must never break the build
            _log.debug("anchored estimate failed; deciding with the ratio count", exc_info=True)
            return False
    if type(anchored) is not int:
        return False
    stats.anchored_tokens = anchored
    if anchored - tool_tokens > threshold:
        return False
    stats.estimate_source = "anchored"
    return True
