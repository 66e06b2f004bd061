"""The prefix anchor: the last billed payload, so the next estimate starts from a billed count.

An agent's request is the previous request plus the new messages until a
trim runs. When the payload being counted starts with the payload the
provider last billed (same messages, same tool schemas), its size is that
billed count plus the size of the new part; only the new part has to be
estimated, so the learned ratio's error applies to a few hundred tokens
rather than to the whole window. :class:`PrefixAnchor` keeps what that
needs -- a hash chain over the billed messages, the billed count, a hash of
the tool schemas -- plus the relative residuals of its own past predictions
of the new part (``(billed - previous billed) / predicted new part - 1``),
from which the safety margin of an anchored estimate is learned. Used by
:class:`~agentmem.tokens.LearningEstimator`; its state rides in the
estimator's state.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from agentmem.tokens.messages import message_overhead, message_text_pieces

__all__ = [
    "ANCHOR_BOUND_SIGMAS",
    "ANCHOR_MIN_NEW_TOKENS",
    "ANCHOR_MIN_RESIDUALS",
    "PrefixAnchor",
    "message_key",
    "prediction_bound",
    "tools_key",
]

ANCHOR_MIN_RESIDUALS = 3
"""Residuals needed before the anchored margin is learned from them."""
ANCHOR_MIN_NEW_TOKENS = 50
"""New parts estimated below this many tokens are too small to learn a residual from."""
ANCHOR_BOUND_SIGMAS = 2.5
"""Standard deviations above the mean residual the learned margin covers at least."""
ANCHOR_MARGIN_FLOOR = 0.0
"""Smallest anchored margin learned from the residuals."""
_CHAIN_START = ""


def message_key(message: Mapping[str, Any]) -> str:
    """A digest of what a provider bills in ``message``: its role, billed strings and framing."""
    role = message.get("role") if isinstance(message, Mapping) else None
    body = json.dumps(
        [str(role), message_text_pieces(message), message_overhead(message)],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def tools_key(tools: Sequence[Mapping[str, Any]] | None) -> str:
    """A digest of the tool schemas sent with a request (``""`` for none)."""
    if not tools:
        return ""
    spec = json.dumps(list(tools), ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.blake2b(spec.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def prediction_bound(values: Sequence[float]) -> float:
    """The upper prediction bound of the next of ``values`` (at least two values).

    ``mean + ANCHOR_BOUND_SIGMAS * stdev * sqrt(1 + 1/n)``: wide while few
    values were seen, about 2.5 standard deviations above the mean later.
    """
    n = len(values)
    spread = statistics.stdev(values) * math.sqrt(1.0 + 1.0 / n)
    return statistics.fmean(values) + ANCHOR_BOUND_SIGMAS * spread


def _chain(previous: str, key: str) -> str:
    return hashlib.blake2b(f"{previous}|{key}".encode(), digest_size=12).hexdigest()


class PrefixAnchor:
    """The last billed payload (as a hash chain) and the residuals of anchored predictions.

    Not thread-safe on its own: the owning estimator holds its lock around every call.
    """

    def __init__(self, window: int = 256) -> None:
        self.length = 0
        self.chain = _CHAIN_START
        self.billed = 0
        self.tools = ""
        self.residuals: deque[float] = deque(maxlen=window)

    def new_part(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> Sequence[Mapping[str, Any]] | None:
        """The messages after the anchored prefix, or ``None`` when ``messages`` does not extend it.

        ``None`` after a trim, an edited or replaced message, a changed system
        prompt or tool set, or before anything was billed.
        """
        if self.length == 0 or len(messages) < self.length or tools_key(tools) != self.tools:
            return None
        chain = _CHAIN_START
        for message in messages[: self.length]:
            chain = _chain(chain, message_key(message))
        return messages[self.length :] if chain == self.chain else None

    def reset_to(
        self,
        messages: Sequence[Mapping[str, Any]],
        billed: int,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> None:
        """Anchor on ``messages`` (and ``tools``), billed ``billed`` prompt tokens."""
        chain = _CHAIN_START
        for message in messages:
            chain = _chain(chain, message_key(message))
        self.length = len(messages)
        self.chain = chain
        self.billed = int(billed)
        self.tools = tools_key(tools)

    def margin(self, initial: float) -> float:
        """The anchored estimate's margin, learned from the residuals (see the module docstring).

        The largest of the residuals kept (how much an anchored prediction
        under-counted its new part, the last 256) and their
        :func:`prediction_bound` (wide while few were seen), never below
        :data:`ANCHOR_MARGIN_FLOOR` nor above 1.0; ``initial`` (the estimator
        passes its ratio's margin) until :data:`ANCHOR_MIN_RESIDUALS`
        residuals were seen. The largest residual rather than a quantile:
        the anchored estimate is the budget's cap, and a window property
        test with a simulated provider overflowed with the 95th percentile.
        """
        n = len(self.residuals)
        if n < ANCHOR_MIN_RESIDUALS:
            return initial
        values = list(self.residuals)
        return min(1.0, max(ANCHOR_MARGIN_FLOOR, max(values), prediction_bound(values)))

    def state(self) -> dict[str, Any]:
        """JSON-safe state (part of the estimator's state)."""
        return {
            "length": self.length,
            "chain": self.chain,
            "billed": self.billed,
            "tools": self.tools,
            "residuals": list(self.residuals),
        }

    def restore(self, state: object) -> None:
        """Resume from :meth:`state`; anything malformed leaves the anchor empty (never raises)."""
        self.length, self.chain, self.billed, self.tools = 0, _CHAIN_START, 0, ""
        self.residuals.clear()
        if not isinstance(state, Mapping):
            return
        try:
            length, billed = state["length"], state["billed"]
            chain, tools = state["chain"], state["tools"]
            residuals = [float(x) for x in state.get("residuals", [])]
        except (KeyError, TypeError, ValueError):
            return
        if (
            type(length) is int
            and type(billed) is int
            and length >= 0
            and billed >= 0
            and isinstance(chain, str)
            and isinstance(tools, str)
        ):
            self.length, self.chain, self.billed, self.tools = length, chain, billed, tools
            self.residuals.extend(r for r in residuals if math.isfinite(r) and abs(r) <= 1.0)
