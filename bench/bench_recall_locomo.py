"""Recall quality on LoCoMo: turn-level recall@5 / recall@10 of the evidence turns.

A benchmark, not a test: it prints figures measured in one run and asserts nothing.

    python bench/bench_recall_locomo.py      # ../shared/bench-data/locomo/locomo-dev.json
    python bench/bench_recall_locomo.py --data path/to/locomo.json
    python bench/bench_recall_locomo.py --cv         # CV of each ranking parameter
    python bench/bench_recall_locomo.py --cv-joint   # nested CV of all of them (slow)

Each conversation gets its own memory root; each of its sessions is stored
as a session (named with its number and date, e.g. ``"session 3, 1:56 pm on
8 May, 2023"``), one message per turn as ``"speaker: text"``, ``user`` for
the first speaker and ``assistant`` for the second. Every question with
evidence is recalled (``max_results=10``) and scored by the fraction of its
evidence ``dia_id`` turns found in the first 5 and 10 hits, averaged over
questions.

In the same run, on the same turns:

* **plain BM25**: Okapi BM25 (k1 1.5, b 0.75) over the conversation's turns,
  lowercase words, no stemming, no stopwords -- the usual baseline;
* one line per ranking idea, each added to the previous one (the ablation
  reported in ``docs/recall.md``), ending with the shipped default.

``--cv``: leave-one-conversation-out cross-validation of each parameter of the
ranking (its value picked on the other conversations, measured on the held-out
one); ``--cv-joint``: the same with every parameter picked together.

The data is read from where it lies; it is never copied into the repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from _data import bench_data

import agentmem
from agentmem.recall import DEFAULT_RANKING, Ranking, recall

DEFAULT_DATA = bench_data("locomo", "locomo-dev.json")
KS = (5, 10)
_WORD = re.compile(r"\w+")


def sessions_of(conversation: dict[str, Any]) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """``(number, date, turns)`` of each session, in order."""
    out = []
    for key, turns in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(turns, list) and turns:
            number = int(match.group(1))
            out.append((number, str(conversation.get(f"{key}_date_time", "")), turns))
    return sorted(out, key=lambda s: s[0])


def store_conversation(root: Path, sample: dict[str, Any]) -> tuple[agentmem.Memory, dict]:
    """Store a conversation; returns the memory and ``(session_id, index) -> dia_id``."""
    conversation = sample["conversation"]
    first = conversation.get("speaker_a")
    mem = agentmem.Memory(root=root, durability="normal")
    where: dict[tuple[str, int], str] = {}
    for number, date, turns in sessions_of(conversation):
        with mem.session(name=f"session {number}, {date}") as s:
            for turn in turns:
                role = "user" if turn["speaker"] == first else "assistant"
                s.append({"role": role, "content": f"{turn['speaker']}: {turn['text']}"})
                where[(s.id, len(s.history) - 1)] = turn["dia_id"]
    return mem, where


class PlainBM25:
    """Okapi BM25 over a list of texts (the rank_bm25 defaults), the baseline."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = [Counter(_WORD.findall(t.lower())) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(len(self.docs), 1)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {w: math.log((n - f + 0.5) / (f + 0.5) + 1) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[int]:
        words = _WORD.findall(query.lower())
        scores = []
        for i, d in enumerate(self.docs):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
            s = sum(
                self.idf.get(w, 0.0) * d[w] * (self.k1 + 1) / (d[w] + norm) for w in words if w in d
            )
            scores.append((s, -i))
        return [-i for s, i in sorted(scores, reverse=True)[:k] if s > 0]


# The ranking shipped before the signals below the line were added (its weights).
PREVIOUS = {"classic": 0.5, "neighbours": 0.3, "session": 0.6, "speaker": 2.0, "window": 1.0}


