"""The memory updater, end to end through the facade with a scripted LLM.

``finish_task()`` after a long task forks the conversation, lets the model
use list_memories / read_memory / write_memory, and writes
``memories/<topic>.md``; short tasks, sub-agents, incognito and disabled
memories never call the model; failures come back in the result, never
raised, except KeyboardInterrupt.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled
from provider_rules import anthropic_violations, openai_violations

from agentmem import Memory, Session
from agentmem._tool_specs import count_tools, provider_tools, tools_json
from agentmem.errors import ConfigurationError, InvalidArgumentError
from agentmem.memory_updater import (
    MEMORY_UPDATE_MIN_ITERATIONS,
    PROCEED,
    TOOL_NAMES,
    MemoryUpdater,
    MemoryUpdateResult,
    tool_specs,
)
from agentmem.message_tokens import count_message, count_messages
from agentmem.messages import INTERNAL_FIELDS, to_anthropic
from agentmem.testing import ScriptedLLM, tool_call
from agentmem.tokens import HeuristicCounter
from agentmem.tools import openai_tools
from agentmem.topics import TopicStore

DONE = {"role": "assistant", "content": "Memory updated."}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "cost_usd": 0.25}


class AsyncLLM:
    """An async twin of a ScriptedLLM (agentmem.testing grows its own elsewhere)."""

    def __init__(self, scripted: ScriptedLLM) -> None:
        self.scripted = scripted
        self.calls = scripted.calls

    async def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.scripted(messages, tools)


class Events:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def report(self, event: str, data: Mapping[str, Any]) -> None:
        self.events.append((event, dict(data)))


def raising(exc: BaseException) -> Callable[[list[dict[str, Any]]], dict[str, Any]]:
    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        raise exc

    return reply


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / ".agentmem"


def memory(root: Path, llm: Any, **kwargs: Any) -> Memory:
    kwargs.setdefault("durability", "normal")  # survives kill -9; no fsync per append (speed)
    return Memory(root=root, working_dir=root.parent, llm=llm, **kwargs)


def work(s: Session, iterations: int, *, cost: float = 0.01) -> int:
    """A task of ``iterations`` LLM iterations, each a tool call and its result."""
    if not len(s.history):
        s.append({"role": "system", "content": "You are a coding agent."})
    task = s.start_task("Deploy the app to staging.")
    for i in range(iterations):
        call = tool_call("bash", {"cmd": f"make step{i}"}, call_id=f"c{task}_{i}")
        s.append(call)
        s.append({"role": "tool", "tool_call_id": f"c{task}_{i}", "content": f"ok {i}"})
        s.record_usage(100, 10, cost)
    s.append({"role": "assistant", "content": "Deployed with `make deploy ENV=staging`."})
    return task


def tools_tokens(tools: list[dict[str, Any]] | None, counter: Any) -> int:
    """What a request's tool schemas cost: the window's rule (compact JSON + framing)."""
    specs = provider_tools(tools, "openai")
    return count_tools(tools_json(specs), len(specs), counter, "openai")


def snapshot(s: Session) -> list[dict[str, Any]]:
    return copy.deepcopy([dict(m) for m in s.history])


def last_tool_text(messages: list[dict[str, Any]]) -> str:
    return str(next(m["content"] for m in reversed(messages) if m["role"] == "tool"))


# ---------------------------------------------------------------------------- when it runs


def test_long_task_writes_the_topic_file(root: Path) -> None:
    llm = ScriptedLLM(
        [tool_call("write_memory", {"topic": "deploy", "content": "Use make deploy."}), DONE]
    )
    with memory(root, llm) as mem, mem.session(name="t") as s:
        task = work(s, 12)
        assert s.finish_task() == task
        result = s.last_memory_update
    assert (root / "memories" / "deploy.md").read_text() == "Use make deploy."
    assert result is not None and result.ran and result.error is None
    assert result.topics == ("deploy",) and result.iterations == 2
    assert result.stopped == "answered" and result.answer == "Memory updated."
    llm.assert_complete()
    messages, tools = llm.calls[0]
    assert tools is not None
    assert [t["function"]["name"] for t in tools] == list(TOOL_NAMES)
    # The task's system prompt is sent unchanged; the instructions are a new message.
    assert messages[0] == {"role": "system", "content": "You are a coding agent."}
    assert messages[-2]["role"] == "system"
    assert "# Memory update" in messages[-2]["content"]
    assert "4000 tokens" in messages[-2]["content"]  # the per-file limit is stated
    assert messages[-1] == {"role": "user", "content": PROCEED}
    # The task's conversation is all there, before the instruction.
    assert any("make step11" in json.dumps(m) for m in messages)
    # The second call sees the tool result.
    assert "Wrote memories/deploy.md" in last_tool_text(llm.calls[1][0])


@pytest.mark.parametrize(
    ("iterations", "runs"),
    [(3, False), (MEMORY_UPDATE_MIN_ITERATIONS - 1, False), (MEMORY_UPDATE_MIN_ITERATIONS, True)],
)
def test_only_long_tasks_call_the_llm(root: Path, iterations: int, runs: bool) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session() as s:
        task = work(s, iterations)
        assert s.finish_task() == task
        result = s.last_memory_update
    assert result is not None and result.ran is runs
    if runs:
        assert len(llm.calls) == 1
    else:
        assert llm.calls == []
        assert result.skipped is not None and f"{iterations} LLM iterations" in result.skipped
        assert result.task_id == task


def test_no_task_and_no_llm_skip(root: Path) -> None:
    with memory(root, None) as mem, mem.session() as s:
        assert s.last_memory_update is None
        assert s.finish_task() is None
        assert s.last_memory_update is not None
        assert s.last_memory_update.skipped == "no task was running"
        work(s, 12)
        s.finish_task()
        assert s.last_memory_update.skipped == "the Memory has no llm"
    assert not (root / "memories").exists()


def test_subagent_never_updates(root: Path) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session(subagent=True) as s:
        assert s.subagent
        work(s, 15)
        s.finish_task()
        assert s.last_memory_update is not None
        assert "sub-agent" in (s.last_memory_update.skipped or "")
    assert llm.calls == []
    with memory(root, llm) as mem, pytest.raises(ConfigurationError, match="subagent"):
        mem.session(subagent="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs", [{"incognito": True}, {"memory_update": False}, {"memory_update": {"enabled": False}}]
)
def test_incognito_and_disabled_never_update(root: Path, kwargs: dict[str, Any]) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm, **kwargs) as mem, mem.session() as s:
        work(s, 12)
        s.finish_task()
        assert s.last_memory_update is not None and not s.last_memory_update.ran
    assert llm.calls == []
    assert not (root / "memories").exists()


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("yes", "memory_update must be"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"max_tokens_per_file": 10}, "max_tokens_per_file"),
        ({"enabled": 1}, "enabled"),
        ({"colour": "red"}, "unknown settings colour"),
    ],
)
def test_settings_are_checked(root: Path, value: object, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        memory(root, None, memory_update=value)


# ---------------------------------------------------------------------------- what it does


def test_merges_with_existing_content(root: Path) -> None:
    def merge(messages: list[dict[str, Any]]) -> dict[str, Any]:
        old = last_tool_text(messages)
        return tool_call("write_memory", {"topic": "deploy", "content": old + "\n- new fact"})

    llm = ScriptedLLM([tool_call("read_memory", {"topic": "deploy"}), merge, DONE])
    with memory(root, llm) as mem:
        mem.topics.write("deploy", "- old fact")
        with mem.session() as s:
            work(s, 10)
            s.finish_task()
            assert s.last_memory_update is not None
            assert s.last_memory_update.writes[0].created is False
    assert (root / "memories" / "deploy.md").read_text() == "- old fact\n- new fact"
    # The instructions named the existing topic.
    assert "Existing topics: deploy." in llm.calls[0][0][-2]["content"]


def test_a_concurrent_change_is_not_overwritten(root: Path) -> None:
    """Another agent writes the topic between our read and our write: we must merge again."""
    other = TopicStore(root / "memories")
    merges: list[int] = []

    def merge(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not merges:
            other.write("deploy", "- old fact\n- their fact")  # lands after our first read
        merges.append(1)
        old = last_tool_text(messages)
        return tool_call("write_memory", {"topic": "deploy", "content": old + "\n- our fact"})

    llm = ScriptedLLM(
        [
            tool_call("read_memory", {"topic": "deploy"}),
            merge,  # refused: the file changed since it was read
            tool_call("read_memory", {"topic": "deploy"}),
            merge,
            DONE,
        ]
    )
    with memory(root, llm) as mem, mem.session() as s:
        mem.topics.write("deploy", "- old fact")
        work(s, 10)
        s.finish_task()
        result = s.last_memory_update
    assert result is not None and result.error is None and len(result.writes) == 1
    assert "changed by another agent" in last_tool_text(llm.calls[2][0])
    assert (root / "memories" / "deploy.md").read_text() == ("- old fact\n- their fact\n- our fact")


def test_limit_is_enforced_when_the_llm_ignores_it(root: Path) -> None:
    long = "\n".join(f"- detail {i}: " + "words " * 10 for i in range(300))
    llm = ScriptedLLM([tool_call("write_memory", {"topic": "deploy", "content": long}), DONE])
    with memory(root, llm, memory_update={"max_tokens_per_file": 100}) as mem, mem.session() as s:
        work(s, 10)
        s.finish_task()
        result = s.last_memory_update
    assert result is not None and result.truncated == ("deploy",)
    write = result.writes[0]
    assert write.tokens_before > 100 >= write.tokens_after
    stored = (root / "memories" / "deploy.md").read_text()
    assert HeuristicCounter().count_text(stored) <= 100
    assert long.startswith(stored.split("\n[... truncated")[0])
    assert "100 tokens" in llm.calls[0][0][-2]["content"]
    assert "over the 100-token limit" in last_tool_text(llm.calls[1][0])


def test_bad_tool_calls_come_back_as_errors(root: Path) -> None:
    bad_json = tool_call("write_memory", {})
    bad_json["tool_calls"][0]["function"]["arguments"] = "{not json"
    llm = ScriptedLLM(
        [
            bad_json,
            tool_call("write_memory", {"topic": "../escape", "content": "x"}),
            tool_call("write_memory", {"topic": "a"}),
            tool_call("read_memory", {"topic": 7}),
            tool_call("rm_rf", {}),
            tool_call("list_memories", {"extra": 1}),
            tool_call("write_memory", {"topic": "ok", "content": "fine"}),
            DONE,
        ]
    )
    with memory(root, llm, memory_update={"max_iterations": 8}) as mem, mem.session() as s:
        work(s, 10)
        s.finish_task()
        result = s.last_memory_update
    assert result is not None and result.error is None
    assert len(result.tool_errors) == 6
    assert result.topics == ("ok",)
    texts = [last_tool_text(call[0]) for call in llm.calls[1:7]]
    assert all(t.startswith("Error:") for t in texts)
    assert "JSON" in texts[0] and "escape" in texts[1] and "'content'" in texts[2]
    assert "rm_rf" in texts[4]
    assert sorted(p.name for p in (root / "memories").iterdir()) == ["ok.md"]
    assert not (root / "escape.md").exists()
    for messages, _ in llm.calls:
        assert openai_violations(messages, internal_fields=INTERNAL_FIELDS) == []


def test_the_loop_is_bounded(root: Path) -> None:
    llm = ScriptedLLM([tool_call("list_memories", {}) for _ in range(10)])
    with memory(root, llm, memory_update={"max_iterations": 3}) as mem, mem.session() as s:
        work(s, 10)
        s.finish_task()
        result = s.last_memory_update
    assert len(llm.calls) == 3
    assert result is not None and result.stopped == "max_iterations" and result.iterations == 3
    assert last_tool_text(llm.calls[1][0]) == "No topics yet."


def test_main_history_is_untouched(root: Path) -> None:
    llm = ScriptedLLM(
        [tool_call("write_memory", {"topic": "deploy", "content": "x"}), raising(RuntimeError())]
    )
    with memory(root, llm) as mem:
        with mem.session(session_id="s1") as s:
            work(s, 12)
            before = snapshot(s)
            s.finish_task()
            assert snapshot(s) == before
        with mem.session(session_id="s1") as s:
            assert snapshot(s) == before  # nothing of the fork was stored either


def test_payloads_are_provider_valid(root: Path) -> None:
    llm = ScriptedLLM(
        [
            tool_call("list_memories", {}),
            tool_call("write_memory", {"topic": "deploy", "content": "x"}),
            DONE,
        ]
    )
    with memory(root, llm) as mem, mem.session() as s:
        work(s, 10)
        # The task ends on a dangling tool call and a lone tool result: repair must fix both.
        s.append(tool_call("bash", {"cmd": "ls"}, call_id="dangling"))
        s.append({"role": "tool", "tool_call_id": "nobody", "content": "orphan"})
        s.finish_task()
        assert s.last_memory_update is not None and s.last_memory_update.error is None
    assert len(llm.calls) == 3
    for messages, _ in llm.calls:
        assert openai_violations(messages, internal_fields=INTERNAL_FIELDS) == []
        system, turns = to_anthropic(messages)
        assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []


def test_fork_fits_the_window(root: Path) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session(context_window=2000) as s:
        work(s, 60)
        s.finish_task()
        counter = s.token_counter
        result = s.last_memory_update
    assert result is not None and result.error is None
    messages, tools = llm.calls[0]
    # The first request, tools included, leaves room for the update's own turns.
    sent = count_messages(messages, counter) + tools_tokens(tools, counter)
    assert sent == result.first_request_tokens <= 2000 - 200
    assert messages[0] == {"role": "system", "content": "You are a coding agent."}
    assert "# Memory update" in messages[-2]["content"]
    assert "make step59" in json.dumps(messages) and 'make step0"' not in json.dumps(messages)
    assert openai_violations(messages, internal_fields=INTERNAL_FIELDS) == []


# ---------------------------------------------------------------------------- failures


def test_llm_failure_does_not_escape(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    llm = ScriptedLLM(
        [
            tool_call("write_memory", {"topic": "first", "content": "kept"}),
            raising(RuntimeError("provider down")),
        ]
    )
    with memory(root, llm) as mem, mem.session(session_id="sess") as s:
        task = work(s, 12)
        with caplog.at_level(logging.WARNING, logger="agentmem.memory_updater"):
            assert s.finish_task() == task
        result = s.last_memory_update
        assert result is not None and result.stopped == "error"
        assert result.error is not None and "provider down" in result.error
        assert result.topics == ("first",)
        s.append({"role": "user", "content": "still works"})  # the session goes on
    assert (root / "memories" / "first.md").read_text() == "kept"
    logged = [r for r in caplog.records if r.name == "agentmem.memory_updater"]
    assert logged and "sess" in logged[0].getMessage()
    assert f"task {task}" in logged[0].getMessage() and "iteration 2" in logged[0].getMessage()


def test_unusable_reply_and_storage_failure_are_reported(root: Path) -> None:
    llm = ScriptedLLM([{"role": "user", "content": "not an assistant"}])
    with memory(root, llm) as mem, mem.session() as s:
        work(s, 10)
        s.finish_task()
        assert s.last_memory_update is not None
        assert "role 'user'" in (s.last_memory_update.error or "")
    llm = ScriptedLLM([tool_call("write_memory", {"topic": "a", "content": "x"}), DONE])
    with memory(root, llm) as mem, mem.session() as s:
        (root / "memories").write_text("a file where the directory should be")
        work(s, 10)
        s.finish_task()
        result = s.last_memory_update
    assert result is not None and result.error is not None
    assert "tool write_memory failed" in result.error and len(llm.calls) == 1


def test_keyboard_interrupt_escapes(root: Path) -> None:
    llm = ScriptedLLM([raising(KeyboardInterrupt())])
    events = Events()
    with memory(root, llm, reporter=events) as mem:
        with mem.session(session_id="s1") as s:
            task = work(s, 12)
            with pytest.raises(KeyboardInterrupt):
                s.finish_task()
            assert s.open_task_id is None  # the task was finished and saved first
        with mem.session(session_id="s1") as s:
            assert s.open_task_id is None and s.task_iterations(task) == 12
    assert [e for e, _ in events.events] == ["memory_update_started", "memory_update_finished"]
    assert "KeyboardInterrupt" in events.events[1][1]["error"]


# ---------------------------------------------------------------------------- sync and async


def script() -> list[Any]:
    def merge(messages: list[dict[str, Any]]) -> dict[str, Any]:
        content = last_tool_text(messages) + "\n- b"
        return tool_call("write_memory", {"topic": "deploy", "content": content}, call_id="m3")

    return [
        {
            **tool_call("write_memory", {"topic": "deploy", "content": "- a"}, call_id="m1"),
            "usage": USAGE,
        },
        {**tool_call("read_memory", {"topic": "deploy"}, call_id="m2"), "usage": USAGE},
        merge,
        tool_call("write_memory", {"topic": "testing", "content": "x " * 20000}, call_id="m4"),
        DONE,
    ]


def comparable(result: MemoryUpdateResult | None) -> tuple[Any, ...]:
    assert result is not None
    return (
        result.writes,
        result.iterations,
        result.requests,
        result.error,
        result.tool_errors,
        result.stopped,
        result.answer,
    )


def test_sync_and_async_llms_give_the_same_result(tmp_path: Path) -> None:
    sync_llm = ScriptedLLM(script())
    with memory(tmp_path / "a", sync_llm) as mem, mem.session() as s:
        work(s, 10)
        s.finish_task()
        sync_result = s.last_memory_update

    async_llm = AsyncLLM(ScriptedLLM(script()))

    async def main() -> MemoryUpdateResult | None:
        with memory(tmp_path / "b", async_llm) as mem, mem.session() as s:
            task = work(s, 10)
            assert await s.afinish_task() == task
            return s.last_memory_update

    async_result = asyncio.run(main())
    assert comparable(sync_result) == comparable(async_result)
    assert sync_result is not None and sync_result.truncated == ("testing",)
    for name in ("deploy.md", "testing.md"):
        assert (tmp_path / "a/memories" / name).read_text() == (
            tmp_path / "b/memories" / name
        ).read_text()
    assert (tmp_path / "a/memories/deploy.md").read_text() == "- a\n- b"
    assert [m for m, _ in sync_llm.calls] == [m for m, _ in async_llm.calls]


def test_sync_finish_with_an_async_llm_reports(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm = AsyncLLM(ScriptedLLM([DONE]))
    with memory(root, llm) as mem, mem.session() as s:
        task = work(s, 12)
        with caplog.at_level(logging.WARNING, logger="agentmem.memory_updater"):
            assert s.finish_task() == task
        result = s.last_memory_update
    assert result is not None and result.ran and "afinish_task" in (result.error or "")
    assert llm.calls == []
    assert any("afinish_task" in r.getMessage() for r in caplog.records)


def test_afinish_task_with_a_sync_llm(root: Path) -> None:
    llm = ScriptedLLM([tool_call("write_memory", {"topic": "t", "content": "c"}), DONE])

    async def main() -> None:
        with memory(root, llm) as mem, mem.session() as s:
            work(s, 10)
            await s.afinish_task()

    asyncio.run(main())
    assert (root / "memories" / "t.md").read_text() == "c"


# ---------------------------------------------------------------------------- cost, progress


def test_cost_is_reported_apart_and_survives_a_resume(root: Path) -> None:
    llm = ScriptedLLM(
        [
            {**tool_call("write_memory", {"topic": "d", "content": "c"}), "usage": USAGE},
            {**DONE, "usage": USAGE},
        ]
    )
    with memory(root, llm) as mem:
        with mem.session(session_id="s1") as s:
            task = work(s, 12, cost=0.01)
            s.finish_task()
            result = s.last_memory_update
            usage = s.usage
            assert s.task_iterations(task) == 12  # the update's calls are not the task's
        with mem.session(session_id="s1") as s:
            assert s.usage == usage
            assert s.task_iterations(task) == 12
        stored = mem.sessions.load("s1").billing
    assert result is not None and result.cost_usd == pytest.approx(0.5)
    assert (result.prompt_tokens, result.completion_tokens) == (2000, 100)
    assert usage.memory_update_requests == 2 and usage.requests == 14
    assert usage.memory_update_cost_usd == pytest.approx(0.5)
    assert usage.cost_usd == pytest.approx(12 * 0.01 + 0.5)
    assert usage.memory_update_prompt_tokens == 2000 and usage.prompt_tokens == 1200 + 2000
    assert usage.completion_tokens - usage.memory_update_completion_tokens == 120
    assert [b.kind for b in stored].count("memory_update") == 2


def test_progress_events(root: Path) -> None:
    events = Events()
    llm = ScriptedLLM([tool_call("write_memory", {"topic": "d", "content": "c"}), DONE])
    with memory(root, llm, reporter=events) as mem, mem.session(session_id="s") as s:
        task = work(s, 10)
        s.finish_task()
        work(s, 2)
        s.finish_task()  # skipped: no events
    assert events.events == [
        ("memory_update_started", {"session_id": "s", "task_id": task}),
        (
            "memory_update_finished",
            {
                "session_id": "s",
                "task_id": task,
                "topics": ["d"],
                "truncated": [],
                "iterations": 2,
                "cost_usd": 0.0,
                "error": None,
            },
        ),
    ]


def test_a_failing_reporter_is_ignored(root: Path) -> None:
    class Broken:
        def report(self, event: str, data: Mapping[str, Any]) -> None:
            raise ValueError("ui crashed")

    llm = ScriptedLLM([DONE])
    with memory(root, llm, reporter=Broken()) as mem, mem.session() as s:
        work(s, 10)
        s.finish_task()
        assert s.last_memory_update is not None and s.last_memory_update.error is None


# ---------------------------------------------------------------------------- later sessions


def test_next_session_gets_the_topics_in_its_system_prompt(root: Path) -> None:
    llm = ScriptedLLM(
        [tool_call("write_memory", {"topic": "deploy", "content": "Run make deploy."}), DONE]
    )
    with memory(root, llm) as mem:
        with mem.session() as s:
            work(s, 12)
            s.finish_task()
            # Injected once per open: the running session's prefix does not change.
            assert "Run make deploy." not in json.dumps(s.context())
        with mem.session() as s2:
            s2.append({"role": "system", "content": "You are a coding agent."})
            s2.start_task("hi")
            payload = s2.context()
            assert "## deploy\nRun make deploy." in payload[0]["content"]
            assert payload[0]["role"] == "system"
            assert s2.topics_prompt in payload[0]["content"]
            assert s2.context() == payload  # stable within the session
    for kwargs in ({"memory_update": {"inject_topics": False}}, {"incognito": True}):
        with memory(root, None, **kwargs) as mem, mem.session() as s3:
            s3.start_task("hi")
            assert s3.topics_prompt == ""
            assert "Run make deploy." not in json.dumps(s3.context())


# ---------------------------------------------------------------------------- property


@settings(max_examples=scaled(15), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("write"),
                st.sampled_from(["a", "b", "deploy", "../x", ""]),
                st.text(max_size=40),
            ),
            st.tuples(st.just("read"), st.sampled_from(["a", "b", "nope"]), st.just("")),
            st.tuples(st.just("list"), st.just(""), st.just("")),
        ),
        max_size=7,
    )
)
def test_files_follow_the_model_calls(tmp_path_factory: pytest.TempPathFactory, calls: Any) -> None:
    """Whatever the model calls, the topic files are the last valid write of each topic."""
    store = TopicStore(tmp_path_factory.mktemp("t") / "memories")
    replies: list[Any] = []
    expected: dict[str, str] = {}
    for kind, topic, content in calls:
        if kind == "write":
            replies.append(tool_call("write_memory", {"topic": topic, "content": content}))
            if topic in ("a", "b", "deploy"):
                expected[topic] = content
        elif kind == "read":
            replies.append(tool_call("read_memory", {"topic": topic}))
        else:
            replies.append(tool_call("list_memories", {}))
    replies.append(DONE)
    llm = ScriptedLLM(replies)
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    original = copy.deepcopy(history)
    result = MemoryUpdater(llm, store).run(history)  # type: ignore[arg-type]
    assert result.error is None and result.stopped == "answered"
    assert history == original
    assert {i.topic: store.read(i.topic) for i in store.list()} == expected
    assert len(result.tool_errors) == sum(
        1 for k, t, _ in calls if k == "write" and t in ("../x", "")
    )
    llm.assert_complete()


def test_tool_specs_are_fresh_copies() -> None:
    specs = tool_specs()
    specs[0]["function"]["name"] = "changed"
    assert tool_specs()[0]["function"]["name"] == "list_memories"


# ------------------------------------------------------------------ the fork continues the task

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
}
HOST_TOOLS = [BASH, *openai_tools(), *tool_specs()]  # the memory tool and the update tools
MEMORY_TOOL_ONLY = [BASH, *openai_tools()]  # memory_operations, with its topic operations


def older_memory_tool() -> dict[str, Any]:
    """A memory_operations spec without the topic operations (an older agentmem's)."""
    (spec,) = openai_tools()
    enum = spec["function"]["parameters"]["properties"]["operation"]["enum"]
    enum[:] = [op for op in enum if op not in ("list_topics", "read_topic", "write_topic")]
    return spec


STEP_OUTPUT = "building module and running the checks, all green. " * 24


def hosted_task(s: Session, iterations: int, *, answer: bool = True) -> list[dict[str, Any]]:
    """A host's agent loop: ``context()`` before every model call. Returns the last payload."""
    if not len(s.history):
        s.append({"role": "system", "content": "You are a coding agent."})
    s.start_task("Deploy the app to staging.")
    payload: list[dict[str, Any]] = []
    for i in range(iterations):
        payload = s.context()
        s.record_usage(100, 10, 0.0)
        s.append(tool_call("bash", {"cmd": f"make step{i}"}, call_id=f"c{i}"))
        s.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"{i}: {STEP_OUTPUT}"})
    payload = s.context()
    if answer:
        s.append({"role": "assistant", "content": "Deployed with `make deploy ENV=staging`."})
    return copy.deepcopy(payload)


