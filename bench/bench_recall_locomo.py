"""Recall quality on LoCoMo: turn-level recall@5 / recall@10 of the evidence turns.

A benchmark, not a test: it prints figures measured in one run and asserts nothing.

    python bench/bench_recall_locomo.py      # ../shared/bench-data/locomo/locomo-dev.json
    python bench/bench_recall_locomo.py --data path/to/locomo.json

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

import agentmem
from agentmem.recall import DEFAULT_RANKING, Ranking, recall

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "bench-data" / "locomo" / "locomo-dev.json"
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


def ideas() -> list[tuple[str, Ranking]]:
    """Each ranking idea added to the previous one, ending with the shipped default."""
    none = Ranking(
        stopwords=False,
        classic=0.0,
        neighbours=0.0,
        session=0.0,
        speaker=0.0,
        window=0.0,
        common=1.0,
    )
    steps = [("FTS5 BM25 (porter stems)", none)]
    steps.append(("+ stopwords", dataclasses.replace(steps[-1][1], stopwords=True)))
    steps.append(
        (
            "+ 80% words out of query",
            dataclasses.replace(steps[-1][1], common=DEFAULT_RANKING.common),
        )
    )
    steps.append(
        ("+ classic rules", dataclasses.replace(steps[-1][1], classic=DEFAULT_RANKING.classic))
    )
    steps.append(
        (
            "+ neighbouring turns",
            dataclasses.replace(
                steps[-1][1], neighbours=DEFAULT_RANKING.neighbours, reach=DEFAULT_RANKING.reach
            ),
        )
    )
    steps.append(
        ("+ session score", dataclasses.replace(steps[-1][1], session=DEFAULT_RANKING.session))
    )
    steps.append(
        ("+ speaker named", dataclasses.replace(steps[-1][1], speaker=DEFAULT_RANKING.speaker))
    )
    steps.append(
        ("+ keywords in window", dataclasses.replace(steps[-1][1], window=DEFAULT_RANKING.window))
    )
    steps.append(("shipped default", DEFAULT_RANKING))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    steps = ideas()
    totals: dict[str, dict[int, float]] = defaultdict(lambda: dict.fromkeys(KS, 0.0))
    by_category: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
    questions = 0
    latency: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, sample in enumerate(samples):
            mem, where = store_conversation(Path(tmp) / f"conv{n}", sample)
            turns = [
                (turn["dia_id"], f"{turn['speaker']}: {turn['text']}")
                for _, _, ts in sessions_of(sample["conversation"])
                for turn in ts
            ]
            known = {dia for dia, _ in turns}
            baseline = PlainBM25([text for _, text in turns])
            for qa in sample["qa"]:
                evidence = {e for e in qa.get("evidence", []) if e in known}
                if not evidence:
                    continue
                questions += 1
                question = str(qa["question"])
                found: dict[str, list[str]] = {
                    "plain BM25": [turns[i][0] for i in baseline.top(question, max(KS))]
                }
                for label, ranking in steps:
                    start = time.perf_counter()
                    hits = recall(mem.sessions, question, max_results=max(KS), ranking=ranking)
                    if label == "shipped default":
                        latency.append(time.perf_counter() - start)
                    found[label] = [where[(h.session_id, h.index)] for h in hits]
                for label, dias in found.items():
                    for k in KS:
                        r = len(evidence & set(dias[:k])) / len(evidence)
                        totals[label][k] += r
                        if k == 10:
                            by_category[label][qa.get("category")].append(r)
            mem.close()
    print(f"LoCoMo {args.data.name}: {len(samples)} conversations, {questions} questions")
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