def ideas() -> list[tuple[str, Ranking]]:
    """Each ranking idea added to the previous one, ending with the shipped default."""
    none = Ranking(
        stopwords=False,
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
        postings=False,
        verbatim=0.0,
    )
    d = DEFAULT_RANKING
    steps = [("FTS5 BM25 (porter stems)", none)]

    def add(label: str, **changes: Any) -> None:
        steps.append((label, dataclasses.replace(steps[-1][1], **changes)))

    add("+ stopwords", stopwords=True)
    add("+ 80% words out of query", common=d.common)
    add("+ classic rules", classic=PREVIOUS["classic"])
    add("+ neighbouring turns", neighbours=PREVIOUS["neighbours"], reach=d.reach)
    add("+ session score", session=PREVIOUS["session"])
    add("+ speaker named", speaker=PREVIOUS["speaker"])
    add("+ keywords in window", window=PREVIOUS["window"])
    add("+ every match (small store)", every_match=d.every_match)
    add("+ BM25 k1/b", k1=d.k1, b=d.b)
    add("+ session as a document", session_text=d.session_text)
    add("+ session's first message", opening=d.opening)
    add("+ a question ranks lower", question=d.question)
    add("+ message length", length=d.length)
    add("+ weights re-tuned", **{k: getattr(d, k) for k in PREVIOUS})
    add("+ verbatim quote bonus", verbatim=d.verbatim)
    steps.append(("shipped default", DEFAULT_RANKING))
    # A store too large to re-rank every match: the candidates come from the index.
    large = dataclasses.replace(DEFAULT_RANKING, every_match=0)
    steps.append(("large store, FTS5 candidates", dataclasses.replace(large, postings=False)))
    steps.append(("large store, postings", large))
    return steps


class Conversation:
    """One LoCoMo conversation stored in its own memory root, with its questions."""

    def __init__(self, root: Path, sample: dict[str, Any]) -> None:
        self.mem, self.where = store_conversation(root, sample)
        self.turns = [
            (turn["dia_id"], f"{turn['speaker']}: {turn['text']}")
            for _, _, ts in sessions_of(sample["conversation"])
            for turn in ts
        ]
        known = {dia for dia, _ in self.turns}
        self.questions: list[tuple[str, set[str], Any]] = []
        for qa in sample["qa"]:
            evidence = {e for e in qa.get("evidence", []) if e in known}
            if evidence:
                self.questions.append((str(qa["question"]), evidence, qa.get("category")))

    def found(self, question: str, ranking: Ranking) -> list[str]:
        hits = recall(self.mem.sessions, question, max_results=max(KS), ranking=ranking)
        return [self.where[(h.session_id, h.index)] for h in hits]

    def score(self, ranking: Ranking) -> tuple[float, float, int]:
        """``(sum of R@5, sum of R@10, questions)`` of ``ranking`` on this conversation."""
        r5 = r10 = 0.0
        for question, evidence, _ in self.questions:
            dias = self.found(question, ranking)
            r5 += len(evidence & set(dias[:5])) / len(evidence)
            r10 += len(evidence & set(dias[:10])) / len(evidence)
        return r5, r10, len(self.questions)


# Leave-one-conversation-out cross-validation: each parameter's grid (round values around
# the shipped one), the others held at their shipped values.
GRIDS: dict[str, tuple[float, ...]] = {
    "k1": (1.2, 2.0, 3.0),
    "b": (0.0, 0.25, 0.5, 0.75),
    "classic": (0.0, 0.25, 0.5),
    "speaker": (2.0, 4.0, 6.0),
    "window": (1.0, 2.0, 3.0, 4.0),
    "neighbours": (0.3, 0.4, 0.5),
    "session": (0.3, 0.6, 1.0),
    "session_text": (0.0, 1.0, 2.0, 3.0),
    "length": (0.0, 0.5, 1.0),
    "opening": (0.0, 1.0, 2.0, 3.0),
    "question": (0.0, 1.0, 2.0, 3.0),
    "every_match": (0, 1000),
}