def prefix_tokens(messages: list[dict[str, Any]], s: Session) -> int:
    return sum(count_message(m, s.token_counter) for m in messages)


@pytest.mark.parametrize("answer", [True, False])
def test_the_fork_continues_the_tasks_last_request(root: Path, answer: bool) -> None:
    """B4: the first request is the task's last payload unchanged, the host's tools, then new."""
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session() as s:
        last = hosted_task(s, 12, answer=answer)
        s.finish_task(tools=HOST_TOOLS)
        result = s.last_memory_update
        shared = prefix_tokens(last, s)
    messages, tools = llm.calls[0]
    new = messages[len(last) :]
    assert messages[: len(last)] == last  # deep equality: system prompt and all, unchanged
    assert tools == HOST_TOOLS
    # Only the task's final answer (when it gave one), the instructions and the proceed turn.
    expected = [{"role": "assistant", "content": "Deployed with `make deploy ENV=staging`."}]
    assert new[:-2] == (expected if answer else [])
    assert new[-2]["role"] == "system" and new[-2]["content"].startswith("# Memory update")
    assert new[-1] == {"role": "user", "content": PROCEED}
    assert result is not None and result.error is None and result.cache_miss is None
    assert result.shared_prefix_messages == len(last)
    assert result.shared_prefix_tokens == shared > 0
    assert openai_violations(messages, internal_fields=INTERNAL_FIELDS) == []


