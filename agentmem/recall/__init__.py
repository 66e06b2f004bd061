"""Recall: search every stored session for a query, from the sessions database's index.

:func:`recall` (``Memory.recall``) answers from the index that the
sessions database maintains in the same transaction as every message
change (:mod:`agentmem.session_store.sql`, migration ``0003_recall_index``),
so a query over thousands of sessions takes milliseconds and never sees a
message that is not stored, or misses one that is. What the memory itself put
in a conversation (its tool's calls and results, injected messages and
``<memory-context>`` blocks, the trim checkpoint) is never indexed, so recall
never returns its own echoes (:mod:`agentmem.session_store.recall_index`).

Ranking, all lexical and local (no model, no network):

1. **Candidates**: the query's keywords (stopwords dropped). In a store of at
   most ``Ranking.every_match`` messages every match (an FTS5 query, the
   filters inside SQLite); in a larger one the best ``Ranking.candidates`` per
   result by the impact-ordered postings
   (:mod:`agentmem.session_store.postings`), a cost bounded by the best, not by
   how many messages match.
2. **BM25, re-scored**: each candidate's BM25 with ``Ranking.k1``/``b``, from
   its porter terms (:mod:`agentmem.recall._porter`, the index's own tokenizer), its
   length and the index's document frequencies.
3. **Classic rules** (exact phrase +3, +1 per keyword present, keyword
   density +1.5, a keyword in the session's name +0.5) and the **speaker**
   (its ``"Name:"`` label named in the query).
4. **Context**: the keywords found across the message and its neighbours, a
   share of the neighbours' scores, of the session's best scores, and the BM25
   of the session taken as one document.
5. **Priors** from where and what the message is: a session's first message,
   a message that asks (ends with ``?``) rather than tells, its length; and a
   bonus for a message that holds the whole query verbatim (a quoted command
   or error line).

Ties go to the newest session, then the earlier message. Each idea's
measured effect is in ``docs/recall.md`` (``bench/bench_recall_locomo.py``).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Concatenate, Final, NamedTuple, ParamSpec

from agentmem._validate import check_count
from agentmem.errors import InvalidArgumentError
from agentmem.recall._porter import Matcher, terms
from agentmem.scrub import scrub_near
from agentmem.session_store import SessionStore
from agentmem.session_store.postings import weight
from agentmem.session_store.recall_records import RecallStats

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

PREVIEW_MARGIN: Final = 1024
"""Characters scrubbed on each side of a preview's first keyword (``scrub_near``'s margin:
longer than any key, and than the preview, which starts just before that keyword; a PEM
block is found whole whatever the margin)."""

SESSION_BM25: Final = (1.2, 0.75)
"""BM25's k1 and b for a session taken as one document (FTS5's own values)."""

SCAN_CHARS: Final = 400
"""A candidate whose term frequencies the postings give is read for the keywords it
holds (the crude stems that start its words, as on a small store) only when its text is
at most this long (a chat turn); a longer one's (a tool output, code) come from the
postings (:func:`_from_postings`): reading it would cost more than the rest of the
ranking."""

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
        k1: BM25's term-frequency saturation (FTS5's built-in ``bm25()`` fixes 1.2).
        b: BM25's length normalisation, 0 (none) to 1 (FTS5 fixes 0.75).
        classic: Weight of the classic rules (phrase, keywords, density, title).
        neighbours: Share of each neighbouring message's score a message gains
            (divided by the distance, up to ``reach`` messages away).
        reach: How far the neighbours counted by ``neighbours`` go.
        session: Share of its session's score (mean of the session's best
            three matches) a message gains.
        session_text: Weight of the BM25 score of the query against the message's whole
            session taken as one document (document frequencies counted in sessions).
        speaker: Bonus for a message whose speaker (a leading ``"Name:"`` label, the
            transcript convention) is named in the query.
        window: Weight of the number of keywords found in the message and its two
            neighbours together (a question's words spread over adjacent turns).
        length: Weight of ``ln(1 + the message's length in words)``: a one-line "thanks!"
            rarely holds what is asked for.
        opening: Bonus for a session's first message (where news is told).
        question: Penalty for a message that ends with a question mark: it asks, its
            reply tells (it still lends its score to its neighbours).
        common: A keyword held by more than this share of all messages is left out
            of the index query (it ranks almost nothing and matches almost
            everything, the cost of a query); the other signals still use it.
        candidates: How many BM25 matches are re-ranked, per result asked for
            (at least 100).
        every_match: In a store of at most this many messages every match is re-ranked
            (the session scores then see every message that holds a keyword).
        postings: In a larger store, take the candidates from the impact-ordered postings
            (:mod:`agentmem.session_store.postings`: a cost bounded by the best candidates,
            every keyword kept); ``False``: from FTS5's BM25 over every match, without the
            keywords held by more than ``common`` of the messages (the previous release).
        verbatim: Bonus per keyword for a message holding the whole query verbatim (case
            and runs of whitespace aside): a query quoting a command, an error line or a
            sentence finds the message it quotes (added to the final score, not lent to
            the neighbours).
    """

    stopwords: bool = True
    k1: float = 2.0
    b: float = 0.25
    classic: float = 0.25
    neighbours: float = 0.4
    session: float = 0.6
    session_text: float = 2.0
    speaker: float = 4.0
    window: float = 3.0
    length: float = 0.5
    opening: float = 2.0
    question: float = 2.0
    reach: int = 2
    common: float = 0.8
    candidates: int = 30
    every_match: int = 1000
    postings: bool = True
    verbatim: float = 5.0


