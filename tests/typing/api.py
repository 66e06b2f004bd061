"""User-facing examples that must type-check under ``mypy --strict`` (checked in CI, never run)."""

from __future__ import annotations

from typing import Any

import agentmem
from agentmem import InvalidMessageError, Message, MessageHistory
from agentmem.protocols import MemoryClient


def build_history() -> MessageHistory:
    history = MessageHistory(token_counter=agentmem.counter_for_model("gpt-4o"))
    history.replace_system_prompt("You are a coding agent.")
    stored: Message = history.append({"role": "user", "content": "hi", "task_id": 1})
    assert stored["role"] == "user"
    history.extend([{"role": "assistant", "content": "hello"}])
    return history


def payloads(history: MessageHistory) -> int:
    openai_messages: list[dict[str, Any]] = history.to_api()
    system, anthropic_messages = history.to_api(provider="anthropic")
    maybe_system: str | None = system
    chain_only = history.to_api(task_chain={1, 2}, force_reasoning_content_pad=True)
    items: list[dict[str, Any]] = history.to_api(provider="openai-responses")
    history.extend(agentmem.from_responses_items(items))
    return (
        len(openai_messages)
        + len(anthropic_messages)
        + len(chain_only)
        + len(maybe_system or "")
        + len(agentmem.to_responses_items(list(history)))
    )


def handle_errors(history: MessageHistory) -> str | None:
    try:
        history.append({"role": "tool", "content": "no id"})
    except InvalidMessageError as err:
        return f"{err.index}:{err.field}:{err.reason}"
    return None


def count(history: MessageHistory) -> int:
    estimator = agentmem.LearningEstimator()
    estimator.observe(history.to_api(), prompt_tokens=1234)
    counter: agentmem.TokenCounter = estimator
    calibrating: agentmem.CalibratingCounter = estimator
    calibrating.restore(calibrating.state())
    return (
        history.estimate_tokens()
        + counter.count_text("abc")
        + agentmem.count_messages(history, counter)
    )


class MyLLM:
    """A host adapter satisfying the LLM protocol."""

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return {"role": "assistant", "content": f"{len(messages)} messages"}


def use_llm(llm: agentmem.LLM, history: MessageHistory) -> None:
    history.append(llm(history.to_api()))


use_llm(MyLLM(), build_history())


def session_loop(tmp: str) -> agentmem.Usage:
    from agentmem.testing import ScriptedLLM, tool_call

    llm = ScriptedLLM([tool_call("ls", {"path": "."}), {"role": "assistant", "content": "done"}])
    with (
        agentmem.Memory(root=tmp, working_dir=tmp, durability="normal") as mem,
        mem.session(name="typed", model="gpt-4o", context_window=32_000) as s,
    ):
        task: int = s.start_task("list the files")
        while True:
            payload: list[dict[str, Any]] = s.context()
            reply = llm(payload)
            usage = reply.pop("usage")
            s.record_usage(usage["prompt_tokens"], usage["completion_tokens"])
            s.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                s.append({"role": "tool", "tool_call_id": call["id"], "content": "a.py"})
        system, turns = s.context("anthropic")
        items: list[dict[str, Any]] = s.context("openai-responses")
        s.append({"type": "function_call_output", "call_id": "c1", "output": str(len(items))})
        retry = s.context_after_overflow(1)
        assert s.finish_task() == task and isinstance(retry, list) and turns
        infos: list[agentmem.SessionInfo] = mem.sessions.list()
        assert infos and (system is None or isinstance(system, str))
        return s.usage


def stale_writer(s: agentmem.Session) -> bool:
    from agentmem.tasks import TaskHandle

    handle: TaskHandle[agentmem.Message] = s.task_handle()
    active: int | None = s.active_task_id
    try:
        stored: agentmem.Message = handle.append({"role": "assistant", "content": "late"})
    except agentmem.StaleTaskError as exc:
        return exc.task_id == handle.task_id and exc.active_task_id != active
    return stored["task_id"] == s.open_task_id and not handle.stale


def long_term_memory_and_notes(mem: agentmem.Memory) -> str:
    entry: agentmem.LTMEntry = mem.ltm.add_discovery("Tests run with pytest", confidence=0.9)
    mem.ltm.add_solution("lock timeout", "close the other session", examples=["a.py"])
    mem.ltm.add_pattern("atomic writes", confidence=0.7)
    mem.ltm.add("workflows", "read -> edit -> test")
    removed: list[agentmem.LTMEntry] = mem.ltm.prune(max_age_days=90, min_confidence=0.3)
    mem.notes.store("plan", "ship it")
    content: str | None = mem.notes.retrieve("plan")
    keys: list[str] = mem.notes.list()
    tools: list[dict[str, Any]] = mem.tools.openai() + mem.tools.anthropic()
    result: dict[str, Any] = mem.tools.dispatch({"operation": "ltm_stats"})
    clean: str = agentmem.scrub_secrets(content or "")
    return f"{entry.id}{len(removed)}{keys}{len(tools)}{result['ok']}{clean}"


