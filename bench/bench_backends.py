"""Benchmark the two backends side by side: SQLite (embedded) and PostgreSQL.

A benchmark, not a test: it prints figures and ratios measured in one run on
this machine and asserts nothing about wall-clock time.

    python bench/bench_backends.py                        # 1k and 100k messages, 1 and 8 writers
    python bench/bench_backends.py --sizes 1000 10000 --seconds 3   # quicker
    python bench/bench_backends.py --dsn postgresql://me@db/bench  # a server of yours
    python bench/bench_backends.py --backends postgresql --baseline ../main  # A/B in one run

Without ``--dsn`` (or ``AGENTMEM_BENCH_PG_DSN``) a throwaway PostgreSQL cluster
is started with ``scripts/pg_test_cluster.py`` and removed at the end (fsync on,
``shared_buffers`` 512MB by default, ``--shared-buffers``: enough to cache the
100k-message store's index, about 300 MB, as a production server caches its
working set; with the tests' 32MB a recall at 100k reads ~260 blocks from the OS
cache and grows with the store); every size gets a fresh database. Everything
goes through the public facade, ``Memory(root=..., backend=...)``, with the
default durability (an append is committed, and fsynced, when it returns).

For each backend and store size (messages in 100-message sessions, seeded in
bulk, not measured; on PostgreSQL followed by ``VACUUM ANALYZE``, what
autovacuum does soon after a bulk load) it measures, per call:

* **append**: ``s.append(message)`` on an open session, p50 and p95 of 200;
* **context**: ``s.context()`` with a 32k-token window after each append, p50;
* **recall**: ``mem.recall(query)`` over the whole store, p50 and p95 of 40
  queries (words common in the store, words rare in it, a phrase);
* **LTM add**: ``mem.ltm.add_discovery(text)`` of a new entry, p50 of 50;

and, with 1 and 8 writer processes each appending to its own session for
``--seconds`` seconds, the aggregate append throughput and the CPU time an append
took: in the writer processes, and (for a cluster the bench started, read from
``/proc``) in the server's processes. It prints the ratios
the issue targets: largest/smallest size (flat = bounded per-call cost) and
8 writers / 1 writer, and what bounds the latter: one writer's wall time per
append over its CPU time (client and server), times the cores, is how far more
writers can scale before the cores are busy.

On PostgreSQL, when ``pgbench`` is found (beside the cluster's binaries, in
``/usr/lib/postgresql/*/bin`` or on ``PATH``), the same figures for the peer:
pgbench committing a one-row INSERT of a 60-word text per transaction, 1 and 8
clients (``-j 2``), on the same server with the same fsync (run as ``postgres``
when we are root). ``--baseline DIR`` measures the append throughput with the
``agentmem`` of another checkout too (the code before a change), in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import agentmem
from agentmem import Memory

HERE = Path(__file__).resolve().parent
_PG_DATA: Path | None = None  # the data directory of our throwaway cluster (its CPU is read)
WINDOW = 32_000
PER_SESSION = 100
COMMON = [
    "file",
    "test",
    "error",
    "run",
    "function",
    "value",
    "return",
    "import",
    "module",
    "change",
]
WORDS = [
    *COMMON,
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "parser",
    "buffer",
    "socket",
    "thread",
    "cursor",
    "schema",
    "widget",
    "kernel",
    "vector",
    "matrix",
    "tensor",
    "cache",
    "queue",
    "stack",
    "heap",
    "graph",
    "token",
    "lexer",
    "router",
    "handler",
    "loader",
]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _message(rng: random.Random, i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"{_sentence(rng, rng.randint(8, 40))} #{i}"}


def _queries(rng: random.Random) -> list[str]:
    common = [" ".join(rng.sample(COMMON, 2)) for _ in range(15)]
    rare = [" ".join(rng.sample(WORDS[10:], 2)) for _ in range(15)]
    phrase = [_sentence(rng, 4) for _ in range(10)]
    return common + rare + phrase


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ------------------------------------------------------------------ the server


def _cluster_script() -> ModuleType:
    path = HERE.parent / "scripts" / "pg_test_cluster.py"
    spec = importlib.util.spec_from_file_location("pg_test_cluster", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _server(dsn: str | None, wanted: bool, shared_buffers: str) -> Iterator[str | None]:
    """The admin DSN of a server (ours, thrown away at the end, unless one was given)."""
    if not wanted:
        yield None
        return
    if dsn:
        yield dsn
        return
    script = _cluster_script()
    if script.find_bin() is None:
        print("no PostgreSQL binaries: only SQLite is measured", file=sys.stderr)
        yield None
        return
    cluster = script.start(shared_buffers=shared_buffers)
    global _PG_DATA
    _PG_DATA = Path(cluster.data)
    try:
        yield cluster.dsn
    finally:
        _PG_DATA = None
        script.stop(cluster.directory)


def _uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq DSN (``Memory(backend=)`` takes a URI)."""
    import urllib.parse

    import psycopg

    if dsn.startswith(("postgresql://", "postgres://")):
        return dsn
    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port", "password") if p.get(k)}
    user = urllib.parse.quote(str(p.get("user") or ""))
    return f"postgresql://{user}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