DEFAULT_RANKING: Final = Ranking()


def keywords(query: str, *, stopwords: bool = True) -> list[str]:
    """The query's distinct lowercase words, in order, without stopwords when asked."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if not stopwords or word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def _stem(word: str) -> str:
    # A crude suffix strip: the classic rules and the window count a word that starts with
    # a keyword's crude stem as that keyword (looser than the porter stems BM25 matches on).
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _classic(spaces: int, found: set[str], occurrences: int, said: bool, titled: bool) -> float:
    """The classic rules: exact phrase +3, +1 per keyword, density +1.5, title +0.5.

    ``spaces``: the spaces in the message's text; ``found``: the keyword stems it holds
    (``occurrences`` times in all); ``said``: it holds the query's words as a phrase;
    ``titled``: its session's name holds a keyword.
    """
    score = float(len(found))
    if said:
        score += 3.0
    if found and occurrences / max(1, spaces + 1) >= 0.1:
        score += 1.5
    if titled:
        score += 0.5
    return score


class _Candidate(NamedTuple):
    """One message the index matched, as the ranking reads it."""

    role: str
    body: str
    length: int
    """Its length in index tokens."""
    frequencies: dict[str, int]
    """How many times it holds each query term (absent terms left out)."""
    found: set[str]
    """The keywords' crude stems that start one of its words."""
    occurrences: int
    """How many of its words start with one of them."""


class _Session(NamedTuple):
    """A session holding candidates."""

    title: str | None
    created: float
    updated: float
    titled: bool
    """Its name holds a keyword."""


_Key = tuple[str, int]
"""A message: its session's id and its index there."""


@dataclass(frozen=True, slots=True)
class _Corpus:
    """What BM25 needs to know of the whole index (``SessionStore.recall_stats``)."""

    stats: RecallStats

    @property
    def docs(self) -> dict[str, int]:
        return self.stats.docs

    @property
    def messages(self) -> int:
        return self.stats.messages

    @property
    def tokens(self) -> int:
        return self.stats.tokens

    @property
    def sessions(self) -> int:
        return self.stats.sessions

    def idf(self, query_terms: Sequence[str], counts: Iterable[dict[str, int]]) -> dict[str, float]:
        """FTS5's BM25 idf of each term (``log((N - n + 0.5) / (n + 0.5))``, at least 1e-6).

        From the index's statistics; from the candidates when the index gives none.
        """
        if self.messages:
            total, docs = self.messages, self.docs
        else:
            held: Counter[str] = Counter()
            candidates = 0
            for count in counts:
                held.update(count.keys())
                candidates += 1
            total, docs = candidates, dict(held)
        return {t: _idf(total, docs.get(t, 0)) for t in query_terms}

    def average_length(self, lengths: Iterable[int]) -> float:
        """Mean message length in tokens: the index's, else the candidates'."""
        if self.messages and self.tokens:
            return self.tokens / self.messages
        values = list(lengths)
        return max(1.0, sum(values) / max(1, len(values)))


def _idf(total: int, held: int) -> float:
    value = math.log((total - held + 0.5) / (held + 0.5)) if total > held else 0.0
    return value if value > 0 else 1e-6


