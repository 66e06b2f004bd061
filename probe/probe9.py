"""Independent outside probe of issue 9's stores (public API only). Not collected by pytest.

Run: .venv/bin/python probe/probe9.py [case ...]   (cases: c1 c2 c3 c4 c5 c6)
Prints one PASS/FAIL line per check and a summary.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import agentmem
from agentmem.errors import AgentMemError
from agentmem.semantic import LocalMemoryClient

PY = sys.executable
RESULTS: list[tuple[str, str, str]] = []
RNG = random.Random(int(os.environ.get("PROBE_SEED", "9")))


def check(case: str, name: str, ok: bool, detail: str = "") -> None:
    RESULTS.append((case, name, "PASS" if ok else "FAIL"))
    print(f"{'PASS' if ok else 'FAIL'} {case} {name} {detail}", flush=True)


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


def storage_log() -> Capture:
    cap = Capture()
    lg = logging.getLogger("agentmem.storage")
    lg.propagate = False
    lg.addHandler(cap)
    lg.setLevel(logging.DEBUG)
    return cap


def drop_log(cap: Capture) -> None:
    logging.getLogger("agentmem.storage").removeHandler(cap)


def readable_texts(path: Path) -> set[str]:
    """What plain sqlite3 can read from a (damaged) copy, row by row."""
    out: set[str] = set()
    if not path.exists():  # (killed before it was created)
        return out
    tmp = Path(tempfile.mkdtemp()) / "copy.sqlite"
    shutil.copy(path, tmp)
    for suffix in ("-wal",):
        if Path(str(path) + suffix).exists():
            shutil.copy(str(path) + suffix, str(tmp) + suffix)
    try:
        conn = sqlite3.connect(tmp)
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        try:
            top = conn.execute("SELECT max(docid) FROM memories").fetchone()[0] or 0
        except Exception:  # noqa: BLE001
            top = 2000
        for docid in range(1, top + 1):
            try:
                row = conn.execute("SELECT text FROM memories WHERE docid=?", (docid,)).fetchone()
            except Exception:  # noqa: BLE001
                continue
            if row is not None and isinstance(row[0], str):
                out.add(row[0])
        conn.close()
    except Exception:  # noqa: BLE001
        pass
    return out


# ----------------------------------------------------------------------------- case 1


def build_db(root: Path, n: int) -> set[str]:
    texts = {f"memory number {i} about topic {i % 7} " + "x" * (i % 50) for i in range(n)}
    with LocalMemoryClient(root, durability="normal") as c:
        for t in sorted(texts):
            c.add(t, user_id="u", infer=False)
    return {" ".join(t.split()) for t in texts}


def open_and_judge(
    case: str, name: str, root: Path, original: set[str], readable: set[str]
) -> None:
    _open_and_judge(case, name, root, original, readable, retry=True)


def _open_and_judge(
    case: str, name: str, root: Path, original: set[str], readable: set[str], retry: bool = False
) -> None:
    cap = storage_log()
    try:
        try:
            c = LocalMemoryClient(root)
        except AgentMemError as exc:
            check(case, name, False, f"open raised {type(exc).__name__}: {exc}")
            return
        except Exception as exc:  # noqa: BLE001
            check(case, name, False, f"open raised RAW {type(exc).__name__}: {exc}")
            return
        try:

            def attempt(op):  # a call that repaired the store says "try again": once
                try:
                    return op()
                except AgentMemError as exc:
                    if "try again" not in str(exc):
                        raise
                    return op()

            try:
                got = {r.memory for r in attempt(lambda: c.get_all(user_id="u", limit=100000))}
                attempt(lambda: c.search("memory topic", user_id="u", limit=50))
                attempt(lambda: c.add("probe fresh fact", user_id="u", infer=False))
                got = {r.memory for r in attempt(lambda: c.get_all(user_id="u", limit=100000))} - {
                    "probe fresh fact"
                }
            except AgentMemError as exc:
                if retry and "reopen" in str(exc):
                    # the documented contract for damage met after open: reopen, it is
                    # checked whole and recovered
                    c.close()
                    drop_log(cap)
                    _open_and_judge(case, name + " (reopened)", root, original, readable)
                    return
                check(case, name, False, f"after open: {type(exc).__name__}: {exc}")
                return
            except Exception as exc:  # noqa: BLE001
                check(case, name, False, f"after open RAW {type(exc).__name__}: {exc}")
                return
            rec = c.recovery
            if rec is None:
                missing = original - got
                # byte flips may alter stored text without SQLite noticing: allow altered rows;
                # a row left out must be reported (client.problems / the storage log)
                reported = [p for p in getattr(c, "problems", []) if "memory row" in p]
                ok = len(got) + len(reported) >= len(original) and (
                    not missing or len(got) + len(reported) == len(original)
                )
                check(
                    case,
                    name,
                    ok,
                    f"no recovery; rows {len(got)}/{len(original)} missing={len(missing)} reported_rows={len(reported)} problems={getattr(c, 'problems', [])[:2]}",
                )
            else:
                moved = Path(rec.moved_to).exists()
                logged = any(str(rec.moved_to) in m for m in cap.records)
                lost = (readable & original) - got
                # (a commit whose add was killed before it could report may be there too)
                ok = moved and logged and not lost and (readable & original) <= got
                check(
                    case,
                    name,
                    ok,
                    f"recovered ({rec.outcome}); moved={moved} logged={logged} rows {len(got)}/{len(original)} readable={len(readable & original)} lost_readable={len(lost)}",
                )
        finally:
            c.close()
    finally:
        drop_log(cap)


def c1(base: Path) -> None:
    src = base / "src"
    original = build_db(src, int(os.environ.get("PROBE_ROWS", "300")))
    db = src / "semantic.sqlite"
    size = db.stat().st_size
    variants = []
    for k in range(6):
        n = RNG.randrange(1, size)
        variants.append((f"truncate@{n}", "trunc", n))
    variants += [("truncate@100", "trunc", 100), ("truncate@4096", "trunc", 4096)]
    for k in range(int(os.environ.get("PROBE_PAGE1_FLIPS", "12"))):
        n = RNG.randrange(0, 4096)
        variants.append((f"flip page1 @{n}", "flip", n))
    for k in range(int(os.environ.get("PROBE_LATER_FLIPS", "25"))):
        n = RNG.randrange(4096, size)
        variants.append((f"flip later @{n}", "flip", n))
    for k in range(int(os.environ.get("PROBE_ZERO_PAGES", "10"))):
        n = RNG.randrange(1, size // 4096)
        variants.append((f"zero page {n + 1}", "zero", n * 4096))
    variants += [("garbage", "garbage", 0), ("empty", "empty", 0), ("directory", "dir", 0)]
    for label, kind, arg in variants:
        root = base / f"v{len(list(base.iterdir()))}"
        shutil.copytree(src, root)
        path = root / "semantic.sqlite"
        for comp in ("-wal", "-shm"):
            Path(str(path) + comp).unlink(missing_ok=True)
        if kind == "trunc":
            with open(path, "r+b") as f:
                f.truncate(arg)
        elif kind == "flip":
            data = bytearray(path.read_bytes())
            data[arg] ^= 0xFF
            path.write_bytes(bytes(data))
        elif kind == "zero":
            data = bytearray(path.read_bytes())
            data[arg : arg + 4096] = bytes(4096)
            path.write_bytes(bytes(data))
        elif kind == "garbage":
            path.write_bytes(os.urandom(20000))
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "dir":
            path.unlink()
            path.mkdir()
            (path / "x").write_text("keep")
        readable = readable_texts(path) if kind in ("trunc", "flip", "zero") else set()
        if kind == "dir":
            cap = storage_log()
            try:
                c = LocalMemoryClient(root)
                check(
                    "c1",
                    label,
                    c.recovery is not None and (path / "x").exists() or path.is_dir(),
                    f"opened; recovery={c.recovery}",
                )
                c.close()
            except AgentMemError as exc:
                check(
                    "c1", label, (path / "x").exists(), f"clear error {type(exc).__name__}: {exc}"
                )
            except Exception as exc:  # noqa: BLE001
                check("c1", label, False, f"RAW {type(exc).__name__}: {exc}")
            drop_log(cap)
            continue
        open_and_judge("c1", label, root, set() if kind == "empty" else original, readable)
    # damaged WAL after kill -9 during adds
    for k in range(3):
        root = base / f"wal{k}"
        out = kill_adder(root, delay=RNG.uniform(0.8, 2.0), embed=False)
        wal = root / "semantic.sqlite-wal"
        if wal.exists() and wal.stat().st_size > 32 + 4096:
            data = bytearray(wal.read_bytes())
            pos = RNG.randrange(32, len(data))
            data[pos] ^= 0x55
            wal.write_bytes(bytes(data))
        readable = readable_texts(root / "semantic.sqlite")
        open_and_judge(
            "c1",
            f"damaged -wal after kill -9 #{k} ({len(out)} adds returned)",
            root,
            set(out),
            readable,
        )


# ----------------------------------------------------------------------------- case 2

ADDER = r"""
import sys, time
from agentmem.semantic import LocalMemoryClient
root, embed = sys.argv[1], sys.argv[2] == "1"
class Emb:
    def embed(self, texts):
        return [[float(len(t) % 7), float(sum(map(ord, t)) % 11), 1.0] for t in texts]
