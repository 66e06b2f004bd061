"""Benchmark the session export: the time to write it, and the time a browser takes to render it.

A benchmark, not a test: it prints figures measured in one run on this
machine and asserts nothing about wall-clock time.

    python bench/bench_export.py                      # 1,000 and 10,000 messages
    python bench/bench_export.py --sizes 1000 --runs 5

It prints which agentmem it imported (set ``PYTHONPATH`` to a checkout to
measure that one).

For each size it stores one session through the public store
(``bench/_export_session.py``: user requests, tool calls with ~3 KB
outputs, answers, in 8 tasks with a branch, a thread summary, one billing
row per assistant turn, the time machine's task tree), then measures, as
the median of ``--runs``:

* ``mem.sessions.export(id, "x.html")`` and ``... "x.json"``: load from
  the database, render, write atomically (seconds);
* opening the HTML page in headless Chromium (``bench/_cdp.py``): first
  contentful paint, ``DOMContentLoaded`` and the end of the load event
  (ms since navigation start), and forcing a layout of the whole page then
  scrolling to its end (ms).

Without a ``chromium`` binary the browser columns are left out (one line
says so). The machine's load average is printed: browser timings on a
busy machine are several times the idle ones.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _cdp import Browser, find_chromium
from _export_session import build_session

import agentmem


def _median_seconds(runs: int, call: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"agentmem {agentmem.__version__} from {Path(agentmem.__file__).parent}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    chromium = find_chromium()
    browser = Browser(chromium) if chromium else None
    if browser is None:
        print("no chromium binary: browser timings left out (apt-get install chromium)")
    header = f"{'messages':>9} {'html MB':>8} {'export html s':>14} {'export json s':>14}"
    if browser is not None:
        header += f" {'FCP ms':>7} {'DCL ms':>7} {'load ms':>8} {'layout ms':>10}"
    rows = []
    try:
        for n in args.sizes:
            with tempfile.TemporaryDirectory(prefix="agentmem-bench-export-") as tmp:
                work = Path(tmp)
                (work / "project").mkdir()
                mem, sid = build_session(work / "mem", work / "project", n)
                with mem:
                    page = work / "page.html"
                    export = functools.partial(mem.sessions.export, sid)
                    html_s = _median_seconds(args.runs, functools.partial(export, page))
                    json_s = _median_seconds(
                        args.runs, functools.partial(export, work / "page.json")
                    )
                row = f"{n:>9,} {page.stat().st_size / 1e6:>8.1f} {html_s:>14.2f} {json_s:>14.2f}"
                if browser is not None:
                    figures: dict[str, list[float]] = {}
                    for _ in range(args.runs):
                        loaded = browser.load(page)
                        if loaded.problems() or loaded.fetched():
                            print(f"warning: {loaded.problems()} {loaded.fetched()}")
                        for key, value in browser.timings().items():
                            figures.setdefault(key, []).append(value)
                    med = {k: statistics.median(v) for k, v in figures.items()}
                    row += (
                        f" {med['first_contentful_paint']:>7.0f} {med['dom_content_loaded']:>7.0f}"
                        f" {med['load']:>8.0f} {med['layout_ms']:>10.0f}"
                    )
                rows.append(row)
    finally:
        if browser is not None:
            browser.close()
    print(header)
    for row in rows:
        print(row)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
