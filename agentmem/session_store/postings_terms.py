"""The terms SQLite FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer makes of a text.

The impact-ordered postings (:mod:`.postings`) are built with it, so they hold the
very terms FTS5 holds, and :mod:`agentmem.recall` re-scores candidates with it (BM25
with its own parameters, windows of turns, session documents): :func:`terms` splits,
folds and stems a text as that tokenizer does, and ``tests/test_recall_ranking.py``
checks it against FTS5's own vocabulary. (It was ``agentmem.recall._porter``, which
re-exports it.)

The stemmer is Porter's 1980 algorithm as FTS5 implements it: for each step the rule
whose suffix matches first is the one applied (or none, when its condition fails), and
tokens shorter than 3 or longer than 64 bytes are kept as they are.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Final

__all__ = ["Matcher", "stem", "terms"]

_TOKEN: Final = re.compile(r"[^\W_]+")
_CACHE: dict[str, str] = {}
_CACHE_LIMIT: Final = 100_000


def _gobble(stem: str, start: int, after_consonant: bool) -> int:
    """End (exclusive) of the first vowel-then-consonant run from ``start``, or 0."""
    consonant = after_consonant
    i = start
    n = len(stem)
    while i < n:
        consonant = not (stem[i] in "aeiou" or (stem[i] == "y" and consonant))
        if not consonant:
            break
        i += 1
    i += 1
    while i < n:
        consonant = not (stem[i] in "aeiou" or (stem[i] == "y" and consonant))
        if consonant:
            return i + 1
        i += 1
    return 0


def _m_gt0(stem: str) -> bool:
    return _gobble(stem, 0, False) != 0


def _m_gt1(stem: str) -> bool:
    n = _gobble(stem, 0, False)
    return n != 0 and _gobble(stem, n, True) != 0


def _m_eq1(stem: str) -> bool:
    n = _gobble(stem, 0, False)
    return n != 0 and _gobble(stem, n, True) == 0


def _has_vowel(stem: str) -> bool:
    # As fts5_tokenize.c's fts5Porter_Vowel: y is a vowel anywhere but first, whatever
    # letter precedes it (the measure, _gobble, and _cvc judge y by the letter before it).
    return any(c in "aeiou" or (c == "y" and i > 0) for i, c in enumerate(stem))


def _cvc(stem: str) -> bool:
    """(*o): the stem ends consonant-vowel-consonant, the last not w, x or y."""
    if not stem or stem[-1] in "wxy":
        return False
    mask = 0
    consonant = False
    for c in stem:
        consonant = not (c in "aeiou" or (c == "y" and consonant))
        mask = (mask << 1) | consonant
    return mask & 7 == 5


def _m_gt1_st(stem: str) -> bool:
    return bool(stem) and stem[-1] in "st" and _m_gt1(stem)


_Rule = tuple[str, Callable[[str], bool] | None, str]

_STEP1B: Final[tuple[_Rule, ...]] = (
    ("eed", _m_gt0, "ee"),
    ("ed", _has_vowel, ""),
    ("ing", _has_vowel, ""),
)
_STEP1B2: Final[tuple[_Rule, ...]] = (("at", None, "ate"), ("bl", None, "ble"), ("iz", None, "ize"))
_STEP2: Final[tuple[_Rule, ...]] = tuple(
    (suffix, _m_gt0, out)
    for suffix, out in (
        ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
        ("izer", "ize"), ("logi", "log"), ("bli", "ble"), ("alli", "al"), ("entli", "ent"),
        ("eli", "e"), ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
        ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
        ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    )
)  # fmt: skip
_STEP3: Final[tuple[_Rule, ...]] = tuple(
    (suffix, _m_gt0, out)
    for suffix, out in (
        ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
        ("ful", ""), ("ness", ""),
    )
)  # fmt: skip
_STEP4_SUFFIXES: Final = (  # noqa: SIM905
    "al ance ence er ic able ible ant ement ment ent ion ou ism ate iti ous ive ize"
).split()
_STEP4: Final[tuple[_Rule, ...]] = tuple(
    (suffix, _m_gt1_st if suffix == "ion" else _m_gt1, "") for suffix in _STEP4_SUFFIXES
)


def _apply(word: str, rules: tuple[_Rule, ...]) -> tuple[str, bool]:
    """The first rule whose suffix ends ``word`` (and is shorter than it) decides."""
    for suffix, condition, out in rules:
        if len(word) > len(suffix) and word.endswith(suffix):
            stem = word[: -len(suffix)]
            if condition is not None and not condition(stem):
                return word, False
            return stem + out, True
    return word, False


def _stem(word: str) -> str:
    size = len(word.encode("utf-8"))
    if size < 3 or size > 64:
        return word
    # Step 1a.
    if word[-1] == "s":
        if word[-2] == "e":
            if word.endswith("sses") or (len(word) > 3 and word[-3] == "i"):
                word = word[:-2]
            else:
                word = word[:-1]
        elif word[-2] != "s":
            word = word[:-1]
    # Step 1b.
    before = word
    word, matched = _apply(word, _STEP1B)
    if matched and not before.endswith("eed"):
        word, again = _apply(word, _STEP1B2)
        if not again:
            c = word[-1]
            if c not in "aeioulsz" and len(word) > 1 and c == word[-2]:
                word = word[:-1]
            elif _m_eq1(word) and _cvc(word):
                word += "e"
    # Step 1c.
    if word[-1] == "y" and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    # Steps 2 to 4.
    word = _apply(word, _STEP2)[0]
    word = _apply(word, _STEP3)[0]
    word = _apply(word, _STEP4)[0]
    # Step 5a.
    if word[-1] == "e":
        stem = word[:-1]
        if _m_gt1(stem) or (_m_eq1(stem) and not _cvc(stem)):
            word = stem
    # Step 5b.
    if len(word) > 1 and word[-1] == "l" and word[-2] == "l" and _m_gt1(word[:-1]):
        word = word[:-1]
    return word


def stem(word: str) -> str:
    """The porter stem of one lowercase, diacritic-free token (memoised)."""
    out = _CACHE.get(word)
    if out is None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        out = _CACHE[word] = _stem(word)
    return out


_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]+")


def _fold_run(match: re.Match[str]) -> str:
    decomposed = unicodedata.normalize("NFKD", match.group())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _fold(text: str) -> str:
    """Lowercase, diacritics dropped. Only the non-ASCII runs are decomposed (NFKD leaves
    ASCII as it is and decomposes each character alone; the marks it could reorder are
    all dropped), so a long tool output with a few non-ASCII characters stays cheap."""
    text = text.lower()
    if text.isascii():
        return text
    return _NON_ASCII.sub(_fold_run, text)


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order (lowercased, diacritics dropped, stemmed)."""
    return [stem(token) for token in _TOKEN.findall(_fold(text))]