def test_the_first_request_starts_with_the_last_payload(root: Path) -> None:
    """The same check through the API the old code had (no tools): the messages only."""
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session() as s:
        last = hosted_task(s, 10, answer=False)
        s.finish_task()
    messages = llm.calls[0][0]
    assert messages[: len(last)] == last
    assert len(messages) == len(last) + 2 and messages[-1] == {"role": "user", "content": PROCEED}


def test_later_turns_append_after_the_first_request(root: Path) -> None:
    llm = ScriptedLLM(
        [
            tool_call("list_memories", {}),
            tool_call("write_memory", {"topic": "deploy", "content": "make deploy"}),
            DONE,
        ]
    )
    with memory(root, llm) as mem, mem.session() as s:
        hosted_task(s, 10)
        s.finish_task(tools=HOST_TOOLS)
    first = llm.calls[0][0]
    for later, tools in llm.calls[1:]:
        assert later[: len(first)] == first and tools == HOST_TOOLS
    assert [m["role"] for m in llm.calls[2][0][len(first) :]] == ["assistant", "tool"] * 2
    assert (root / "memories" / "deploy.md").read_text() == "make deploy"


@pytest.mark.parametrize(
    ("tools", "reason"),
    [
        ([BASH, older_memory_tool()], "lack list_memories, read_memory, write_memory"),
        ([BASH, *tool_specs()[:2]], "lack write_memory"),
        (None, "sent no tools"),
    ],
)
def test_tools_without_the_update_tools_are_a_reported_miss(
    root: Path, tools: list[dict[str, Any]] | None, reason: str
) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session() as s:
        last = hosted_task(s, 10)
        s.finish_task(tools=tools)
        result = s.last_memory_update
    messages, sent_tools = llm.calls[0]
    assert sent_tools == tool_specs()
    assert messages[: len(last)] == last  # the messages are still the task's
    assert result is not None and result.error is None
    assert result.cache_miss is not None and reason in result.cache_miss
    # A different tool set changes the start of the request: a provider cache shares nothing.
    assert (result.shared_prefix_messages, result.shared_prefix_tokens) == (0, 0)


