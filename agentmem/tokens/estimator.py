"""LearningEstimator: a token estimate fitted to the provider's reported usage.

For models without a public tokenizer (Claude, DeepSeek, Llama, local
models...) :func:`agentmem.tokens.counter_for_model` returns a
:class:`LearningEstimator`. It measures text with cl100k when that BPE is
available offline (else in :func:`~agentmem.tokens.text_units`), learns the
ratio between the provider's ``prompt_tokens`` and that measure from a
window of per-request samples, and adds a safety margin taken from the
observed error so estimates err high. It also anchors on the last payload
observed (:mod:`agentmem.tokens.anchor`): :meth:`LearningEstimator.estimate_payload`
of a payload that extends it is the provider's bill plus the new part. The
rationale is in the :mod:`agentmem.tokens` docstring and ``docs/tokens.md``.
Re-exported by :mod:`agentmem.tokens`.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import statistics
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentmem._storage.formats import check_format
from agentmem.errors import InvalidArgumentError
from agentmem.tokens._tiktoken import bpe_count, cl100k_encoding
from agentmem.tokens._units import (
    DEFAULT_CHARS_PER_TOKEN,
    ceil_tokens,
    check_fraction,
    check_ratio,
    text_units,
)
from agentmem.tokens.anchor import ANCHOR_MIN_NEW_TOKENS, PrefixAnchor, prediction_bound
from agentmem.tokens.messages import (
    REPLY_PRIMING_TOKENS,
    count_messages,
    message_overhead,
    message_text_pieces,
)

__all__ = [
    "ESTIMATOR_FORMAT",
    "ESTIMATOR_VERSION",
    "INITIAL_MARGIN",
    "MAX_MARGIN",
    "MIN_OBSERVATION_UNITS",
    "LearningEstimator",
]

_log = logging.getLogger("agentmem.tokens")

MIN_OBSERVATION_UNITS = 200
"""Observations with less text than this (in units) are too noisy to learn from."""

ESTIMATOR_FORMAT = "agentmem.estimator"
"""``format`` tag of a persisted :meth:`LearningEstimator.state`."""
ESTIMATOR_VERSION = 2
"""Current version of a persisted :meth:`LearningEstimator.state`."""

INITIAL_MARGIN = {"cl100k": 0.10, "chars": 0.25}
"""Safety margin of a :class:`LearningEstimator` before it has 3 samples, per unit."""

MAX_MARGIN = 1.0
"""Largest safety margin a :class:`LearningEstimator` applies (counts at most doubled)."""
_EPOCH_THRESHOLD = 0.005
_CACHE_MIN_CHARS = 1
_CACHE_MAX_CHARS = 256 * 1024
_CACHE_ENTRIES = 16_384


class LearningEstimator:
    """A token estimate fitted to the provider's reported usage, erring high.

    Text is measured in *units*. With a cl100k BPE at hand (``unit ==
    "cl100k"``; :func:`cl100k_encoding`) a unit is a quarter of a cl100k
    token, i.e. ``units(text) = 4 * cl100k_tokens(text)``; without one
    (``unit == "chars"``) units are :func:`text_units`. Either way a ratio
    of 4.0 units per token means "as cl100k counts" or "four ASCII
    characters per token", so the defaults, bounds and :attr:`chars_per_token`
    keep one scale. A BPE follows the text class -- ``ls -la`` output, JSON
    and code cost far more tokens per character than prose -- which a
    character ratio cannot, so the learned ratio only has to absorb the
    difference between cl100k and the provider's tokenizer.

    ``count_text(text) = ceil(units(text) * (1 + margin) / chars_per_token)``.
    Each :meth:`observe` turns one request into a sample ratio (units of
    billed text per token of billed text); the fitted ratio is

    * with fewer than 3 samples: the median of ``[prior, prior, *samples]``,
      so a single sample cannot move it at all;
    * afterwards: the mean of the samples with the top and bottom 25% (at
      least one each) dropped;

    over the last ``window`` samples, each sample and the result clamped to
    ``[min_ratio, max_ratio]``. The safety :attr:`margin` is derived from the
    observed error: the ``margin_quantile`` quantile of ``fitted / sample -
    1`` over the window (how much the fitted ratio under-counted each
    request), never below 0 nor above 1.0; before 3 samples it is
    :data:`INITIAL_MARGIN` for the unit. Requests the fit under-counts by
    more than the margin are therefore about ``1 - margin_quantile`` of the
    recent ones. A fixed ``margin`` can be given instead.

    The published ratio and margin only follow the fitted ones when the
    effective ratio ``chars_per_token / (1 + margin)`` moves by more than
    0.5%, and :attr:`epoch` increments exactly then, so counts are constant
    within an epoch. Thread-safe.

    Attributes:
        epoch: Incremented whenever the counts change.
        unit: ``"cl100k"`` or ``"chars"``, what a unit is (see above).
        min_ratio: Lower bound of the ratio.
        max_ratio: Upper bound of the ratio.
    """

    def __init__(
        self,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
        *,
        min_ratio: float = 0.5,
        max_ratio: float = 12.0,
        window: int = 64,
        unit: str = "auto",
        margin: float | None = None,
        margin_quantile: float = 0.9,
    ) -> None:
        """Create an estimator.

        Args:
            chars_per_token: The prior ratio (units per token), clamped to
                the bounds.
            min_ratio: Smallest ratio the estimate may take.
            max_ratio: Largest ratio the estimate may take.
            window: How many recent samples the estimate uses.
            unit: ``"auto"`` (cl100k when available offline, else
                characters), ``"cl100k"`` (characters anyway when no BPE can
                be loaded) or ``"chars"``.
            margin: A fixed safety margin (``0.1`` = count 10% high), or
                ``None`` to derive it from the observed error.
            margin_quantile: Quantile of the observed under-count the
                derived margin covers, in ``(0, 1]``.

        Raises:
            InvalidArgumentError: For non-positive ratios, ``min_ratio >
                max_ratio``, ``window < 1``, an unknown ``unit``, a negative
                ``margin`` or a ``margin_quantile`` outside ``(0, 1]``.
        """
        self.min_ratio = check_ratio("min_ratio", min_ratio)
        self.max_ratio = check_ratio("max_ratio", max_ratio)
        if self.min_ratio > self.max_ratio:
            raise InvalidArgumentError(
                f"min_ratio ({min_ratio!r}) must not exceed max_ratio ({max_ratio!r})"
            )
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise InvalidArgumentError(f"window must be a positive int, got {window!r}")
        if unit not in ("auto", "cl100k", "chars"):
            raise InvalidArgumentError(f"unit must be 'auto', 'cl100k' or 'chars', got {unit!r}")
        if margin is not None:
            margin = check_fraction("margin", margin, upper=MAX_MARGIN, allow_zero=True)
        self._quantile = check_fraction("margin_quantile", margin_quantile, upper=1.0)
        self._encoding = cl100k_encoding() if unit != "chars" else None
        self.unit = "cl100k" if self._encoding is not None else "chars"
        self._fixed_margin = margin
        self._prior = self._clamp(check_ratio("chars_per_token", chars_per_token))
        self._samples: deque[float] = deque(maxlen=window)
        self._ratio = self._prior
        self._margin = margin if margin is not None else INITIAL_MARGIN[self.unit]
        self._lock = threading.Lock()
        # Memoised BPE sizes; a pure function of the text, so copies may share it.
        self._units_cache: dict[str, float] = {}
        self._cache_lock = threading.Lock()
        self._anchor = PrefixAnchor()
        self.epoch = 0

    def _clamp(self, ratio: float) -> float:
        return min(self.max_ratio, max(self.min_ratio, ratio))

    @property
    def chars_per_token(self) -> float:
        """The current published ratio (units per token, before the margin)."""
        return self._ratio

    @property
    def margin(self) -> float:
        """The current safety margin: counts are ``1 + margin`` times the fitted estimate."""
        return self._margin

    @property
    def bound_margin(self) -> float:
        """A margin that covers every under-count of the ratio estimate seen, and the next one.

        :attr:`margin` covers the ``margin_quantile`` of the recent requests;
        this is the largest of it, the largest under-count of the published
        ratio over the window's samples (``chars_per_token / sample - 1``)
        and their upper prediction bound (mean + 2.5 standard deviations,
        times ``sqrt(1 + 1/n)``), at most :data:`MAX_MARGIN`. :attr:`margin`
        itself while fewer than 3 samples were seen or when it was fixed.
        The context pipeline caps a payload the ratio count decides on
        (after a trim, a changed system prompt or tool set, in a new
        session) at ``budget * (1 + margin) / (1 + bound_margin)``, so the
        provider's count of it stays within the budget.
        """
        with self._lock:
            margin = self._margin
            if self._fixed_margin is not None or len(self._samples) < 3:
                return margin
            errors = [self._ratio / sample - 1.0 for sample in self._samples]
            return min(MAX_MARGIN, max(margin, max(errors), prediction_bound(errors)))

    @property
    def anchor_margin(self) -> float:
        """The margin of an anchored :meth:`estimate_payload`, learned from its residuals.

        Until 3 anchored residuals were seen it is the ratio's :attr:`margin`;
        then the larger of the largest residual kept and their upper
        prediction bound (see :mod:`agentmem.tokens.anchor`), between 0 and 1.0. It is
        reported in :attr:`ContextStats.anchor_margin
        <agentmem.context.ContextStats.anchor_margin>` and in ``repr``.
        """
        with self._lock:
            return self._anchor_margin()

    @property
    def anchored_tokens(self) -> int:
        """The billed prompt count of the payload anchored on (0 before any observation)."""
        return self._anchor.billed

    @property
    def samples(self) -> int:
        """How many samples the estimate currently rests on (at most ``window``)."""
        return len(self._samples)

    def units(self, text: str) -> float:
        """Size of ``text`` in this estimator's units (see the class docstring).

        BPE sizes of texts up to 256 KiB are memoised (the last 16,384
        texts), because every :meth:`observe` re-measures a payload that
        is mostly the same messages as the previous one.
        """
        if self._encoding is None or not text:
            return text_units(text)
        cacheable = _CACHE_MIN_CHARS <= len(text) <= _CACHE_MAX_CHARS
        if cacheable:
            with self._cache_lock:
                hit = self._units_cache.get(text)
            if hit is not None:
                return hit
        count = bpe_count(self._encoding, text)
        if count is None:
            return text_units(text)
        units = count * DEFAULT_CHARS_PER_TOKEN
        if cacheable:
            with self._cache_lock:
                self._units_cache[text] = units
                if len(self._units_cache) > _CACHE_ENTRIES:
                    del self._units_cache[next(iter(self._units_cache))]
        return units

    def count_text(self, text: str) -> int:
        """Return the estimated token count of ``text`` (0 for the empty string)."""
        if not text:
            return 0
        ratio, margin = self._ratio, self._margin
        return max(1, ceil_tokens(self.units(text) * (1.0 + margin) / ratio))

    def _fitted(self) -> tuple[float, float]:
        samples = sorted(self._samples)
        n = len(samples)
        if n < 3:
            estimate = self._clamp(statistics.median([self._prior, self._prior, *samples]))
            margin = INITIAL_MARGIN[self.unit]
        else:
            k = max(1, n // 4)
            estimate = self._clamp(statistics.fmean(samples[k : n - k]))
            # Under-count of each request at the fitted ratio, smallest sample first.
            errors = sorted(estimate / sample - 1.0 for sample in samples)
            index = min(n - 1, math.ceil(self._quantile * n) - 1)
            margin = min(MAX_MARGIN, max(0.0, errors[index]))
        if self._fixed_margin is not None:
            margin = self._fixed_margin
        return estimate, margin

    def observe(
        self,
        messages: Iterable[Mapping[str, Any]],
        prompt_tokens: int,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Learn from one request's reported prompt size.

        The sample ratio is the units of all billed text (the
        :func:`message_text_pieces` of every message plus the compact JSON of
        ``tools``) divided by ``prompt_tokens`` minus the non-text tokens
        (:func:`message_overhead` of every message and
        :data:`REPLY_PRIMING_TOKENS`). Tool specs are attributed to the text
        side rather than subtracted as tokens, because converting them to
        tokens would need the very ratio being learned.

        Uninformative or malformed observations are ignored without raising:
        fewer than :data:`MIN_OBSERVATION_UNITS` units, no tokens left after
        the overhead, a non-numeric ``prompt_tokens``, or unserializable
        ``tools``.

        Args:
            messages: The OpenAI-format messages that were sent.
            prompt_tokens: The prompt token count the provider reported.
            tools: The tool specs that were sent, if any.
        """
        try:
            sent = list(messages)
        except TypeError as exc:
            _log.debug("ignoring token observation: %r", exc)
            return
        sample = self._sample_ratio(sent, prompt_tokens, tools)
        with self._lock:
            self._learn_anchor(sent, prompt_tokens, tools)
            if sample is not None:
                self._samples.append(self._clamp(sample))
                self._publish()

    def _learn_anchor(
        self,
        sent: list[Mapping[str, Any]],
        prompt_tokens: object,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> None:
        """Record the residual of the anchored prediction, then anchor on ``sent`` (locked)."""
        if (
            isinstance(prompt_tokens, bool)
            or not isinstance(prompt_tokens, int | float)
            or not math.isfinite(prompt_tokens)
            or prompt_tokens <= 0
        ):
            return
        try:
            new = self._new_part_tokens(sent, tools)
            if new is not None and new >= ANCHOR_MIN_NEW_TOKENS:
                actual = float(prompt_tokens) - self._anchor.billed
                self._anchor.residuals.append(max(-1.0, min(1.0, actual / new - 1.0)))
            self._anchor.reset_to(sent, int(prompt_tokens), tools)
        except Exception as exc:  # an odd payload must not break record_usage
            _log.debug("ignoring anchor observation: %r", exc)

    def _new_part_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> float | None:
        """Tokens of the messages after the anchored prefix at the fitted ratio, no margin.

        ``None`` when ``messages`` does not extend the anchored payload.
        """
        new = self._anchor.new_part(messages, tools)
        if new is None:
            return None
        units = 0.0
        overhead = 0
        for message in new:
            overhead += message_overhead(message)
            for piece in message_text_pieces(message):
                units += self.units(piece)
        return overhead + units / self._ratio

    def _anchor_margin(self) -> float:
        """The new part's margin, learned from the anchor's residuals (locked)."""
        return min(MAX_MARGIN, self._anchor.margin(self._margin))

    def estimate_payload(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        """Estimated prompt tokens of a whole request: ``messages`` plus the ``tools`` schemas.

        When ``messages`` starts with the payload last passed to
        :meth:`observe` (same billed text, same tools), the estimate is
        anchored: that billed count plus the new messages at the fitted
        ratio times ``1 +`` :attr:`anchor_margin` (learned from how far the
        new parts of earlier requests were under-counted). Otherwise -- after a trim, a
        changed system prompt or tool set, in a new session -- it is the
        ratio estimate: :func:`count_messages` with this estimator plus the
        tool schemas' compact JSON, both with the ratio's own :attr:`margin`.
        Tool schemas are counted once either way (inside the billed count
        when anchored).
        """
        sent = list(messages)
        anchored = self.anchored_estimate(sent, tools=tools)
        if anchored is not None:
            return anchored
        total = count_messages(sent, self)
        if tools:
            spec = json.dumps(list(tools), ensure_ascii=False, separators=(",", ":"), default=str)
            total += self.count_text(spec)
        return total

    def anchored_estimate(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int | None:
        """The anchored :meth:`estimate_payload` of ``messages``, or ``None`` when not anchored.

        ``None`` when ``messages`` (with ``tools``) does not start with the
        payload last passed to :meth:`observe`: the context manager then
        decides with its ratio count alone.
        """
        sent = messages if isinstance(messages, Sequence) else list(messages)
        with self._lock:
            new = self._new_part_tokens(sent, tools)
            margin = self._anchor_margin()
            billed = self._anchor.billed
        if new is None:
            return None
        return billed + math.ceil(new * (1.0 + margin))

    def _publish(self) -> None:
        """Adopt the fitted ratio and margin if the counts move by more than 0.5% (locked)."""
        ratio, margin = self._fitted()
        effective = ratio / (1.0 + margin)
        published = self._ratio / (1.0 + self._margin)
        if abs(effective - published) > _EPOCH_THRESHOLD * published:
            self._ratio = ratio
            self._margin = margin
            self.epoch += 1

    def _sample_ratio(
        self,
        messages: Iterable[Mapping[str, Any]],
        prompt_tokens: object,
        tools: object,
    ) -> float | None:
        if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int | float):
            return None
        try:
            if not math.isfinite(prompt_tokens):
                return None
            units = 0.0
            chars = 0.0
            overhead = REPLY_PRIMING_TOKENS
            for message in messages:
                overhead += message_overhead(message)
                for piece in message_text_pieces(message):
                    units += self.units(piece)
                    chars += text_units(piece)
            if tools:
                spec = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), default=str)
                units += self.units(spec)
                chars += text_units(spec)
            remaining = prompt_tokens - overhead
        except Exception as exc:
            _log.debug("ignoring token observation: %r", exc)
            return None
        if remaining <= 0 or chars < MIN_OBSERVATION_UNITS:
            return None
        return float(units / remaining)

    def state(self) -> dict[str, Any]:
        """The learned calibration, JSON-safe, for a session to persist."""
        with self._lock:
            return {
                "format": ESTIMATOR_FORMAT,
                "version": ESTIMATOR_VERSION,
                "unit": self.unit,
                "prior": self._prior,
                "ratio": self._ratio,
                "margin": self._margin,
                "samples": list(self._samples),
                "anchor": self._anchor.state(),
            }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Resume a calibration saved by :meth:`state` (values re-clamped to the bounds).

        Version 1 states (before units were BPE-based) were measured in
        characters. Samples measured in another unit than this estimator's
        cannot be converted; they are dropped (logged at INFO) and the
        estimator restarts from its prior, so an old state always loads.

        Raises:
            InvalidArgumentError: ``state`` is not an estimator state.
        """
        version = check_format(
            state, kind=ESTIMATOR_FORMAT, version=ESTIMATOR_VERSION, what="estimator state"
        )
        try:
            unit = state["unit"] if version >= 2 else "chars"
            samples = [self._clamp(check_ratio("sample", float(x))) for x in state["samples"]]
            ratio = self._clamp(check_ratio("ratio", float(state["ratio"])))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"malformed estimator state: {exc}") from exc
        with self._lock:
            self._samples.clear()
            if unit != self.unit:
                _log.info(
                    "estimator state measured in %r units, this estimator uses %r: "
                    "starting again from the prior",
                    unit,
                    self.unit,
                )
                self._ratio, self._margin = self._fitted()
            else:
                self._samples.extend(samples)
                fitted_ratio, self._margin = self._fitted()
                # The stored ratio is what counts used; keep it unless the samples moved on.
                self._ratio = ratio if len(samples) else fitted_ratio
            self._anchor.restore(state.get("anchor") if unit == self.unit else None)
            self.epoch += 1

    def __deepcopy__(self, memo: dict[int, Any]) -> LearningEstimator:
        """An independent copy (own samples, own lock; the immutable BPE is shared).

        A session calibrates a deep copy of the host's estimator, so copying
        must not fail on the lock or duplicate the encoding.
        """
        with self._lock:
            clone = copy.copy(self)
            clone._samples = deque(self._samples, maxlen=self._samples.maxlen)
            clone._anchor = PrefixAnchor()
            clone._anchor.restore(self._anchor.state())
        clone._lock = threading.Lock()
        memo[id(self)] = clone
        return clone

    def __repr__(self) -> str:
        return (
            f"LearningEstimator(unit={self.unit!r}, chars_per_token={self._ratio:.4g}, "
            f"margin={self._margin:.3g}, anchor_margin={self.anchor_margin:.3g}, "
            f"samples={self.samples}, epoch={self.epoch})"
        )
