"""Which estimate a build's budget decisions use: the prefix-anchored one, else the ratio's.

The manager's counts are per-message ratio counts: with a
:class:`~agentmem.tokens.LearningEstimator` they carry the ratio's margin,
which on real runs counts 8-17% high. When the repaired payload extends the
request the provider last billed (same messages, same tool schemas), the
estimator's :meth:`~agentmem.tokens.LearningEstimator.anchored_estimate` is
that bill plus the new part with a margin learned from its own residuals,
far closer. :func:`anchored_fits` is where the pipeline consults it: when
the ratio count passes a stage-1 or stage-2 threshold, a payload whose
anchored estimate (less the tools' count) is within the threshold is kept
whole, and the budget cap is then the anchored estimate's, not the ratio
count's (:func:`anchored_within`), so the room the ratio's margin takes is
given back even when the ratio count is over the budget.

When no anchored estimate exists -- after a trim, an edited message, a
changed system prompt or tool set, in a new session -- the ratio count
decides, and :func:`ratio_room` is the most it may be: the budget shrunk by
the estimator's :attr:`~agentmem.tokens.LearningEstimator.bound_margin`
over its :attr:`~agentmem.tokens.LearningEstimator.margin`, so a payload the
ratio decides on fits by the provider's count too. Trim targets and stage 3
use the ratio count.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentmem.context.types import ContextStats
from agentmem.protocols import TokenCounter

__all__ = ["anchored_fits", "anchored_within", "ratio_room"]

_log = logging.getLogger("agentmem.context")


def _float_attr(counter: TokenCounter, name: str) -> float | None:
    try:
        value = getattr(counter, name, None)
    except Exception:  # a property that raises: treat as absent
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def ratio_room(counter: TokenCounter, limit: int) -> int:
    """The most a payload's ratio count may be when the ratio count decides.

    ``limit * (1 + margin) / (1 + bound_margin)`` for a counter with both
    (a :class:`~agentmem.tokens.LearningEstimator`): its counts carry
    ``margin``, which covers most requests, and ``bound_margin`` covers the
    largest under-count seen. ``limit`` for any other counter.
    """
    margin = _float_attr(counter, "margin")
    bound = _float_attr(counter, "bound_margin")
    if margin is None or bound is None or bound <= margin or margin < 0:
        return limit
    return min(limit, math.floor(limit * (1.0 + margin) / (1.0 + bound)))


def anchored_fits(
    counter: TokenCounter,
    messages: Callable[[], Sequence[Mapping[str, Any]]],
    threshold: float,
    *,
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
    off before comparing with ``threshold`` (a share of the budget). The
    ratio count is not consulted: it may be over the whole budget.
    ``messages`` is called only when needed (the repaired canonical payload,
    the form the session's ``record_usage`` anchors on). ``known``: the
    anchored estimate already computed for the same payload in this build
    (stage 1's, reused by stage 2 when no trim ran in between), so the
    payload is hashed once.

    Sets ``stats.anchored_tokens`` and ``stats.anchor_margin`` when an
    anchored estimate was computed and ``stats.estimate_source`` to
    ``"anchored"`` when it decides, else ``"ratio"``. A counter whose
    estimate raises is logged and ignored (the ratio decides).
    """
    stats.estimate_source = "ratio"
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
    stats.anchor_margin = _float_attr(counter, "anchor_margin")
    if anchored - tool_tokens > threshold:
        return False
    stats.estimate_source = "anchored"
    return True


def anchored_within(stats: ContextStats, room: int) -> bool:
    """Whether the build's anchored estimate decided and, less the tools, fits ``room``.

    ``room`` is the budget less what the provider's shape adds (Anthropic's
    tagged notes): the final cap of a payload the anchored estimate let
    through. Leaves ``stats.estimate_source`` at ``"ratio"`` when it does
    not fit (the ratio count then caps the payload).
    """
    if stats.estimate_source != "anchored" or stats.anchored_tokens is None:
        return False
    if stats.anchored_tokens - stats.tool_tokens > room:
        stats.estimate_source = "ratio"
        return False
    return True