def cross_validate(conversations: list[Conversation]) -> None:
    """Print, per parameter, the value picked on 4 conversations and its R@5/R@10 on the 5th,
    averaged over the folds (question-weighted), next to the shipped value on the same folds."""
    memo: dict[Ranking, list[tuple[float, float, int]]] = {}

    def results(ranking: Ranking) -> list[tuple[float, float, int]]:
        if ranking not in memo:
            memo[ranking] = [c.score(ranking) for c in conversations]
        return memo[ranking]

    def objective(ranking: Ranking, folds: list[int]) -> float:
        r = results(ranking)
        n = sum(r[i][2] for i in folds)
        return sum(r[i][0] + r[i][1] for i in folds) / (2 * n)

    everything = list(range(len(conversations)))
    shipped = results(DEFAULT_RANKING)
    n = sum(r[2] for r in shipped)
    print(f"leave-one-conversation-out CV over {len(conversations)} conversations")
    print(f"{'parameter':<13} {'shipped':>7} {'picked per fold':<26} {'CV R@5':>6} {'R@10':>6}")
    for name, grid in GRIDS.items():
        picked = []
        r5 = r10 = 0.0
        for held in everything:
            train = [i for i in everything if i != held]
            best = max(
                grid,
                key=lambda v: objective(dataclasses.replace(DEFAULT_RANKING, **{name: v}), train),
            )
            picked.append(best)
            r = results(dataclasses.replace(DEFAULT_RANKING, **{name: best}))[held]
            r5, r10 = r5 + r[0], r10 + r[1]
        shipped_value = getattr(DEFAULT_RANKING, name)
        cells = " ".join(f"{v:g}" for v in picked)
        print(f"{name:<13} {shipped_value:>7g} {cells:<26} {r5 / n:6.3f} {r10 / n:6.3f}")
    s5, s10 = (sum(r[k] for r in shipped) / n for k in (0, 1))
    print(f"{'(shipped)':<13} {'':>7} {'':<26} {s5:6.3f} {s10:6.3f}")


def cross_validate_jointly(conversations: list[Conversation]) -> None:
    """Nested leave-one-conversation-out CV of the whole ranking: for each held-out
    conversation, every parameter of :data:`GRIDS` is chosen together on the other 4
    (one sweep of coordinate ascent from the previous release's ranking, the new ideas
    off), then measured on the held-out one. Slow: about 40 rankings per fold."""
    memo: dict[tuple[Ranking, int], tuple[float, float, int]] = {}

    def result(ranking: Ranking, i: int) -> tuple[float, float, int]:
        if (ranking, i) not in memo:
            memo[(ranking, i)] = conversations[i].score(ranking)
        return memo[(ranking, i)]

    def objective(ranking: Ranking, folds: list[int]) -> float:
        r = [result(ranking, i) for i in folds]
        return sum(a + b for a, b, _ in r) / (2 * sum(n for _, _, n in r))

    start = dataclasses.replace(
        DEFAULT_RANKING,
        **PREVIOUS,
        k1=1.2,
        b=0.75,
        session_text=0.0,
        opening=0.0,
        question=0.0,
        length=0.0,
        every_match=0,
    )
    everything = list(range(len(conversations)))
    r5 = r10 = 0.0
    n = 0
    print(f"nested leave-one-conversation-out CV over {len(conversations)} conversations")
    for held in everything:
        train = [i for i in everything if i != held]
        ranking = start
        for name, grid in GRIDS.items():
            current = getattr(ranking, name)
            values = sorted({*grid, current})
            best = max(
                values,
                key=lambda v: (
                    objective(dataclasses.replace(ranking, **{name: v}), train),
                    v == current,
                ),
            )
            ranking = dataclasses.replace(ranking, **{name: best})
        a, b, q = result(ranking, held)
        r5, r10, n = r5 + a, r10 + b, n + q
        picked = " ".join(f"{k}={getattr(ranking, k):g}" for k in GRIDS)
        print(f"  fold {held}: R@5 {a / q:.3f} R@10 {b / q:.3f} ({q} questions) {picked}")
    print(f"nested CV: R@5 {r5 / n:.3f} R@10 {r10 / n:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--cv",
        action="store_true",
        help="leave-one-conversation-out cross-validation of each ranking parameter",
    )
    parser.add_argument(
        "--cv-joint",
        action="store_true",
        help="nested cross-validation of all the parameters chosen together (slow)",
    )
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        conversations = [Conversation(Path(tmp) / f"conv{n}", s) for n, s in enumerate(samples)]
        try:
            if args.cv_joint:
                cross_validate_jointly(conversations)
            elif args.cv:
                cross_validate(conversations)
            else:
                ablation(args.data.name, conversations)
        finally:
            for c in conversations:
                c.mem.close()