c = LocalMemoryClient(root, embedder=Emb() if embed else None)
i = 0
while True:
    text = f"kill fact {i} " + "y" * (i % 30)
    c.add(text, user_id="u", metadata={"i": i}, infer=False)
    sys.stdout.write(" ".join(text.split()) + "\n"); sys.stdout.flush()
    i += 1
"""


def kill_adder(root: Path, delay: float, embed: bool) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    out_path = root.parent / (root.name + ".out")
    with open(out_path, "w") as out:
        p = subprocess.Popen([PY, "-c", ADDER, str(root), "1" if embed else "0"], stdout=out)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
    return [line for line in out_path.read_text().splitlines() if line]


FINISHER = r"""
import sys, json
from pathlib import Path
import agentmem
from agentmem.testing import ScriptedLLM, tool_call
root, me, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for r in range(rounds):
    topics = ["shared", f"own-{me}"]
    replies = []
    for t in topics:
        body = "".join(f"{t} writer={me} round={r} line={k}\n" for k in range(40)) + f"END {me} {r}\n"
        replies.append(tool_call("write_memory", {"topic": t, "content": body}))
    replies.append({"role": "assistant", "content": "done"})
    llm = ScriptedLLM(replies)
    mem = agentmem.Memory(root=root, working_dir=str(Path(root).parent), llm=llm, durability="normal")
    with mem.session(name=f"s{me}-{r}") as s:
        s.append({"role": "system", "content": "agent"})
        s.start_task("do it")
        for i in range(11):
            s.append({"role": "assistant", "content": f"step {i}"})
            s.record_usage(10, 1)
        s.finish_task()
        res = s.last_memory_update
        print(json.dumps({"round": r, "ran": res.ran, "error": res.error, "topics": list(getattr(res, "topics", []) or [])}), flush=True)
    mem.close() if hasattr(mem, "close") else None