@contextlib.contextmanager
def _database(admin: str) -> Iterator[str]:
    import psycopg

    name = f"agentmem_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _uri(str(psycopg.conninfo.make_conninfo(admin, dbname=name)))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def _memory_args(backend: str, admin: str | None) -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="agentmem-bench-") as tmp:
        root = Path(tmp) / "mem"
        if backend == "sqlite":
            yield {"root": str(root), "working_dir": tmp}
            return
        assert admin is not None
        with _database(admin) as dsn:
            yield {"root": str(root), "working_dir": tmp, "backend": dsn}


# ------------------------------------------------------------------ per-call figures


def _seed(mem: Memory, n: int, rng: random.Random) -> None:
    for s in range(max(1, n // PER_SESSION)):
        info = mem.sessions.create(model="gpt-4o", context_window=WINDOW, name=f"seed-{s}")
        writer = mem.sessions.writer(info.id)
        rows = [_message(rng, i) for i in range(PER_SESSION)]
        writer.on_append([agentmem.normalize_message(m)[0] for m in rows])


def _settle(dsn: str) -> None:
    """``VACUUM ANALYZE`` after the bulk seed: what autovacuum does within a minute of a
    bulk load. Without it the first measurements run beside autovacuum's own pass over
    the new rows (on 2 cores: append p50 x6, recall p95 x20 at 100k) and, before its
    ANALYZE, on plans made without statistics."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def measure(backend: str, admin: str | None, size: int) -> dict[str, float]:
    rng = random.Random(size)
    with _memory_args(backend, admin) as args:
        mem = Memory(**args)
        try:
            t0 = time.perf_counter()
            _seed(mem, size, rng)
            seeded = time.perf_counter() - t0
            if "backend" in args:
                _settle(args["backend"])
            s = mem.session(context_window=WINDOW)
            appends, contexts = [], []
            for i in range(200):
                msg = _message(rng, i)
                appends.append(_timed(lambda msg=msg: s.append(msg)))
                contexts.append(_timed(s.context))
            recalls = [_timed(lambda q=q: mem.recall(q)) for q in _queries(rng)]
            ltm = [
                _timed(lambda i=i: mem.ltm.add_discovery(f"{_sentence(rng, 8)} fact {i}"))
                for i in range(50)
            ]
            s.close()
        finally:
            mem.close()
    return {
        "seed_s": seeded,
        "append_p50": _pct(appends, 0.5),
        "append_p95": _pct(appends, 0.95),
        "context_p50": _pct(contexts, 0.5),
        "recall_p50": _pct(recalls, 0.5),
        "recall_p95": _pct(recalls, 0.95),
        "ltm_p50": _pct(ltm, 0.5),
    }


# ------------------------------------------------------------------ concurrent writers


_GRACE_S = 0.5


def _writer(args: dict[str, Any], seconds: float) -> tuple[int, float]:
    """Open a new session, say ``ready`` on stdout, read the start time from stdin, and
    append from then for ``seconds``: ``(appends, CPU seconds)``."""
    rng = random.Random(os.getpid())
    mem = Memory(**args)
    s = mem.session(context_window=WINDOW)
    print("ready", flush=True)
    start = float(sys.stdin.readline())
    while time.time() < start:
        time.sleep(0.001)
    done = 0
    deadline = start + seconds
    cpu = time.process_time()
    while time.time() < deadline:
        s.append(_message(rng, done))
        done += 1
    cpu = time.process_time() - cpu
    # Keep appending a little longer: the server's CPU is read at the deadline, and a
    # backend exiting while /proc is read would have its time counted nowhere.
    n = done
    while time.time() < deadline + _GRACE_S:
        s.append(_message(rng, n))
        n += 1
    s.close()
    mem.close()
    return done, cpu


def _spawn_writer(args: dict[str, Any], seconds: float, code: str | None) -> subprocess.Popen[str]:
    """A writer process running this script with ``--writer``; ``code``: the directory
    its ``agentmem`` is imported from (another checkout), else this process's."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = code
    job = json.dumps({"args": args, "seconds": seconds})
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--writer", job],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _server_cpu() -> float | None:
    """CPU seconds used so far by our cluster's processes (Linux ``/proc``), or ``None``."""
    if _PG_DATA is None or not Path("/proc/stat").exists():
        return None
    postmaster = int((_PG_DATA / "postmaster.pid").read_text().split()[0])
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(pid) == postmaster:  # its own time, and that of its children that exited
            total += sum(int(f) for f in fields[11:15])
        elif int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


def throughput(
    backend: str, admin: str | None, writers: int, seconds: float, code: str | None = None
) -> tuple[float, float, float | None]:
    """Appends per second, all writers together, and the CPU milliseconds an append
    took in the writer processes and (our own cluster's) in the server. ``code``: run
    the writers with the ``agentmem`` of that directory (see ``--baseline``)."""
    with _memory_args(backend, admin) as args:
        Memory(**args).close()  # create and migrate once, outside the timed part
        procs = [_spawn_writer(args, seconds, code) for _ in range(writers)]
        for p in procs:  # every process started, connected, its session created
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a writer process failed to start")
        start = time.time() + 0.2
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"{start}\n")
            p.stdin.flush()
        time.sleep(max(0.0, start - time.time()))
        before = _server_cpu() if backend == "postgresql" else None
        time.sleep(seconds)
        after = _server_cpu() if backend == "postgresql" else None
        outs = [p.communicate(timeout=seconds + 120)[0] for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"a writer process failed: {[p.returncode for p in procs]}")
        results = [json.loads(out.strip().splitlines()[-1]) for out in outs]
    total = sum(done for done, _ in results)
    client = sum(cpu for _, cpu in results) * 1000 / max(1, total)
    server = None if before is None or after is None else (after - before) * 1000 / max(1, total)
    return total / seconds, client, server


# ------------------------------------------------------------------ the peer: pgbench

PGBENCH_TABLE = "CREATE TABLE pgbench_append (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL)"


def _pgbench() -> Path | None:
    """pgbench: beside our cluster's binaries, in /usr/lib/postgresql/*/bin, or on PATH."""
    found = [
        *([] if _PG_DATA is None else [_cluster_script().find_bin()]),
        *sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True),
    ]
    for directory in found:
        if directory is not None and (Path(directory) / "pgbench").exists():
            return Path(directory) / "pgbench"
    on_path = shutil.which("pgbench")
    return None if on_path is None else Path(on_path)


