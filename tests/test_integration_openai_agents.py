"""``AgentMemSession``: the OpenAI Agents SDK ``Session`` protocol on agentmem.

The SDK's documented session behaviours (those its own session tests check) run
against its ``SQLiteSession`` and against ``AgentMemSession`` on both agentmem
backends: the same test functions, parametrised by :func:`make_session`, driven
through the SDK's real ``Runner`` with its scripted model (``agents.testing``, no
network). A state machine compares ``AgentMemSession`` with ``SQLiteSession`` on
random operation sequences. Then what agentmem adds: exclusive sessions across
processes, kill -9 safety, resume in a new process, recall, long-term memory and
topics in the agent's instructions, the windowed view.

The PostgreSQL cases need a server (tests/pg.py: without one they skip with one line).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from _openai_agents_child import TOOL_REPLY, batch
from agents import (
    Agent,
    RunConfig,
    Runner,
    RunState,
    SQLiteSession,
    function_tool,
)
from agents.memory import Session, SessionSettings
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from pg import child_env
from profiles import scaled
from responses_rules import responses_violations

import agentmem
from agentmem.integrations.openai_agents import AgentMemSession, agentmem_session_id

HERE = Path(__file__).parent
CHILD = HERE / "_openai_agents_child.py"
EXAMPLE = HERE.parent / "examples" / "openai_agents_session.py"
CONFIG = RunConfig(tracing_disabled=True)
MakeSession = Callable[..., Session]


# --------------------------------------------------------------------------- fixtures


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


def _memory(request: pytest.FixtureRequest, root: Path, backend_name: str) -> agentmem.Memory:
    backend = None
    if backend_name == "postgresql":
        backend = pg_uri(request.getfixturevalue("pg_dsn"))
    return agentmem.Memory(root=root, backend=backend, durability="normal")


@pytest.fixture(params=["SQLiteSession", "agentmem-sqlite", "agentmem-postgresql"])
def make_session(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeSession]:
    """Sessions of one implementation: the SDK's SQLiteSession or AgentMemSession."""
    opened: list[Any] = []
    mem: agentmem.Memory | None = None
    if request.param == "SQLiteSession":

        def make(session_id: str, **kwargs: Any) -> Session:
            session = SQLiteSession(session_id, tmp_path / "sdk.db", **kwargs)
            opened.append(session)
            return session

    else:
        mem = _memory(request, tmp_path / "root", request.param.split("-")[1])

        def make(session_id: str, **kwargs: Any) -> Session:
            session = AgentMemSession(session_id, memory=cast(agentmem.Memory, mem), **kwargs)
            opened.append(session)
            return session

    yield make
    for session in opened:
        session.close()
    if mem is not None:
        mem.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    """``""`` (embedded) or the PostgreSQL URI, as the child processes take it."""
    if request.param == "sqlite":
        return ""
    return pg_uri(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def memory(backend: str, tmp_path: Path) -> Iterator[agentmem.Memory]:
    mem = agentmem.Memory(root=tmp_path / "root", backend=backend or None, durability="normal")
    yield mem
    mem.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _sync_run(agent: Agent[Any], given: Any, **kwargs: Any) -> Any:
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return Runner.run_sync(agent, given, **kwargs)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


async def run_agent(method: str, agent: Agent[Any], given: Any, **kwargs: Any) -> Any:
    """``Runner.run``, ``Runner.run_sync`` (in a thread) or ``Runner.run_streamed``."""
    kwargs.setdefault("run_config", CONFIG)
    if method == "run":
        return await Runner.run(agent, given, **kwargs)
    if method == "run_sync":
        return await asyncio.to_thread(_sync_run, agent, given, **kwargs)
    result = Runner.run_streamed(agent, given, **kwargs)
    async for _event in result.stream_events():
        pass
    return result


def texts(items: list[Any]) -> list[str]:
    """The text of each message item (``""`` for other items)."""
    found = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        found.append(content if isinstance(content, str) else "")
    return found


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# --------------------------------------------------------------------------- the SDK's behaviours


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
def test_turns_carry_the_history(make_session: MakeSession, method: str) -> None:
    session = make_session("golden-gate")
    assert isinstance(session, Session)
    model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")]])
    agent = Agent(name="a", model=model)

    async def go() -> None:
        first = await run_agent(method, agent, "Which city is the bridge in?", session=session)
        assert first.final_output == "San Francisco"
        second = await run_agent(method, agent, "Which state?", session=session)
        assert second.final_output == "California"

    run(go())
    model.assert_complete()
    sent = model.calls[1].input
    assert texts(sent) == ["Which city is the bridge in?", "San Francisco", "Which state?"]
    stored = run(session.get_items())
    assert stored[:3] == sent
    assert texts(stored) == [*texts(sent), "California"]


def test_without_a_session_nothing_is_remembered() -> None:
    model = ScriptedModel([[assistant_message("Hello")], [assistant_message("No idea")]])
    agent = Agent(name="a", model=model)
    run(run_agent("run", agent, "Hi"))
    run(run_agent("run", agent, "What did I say?"))
    assert len(model.calls[1].input) == 1


def test_sessions_stay_isolated(make_session: MakeSession) -> None:
    model = ScriptedModel([[assistant_message(t)] for t in ("cats", "dogs", "you said cats")])
    agent = Agent(name="a", model=model)
    one, two = make_session("session_1"), make_session("session_2")

    async def go() -> None:
        await run_agent("run", agent, "I like cats", session=one)
        await run_agent("run", agent, "I like dogs", session=two)
        await run_agent("run", agent, "What do I like?", session=one)

    run(go())
    assert texts(model.calls[2].input) == ["I like cats", "cats", "What do I like?"]
    assert texts(run(two.get_items())) == ["I like dogs", "dogs"]
    assert run(two.pop_item())["content"][0]["text"] == "dogs"  # type: ignore[index]
    assert len(run(one.get_items())) == 4


def test_add_get_clear(make_session: MakeSession) -> None:
    session = make_session("direct")
    items = [user("Hello"), {"role": "assistant", "content": "Hi there!"}]

    async def go() -> None:
        await session.add_items(items)  # type: ignore[arg-type]
        assert await session.get_items() == items
        await session.clear_session()
        assert await session.get_items() == []
        await session.add_items([user("again")])
        assert await session.get_items() == [user("again")]

    run(go())


def test_pop_item_returns_and_removes_the_newest(make_session: MakeSession) -> None:
    session = make_session("pop")
    other = make_session("pop-other")
    items = [user("Hello"), {"role": "assistant", "content": "Hi there!"}, user("How are you?")]

    async def go() -> None:
        assert await session.pop_item() is None
        await session.add_items(items)  # type: ignore[arg-type]
        await other.add_items([user("untouched")])
        for expected in reversed(items):
            assert await session.pop_item() == expected
            assert await session.get_items() == items[: items.index(expected)]
        assert await session.pop_item() is None
        assert await other.get_items() == [user("untouched")]

    run(go())


def test_limit_is_the_newest_n_in_order(make_session: MakeSession) -> None:
    session = make_session("limits")
    items = [user(f"Message {i}") if i % 2 == 0 else user(f"Response {i}") for i in range(6)]
    run(session.add_items(items))  # type: ignore[arg-type]
    for limit, expected in [
        (None, items),
        (2, items[-2:]),
        (4, items[-4:]),
        (10, items),
        (1, items[-1:]),
        (0, []),
        (-1, items),  # as SQLiteSession: SQLite's LIMIT -1 has no limit
    ]:
        assert run(session.get_items(limit=limit)) == expected, limit


def test_list_input_and_the_input_callback(make_session: MakeSession) -> None:
    session = make_session("callback")
    history = [user("Earlier"), {"role": "assistant", "content": "Saved reply"}]
    run(session.add_items(history))  # type: ignore[arg-type]
    model = ScriptedModel([[assistant_message("ok")], [assistant_message("gpt")]])
    agent = Agent(name="a", model=model)
    run(run_agent("run", agent, [user("Test message")], session=session))
    assert model.calls[0].input == [*history, user("Test message")]

    def only_user(old: list[Any], new: list[Any]) -> list[Any]:
        return [item for item in old if item.get("role") == "user"] + new

    config = RunConfig(tracing_disabled=True, session_input_callback=only_user)
    run(run_agent("run", agent, [user("Name?")], session=session, run_config=config))
    assert model.calls[1].input == [history[0], user("Test message"), user("Name?")]


def test_items_come_back_exactly_whatever_their_keys(make_session: MakeSession) -> None:
    session = make_session("keys")
    items = [
        {"role": "user", "content": "kept", "transient": True, "x_count": 3, "x_ratio": 3.0},
        {"role": "user", "content": "t", "task_id": 7, "created_at": "not a time"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "truncated": 1},
        {"type": "function_call_output", "call_id": "c", "output": "o", "responses_items": None},
        {"role": "assistant", "content": "a", "system_injected": True, "x": {"n": [1, 2.5, None]}},
    ]
    run(session.add_items(items))  # type: ignore[arg-type]
    stored = run(session.get_items())
    assert stored == items
    assert [type(v) for v in stored[0].values()] == [str, str, bool, int, float]
    if isinstance(session, AgentMemSession):  # and as stored: after a reopen
        session.close()
        again = AgentMemSession("keys", memory=session.memory)
        assert run(again.get_items()) == items
        again.close()


def test_unicode_and_sql_text(make_session: MakeSession) -> None:
    session = make_session("unicode")
    items = [
        user("こんにちは"),
        {"role": "assistant", "content": "😊👍"},
        user("Привет"),
        user("O'Reilly"),
        {"role": "assistant", "content": "Robert'); DROP TABLE students;--"},
        user('"SELECT * FROM users WHERE name = "admin";"'),
    ]
    run(session.add_items(items))  # type: ignore[arg-type]
    assert run(session.get_items()) == items


def test_concurrent_add_items_from_threads_and_tasks(make_session: MakeSession) -> None:
    session = make_session("concurrent")

    def pair(tag: str) -> list[Any]:
        return [user(f"{tag} question"), {"role": "assistant", "content": f"{tag} answer"}]

    def in_thread(n: int) -> None:
        asyncio.run(session.add_items(pair(f"thread {n}")))  # type: ignore[arg-type]

    async def tasks() -> None:
        await asyncio.gather(*(session.add_items(pair(f"task {n}")) for n in range(12)))  # type: ignore[arg-type]

    threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    run(tasks())
    for thread in threads:
        thread.join()
    stored = run(session.get_items())
    tags = [f"thread {n}" for n in range(6)] + [f"task {n}" for n in range(12)]
    assert len(stored) == 2 * len(tags)
    # Nothing lost, and every batch stored whole, its two items side by side.
    found = {stored[i]["content"].removesuffix(" question") for i in range(0, len(stored), 2)}
    assert found == set(tags)
    for i in range(0, len(stored), 2):
        tag = stored[i]["content"].removesuffix(" question")
        assert stored[i : i + 2] == pair(tag)


def test_a_cancelled_write_still_completes(make_session: MakeSession) -> None:
    session = make_session("cancelled")

    async def go() -> list[Any]:
        write = asyncio.create_task(session.add_items([user("one"), user("two")]))  # type: ignore[list-item]
        await asyncio.sleep(0)  # the write has started
        write.cancel()
        with pytest.raises(asyncio.CancelledError):
            await write
        popping = asyncio.create_task(session.pop_item())
        await asyncio.sleep(0)
        popping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await popping
        return await session.get_items()

    # The caller sees its cancellation, and the store is not left half-way: the
    # batch is stored whole, the pop done.
    assert run(go()) == [user("one")]


def test_session_settings(make_session: MakeSession) -> None:
    plain = make_session("default-settings")
    assert isinstance(plain.session_settings, SessionSettings)
    assert plain.session_settings.limit is None
    limited = make_session("limited", session_settings=SessionSettings(limit=3))
    as_dict = make_session("from-dict", session_settings={"limit": 5})
    assert as_dict.session_settings == SessionSettings(limit=5)
    items = [user(f"Message {i}") for i in range(10)]
    run(limited.add_items(items))  # type: ignore[arg-type]
    assert run(limited.get_items()) == items[-3:]
    assert run(limited.get_items(limit=2)) == items[-2:]

    model = ScriptedModel([[assistant_message("Got it")]])
    config = RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=2))
    run(run_agent("run", Agent(name="a", model=model), "New", session=limited, run_config=config))
    assert model.calls[0].input == [*items[-2:], user("New")]


