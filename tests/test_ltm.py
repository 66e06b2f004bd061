"""LongTermMemory: dedup/confirmation, rendering, pruning, persistence rules, many writers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)
from profiles import scaled

import agentmem
from agentmem.errors import FormatVersionError, InvalidArgumentError
from agentmem.ltm import KINDS, LongTermMemory, entry_id, normalise
from agentmem.tokens import HeuristicCounter

GOLDEN = Path(__file__).parent / "golden"
CHILD = Path(__file__).parent / "_ltm_writer_child.py"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _ltm(tmp_path: Path, clock: Clock | None = None) -> LongTermMemory:
    return LongTermMemory(tmp_path / "ltm.json", clock=clock or Clock())


# ---------------------------------------------------------------- dedup and confirmation


def test_near_duplicates_confirm_instead_of_duplicating(tmp_path: Path) -> None:
    clock = Clock()
    ltm = _ltm(tmp_path, clock)
    first = ltm.add_discovery("Tests run with pytest -q.", confidence=0.6, examples=["a.py"])
    clock.now += 100
    again = ltm.add_discovery("PYTEST -q: tests, run with", confidence=0.5, examples=["b.py"])
    assert again.id == first.id
    assert len(ltm.discoveries()) == 1
    assert again.applications == 2
    assert again.first_seen == first.first_seen
    assert again.last_confirmed == first.first_seen + 100
    assert again.confidence == pytest.approx(0.6 + 0.4 * 0.1)
    assert again.examples == ("a.py", "b.py")
    assert again.text == "Tests run with pytest -q."  # the first wording is kept


def test_different_words_are_different_entries(tmp_path: Path) -> None:
    ltm = _ltm(tmp_path)
    ltm.add_discovery("tests run with pytest")
    ltm.add_discovery("tests run with unittest")
    ltm.add_pattern("tests run with pytest")  # same text, other kind
    assert len(ltm) == 3


def test_solutions_are_keyed_by_error_and_solution(tmp_path: Path) -> None:
    ltm = _ltm(tmp_path)
    a = ltm.add_solution("ImportError: foo", "pip install foo")
    b = ltm.add_solution("importerror foo", "Pip install foo!")
    c = ltm.add_solution("ImportError: foo", "add foo to PYTHONPATH")
    assert a.id == b.id != c.id
    assert [s.applications for s in ltm.solutions()] == [2, 1]


def test_confirm_by_id_and_unknown_id(tmp_path: Path) -> None:
    ltm = _ltm(tmp_path)
    entry = ltm.add_pattern("use atomic writes", confidence=0.5)
    confirmed = ltm.confirm(entry.id)
    assert confirmed.applications == 2
    assert confirmed.confidence == pytest.approx(0.55)
    with pytest.raises(InvalidArgumentError, match="no long-term memory entry"):
        ltm.confirm("dis-000000000000")


_words = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzé0123456789", min_size=1, max_size=8),
    min_size=1,
    max_size=6,
)


@settings(max_examples=scaled(60))
@given(words=_words, data=st.data())
def test_spelling_variants_share_one_id(words: list[str], data: st.DataObject) -> None:
    order = data.draw(st.permutations(words))
    joiner = data.draw(st.sampled_from([" ", ", ", " - ", "; ", "  "]))
    tail = data.draw(st.sampled_from(["", ".", "!", "?", " :"]))
    upper = data.draw(st.booleans())
    variant = joiner.join(order) + tail
    variant = variant.upper() if upper else variant
    assert normalise(variant) == normalise(" ".join(words))
    assert entry_id("discoveries", variant) == entry_id("discoveries", " ".join(words))
    assert normalise(normalise(variant)) == normalise(variant)


@settings(max_examples=scaled(40))
@given(a=_words, b=_words)
def test_different_word_multisets_get_different_ids(a: list[str], b: list[str]) -> None:
    same = sorted(w.casefold() for w in a) == sorted(w.casefold() for w in b)
    assert (
        entry_id("code_patterns", " ".join(a)) == entry_id("code_patterns", " ".join(b))
    ) == same


class LTMMachine(RuleBasedStateMachine):
    """LongTermMemory against a plain dict: key -> id, applications, examples, confidence, time."""

    ids = Bundle("ids")

    @initialize()
    def setup(self) -> None:
        import tempfile

        self.dir = Path(tempfile.mkdtemp(prefix="ltm-sm-"))
        self.clock = Clock()
        self.ltm = LongTermMemory(self.dir / "ltm.json", clock=self.clock)
        self.model: dict[str, dict[str, Any]] = {}

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "dir", "/nonexistent"), ignore_errors=True)

    def _confirm(self, row: dict[str, Any], confidence: float) -> None:
        base = max(row["confidence"], confidence)
        row["confidence"] = min(1.0, base + (1.0 - base) * 0.1)
        row["applications"] += 1
        row["last"] = self.clock.now

    @rule(
        target=ids,
        kind=st.sampled_from(KINDS),
        words=st.lists(
            st.sampled_from(["alpha", "beta", "gamma", "delta"]), min_size=1, max_size=3
        ),
        upper=st.booleans(),
        example=st.sampled_from(["", "a.py", "b.py"]),
        confidence=st.sampled_from([0.1, 0.5, 0.9]),
        days=st.integers(min_value=0, max_value=40),
    )
    def add(
        self,
        kind: str,
        words: list[str],
        upper: bool,
        example: str,
        confidence: float,
        days: int,
    ) -> str:
        self.clock.now += days * 86400 + 1
        text = " ".join(reversed(words)) + "."
        entry = self.ltm.add(
            kind,
            text.upper() if upper else text,
            confidence=confidence,
            examples=[example] if example else [],
        )
        key = f"{kind}|{' '.join(sorted(words))}"
        row = self.model.get(key)
        if row is None:
            row = {"id": entry.id, "applications": 1, "examples": [], "confidence": confidence}
            row["last"] = self.clock.now
            self.model[key] = row
        else:
            self._confirm(row, confidence)
        if example and example not in row["examples"]:
            row["examples"].append(example)
        assert entry.id == row["id"]
        return entry.id

    @rule(entry=ids)
    def confirm(self, entry: str) -> None:
        self.clock.now += 1
        row = next((r for r in self.model.values() if r["id"] == entry), None)
        if row is None:
            with pytest.raises(InvalidArgumentError):
                self.ltm.confirm(entry)
        else:
            self._confirm(row, 0.0)
            assert self.ltm.confirm(entry).applications == row["applications"]

    @rule(entry=consumes(ids))
    def remove(self, entry: str) -> None:
        existed = any(r["id"] == entry for r in self.model.values())
        assert self.ltm.remove(entry) is existed
        self.model = {k: r for k, r in self.model.items() if r["id"] != entry}

    @rule(days=st.integers(min_value=0, max_value=60), floor=st.sampled_from([0.0, 0.3, 0.6]))
    def prune(self, days: int, floor: float) -> None:
        cutoff = self.clock.now - days * 86400.0
        gone = {k for k, r in self.model.items() if r["last"] < cutoff or r["confidence"] < floor}
        removed = self.ltm.prune(max_age_days=days, min_confidence=floor)
        assert {e.id for e in removed} == {self.model[k]["id"] for k in gone}
        self.model = {k: r for k, r in self.model.items() if k not in gone}

    @rule()
    def reopen(self) -> None:
        self.ltm = LongTermMemory(self.dir / "ltm.json", clock=self.clock)

    @invariant()
    def matches_model(self) -> None:
        if not hasattr(self, "ltm"):
            return
        got = {
            e.id: (e.applications, list(e.examples), e.confidence, e.last_confirmed)
            for e in self.ltm.entries()
        }
        want = {
            r["id"]: (r["applications"], r["examples"], r["confidence"], r["last"])
            for r in self.model.values()
        }
        assert got == want


LTMMachine.TestCase.settings = settings(max_examples=scaled(25), stateful_step_count=15)
TestLTMMachine = LTMMachine.TestCase


# ---------------------------------------------------------------- reading, rendering, pruning


def test_render_for_prompt_limits_and_order(tmp_path: Path) -> None:
    clock = Clock()
    ltm = _ltm(tmp_path, clock)
    for i in range(20):
        clock.now += 1
        ltm.add_discovery(f"fact {i:02d}", confidence=0.5)
        ltm.add_solution(f"error {i:02d}", f"fix {i:02d}", confidence=0.5)
        ltm.add_pattern(f"pattern {i:02d}", confidence=0.5)
    ltm.add_discovery("most trusted fact", confidence=0.99)
    text = ltm.render_for_prompt(max_tokens=100_000)
    lines = text.splitlines()
    facts = [ln for ln in lines if ln.startswith(("- fact", "- most"))]
    assert len(facts) == 15
    assert facts[0].startswith("- most trusted fact")
    assert facts[1].startswith("- fact 19")  # then newest first
    assert sum(ln.startswith("- error") for ln in lines) == 15
    assert sum(ln.startswith("- pattern") for ln in lines) == 10
    assert "- error 19 -> fix 19" in text
    assert not any("workflow" in ln for ln in lines)


@settings(max_examples=scaled(40))
@given(cap=st.integers(min_value=0, max_value=400))
def test_render_never_exceeds_the_token_cap(cap: int, tmp_path_factory: Any) -> None:
    ltm = LongTermMemory(None)
    for i in range(12):
        ltm.add_discovery(f"discovery number {i} " + "word " * i)
        ltm.add_pattern(f"pattern number {i}")
    counter = HeuristicCounter()
    text = ltm.render_for_prompt(cap, token_counter=counter)
    assert counter.count_text(text) <= cap
    if cap >= 200:
        assert text.count("\n- ") >= 3  # a generous cap does render entries


def test_render_empty_and_bad_cap() -> None:
    ltm = LongTermMemory(None)
    assert ltm.render_for_prompt() == ""
    with pytest.raises(InvalidArgumentError, match="max_tokens"):
        ltm.render_for_prompt(-1)


def test_prune_by_age_and_confidence(tmp_path: Path) -> None:
    clock = Clock()
    ltm = _ltm(tmp_path, clock)
    old = ltm.add_discovery("old fact", confidence=0.9)
    weak = ltm.add_discovery("weak fact", confidence=0.1)
    clock.now += 91 * 86400
    fresh = ltm.add_discovery("fresh fact", confidence=0.9)
    removed = ltm.prune(max_age_days=90, min_confidence=0.3)
    assert {e.id for e in removed} == {old.id, weak.id}
    assert [e.id for e in ltm.discoveries()] == [fresh.id]


def test_a_dry_run_prune_names_what_prune_removes_and_writes_nothing(tmp_path: Path) -> None:
    # The CLI's `memory prune --dry-run` used a copy of this rule with its own clock.
    clock = Clock()
    ltm = _ltm(tmp_path, clock)
    old = ltm.add_discovery("old fact", confidence=0.9)
    ltm.add_discovery("weak fact", confidence=0.1)
    clock.now += 91 * 86400
    ltm.add_discovery("fresh fact", confidence=0.9)
    before = (tmp_path / "ltm.json").read_bytes()
    would = ltm.prune(max_age_days=90, min_confidence=0.3, dry_run=True)
    assert (tmp_path / "ltm.json").read_bytes() == before
    assert len(ltm.discoveries()) == 3
    assert old.id in {e.id for e in would}
    removed = ltm.prune(max_age_days=90, min_confidence=0.3)
    assert sorted(e.id for e in would) == sorted(e.id for e in removed)
    with pytest.raises(InvalidArgumentError):
        ltm.prune(dry_run="yes")  # type: ignore[arg-type]


def test_search_remove_stats(tmp_path: Path) -> None:
    ltm = _ltm(tmp_path)
    a = ltm.add_discovery("database lives in sessions.sqlite")
    ltm.add_solution("database is locked", "close the other session")
    ltm.add_pattern("keep modules short")
    found = ltm.search("database locked")
    assert [e.kind for e in found] == ["problem_solutions", "discoveries"]
    assert ltm.search("   ") == []
    assert ltm.remove(a.id) is True
    assert ltm.remove(a.id) is False
    stats = ltm.stats()
    assert stats["total"] == 2
    assert stats["by_kind"]["discoveries"] == 0
    assert stats["by_kind"]["problem_solutions"] == 1
    assert (stats["applications"], stats["confirmations"]) == (2, 0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m.add("nope", "x"), "kind must be one of"),
        (lambda m: m.add_discovery(""), "at least one word"),
        (lambda m: m.add_discovery("...!!"), "at least one word"),
        (lambda m: m.add_discovery("x" * 5000), "longer than"),
        (lambda m: m.add_discovery(42), "must be a string"),
        (lambda m: m.add_discovery("fact", confidence=1.5), "confidence"),
        (lambda m: m.add_discovery("fact", confidence=True), "confidence"),
        (lambda m: m.add_discovery("fact", examples="a.py"), "examples"),
        (lambda m: m.add_discovery("fact", examples=[3]), "examples"),
        (lambda m: m.add_solution("error", ""), "solution"),
        (lambda m: m.prune(max_age_days=-1), "max_age_days"),
        (lambda m: m.search(None), "query"),
    ],
)
def test_bad_arguments_raise_invalid_argument(tmp_path: Path, call: Any, match: str) -> None:
    ltm = _ltm(tmp_path)
    ltm.add_discovery("kept fact")
    before = (tmp_path / "ltm.json").read_bytes()
    with pytest.raises(InvalidArgumentError, match=match):
        call(ltm)
    assert (tmp_path / "ltm.json").read_bytes() == before


# ---------------------------------------------------------------- persistence rules


def test_golden_v1_loads(tmp_path: Path) -> None:
    shutil.copy(GOLDEN / "ltm-v1.json", tmp_path / "ltm.json")
    ltm = _ltm(tmp_path)
    by_kind = {e.kind: e for e in ltm.entries()}
    assert set(by_kind) == set(KINDS)
    d = by_kind["discoveries"]
    assert d.text == "The test suite runs with `pytest -q` from the repository root."
    assert (d.confidence, d.first_seen, d.last_confirmed, d.applications) == (
        0.9,
        1700000000.0,
        1700086400.0,
        3,
    )
    assert d.examples == ("tests/conftest.py",)
    assert d.id == entry_id("discoveries", d.text)  # ids are re-derived, stable
    s = by_kind["problem_solutions"]
    assert s.detail == "Install in editable mode: pip install -e ."
    assert by_kind["workflows"].applications == 7
    assert by_kind["context_rules"].detail == "agentmem/"
    assert ltm.problems == []


def test_golden_clio_file_loads_and_converts(tmp_path: Path) -> None:
    shutil.copy(GOLDEN / "ltm-clio.json", tmp_path / "ltm.json")
    ltm = _ltm(tmp_path)
    got = {(e.kind, e.text, e.detail, e.confidence, e.applications) for e in ltm.entries()}
    assert got == {
        ("discoveries", "Config stored in CLIO::Core::Config", "", 1.0, 1),
        ("discoveries", "Sessions live in .clio/sessions", "", 0.6, 1),
        ("problem_solutions", "syntax error near }", "Check for missing semicolon", 0.5, 5),
        ("code_patterns", "Use error_result() not die", "", 0.9, 1),
        ("workflows", "read -> analyze -> fix -> test", "", 0.95, 10),
        ("failures", "Changed API without updating callers", "grep for callers first", 0.5, 2),
        ("context_rules", "use strict/warnings", "lib/CLIO/Core/", 0.5, 1),
        ("context_rules", "POD required", "lib/CLIO/Core/", 0.5, 1),
    }
    sessions = next(e for e in ltm.discoveries() if "Sessions" in e.text)
    assert (sessions.first_seen, sessions.last_confirmed) == (1699990200, 1699995000)
    # The next write converts the file to the current format, losing nothing.
    ltm.add_discovery("a new fact")
    data = json.loads((tmp_path / "ltm.json").read_text())
    assert (data["format"], data["version"]) == ("agentmem.ltm", 1)
    assert len(data["entries"]) == 9
    assert len(_ltm(tmp_path)) == 9


def test_corrupt_file_is_moved_aside_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "ltm.json").write_bytes(b'{"format": "agentmem.ltm", "vers')
    ltm = _ltm(tmp_path)
    with caplog.at_level("WARNING", logger="agentmem.storage"):
        assert ltm.discoveries() == []
    assert len(ltm.moved_aside) == 1
    assert ltm.moved_aside[0].read_bytes() == b'{"format": "agentmem.ltm", "vers'
    assert ".corrupt-" in ltm.moved_aside[0].name
    assert "moved aside" in caplog.text
    ltm.add_discovery("starts afresh")
    assert [e.text for e in _ltm(tmp_path).discoveries()] == ["starts afresh"]
    assert ltm.moved_aside[0].exists()  # never overwritten


def test_a_reader_never_moves_aside_a_file_a_writer_just_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader reads torn-looking bytes, then a writer replaces the file with a good one
    # before the reader acts: the reader must re-check under the lock, not move the good file.
    writer = _ltm(tmp_path)
    writer.add_discovery("the good fact")
    real = Path.read_bytes
    calls = []

    def stale_first(self: Path) -> bytes:
        calls.append(self)
        return b"{corrupt" if len(calls) == 1 else real(self)

    monkeypatch.setattr(Path, "read_bytes", stale_first)
    reader = _ltm(tmp_path)
    assert [e.text for e in reader.discoveries()] == ["the good fact"]
    assert reader.moved_aside == [] and list(tmp_path.glob("*.corrupt-*")) == []
    assert len(calls) == 2


def test_newer_version_is_refused_and_left_untouched(tmp_path: Path) -> None:
    raw = json.dumps({"format": "agentmem.ltm", "version": 99, "entries": []}).encode()
    (tmp_path / "ltm.json").write_bytes(raw)
    ltm = _ltm(tmp_path)
    with pytest.raises(FormatVersionError):
        ltm.add_discovery("fact")
    with pytest.raises(FormatVersionError):
        ltm.discoveries()
    assert (tmp_path / "ltm.json").read_bytes() == raw
    assert list(tmp_path.glob("*.corrupt-*")) == []


def test_unreadable_entries_are_kept_verbatim(tmp_path: Path) -> None:
    bad = {"kind": "discoveries", "text": "x", "confidence": 7}
    doc = {"format": "agentmem.ltm", "version": 1, "entries": [bad, "junk"]}
    (tmp_path / "ltm.json").write_text(json.dumps(doc))
    ltm = _ltm(tmp_path)
    ltm.add_discovery("good fact")
    assert len(ltm.problems) == 2
    data = json.loads((tmp_path / "ltm.json").read_text())
    assert data["unreadable"] == [bad, "junk"]
    assert [e["text"] for e in data["entries"]] == ["good fact"]


def test_reader_sees_other_writers(tmp_path: Path) -> None:
    a, b = _ltm(tmp_path), _ltm(tmp_path)
    assert a.discoveries() == []
    b.add_discovery("written by b")
    assert [e.text for e in a.discoveries()] == ["written by b"]
    a.add_discovery("written by b!")  # confirms on top of b's write, not a stale copy
    assert b.discoveries()[0].applications == 2


def test_lock_lives_under_locks(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "root")
    mem.ltm.add_discovery("fact")
    assert (tmp_path / "root" / "locks" / "ltm.json.lock").exists()
    mem.close()


@pytest.mark.parametrize("workers", [6])
def test_concurrent_processes_lose_nothing(tmp_path: Path, workers: int) -> None:
    unique, rounds = 8, 12
    root, go = tmp_path / "root", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(root), str(w), str(unique), str(rounds), str(go)],
            env=env,
        )
        for w in range(workers)
    ]
    time.sleep(0.3)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * workers
    mem = agentmem.Memory(root=root)
    facts = {e.text: e for e in mem.ltm.discoveries()}
    assert set(facts) == {
        f"fact w{w}-n{i} from a worker" for w in range(workers) for i in range(unique)
    }
    assert all(e.applications == 1 for e in facts.values())
    patterns = mem.ltm.patterns()
    assert len(patterns) == 3
    assert sorted(p.applications for p in patterns) == [workers * rounds] * 3
    for p in patterns:
        assert set(p.examples) == {f"w{w}/{r}" for w in range(workers) for r in (0, 1)}
    assert mem.ltm.problems == []
    mem.close()


_KILL_CHILD = """
import sys
from agentmem.ltm import LongTermMemory
ltm = LongTermMemory(sys.argv[1])
i = 0
while True:
    ltm.add_discovery(f"fact k{i} recorded", examples=[f"e{i}"])
    print(i, flush=True)
    i += 1
