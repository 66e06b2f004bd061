"""Recall: search every stored session for a query, from the sessions database's index.

:func:`recall` (``Memory.recall``) answers from the FTS5 index that the
sessions database maintains in the same transaction as every message
change (:mod:`agentmem.session_store.sql`, migration ``0003_recall_index``),
so a query over thousands of sessions takes milliseconds and never sees a
message that is not stored, or misses one that is.

Ranking, all lexical and local (no model, no network):

1. **Candidates**: the query's keywords (stopwords dropped) are OR-ed into
   an FTS5 query; the ``Ranking.candidates`` best messages by BM25
   (porter-stemmed, the index's tokenizer) pass the filters inside SQLite.
2. **Classic rules** on each candidate: exact phrase +3, +1 per keyword
   present, keyword density +1.5, a keyword in the session's name +0.5.
3. **Neighbouring turns**: a message whose neighbours in the same session
   also match gains a share of their score (an answer often sits next to
   the turn that names the topic).
4. **Session score**: a message in a session with other strong matches
   gains a share of that session's best scores.

Ties go to the newest session, then the earlier message. Each idea's
measured effect is in ``docs/recall.md`` (``bench/bench_recall_locomo.py``).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from agentmem.errors import InvalidArgumentError
from agentmem.session_store import SessionStore

__all__ = ["STOPWORDS", "Ranking", "RecallHit", "recall"]

PREVIEW_CHARS: Final = 200
"""Length of a hit's preview (and of its neighbours' previews)."""

STOPWORDS: Final = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves ever also get got much many s t d ll m re ve kind""".split()  # noqa: SIM905
)
"""Words dropped from a query: they match nearly every message and rank nothing."""

COMMON_MIN_MESSAGES: Final = 200
"""Below this many messages every keyword is searched (see ``Ranking.common``)."""