@pytest.mark.parametrize(("limit", "sent"), [(2, 3), (0, 1), (None, 7), (100, 7)])
def test_run_config_limit(make_session: MakeSession, limit: int | None, sent: int) -> None:
    session = make_session("run-limit")
    model = ScriptedModel([[assistant_message(f"Reply {i}")] for i in range(1, 5)])
    agent = Agent(name="a", model=model)
    for i in range(1, 4):
        run(run_agent("run", agent, f"Message {i}", session=session))
    config = RunConfig(tracing_disabled=True, session_settings=SessionSettings(limit=limit))
    run(run_agent("run_streamed", agent, "Message 4", session=session, run_config=config))
    expected = ["Message 1", "Reply 1", "Message 2", "Reply 2", "Message 3", "Reply 3"]
    assert texts(model.calls[-1].input) == [*expected[len(expected) - (sent - 1) :], "Message 4"]


@function_tool
def lookup(question: str) -> str:
    """Look the answer up."""
    return TOOL_REPLY


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {path}"


def _tool_script() -> list[Any]:
    return [
        [function_call("lookup", {"question": "q1"}, call_id="call-1")],
        [assistant_message("The answer is 42", item_id="msg-1")],
        [
            assistant_message("Let me check twice", item_id="msg-2"),
            function_call("lookup", {"question": "q2"}, call_id="call-2"),
            function_call("lookup", {"question": "q3"}, call_id="call-3"),
        ],
        [assistant_message("Still 42", item_id="msg-3")],
    ]


