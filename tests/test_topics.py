"""TopicStore: the memory updater's topic files (names, atomic writes, scrubbing, the limit)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from profiles import scaled

from agentmem.errors import ConfigurationError, InvalidArgumentError, UnsafePathError
from agentmem.scrub import scrub_secrets
from agentmem.tokens import HeuristicCounter
from agentmem.topics import TRUNCATION_MARKER, TopicStore, cut_to_tokens

CHILD = Path(__file__).with_name("_topic_writer_child.py")
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
def store(tmp_path: Path) -> TopicStore:
    return TopicStore(tmp_path / "root" / "memories", scrubber=scrub_secrets)


def test_write_read_list(store: TopicStore, tmp_path: Path) -> None:
    first = store.write("deploy", "# Deploy\nrun `make release`\n")
    assert first.created and not first.truncated
    assert (tmp_path / "root" / "memories" / "deploy.md").read_text() == (
        "# Deploy\nrun `make release`\n"
    )
    again = store.write("deploy.md", "# Deploy\nrun `make ship`\n")  # suffix taken as the file's
    assert again.topic == "deploy" and not again.created
    assert store.read("deploy") == "# Deploy\nrun `make ship`\n"
    assert store.read("missing") is None
    store.write("testing", "CI=1")
    infos = store.list()
    assert [i.topic for i in infos] == ["deploy", "testing"]
    assert infos[0].size == len(b"# Deploy\nrun `make ship`\n")
    assert abs(infos[1].updated_at - time.time()) < 60
    assert (tmp_path / "root" / "locks" / "memories.lock").exists()


def test_list_ignores_foreign_files(store: TopicStore) -> None:
    assert store.list() == []  # no directory yet
    store.write("a", "x")
    assert store.directory is not None
    (store.directory / "notes.txt").write_text("not a topic")
    (store.directory / ".hidden.md").write_text("not a safe name")
    (store.directory / "sub.md").mkdir()
    assert [i.topic for i in store.list()] == ["a"]


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a/b",
        "a\\b",
        "..",
        "x..y",
        "/etc/passwd",
        "a\x00b",
        "a\nb",
        ".hidden",
        "~x",
        "CON",
        "c:x",
        "x" * 129,
        "trailing.",
        "session_progress",
        7,
        None,
    ],
)
def test_unsafe_names_are_refused(store: TopicStore, name: object) -> None:
    with pytest.raises(UnsafePathError, match="topic"):
        store.write(name, "x")  # type: ignore[arg-type]
    with pytest.raises(UnsafePathError):
        store.read(name)  # type: ignore[arg-type]
    assert store.list() == []


def test_symlinked_directory_cannot_lead_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "memories").symlink_to(outside)
    store = TopicStore(tmp_path / "root" / "memories")
    with pytest.raises(UnsafePathError):
        store.write("x", "y")
    assert list(outside.iterdir()) == []


def test_content_must_be_text(store: TopicStore) -> None:
    with pytest.raises(InvalidArgumentError, match="content"):
        store.write("x", b"bytes")  # type: ignore[arg-type]


def test_secrets_are_scrubbed(store: TopicStore, tmp_path: Path) -> None:
    store.write("ci", f"GITHUB_TOKEN={TOKEN}")
    assert TOKEN not in (tmp_path / "root" / "memories" / "ci.md").read_text()
    assert store.read("ci") == "GITHUB_TOKEN=[REDACTED:github_token]"


def test_limit_cuts_at_a_line_boundary(tmp_path: Path) -> None:
    store = TopicStore(tmp_path / "memories", max_tokens_per_file=100)
    lines = [f"fact {i}: the deploy script needs flag --f{i}" for i in range(200)]
    result = store.write("big", "\n".join(lines))
    stored = store.read("big")
    assert stored is not None
    marker = TRUNCATION_MARKER.format(limit=100)
    assert result.truncated and stored.endswith(marker)
    assert result.tokens_before > 100 >= result.tokens_after
    assert result.tokens_after == HeuristicCounter().count_text(stored)
    kept = stored[: -len(marker)].split("\n")
    assert kept == lines[: len(kept)] and 0 < len(kept) < 200
    small = store.write("small", "short")
    assert not small.truncated and small.tokens_before == small.tokens_after


def test_limit_setting_is_checked(tmp_path: Path) -> None:
    for bad in (0, 10, "100", 100.0, True):
        with pytest.raises(ConfigurationError, match="max_tokens_per_file"):
            TopicStore(tmp_path, max_tokens_per_file=bad)  # type: ignore[arg-type]


@given(
    text=st.text(st.characters(codec="utf-8"), max_size=600),
    limit=st.integers(min_value=64, max_value=200),
)
def test_cut_fits_and_keeps_a_beginning(text: str, limit: int) -> None:
    counter = HeuristicCounter()
    marker = TRUNCATION_MARKER.format(limit=limit)
    cut = cut_to_tokens(text, limit, counter, marker)
    assert counter.count_text(cut) <= limit
    assert cut.endswith(marker)
    kept = cut[: -len(marker)]
    assert text.startswith(kept)
    # At a line boundary whenever a whole first line could have been kept.
    rest = text[len(kept) :]
    assert rest == "" or rest.startswith("\n") or "\n" not in kept


def test_incognito_keeps_topics_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = TopicStore(None, max_tokens_per_file=64)
    assert store.write("a", "one").created
    big = store.write("b", "word " * 500)
    assert big.truncated
    assert store.read("a") == "one"
    assert [i.topic for i in store.list()] == ["a", "b"]
    assert list(tmp_path.iterdir()) == []


def test_render_for_prompt_newest_first_within_budget(store: TopicStore) -> None:
    assert store.render_for_prompt(1000) == ""
    store.write("old", "old fact")
    store.write("big", "y " * 2000)
    store.write("new", "new fact")
    assert store.directory is not None
    for age, name in enumerate(("new", "big", "old")):
        stamp = time.time() - 100 * age
        os.utime(store.directory / f"{name}.md", (stamp, stamp))
    text = store.render_for_prompt(200)
    assert text.index("## new") < text.index("## old")
    assert "## big" not in text  # does not fit; the older small one still does
    assert HeuristicCounter().count_text(text) <= 200
    with pytest.raises(InvalidArgumentError):
        store.render_for_prompt(-1)


class TopicMachine(RuleBasedStateMachine):
    """The store against a dict: what was written is what is read and listed."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.tmp = tempfile.TemporaryDirectory()
        self.store = TopicStore(Path(self.tmp.name) / "memories", max_tokens_per_file=64)
        self.model: dict[str, str] = {}

    @rule(
        topic=st.sampled_from(["a", "b", "deploy", "c.d"]),
        text=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80),
    )
    def write(self, topic: str, text: str) -> None:
        result = self.store.write(topic, text)
        assert result.created == (topic not in self.model)
        # The limit is generous for short texts: what fits is stored as given.
        if not result.truncated:
            self.model[topic] = text
        else:
            stored = self.store.read(topic)
            assert stored is not None
            self.model[topic] = stored

    @invariant()
    def matches(self) -> None:
        assert sorted(i.topic for i in self.store.list()) == sorted(self.model)
        for topic, text in self.model.items():
            assert self.store.read(topic) == text

    def teardown(self) -> None:
        self.tmp.cleanup()