async def async_session_loop(tmp: str) -> list[str]:
    from agentmem.adapters import anthropic_llm, openai_llm
    from agentmem.testing import AsyncScriptedLLM, tool_calls

    llm = AsyncScriptedLLM([tool_calls([("ls", {}), ("pwd", {})]), RuntimeError("down")])
    summarizer = agentmem.LLMSummarizer(llm)  # an async LLM is fine
    with (
        agentmem.Memory(root=tmp, working_dir=tmp, summarizer=summarizer) as mem,
        mem.session(model="gpt-4o", context_window=32_000) as s,
    ):
        s.start_task("list the files")
        payload: list[dict[str, Any]] = await s.acontext()
        s.append(await llm(payload))
        system, turns = await s.acontext("anthropic")
        responses_input: list[dict[str, Any]] = await s.acontext(provider="openai-responses")
        assert isinstance(responses_input, list)
        retry = await s.acontext_after_overflow(1, reported_tokens=40_000)
        assert isinstance(retry, list) and turns and (system is None or isinstance(system, str))
    adapters: list[agentmem.LLM | agentmem.AsyncLLM] = [
        openai_llm(object(), "gpt-4o", temperature=0),
        anthropic_llm(object(), "claude-sonnet-4-5", max_tokens=1024),
    ]
    return [repr(a) for a in adapters]


async def memory_updates(mem: agentmem.Memory) -> float:
    from agentmem.memory_updater import MemoryUpdateResult, MemoryUpdateSettings

    settings = MemoryUpdateSettings(max_tokens_per_file=2000, max_iterations=4)
    assert settings.enabled and mem.memory_update.min_iterations >= 0
    with mem.session(name="sub", subagent=True) as s:
        s.start_task("look around")
        task: int | None = await s.afinish_task()
        result: MemoryUpdateResult | None = s.last_memory_update
        topics: tuple[str, ...] = result.topics if result is not None else ()
        assert task is not None and not topics and s.subagent
        for info in mem.topics.list():
            text: str | None = mem.topics.read(info.topic)
            assert text is None or info.size >= 0
        return s.usage.memory_update_cost_usd


def semantic_memory(mem: agentmem.Memory, client: MemoryClient) -> int:
    from agentmem.semantic import CloseReport, Recorder, SemanticMemoryExtension

    ext = SemanticMemoryExtension(
        client=client,
        user_id="martin",
        prefetch_k=5,
        threshold=None,
        infer=True,
        resident_persona=True,
        flush_timeout=5.0,
    )
    registry: dict[str, Any] = {}
    ext.configure(registry)
    schema: dict[str, Any] = ext.tool_schema(provider="anthropic")
    answer: str = ext.handle_tool_call("recall", '{"query": "tabs"}')
    block: str | None = ext.on_user_message("I prefer tabs over spaces.")
    with mem.session(name="chat", extensions=[ext]) as s:
        s.start_task("I prefer tabs over spaces.")
        sub = mem.session(name="helper", subagent=True)
        assert sub.subagent and not sub.extensions
        sub.close()
    report: CloseReport = ext.recorder.close()
    with Recorder(client, user_id="martin", maxsize=16) as recorder:
        queued: bool = recorder.record([{"role": "user", "content": "hi"}])
    return report.left + len(schema) + len(answer) + len(block or "") + int(queued)


def semantic_clients(mem: agentmem.Memory) -> list[str]:
    from agentmem.errors import MemoryNotFoundError, RemoteMemoryError
    from agentmem.protocols import MemoryRecord
    from agentmem.semantic import HistoryEntry, LocalMemoryClient, Mem0Client

    local = LocalMemoryClient(mem)
    lexical = LocalMemoryClient(None, embedder=None)
    lexical.embedder = "auto"
    why: str | None = local.embedder_error
    clients: list[MemoryClient] = [local, Mem0Client("http://localhost:8888", timeout=2.0)]
    events: list[dict[str, Any]] = local.add("I prefer tabs.", user_id="martin")
    hits: list[MemoryRecord] = local.search("tabs", user_id="martin", threshold=0.3)
    changes: list[HistoryEntry] = local.history(str(events[0]["id"]))
    try:
        clients[1].delete("unknown")
    except MemoryNotFoundError as err:
        return [err.memory_id]
    except RemoteMemoryError as err:
        return [f"{err.kind}:{err.status}"]
    return [h.memory for h in hits] + [c.event for c in changes] + [why or ""]


def exported_parts(mem: agentmem.Memory, s: agentmem.Session) -> int:
    settings = agentmem.MemoryUpdateSettings(max_tokens_per_file=2000)
    result: agentmem.MemoryUpdateResult | None = s.last_memory_update
    topics: agentmem.TopicStore = mem.topics
    restore: agentmem.RestoreResult | None = s.last_restore
    skipped = len(restore.skipped) if restore is not None else 0
    return settings.max_tokens_per_file + len(topics.list()) + skipped + int(result is None)
