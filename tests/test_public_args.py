"""Every public call validates its arguments (issue 13, A6).

Random wrong-typed (or out-of-range) arguments to each public method of
Memory, LongTermMemory, KeyValueStore, TopicStore, SessionStore, recall and
TimeMachine raise an :class:`~agentmem.AgentMemError` subclass, never a raw
``TypeError``/``ValueError``/``OSError``/``AttributeError``, and nothing
stored changes.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem import AgentMemError, Memory, Session
from agentmem.topics import TopicStore

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.just(object()),
    st.just(b"\x00"),
)
_any = st.one_of(
    _scalars,
    st.lists(_scalars, max_size=3),
    st.dictionaries(st.text(max_size=3), _scalars, max_size=2),
)

NOT_STR = _any.filter(lambda v: not isinstance(v, str))
NOT_STR_OR_NONE = NOT_STR.filter(lambda v: v is not None)
NOT_BOOL = _any.filter(lambda v: not isinstance(v, bool))
NOT_INT = _any.filter(lambda v: isinstance(v, bool) or not isinstance(v, int))
NEGATIVE = st.integers(max_value=-1)
BAD_COUNT = st.one_of(NOT_INT, NEGATIVE)
BAD_POSITIVE = st.one_of(NOT_INT, st.integers(max_value=0))
BAD_UNIT = st.one_of(
    _any.filter(lambda v: isinstance(v, bool) or not isinstance(v, int | float)),
    st.floats().filter(lambda f: math.isnan(f) or not 0 <= f <= 1),
    st.integers().filter(lambda i: not 0 <= i <= 1),
)
BAD_AGE = st.one_of(
    _any.filter(lambda v: isinstance(v, bool) or not isinstance(v, int | float)),
    st.floats().filter(lambda f: not 0 <= f < math.inf),
    NEGATIVE,
)
BAD_STRINGS = st.one_of(
    _scalars.filter(lambda v: not isinstance(v, list | tuple)),
    st.lists(NOT_STR, min_size=1, max_size=3),
)
BAD_PATH = st.one_of(
    _any.filter(lambda v: not isinstance(v, str)),
    st.just("a\x00b"),
    st.just("x" * 300),
)
BAD_STORE_PATH = BAD_PATH.filter(
    lambda v: (v is not None and not isinstance(v, str)) or v == "a\x00b"
)
"""A store's path argument: ``None`` (in memory) is fine, a long name fails on first use."""
BAD_TASK = st.one_of(
    _any.filter(lambda v: v is not None and (isinstance(v, bool) or not isinstance(v, int))),
    st.integers(min_value=10_000),
    NEGATIVE,
)
BAD_TIME = _any.filter(
    lambda v: v is not None and (isinstance(v, bool) or not isinstance(v, int | float))
)


@dataclass
class World:
    root: Path
    work: Path
    mem: Memory
    session: Session


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with tempfile.TemporaryDirectory() as tmp:
        root, work = Path(tmp) / "root", Path(tmp) / "work"
        work.mkdir()
        (work / "app.py").write_text("print('hi')\n")
        mem = Memory(root=root, working_dir=work)
        mem.ltm.add_discovery("the build uses make")
        mem.notes.store("plan", "ship the parser")
        mem.topics.write("deploy", "make ship\n")
        s = mem.session(session_id="keep", name="kept")
        s.start_task("edit app.py")
        s.time_machine.record_file_before_change("app.py")
        s.append({"role": "assistant", "content": "done"})
        s.finish_task()
        yield World(root, work, mem, s)
        s.close()
        mem.close()


def _state(w: World) -> Any:
    """What is stored, read through the public API."""
    mem = w.mem
    return (
        [e.to_json() for e in mem.ltm.entries()],
        {k: mem.notes.retrieve(k) for k in mem.notes.list()},
        {t.topic: mem.topics.read(t.topic) for t in mem.topics.list()},
        [(i.id, i.name) for i in mem.sessions.list()],
        len(mem.sessions.load("keep").messages),
        w.session.time_machine.get_task_history(100),
        sorted(p.name for p in w.work.iterdir()),
    )


Call = Callable[[World, Any], object]