class Matcher:
    """Counts a few terms in texts, faster than :func:`terms` would, and finds prefixes.

    Only the tokens that start like one of the terms are stemmed: the porter stem of a
    token never differs from the token in more than its last two letters (``-biliti`` to
    ``-bl`` the most), so a token stemming to a term starts with that term minus its
    last two letters (all of it, for a term of two letters or fewer).
    """

    __slots__ = (
        "_alternatives",
        "_covers",
        "_longest",
        "_pattern",
        "_prefixes",
        "_starts",
        "_wanted",
    )

    def __init__(self, wanted: Iterable[str], prefixes: Iterable[str] = ()) -> None:
        self._wanted = frozenset(wanted)
        self._prefixes = tuple(dict.fromkeys(p for p in prefixes if p))
        starts = {t if len(t) <= 2 else t[: max(2, len(t) - 2)] for t in self._wanted}
        starts.update(self._prefixes)
        # Compiled when first needed (a query's patterns are new each time, and compiling
        # one costs more than counting in a chat turn): ``None`` when there is none.
        self._alternatives = (
            "|".join(map(re.escape, sorted(starts, key=len, reverse=True))) if starts else None
        )
        self._pattern: re.Pattern[str] | None = None
        # Prefixes only: the longest prefix at each place, kept where a token starts (a
        # pattern without a look-behind first is searched for by its first letters: ~3x
        # faster on long texts).
        longest = sorted(self._prefixes, key=len, reverse=True)
        self._longest = tuple(longest)
        self._starts = (
            re.compile("|".join(map(re.escape, longest)))
            if longest and not self._wanted and all(p.isalnum() for p in longest)
            else None
        )
        # The prefixes each prefix starts with (a head the pattern above finds is one).
        self._covers = {
            head: frozenset(p for p in self._prefixes if head.startswith(p))
            for head in (self._prefixes if self._starts is not None else ())
        }

    def absent(self, texts: Iterable[str]) -> bool:
        """Whether no prefix occurs anywhere in ``texts`` (so :meth:`count` finds none in
        any of them), by one search of them all; ``False`` when it cannot tell cheaply."""
        if self._starts is None:
            return False
        # Apart by a newline: no prefix holds one (they are letters and digits).
        return self._starts.search("\n".join(map(_fold, texts))) is None

    def count(self, text: str) -> tuple[dict[str, int], set[str], int]:
        """How many times each wanted term occurs in ``text`` (absent terms left out),
        which of the prefixes start one of its tokens, and how many tokens start so."""
        counts: dict[str, int] = {}
        started: set[str] = set()
        hits = 0
        if self._alternatives is None:
            return counts, started, hits
        if self._starts is not None:
            # A token starting with several prefixes starts with the longest of them, and
            # every other one is a prefix of that longest one. What ``self._starts`` finds
            # where a token starts (the prefixes are letters and digits, so no match before
            # overlaps one there; the longest prefix is the first alternative), found with
            # str.find, longest prefix first: a third faster than the pattern.
            folded = _fold(text)
            heads: dict[int, str] = {}  # where a token starts: the longest prefix there
            for prefix in self._longest:
                at = folded.find(prefix)
                while at >= 0:
                    # A token starts here: no letter or digit before it.
                    if (at == 0 or not folded[at - 1].isalnum()) and at not in heads:
                        heads[at] = prefix
                    at = folded.find(prefix, at + 1)
            for head in set(heads.values()):
                started |= self._covers[head]
            return counts, started, len(heads)
        if self._pattern is None:
            self._pattern = re.compile(rf"(?<![^\W_])(?:{self._alternatives})[^\W_]*")
        wanted = self._wanted
        prefixes = self._prefixes
        for token in self._pattern.findall(_fold(text)):
            term = stem(token)
            if term in wanted:
                counts[term] = counts.get(term, 0) + 1
            hit = False
            for prefix in prefixes:
                if token.startswith(prefix):
                    started.add(prefix)
                    hit = True
            hits += hit
        return counts, started, hits