TestTopicMachine = TopicMachine.TestCase
TestTopicMachine.settings = settings(max_examples=scaled(15), stateful_step_count=10)


def _expected(worker: int, round_: int) -> str:
    sys.path.insert(0, str(CHILD.parent))
    try:
        from _topic_writer_child import content
    finally:
        sys.path.pop(0)
    return content(str(worker), round_)


def test_concurrent_processes_lose_nothing(tmp_path: Path) -> None:
    workers, rounds = 4, 6
    directory, go = tmp_path / "root" / "memories", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(directory), str(w), str(rounds), str(go)], env=env
        )
        for w in range(workers)
    ]
    time.sleep(0.3)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * workers
    store = TopicStore(directory, max_tokens_per_file=1_000_000)
    expected = {f"w{w}-{r}": _expected(w, r) for w in range(workers) for r in range(rounds)}
    assert sorted(i.topic for i in store.list()) == sorted([*expected, "shared"])
    for topic, text in expected.items():
        assert store.read(topic) == text  # every worker's own writes are there, whole
    shared = store.read("shared")
    # The shared topic holds one complete write (the last writer's), never a mix.
    assert shared in {_expected(w, rounds - 1) for w in range(workers)}
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("on_disk", [True, False])
def test_write_if_unchanged_is_a_compare_and_swap(tmp_path: Path, on_disk: bool) -> None:
    store = TopicStore(tmp_path / "memories" if on_disk else None, scrubber=scrub_secrets)
    first = store.write_if_unchanged("t", f"v1 {TOKEN}", expected=None)
    assert first is not None and first.created
    assert first.content == "v1 [REDACTED:github_token]" == store.read("t")
    assert store.write_if_unchanged("t", "lost", expected=None) is None  # it exists now
    assert store.write_if_unchanged("t", "lost", expected="v0") is None
    assert store.read("t") == first.content
    second = store.write_if_unchanged("t", "v2", expected=first.content)
    assert second is not None and not second.created and store.read("t") == "v2"