CASES: dict[str, tuple[Call, st.SearchStrategy[Any]]] = {
    # LongTermMemory
    "ltm.add_discovery(fact)": (lambda w, v: w.mem.ltm.add_discovery(v), NOT_STR),
    "ltm.add_discovery(confidence)": (
        lambda w, v: w.mem.ltm.add_discovery("x y", confidence=v),
        BAD_UNIT,
    ),
    "ltm.add_discovery(examples)": (
        lambda w, v: w.mem.ltm.add_discovery("x y", examples=v),
        BAD_STRINGS,
    ),
    "ltm.add_solution(error)": (lambda w, v: w.mem.ltm.add_solution(v, "fix"), NOT_STR),
    "ltm.add_solution(solution)": (lambda w, v: w.mem.ltm.add_solution("err", v), NOT_STR),
    "ltm.add_solution(confidence)": (
        lambda w, v: w.mem.ltm.add_solution("err", "fix", confidence=v),
        BAD_UNIT,
    ),
    "ltm.add_pattern(pattern)": (lambda w, v: w.mem.ltm.add_pattern(v), NOT_STR),
    "ltm.add(kind)": (lambda w, v: w.mem.ltm.add(v, "x y"), _any),
    "ltm.confirm": (lambda w, v: w.mem.ltm.confirm(v), NOT_STR),
    "ltm.entries": (lambda w, v: w.mem.ltm.entries(v), NOT_STR_OR_NONE),
    "ltm.get": (lambda w, v: w.mem.ltm.get(v), NOT_STR),
    "ltm.search(query)": (lambda w, v: w.mem.ltm.search(v), NOT_STR),
    "ltm.search(limit)": (lambda w, v: w.mem.ltm.search("make", limit=v), BAD_COUNT),
    "ltm.remove": (lambda w, v: w.mem.ltm.remove(v), NOT_STR),
    "ltm.prune(max_age_days)": (lambda w, v: w.mem.ltm.prune(max_age_days=v), BAD_AGE),
    "ltm.prune(min_confidence)": (lambda w, v: w.mem.ltm.prune(min_confidence=v), BAD_UNIT),
    "ltm.render_for_prompt(max_tokens)": (
        lambda w, v: w.mem.ltm.render_for_prompt(v),
        BAD_COUNT,
    ),
    "ltm.render_for_prompt(token_counter)": (
        lambda w, v: w.mem.ltm.render_for_prompt(100, token_counter=v),
        NOT_STR_OR_NONE,
    ),
    # KeyValueStore
    "notes.store(key)": (lambda w, v: w.mem.notes.store(v, "c"), NOT_STR),
    "notes.store(content)": (lambda w, v: w.mem.notes.store("plan", v), NOT_STR),
    "notes.retrieve": (lambda w, v: w.mem.notes.retrieve(v), NOT_STR),
    "notes.delete": (lambda w, v: w.mem.notes.delete(v), NOT_STR),
    "notes.search(query)": (lambda w, v: w.mem.notes.search(v), NOT_STR),
    "notes.search(limit)": (lambda w, v: w.mem.notes.search("ship", limit=v), BAD_COUNT),
    "notes.search(include_internal)": (
        lambda w, v: w.mem.notes.search("ship", include_internal=v),
        NOT_BOOL,
    ),
    # TopicStore
    "topics.read": (lambda w, v: w.mem.topics.read(v), NOT_STR),
    "topics.write(topic)": (lambda w, v: w.mem.topics.write(v, "c"), NOT_STR),
    "topics.write(content)": (lambda w, v: w.mem.topics.write("deploy", v), NOT_STR),
    "topics.write_if_unchanged(expected)": (
        lambda w, v: w.mem.topics.write_if_unchanged("deploy", "c", expected=v),
        NOT_STR_OR_NONE,
    ),
    "topics.render_for_prompt(max_tokens)": (
        lambda w, v: w.mem.topics.render_for_prompt(v),
        BAD_COUNT,
    ),
    "topics.render_for_prompt(token_counter)": (
        lambda w, v: w.mem.topics.render_for_prompt(100, token_counter=v),
        NOT_STR_OR_NONE,
    ),
    # SessionStore
    "sessions.load": (lambda w, v: w.mem.sessions.load(v), NOT_STR),
    "sessions.exists": (lambda w, v: w.mem.sessions.exists(v), NOT_STR),
    "sessions.info": (lambda w, v: w.mem.sessions.info(v), NOT_STR),
    "sessions.delete": (lambda w, v: w.mem.sessions.delete(v), NOT_STR),
    "sessions.list(limit)": (
        lambda w, v: w.mem.sessions.list(limit=v),
        st.one_of(NOT_INT.filter(lambda v: v is not None), NEGATIVE),
    ),
    "sessions.rename(session_id)": (lambda w, v: w.mem.sessions.rename(v, "n"), NOT_STR),
    "sessions.rename(name)": (
        lambda w, v: w.mem.sessions.rename("keep", v),
        NOT_STR_OR_NONE,
    ),
    "sessions.export(session_id)": (
        lambda w, v: w.mem.sessions.export(v, w.root.parent / "out.json"),
        NOT_STR,
    ),
    "sessions.export(path)": (lambda w, v: w.mem.sessions.export("keep", v), BAD_PATH),
    # recall
    "recall(query)": (lambda w, v: w.mem.recall(v), NOT_STR),
    "recall(max_sessions)": (
        lambda w, v: w.mem.recall("done", max_sessions=v),
        st.one_of(NOT_INT.filter(lambda v: v is not None), st.integers(max_value=0)),
    ),
    "recall(max_results)": (lambda w, v: w.mem.recall("done", max_results=v), BAD_POSITIVE),
    "recall(session_ids)": (
        lambda w, v: w.mem.recall("done", session_ids=v),
        BAD_STRINGS.filter(lambda v: v is not None),
    ),
    "recall(roles)": (
        lambda w, v: w.mem.recall("done", roles=v),
        BAD_STRINGS.filter(lambda v: v is not None),
    ),
    "recall(since)": (lambda w, v: w.mem.recall("done", since=v), BAD_TIME),
    "recall(until)": (lambda w, v: w.mem.recall("done", until=v), BAD_TIME),
    "recall(exclude_session)": (
        lambda w, v: w.mem.recall("done", exclude_session=v),
        NOT_STR_OR_NONE,
    ),
    # TimeMachine
    "tm.record_file_before_change": (
        lambda w, v: w.session.time_machine.record_file_before_change(v),
        BAD_PATH,
    ),
    "tm.restore_to_task_state": (
        lambda w, v: w.session.time_machine.restore_to_task_state(v),
        BAD_TASK,
    ),
    "tm.switch_to_task": (lambda w, v: w.session.time_machine.switch_to_task(v), BAD_TASK),
    "tm.get_task_history": (
        lambda w, v: w.session.time_machine.get_task_history(v),
        BAD_COUNT,
    ),
    "tm.get_child_tasks": (lambda w, v: w.session.time_machine.get_child_tasks(v), BAD_TASK),
    "tm.start_new_task(summary)": (
        lambda w, v: w.session.time_machine.start_new_task(v),
        NOT_STR,
    ),
    # constructors
    "LongTermMemory(path)": (lambda w, v: agentmem.LongTermMemory(v), BAD_STORE_PATH),
    "KeyValueStore(directory)": (lambda w, v: agentmem.KeyValueStore(v), BAD_STORE_PATH),
    "TopicStore(directory)": (lambda w, v: TopicStore(v), BAD_STORE_PATH),
    "Memory(root)": (lambda w, v: Memory(root=v, working_dir=w.work).close(), BAD_PATH),
    "ltm.add(detail)": (lambda w, v: w.mem.ltm.add("problem_solutions", "e", detail=v), NOT_STR),
    "sessions.lock": (lambda w, v: w.mem.sessions.lock(v).release(), NOT_STR),
    "sessions.create(name)": (
        lambda w, v: w.mem.sessions.create(session_id="new-one", name=v),
        NOT_STR_OR_NONE,
    ),
    # Memory
    "Memory.session(session_id)": (
        lambda w, v: w.mem.session(session_id=v).close(),
        NOT_STR_OR_NONE,
    ),
    "Memory.session(name)": (lambda w, v: w.mem.session(name=v).close(), NOT_STR_OR_NONE),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_wrong_arguments_raise_agentmem_errors_and_change_nothing(world: World, case: str) -> None:
    call, values = CASES[case]
    before = _state(world)

    @settings(max_examples=scaled(25), deadline=None)
    @given(value=values)
    def check(value: Any) -> None:
        try:
            call(world, value)
        except AgentMemError:
            pass
        except Exception as exc:  # the defect this test is about
            raise AssertionError(
                f"{case} with {value!r} raised a raw {type(exc).__name__}: {exc}"
            ) from exc
        else:
            raise AssertionError(f"{case} accepted {value!r}")
        assert _state(world) == before

    check()
