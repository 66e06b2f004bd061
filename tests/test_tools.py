"""memory_operations: both schema formats, a dispatcher that never raises, a scripted loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem.testing import ScriptedLLM, tool_call
from agentmem.tokens import HeuristicCounter
from agentmem.tools import OPERATIONS, TOOL_NAME, MemoryTools, anthropic_tools, openai_tools


def test_schemas_in_both_formats() -> None:
    (oa,) = openai_tools()
    (an,) = anthropic_tools()
    assert oa["type"] == "function"
    assert oa["function"]["name"] == an["name"] == TOOL_NAME
    assert oa["function"]["parameters"] == an["input_schema"]
    schema = an["input_schema"]
    assert schema["properties"]["operation"]["enum"] == list(OPERATIONS)
    assert set(OPERATIONS) == {
        "store", "retrieve", "search", "list", "delete", "add_discovery", "add_solution",
        "add_pattern", "prune_ltm", "ltm_stats", "recall_sessions", "list_topics",
        "read_topic", "write_topic",
    }  # fmt: skip
    json.dumps([oa, an])  # serialisable


def _run_loop(mem: agentmem.Memory, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A host loop: the model calls tools, the host dispatches, until a plain answer."""
    llm = ScriptedLLM(
        [*[tool_call(TOOL_NAME, c) for c in calls], {"role": "assistant", "content": "done"}]
    )
    results = []
    with mem.session(name="tools", context_window=32_000) as s:
        s.start_task("remember things")
        while True:
            reply = llm(s.context(), tools=mem.tools.openai())
            s.record_usage(reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"])
            reply.pop("usage")
            s.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                message = mem.tools.handle(call)
                s.append(message)
                results.append(json.loads(message["content"]))
        s.finish_task()
    llm.assert_complete()
    assert llm.calls[0][1] == openai_tools()
    return results


def test_every_operation_through_a_scripted_tool_loop(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "r", token_counter=HeuristicCounter())
    calls = [
        {"operation": "store", "key": "plan", "content": "ship the LTM"},
        {"operation": "retrieve", "key": "plan"},
        {"operation": "list"},
        {"operation": "search", "query": "ship"},
        {"operation": "add_discovery", "fact": "CI runs on 2 cores", "confidence": 0.9},
        {"operation": "add_solution", "error": "lock timeout", "solution": "close session"},
        {"operation": "add_pattern", "pattern": "atomic writes everywhere", "examples": ["a.py"]},
        {"operation": "add_discovery", "fact": "cores: CI runs on 2"},
        {"operation": "ltm_stats"},
        {"operation": "prune_ltm", "max_age_days": 30, "min_confidence": 0.75},
        {"operation": "recall_sessions", "query": "ship"},
        {"operation": "delete", "key": "plan"},
        {"operation": "store", "key": "../../etc/passwd", "content": "x"},
        {"operation": "add_discovery", "fact": "x", "confidence": "high"},
        {"operation": "explode"},
    ]
    r = _run_loop(mem, calls)
    assert [x["ok"] for x in r] == [True] * 12 + [False] * 3
    # recall_sessions searches every stored session, this one included; the only "ship" in
    # it is in the memory tool's own calls and results, which are never recall hits.
    assert r[10]["result"]["hits"] == []
    assert r[1]["result"] == {"key": "plan", "content": "ship the LTM"}
    assert r[2]["result"] == {"keys": ["plan"]}
    assert r[3]["result"]["notes"][0]["key"] == "plan"
    assert r[4]["result"]["applications"] == 1
    assert r[7]["result"]["applications"] == 2  # confirmed, not duplicated
    assert r[7]["result"]["id"] == r[4]["result"]["id"]
    assert r[8]["result"]["total"] == 3
    assert [e["text"] for e in r[9]["result"]["removed"]] == ["atomic writes everywhere"]
    assert r[11]["result"] == {"key": "plan", "deleted": True}
    assert "refusing path" in r[12]["error"]
    assert "confidence" in r[13]["error"]
    assert "unknown operation 'explode'" in r[14]["error"]
    assert mem.notes.list() == []
    assert {e.text for e in mem.ltm.entries()} == {"CI runs on 2 cores", "lock timeout"}
    assert not (tmp_path / "etc").exists()
    mem.close()


class _RecallingMemory:
    """Stands in for a Memory that has recall (the other half of issue 7)."""

    def __init__(self, mem: agentmem.Memory) -> None:
        self.notes, self.ltm = mem.notes, mem.ltm
        self.asked: list[tuple[str, Any, int]] = []

    def recall(
        self, query: str, max_sessions: int | None = None, max_results: int = 5
    ) -> list[Any]:
        self.asked.append((query, max_sessions, max_results))
        return [{"session_id": "s1", "index": 3, "role": "user", "score": 4.5, "preview": query}]


def test_recall_sessions_calls_memory_recall(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / "r", incognito=True)
    host = _RecallingMemory(mem)
    out = MemoryTools(host).dispatch(
        {"operation": "recall_sessions", "query": "x", "max_results": 2}
    )
    assert out == {
        "ok": True,
        "operation": "recall_sessions",
        "result": {
            "hits": [{"session_id": "s1", "index": 3, "role": "user", "score": 4.5, "preview": "x"}]
        },
    }
    assert host.asked == [("x", None, 2)]


@pytest.mark.parametrize(
    "arguments",
    [
        "not json",
        "[1, 2]",
        '{"operation": "store"}',
        '{"operation": "store", "key": "k", "content": "c", "extra": 1}',
        {"operation": "store", "key": 5, "content": "c"},
        {"operation": "retrieve", "key": "a/b"},
        {"operation": "add_pattern", "pattern": "p", "confidence": float("nan")},
        {"operation": "add_pattern", "pattern": "p", "examples": "a.py"},
        {"operation": "prune_ltm", "max_age_days": -1},
        {"operation": None},
        {},
        42,
        None,
    ],
)
def test_bad_arguments_come_back_as_errors(tmp_path: Path, arguments: Any) -> None:
    mem = agentmem.Memory(root=tmp_path / "r")
    out = mem.tools.dispatch(arguments)
    assert out["ok"] is False
    assert isinstance(out["error"], str) and out["error"]
    json.dumps(out)
    mem.close()


@settings(max_examples=scaled(100))
@given(
    args=st.dictionaries(
        st.sampled_from(["operation", "key", "content", "query", "fact", "confidence", "examples"]),
        st.one_of(
            st.sampled_from(OPERATIONS),
            st.text(max_size=20),
            st.integers(),
            st.floats(),
            st.none(),
            st.lists(st.text(max_size=5), max_size=3),
        ),
    )
)
def test_dispatch_never_raises(args: dict[str, Any]) -> None:
    mem = agentmem.Memory(incognito=True)
    out = mem.tools.dispatch(args)
    json.dumps(out)
    assert isinstance(out["ok"], bool)


def test_handle_refuses_other_tools(tmp_path: Path) -> None:
    mem = agentmem.Memory(incognito=True)
    message = mem.tools.handle(tool_call("read_file", {"path": "x"})["tool_calls"][0])
    assert message["role"] == "tool"
    assert json.loads(message["content"])["ok"] is False
    assert mem.tools.anthropic() == anthropic_tools()


class _BrokenRecall(_RecallingMemory):
    def recall(
        self, query: str, max_sessions: int | None = None, max_results: int = 5
    ) -> list[Any]:
        raise RuntimeError("index gone")


def test_a_failing_host_recall_is_reported_not_raised(tmp_path: Path) -> None:
    host = _BrokenRecall(agentmem.Memory(incognito=True))
    out = MemoryTools(host).dispatch({"operation": "recall_sessions", "query": "x"})
    assert out["ok"] is False
    assert "index gone" in out["error"]