def test_a_small_window_still_sees_the_task_and_its_summary(root: Path) -> None:
    """4,000-token window, 26-message task: the fork sees what the task's last request saw."""
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session(context_window=4000) as s:
        last = hosted_task(s, 12, answer=False)
        assert len(s.history) == 26
        s.finish_task()
        result = s.last_memory_update
        shared = prefix_tokens(last, s)
    messages = llm.calls[0][0]
    text = json.dumps(messages)
    assert "Deploy the app to staging." in text  # the task's request
    assert "<thread_summary>" in text  # the summary of what the window trimmed
    assert messages[: len(last)] == last
    assert result is not None and result.error is None
    assert result.first_request_tokens <= 4000 - 400
    # No tools were given: the fork brings its own, which a provider cache cannot share.
    assert result.cache_miss is not None and "sent no tools" in result.cache_miss
    assert shared > 0 and result.shared_prefix_tokens == 0


def test_an_overflowing_request_is_rebuilt_by_the_pipeline(root: Path) -> None:
    """The last payload plus the update would overflow: rebuilt smaller, nothing shared."""
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session(context_window=2000) as s:
        last = hosted_task(s, 12, answer=False)
        window, yarn = s.window.state(), s.yarn.state()
        checkpoints = sorted((root / "memory").iterdir())
        s.finish_task(tools=HOST_TOOLS)
        result = s.last_memory_update
        # The rebuild ran on a scratch copy: the session's window and summary did not move.
        assert s.window.state() == window and s.yarn.state() == yarn
        assert sorted((root / "memory").iterdir()) == checkpoints
        assert s.context() == last
    messages, tools = llm.calls[0]
    assert result is not None and result.error is None
    assert result.cache_miss is not None and "rebuilt by the context pipeline" in result.cache_miss
    assert (result.shared_prefix_messages, result.shared_prefix_tokens) == (0, 0)
    assert tools == HOST_TOOLS
    assert result.first_request_tokens <= 2000 - 200
    assert messages[0] == last[0] and "Deploy the app to staging." in json.dumps(messages)
    assert messages[-1] == {"role": "user", "content": PROCEED}
    assert openai_violations(messages, internal_fields=INTERNAL_FIELDS) == []