"""


def topic_whole(content: str) -> bool:
    lines = content.splitlines()
    if not lines or not lines[-1].startswith("END "):
        return False
    _, me, r = lines[-1].split()
    return len(lines) == 41 and all(f"writer={me} round={r}" in ln for ln in lines[:-1])


def c2(base: Path) -> None:
    for embed in (False, True):
        for k in range(3):
            root = base / f"add{embed}{k}"
            returned = kill_adder(root, RNG.uniform(0.5, 2.5), embed)
            cap = storage_log()
            try:
                c = LocalMemoryClient(root)
                got = {r.memory for r in c.get_all(user_id="u", limit=100000)}
                c.search("kill fact", user_id="u")
                lost = set(returned) - got
                check(
                    "c2",
                    f"kill -9 adder embed={embed} #{k}",
                    not lost and c.recovery is None,
                    f"returned={len(returned)} stored={len(got)} lost={len(lost)} recovery={c.recovery}",
                )
                c.close()
            except Exception as exc:  # noqa: BLE001
                check(
                    "c2", f"kill -9 adder embed={embed} #{k}", False, f"{type(exc).__name__}: {exc}"
                )
            drop_log(cap)
    for k in range(4):
        root = base / f"fin{k}" / ".agentmem"
        root.parent.mkdir(parents=True)
        p = subprocess.Popen(
            [PY, "-c", FINISHER, str(root), "0", "50"], stdout=subprocess.PIPE, text=True
        )
        time.sleep(RNG.uniform(2.0, 5.0))
        p.send_signal(signal.SIGKILL)
        outs = p.communicate()[0]
        done = [json.loads(x) for x in outs.splitlines() if x.strip()]
        try:
            mem = agentmem.Memory(root=str(root), working_dir=str(root.parent))
            infos = mem.topics.list()
            names = {i.topic for i in infos}
            bad = [n for n in names if n not in ("shared", "own-0")]
            whole = all(topic_whole(mem.topics.read(n) or "") for n in names)
            last_round = max((d["round"] for d in done), default=-1)
            ok_last = last_round < 0 or all(
                int((mem.topics.read(n) or "END 0 -1").splitlines()[-1].split()[2]) >= last_round
                for n in ("shared", "own-0")
            )
            with mem.session(name="after") as s:
                s.context()
            check(
                "c2",
                f"kill -9 finish_task #{k}",
                not bad and whole and ok_last,
                f"rounds done={len(done)} topics={sorted(names)} whole={whole} newest_kept={ok_last}",
            )
        except Exception as exc:  # noqa: BLE001
            check("c2", f"kill -9 finish_task #{k}", False, f"{type(exc).__name__}: {exc}")


# ----------------------------------------------------------------------------- case 3

RACER = r"""
import sys
from agentmem.semantic import LocalMemoryClient
root, me = sys.argv[1], int(sys.argv[2])
c = LocalMemoryClient(root, durability="normal")
for k in range(25):
    c.add(f"shared fact {k}", user_id="u", infer=False)
    c.add(f"Shared   FACT {k}", user_id="u", infer=False)
    c.add(f"own fact {me} {k}", user_id="u", infer=False)