def pgbench(
    admin: str, clients: int, seconds: float, words: int = 60
) -> tuple[float, float, float | None]:
    """The peer of an append: pgbench committing a one-row INSERT of ``words`` words of
    text per transaction, ``clients`` connections (``-j 2``), on the same server with
    the same fsync. ``(transactions per second, pgbench's CPU ms per transaction, the
    server's CPU ms per transaction (our cluster))``."""
    import psycopg

    binary = _pgbench()
    assert binary is not None
    text = _sentence(random.Random(words), words).replace("'", "''")
    with tempfile.TemporaryDirectory(prefix="agentmem-pgbench-") as tmp, _database(admin) as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(PGBENCH_TABLE)
        script = Path(tmp) / "append.sql"
        script.write_text(f"INSERT INTO pgbench_append (body) VALUES ('{text}');\n")
        os.chmod(tmp, 0o755)  # pgbench runs as the server's user when we are root
        os.chmod(script, 0o644)
        command = [str(binary), "-n", "-f", str(script), "-c", str(clients)]
        command += ["-j", str(min(2, clients)), "-T", str(max(1, round(seconds))), dsn]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        before = _server_cpu()
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp)
        after = _server_cpu()
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed ({done.returncode}): {done.stderr.strip()}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("tps = ")]
    processed = [line for line in done.stdout.splitlines() if "transactions actually" in line]
    if not lines or not processed:
        raise RuntimeError(f"cannot read pgbench's output:\n{done.stdout}")
    tps = float(lines[-1].split()[2])
    count = max(1, int(processed[-1].split(":")[1].split()[0]))
    client = (now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime) * 1000 / count
    server = None if before is None or after is None else (after - before) * 1000 / count
    return tps, client, server