_WORD: Final = re.compile(r"\w+")
_SPACE: Final = re.compile(r"\s+")
_LABEL: Final = re.compile(r"\s*(\w+):\s")


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One message found by :func:`recall`.

    Attributes:
        session_id: The session it is in.
        index: Its position in that session's history (``s.history[index]``).
        role: Its role.
        score: Higher is better; comparable within one result list only.
        preview: Up to :data:`PREVIEW_CHARS` characters of its text, around
            the first keyword found.
        session_name: The session's name, or ``None``.
        session_date: When the session was created (UTC).
        previous: Preview of the message before it in the session, or ``None``.
        next: Preview of the message after it, or ``None``.
    """

    session_id: str
    index: int
    role: str
    score: float
    preview: str
    session_name: str | None
    session_date: datetime
    previous: str | None
    next: str | None


@dataclass(frozen=True, slots=True)
class Ranking:
    """The ranking signals of :func:`recall`; the defaults are the measured best.

    Attributes:
        stopwords: Drop :data:`STOPWORDS` from the query.
        classic: Weight of the classic rules (phrase, keywords, density, title).
        neighbours: Share of each neighbouring message's score a message gains
            (divided by the distance, up to ``reach`` messages away).
        reach: How far the neighbours counted by ``neighbours`` go.
        session: Share of its session's score (mean of the session's best
            three matches) a message gains.
        speaker: Bonus for a message whose speaker (a leading ``"Name:"`` label, the
            transcript convention) is named in the query.
        window: Weight of the number of keywords found in the message and its two
            neighbours together (a question's words spread over adjacent turns).
        common: A keyword held by more than this share of all messages is left out
            of the index query (it ranks almost nothing and matches almost
            everything, the cost of a query); the other signals still use it.
        candidates: How many BM25 matches are re-ranked, per result asked for
            (at least 100).
    """

    stopwords: bool = True
    classic: float = 0.5
    neighbours: float = 0.3
    session: float = 0.6
    speaker: float = 2.0
    window: float = 1.0
    reach: int = 2
    common: float = 0.8
    candidates: int = 30


DEFAULT_RANKING: Final = Ranking()


def keywords(query: str, *, stopwords: bool = True) -> list[str]:
    """The query's distinct lowercase words, in order, without stopwords when asked."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if not stopwords or word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def _stem(word: str) -> str:
    # A crude suffix strip so the classic keyword rule agrees with the porter index on
    # the common cases (plural, -ing, -ed); BM25 itself matches on porter stems.
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _classic(
    lowered: str, found: set[str], occurrences: int, phrase: str, titled: bool, all_found: bool
) -> float:
    """The classic rules: exact phrase +3, +1 per keyword, density +1.5, title +0.5.

    ``lowered``: the message's text in lowercase; ``found``: the keyword stems it holds
    (``occurrences`` times in all); ``titled``: its session's name holds a keyword;
    ``all_found``: it holds every keyword (else the phrase cannot be in it).
    """
    score = float(len(found))
    if all_found and " " in phrase and phrase in _SPACE.sub(" ", lowered):
        score += 3.0
    if found and occurrences / max(1, lowered.count(" ") + 1) >= 0.1:
        score += 1.5
    if titled:
        score += 0.5
    return score


def _variants(word: str) -> list[str]:
    # Index terms are porter stems; these cover the word's usual stems (a miss keeps the word).
    out = [word, _stem(word)]
    if word.endswith("y"):
        out.append(word[:-1] + "i")
    return out


def _informative(store: SessionStore, words: list[str], common: float) -> list[str]:
    """``words`` without those held by more than ``common`` of the messages.

    Only where it matters and is safe: in a store of at least :data:`COMMON_MIN_MESSAGES`
    messages, and only when a word that stays is held by some message (else the query
    would lose the only words that match).
    """
    if common >= 1.0 or len(words) < 2:
        return words
    docs, total = store.recall_term_docs(sorted({v for w in words for v in _variants(w)}))
    if total < COMMON_MIN_MESSAGES:
        return words
    held = {w: max(docs.get(v, 0) for v in _variants(w)) for w in words}
    kept = [w for w in words if held[w] <= common * total]
    return kept if any(held[w] for w in kept) else words


def _preview(text: str, words: Sequence[str]) -> str:
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= PREVIEW_CHARS:
        return flat
    lowered = flat.lower()
    at = min((i for i in (lowered.find(w) for w in words) if i >= 0), default=0)
    start = max(0, min(at - PREVIEW_CHARS // 4, len(flat) - PREVIEW_CHARS))
    cut = flat[start : start + PREVIEW_CHARS]
    return ("…" if start else "") + cut + ("…" if start + PREVIEW_CHARS < len(flat) else "")


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _epoch(value: object, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise InvalidArgumentError(f"{name} must be a datetime or epoch seconds, got {value!r}")


def _strings(value: object, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
        raise InvalidArgumentError(f"{name} must be a list of strings, got {value!r}")
    items = list(value)
    if not all(isinstance(item, str) for item in items):
        raise InvalidArgumentError(f"{name} must contain only strings, got {value!r}")
    return items


def _positive(value: object, name: str, *, optional: bool) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
    return value


def recall(
    store: SessionStore,
    query: str,
    max_sessions: int | None = None,
    max_results: int = 5,
    *,
    session_ids: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    since: datetime | float | None = None,
    until: datetime | float | None = None,
    exclude_session: str | None = None,
    ranking: Ranking = DEFAULT_RANKING,
) -> list[RecallHit]:
    """The messages of ``store`` that best match ``query``, best first.

    Args:
        store: The sessions to search.
        query: Free text; words are matched by stem, case- and accent-insensitively.
        max_sessions: Search only this many most recently active sessions (all by default).
        max_results: At most this many hits.
        session_ids: Search only these sessions.
        roles: Only messages with these roles (``"user"``, ``"assistant"``, ``"tool"``...).
        since: Only sessions active at or after this time (datetime or epoch seconds).
        until: Only sessions created at or before this time.
        exclude_session: Leave this session out (typically the current one).
        ranking: The ranking signals (see :class:`Ranking`).

    Returns:
        Up to ``max_results`` hits; ties go to the newest session. A query with no
        searchable word returns ``[]``.

    Raises:
        InvalidArgumentError: a bad argument (named in the message).
        StorageError: the store could not be read.
    """
    if not isinstance(query, str):
        raise InvalidArgumentError(f"query must be a string, got {type(query).__name__}")
    limit = _positive(max_results, "max_results", optional=False)
    assert limit is not None
    if not isinstance(ranking, Ranking):
        raise InvalidArgumentError(f"ranking must be a Ranking, got {ranking!r}")
    if exclude_session is not None and not isinstance(exclude_session, str):
        raise InvalidArgumentError(f"exclude_session must be a string, got {exclude_session!r}")
    filters: dict[str, Any] = {
        "session_ids": _strings(session_ids, "session_ids"),
        "roles": _strings(roles, "roles"),
        "since": _epoch(since, "since"),
        "until": _epoch(until, "until"),
        "exclude_session": exclude_session,
        "max_sessions": _positive(max_sessions, "max_sessions", optional=True),
    }
    words = keywords(query, stopwords=ranking.stopwords) or keywords(query, stopwords=False)
    if not words or filters["session_ids"] == [] or filters["roles"] == []:
        return []
    searched = _informative(store, words, ranking.common)
    match = " OR ".join(f'"{word}"' for word in searched)
    rows = store.recall_rows(match, max(100, ranking.candidates * limit), **filters)
    if not rows:
        return []

    phrase = _SPACE.sub(" ", query.lower()).strip()
    stems = [_stem(w) for w in words]
    # A word starting with a keyword's stem is that keyword (plural, -ing, -ed...).
    pattern = re.compile(
        r"\b(" + "|".join(map(re.escape, sorted(set(stems), key=len, reverse=True))) + r")\w*"
    )
    titles: dict[str, bool] = {}
    unique_stems = set(stems)
    found: dict[tuple[str, int], set[str]] = {}
    score: dict[tuple[str, int], float] = {}
    meta: dict[tuple[str, int], tuple[str, str]] = {}
    sessions: dict[str, tuple[str | None, float, float]] = {}
    for sid, seq, role, bm25, text, name, created, updated in rows:
        key = (str(sid), int(seq))
        title = None if name is None else _text(name)
        sessions[key[0]] = (title, float(created), float(updated))
        body = _text(text)
        lowered = body.lower()
        occurrences = pattern.findall(lowered)
        found[key] = set(occurrences)
        value = float(bm25)
        if ranking.classic:
            if key[0] not in titles:
                titles[key[0]] = bool(title and pattern.search(title.lower()))
            value += ranking.classic * _classic(
                lowered,
                found[key],
                len(occurrences),
                phrase,
                titles[key[0]],
                len(found[key]) == len(unique_stems),
            )
        if ranking.speaker:
            label = _LABEL.match(body)
            if label and label.group(1).lower() in words:
                value += ranking.speaker
        score[key] = value
        meta[key] = (_text(role), body)

    final = dict(score)
    if ranking.window:
        for sid, seq in score:
            covered = found[(sid, seq)].union(
                found.get((sid, seq - 1), ()), found.get((sid, seq + 1), ())
            )
            final[(sid, seq)] += ranking.window * len(covered)
    if ranking.neighbours:
        for sid, seq in score:
            around = sum(
                (score.get((sid, seq - d), 0.0) + score.get((sid, seq + d), 0.0)) / d
                for d in range(1, ranking.reach + 1)
            )
            final[(sid, seq)] += ranking.neighbours * around
    if ranking.session:
        best: dict[str, list[float]] = defaultdict(list)
        for (sid, _), value in score.items():
            best[sid].append(value)
        strength = {sid: sum(sorted(v, reverse=True)[:3]) / 3 for sid, v in best.items()}
        for key in final:
            final[key] += ranking.session * strength[key[0]]

    order = sorted(final, key=lambda k: (-final[k], -sessions[k[0]][2], k[1]))[:limit]
    hits: list[RecallHit] = []
    for sid, seq in order:
        role, body = meta[(sid, seq)]
        title, created, _ = sessions[sid]
        texts = store.recall_texts(sid, seq - 1, seq + 1)
        before, after = texts.get(seq - 1), texts.get(seq + 1)
        hits.append(
            RecallHit(
                session_id=sid,
                index=seq,
                role=role,
                score=round(final[(sid, seq)], 6),
                preview=_preview(body, words),
                session_name=title,
                session_date=datetime.fromtimestamp(created, tz=UTC),
                previous=None if before is None else _preview(before, words),
                next=None if after is None else _preview(after, words),
            )
        )
    return hits