def quality(
    data: Path, conversations: int | None = None, questions: int | None = None
) -> dict[str, float]:
    """R@5 / R@10 of the shipped ranking and of plain BM25, for ``python -m bench``.

    On the first ``conversations`` conversations of ``data`` and the first ``questions``
    questions (with evidence) of each; all of them by default.
    """
    samples = json.loads(data.read_text(encoding="utf-8"))[:conversations]
    totals = dict.fromkeys(("recall R@5", "recall R@10", "bm25 R@5", "bm25 R@10"), 0.0)
    asked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, sample in enumerate(samples):
            c = Conversation(Path(tmp) / f"conv{n}", sample)
            try:
                baseline = PlainBM25([text for _, text in c.turns])
                for question, evidence, _ in c.questions[:questions]:
                    asked += 1
                    found = {
                        "recall": c.found(question, DEFAULT_RANKING),
                        "bm25": [c.turns[i][0] for i in baseline.top(question, max(KS))],
                    }
                    for label, dias in found.items():
                        for k in KS:
                            hit = len(evidence & set(dias[:k])) / len(evidence)
                            totals[f"{label} R@{k}"] += hit
            finally:
                c.mem.close()
    return {**{k: v / max(asked, 1) for k, v in totals.items()}, "questions": float(asked)}


def ablation(name: str, conversations: list[Conversation]) -> None:
    """Print R@5/R@10 of plain BM25 and of each ranking idea added to the previous one."""
    steps = ideas()
    totals: dict[str, dict[int, float]] = defaultdict(lambda: dict.fromkeys(KS, 0.0))
    by_category: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    questions = 0
    latency: list[float] = []
    for c in conversations:
        baseline = PlainBM25([text for _, text in c.turns])
        for question, evidence, category in c.questions:
            questions += 1
            found: dict[str, list[str]] = {
                "plain BM25": [c.turns[i][0] for i in baseline.top(question, max(KS))]
            }
            for label, ranking in steps:
                start = time.perf_counter()
                found[label] = c.found(question, ranking)
                if label == "shipped default":
                    latency.append(time.perf_counter() - start)
            for label, dias in found.items():
                for k in KS:
                    r = len(evidence & set(dias[:k])) / len(evidence)
                    totals[label][k] += r
                    if k == 10:
                        by_category[label][category].append(r)
    print(f"LoCoMo {name}: {len(conversations)} conversations, {questions} questions")
    print(f"{'ranking':<28} {'R@5':>6} {'R@10':>6}")
    for label in ["plain BM25", *(label for label, _ in steps)]:
        r5, r10 = (totals[label][k] / questions for k in KS)
        print(f"{label:<28} {r5:6.3f} {r10:6.3f}")
    cats = sorted(by_category["plain BM25"], key=str)
    print("R@10 by category: " + "  ".join(f"{c}" for c in cats))
    for label in ("plain BM25", "shipped default"):
        cells = "  ".join(
            f"{c}:{sum(v) / len(v):.2f}(n={len(v)})"
            for c, v in sorted(by_category[label].items(), key=lambda kv: str(kv[0]))
        )
        print(f"  {label}: {cells}")
    latency.sort()
    print(f"recall latency (default): p50 {latency[len(latency) // 2] * 1e3:.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
