"""Text units: the weighted character measure both token heuristics share.

An ASCII character counts one unit and every other character counts
``4.0 / 1.5`` units, because CJK and other multibyte text costs about one
token per 1.5 characters where English costs one per four. Also the two
number checks every counter's constructor uses, and the forgiving ceiling
all estimates round with. Re-exported by :mod:`agentmem.tokens`.
"""

from __future__ import annotations

import math

from agentmem.errors import InvalidArgumentError

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "NON_ASCII_CHARS_PER_TOKEN",
    "NON_ASCII_UNIT_WEIGHT",
    "ceil_tokens",
    "check_fraction",
    "check_ratio",
    "non_ascii_count",
    "text_units",
]

DEFAULT_CHARS_PER_TOKEN = 4.0
"""ASCII characters per token assumed before anything better is known."""

NON_ASCII_CHARS_PER_TOKEN = 1.5
"""Non-ASCII (CJK, Cyrillic, emoji...) characters per token."""

NON_ASCII_UNIT_WEIGHT = DEFAULT_CHARS_PER_TOKEN / NON_ASCII_CHARS_PER_TOKEN
"""Units one non-ASCII character counts for in :func:`text_units` (8/3)."""

_CEIL_SLACK = 1e-12


def ceil_tokens(value: float) -> int:
    """Round up, forgiving float error that lands just above an integer."""
    return math.ceil(value * (1.0 - _CEIL_SLACK))


def non_ascii_count(text: str) -> int:
    """Number of non-ASCII characters, computed at C speed."""
    if text.isascii():
        return 0
    return len(text) - len(text.encode("ascii", "ignore"))


def text_units(text: str) -> float:
    """Weighted character count used by both heuristics.

    An ASCII character is one unit; any other character is
    :data:`NON_ASCII_UNIT_WEIGHT` (``4.0 / 1.5``) units. The definition does
    not depend on any ratio, so ``ceil(text_units(text) / ratio)`` is a
    token estimate for any characters-per-token ratio, and at the default
    ratio of 4.0 it equals :meth:`HeuristicCounter.count_text`.

    Args:
        text: Any string.

    Returns:
        The unit count (0.0 for the empty string).
    """
    non_ascii = non_ascii_count(text)
    return (len(text) - non_ascii) + non_ascii * NON_ASCII_UNIT_WEIGHT


def check_fraction(name: str, value: float, *, upper: float, allow_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}") from None
    low_ok = number >= 0 if allow_zero else number > 0
    if isinstance(value, bool) or not math.isfinite(number) or not low_ok or number > upper:
        raise InvalidArgumentError(f"{name} must be a number in (0, {upper}], got {value!r}")
    return number


def check_ratio(name: str, value: float) -> float:
    try:
        ratio = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(ratio) or ratio <= 0:
        raise InvalidArgumentError(f"{name} must be a positive finite number, got {value!r}")
    return ratio
