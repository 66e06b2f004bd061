"""Known-item recall on real agent runs: does a query taken from a message find it?

A benchmark, not a test: it prints what it measured and asserts nothing.

    python bench/bench_recall_agent.py                 # seeds 1 and 2, 40 queries each
    python bench/bench_recall_agent.py --seeds 1 2 3 --queries 100

The store holds the 23 real DeepSeek coding-agent runs of
``../shared/bench-data/deepseek-usage/`` (mini-swe-agent on SWE-bench tasks: the task,
the agent's reasoning and ``bash`` tool calls, the tool outputs: code, diffs, test
logs), one session per run, each message as the run holds it (role, content, tool
calls, tool call id; the provider's raw response and the final ``exit`` marker left
out). 3,709 messages, more than ``Ranking.every_match``: recall takes its candidates
from the index, as in any store of real size.

Each query is 8 consecutive words (whitespace-separated) of one stored message's
indexed text, the message and the start chosen by a seeded RNG among the messages
with at least 8 words (code and tool output included, nothing hand-picked). A query is
a **hit** when the top 5 of ``mem.recall(query)`` holds that message, or one whose
index terms include every term of the query (it holds the same words). The figure is
given for this release's ranking, for it without the verbatim-quote bonus, and for the
previous release's (FTS5 candidates, no bonus), in the same run, on each seed; and
again with each query's 8 words shuffled (no quote left to find, the words alone).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import agentmem
from agentmem.recall import DEFAULT_RANKING, Ranking, recall
from agentmem.recall._porter import terms

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench-data" / "deepseek-usage"
_KEEP = ("role", "content", "tool_calls", "tool_call_id", "name")


def load_runs(data: Path = DATA) -> list[list[dict[str, Any]]]:
    """Each run's messages, as an agent would store them (raw provider fields dropped)."""
    runs = []
    for path in sorted(data.glob("*.traj.json")):
        messages = json.loads(path.read_text())["messages"]
        run = []
        for message in messages:
            if message.get("role") not in ("system", "user", "assistant", "tool"):
                continue  # the "exit" marker was never sent
            kept = {k: message[k] for k in _KEEP if message.get(k) is not None}
            if "tool_calls" in kept:
                kept["tool_calls"] = [
                    {"id": c.get("id"), "type": "function", "function": c["function"]}
                    for c in kept["tool_calls"]
                ]
            run.append(kept)
        runs.append(run)
    return runs


def build(root: Path, runs: list[list[dict[str, Any]]]) -> agentmem.Memory:
    mem = agentmem.Memory(root=root, durability="normal")
    for n, run in enumerate(runs):
        sid = mem.sessions.create(name=f"run {n}").id
        mem.sessions.writer(sid).on_append(run)
    return mem


def indexed_texts(mem: agentmem.Memory) -> dict[tuple[str, int], str]:
    """Every message's indexed text, by (session id, index)."""
    mem.sessions.check_recall_index(repair=False)  # indexes what is still queued
    out: dict[tuple[str, int], str] = {}
    infos = sorted(mem.sessions.list(), key=lambda info: int((info.name or "run 0").split()[-1]))
    for info in infos:
        size = info.message_count
        found = mem.sessions.recall_texts(info.id, 0, size)
        out.update(((info.id, i), found[i]) for i in sorted(found))
    return out


def queries(
    texts: dict[tuple[str, int], str], seed: int, count: int
) -> list[tuple[str, tuple[str, int]]]:
    rng = random.Random(seed)
    # In the order the runs were stored (session ids are random: not an order).
    eligible = [k for k, t in texts.items() if len(t.split()) >= 8]
    out = []
    for key in rng.sample(eligible, count):
        words = texts[key].split()
        start = rng.randrange(len(words) - 7)
        out.append((" ".join(words[start : start + 8]), key))
    return out


def known_item(
    mem: agentmem.Memory,
    texts: dict[tuple[str, int], str],
    asked: list[tuple[str, tuple[str, int]]],
    ranking: Ranking,
) -> tuple[int, list[float], list[str]]:
    """Hits in the top 5, the latencies, and the queries missed."""
    hits, times, missed = 0, [], []
    term_sets: dict[tuple[str, int], set[str]] = {}
    for query, key in asked:
        t = time.perf_counter()
        found = recall(mem.sessions, query, max_results=5, ranking=ranking)
        times.append(time.perf_counter() - t)
        wanted = set(terms(query))
        ok = False
        for hit in found:
            k = (hit.session_id, hit.index)
            if k == key:
                ok = True
                break
            if k not in term_sets:
                term_sets[k] = set(terms(texts.get(k, "")))
            if wanted <= term_sets[k]:
                ok = True
                break
        hits += ok
        if not ok:
            missed.append(query)
    return hits, times, missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--show-missed", action="store_true")
    parser.add_argument("--data", type=Path, default=DATA, help="the deepseek-usage directory")
    args = parser.parse_args()
    runs = load_runs(args.data)
    rankings = {
        "this release": DEFAULT_RANKING,
        "no verbatim bonus": dataclasses.replace(DEFAULT_RANKING, verbatim=0.0),
        "before (FTS5, no bonus)": dataclasses.replace(
            DEFAULT_RANKING, postings=False, verbatim=0.0
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        mem = build(Path(tmp) / "m", runs)
        texts = indexed_texts(mem)
        print(f"{len(runs)} runs, {len(texts):,} messages")
        for seed in args.seeds:
            verbatim = queries(texts, seed, args.queries)
            # The same 8 words in a shuffled order: no verbatim quote to find.
            shuffler = random.Random(seed)
            shuffled = [(" ".join(shuffler.sample(q.split(), 8)), key) for q, key in verbatim]
            for kind, asked in (("verbatim", verbatim), ("shuffled", shuffled)):
                for name, ranking in rankings.items():
                    hits, times, missed = known_item(mem, texts, asked, ranking)
                    print(
                        f"seed {seed}  {kind:8s}  {name:24s} hits@5 {hits}/{len(asked)}   "
                        f"p50 {statistics.median(times) * 1e3:.2f} ms"
                    )
                    if args.show_missed:
                        for q in missed:
                            print(f"    missed: {q!r}")
        mem.close()


if __name__ == "__main__":
    sys.exit(main())