c.close()
"""


def c3(base: Path) -> None:
    root = base / "race"
    n = 6
    procs = [
        subprocess.Popen([PY, "-c", RACER, str(root), str(i)], stderr=subprocess.PIPE, text=True)
        for i in range(n)
    ]
    errs = [p.communicate()[1] for p in procs]
    codes = [p.returncode for p in procs]
    c = LocalMemoryClient(root)
    got = [r.memory for r in c.get_all(user_id="u", limit=100000)]
    c.close()
    folded = [g.casefold() for g in got]
    dups = len(folded) - len(set(folded))
    expected = {f"shared fact {k}" for k in range(25)} | {
        f"own fact {i} {k}" for i in range(n) for k in range(25)
    }
    lost = expected - set(folded)
    check(
        "c3",
        "6 racing adders",
        codes == [0] * n and not dups and not lost,
        f"rc={codes} rows={len(got)} dups={dups} lost={len(lost)} {[e[-300:] for e in errs if e][:1]}",
    )
    root = base / "racefin" / ".agentmem"
    root.parent.mkdir(parents=True)
    procs = [
        subprocess.Popen(
            [PY, "-c", FINISHER, str(root), str(i), "3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    res = [p.communicate() for p in procs]
    codes = [p.returncode for p in procs]
    results = [json.loads(x) for o, _ in res for x in o.splitlines() if x.strip()]
    mem = agentmem.Memory(root=str(root), working_dir=str(root.parent))
    names = {i.topic for i in mem.topics.list()}
    want = {"shared"} | {f"own-{i}" for i in range(4)}
    whole = all(topic_whole(mem.topics.read(t) or "") for t in names)
    own_final = all(
        (mem.topics.read(f"own-{i}") or "").rstrip().endswith(f"END {i} 2") for i in range(4)
    )
    errors = [r["error"] for r in results if r.get("error")]
    check(
        "c3",
        "4 racing finish_task",
        codes == [0] * 4 and names == want and whole and own_final,
        f"rc={codes} topics={sorted(names)} whole={whole} own_final={own_final} errors={errors[:2]} {[e[-300:] for _, e in res if e][:1]}",
    )


# ----------------------------------------------------------------------------- case 4


def c4(base: Path) -> None:
    root = base / "hand" / ".agentmem"
    mem = agentmem.Memory(root=str(root), working_dir=str(root.parent))
    mem.topics.write("good", "a good topic\n")
    d = root / "memories"
    (d / "badutf8.md").write_bytes(b"caf\xe9 \xff\xfe text\n")
    (d / "binary.md").write_bytes(bytes(range(256)) * 4)
    (d / "huge.md").write_bytes(b"line of text\n" * (10 * 1024 * 1024 // 13))
    outside = base / "hand" / "secret.txt"
    outside.write_text("OUTSIDE SECRET\n")
    (d / "link.md").symlink_to(outside)
    (d / "adir.md").mkdir()
    (d / ".tmp-good.md.partial").write_text("temp")
    cap = storage_log()
    try:
        infos = mem.topics.list()
        names = {i.topic for i in infos}
        check("c4", "list does not crash", True, f"listed={sorted(names)}")
        read_ok = True
        for n in names:
            try:
                txt = mem.topics.read(n)
                if n == "link" and txt and "OUTSIDE" in txt:
                    read_ok = False
            except AgentMemError:
                pass
        check("c4", "symlink outside root not read", read_ok and "link" not in names or read_ok)
        t0 = time.time()
        text = mem.topics.render_for_prompt(2000)
        check(
            "c4",
            "render_for_prompt",
            "OUTSIDE" not in text and time.time() - t0 < 10,
            f"{len(text)} chars {time.time() - t0:.1f}s",
        )
        with mem.session(name="next") as s:
            payload = s.context()
            sysmsg = json.dumps(payload)[:100000]
            check("c4", "next session system prompt", "OUTSIDE" not in sysmsg)
        skipped_reported = any(("adir" in m or "link" in m) for m in cap.records) or any(
            hasattr(mem.topics, a) for a in ("skipped", "problems", "unreadable")
        )
        check(
            "c4",
            "skipped entries are reported (log or attribute)",
            skipped_reported,
            f"log={cap.records[:4]} attrs={[a for a in dir(mem.topics) if not a.startswith('_')]}",
        )
        txt = mem.topics.read("badutf8")
        check(
            "c4",
            "invalid utf-8 reported not silently replaced",
            any("badutf8" in m for m in cap.records),
            f"read={txt!r}",
        )
    except Exception as exc:  # noqa: BLE001
        check("c4", "hand-edited topics", False, f"{type(exc).__name__}: {exc}")
    finally:
        drop_log(cap)


# ----------------------------------------------------------------------------- case 5


def expect_error(name: str, fn, *, arg: str | None, root: Path | None = None) -> None:
    before = None
    if root is not None:
        c = LocalMemoryClient(root)
        before = sorted(r.memory for r in c.get_all(user_id="u", limit=10000))
        c.close()
    try:
        fn()
    except AgentMemError as exc:
        named = arg is None or arg in str(exc)
        check("c5", name, named, f"{type(exc).__name__}: {str(exc)[:120]}")
    except Exception as exc:  # noqa: BLE001
        check("c5", name, False, f"RAW {type(exc).__name__}: {str(exc)[:120]}")
    else:
        check("c5", name, False, "accepted")
    if root is not None:
        c = LocalMemoryClient(root)
        after = sorted(r.memory for r in c.get_all(user_id="u", limit=10000))
        c.close()
        if before != after:
            check("c5", name + " stores nothing", False, f"{before} -> {after}")


def c5(base: Path) -> None:
    from agentmem.adapters import openai_llm
    from agentmem.semantic import Mem0Client, SemanticMemoryExtension

    root = base / "bad"
    c = LocalMemoryClient(root)
    c.add("kept fact", user_id="u", infer=False)
    c.close()

    def with_client(f):
        def run():
            cl = LocalMemoryClient(root)
            try:
                f(cl)
            finally:
                cl.close()

        return run

    cases = [
        ("add messages=int", lambda c: c.add(5, user_id="u"), "messages"),
        ("add messages=[int]", lambda c: c.add([5], user_id="u"), "messages"),
        (
            "add messages=[{role:user, content:5}]",
            lambda c: c.add([{"role": "user", "content": 5}], user_id="u"),
            "content",
        ),
        ("add user_id=None", lambda c: c.add("x", user_id=None), "user_id"),
        ("add user_id=''", lambda c: c.add("x", user_id=""), "user_id"),
        ("add user_id=5", lambda c: c.add("x", user_id=5), "user_id"),
        ("add agent_id=[]", lambda c: c.add("x", user_id="u", agent_id=[]), "agent_id"),
        ("add metadata=list", lambda c: c.add("x", user_id="u", metadata=[1]), "metadata"),
        (
            "add metadata=NaN",
            lambda c: c.add("x", user_id="u", metadata={"a": float("nan")}),
            "metadata",
        ),
        (
            "add metadata=set value",
            lambda c: c.add("x", user_id="u", metadata={"a": {1}}),
            "metadata",
        ),
        (
            "add metadata non-str key",
            lambda c: c.add("x", user_id="u", metadata={1: "a"}),
            "metadata",
        ),
        ("add infer='yes'", lambda c: c.add("x", user_id="u", infer="yes"), "infer"),
        ("search query=None", lambda c: c.search(None, user_id="u"), "query"),
        ("search limit=0", lambda c: c.search("x", user_id="u", limit=0), "limit"),
        (
            "search threshold=NaN",
            lambda c: c.search("x", user_id="u", threshold=float("nan")),
            "threshold",
        ),
        ("search threshold='a'", lambda c: c.search("x", user_id="u", threshold="a"), "threshold"),
        (
            "search filters unhashable",
            lambda c: c.search("x", user_id="u", filters={"a": [1]}),
            "filters",
        ),
        (
            "search filters=list",
            lambda c: c.search("x", user_id="u", filters=[("a", 1)]),
            "filters",
        ),
        ("get_all user_id=None", lambda c: c.get_all(user_id=None), "user_id"),
        ("get_all limit=-1", lambda c: c.get_all(user_id="u", limit=-1), "limit"),
        (
            "get_all filters unhashable",
            lambda c: c.get_all(user_id="u", filters={"a": {"b": 1}}),
            "filters",
        ),
        ("delete id=None", lambda c: c.delete(None), "memory_id"),
        ("delete id=missing", lambda c: c.delete("nope"), None),
        ("delete_all user_id=''", lambda c: c.delete_all(user_id=""), "user_id"),
        ("delete_all user_id=None", lambda c: c.delete_all(user_id=None), "user_id"),
    ]
    for name, f, arg in cases:
        expect_error(name, with_client(f), arg=arg, root=root)
    # accepted sensibly (scores are in [0, 1]; a limit is an upper bound)
    cl = LocalMemoryClient(root)
    for name, f in [
        (
            "search limit=1e30 accepted",
            lambda: (
                [r.memory for r in cl.search("kept", user_id="u", limit=10**30)] == ["kept fact"]
            ),
        ),
        (
            "search threshold=-1 accepted (no floor)",
            lambda: (
                [r.memory for r in cl.search("kept", user_id="u", threshold=-1)] == ["kept fact"]
            ),
        ),
    ]:
        try:
            check("c5", name, f())
        except Exception as exc:  # noqa: BLE001
            check("c5", name, False, repr(exc))
    try:
        ev = cl.add("bad \ud800 text", user_id="u2", infer=False)
        check(
            "c5",
            "lone surrogate stored as U+FFFD, readable back",
            [r.memory for r in cl.get_all(user_id="u2")] == [ev[0]["memory"]],
        )
    except AgentMemError as exc:
        check("c5", "lone surrogate refused clearly", True, str(exc))
    cl.close()
    # huge limit accepted sensibly?
    cl = LocalMemoryClient(root)
    try:
        r = cl.get_all(user_id="u", limit=10**9)
        check(
            "c5",
            "get_all limit=1e9 accepted",
            [x.memory for x in r] == ["kept fact"],
            str([x.memory for x in r]),
        )
    except AgentMemError as exc:
        check("c5", "get_all limit=1e9 refused clearly", "limit" in str(exc))
    except Exception as exc:  # noqa: BLE001
        check("c5", "get_all limit=1e9", False, f"RAW {exc!r}")
    cl.close()
    mem = agentmem.Memory(root=str(base / "m5" / ".agentmem"), working_dir=str(base / "m5"))
    cl = LocalMemoryClient(mem)
    ext_cases = [
        ("ext client=None", lambda: SemanticMemoryExtension(client=None, user_id="u"), "client"),
        (
            "ext client=object()",
            lambda: SemanticMemoryExtension(client=object(), user_id="u"),
            "client",
        ),
        ("ext user_id=''", lambda: SemanticMemoryExtension(client=cl, user_id=""), "user_id"),
        ("ext user_id=None", lambda: SemanticMemoryExtension(client=cl, user_id=None), "user_id"),
        (
            "ext prefetch_k=-1",
            lambda: SemanticMemoryExtension(client=cl, user_id="u", prefetch_k=-1),
            "prefetch_k",
        ),
        (
            "ext threshold=NaN",
            lambda: SemanticMemoryExtension(client=cl, user_id="u", threshold=float("nan")),
            "threshold",
        ),
        (
            "session extensions=[object()]",
            lambda: mem.session(name="x", extensions=[object()]),
            "extension",
        ),
        (
            "session extensions=object()",
            lambda: mem.session(name="y", extensions=object()),
            "extensions",
        ),
        ("Mem0Client file://", lambda: Mem0Client("file:///etc/passwd"), "url"),
        ("Mem0Client bad url", lambda: Mem0Client("not a url"), "url"),
        ("Mem0Client None", lambda: Mem0Client(None), "url"),
        ("Mem0Client timeout=-1", lambda: Mem0Client("http://127.0.0.1:9", timeout=-1), "timeout"),
        ("openai_llm(None, '')", lambda: openai_llm(None, ""), None),
        (
            "openai_llm(obj, '')",
            lambda: openai_llm(
                type(
                    "C",
                    (),
                    {
                        "chat": type(
                            "X",
                            (),
                            {
                                "completions": type(
                                    "Y", (), {"create": staticmethod(lambda **k: None)}
                                )()
                            },
                        )()
                    },
                )(),
                "",
            ),
            "model",
        ),
    ]
    for name, f, arg in ext_cases:
        expect_error(name, f, arg=arg)
    cl.close()


# ----------------------------------------------------------------------------- case 6

STEPPER = r"""
import sys, json
from agentmem.semantic import LocalMemoryClient
root = sys.argv[1]
ops = json.loads(sys.stdin.read())
c = LocalMemoryClient(root, durability="normal")
out = []
for op in ops:
    kind = op[0]
    try:
        if kind == "add":
            ev = c.add(op[2], user_id=op[1], metadata={"k": op[3]}, infer=False)
            out.append([e["event"] for e in ev] and [[e["event"], e["id"]] for e in ev])
        elif kind == "get_all":
            out.append(sorted([r.memory, r.id, r.metadata.get("k")] for r in c.get_all(user_id=op[1], limit=1000, filters=op[2])))
        elif kind == "search":
            out.append(sorted([r.memory, r.score] for r in c.search(op[2], user_id=op[1], limit=1000)))
        elif kind == "delete":
            c.delete(op[1]); out.append("ok")
        elif kind == "delete_all":
            out.append(c.delete_all(user_id=op[1]))
    except Exception as exc:
        out.append(["ERR", type(exc).__name__, str(exc)])
