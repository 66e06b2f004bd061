"""The one text-truncation helper of the library.

:func:`truncate_text` shortens a text to a character budget keeping its head
(2/3) and tail (1/3) around a marker that states how many characters were
left out. Three properties make it safe to apply anywhere, any number of
times:

* **Bounded.** The result is at most ``max_chars`` long, except that it
  always keeps :data:`MIN_KEPT_CHARS` characters of real text (a message
  that had content never becomes a bare marker). The result is never longer
  than the input: a text too short to be worth cutting is returned whole.
* **Idempotent and additive.** A marker this function wrote is recognised
  when the text is cut again: the marker is not cut into, the new cut is
  taken from the real text on both sides of it, and the reported count is
  the total left out of the *original* text. ``truncate_text(t, n)`` cut
  again to ``n`` returns itself.
* **Deterministic**, so a truncated message is identical on every build and
  the provider's prompt cache keeps hitting.

``ellipsis=True`` is the one-line form used for snippets (requests, commit
subjects): the head and ``...``, no count.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MIN_KEPT_CHARS", "omitted_count", "truncate_text"]

LONG_MARKER: Final = (
    "\n[... {omitted} characters omitted here to fit the context window; "
    "the full text is kept in the session archive ...]\n"
)
SHORT_MARKER: Final = "[... {omitted} characters omitted ...]"
MIN_KEPT_CHARS: Final = 48
"""Real characters a cut always keeps (head and tail together)."""
ELLIPSIS: Final = "..."

# Either marker, as written above (the long one with its surrounding line breaks).
_MARKER_RE: Final = re.compile(
    r"\n?\[\.\.\. (\d{1,20}) characters omitted"
    r"(?: here to fit the context window; the full text is kept in the session archive)?"
    r" \.\.\.\]\n?"
)


def _split(text: str) -> tuple[str, int, str]:
    """``(head, omitted, tail)`` around the first marker in ``text``; ``(text, 0, "")`` if none."""
    if "characters omitted" not in text:  # cheap test first: most texts carry no marker
        return text, 0, ""
    match = _MARKER_RE.search(text)
    if match is None:
        return text, 0, ""
    return text[: match.start()], int(match.group(1)), text[match.end() :]


def omitted_count(text: str) -> int:
    """Characters a marker in ``text`` says were left out (0 when it has none)."""
    return _split(text)[1]


def truncate_text(text: str, max_chars: int, *, ellipsis: bool = False) -> str:
    """Shorten ``text`` to about ``max_chars`` characters (see the module docstring).

    Args:
        text: The text to shorten.
        max_chars: Budget for the result, marker included.
        ellipsis: Cut the tail off and end with ``...`` (one-line snippets)
            instead of keeping head and tail around a counted marker.
    """
    if len(text) <= max_chars:
        return text
    if ellipsis:
        return text[: max(max_chars - len(ELLIPSIS), 0)] + ELLIPSIS
    head, prior, tail = _split(text)
    marked = prior > 0 or len(head) < len(text)
    real = len(head) + len(tail)
    template = LONG_MARKER if max_chars >= 4 * len(LONG_MARKER) else SHORT_MARKER
    # The marker's length with the largest count it could show bounds the digits.
    marker_len = len(template.format(omitted=prior + real))
    keep = max(max_chars - marker_len, MIN_KEPT_CHARS)
    if keep >= real:
        return text  # nothing real left to cut
    if marked:
        kept_tail = min(len(tail), keep - min(len(head), keep * 2 // 3))
        kept_head = min(len(head), keep - kept_tail)
    else:
        kept_head = keep * 2 // 3
        kept_tail = keep - kept_head
        tail = text
    omitted = prior + real - kept_head - kept_tail
    out = (
        head[:kept_head]
        + template.format(omitted=omitted)
        + (tail[len(tail) - kept_tail :] if kept_tail else "")
    )
    return out if len(out) < len(text) else text