def _session_text(
    store: SessionStore,
    query_terms: Sequence[str],
    candidates: Mapping[_Key, _Candidate],
    corpus: _Corpus,
) -> dict[str, float]:
    """BM25 of the query against each candidate session taken as one document.

    Term frequencies are summed over the session's candidates (its other messages hold no
    query term when every match is a candidate); its length is its number of messages;
    document frequencies count sessions (among the candidates': exact when every match
    is a candidate); k1 and b are FTS5's (:data:`SESSION_BM25`).
    """
    per_session: dict[str, dict[str, int]] = {}
    for (sid, _), candidate in candidates.items():
        count = per_session.setdefault(sid, {})
        for term, n in candidate.frequencies.items():
            count[term] = count.get(term, 0) + n
    sizes = store.recall_session_sizes(sorted(per_session))
    total = max(corpus.sessions, len(per_session))
    held = Counter(t for count in per_session.values() for t in count)
    idf = {t: _idf(total, held[t]) for t in query_terms}
    mean = max(1.0, (corpus.messages or sum(sizes.values())) / max(1, total))
    k1, b = SESSION_BM25
    documents: dict[str, float] = {}
    for sid, count in per_session.items():
        # Okapi BM25 of the session, its length over the mean (the same expression as a
        # message's, below; written inline: no call per document).
        norm = k1 * (1 - b + b * (max(1, sizes.get(sid, 1)) / mean))
        documents[sid] = sum([idf[t] * f * (k1 + 1) / (f + norm) for t, f in count.items()])
    return documents


def _informative(
    words: list[str], stems: dict[str, list[str]], corpus: _Corpus, common: float
) -> list[str]:
    """``words`` without those held by more than ``common`` of the messages.

    Only where it matters and is safe: in a store of at least :data:`COMMON_MIN_MESSAGES`
    messages, and only when a word that stays is held by some message (else the query
    would lose the only words that match).
    """
    if common >= 1.0 or len(words) < 2 or corpus.messages < COMMON_MIN_MESSAGES:
        return words
    held = {w: max((corpus.docs.get(t, 0) for t in stems[w]), default=0) for w in words}
    kept = [w for w in words if held[w] <= common * corpus.messages]
    return kept if any(held[w] for w in kept) else words


def _phrase(phrase: str) -> re.Pattern[str] | None:
    """The query's words (``phrase``: lowercase, single spaces) as a pattern matching them
    separated by any runs of whitespace, or ``None`` for a single word."""
    if " " not in phrase:
        return None
    return re.compile(r"\s+".join(re.escape(part) for part in phrase.split(" ")))


def _says(text: str, spoken: re.Pattern[str]) -> bool:
    """Whether ``text`` holds the query's phrase (case and runs of whitespace aside): as
    ``phrase in _SPACE.sub(" ", text.lower())``, without building the collapsed copy."""
    return spoken.search(text.lower()) is not None


def _asks(text: str) -> bool:
    """Whether ``text`` ends with a question mark, trailing whitespace aside (as
    ``text.rstrip().endswith("?")``, without copying a long text)."""
    end = len(text) - 1
    while end >= 0 and text[end].isspace():
        end -= 1
    return end >= 0 and text[end] == "?"


def _from_postings(
    held: Mapping[str, int], weighted: set[str], crude_of: Mapping[str, set[str]]
) -> tuple[dict[str, int], set[str], int]:
    """A candidate's term frequencies, keywords found and keyword occurrences, from the
    postings' frequencies ``held`` of the query terms (the text is not read).

    The frequencies BM25 reads are those of the ``weighted`` terms (the searched ones);
    a keyword is found (by its crude stem, as :meth:`Matcher.count` reports it) when the
    message holds one of its porter terms (``crude_of``: each term's keywords' crude
    stems), common words included; the occurrences are those of every query term.
    """
    frequencies: dict[str, int] = {}
    found: set[str] = set()
    occurrences = 0
    for term, n in held.items():
        if n:
            occurrences += n
            found |= crude_of[term]
            if term in weighted:
                frequencies[term] = n
    return frequencies, found, occurrences


def _match(words: Sequence[str]) -> str:
    """The FTS5 query matching any of ``words`` (each quoted: no FTS5 syntax is read)."""
    return " OR ".join(f'"{word}"' for word in words)