# ------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000])
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--shared-buffers",
        default="512MB",
        help="PostgreSQL's buffer cache for the bench's own cluster (default 512MB: it holds "
        "the 100k-message store's index, as a production server's cache holds its working set)",
    )
    parser.add_argument("--dsn", default=os.environ.get("AGENTMEM_BENCH_PG_DSN"))
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also measure the append throughput with the agentmem of this checkout "
        "(the code before a change: A/B in one run, on the same server)",
    )
    parser.add_argument("--writer", help=argparse.SUPPRESS)  # a writer process's job
    opts = parser.parse_args()
    if opts.writer:
        job = json.loads(opts.writer)
        print(json.dumps(_writer(job["args"], job["seconds"])))
        return
    print(
        f"agentmem {agentmem.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cores"
    )
    with _server(opts.dsn, "postgresql" in opts.backends, opts.shared_buffers) as admin:
        backends = [b for b in opts.backends if b == "sqlite" or admin is not None]
        per_call: dict[tuple[str, int], dict[str, float]] = {}
        for backend in backends:
            for size in opts.sizes:
                per_call[backend, size] = figures = measure(backend, admin, size)
                print(
                    f"{backend:>10} {size:>7} messages: "
                    + "  ".join(f"{k}={v:.2f}" for k, v in figures.items()),
                    flush=True,
                )
        print()
        keys = ["append_p50", "append_p95", "context_p50", "recall_p50", "recall_p95", "ltm_p50"]
        print(
            f"{'ms per call':<14}"
            + "".join(f"{b[:6]} {s:>7}  " for b in backends for s in opts.sizes)
        )
        for key in keys:
            row = "".join(f"{per_call[b, s][key]:>14.2f}  " for b in backends for s in opts.sizes)
            print(f"{key:<14}{row}")
        lo, hi = min(opts.sizes), max(opts.sizes)
        if lo != hi:
            print(f"\nratio {hi}/{lo} messages (1.0 = flat):")
            for backend in backends:
                print(
                    f"  {backend:>10}: "
                    + "  ".join(
                        f"{k}={per_call[backend, hi][k] / max(per_call[backend, lo][k], 1e-9):.2f}"
                        for k in keys
                    )
                )
        print("\nappend throughput, writer processes each on its own session:")
        cores = os.cpu_count() or 1
        codes: list[tuple[str, str | None]] = [("", None)]
        if opts.baseline:
            codes.insert(0, (f" [baseline {opts.baseline}]", str(Path(opts.baseline).resolve())))
        for backend in backends:
            for label, code in codes:
                runs = {w: throughput(backend, admin, w, opts.seconds, code) for w in opts.writers}
                _print_scaling(f"{backend}{label}", runs, cores, "writers", "append")
        if "postgresql" in backends and admin is not None and _pgbench() is not None:
            print(
                "\npeer on the same server: pgbench, a one-row INSERT of a 60-word text per "
                "transaction (one commit, fsynced):"
            )
            peer = {c: pgbench(admin, c, opts.seconds) for c in opts.writers}
            _print_scaling("pgbench", peer, cores, "clients", "transaction")


def _print_scaling(
    name: str,
    runs: dict[int, tuple[float, float, float | None]],
    cores: int,
    unit: str,
    what: str,
) -> None:
    """Rates of ``runs`` (by process count) with their ratio to the fewest's, the CPU
    per call, and what bounds the scaling: one process's wall time per call over its
    CPU time (client and server), times the cores."""
    fewest = min(runs)
    base = runs[fewest][0]
    for n, (rate, client, server) in runs.items():
        cpu = f"client {client:.3f} ms" + ("" if server is None else f", server {server:.3f} ms")
        print(
            f"  {name:>10}: {n} {unit} {rate:8.0f}/s (x{rate / base:.2f}); CPU per {what}: {cpu}",
            flush=True,
        )
    rate, client, server = runs[fewest]
    if server is not None and rate > 0:
        wall = 1000 / rate * fewest
        ratio = wall / (client + server)
        print(
            f"  {name:>10}: {fewest} {unit}: wall {wall:.3f} ms per {what} / CPU "
            f"{client + server:.3f} ms = {ratio:.2f}; CPU ceiling of the scaling on "
            f"{cores} cores: x{cores * ratio:.2f}"
        )


if __name__ == "__main__":
    main()