def _tool_turns(session: Session, method: str) -> tuple[list[Any], list[Any]]:
    """Two turns with tool calls; (every model input, the stored items)."""
    model = ScriptedModel(_tool_script())
    agent = Agent(name="a", model=model, tools=[lookup])

    async def go() -> list[Any]:
        await run_agent(method, agent, "What is the answer?", session=session)
        await run_agent(method, agent, "Sure?", session=session)
        return await session.get_items()

    stored = run(go())
    model.assert_complete()
    return [call.input for call in model.calls], stored


@pytest.mark.parametrize("method", ["run", "run_streamed"])
def test_tool_calls_across_turns_match_sqlite_session(
    make_session: MakeSession, method: str
) -> None:
    inputs, stored = _tool_turns(make_session("tools"), method)
    reference = SQLiteSession("reference")
    try:
        assert (inputs, stored) == _tool_turns(reference, method)
    finally:
        reference.close()
    kinds = [item.get("type", "message") for item in stored]
    assert kinds == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    assert inputs[-1] == stored[:-1]


def _approval_flow(session: Session, resume: bool) -> tuple[list[Any], list[Any]]:
    """A turn stopped for a tool approval, then resumed (approved) or left for new input."""
    steps: list[Any] = [[function_call("delete_file", {"path": "/tmp/x"}, call_id="del")]]
    steps.append([assistant_message("Deleted.", item_id="msg-done")])
    model = ScriptedModel(steps)
    agent = Agent(name="a", model=model, tools=[delete_file])

    async def go() -> list[Any]:
        result = await run_agent("run", agent, "Delete /tmp/x", session=session)
        assert len(result.interruptions) == 1
        if resume:
            state = await RunState.from_string(agent, result.to_state().to_string())
            state.approve(state.get_interruptions()[0])
            done = await run_agent("run", agent, state, session=session)
        else:
            done = await run_agent("run", agent, "Never mind, keep it", session=session)
        assert done.final_output == "Deleted."
        return await session.get_items()

    stored = run(go())
    return [call.input for call in model.calls], stored


