"""Benchmark ``AgentMemSession`` against the Agents SDK's ``SQLiteSession``, same run.

A benchmark, not a test: it prints figures and ratios measured in one run on this
machine and asserts nothing about wall-clock time.

    PYTHONPATH=. python bench/bench_openai_agents_session.py            # 300 turns
    PYTHONPATH=. python bench/bench_openai_agents_session.py --turns 2000

Per turn, the runner's two calls: ``add_items`` of a turn (a user message and an
assistant output message, ~100 words), interleaved turn by turn across the three
sessions so they share the machine's rhythm; then ``get_items()`` (every item) and
``get_items(limit=10)`` on the full sessions. ``AgentMemSession`` runs with
``durability="full"`` (fsync per batch) and ``"normal"``; ``SQLiteSession`` with its
defaults (WAL, synchronous=FULL unless the build says otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agents import SQLiteSession

import agentmem
from agentmem.integrations.openai_agents import AgentMemSession


def turn(n: int) -> list[Any]:
    """The items the runner stores for one turn."""
    return [
        {"role": "user", "content": f"question {n} " + "word " * 40},
        {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {n} " + "word " * 60}],
        },
    ]


async def timed(coro: Any) -> float:
    start = time.perf_counter()
    await coro
    return time.perf_counter() - start


async def measure(turns: int, root: Path) -> dict[str, dict[str, float]]:
    """Median seconds per session: ``add_items`` of a turn, ``get_items()``, ``get_items(10)``."""
    full = agentmem.Memory(root=root / "full", durability="full")
    normal = agentmem.Memory(root=root / "normal", durability="normal")
    sessions: dict[str, Any] = {
        "AgentMemSession (full)": AgentMemSession("bench", memory=full),
        "AgentMemSession (normal)": AgentMemSession("bench", memory=normal),
        "SQLiteSession": SQLiteSession("bench", root / "sdk.db"),
    }
    adds: dict[str, list[float]] = {name: [] for name in sessions}
    for n in range(turns):
        for name, session in sessions.items():
            adds[name].append(await timed(session.add_items(turn(n))))
    out: dict[str, dict[str, float]] = {}
    for name, session in sessions.items():
        every = [await timed(session.get_items()) for _ in range(30)]
        newest = [await timed(session.get_items(limit=10)) for _ in range(30)]
        out[name] = {
            "add_items": statistics.median(adds[name]),
            "get_items()": statistics.median(every),
            "get_items(10)": statistics.median(newest),
        }
    for session in sessions.values():
        session.close()
    full.close()
    normal.close()
    return out


def figures(turns: int) -> dict[str, dict[str, float]]:
    """:func:`measure` in a temporary directory, for ``python -m bench``."""
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(measure(turns, Path(tmp)))


def main(turns: int) -> None:
    results = figures(turns)
    base = results["SQLiteSession"]
    print(f"{turns} turns ({2 * turns} items); medians in ms; ratio to SQLiteSession")
    print(f"{'':26} {'add_items':>16} {'get_items()':>16} {'get_items(10)':>16}")
    for name, cells in results.items():
        print(
            f"{name:26} "
            + " ".join(f"{v * 1e3:8.3f} ({v / base[k]:4.2f}x)" for k, v in cells.items())
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    main(parser.parse_args().turns)
