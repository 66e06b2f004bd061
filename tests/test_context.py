"""ContextManager: budget, anchor, validity, the three stages, prefix stability, caching."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pydantic
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from profiles import scaled
from provider_rules import anthropic_violations, openai_violations
from strategies import conversation, message

from agentmem import (
    INTERNAL_FIELDS,
    ConfigurationError,
    ContextManager,
    ContextOverflowError,
    ContextSettings,
    HeuristicCounter,
    InvalidArgumentError,
    MessageHistory,
    ShortTermMemory,
    TrimEvent,
    YaRN,
    count_messages,
)
from agentmem._truncate import _MARKER_RE as MARKER
from agentmem._truncate import MIN_KEPT_CHARS, omitted_count
from agentmem.context import (
    RECOVERY_TAG,
    ContextBuild,
    latest_todos,
    progress_of,
    render_progress,
    truncate_text,
)
from agentmem.messages import Message, content_text, normalize_messages
from agentmem.repair import (
    MISSING_TOOL_RESULT,
    RepairStream,
    answer_dangling_tool_calls,
    drop_empty_assistant_messages,
    drop_orphan_tool_results,
    make_tool_call_ids_unique,
)

SYSTEM = "You are a careful coding agent. Follow the repository's conventions."


class Agent:
    """A session-like rig: history + window + YaRN + manager, driven like an agent loop."""

    def __init__(self, window: int = 4_000, **settings: Any) -> None:
        self.counter = HeuristicCounter()
        self.history = MessageHistory(token_counter=self.counter)
        self.history.replace_system_prompt(SYSTEM)
        self.window = ShortTermMemory(self.history)
        self.yarn = YaRN(main_thread=self.history)
        self.events: list[TrimEvent] = []
        self.manager = ContextManager(
            {"context_window": window, **settings}, checkpoint=self.events.append
        )
        self.n = 0

    def build(self, provider: str = "openai", **kwargs: Any) -> Any:
        return self.manager.build(self.window, self.yarn, provider=provider, **kwargs)

    def user(self, text: str) -> None:
        self.history.append({"role": "user", "content": text})

    def tool_round(
        self, output: str, name: str = "bash", args: dict[str, Any] | None = None
    ) -> None:
        self.n += 1
        call_id = f"call_{self.n}"
        self.history.append(
            {
                "role": "assistant",
                "content": f"Running step {self.n}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args or {"cmd": "ls"})},
                    }
                ],
            }
        )
        self.history.append({"role": "tool", "tool_call_id": call_id, "content": output})


INJECTION_FLAGS = ("system_injected", "session_context", "memory_update")


def newest_real_user(history: MessageHistory) -> Message | None:
    return next(
        (
            m
            for m in reversed(history)
            if m["role"] == "user" and not any(m.get(flag) for flag in INJECTION_FLAGS)
        ),
        None,
    )


def check_payload(agent: Agent, payload: list[dict[str, Any]], limit: int) -> None:
    assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []
    assert count_messages(payload, agent.counter) <= limit
    assert payload[0] == {"role": "system", "content": SYSTEM}
    anchor = newest_real_user(agent.history)
    if anchor is not None:
        assert any(m["role"] == "user" and m["content"] == anchor["content"] for m in payload)


# --------------------------------------------------------------------------- RepairStream


def passes_1_to_4(messages: list[Message]) -> list[Message]:
    out = drop_orphan_tool_results(messages)
    out = answer_dangling_tool_calls(out)
    out = drop_empty_assistant_messages(out)
    return list(make_tool_call_ids_unique(out))


@given(st.lists(message(), max_size=30), st.data())
def test_repair_stream_equals_the_reference_passes(
    raw: list[dict[str, Any]], data: st.DataObject
) -> None:
    messages = normalize_messages(raw)
    stream = RepairStream()
    split = data.draw(st.integers(0, len(messages)))
    for m in messages[:split]:
        stream.push(m)
    snapshot = stream.copy()
    partial = stream.finish()
    assert partial == passes_1_to_4(messages[:split])
    for m in messages[split:]:
        stream.push(m)
    assert stream.finish() == passes_1_to_4(messages)
    # the copy is independent of the original
    assert snapshot.finish() == partial


@given(conversation())
def test_repair_stream_keeps_identity_of_unchanged_messages(raw: list[dict[str, Any]]) -> None:
    messages = normalize_messages(raw)
    stream = RepairStream()
    for m in messages:
        stream.push(m)
    ids = {id(m) for m in messages}
    for out in stream.finish():
        if out.get("synthesized") or out["role"] in ("assistant", "tool"):
            continue
        assert id(out) in ids


# --------------------------------------------------------------------------- the invariants


@st.composite
def agent_loop(draw: st.DrawFn) -> tuple[int, list[tuple[str, Any]]]:
    """A window size and a script of agent steps: user turns, tool rounds (some huge), waits."""
    window = draw(st.sampled_from([1_000, 2_000, 4_000, 16_000]))
    steps: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 60))):
        kind = draw(st.sampled_from(["user", "tool", "tool", "tool", "answer", "dangling"]))
        if kind == "user":
            steps.append(("user", draw(st.text(min_size=1, max_size=120))))
        elif kind == "tool":
            size = draw(st.sampled_from([10, 200, 1_500, 6_000, 30_000]))
            steps.append(("tool", "x" * size))
        elif kind == "answer":
            steps.append(("answer", draw(st.text(max_size=300))))
        else:
            steps.append(("dangling", None))
    return window, steps


def run_step(agent: Agent, step: tuple[str, Any]) -> None:
    kind, value = step
    if kind == "user":
        agent.user(value)
    elif kind == "tool":
        agent.tool_round(value)
    elif kind == "answer":
        agent.history.append({"role": "assistant", "content": value})
    else:
        agent.history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "pending",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            }
        )


@settings(max_examples=scaled(40))
@given(agent_loop())
def test_every_payload_fits_keeps_system_and_anchor_and_is_valid(
    loop: tuple[int, list[tuple[str, Any]]],
) -> None:
    window, steps = loop
    agent = Agent(window)
    for step in steps:
        run_step(agent, step)
        payload = agent.build()
        note(f"stats: {agent.manager.stats}")
        check_payload(agent, payload, window)
        system, turns = agent.build(provider="anthropic")
        assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []
        assert system is not None and system.startswith(SYSTEM)
        # the incremental build equals a from-scratch build of the same state
        fresh = ContextManager(agent.manager.settings)
        assert fresh.build(agent.window, agent.yarn) == payload
        assert fresh.stats.trims == []


@settings(max_examples=scaled(25))
@given(agent_loop(), st.integers(1, 3))
def test_overflow_payloads_fit_their_targets(
    loop: tuple[int, list[tuple[str, Any]]], attempt: int
) -> None:
    window, steps = loop
    agent = Agent(window)
    for step in steps:
        run_step(agent, step)
    payload = agent.manager.build_after_overflow(agent.window, agent.yarn, attempt)
    target = agent.manager.settings.overflow_targets[attempt - 1]
    assert openai_violations(payload, internal_fields=INTERNAL_FIELDS) == []
    total = count_messages(payload, agent.counter)
    system_cost = count_messages(payload[:1], agent.counter)
    assert total <= max(int(target * window), system_cost) or total <= window
    assert RECOVERY_TAG in payload[-1]["content"]
    assert agent.events and agent.events[-1].stage == 3 and agent.events[-1].attempt == attempt


# --------------------------------------------------------------------------- stages


def test_no_trim_below_the_threshold() -> None:
    agent = Agent(100_000)
    for _ in range(10):
        agent.tool_round("short output")
    agent.build()
    assert agent.manager.stats.trims == []
    assert agent.window.start == 0


def test_stage_one_trims_to_half_with_hysteresis() -> None:
    agent = Agent(4_000)
    agent.user("Refactor the parser module and keep the tests green.")
    trims_at = []
    for i in range(80):
        agent.tool_round("output line\n" * 20)
        payload = agent.build()
        if agent.manager.stats.trims:
            assert [t.stage for t in agent.manager.stats.trims] == [1]
            trims_at.append(i)
            assert agent.manager.stats.tokens <= 0.5 * 4_000 + 50
        assert agent.manager.stats.tokens <= 0.75 * 4_000
        check_payload(agent, payload, 4_000)
    # hysteresis: several rounds pass between trims
    assert len(trims_at) >= 3
    assert min(b - a for a, b in itertools.pairwise(trims_at)) >= 3
    assert agent.events and all(e.stage == 1 for e in agent.events)


def test_stage_two_truncates_a_giant_tool_output_in_the_payload_only() -> None:
    agent = Agent(4_000)
    agent.user("Read the log.")
    giant = "log line with details\n" * 5_000
    agent.tool_round(giant)
    payload = agent.build()
    check_payload(agent, payload, 4_000)
    tool = next(m for m in payload if m["role"] == "tool")
    assert "characters omitted here to fit the context window" in tool["content"]
    assert agent.manager.stats.truncated >= 1
    assert agent.history[-1]["content"] == giant  # nothing lost in the store
    assert {t.stage for t in agent.manager.stats.trims} <= {1, 2}


def test_stage_three_attempts_shrink_and_inject_recovery() -> None:
    agent = Agent(8_000)
    agent.user("Implement the export feature end to end.")
    agent.tool_round(
        "[main 1a2b3c4] Add export skeleton\n",
        name="todo_write",
        args={"todos": [{"content": "write exporter", "status": "in_progress"}, "add tests"]},
    )
    for _ in range(30):
        agent.tool_round("output\n" * 30)
    sizes = []
    for attempt in (1, 2, 3):
        payload = agent.manager.build_after_overflow(agent.window, agent.yarn, attempt)
        check_payload(agent, payload, 8_000)
        sizes.append(count_messages(payload, agent.counter))
        note = payload[-1]["content"]
        assert note.startswith(f"<{RECOVERY_TAG}>")
        assert "Implement the export feature" in note
        assert "[in_progress] write exporter" in note and "add tests" in note
        assert "Continue with the current task" in note
        assert not any(word in note.lower() for word in ("error", "failed", "sorry", "apolog"))
    assert sizes[0] <= 0.5 * 8_000 and sizes[1] <= 0.25 * 8_000 and sizes[2] <= 0.1 * 8_000 + 200
    assert sizes[0] >= sizes[1] >= sizes[2]
    # the commit seen early survives in the summary
    assert any("1a2b3c4" in content_text(m.get("content")) for m in payload)
    # anthropic shape is valid too
    system, turns = agent.manager.build_after_overflow(
        agent.window, agent.yarn, 3, provider="anthropic"
    )
    assert anthropic_violations(system, turns) == []


def test_summary_keeps_earlier_facts_across_repeated_trims() -> None:
    agent = Agent(3_000)
    agent.user("Migrate the settings loader to pydantic and commit each step.")
    agent.tool_round("[main abc1234] Introduce Settings model\n", args={"path": "src/settings.py"})
    for i in range(150):
        agent.tool_round(f"test output {i}\n" * 15)
        agent.build()
    trims = sum(1 for e in agent.events if e.stage == 1)
    assert trims >= 5
    payload = agent.build()
    summary = next(m["content"] for m in payload if "<thread_summary>" in str(m.get("content")))
    assert "abc1234" in summary and "src/settings.py" in summary
    assert "Migrate the settings loader" in summary


def test_appending_does_not_rewrite_the_payload_prefix_between_trims() -> None:
    agent = Agent(20_000)
    agent.user("Go.")
    previous = agent.build()
    for i in range(60):
        if i % 7 == 3:
            run_step(agent, ("dangling", None))
        agent.tool_round("some output " * (5 + i % 13))
        payload = agent.build()
        if not agent.manager.stats.trims:
            stable = previous
            while (
                stable
                and stable[-1]["role"] == "tool"
                and stable[-1]["content"] == MISSING_TOOL_RESULT
            ):
                stable = stable[:-1]
            assert payload[: len(stable)] == stable, f"prefix rewritten at step {i}"
        previous = payload


def test_injections_extend_the_system_prompt() -> None:
    agent = Agent()
    agent.user("hi")
    payload = agent.build(injections=["Known facts: the repo uses uv.", "  "])
    assert payload[0]["content"] == SYSTEM + "\n\nKnown facts: the repo uses uv."
    assert agent.build()[0]["content"] == SYSTEM


def test_task_chain_filters_messages() -> None:
    agent = Agent()
    agent.history.append({"role": "user", "content": "task one", "task_id": 1})
    agent.history.append({"role": "user", "content": "task two", "task_id": 2})
    payload = agent.build(task_chain={2})
    assert [m["content"] for m in payload if m["role"] == "user"] == ["task two"]


def test_system_prompt_larger_than_the_window_raises() -> None:
    history = MessageHistory([{"role": "system", "content": "rules " * 2_000}])
    manager = ContextManager({"context_window": 500})
    with pytest.raises(ContextOverflowError) as info:
        manager.build(ShortTermMemory(history))
    assert info.value.window == 500 and info.value.needed > 500


def test_bad_arguments() -> None:
    agent = Agent()
    with pytest.raises(InvalidArgumentError):
        agent.build(provider="gemini")
    with pytest.raises(InvalidArgumentError):
        agent.manager.build_after_overflow(agent.window, agent.yarn, 4)
    with pytest.raises(InvalidArgumentError):
        ContextManager(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="trim_target"):
        ContextSettings(trim_target=0.9, proactive_threshold=0.75)
    with pytest.raises(ConfigurationError, match="no_such_setting: unknown setting"):
        ContextManager({"context_window": 1000, "no_such_setting": 1})


def test_checkpoint_and_reporter_failures_never_break_the_build(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("disk full")

    class Reporter:
        def __init__(self) -> None:
            self.events: list[tuple[str, Any]] = []

        def report(self, event: str, data: Any) -> None:
            self.events.append((event, data))
            raise RuntimeError("ui gone")

    reporter = Reporter()
    agent = Agent(2_000)
    agent.manager = ContextManager({"context_window": 2_000}, checkpoint=broken, reporter=reporter)
    agent.user("go")
    with caplog.at_level(logging.WARNING, logger="agentmem.context"):
        for _ in range(40):
            agent.tool_round("data " * 50)
            check_payload(agent, agent.build(), 2_000)
    assert reporter.events and reporter.events[0][0] == "context.trim"
    assert "checkpoint failed" in caplog.text


def test_reasoning_content_is_padded_in_context_payloads() -> None:
    agent = Agent()
    agent.user("hi")
    agent.history.append({"role": "assistant", "content": "a"})
    agent.history.append({"role": "user", "content": "more"})
    agent.history.append({"role": "assistant", "content": "b", "reasoning_content": "because"})
    payload = agent.build()
    assert [m.get("reasoning_content") for m in payload if m["role"] == "assistant"] == [
        "",
        "because",
    ]
    forced = Agent()
    forced.user("x")
    forced.history.append({"role": "assistant", "content": "y"})
    assert forced.build(force_reasoning_content_pad=True)[-1]["reasoning_content"] == ""


def test_payload_is_safe_to_mutate() -> None:
    agent = Agent()
    agent.user("hi")
    agent.tool_round("out")
    payload = agent.build()
    payload[2]["tool_calls"][0]["function"]["name"] = "changed"
    payload[1]["content"] = "changed"
    again = agent.build()
    assert again[2]["tool_calls"][0]["function"]["name"] == "bash"
    assert again[1]["content"] == "hi"


def test_latest_todos() -> None:
    history = normalize_messages(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {
                            "name": "TodoWrite",
                            "arguments": json.dumps(
                                {
                                    "todos": [
                                        {"content": "a", "status": "completed"},
                                        {"text": "b"},
                                        3,
                                    ]
                                }
                            ),
                        },
                    }
                ],
            }
        ]
    )
    assert latest_todos(history) == ["[completed] a", "b"]
    assert latest_todos([]) == []


def test_truncate_text_is_deterministic_and_bounded() -> None:
    text = "a" * 1_000 + "MIDDLE" + "z" * 1_000
    for limit in (40, 300, 1_000):
        out = truncate_text(text, limit)
        assert out == truncate_text(text, limit)
        assert len(out) <= max(limit, MIN_KEPT_CHARS + 40)
        assert "characters omitted" in out and "MIDDLE" not in out
        assert out.startswith("a")
    long = truncate_text(text, 1_000)
    assert long.startswith("a" * 500) and long.endswith("z" * 250)
    assert "the full text is kept in the session archive" in long
    assert "[... " in truncate_text(text, 300)
    assert truncate_text("short", 300) == "short"


# --------------------------------------------------------------------------- stage 3, attempt 3


def overflowing_agent(newest_output: str) -> Agent:
    agent = Agent(8_000)
    agent.user("Fix the failing test in the parser module.")
    for _ in range(30):
        agent.tool_round("output\n" * 30)
    agent.tool_round(newest_output)
    return agent


def test_attempt_three_keeps_a_short_newest_tool_result_whole() -> None:
    failure = "AssertionError: expected 3 got 4 in tests/test_parser.py::test_x line 42"
    agent = overflowing_agent(failure)
    payload = agent.manager.build_after_overflow(agent.window, agent.yarn, 3)
    check_payload(agent, payload, 8_000)
    tools = [m for m in payload if m["role"] == "tool"]
    assert [m["content"] for m in tools] == [failure]


def test_attempt_three_gives_the_newest_unit_a_tenth_of_the_window() -> None:
    lines = "".join(f"line {i}: value={i * 7}\n" for i in range(3_000))
    agent = overflowing_agent(lines)
    payload = agent.manager.build_after_overflow(agent.window, agent.yarn, 3)
    check_payload(agent, payload, 8_000)
    tool = next(m for m in payload if m["role"] == "tool")
    kept = count_messages([tool], agent.counter)
    # about 10% of the window: not the whole output, not a bare marker
    assert 0.05 * 8_000 <= kept <= 0.1 * 8_000 + 20
    assert tool["content"].startswith("line 0: value=0")
    assert tool["content"].rstrip().endswith("line 2999: value=20993")
    assert omitted_count(tool["content"]) > 0
    assert len(tool["content"]) - len(lines) + omitted_count(tool["content"]) < 200


@settings(max_examples=scaled(25))
@given(agent_loop())
def test_no_message_with_content_becomes_a_bare_marker(
    loop: tuple[int, list[tuple[str, Any]]],
) -> None:
    window, steps = loop
    agent = Agent(window)
    for step in steps:
        run_step(agent, step)
    for build in (
        agent.build,
        lambda: agent.manager.build_after_overflow(agent.window, agent.yarn, 3),
    ):
        for msg in build():
            text = content_text(msg.get("content"))
            if omitted_count(text):
                rest = MARKER.sub("", text)
                assert len(rest.strip()) >= 20, text


# --------------------------------------------------------------------------- the truncation helper

texts = st.text(st.sampled_from("ab z\n.é中"), max_size=3_000)


@given(texts, st.integers(0, 3_000), st.integers(0, 3_000))
def test_truncation_is_bounded_idempotent_and_counts_from_the_original(
    text: str, first: int, second: int
) -> None:
    once = truncate_text(text, first)
    assert len(once) <= len(text)
    assert len(once) <= max(first, MIN_KEPT_CHARS + 40)
    assert truncate_text(once, first) == once  # idempotent
    if once == text:
        return
    # never a bare marker: real text of the original's head and tail is kept
    head, _, tail = MARKER.split(once, maxsplit=1)
    assert len(head) + len(tail) >= MIN_KEPT_CHARS
    assert text.startswith(head) and text.endswith(tail)
    assert omitted_count(once) == len(text) - len(head) - len(tail)
    # cutting again re-cuts the real text, not the marker, and the count stays exact
    twice = truncate_text(once, second)
    assert len(MARKER.findall(twice)) == 1
    head2, _, tail2 = MARKER.split(twice, maxsplit=1)
    assert text.startswith(head2) and text.endswith(tail2)
    assert omitted_count(twice) == len(text) - len(head2) - len(tail2)


def test_a_short_text_is_never_reduced_to_a_marker() -> None:
    failure = "E   assert 3 == 4"
    for limit in (0, 5, 30):
        assert truncate_text(failure, limit) == failure
    assert truncate_text("x" * 200, 0).startswith("x" * 30)


# ------------------------------------------------------------------- the summary under pressure


def summarised_agent(window: int) -> Agent:
    agent = Agent(window)
    agent.user("Port the CLI to click and commit after every green step.")
    for i in range(40):
        agent.tool_round(
            f"[main {i:03x}abc{i:02x}] Step {i} of the port\n" + "ok\n" * 40,
            args={"path": f"src/cli/part_{i}.py"},
        )
        agent.build()
    return agent


@pytest.mark.parametrize("attempt", [0, 2, 3])
def test_a_summary_that_must_shrink_keeps_its_tags_and_newest_lines(attempt: int) -> None:
    agent = summarised_agent(1_500)
    summary = agent.yarn.summary
    assert summary is not None and len(summary.render()) > 600
    for _ in range(3):
        agent.tool_round("log\n" * 600)
    if attempt:
        payload = agent.manager.build_after_overflow(agent.window, agent.yarn, attempt)
    else:
        payload = agent.build()
    check_payload(agent, payload, 1_500)
    summary = agent.yarn.summary
    assert summary is not None
    (text,) = [m["content"] for m in payload if m["content"].startswith("<thread_summary>")]
    assert text.startswith("<thread_summary>\n") and text.endswith("\n</thread_summary>")
    assert "characters omitted" not in text
    assert f"Current task: {summary.current_task}" in text
    if text != f"<thread_summary>\n{summary.render()}\n</thread_summary>":
        assert "shortened to fit" in text
        # the newest commit and file are the ones kept
        assert summary.commits[-1] in text and summary.files_touched[-1] in text
        assert summary.commits[0] not in text


def test_render_with_a_budget_fits_and_keeps_the_newest() -> None:
    summary = summarised_agent(1_500).yarn.summary
    assert summary is not None
    full = summary.render()
    for budget in (len(full), 800, 400, 250):
        text = summary.render(budget)
        assert len(text) <= budget
        assert text.startswith("Summary of ")
        assert summary.current_task is not None and summary.current_task in text
    assert summary.commits[-1] in summary.render(400)
    assert summary.render(len(full)) == full
    tiny = summary.render(30)
    assert tiny.startswith("Summary of ") and omitted_count(tiny) > 0


# ------------------------------------------------------------------- bounded per-message work


class CountingCounter(HeuristicCounter):
    """Counts how often a big text is handed to the counter."""

    def __init__(self) -> None:
        super().__init__()
        self.big = 0

    def count_text(self, text: str) -> int:
        if len(text) >= 100_000:
            self.big += 1
        return super().count_text(text)


@pytest.mark.parametrize("attempt", [0, 3])
def test_a_giant_message_is_counted_and_cut_once_across_builds(attempt: int) -> None:
    agent = Agent(4_000)
    agent.counter = CountingCounter()
    agent.history = MessageHistory(token_counter=agent.counter)
    agent.history.replace_system_prompt(SYSTEM)
    agent.window = ShortTermMemory(agent.history)
    agent.yarn = YaRN(main_thread=agent.history)
    agent.user("Read the log and find the failure.")
    agent.tool_round("a" * 500_000)
    payloads = []
    for _ in range(5):
        if attempt:
            payload = agent.manager.build_after_overflow(agent.window, agent.yarn, attempt)
        else:
            payload = agent.build()
        check_payload(agent, payload, 4_000)
        payloads.append(payload)
    assert agent.counter.big == 1  # the history's cached count; the payload reuses its cut
    assert all(p == payloads[0] for p in payloads)
    fresh = ContextManager(agent.manager.settings)
    if not attempt:
        assert fresh.build(agent.window, agent.yarn) == payloads[-1]


def test_switching_windows_keeps_each_windows_build_state() -> None:
    """A manager that builds another window in between still re-uses this window's cuts.

    The cut of a giant tool output (a synthesised message) is kept per window:
    the same object comes back on the next build of that window, however many
    builds of another window ran in between (it used to be recomputed after
    every switch, when a build for another window reset all the caches).
    """
    a, b = Agent(4_000), Agent(4_000)
    manager = ContextManager(a.manager.settings)
    for agent in (a, b):
        agent.user("Read the log and find the failure.")
        agent.tool_round("a" * 200_000)
    first = manager.build_result(a.window, a.yarn)
    cut = [m for m in first.messages if m["role"] == "tool"]
    assert len(cut) == 1 and len(content_text(cut[0]["content"])) < 200_000
    for _ in range(3):
        other = manager.build_result(b.window, b.yarn)
        assert all(m is not cut[0] for m in other.messages)
        again = manager.build_result(a.window, a.yarn)
        assert again.payload == first.payload
        assert any(m is cut[0] for m in again.messages)  # the kept cut, not a new one


# ------------------------------------------------------------------- build results and binding


def test_build_result_is_returned_not_left_in_mutable_state() -> None:
    agent = Agent(2_000)
    agent.user("Summarise the logs.")
    for _ in range(12):
        agent.tool_round("line\n" * 60)
    first = agent.manager.build_result(agent.window, agent.yarn)
    assert isinstance(first, ContextBuild)
    assert first.payload == agent.build()
    assert len(first.messages) == len(first.payload)
    assert first.messages[0]["content"] == SYSTEM and first.stats.messages == len(first.messages)
    assert first.stats.tokens == count_messages(first.payload, agent.counter)  # type: ignore[arg-type]
    trims = list(first.stats.trims)
    for _ in range(12):
        agent.tool_round("line\n" * 60)
        later = agent.manager.build_result(agent.window, agent.yarn)
        assert agent.manager.stats is later.stats and agent.manager.last_build is later
    assert first.stats.trims == trims  # a later build does not rewrite an earlier result
    with pytest.raises(InvalidArgumentError, match="attempt"):
        agent.manager.build_result(agent.window, agent.yarn, attempt=4)


def test_window_bound_at_construction_and_switching_windows() -> None:
    a, b = Agent(2_000), Agent(2_000)
    bound = ContextManager(a.manager.settings, window=a.window, yarn=a.yarn)
    with pytest.raises(InvalidArgumentError, match="window"):
        ContextManager().build()
    for i in range(15):
        a.tool_round(f"a{i}\n" * 80)
        b.tool_round(f"b{i}\n" * 80)
        assert bound.build() == ContextManager(a.manager.settings).build(a.window, a.yarn)
        # the same manager, handed another window, builds that window's payload
        assert bound.build(b.window, b.yarn) == ContextManager(b.manager.settings).build(
            b.window, b.yarn
        )


# ------------------------------------------------------------------- one "real user" predicate


@pytest.mark.parametrize("flag", INJECTION_FLAGS)
def test_injected_user_messages_are_never_the_anchor_or_a_request(flag: str) -> None:
    agent = Agent(1_500)
    agent.user("Rename the config loader and update every caller.")
    for i in range(10):
        agent.tool_round(f"step {i}\n" * 40)
    agent.history.append({"role": "user", "content": "Injected: today is 2026-11-22.", flag: True})
    agent.tool_round("more\n" * 40)
    history = agent.history
    index = history.last_real_user_index()
    assert index is not None
    assert history[index]["content"] == "Rename the config loader and update every caller."
    assert [m["content"] for m in history.real_user_messages()] == [history[index]["content"]]
    for _ in range(6):
        agent.tool_round("again\n" * 40)
        payload = agent.build()
        check_payload(agent, payload, 1_500)
    assert agent.window.pinned == (index,)
    summary = agent.yarn.summary
    assert summary is not None
    assert not any("Injected" in r for r in summary.user_requests)
    assert summary.current_task == "Rename the config loader and update every caller."


# ------------------------------------------------------------------- settings errors


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"context_window": 10}, "context_window"),
        ({"context_window": "big"}, "context_window"),
        ({"trim_target": 0.9}, "trim_target"),
        ({"validation_threshold": 0.3}, "trim_target"),
        ({"overflow_targets": (0.5, 0.2, 2.0)}, "overflow_targets"),
        ({"summary_max_fraction": -1}, "summary_max_fraction"),
        ({"windw": 4_000}, "windw"),
    ],
)
def test_invalid_settings_raise_configuration_error_naming_the_field(
    settings: dict[str, Any], field: str
) -> None:
    for make in (
        lambda: ContextSettings(**settings),
        lambda: ContextManager(settings),
    ):
        with pytest.raises(ConfigurationError, match=field) as info:
            make()
        assert not isinstance(info.value, pydantic.ValidationError)
        assert info.value.__cause__ is None


def test_settings_are_immutable_with_a_clear_error() -> None:
    s = ContextSettings()
    with pytest.raises(ConfigurationError, match="context_window"):
        s.context_window = 1_000  # type: ignore[misc]
    assert s.model_copy(update={"context_window": 1_000}).context_window == 1_000


# ------------------------------------------------------------------- one progress renderer


def test_recovery_note_and_progress_file_render_the_same_progress(tmp_path: Any) -> None:
    import agentmem

    with agentmem.Memory(root=tmp_path / ".agentmem", working_dir=tmp_path) as mem:
        s = mem.session(name="p", context_window=2_000)
        s.history.replace_system_prompt(SYSTEM)
        s.start_task("Port the exporter to the new API and commit each step.")
        todos = {"todos": [{"content": "port exporter", "status": "in_progress"}, "add tests"]}
        for i in range(25):
            name, args = ("todo_write", todos) if i == 0 else ("bash", {"cmd": f"step {i}"})
            output = f"[main {i:02d}abcdef] Step {i}\n" + "ok\n" * 30
            s.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                }
            )
            s.append({"role": "tool", "tool_call_id": f"c{i}", "content": output})
            s.context()
        payload = s.context_after_overflow(1)
        note = payload[-1]["content"].splitlines()
        body = note[2 : note.index("Continue with the current task from where you left off.")]
        # The next trim writes the file first, from the state the note was rendered from.
        s.context_after_overflow(2)
        text = (tmp_path / ".agentmem" / "memory" / "session_progress.md").read_text()
        lines = text.splitlines()
        # the note's progress lines appear, in order and contiguous, in the file
        start = lines.index(body[0])
        assert lines[start : start + len(body)] == body
        assert "Current task: Port the exporter" in body[0]
        assert "- [in_progress] port exporter" in body
        assert "Recent git activity:" in body
        assert "Summary of earlier work:" in lines


def test_progress_of_a_plain_list_finds_the_real_request() -> None:
    messages = [
        {"role": "user", "content": "Migrate the build to hatch."},
        {"role": "user", "content": "Session context: 2026-11-22", "session_context": True},
    ]
    assert render_progress(progress_of(messages, None)) == [
        "Current task: Migrate the build to hatch."
    ]
