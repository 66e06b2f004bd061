"""Recall's ranking signals: each one, on a small hand-built store, must reorder the hits.

And the pieces they stand on: the porter terms agree with FTS5's own tokenizer, the
fast term counter agrees with the full tokenization, and the corpus statistics read
from the index agree with the messages stored.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import string
import time
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agentmem.recall import DEFAULT_RANKING, Ranking, _porter, recall
from agentmem.session_store import SessionStore

# Every signal off: the score is BM25 alone (k1 1.2, b 0.75, FTS5's values).
BARE = Ranking(
    k1=1.2,
    b=0.75,
    classic=0.0,
    neighbours=0.0,
    session=0.0,
    session_text=0.0,
    speaker=0.0,
    window=0.0,
    length=0.0,
    opening=0.0,
    question=0.0,
    common=1.0,
    every_match=0,
)
ENGLISH = (  # noqa: SIM905
    "relational conditional rational valency hesitancy digitizer conformabli radicalli "
    "differentli vileli analogousli vietnamization predication operator feudalism "
    "decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate "
    "formative formalize electriciti electrical hopeful goodness revival allowance "
    "inference airliner gyroscopic adjustable defensible irritant replacement adjustment "
    "dependent adoption homologou communism activate angulariti homologous effective "
    "bowdlerize probate rate cease controll roll caresses ponies ties caress cats feed "
    "agreed plastered bled motoring sing conflated troubled sized hopping tanned falling "
    "hissing fizzed failing filing happy sky generously abilities ability hoping united"
).split()


def _fts5_terms(conn: sqlite3.Connection, text: str) -> list[str]:
    conn.execute("DELETE FROM f")
    conn.execute("INSERT INTO f (rowid, text) VALUES (1, ?)", (text,))
    rows = conn.execute("SELECT term, offset FROM v WHERE doc = 1 ORDER BY offset").fetchall()
    return [str(term) for term, _ in rows]


def _fts5() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, instance)")
    return conn


# ---------------------------------------------------------------- porter terms


def test_porter_terms_match_fts5_on_english_words() -> None:
    conn = _fts5()
    text = " ".join(ENGLISH) + " Caroline's café, naïve RÉSUMÉ x_y 42nd"
    assert _porter.terms(text) == _fts5_terms(conn, text)


@settings(max_examples=300)
@given(st.lists(st.text(alphabet="aeiouybcdlmnrstz", min_size=1, max_size=12), max_size=8))
def test_porter_terms_match_fts5_on_any_word(words: list[str]) -> None:
    """Random letter strings hit every rule's condition (m, *v*, *o, double consonants)."""
    conn = _fts5()
    text = " ".join(words)
    assert _porter.terms(text) == _fts5_terms(conn, text)


@settings(max_examples=200)
@given(
    st.lists(st.sampled_from([*ENGLISH, "the", "a", "is"]), min_size=1, max_size=20),
    st.lists(st.sampled_from(ENGLISH), min_size=1, max_size=4),
    st.lists(st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=5), max_size=3),
)
def test_matcher_counts_what_the_full_tokenization_holds(
    words: list[str], query: list[str], prefixes: list[str]
) -> None:
    text = " ".join(words).capitalize() + "!"
    wanted = {_porter.stem(w) for w in query}
    counts, started, hits = _porter.Matcher(wanted, prefixes).count(text)
    terms = _porter.terms(text)
    assert counts == dict(Counter(t for t in terms if t in wanted))
    tokens = text.lower().replace("!", "").split()
    assert started == {p for p in prefixes if any(t.startswith(p) for t in tokens)}
    assert hits == sum(any(t.startswith(p) for p in prefixes) for t in tokens)


# ---------------------------------------------------------------- corpus statistics