"""


@pytest.mark.parametrize("after", [5, 17, 40])
def test_kill_9_mid_write_leaves_every_returned_add(tmp_path: Path, after: int) -> None:
    path = tmp_path / "ltm.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", _KILL_CHILD, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    with child.stdout:
        returned = [int(child.stdout.readline()) for _ in range(after)]
        child.kill()
        child.wait(timeout=30)
        returned += [int(line) for line in child.stdout.read().split()]
    ltm = LongTermMemory(path)
    texts = {e.text for e in ltm.discoveries()}
    assert {f"fact k{i} recorded" for i in returned} <= texts
    assert len(texts) in (len(returned), len(returned) + 1)  # the add in flight may have landed
    assert ltm.problems == [] and ltm.moved_aside == []
    assert [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name] == []


# ---------------------------------------------------------------- sessions


def test_sessions_inject_ltm_once_per_open(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "r", token_counter=HeuristicCounter())
    mem.ltm.add_discovery("the answer is forty two")
    s = mem.session(session_id="s1", context_window=8192)
    s.start_task("hello")
    system = s.context()[0]
    assert system["role"] == "system"
    assert "the answer is forty two" in system["content"]
    mem.ltm.add_discovery("added mid session")
    assert s.context()[0] == system  # not per turn: the prefix stays stable
    _, _ = s.context(provider="anthropic")
    s.close()
    resumed = mem.session(session_id="s1")
    assert "added mid session" in resumed.context()[0]["content"]  # on resume
    resumed.close()
    mem.close()


@pytest.mark.parametrize("flags", [{"ltm_enabled": False}, {"incognito": True}])
def test_no_injection_without_ltm_or_in_incognito(tmp_path: Path, flags: dict[str, Any]) -> None:
    root = tmp_path / "r"
    agentmem.Memory(root=root).ltm.add_discovery("secret project fact")
    mem = agentmem.Memory(root=root, token_counter=HeuristicCounter(), **flags)
    mem.ltm.add_discovery("secret project fact")
    s = mem.session(context_window=8192)
    s.start_task("hello")
    assert s.ltm_prompt == ""
    assert all("secret project fact" not in str(m.get("content")) for m in s.context())
    s.close()
    mem.close()


def test_ltm_text_is_scrubbed_before_storage(tmp_path: Path) -> None:
    key = "sk-proj-" + "Ab3dEf6hIj9lMn2pQr5tUv8x"
    mem = agentmem.Memory(root=tmp_path / "r")
    mem.ltm.add_solution("401 from the API", f"export OPENAI_API_KEY={key}")
    assert key not in (tmp_path / "r" / "ltm.json").read_text()
    assert "[REDACTED:" in mem.ltm.solutions()[0].detail
    mem.close()
    raw = agentmem.Memory(root=tmp_path / "raw", scrub_secrets=False)
    raw.ltm.add_discovery(f"key is {key}")
    assert key in (tmp_path / "raw" / "ltm.json").read_text()
    raw.close()
