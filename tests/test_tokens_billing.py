"""Issue 18: every billing path keeps the cached parts of a prompt apart.

The memory updater bills its own model calls: they go through the same usage
parser as ``Session.record_usage`` (Anthropic's cache reads and writes,
DeepSeek's cache hits, OpenAI's cached tokens), so the totals include them
and the billing records keep them apart. The session export (JSON and HTML)
carries the cached fields of each billing record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentmem import Memory, Session
from agentmem.memory_updater import RequestUsage
from agentmem.testing import ScriptedLLM, tool_call

DONE = {"role": "assistant", "content": "Memory updated."}
# Anthropic with prompt caching: input_tokens is only the uncached part.
ANTHROPIC = {
    "input_tokens": 40,
    "cache_creation_input_tokens": 300,
    "cache_read_input_tokens": 2_000,
    "output_tokens": 25,
}
DEEPSEEK = {
    "prompt_tokens": 1_500,
    "completion_tokens": 30,
    "prompt_cache_hit_tokens": 1_200,
    "prompt_cache_miss_tokens": 300,
}
OPENAI = {
    "prompt_tokens": 900,
    "completion_tokens": 5,
    "prompt_tokens_details": {"cached_tokens": 512},
}


def work(s: Session, iterations: int) -> int:
    s.append({"role": "system", "content": "You are a coding agent."})
    task = s.start_task("Deploy the app to staging.")
    for i in range(iterations):
        s.append(tool_call("bash", {"cmd": f"make step{i}"}, call_id=f"c{i}"))
        s.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"ok {i}"})
        s.record_usage(100, 10, 0.0)
    s.append({"role": "assistant", "content": "Deployed."})
    return task


@pytest.mark.parametrize(
    ("usage", "prompt", "cached", "written"),
    [(ANTHROPIC, 2_340, 2_000, 300), (DEEPSEEK, 1_500, 1_200, 0), (OPENAI, 900, 512, 0)],
)
def test_request_usage_keeps_the_cached_parts(
    usage: dict[str, Any], prompt: int, cached: int, written: int
) -> None:
    got = RequestUsage.of({"role": "assistant", "content": "x", "usage": usage})
    assert (got.prompt_tokens, got.cached_prompt_tokens, got.cache_write_tokens) == (
        prompt,
        cached,
        written,
    )
    assert RequestUsage.of({"role": "assistant"}) == RequestUsage(0, 0, 0.0, 0, 0)


def test_memory_update_bills_the_cached_parts_apart(tmp_path: Path) -> None:
    """Anthropic usage on the update's calls: totals include the cache, records keep it apart."""
    llm = ScriptedLLM(
        [
            {**tool_call("write_memory", {"topic": "d", "content": "c"}), "usage": ANTHROPIC},
            {**DONE, "usage": DEEPSEEK},
        ]
    )
    root = tmp_path / ".agentmem"
    with Memory(root=root, working_dir=tmp_path, llm=llm) as mem:
        with mem.session(session_id="s1") as s:
            work(s, 12)
            s.finish_task()
            result = s.last_memory_update
            usage = s.usage
        stored = [b for b in mem.sessions.load("s1").billing if b.kind == "memory_update"]
    assert result is not None and result.ran
    assert result.prompt_tokens == 2_340 + 1_500
    assert [(b.prompt_tokens, b.cached_prompt_tokens, b.cache_write_tokens) for b in stored] == [
        (2_340, 2_000, 300),
        (1_500, 1_200, 0),
    ]
    assert usage.memory_update_prompt_tokens == 2_340 + 1_500
    assert (usage.cached_prompt_tokens, usage.cache_write_tokens) == (3_200, 300)


def test_export_carries_the_cached_billing_fields(tmp_path: Path) -> None:
    with Memory(root=tmp_path / ".agentmem", working_dir=tmp_path) as mem:
        with mem.session(session_id="s1") as s:
            s.append({"role": "user", "content": "hello"})
            s.record_usage(usage=ANTHROPIC)
            s.record_usage(120, 4, 0.5)
        data = json.loads(mem.sessions.export("s1", tmp_path / "s.json").read_text("utf-8"))
        html = mem.sessions.export("s1", tmp_path / "s.html").read_text("utf-8")
    first, second = data["billing"]
    assert (first["prompt_tokens"], first["cached_prompt_tokens"]) == (2_340, 2_000)
    assert first["cache_write_tokens"] == 300
    assert (second["cached_prompt_tokens"], second["cache_write_tokens"]) == (0, 0)
    assert list(first)[-2:] == ["cached_prompt_tokens", "cache_write_tokens"]
    assert '<th class="n">Cached</th><th class="n">Cache write</th>' in html
    assert '<td class="n">2340</td><td class="n">25</td><td class="n">2000</td>' in html
    assert '<td class="n">2000</td><td class="n">300</td>' in html
    assert "2,000 read from the prompt cache, 300 written to it" in html