@pytest.mark.parametrize("resume", [True, False], ids=["approved", "new-input"])
def test_human_approval_matches_sqlite_session(make_session: MakeSession, resume: bool) -> None:
    session = make_session("approval")
    inputs, stored = _approval_flow(session, resume)
    reference = SQLiteSession("reference")
    try:
        assert (inputs, stored) == _approval_flow(reference, resume)
    finally:
        reference.close()
    assert stored[1]["type"] == "function_call"
    if resume:
        assert stored[2] == {
            "call_id": "del",
            "output": "deleted /tmp/x",
            "type": "function_call_output",
        }
    else:
        # The unanswered call stays stored (SQLiteSession keeps it), the new input after it.
        assert stored[2] == user("Never mind, keep it")
    # popping walks back over exactly what was stored
    popped = [run(session.pop_item()) for _ in stored]
    assert popped == stored[::-1]
    assert run(session.get_items()) == []


executed: list[str] = []


@function_tool(needs_approval=True)
def fetch_profile(query: str) -> str:
    """Fetch a customer profile (needs approval)."""
    executed.append(query)
    return f"profile:{query}"


def _call_the_tool(call: Any) -> Any:
    """The model's move: call the tool on the newest user text, or relay the tool's answer."""
    last = call.input[-1]
    if last.get("type") == "function_call_output":
        return [assistant_message(f"done: {last['output']}", item_id=f"m{len(call.input)}")]
    query = texts([last])[0]
    return [function_call("fetch_profile", {"query": query}, call_id=f"call-{len(call.input)}")]


def _three_approvals(make: Callable[[], Session]) -> tuple[list[Any], list[Any], list[str]]:
    """Three turns each stopped for an approval: approved, approved on a session object
    made again for the same id, rejected. (model inputs, stored items, tool executions)."""
    executed.clear()
    model = ScriptedModel([ModelStep.respond(_call_the_tool) for _ in range(6)])
    agent = Agent(name="a", model=model, tools=[fetch_profile])
    session = make()

    async def turn(text: str, approve: bool) -> None:
        first = await run_agent("run", agent, text, session=session)
        (approval,) = first.interruptions
        state = first.to_state()
        if approve:
            state.approve(approval)
        else:
            state.reject(approval)
        done = await run_agent("run", agent, state, session=session)
        assert done.interruptions == []

    run(turn("customer 104", True))
    session.close()
    session = make()
    run(turn("note for 104", True))
    run(turn("delete 104", False))
    stored = run(session.get_items())
    session.close()
    model.assert_complete()
    return [call.input for call in model.calls], stored, list(executed)


def test_three_approval_turns_match_sqlite_session(
    make_session: MakeSession, tmp_path: Path
) -> None:
    inputs, stored, ran = _three_approvals(lambda: make_session("hitl"))
    reference = _three_approvals(lambda: SQLiteSession("hitl", tmp_path / "reference.db"))
    assert (inputs, stored, ran) == reference
    assert ran == ["customer 104", "note for 104"]  # the rejected call never ran
    kinds = [item.get("type", "message") for item in stored]
    assert kinds.count("function_call") == kinds.count("function_call_output") == 3
    assert texts([stored[-1]])[0].startswith("done: ")


# --------------------------------------------------------------------------- random sequences

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)


def _nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)


_values = st.recursive(_scalars, _nested, max_leaves=6)
# Unknown keys, and keys agentmem itself gives a meaning to on its messages.
_extra_keys = ["x_int", "x_meta", "zz", "transient", "task_id", "created_at", "responses_items"]
_extras = st.dictionaries(st.sampled_from(_extra_keys), _values, max_size=2)
_text = st.text(max_size=30)