def _preview(text: str, words: Sequence[str]) -> str:
    # " ".join(split()): the runs of whitespace as one space, trimmed, as
    # _SPACE.sub(" ", ...).strip() (str.split and \s agree on every code point), 3-4x faster
    # on a tool output's indented lines.
    flat = " ".join(scrub_near(text, words, PREVIEW_MARGIN).split())
    if len(flat) <= PREVIEW_CHARS:
        return flat
    lowered = flat.lower()
    at = min((i for i in (lowered.find(w) for w in words) if i >= 0), default=0)
    start = max(0, min(at - PREVIEW_CHARS // 4, len(flat) - PREVIEW_CHARS))
    cut = flat[start : start + PREVIEW_CHARS]
    return ("…" if start else "") + cut + ("…" if start + PREVIEW_CHARS < len(flat) else "")


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


_P = ParamSpec("_P")


def _one_snapshot(
    search: Callable[Concatenate[SessionStore, _P], list[RecallHit]],
) -> Callable[Concatenate[SessionStore, _P], list[RecallHit]]:
    """``search``'s reads of the store in one snapshot (:meth:`SessionStore.recall_snapshot`)."""

    @functools.wraps(search)
    def searched(store: SessionStore, /, *args: _P.args, **kwargs: _P.kwargs) -> list[RecallHit]:
        with store.recall_snapshot():
            return search(store, *args, **kwargs)

    return searched


@_one_snapshot
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
    limit = check_count("max_results", max_results, positive=True)
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
        "max_sessions": None
        if max_sessions is None
        else check_count("max_sessions", max_sessions, positive=True),
    }
    words = keywords(query, stopwords=ranking.stopwords) or keywords(query, stopwords=False)
    if not words or filters["session_ids"] == [] or filters["roles"] == []:
        return []
    stems = {word: terms(word) for word in words}
    weights: dict[str, int] | None = None
    query_terms = list(dict.fromkeys(t for ts in stems.values() for t in ts))
    corpus = _Corpus(store.recall_stats(query_terms))
    pool = max(100, ranking.candidates * limit)
    if corpus.messages <= ranking.every_match:
        pool = max(pool, corpus.messages)  # every match, common words included
        rows = store.recall_rows(_match(words), pool, **filters)
    else:
        searched = _informative(words, stems, corpus, ranking.common)
        if ranking.postings:
            looked = {t for w in searched for t in stems[w]}
            weights = {
                t: weight(corpus.messages, corpus.docs[t])
                for t in query_terms
                if t in looked and corpus.docs.get(t)
            }
            if weights:
                # The common words held by some message ride along with weight 0: they do
                # not choose the candidates, but the postings give their frequencies too
                # (the keywords a candidate holds, below).
                asked = {t: weights.get(t, 0) for t in query_terms if corpus.docs.get(t)}
                rows = store.recall_rows(asked, pool, **filters)
            else:
                rows = []
        else:
            rows = store.recall_rows(_match(searched), pool, **filters)
    if not rows:
        return []

    phrase = _SPACE.sub(" ", query.lower()).strip()
    spoken: re.Pattern[str] | None = None  # compiled for the first message holding every keyword
    crude = list(dict.fromkeys(_stem(w) for w in words))
    matcher = Matcher(query_terms, crude)
    prefixes = Matcher((), crude)
    weighted = {t for t, w in weights.items() if w} if weights is not None else set()
    crude_of: dict[str, set[str]] = defaultdict(set)
    for word in words:
        for term in stems[word]:
            crude_of[term].add(_stem(word))
    candidates: dict[_Key, _Candidate] = {}
    sessions: dict[str, _Session] = {}
    # Session names rarely hold a keyword: one search of them all usually settles it.
    untitled = prefixes.absent({row.session_name or "" for row in rows})
    # What a text holds, by text: a text met again (an agent's command or its output,
    # repeated across sessions) is searched once. Nothing downstream changes these.
    counts: dict[str, tuple[dict[str, int], set[str], int]] = {}
    starts: dict[str, tuple[set[str], int]] = {}
    for row in rows:
        key = (row.session_id, row.seq)
        if key[0] not in sessions:
            title = row.session_name
            titled = not untitled and bool(title and prefixes.count(title)[1])
            sessions[key[0]] = _Session(title, row.created_at, row.updated_at, titled)
        if row.frequencies is None:
            known = counts.get(row.text)
            counted = known if known is not None else matcher.count(row.text)
            counts[row.text] = counted
        elif len(row.text) <= SCAN_CHARS:  # the postings counted the terms
            started = starts.get(row.text)
            if started is None:
                started = starts[row.text] = prefixes.count(row.text)[1:]
            found, occurrences = started
            counted = (
                {t: n for t, n in row.frequencies.items() if n and t in weighted},
                found,
                occurrences,
            )
        else:  # ... and the text is not read
            counted = _from_postings(row.frequencies, weighted, crude_of)
        # tuple.__new__: as _Candidate(...), a third faster (150 a search).
        candidates[key] = tuple.__new__(_Candidate, (row.role, row.text, row.length, *counted))
    idf = corpus.idf(query_terms, (c.frequencies for c in candidates.values()))
    average = corpus.average_length(c.length for c in candidates.values())
    score: dict[_Key, float] = {}
    quoted: set[_Key] = set()
    k1, b = ranking.k1, ranking.b
    for key, c in candidates.items():
        # Okapi BM25 of the message, its length over the average (inline: ~150 a search;
        # the same expression, so the same floats, as a sessions' document's above).
        norm = k1 * (1 - b + b * (c.length / average))
        value = sum([idf[t] * f * (k1 + 1) / (f + norm) for t, f in c.frequencies.items()])
        said = False
        if len(c.found) == len(crude) and " " in phrase:
            if spoken is None:
                spoken = _phrase(phrase)
            said = spoken is not None and _says(c.body, spoken)
        if said:
            quoted.add(key)
        if ranking.classic:
            value += ranking.classic * _classic(
                c.body.count(" "), c.found, c.occurrences, said, sessions[key[0]].titled
            )
        if ranking.speaker:
            label = _LABEL.match(c.body)
            if label and label.group(1).lower() in words:
                value += ranking.speaker
        score[key] = value

    final = dict(score)
    if ranking.window:
        near = candidates.get
        for (sid, seq), c in candidates.items():
            covered = c.found
            for beside in (near((sid, seq - 1)), near((sid, seq + 1))):
                if beside is not None:
                    covered = covered | beside.found
            final[(sid, seq)] += ranking.window * len(covered)
    if ranking.neighbours:
        reach = range(1, ranking.reach + 1)
        scored = score.get
        for sid, seq in score:
            around = sum(
                [(scored((sid, seq - d), 0.0) + scored((sid, seq + d), 0.0)) / d for d in reach]
            )
            final[(sid, seq)] += ranking.neighbours * around
    if ranking.session:
        best: dict[str, list[float]] = defaultdict(list)
        for (sid, _), value in score.items():
            best[sid].append(value)
        strength = {sid: sum(sorted(v, reverse=True)[:3]) / 3 for sid, v in best.items()}
        for key in final:
            final[key] += ranking.session * strength[key[0]]
    if ranking.session_text:
        documents = _session_text(store, query_terms, candidates, corpus)
        for key in final:
            final[key] += ranking.session_text * documents[key[0]]
    for key, c in candidates.items():
        if ranking.length:
            final[key] += ranking.length * math.log1p(c.length)
        if ranking.opening and key[1] == 0:
            final[key] += ranking.opening
        if ranking.question and _asks(c.body):
            final[key] -= ranking.question
        if ranking.verbatim and key in quoted:
            final[key] += ranking.verbatim * len(words)

    order = sorted(final, key=lambda k: (-final[k], -sessions[k[0]].updated, k[1]))[:limit]
    # A text shown twice (a hit beside another, or an agent's command output repeated across
    # sessions) is scrubbed once: the preview depends on the text and the words only.
    previews: dict[str, str] = {}

    def preview(text: str) -> str:
        shown = previews.get(text)
        if shown is None:
            shown = previews[text] = _preview(text, words)
        return shown

    out: list[RecallHit] = []
    for sid, seq in order:
        hit, session = candidates[(sid, seq)], sessions[sid]
        texts = store.recall_texts(sid, seq - 1, seq + 1)
        before, after = texts.get(seq - 1), texts.get(seq + 1)
        out.append(
            RecallHit(
                session_id=sid,
                index=seq,
                role=hit.role,
                score=round(final[(sid, seq)], 6),
                preview=preview(hit.body),
                session_name=session.title,
                session_date=datetime.fromtimestamp(session.created, tz=UTC),
                previous=None if before is None else preview(before),
                next=None if after is None else preview(after),
            )
        )
    return out