def test_a_rewritten_history_is_not_continued(root: Path) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session() as s:
        last = hosted_task(s, 10, answer=False)
        s.history.pop_last()  # the task's last tool result is taken back after the request
        s.finish_task(tools=HOST_TOOLS)
        result = s.last_memory_update
    messages = llm.calls[0][0]
    assert result is not None and result.error is None
    assert result.cache_miss is not None and "rewritten" in result.cache_miss
    assert result.shared_prefix_tokens == 0
    assert "9: building" not in json.dumps(messages) and "9: building" in json.dumps(last)


def test_async_finish_continues_the_same_request(tmp_path: Path) -> None:
    sync_llm = ScriptedLLM([DONE])
    with memory(tmp_path / "a", sync_llm) as mem, mem.session() as s:
        hosted_task(s, 10)
        s.finish_task(tools=HOST_TOOLS)
        sync_result = s.last_memory_update
    async_llm = AsyncLLM(ScriptedLLM([DONE]))

    async def main() -> MemoryUpdateResult | None:
        with memory(tmp_path / "b", async_llm) as mem, mem.session() as s:
            hosted_task(s, 10)
            await s.afinish_task(tools=HOST_TOOLS)
            return s.last_memory_update

    async_result = asyncio.run(main())
    assert async_llm.calls == sync_llm.calls
    assert sync_result is not None and async_result is not None
    assert async_result.shared_prefix_tokens == sync_result.shared_prefix_tokens > 0