@st.composite
def items(draw: st.DrawFn, call_ids: list[str]) -> dict[str, Any]:
    """One Responses input item of the kinds a runner stores, with unknown extra fields."""
    kind = draw(
        st.sampled_from(
            [
                "user",
                "parts",
                "system",
                "assistant",
                "output",
                "call",
                "output_of_call",
                "reasoning",
            ]
        )
    )
    if kind == "user":
        item: dict[str, Any] = {"role": "user", "content": draw(_text)}
    elif kind == "parts":
        item = {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": draw(_text)},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
            ],
        }
    elif kind == "system":
        item = {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(_text)}
    elif kind == "assistant":
        item = {"role": "assistant", "content": draw(_text)}
    elif kind == "output":
        item = {
            "id": f"msg_{draw(st.integers(0, 99))}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": draw(
                st.sampled_from(
                    [
                        [{"type": "output_text", "text": "an answer", "annotations": []}],
                        [{"type": "refusal", "refusal": "no"}],
                        [
                            {
                                "type": "output_text",
                                "text": "one",
                                "annotations": [],
                                "logprobs": [],
                            },
                            {"type": "output_text", "text": "two", "annotations": []},
                        ],
                    ]
                )
            ),
        }
    elif kind == "call":
        call_id = f"call_{len(call_ids)}"
        call_ids.append(call_id)
        item = {
            "type": "function_call",
            "call_id": call_id,
            "name": "lookup",
            "arguments": json.dumps({"q": draw(_text)}),
        }
    elif kind == "output_of_call":
        call_id = draw(st.sampled_from(call_ids)) if call_ids else "call_none"
        item = {"type": "function_call_output", "call_id": call_id, "output": draw(_text)}
    else:
        summary = [{"type": "summary_text", "text": t} for t in draw(st.lists(_text, max_size=2))]
        item = {
            "type": "reasoning",
            "id": f"rs_{draw(st.integers(0, 99))}",
            "summary": summary,
            "encrypted_content": draw(_text),
        }
    return {**item, **draw(_extras)}


class SessionMachine(RuleBasedStateMachine):
    """AgentMemSession against the SDK's own SQLiteSession, operation by operation."""

    runs = 0

    def __init__(self) -> None:
        super().__init__()
        SessionMachine.runs += 1
        self.tmp = Path(os.environ["AGENTS_MACHINE_ROOT"]) / str(SessionMachine.runs)
        backend = os.environ["AGENTS_MACHINE_BACKEND"] or None
        self.mem = agentmem.Memory(root=self.tmp, backend=backend, durability="normal")
        self.sid = f"machine {SessionMachine.runs}"  # one database holds every run's sessions
        self.ours = AgentMemSession(self.sid, memory=self.mem)
        self.theirs = SQLiteSession(self.sid)
        self.call_ids: list[str] = []

    @rule(data=st.data(), n=st.integers(1, 4))
    def add(self, data: st.DataObject, n: int) -> None:
        batch_ = [data.draw(items(self.call_ids)) for _ in range(n)]
        run(self.theirs.add_items(json.loads(json.dumps(batch_))))
        run(self.ours.add_items(batch_))  # type: ignore[arg-type]

    @rule()
    def pop(self) -> None:
        assert run(self.ours.pop_item()) == run(self.theirs.pop_item())

    @rule(limit=st.one_of(st.none(), st.integers(-2, 8)))
    def get(self, limit: int | None) -> None:
        assert run(self.ours.get_items(limit)) == run(self.theirs.get_items(limit))

    @rule(really=st.integers(0, 3))
    def clear(self, really: int) -> None:
        if really:  # rarely: most sequences should grow
            return
        run(self.ours.clear_session())
        run(self.theirs.clear_session())

    @rule()
    def reopen(self) -> None:
        self.ours.close()
        self.ours = AgentMemSession(self.sid, memory=self.mem)

    @invariant()
    def same_items(self) -> None:
        assert run(self.ours.get_items()) == run(self.theirs.get_items())

    def teardown(self) -> None:
        self.ours.close()
        self.theirs.close()
        self.mem.close()


def test_random_operations_match_sqlite_session(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTS_MACHINE_ROOT", str(tmp_path))
    monkeypatch.setenv("AGENTS_MACHINE_BACKEND", backend)
    examples = 25 if not backend else 10
    case = SessionMachine.TestCase
    case.settings = settings(max_examples=scaled(examples), stateful_step_count=12)
    case().runTest()


# --------------------------------------------------------------------------- session ids

ODD_IDS = [
    "user@example.com",
    "User@Example.com",
    "../../etc/passwd",
    "a/b\\c:d",
    "C:\\Users\\x",
    "",
    " ",
    "x" * 5000,
    "ABC",
    "abc",
    "null\x00byte",
    "émoji 😊",
    "con",
    ".",
]


def test_any_session_id_maps_safely_and_distinctly(
    make_session: MakeSession, tmp_path: Path
) -> None:
    sessions = [make_session(sid) for sid in ODD_IDS]
    for n, session in enumerate(sessions):
        assert session.session_id == ODD_IDS[n]
        run(session.add_items([user(f"item of {n}")]))
    for n, session in enumerate(sessions):
        assert run(session.get_items()) == [user(f"item of {n}")]
    # Nothing is named after the raw ids: every file stays under the test's directory,
    # and the session lock files are named by the hashed ids.
    names = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")}
    assert not any("passwd" in name or "example.com" in name for name in names)
    locks = {n for n in names if n.startswith("root/locks/agents-")}
    if locks:
        assert locks == {f"root/locks/{agentmem_session_id(sid)}.lock" for sid in ODD_IDS}


@settings(max_examples=scaled(200))
@given(st.lists(st.text(), min_size=2, max_size=6, unique=True))
def test_the_id_mapping_is_valid_and_injective(ids: list[str]) -> None:
    mapped = [agentmem_session_id(sid) for sid in ids]
    assert len(set(mapped)) == len(ids)
    assert len({m.lower() for m in mapped}) == len(ids)  # also on case-insensitive file systems
    for m in mapped:
        assert len(m) <= 128
        assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in m)