c.close()
print(json.dumps(out))
"""

WORDS = ["apple", "banana", "cherry", "deploy", "staging", "python", "coffee"]


def c6(base: Path) -> None:
    fails = 0
    for seq in range(6):
        root = base / f"model{seq}"
        model: dict[str, tuple[str, str, int]] = {}  # id -> (user, text, k)
        rng = random.Random(seq)
        for batch in range(4):
            ops = []
            for _ in range(rng.randrange(5, 15)):
                r = rng.random()
                user = rng.choice(["u1", "u2"])
                if r < 0.45:
                    text = " ".join(rng.sample(WORDS, 2))
                    if rng.random() < 0.3:
                        text = "  " + text.upper() + " "
                    ops.append(["add", user, text, rng.randrange(3)])
                elif r < 0.6:
                    ops.append(["get_all", user, rng.choice([None, {"k": rng.randrange(3)}])])
                elif r < 0.75:
                    ops.append(["search", user, rng.choice(WORDS)])
                elif r < 0.9:
                    ops.append(["delete", rng.choice(list(model) or ["missing"])])
                else:
                    ops.append(["delete_all", user])
                # we need ids from adds to continue; simple: run each op alone when it's a delete
            p = subprocess.run(
                [PY, "-c", STEPPER, str(root)],
                input=json.dumps(ops),
                capture_output=True,
                text=True,
            )
            if p.returncode != 0:
                check("c6", f"seq{seq} batch{batch}", False, p.stderr[-300:])
                fails += 1
                break
            results = json.loads(p.stdout)
            for op, res in zip(ops, results, strict=True):
                kind = op[0]
                if kind == "add":
                    norm = " ".join(op[2].split())
                    existing = [
                        i
                        for i, (u, t, _) in model.items()
                        if u == op[1] and t.casefold() == norm.casefold()
                    ]
                    ev = res
                    if existing:
                        ok = ev == [["NOOP", existing[0]]]
                    else:
                        ok = len(ev) == 1 and ev[0][0] == "ADD"
                        if ok:
                            model[ev[0][1]] = (op[1], norm, op[3])
                elif kind == "get_all":
                    want = sorted(
                        [t, i, k]
                        for i, (u, t, k) in model.items()
                        if u == op[1] and (op[2] is None or op[2]["k"] == k)
                    )
                    ok = res == want
                elif kind == "search":
                    want = sorted(
                        t
                        for i, (u, t, _) in model.items()
                        if u == op[1] and op[2] in t.casefold().split()
                    )
                    ok = sorted(x[0] for x in res) == want and all(x[1] == 1.0 for x in res)
                elif kind == "delete":
                    if op[1] in model:
                        ok = res == "ok"
                        del model[op[1]]
                    else:
                        ok = (
                            isinstance(res, list)
                            and res[0] == "ERR"
                            and res[1] == "MemoryNotFoundError"
                        )
                else:
                    gone = [i for i, (u, _, _) in model.items() if u == op[1]]
                    ok = res == len(gone)
                    for i in gone:
                        del model[i]
                if not ok:
                    fails += 1
                    check("c6", f"seq{seq} batch{batch} {op}", False, f"got {res}")
    check("c6", "random ops vs model across restarts", fails == 0, f"fails={fails}")


def main() -> None:
    cases = sys.argv[1:] or ["c1", "c2", "c3", "c4", "c5", "c6"]
    base = Path(tempfile.mkdtemp(prefix="probe9-"))
    for name in cases:
        d = base / name
        d.mkdir()
        t0 = time.time()
        try:
            globals()[name](d)
        except Exception as exc:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            check(name, "probe case crashed", False, f"{type(exc).__name__}: {exc}")
        print(f"# {name} took {time.time() - t0:.1f}s", flush=True)
    fails = [r for r in RESULTS if r[2] == "FAIL"]
    print(f"SUMMARY {len(RESULTS) - len(fails)} PASS, {len(fails)} FAIL")
    if not os.environ.get("PROBE_KEEP"):
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("kept", base)


if __name__ == "__main__":
    main()