def test_bad_tools_are_refused_before_the_task_ends(root: Path) -> None:
    with memory(root, ScriptedLLM([])) as mem, mem.session() as s:
        task = hosted_task(s, 1) and s.open_task_id
        for bad in ("bash", {"type": "function"}, [1, 2]):
            with pytest.raises(InvalidArgumentError, match="tools must be"):
                s.finish_task(tools=bad)  # type: ignore[arg-type]
        assert s.open_task_id == task


@settings(
    max_examples=scaled(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    window=st.sampled_from([2500, 4000, 16000]),
    iterations=st.integers(min_value=10, max_value=24),
    answer=st.booleans(),
    host_tools=st.sampled_from([HOST_TOOLS, MEMORY_TOOL_ONLY, [BASH], None]),
)
def test_the_first_request_continues_or_reports_why(
    tmp_path_factory: pytest.TempPathFactory,
    window: int,
    iterations: int,
    answer: bool,
    host_tools: list[dict[str, Any]] | None,
) -> None:
    """Whatever the window and task: the fork continues the last payload, or says why not;
    either way its first request fits the window with room left, and is provider-valid."""
    root = tmp_path_factory.mktemp("m") / ".agentmem"
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session(context_window=window) as s:
        last = hosted_task(s, iterations, answer=answer)
        s.finish_task(tools=host_tools)
        result = s.last_memory_update
        shared = prefix_tokens(last, s)
        room = min(4000, window // 10)
        counter = s.token_counter
    assert result is not None and result.error is None
    messages, tools = llm.calls[0]
    continued = messages[: len(last)] == last
    if result.cache_miss is None:
        assert continued and tools == host_tools
        assert (result.shared_prefix_messages, result.shared_prefix_tokens) == (len(last), shared)
    else:
        assert result.shared_prefix_tokens == 0
    if continued and host_tools in (HOST_TOOLS, MEMORY_TOOL_ONLY):
        assert result.cache_miss is None
    sent = count_messages(messages, counter) + tools_tokens(tools, counter)
    assert sent == result.first_request_tokens <= window - room
    assert "Deploy the app to staging." in json.dumps(messages)
    assert openai_violations(messages, internal_fields=INTERNAL_FIELDS) == []
    system, turns = to_anthropic(messages)
    assert anthropic_violations(system, turns, internal_fields=INTERNAL_FIELDS) == []


def test_the_hosts_memory_tool_does_the_update(root: Path) -> None:
    """A host that sends memory_operations keeps its tools: the update uses its topic ops."""
    llm = ScriptedLLM(
        [
            tool_call("memory_operations", {"operation": "list_topics"}),
            tool_call("memory_operations", {"operation": "store", "key": "k", "content": "x"}),
            tool_call(
                "memory_operations",
                {"operation": "write_topic", "topic": "deploy", "content": "make deploy"},
            ),
            tool_call("write_memory", {"topic": "direct", "content": "also fine"}),
            DONE,
        ]
    )
    with memory(root, llm) as mem, mem.session() as s:
        last = hosted_task(s, 10)
        s.finish_task(tools=MEMORY_TOOL_ONLY)
        result = s.last_memory_update
        assert mem.notes.list() == []  # only the topic operations run during the update
    messages, tools = llm.calls[0]
    assert tools == MEMORY_TOOL_ONLY and messages[: len(last)] == last
    assert "memory_operations tool's topic operations" in messages[-2]["content"]
    assert result is not None and result.error is None and result.cache_miss is None
    assert result.shared_prefix_messages == len(last) and result.shared_prefix_tokens > 0
    assert last_tool_text(llm.calls[1][0]) == "No topics yet."
    assert "runs only list_topics, read_topic, write_topic" in last_tool_text(llm.calls[2][0])
    assert result.topics == ("deploy", "direct")
    assert (root / "memories" / "deploy.md").read_text() == "make deploy"


def test_memory_tools_dispatch_the_topic_operations(root: Path) -> None:
    with memory(root, None) as mem:
        write = {"operation": "write_topic", "topic": "deploy", "content": "make deploy"}
        out = mem.tools.dispatch(write)
        assert out["ok"] and out["result"]["created"] is True
        listed = mem.tools.dispatch({"operation": "list_topics"})
        assert [t["topic"] for t in listed["result"]["topics"]] == ["deploy"]
        read = mem.tools.dispatch({"operation": "read_topic", "topic": "deploy"})
        assert read["result"] == {"topic": "deploy", "content": "make deploy"}
        bad = mem.tools.dispatch({"operation": "write_topic", "topic": "../x", "content": "x"})
        assert bad["ok"] is False and "x" in bad["error"]
    assert (root / "memories" / "deploy.md").read_text() == "make deploy"


def test_an_anthropic_hosts_request_is_continued_too(root: Path) -> None:
    """The fork speaks the LLM protocol (OpenAI shape); the Anthropic codec of its first
    request starts with the Anthropic payload the task sent: same system, same turns."""
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session() as s:
        hosted_task(s, 10, answer=False)
        system, turns = copy.deepcopy(s.context(provider="anthropic"))
        s.finish_task(tools=HOST_TOOLS)
        result = s.last_memory_update
    assert result is not None and result.cache_miss is None
    fork_system, fork_turns = to_anthropic(llm.calls[0][0])
    assert fork_system == system
    # The last turn (tool results) gains the instructions and "Please proceed." as text.
    assert fork_turns[: len(turns) - 1] == turns[:-1]
    last, fork_last = turns[-1], fork_turns[len(turns) - 1]
    assert fork_last["role"] == last["role"] == "user"
    assert fork_last["content"][: len(last["content"])] == last["content"]


def test_a_window_too_small_for_the_update_is_reported(root: Path) -> None:
    llm = ScriptedLLM([DONE])
    with memory(root, llm) as mem, mem.session(context_window=700) as s:
        hosted_task(s, 10, answer=False)
        s.finish_task(tools=HOST_TOOLS)
        result = s.last_memory_update
        s.append({"role": "user", "content": "the session goes on"})
    assert llm.calls == []
    assert result is not None and result.stopped == "error" and result.ran
    assert result.error is not None and "cannot fit the update into the window" in result.error
    assert result.cache_miss is not None and "700-token window" in result.cache_miss


def test_a_failing_or_async_rebuild_is_reported_not_raised(tmp_path: Path) -> None:
    store = TopicStore(tmp_path / "memories")
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]

    def broken(reserve: int) -> Any:
        raise RuntimeError(f"no room for {reserve}")

    async def later(reserve: int) -> Any:
        raise AssertionError("never awaited by a sync run")

    llm = ScriptedLLM([])
    updater = MemoryUpdater(llm, store, context_window=4000)
    result = updater.run(history, request="no request here", rebuild=broken)  # type: ignore[arg-type]
    assert result.error is not None and "no room for" in result.error
    assert result.cache_miss == "no request here"
    result = updater.run(history, request="no request here", rebuild=later)  # type: ignore[arg-type]
    assert result.error is not None and "use arun" in result.error
    assert llm.calls == []