def test_recall_stats_agree_with_the_messages(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    texts = [f"zebra {'quartz ' * i}violin" for i in range(150)]  # > one varint byte
    sids = []
    for part in (texts[:100], texts[100:]):
        sid = store.create().id
        sids.append(sid)
        store.writer(sid).on_append([{"role": "user", "content": t} for t in part])
    store.create()  # an empty session still counts as a session
    docs, messages, tokens, sessions = store.recall_stats(["zebra", "quartz", "nowhere"])
    assert docs == {"zebra": 150, "quartz": 149}
    assert messages == 150
    assert tokens == sum(len(t.split()) for t in texts)
    assert sessions == 3
    assert store.recall_session_sizes([*sids, "missing"]) == {
        sids[0]: 100,
        sids[1]: 50,
        "missing": 0,
    }
    rows = store.recall_rows('"quartz"', 500)
    assert {r.seq + (100 if r.session_id == sids[1] else 0): r.length for r in rows} == {
        i: len(texts[i].split()) for i in range(1, 150)
    }


def test_python_bm25_equals_fts5_bm25(tmp_path: Path) -> None:
    """With FTS5's k1 and b and nothing else, the re-scored order is FTS5's own order."""
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    sid = store.create().id
    texts = [" ".join(ENGLISH[i : i + 3 + i % 7]) for i in range(0, 120, 2)]
    store.writer(sid).on_append([{"role": "user", "content": t} for t in texts])
    query = "adjustment ability hopeful ponies"
    own = [
        (round(-float(r[3]), 9), int(r[1]))
        for r in store.recall_rows(" OR ".join(f'"{w}"' for w in query.split()), 1000)
    ]
    ours = [(h.index, h.score) for h in recall(store, query, max_results=1000, ranking=BARE)]
    assert [i for i, _ in ours] == [i for _, i in sorted(own)]
    fts5 = {i: -s for s, i in own}
    for index, score in ours:
        assert abs(score - fts5[index]) < 1e-5


# ---------------------------------------------------------------- signals reorder hits


def _store(tmp_path: Path, sessions: list[list[str]]) -> tuple[SessionStore, list[str]]:
    """One session per list of texts, created in order (the last one is the newest)."""
    store = SessionStore(tmp_path / "s.sqlite", durability="normal")
    ids = []
    for n, texts in enumerate(sessions):
        sid = store.create(name=f"session {n}").id
        store.writer(sid).on_append([{"role": "user", "content": t} for t in texts])
        ids.append(sid)
        time.sleep(0.002)  # distinct update times: ties go to the newest session
    return store, ids


def _order(store: SessionStore, query: str, ranking: Ranking) -> list[tuple[str, int]]:
    return [(h.session_id, h.index) for h in recall(store, query, 10, ranking=ranking)]


def test_lower_b_stops_favouring_short_messages(tmp_path: Path) -> None:
    """b 0.75 (FTS5's): the short message wins; b 0: the one saying the word twice does."""
    long = "zebra zebra " + " ".join(f"filler{i}" for i in range(30))
    store, (old, new) = _store(tmp_path, [[long], ["zebra fine"]])
    assert _order(store, "zebra", BARE)[0] == (new, 0)
    assert _order(store, "zebra", dataclasses.replace(BARE, b=0.0))[0] == (old, 0)


def test_session_text_prefers_the_session_about_the_query(tmp_path: Path) -> None:
    # Other sessions first: a word's session rarity needs sessions that lack it.
    filler = [[f"filler talk {n}", "nothing to see"] for n in range(6)]
    store, ids = _store(
        tmp_path,
        [
            *filler,
            ["we talked about quartz", "hello there", "the zebra was calm", "violin later"],
            ["nothing much", "a zebra passed", "bye now", "see you"],
        ],
    )
    about, stray = ids[-2:]
    query = "zebra quartz violin"
    without = _order(store, "zebra quartz violin", BARE)
    # Equal texts, equal scores: the newer session's message comes first...
    assert without.index((stray, 1)) < without.index((about, 2))
    # ...unless its session as a whole matches the query better.
    with_text = _order(store, query, dataclasses.replace(BARE, session_text=1.0))
    assert with_text.index((about, 2)) < with_text.index((stray, 1))


def test_opening_message_ranks_first_among_equals(tmp_path: Path) -> None:
    store, (old, new) = _store(tmp_path, [["zebra news", "ok"], ["ok", "zebra news"]])
    assert _order(store, "zebra", BARE)[0] == (new, 1)
    assert _order(store, "zebra", dataclasses.replace(BARE, opening=1.0))[0] == (old, 0)


def test_a_question_ranks_below_its_answer(tmp_path: Path) -> None:
    store, (old, new) = _store(tmp_path, [["i adopted a zebra"], ["you adopt a zebra?"]])
    assert _order(store, "zebra adopt", BARE)[0] == (new, 0)
    assert _order(store, "zebra adopt", dataclasses.replace(BARE, question=1.0))[0] == (old, 0)


def test_length_prior_prefers_the_message_that_says_more(tmp_path: Path) -> None:
    store, (old, new) = _store(
        tmp_path, [["the zebra we saw at the park ate grass by the big old lake"], ["zebra!"]]
    )
    assert _order(store, "zebra", BARE)[0] == (new, 0)
    assert _order(store, "zebra", dataclasses.replace(BARE, length=1.0))[0] == (old, 0)


def test_small_store_ranks_every_match_even_common_words(tmp_path: Path) -> None:
    """A word held by most messages is searched too when every match is re-ranked: the
    hits are not cut to the few messages that hold the rarer word."""
    texts = [f"zebra note {i}" for i in range(240)] + ["quartz one", "quartz two"]
    store, _ = _store(tmp_path, [texts])
    cut = dataclasses.replace(DEFAULT_RANKING, every_match=0)
    assert len(recall(store, "zebra quartz", 5, ranking=cut)) == 2
    hits = recall(store, "zebra quartz", 5, ranking=DEFAULT_RANKING)
    assert len(hits) == 5
    assert {h.preview for h in hits[:2]} == {"quartz one", "quartz two"}


_TEXT_ALPHABET = st.sampled_from(list("abtesrun _-.\n\t\u00e9\u00c9AB12"))


def _reference_prefix_count(text: str, prefixes: list[str]) -> tuple[set[str], int]:
    """The prefix count as it was: every token starting like a prefix, one at a time."""
    import re

    from agentmem.session_store import postings_terms

    alternatives = "|".join(map(re.escape, sorted(set(prefixes), key=len, reverse=True)))
    pattern = re.compile(rf"(?<![^\W_])(?:{alternatives})[^\W_]*")
    started: set[str] = set()
    hits = 0
    for token in pattern.findall(postings_terms._fold(text)):
        hit = False
        for prefix in prefixes:
            if token.startswith(prefix):
                started.add(prefix)
                hit = True
        hits += hit
    return started, hits


@settings(max_examples=300)
@given(
    text=st.text(_TEXT_ALPHABET, max_size=80),
    prefixes=st.lists(
        st.text(st.sampled_from(list("abtesrun\u00e9_")), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    ),
)
def test_prefix_count_finds_what_the_token_scan_found(text: str, prefixes: list[str]) -> None:
    """``Matcher((), prefixes).count`` (a search for the prefixes, kept where a token
    starts) reports the prefixes and the tokens a scan of every token reports, prefixes
    of one another included."""
    _, started, hits = _porter.Matcher((), prefixes).count(text)
    assert (started, hits) == _reference_prefix_count(text, list(dict.fromkeys(prefixes)))


@settings(max_examples=200)
@given(
    word=st.text(st.sampled_from(list("abtesrun")), min_size=2, max_size=6),
    data=st.data(),
)
def test_prefix_count_keeps_the_longest_prefix_where_a_token_starts(
    word: str, data: st.DataObject
) -> None:
    """Prefixes of one another, in any order, starting the text's tokens (which the
    random texts above rarely do): each token start counts once and reports every prefix
    it starts with (``Matcher.count`` keeps the longest prefix found there)."""
    cut = data.draw(st.integers(1, len(word) - 1))
    prefixes = data.draw(st.permutations([word, word[:cut]]))
    tokens = data.draw(
        st.lists(st.sampled_from([word, word[:cut], word + "x", "x" + word, "q"]), max_size=8)
    )
    seps = data.draw(st.lists(st.sampled_from([" ", "-", "_", ".", "\n"]), min_size=len(tokens)))
    text = "".join(t + s for t, s in zip(tokens, seps, strict=False))
    _, started, hits = _porter.Matcher((), prefixes).count(text)
    assert (started, hits) == _reference_prefix_count(text, list(prefixes))


@settings(max_examples=300)
@given(
    text=st.text(_TEXT_ALPHABET, max_size=80),
    query=st.text(st.sampled_from(list("abtes \t\n.")), min_size=1, max_size=12),
)
def test_phrase_pattern_is_the_collapsed_substring(text: str, query: str) -> None:
    """The verbatim and phrase check (a pattern of the query's words separated by runs of
    whitespace) is ``phrase in`` the text lowercased with its whitespace runs collapsed."""
    import re

    from agentmem import recall as recall_module

    space = re.compile(r"\s+")
    phrase = space.sub(" ", query.lower()).strip()
    spoken = recall_module._phrase(phrase)
    if spoken is None:
        assert " " not in phrase
        return
    assert recall_module._says(text, spoken) == (phrase in space.sub(" ", text.lower()))


@settings(max_examples=300)
@given(
    text=st.text(_TEXT_ALPHABET, max_size=80),
    wanted=st.lists(st.text(st.sampled_from(list("abtesrun")), min_size=1, max_size=5), max_size=3),
    prefixes=st.lists(
        st.text(st.sampled_from(list("abtesrun\u00e9_")), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    ),
)
def test_prefix_matcher_finds_the_prefixes_the_full_matcher_finds(
    text: str, wanted: list[str], prefixes: list[str]
) -> None:
    """A session's name is checked for the keywords by the prefix-only matcher (no pattern
    of the query's terms compiled for it): it reports the prefixes the matcher of terms
    and prefixes together reports."""
    full = _porter.Matcher(wanted, prefixes).count(text)
    assert _porter.Matcher((), prefixes).count(text)[1:] == full[1:]


@settings(max_examples=300)
@given(st.text(st.sampled_from(list("a? \t\n\r\x0b\x0c\u00a0\u2003\u3000\x1c")), max_size=12))
def test_asks_is_a_question_mark_before_trailing_whitespace(text: str) -> None:
    """The question penalty's check reads the text's tail only; it says what
    ``text.rstrip().endswith("?")`` says, for every kind of whitespace."""
    from agentmem import recall as recall_module

    assert recall_module._asks(text) == text.rstrip().endswith("?")


@settings(max_examples=300)
@given(
    texts=st.lists(st.text(_TEXT_ALPHABET, max_size=30), max_size=5),
    prefixes=st.lists(
        st.text(st.sampled_from(list("abtesrun\u00e9_")), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    ),
)
def test_absent_prefixes_are_absent_from_every_text(texts: list[str], prefixes: list[str]) -> None:
    """One search of the session names together (``Matcher.absent``) says no name holds
    a keyword only when counting in each finds none; when every text lacks every
    prefix's letters it does say so."""
    matcher = _porter.Matcher((), prefixes)
    if matcher.absent(texts):
        assert all(matcher.count(text)[1:] == (set(), 0) for text in texts)
    from agentmem.session_store import postings_terms

    folded = [postings_terms._fold(t) for t in texts]
    if all(p.isalnum() for p in prefixes) and not any(p in t for p in prefixes for t in folded):
        assert matcher.absent(texts)


_SPACES = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2007\u2028\u2029\u202f\u3000"


def test_split_and_the_whitespace_pattern_agree_on_every_code_point() -> None:
    """A preview collapses whitespace with ``str.split``; it is what ``\\s+`` matches (the
    pattern it replaced), for every code point."""
    import re
    import sys

    space = re.compile(r"\s")
    differ = [
        c for c in range(sys.maxunicode + 1) if (space.match(chr(c)) is None) == chr(c).isspace()
    ]
    assert differ == []


@settings(max_examples=300)
@given(
    text=st.text(st.sampled_from(list("ab test key=" + _SPACES)), max_size=300),
    words=st.lists(st.sampled_from(["test", "key", "ab", "zz"]), min_size=1, max_size=3),
)
def test_preview_is_the_scrubbed_window_collapsed(text: str, words: list[str]) -> None:
    """A hit's preview (whitespace runs collapsed with ``str.split``) is the one built with
    the ``\\s+`` pattern and ``strip`` before it, every kind of whitespace included."""
    import re

    from agentmem import recall as recall_module
    from agentmem.scrub import scrub_near

    space = re.compile(r"\s+")
    flat = space.sub(" ", scrub_near(text, words, recall_module.PREVIEW_MARGIN)).strip()
    limit = recall_module.PREVIEW_CHARS
    if len(flat) <= limit:
        expected = flat
    else:
        lowered = flat.lower()
        at = min((i for i in (lowered.find(w) for w in words) if i >= 0), default=0)
        start = max(0, min(at - limit // 4, len(flat) - limit))
        expected = ("…" if start else "") + flat[start : start + limit]
        expected += "…" if start + limit < len(flat) else ""
    assert recall_module._preview(text, words) == expected