def test_ids_keep_their_name_and_bad_ids_are_refused(memory: agentmem.Memory) -> None:
    with AgentMemSession("user@example.com", memory=memory) as session:
        assert session.agentmem_session.name == "user@example.com"
        assert session.agentmem_session.id == agentmem_session_id("user@example.com")
    with pytest.raises(agentmem.InvalidArgumentError, match="session_id must be a string"):
        AgentMemSession(42, memory=memory)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- what agentmem adds


def _child(root: Path, backend: str, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), args[0], str(root), backend, *args[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        **kwargs,
    )


def _child_output(root: Path, backend: str, *args: str) -> str:
    proc = _child(root, backend, *args)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out


def test_a_second_process_gets_store_locked(backend: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    holder = _child(root, backend, "hold", "user@example.com")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        out = _child_output(root, backend, "open", "user@example.com", "User@example.com")
        locked, other = out.splitlines()
        assert locked.startswith("locked: ")
        assert "already open" in locked
        assert other == "opened"  # a case-differing id is another session
    finally:
        holder.communicate(timeout=60)  # stdin closes: the holder lets go
    mem = agentmem.Memory(root=root, backend=backend or None)
    try:
        AgentMemSession("user@example.com", memory=mem).close()
    finally:
        mem.close()


def test_one_object_per_session_in_a_process(memory: agentmem.Memory) -> None:
    first = run(AgentMemSession.aopen("shared", memory=memory, windowed=True))
    assert first.windowed
    with pytest.raises(agentmem.StoreLockedError):
        AgentMemSession("shared", memory=memory)
    first.close()
    with AgentMemSession("shared", memory=memory) as again:
        assert run(again.get_items()) == []
    for late in (first.add_items([user("late")]), first.get_items(), first.pop_item()):  # type: ignore[list-item]
        with pytest.raises(agentmem.SessionClosedError):
            run(late)


def test_kill9_of_a_writer_loses_no_returned_batch(backend: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    rng = random.Random(7)
    start = 0
    for _ in range(2):
        writer = _child(root, backend, "write", "killed", str(start))
        assert writer.stdout is not None
        returned = [int(writer.stdout.readline()) for _ in range(rng.randint(3, 25))]
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=60)
        mem = agentmem.Memory(root=root, backend=backend or None)
        try:
            with AgentMemSession("killed", memory=mem) as session:
                stored = run(session.get_items())
        finally:
            mem.close()
        # Every batch that returned is there, whole; at most one more (stored, not yet
        # reported) follows; nothing else: no partial batch.
        complete = [item for n in range(returned[-1] + 1) for item in batch(n)]
        assert stored[: len(complete)] == complete
        assert stored[len(complete) :] in ([], batch(returned[-1] + 1))
        start = stored[-1]["x_batch"] + 1
    # A runner in a new process carries on from exactly what the killed writers stored.
    inputs = json.loads(_child_output(root, backend, "turn", "killed", "And now?"))
    assert inputs[0] == [*stored, {"content": "And now?", "role": "user"}]


def test_runner_resumes_in_a_new_process(backend: str, tmp_path: Path) -> None:
    root, state_file = tmp_path / "root", str(tmp_path / "state.json")
    first = json.loads(_child_output(root, backend, "first", state_file))
    second = json.loads(_child_output(root, backend, "second", state_file))
    # The second process's first model call sees the whole first turn, as stored.
    turn1 = first["inputs"][-1]
    resumed = second["inputs"][0]
    assert resumed[:3] == turn1
    assert resumed[3]["id"] == "msg-first"
    assert texts(resumed[3:]) == ["first", "Again?"]
    assert [item.get("type", "message") for item in resumed] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert resumed[2]["output"] == TOOL_REPLY
    # A run stopped for an approval, approved and finished by another process.
    assert first["interruptions"] == 1
    assert second["final"] == "deleted it"
    approved = second["approved_input"]
    assert [item.get("type", "message") for item in approved] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert approved[2]["output"] == "deleted /tmp/x"


def test_every_item_is_found_by_recall(memory: agentmem.Memory) -> None:
    session = AgentMemSession("recall-me", memory=memory)
    model = ScriptedModel(
        [
            [function_call("lookup", {"question": "pelican"}, call_id="c1")],
            [assistant_message("Pelicans migrate over the Bosphorus")],
        ]
    )
    run(
        run_agent(
            "run",
            Agent(name="a", model=model, tools=[lookup]),
            "Where do pelicans fly?",
            session=session,
        )
    )
    session.close()
    for query in ("pelicans fly", "Bosphorus", TOOL_REPLY):
        hits = memory.recall(query)
        assert hits, query
        assert hits[0].session_id == agentmem_session_id("recall-me")


def test_long_term_memory_and_topics_reach_the_agent(memory: agentmem.Memory) -> None:
    memory.ltm.add_discovery("The staging database is called heron-db", confidence=0.9)
    memory.topics.write("deploys", "# Deploys\nDeploy with `make ship` from the release branch.\n")
    model = ScriptedModel([[assistant_message("ok")], [assistant_message("ok")]])
    with AgentMemSession("ltm", memory=memory) as session:
        agent = Agent(name="a", model=model, instructions=session.instructions("Be brief."))
        run(run_agent("run", agent, "Which database?", session=session))
    system = model.calls[0].system_instructions or ""
    assert system.startswith("Be brief.")
    assert "heron-db" in system
    assert "make ship" in system
    with AgentMemSession("ltm-windowed", memory=memory, windowed=True) as session:
        agent = Agent(name="a", model=model, instructions=session.instructions("Be brief."))
        run(run_agent("run", agent, "Which database?", session=session))
    assert model.calls[1].system_instructions == "Be brief."
    sent = json.dumps(model.calls[1].input)
    assert "heron-db" in sent
    assert "make ship" in sent


def test_the_windowed_view_fits_and_stays_valid(memory: agentmem.Memory) -> None:
    steps: list[Any] = []
    for n in range(30):
        question = {"question": f"q{n} " + "why " * 40}
        steps.append([function_call("lookup", question, call_id=f"c{n}")])
        steps.append([assistant_message(f"Answer {n}: " + "because " * 60, item_id=f"m{n}")])
    # A run stopped for an approval, then new input instead of a resume: the stored call
    # stays unanswered, and the view must not send it.
    steps.append([function_call("delete_file", {"path": "/x"}, call_id="del")])
    steps.append([assistant_message("Kept it.", item_id="m-kept")])
    model = ScriptedModel(steps)
    agent = Agent(name="a", model=model, tools=[lookup, delete_file])
    views = []
    with AgentMemSession("long", memory=memory, windowed=True, context_window=3000) as session:
        for n in range(30):
            run(run_agent("run", agent, f"Question {n}: " + "please " * 40, session=session))
            views.append(run(session.get_items()))
        assert run(run_agent("run", agent, "Delete /x", session=session)).interruptions
        run(run_agent("run", agent, "No, keep it", session=session))
        views.append(run(session.get_items()))
        stored = run(session.get_items(limit=10_000))
        assert run(session.get_items(limit=4)) == stored[-4:]
        counter = session.agentmem_session.token_counter
    model.assert_complete()
    assert len(stored) == 30 * 4 + 4
    assert stored[-3]["call_id"] == "del"  # stored, unanswered, as SQLiteSession keeps it
    for view in views:
        assert responses_violations(view, internal_fields=agentmem.INTERNAL_FIELDS) == []
        assert agentmem.count_messages(view, counter) <= 3000
    # The window moved: the last views hold the newest turns, the summary of the others.
    assert len(views[-1]) < len(stored)
    assert "<thread_summary>" in json.dumps(views[-1])
    assert views[-1][-1] == stored[-1]
    assert "del" not in json.dumps(views[-1])
    for call in model.calls[1:]:  # what the runner sent: the view, then the turn's items
        assert json.dumps(call.input).count("Question") < 30


def test_the_windowed_view_stores_what_sqlite_session_stores(
    memory: agentmem.Memory, tmp_path: Path
) -> None:
    # The runner reads the view, but what it stores (and reads back with a limit for
    # its own bookkeeping) must stay exactly what it stores in a SQLiteSession.
    def windowed(sid: str) -> AgentMemSession:
        return AgentMemSession(sid, memory=memory, windowed=True)

    def stored(sid: str) -> list[Any]:
        with AgentMemSession(sid, memory=memory) as session:
            return cast(list[Any], run(session.get_items()))

    flows: list[tuple[str, Callable[[Session], Any]]] = [
        ("tools", lambda session: _tool_turns(session, "run_streamed")),
        ("approved", lambda session: _approval_flow(session, resume=True)),
        ("new-input", lambda session: _approval_flow(session, resume=False)),
    ]
    for sid, flow in flows:
        session = windowed(sid)
        flow(session)
        session.close()
        reference = SQLiteSession(sid)
        try:
            assert stored(sid) == flow(reference)[1], sid
        finally:
            reference.close()
    _three_approvals(lambda: windowed("three"))
    expected = _three_approvals(lambda: SQLiteSession("three", tmp_path / "reference.db"))[1]
    assert stored("three") == expected


def test_clear_session_forgets_the_trimmed_part_too(memory: agentmem.Memory) -> None:
    turns = [
        [user(f"question {n} " + "please " * 30), user(f"answer {n} " + "because " * 30)]
        for n in range(40)
    ]
    session = AgentMemSession("cleared", memory=memory, windowed=True, context_window=1000)
    for turn in turns:
        run(session.add_items(turn))  # type: ignore[arg-type]
    assert "<thread_summary>" in json.dumps(run(session.get_items()))
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert run(session.get_items(limit=5)) == []
    run(session.add_items([user("fresh start")]))  # type: ignore[list-item]
    assert texts(run(session.get_items())) == ["fresh start"]  # the view: payload items
    assert run(session.get_items(limit=5)) == [user("fresh start")]  # as stored
    session.close()
    with AgentMemSession("cleared", memory=memory, windowed=True) as again:
        assert texts(run(again.get_items())) == ["fresh start"]
        assert again.agentmem_session.name == "cleared"
    assert not memory.recall("because")


def test_messages_appended_through_agentmem_are_items_too(memory: agentmem.Memory) -> None:
    with AgentMemSession("mixed", memory=memory) as session:
        run(session.add_items([user("from the runner")]))  # type: ignore[list-item]
        session.agentmem_session.append({"role": "system", "content": "from the host"})
        session.agentmem_session.append({"role": "assistant", "content": ""})  # no item
        expected = [
            user("from the runner"),
            {"type": "message", "role": "system", "content": "from the host"},
        ]
        assert run(session.get_items()) == expected
        assert run(session.get_items(limit=1)) == expected[1:]
        # pop_item passes over the message that stands for no item
        assert run(session.pop_item()) == expected[1]
        assert run(session.pop_item()) == expected[0]
        assert run(session.pop_item()) is None


def test_a_popped_new_input_gives_the_unanswered_call_back(memory: agentmem.Memory) -> None:
    call = {"type": "function_call", "call_id": "del", "name": "delete_file", "arguments": "{}"}
    answer = {"type": "function_call_output", "call_id": "del", "output": "deleted"}
    with AgentMemSession("undo-input", memory=memory, windowed=True) as session:
        run(session.add_items([user("Delete /x"), call]))  # type: ignore[list-item]
        run(session.add_items([user("Never mind")]))  # type: ignore[list-item]
        assert "del" not in json.dumps(run(session.get_items()))  # unanswered: not sent
        assert run(session.pop_item()) == user("Never mind")
        run(session.add_items([answer]))  # type: ignore[list-item]  # the approval resumed
        view = run(session.get_items())
        assert responses_violations(view, internal_fields=agentmem.INTERNAL_FIELDS) == []
        assert [item.get("type") for item in view[-2:]] == ["function_call", "function_call_output"]
        assert run(session.get_items(limit=10)) == [user("Delete /x"), call, answer]


def test_sdk_item_objects_are_stored_as_dicts(memory: agentmem.Memory) -> None:
    objects = [assistant_message("hi", item_id="m1"), function_call("f", {"a": 1}, call_id="c")]
    with AgentMemSession("objects", memory=memory) as session:
        run(session.add_items(objects))  # type: ignore[arg-type]
        assert run(session.get_items()) == [
            item.model_dump(mode="json", exclude_none=True) for item in objects
        ]


def test_bad_items_are_refused_and_nothing_is_stored(memory: agentmem.Memory) -> None:
    with AgentMemSession("bad", memory=memory) as session:
        run(session.add_items([user("kept")]))  # type: ignore[list-item]
        for value, error in [
            (float("nan"), "not a JSON number"),
            (float("inf"), "not a JSON number"),
            (2**64, "64 bits"),
        ]:
            with pytest.raises(agentmem.InvalidMessageError, match=error):
                run(session.add_items([user("lost"), {**user("lost"), "x": value}]))  # type: ignore[list-item]
        run(session.add_items([user("a\x00b")]))  # type: ignore[list-item]  # NUL: kept
        assert run(session.pop_item()) == user("a\x00b")
        with pytest.raises(agentmem.InvalidMessageError, match="item 1"):
            run(session.add_items([user("lost"), "not an item"]))  # type: ignore[list-item]
        with pytest.raises(agentmem.InvalidArgumentError, match="list of Responses input items"):
            run(session.add_items(user("a dict, not a list")))  # type: ignore[arg-type]
        assert run(session.get_items()) == [user("kept")]


def test_import_agentmem_does_not_import_the_sdk() -> None:
    code = (
        "import sys, agentmem\n"
        "assert 'agents' not in sys.modules and 'openai' not in sys.modules, sorted(sys.modules)\n"
        "import agentmem.integrations\n"
        "assert 'agents' not in sys.modules\n"
        "import agentmem.integrations.openai_agents\n"
        "assert 'agents' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env(), timeout=120)


def test_without_the_extra_the_error_names_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['agents'] = None\n"
        "try:\n"
        "    import agentmem.integrations.openai_agents\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env=child_env(),
        timeout=120,
        capture_output=True,
        text=True,
    ).stdout
    assert out.startswith("ConfigurationError")
    assert "agentmem[openai-agents]" in out
