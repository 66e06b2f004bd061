"""Anthropic's memory tool (``memory_20250818``) over agentmem's topic files.

``AgentMemMemoryTool`` is checked against the SDK's own reference implementation
(``anthropic.tools.memory.BetaLocalFilesystemMemoryTool``): the same commands give
the same answers and the same ``ToolError`` texts, in scripted cases and in random
command sequences that also follow an independent dict model of the directory tree.
Then: path attacks, secret scrubbing, threads and processes editing at once, the
files the memory updater writes and the next session reads, the SDK's own tool
runner driven offline (a scripted HTTP transport), and the example script.
Every test that stores runs on both backends (embedded files and PostgreSQL;
tests/pg.py skips the PostgreSQL half with one line when there is no server).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.lib.tools import ToolError
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from pg import child_env
from profiles import scaled

import agentmem
from agentmem.integrations.anthropic_memory import (
    SEPARATOR,
    AgentMemMemoryTool,
    AsyncAgentMemMemoryTool,
    path_of_topic,
    topic_of_path,
)

HERE = Path(__file__).parent
CHILD = HERE / "_anthmem_child.py"
EXAMPLE = HERE.parent / "examples" / "anthropic_memory_tool.py"
MakeMemory = Callable[[], agentmem.Memory]
Outcome = tuple[str, str]


def pg_uri(dsn: str) -> str:
    """The ``postgresql://`` URI of a libpq keyword DSN (what ``Memory(backend=)`` takes)."""
    import psycopg

    p = psycopg.conninfo.conninfo_to_dict(dsn)
    query = {k: str(p[k]) for k in ("host", "port") if p.get(k)}
    return f"postgresql://{p.get('user') or ''}@/{p['dbname']}?{urllib.parse.urlencode(query)}"


@pytest.fixture(params=["embedded", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        return pg_uri(request.getfixturevalue("pg_dsn"))
    return "embedded"


@pytest.fixture
def make_memory(backend: str, tmp_path: Path) -> Iterator[MakeMemory]:
    """Memories on one backend; each call opens another Memory on the same store."""
    made: list[agentmem.Memory] = []

    def make() -> agentmem.Memory:
        mem = agentmem.Memory(root=tmp_path / "root", backend=backend, durability="normal")
        made.append(mem)
        return mem

    yield make
    for mem in made:
        mem.close()


@pytest.fixture
def reference(tmp_path: Path) -> BetaLocalFilesystemMemoryTool:
    return BetaLocalFilesystemMemoryTool(str(tmp_path / "reference"))


def run(tool: Any, command: dict[str, Any]) -> Outcome:
    """What ``tool.call`` (the runner's entry) answered: ``("ok", text)`` or ``("error", text)``.

    A directory view's sizes are the filesystem's for the reference (``4.0K``) and
    the sum of the files beneath for agentmem: they are left out of the comparison
    (file sizes are compared).
    """
    try:
        answer = tool.call(command)
    except ToolError as exc:
        return "error", str(exc)
    assert isinstance(answer, str)
    if answer.startswith("Here're the files"):
        head, *lines = answer.split("\n")
        shown = []
        for i, line in enumerate(lines):
            size, path = line.split("\t", 1)
            shown.append(f"{'-' if i == 0 or path.endswith('/') else size}\t{path}")
        answer = "\n".join([head, *shown])
    return "ok", answer


def prune_empty_dirs(reference: BetaLocalFilesystemMemoryTool) -> None:
    """Remove the reference's empty directories: agentmem's exist only while they hold a file."""
    root = reference.memory_root
    for here, _dirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
        if Path(here) != root and not os.listdir(here):
            os.rmdir(here)


def stored(mem: agentmem.Memory) -> dict[str, str]:
    """The topic files as the tool names them: ``{path: content}``."""
    out: dict[str, str] = {}
    for info in mem.topics.list():
        path = path_of_topic(info.topic)
        assert path is not None, info.topic
        content = mem.topics.read(info.topic)
        assert content is not None
        out[path] = content
    return out


def reference_files(reference: BetaLocalFilesystemMemoryTool) -> dict[str, str]:
    root = reference.memory_root
    return {
        "/memories/" + p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in root.rglob("*")
        if p.is_file()
    }


# ---------------------------------------------------------------- scripted cases vs the SDK


def view(path: str, view_range: list[int] | None = None) -> dict[str, Any]:
    return {"command": "view", "path": path, **({"view_range": view_range} if view_range else {})}


def create(path: str, text: str) -> dict[str, Any]:
    return {"command": "create", "path": path, "file_text": text}


def replace(path: str, old: str, new: str) -> dict[str, Any]:
    return {"command": "str_replace", "path": path, "old_str": old, "new_str": new}


def insert(path: str, line: int, text: str) -> dict[str, Any]:
    return {"command": "insert", "path": path, "insert_line": line, "insert_text": text}


def delete(path: str) -> dict[str, Any]:
    return {"command": "delete", "path": path}


def rename(old: str, new: str) -> dict[str, Any]:
    return {"command": "rename", "old_path": old, "new_path": new}


NOTES = "/memories/notes.md"
SETUP = [
    create(NOTES, "alpha\nbeta\ngamma beta\n"),
    create("/memories/proj/plan.md", "step one\nstep two"),
    create("/memories/proj/deep/er/x.md", "deep"),
]
CASES: dict[str, list[dict[str, Any]]] = {
    "view an empty root": [view("/memories")],
    "view what is missing": [view("/memories/nope.md"), view("/memories/nodir")],
    "view the tree, two levels deep": [*SETUP, view("/memories"), view("/memories/proj")],
    "view a file and its ranges": [
        *SETUP,
        view(NOTES),
        view(NOTES, [2, 3]),
        view(NOTES, [2, -1]),
        view(NOTES, [0, 1]),
        view(NOTES, [3, 10]),
        view(NOTES, [5, 6]),
        view("/memories/proj/plan.md"),
    ],
    "create, and create again": [
        create("/memories/a.md", "x"),
        create("/memories/a.md", "y"),
        view("/memories/a.md"),
        create("/memories/empty.md", ""),
        view("/memories/empty.md"),
    ],
    "str_replace: missing, a directory, no match, several, unique": [
        *SETUP,
        replace("/memories/nope.md", "a", "b"),
        replace("/memories/proj", "a", "b"),
        replace("/memories/nodir", "a", "b"),
        replace(NOTES, "delta", "x"),
        replace(NOTES, "beta", "x"),
        replace(NOTES, "a\n", "x"),
        replace(NOTES, "gamma beta", "gamma\nbeta\ndelta"),
        view(NOTES),
        replace("/memories/proj/plan.md", "two", "2"),
    ],
    "str_replace with an empty old_str": [
        create("/memories/e.md", ""),
        replace("/memories/e.md", "", "filled"),
        replace("/memories/e.md", "", "again"),
        view("/memories/e.md"),
    ],
    "insert: missing, a directory, out of range, first, last": [
        *SETUP,
        insert("/memories/nope.md", 0, "x"),
        insert("/memories/proj", 0, "x"),
        insert(NOTES, -1, "x"),
        insert(NOTES, 4, "x"),
        insert(NOTES, 0, "first"),
        insert(NOTES, 4, "last\n\n"),
        insert("/memories/proj/plan.md", 2, "three"),
        view(NOTES),
        view("/memories/proj/plan.md"),
    ],
    "insert into an empty file": [
        create("/memories/e.md", ""),
        insert("/memories/e.md", 1, "x"),
        insert("/memories/e.md", 0, "x"),
        view("/memories/e.md"),
    ],
    "delete: the root, missing, a file, a directory": [
        *SETUP,
        delete("/memories"),
        delete("/memories/nope.md"),
        delete("/memories/nodir"),
        delete(NOTES),
        view(NOTES),
        delete("/memories/proj"),
        view("/memories"),
    ],
    "rename: the root, taken, missing, a file, a directory": [
        *SETUP,
        rename("/memories", "/memories/x"),
        rename(NOTES, "/memories/proj/plan.md"),
        rename(NOTES, "/memories"),
        rename("/memories/proj/deep", "/memories/proj"),
        rename("/memories/nope.md", "/memories/n2.md"),
        rename("/memories/nodir", "/memories/n2"),
        rename(NOTES, NOTES),
        rename(NOTES, "/memories/archive/2026/notes.md"),
        rename("/memories/proj", "/memories/old/proj"),
        view("/memories"),
        view("/memories/old/proj/plan.md"),
        view(NOTES),
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_commands_answer_as_the_sdk_reference(
    case: str, make_memory: MakeMemory, reference: BetaLocalFilesystemMemoryTool
) -> None:
    mem = make_memory()
    tool = AgentMemMemoryTool(mem)
    for command in CASES[case]:
        ours, theirs = run(tool, command), run(reference, command)
        prune_empty_dirs(reference)
        assert ours == theirs, command
    assert stored(mem) == reference_files(reference)


# ---------------------------------------------------------------- refusals where agentmem differs


REFUSALS: list[tuple[dict[str, Any], str]] = [
    (create("/memories/notes.txt", "x"), "must end in .md (for example /memories/notes.md)"),
    (create("/memories/proj", "x"), "must end in .md (for example /memories/proj.md)"),
    (create("/memories/NOTES.MD", "x"), "must end in .md (lowercase)"),
    (create("/memories/a.md/b.md", "x"), "a directory name cannot end in .md"),
    (create("/memories/a.md.md", "x"), "cannot end in .md.md"),
    (create("/memories/" + "n" * 130 + ".md", "x"), "longer than 128 characters"),
    (create("/memories/" + "d/" * 64 + "x.md", "x"), "longer than 128 characters"),
    (view("/memoriesx"), "would escape /memories"),
    (view("/memories/a/../b.md"), "'.' and '..' are refused"),
    (view(42), "`path` must be a string, got int"),  # type: ignore[arg-type]
    ({"command": "view"}, "`path` must be a string, got NoneType"),
    ({"command": "create", "path": "/memories/a.md"}, "`file_text` must be a string"),
    (insert("/memories/a.md", "one", "x"), "`insert_line` must be an integer"),  # type: ignore[arg-type]
    (view("/memories/a.md", ["one", "2"]), "`view_range` must be a list of two integers"),  # type: ignore[list-item]
    ({"command": "explode", "path": "/memories"}, "Unknown command 'explode'"),
    (rename("/memories/a.md", "/memories/b"), "must end in .md"),
    (rename("/memories/d", "/memories/e.md"), "a directory name cannot end in .md"),
]


def test_what_cannot_be_a_topic_is_refused_clearly(make_memory: MakeMemory) -> None:
    mem = make_memory()
    tool = AgentMemMemoryTool(mem)
    tool.call(create("/memories/a.md", "a"))
    tool.call(create("/memories/d/x.md", "x"))
    for command, says in REFUSALS:
        with pytest.raises(ToolError) as info:
            tool.call(command)
        assert says in str(info.value), command
    assert stored(mem) == {"/memories/a.md": "a", "/memories/d/x.md": "x"}


def test_a_directory_cannot_move_into_itself(make_memory: MakeMemory) -> None:
    # The SDK's reference raises a bare OSError (EINVAL) here; agentmem a ToolError.
    tool = AgentMemMemoryTool(make_memory())
    tool.call(create("/memories/d/x.md", "x"))
    with pytest.raises(ToolError, match="into itself"):
        tool.call(rename("/memories/d", "/memories/d/sub"))
    assert run(tool, view("/memories/d/x.md"))[0] == "ok"


# ---------------------------------------------------------------- random sequences vs a model

FILES = st.sampled_from(["a.md", "b.md"])
DIRS = st.sampled_from(["d", "e"])
TEXT = st.text(alphabet="ab \n", max_size=10)
FILE_PATHS = st.builds(
    lambda dirs, name: "/".join(["/memories", *dirs, name]), st.lists(DIRS, max_size=2), FILES
)
DIR_PATHS = st.builds(lambda dirs: "/".join(["/memories", *dirs]), st.lists(DIRS, max_size=2))
ANY_PATHS = FILE_PATHS | DIR_PATHS


class Model:
    """A directory tree as a dict ``{file path: content}``; directories are the files' prefixes."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def is_dir(self, path: str) -> bool:
        return path == "/memories" or any(p.startswith(path + "/") for p in self.files)

    def exists(self, path: str) -> bool:
        return path in self.files or self.is_dir(path)

    def apply(self, command: dict[str, Any]) -> bool:
        """Apply ``command``; whether it succeeds."""
        kind = command["command"]
        path = command.get("path", command.get("old_path"))
        if kind == "view":
            return self.exists(path)
        if kind == "create":
            if path in self.files:
                return False
            self.files[path] = command["file_text"]
            return True
        if kind in ("str_replace", "insert"):
            content = self.files.get(path)
            if content is None:
                return False
            if kind == "str_replace":
                if content.count(command["old_str"]) != 1:
                    return False
                self.files[path] = content.replace(command["old_str"], command["new_str"])
                return True
            lines = content.split("\n")
            if lines[-1] == "":
                lines.pop()
            if not 0 <= command["insert_line"] <= len(lines):
                return False
            lines.insert(command["insert_line"], command["insert_text"].rstrip("\n"))
            joined = "\n".join(lines)
            self.files[path] = joined if joined.endswith("\n") else joined + "\n"
            return True
        if kind == "delete":
            if path == "/memories":
                return False
            if path in self.files:
                del self.files[path]
                return True
            inside = [p for p in self.files if p.startswith(path + "/")]
            for p in inside:
                del self.files[p]
            return bool(inside)
        assert kind == "rename"
        new = command["new_path"]
        if path == "/memories" or self.exists(new):
            return False
        if path in self.files:
            self.files[new] = self.files.pop(path)
            return True
        inside = [p for p in self.files if p.startswith(path + "/")]
        for p in inside:
            self.files[new + p[len(path) :]] = self.files.pop(p)
        return bool(inside)


class ToolMachine(RuleBasedStateMachine):
    """agentmem's tool, the SDK's reference and the dict model, driven by the same commands."""

    memory: agentmem.Memory

    def __init__(self) -> None:
        super().__init__()
        self.tool = AgentMemMemoryTool(self.memory)
        self.tool.clear_all_memory()
        self.folder = tempfile.mkdtemp(prefix="anthmem-ref-")
        self.reference = BetaLocalFilesystemMemoryTool(self.folder)
        self.model = Model()

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def step(self, command: dict[str, Any]) -> None:
        ours, theirs = run(self.tool, command), run(self.reference, command)
        prune_empty_dirs(self.reference)
        expected = self.model.apply(command)
        assert ours == theirs, command
        assert (ours[0] == "ok") == expected, (command, ours)
        event(f"{command['command']}: {ours[0]}")  # --hypothesis-show-statistics

    def pick(
        self, data: st.DataObject, kind: str, other: st.SearchStrategy[str] = ANY_PATHS
    ) -> str:
        """Mostly an existing path of ``kind`` ("file", "dir", "any"), else one of ``other``."""
        files = sorted(self.model.files)
        dirs = sorted({p.rsplit("/", 1)[0] for p in files} - {"/memories"})
        existing = {"file": files, "dir": dirs, "any": files + dirs}[kind]
        if existing and not data.draw(st.sampled_from([False, False, False, True])):
            return data.draw(st.sampled_from(existing))
        return data.draw(other)

    @initialize(files=st.lists(st.tuples(FILE_PATHS, TEXT), max_size=4))
    def some_files(self, files: list[tuple[str, str]]) -> None:
        for path, text in files:
            self.step(create(path, text))

    @rule(path=FILE_PATHS, text=TEXT)
    def create(self, path: str, text: str) -> None:
        self.step(create(path, text))

    @rule(
        data=st.data(), view_range=st.none() | st.lists(st.integers(-1, 5), min_size=2, max_size=2)
    )
    def view(self, data: st.DataObject, view_range: list[int] | None) -> None:
        self.step(view(self.pick(data, "any"), view_range))

    @rule(data=st.data(), new=TEXT)
    def str_replace(self, data: st.DataObject, new: str) -> None:
        path = self.pick(data, "file")
        content = self.model.files.get(path, "")
        how = data.draw(st.sampled_from(["whole", "piece", "random"]))
        if content and how == "whole":  # unique
            old = content
        elif content and how == "piece":  # sometimes unique
            i = data.draw(st.integers(0, len(content) - 1))
            old = content[i : data.draw(st.integers(i + 1, len(content)))]
        else:
            old = data.draw(st.text(alphabet="ab\n", max_size=3))
        self.step(replace(path, old, new))

    @rule(data=st.data(), text=TEXT)
    def insert(self, data: st.DataObject, text: str) -> None:
        path = self.pick(data, "file")
        lines = self.model.files.get(path, "").count("\n")
        self.step(insert(path, data.draw(st.integers(-1, lines + 2)), text))

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        self.step(delete(self.pick(data, "any")))

    @rule(files=st.booleans(), data=st.data())
    def rename(self, files: bool, data: st.DataObject) -> None:
        paths = FILE_PATHS if files else DIR_PATHS
        old, new = self.pick(data, "file" if files else "dir", paths), data.draw(paths)
        if not files and new.startswith(old + "/"):
            # the reference raises a bare OSError here (test_a_directory_cannot_move_into_itself)
            assert run(self.tool, rename(old, new))[0] == "error"
            return
        self.step(rename(old, new))

    @invariant()
    def same_files(self) -> None:
        assert stored(self.memory) == self.model.files
        assert reference_files(self.reference) == self.model.files


def test_random_sequences_match_the_reference_and_the_model(make_memory: MakeMemory) -> None:
    ToolMachine.memory = make_memory()
    run_state_machine_as_test(
        ToolMachine, settings=settings(max_examples=scaled(40), stateful_step_count=20)
    )


# ---------------------------------------------------------------- path attacks

ATTACKS = [
    "/etc/passwd",
    "memories/a.md",
    "//memories/a.md",
    " /memories/a.md",
    "/memoriesx/a.md",
    "/memories/../a.md",
    "/memories/../../etc/passwd",
    "/memories/d/../../a.md",
    "/memories/./a.md",
    "/memories//a.md",
    "/memories//",
    "/memories/d//",
    "/memories/a.md/../../b.md",
    "/memories/..\\..\\a.md",
    "/memories/d\\a.md",
    "/memories/a\x00.md",
    "/memories/a\x00/../../x.md",
    "/memories/%2e%2e/a.md",
    "/memories/%2E%2E%2Fa.md",
    "/memories/a%2fb.md",
    "/memories/.hidden.md",
    "/memories/.ssh/id.md",
    "/memories/~root.md",
    "/memories/C:evil.md",
    "/memories/con.md",
    "/memories/d/nul.md",
    f"/memories/a{SEPARATOR}b.md",
    "/memories/a\n.md",
    "/memories/a\u2028.md",
    "/memories/" + "x" * 300 + ".md",
]


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if "locks" not in p.parts
    }


def test_path_attacks_are_refused_and_change_nothing(
    make_memory: MakeMemory, tmp_path: Path
) -> None:
    mem = make_memory()
    tool = AgentMemMemoryTool(mem)
    tool.call(create("/memories/a.md", "safe"))
    before, files_before = stored(mem), tree(tmp_path)
    for path in ATTACKS:
        for command in (
            view(path),
            create(path, "pwned"),
            replace(path, "safe", "pwned"),
            insert(path, 0, "pwned"),
            delete(path),
            rename(path, "/memories/moved.md"),
            rename("/memories/a.md", path),
        ):
            try:
                answer = tool.call(command)
            except ToolError:
                continue
            pytest.fail(f"{command!r} was accepted: {answer!r}")
    assert stored(mem) == before
    assert tree(tmp_path) == files_before


SEGMENTS = st.sampled_from(
    ["..", ".", "", "a", "b.md", "%2e", "%2F", "\\", "\x00", "~", ":", " ", SEPARATOR, "/", "x.MD"]
)


@settings(max_examples=scaled(150))
@given(parts=st.lists(SEGMENTS, max_size=5), joiner=st.sampled_from(["/", "", "\\"]))
def test_any_accepted_path_names_one_topic_inside_memories(parts: list[str], joiner: str) -> None:
    path = "/memories" + joiner + joiner.join(parts)
    try:
        topic = topic_of_path(path)
    except agentmem.InvalidArgumentError:
        return
    if topic is None:  # a directory: a path of safe components
        assert ".." not in path.split("/") and "\\" not in path
        return
    assert path_of_topic(topic) == path.rstrip("/")  # one path per topic, and back
    assert agentmem.topics.check_topic(topic) == topic
    for part in topic.split(SEPARATOR):
        assert part not in ("", ".", "..") and not part.startswith(".")


def test_accepted_paths_write_only_their_own_file(tmp_path: Path) -> None:
    """Any path from hostile pieces: refused, or one file directly in memories/, nothing else."""
    root = tmp_path / "root"
    with agentmem.Memory(root=root) as mem:
        tool = AgentMemMemoryTool(mem)
        tool.call(create("/memories/seed.md", "seed"))  # memories/ exists from here on

        @settings(max_examples=scaled(100))
        @given(parts=st.lists(SEGMENTS, max_size=4), joiner=st.sampled_from(["/", "\\"]))
        def check(parts: list[str], joiner: str) -> None:
            path = "/memories" + joiner + joiner.join(parts)
            before = tree(tmp_path)
            try:
                tool.call(create(path, "x"))
            except ToolError:
                assert tree(tmp_path) == before
                return
            topic = topic_of_path(path)
            assert topic is not None
            added = set(tree(tmp_path)) - set(before)
            assert added <= {f"root/memories/{topic}.md"}  # (already there: "already exists")
            assert (root / "memories" / f"{topic}.md").read_text() == "x"
            tool.call(delete(path))
            assert tree(tmp_path) == {k: v for k, v in before.items() if k not in added}

        check()


def test_symlinks_cannot_lead_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("top secret")
    with agentmem.Memory(root=tmp_path / "root") as mem:
        tool = AgentMemMemoryTool(mem)
        tool.call(create("/memories/a.md", "a"))
        topics = tmp_path / "root" / "memories"
        (topics / "evil.md").symlink_to(outside / "secret.md")
        for command in (view("/memories/evil.md"), replace("/memories/evil.md", "top", "x")):
            with pytest.raises(ToolError) as info:
                tool.call(command)
            assert "top secret" not in str(info.value)
        assert "evil" not in tool.call(view("/memories"))
        shutil.rmtree(topics)
        topics.symlink_to(outside, target_is_directory=True)
        with pytest.raises(ToolError):
            tool.call(create("/memories/b.md", "leak"))
        with pytest.raises(ToolError):
            tool.call(view("/memories/secret.md"))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]
    assert (outside / "secret.md").read_text() == "top secret"


# ---------------------------------------------------------------- secrets

SECRET = "sk-proj-" + "Ab3" * 16


def test_secrets_are_scrubbed_on_every_write(make_memory: MakeMemory, tmp_path: Path) -> None:
    mem = make_memory()
    tool = AgentMemMemoryTool(mem)
    answer = tool.call(create("/memories/keys.md", f"openai key: {SECRET}\n"))
    assert "redacted" in str(answer)
    tool.call(create("/memories/cfg/env.md", "nothing yet\n"))
    tool.call(replace("/memories/cfg/env.md", "nothing yet", f"OPENAI_API_KEY={SECRET}"))
    tool.call(insert("/memories/cfg/env.md", 0, f"token {SECRET}"))
    tool.call(rename("/memories/cfg", "/memories/config"))
    files = stored(mem)
    assert sorted(files) == ["/memories/config/env.md", "/memories/keys.md"]
    assert all(SECRET not in text for text in files.values())
    assert all(SECRET not in tool.call(view(path)) for path in files)
    on_disk = b"".join(p.read_bytes() for p in tmp_path.rglob("*.md") if p.is_file())
    assert SECRET.encode() not in on_disk
    with pytest.raises(ToolError, match="secret"):
        tool.call(create(f"/memories/{SECRET}.md", "x"))
    assert sorted(stored(mem)) == ["/memories/config/env.md", "/memories/keys.md"]


def test_oversized_content_is_cut_and_the_answer_says_so(make_memory: MakeMemory) -> None:
    mem = make_memory()
    tool = AgentMemMemoryTool(mem)
    big = "\n".join(f"line {i} " + "word " * 20 for i in range(2000))
    answer = str(tool.call(create("/memories/big.md", big)))
    assert "end was cut off" in answer
    kept = stored(mem)["/memories/big.md"]
    assert kept.startswith("line 0 ") and len(kept) < len(big)
    assert mem.topics.token_counter.count_text(kept) <= mem.topics.max_tokens_per_file


# ---------------------------------------------------------- the updater's files, the next session


def test_the_updaters_topics_and_the_next_sessions_prompt(make_memory: MakeMemory) -> None:
    mem = make_memory()
    mem.topics.write("deploy", "# Deploy\nrun make deploy\n")  # as the memory updater does
    mem.topics.write(f"proj{SEPARATOR}api", "the API uses REST\n")
    mem.topics.write("50%2e", "a name no path maps back to\n")
    tool = AgentMemMemoryTool(mem)
    listing = tool.call(view("/memories"))
    assert "/memories/deploy.md" in listing and "/memories/proj/api.md" in listing
    assert "1 topic(s) not shown" in listing and "'50%2e'" in listing
    assert "run make deploy" in tool.call(view("/memories/deploy.md"))
    tool.call(replace("/memories/deploy.md", "make deploy", "make release"))
    tool.call(create("/memories/prefs.md", "The user prefers tabs.\n"))
    assert mem.topics.read("deploy") == "# Deploy\nrun make release\n"
    later = make_memory()  # a later process on the same store
    with later.session(name="next") as s:
        assert "The user prefers tabs." in s.topics_prompt
        assert "run make release" in s.topics_prompt
        assert f"## proj{SEPARATOR}api" in s.topics_prompt
    tool.call(delete("/memories/prefs.md"))
    assert later.topics.read("prefs") is None


def test_the_memory_updater_and_the_tool_share_the_files(backend: str, tmp_path: Path) -> None:
    """Claude's file reaches the memory updater; the updater's topic reaches Claude."""
    from agentmem.testing import ScriptedLLM, tool_call

    nested = f"user{SEPARATOR}prefs"
    llm = ScriptedLLM(
        [
            tool_call("read_memory", {"topic": nested}),
            tool_call("write_memory", {"topic": "deploy", "content": "Use make deploy.\n"}),
            {"role": "assistant", "content": "Memory updated."},
        ]
    )
    root = tmp_path / "root"
    with agentmem.Memory(root=root, backend=backend, llm=llm, durability="normal") as mem:
        tool = AgentMemMemoryTool(mem)
        tool.call(create("/memories/user/prefs.md", "prefers staging first\n"))
        with mem.session(name="task") as s:
            s.append({"role": "system", "content": "You are a coding agent."})
            s.start_task("Deploy the app.")
            for i in range(12):  # a long task, so finish_task runs the updater
                s.append(tool_call("bash", {"cmd": f"make step{i}"}, call_id=f"c{i}"))
                s.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"ok {i}"})
                s.record_usage(100, 10, 0.01)
            s.append({"role": "assistant", "content": "Deployed."})
            s.finish_task()
            result = s.last_memory_update
        assert result is not None and result.ran and result.error is None, result
        llm.assert_complete()
        read_back = [m for m in llm.calls[1][0] if m["role"] == "tool"][-1]["content"]
        assert "prefers staging first" in str(read_back)  # the updater read Claude's file
        assert "Use make deploy." in tool.call(view("/memories/deploy.md"))
        assert "/memories/deploy.md" in tool.call(view("/memories"))


# ---------------------------------------------------------------- TopicStore.delete and .locked


def test_topic_store_delete_and_locked(make_memory: MakeMemory, backend: str) -> None:
    topics = make_memory().topics
    topics.write("a", "A")
    assert topics.delete("a.md") is True  # the suffix is the file's, as for write
    assert topics.delete("a") is False
    assert topics.read("a") is None
    with pytest.raises(agentmem.UnsafePathError):
        topics.delete("../a")
    # locked(): another thread's write waits for the block to end
    topics.write("b", "B")
    done = threading.Event()
    writer = threading.Thread(target=lambda: (topics.write("b", "other"), done.set()))
    with topics.locked():
        text = topics.read("b")
        writer.start()
        writer.join(timeout=0.3)
        assert not done.is_set()  # blocked: the lock is held
        topics.write("b", f"{text}+edit")
    writer.join()
    assert topics.read("b") == "other"  # it wrote after the block, never in the middle

    # on PostgreSQL the block is one transaction: an error undoes all of it
    def interrupted() -> None:
        with topics.locked():
            topics.write("c", "C")
            topics.delete("b")
            raise RuntimeError("midway")

    with pytest.raises(RuntimeError):
        interrupted()
    if backend == "embedded":
        assert (topics.read("b"), topics.read("c")) == (None, "C")
    else:
        assert (topics.read("b"), topics.read("c")) == ("other", None)


# ---------------------------------------------------------------- concurrency


def test_threads_editing_at_once_lose_nothing(make_memory: MakeMemory) -> None:
    mem = make_memory()
    tools = [AgentMemMemoryTool(mem), AgentMemMemoryTool(make_memory())]
    workers, rounds = 6, 5
    names = [f"t{w}-{r}" for w in range(workers) for r in range(rounds)]
    tools[0].call(create("/memories/shared.md", ""))
    tools[0].call(create("/memories/team/slots.md", "".join(f"slot-{n}\n" for n in names)))
    go = threading.Barrier(workers)
    failures: list[BaseException] = []

    def work(w: int) -> None:
        tool = tools[w % 2]
        try:
            go.wait()
            for r in range(rounds):
                me = f"t{w}-{r}"
                tool.call(insert("/memories/shared.md", 0, me))
                tool.call(replace("/memories/team/slots.md", f"slot-{me}\n", f"done-{me}\n"))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    files = stored(mem)
    assert sorted(files["/memories/shared.md"].split()) == sorted(names)
    assert sorted(files["/memories/team/slots.md"].split()) == sorted(f"done-{n}" for n in names)


def test_asyncio_tasks_editing_at_once_lose_nothing(make_memory: MakeMemory) -> None:
    tool = AsyncAgentMemMemoryTool(make_memory())
    names = [f"task{i}" for i in range(12)]

    async def main() -> None:
        await tool.call(create("/memories/log.md", ""))
        await asyncio.gather(*(tool.call(insert("/memories/log.md", 0, n)) for n in names))
        assert sorted(tool.sync.topics.read("log").split()) == sorted(names)  # type: ignore[union-attr]
        await tool.call(create("/memories/gone/x.md", "x"))
        assert await tool.clear_all_memory() == "All memory cleared"

    asyncio.run(main())
    assert tool.sync.topics.list() == []


def test_clear_all_memory_and_the_view_after_it(make_memory: MakeMemory) -> None:
    mem = make_memory()
    tool = AgentMemMemoryTool(mem)
    tool.call(create("/memories/log.md", "a"))
    events: list[str] = []

    async def collect() -> None:
        async_tool = AsyncAgentMemMemoryTool(mem)
        events.append(str(await async_tool.call(insert("/memories/log.md", 1, "b"))))
        events.append(str(await async_tool.call(view("/memories/log.md"))))

    asyncio.run(collect())
    assert events == [
        "The file /memories/log.md has been edited.",
        "Here's the content of /memories/log.md with line numbers:\n     1\ta\n     2\tb\n     3\t",
    ]
    assert tool.clear_all_memory() == "All memory cleared"
    assert stored(mem) == {}
    assert run(tool, view("/memories"))[1].endswith("\n-\t/memories")


def test_processes_editing_at_once_lose_nothing(backend: str, tmp_path: Path) -> None:
    workers, rounds = 3, 4
    root, go = tmp_path / "root", tmp_path / "go"
    names = [f"w{w}-{r}" for w in range(workers) for r in range(rounds)]
    with agentmem.Memory(root=root, backend=backend) as mem:
        tool = AgentMemMemoryTool(mem)
        tool.call(create("/memories/shared.md", ""))
        tool.call(create("/memories/team/slots.md", "".join(f"slot-{n}\n" for n in names)))
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(root), backend, str(w), str(rounds), str(go)],
            env=child_env(),
        )
        for w in range(workers)
    ]
    time.sleep(0.3)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * workers
    with agentmem.Memory(root=root, backend=backend) as mem:
        files = stored(mem)
    assert sorted(files["/memories/shared.md"].split()) == sorted(names)
    assert sorted(files["/memories/team/slots.md"].split()) == sorted(f"done-{n}" for n in names)
    assert {p: t for p, t in files.items() if p.startswith("/memories/w")} == {
        f"/memories/w{w}/r{r}.md": f"w{w}-{r}" for w in range(workers) for r in range(rounds)
    }


# ---------------------------------------------------------------- the SDK's tool runner, offline


def scripted_transport(
    steps: list[list[dict[str, Any]]], seen: list[dict[str, Any]]
) -> httpx.MockTransport:
    """Answers each ``POST /v1/messages`` with the next scripted content; records the requests."""

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        content = steps[len(seen) - 1]
        uses = any(block["type"] == "tool_use" for block in content)
        return httpx.Response(
            200,
            json={
                "id": f"msg_{len(seen)}",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": content,
                "stop_reason": "tool_use" if uses else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        )

    return httpx.MockTransport(handle)


def use(n: int, **command: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": command}


RUNNER_STEPS = [
    [use(1, command="view", path="/memories")],
    [
        use(2, command="create", path="/memories/user/prefs.md", file_text="likes coffee\n"),
        use(3, command="view", path="/memories/../etc/passwd"),
    ],
    [
        use(
            4,
            command="str_replace",
            path="/memories/user/prefs.md",
            old_str="coffee",
            new_str="tea",
        )
    ],
    [{"type": "text", "text": "Noted: you like tea."}],
]


def check_runner_requests(seen: list[dict[str, Any]]) -> None:
    assert seen[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [
        block
        for body in seen[1:]
        for block in body["messages"][-1]["content"]
        if block["type"] == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["toolu_1", "toolu_2", "toolu_3", "toolu_4"]
    assert [bool(r.get("is_error")) for r in results] == [False, False, True, False]
    text = json.dumps(results)
    assert "Here're the files and directories" in text
    assert "File created successfully at: /memories/user/prefs.md" in text
    assert "would escape /memories directory" in text
    assert "The memory file has been edited" in text


def test_the_sdk_tool_runner_drives_the_tool_offline(make_memory: MakeMemory) -> None:
    mem = make_memory()
    seen: list[dict[str, Any]] = []
    client = Anthropic(
        api_key="test-key",
        http_client=httpx.Client(transport=scripted_transport(RUNNER_STEPS, seen)),
    )
    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-5-5",
        max_tokens=1024,
        tools=[AgentMemMemoryTool(mem)],
        messages=[{"role": "user", "content": "Remember that I like tea, not coffee."}],
    )
    final = runner.until_done()
    assert final.content[0].type == "text"
    assert len(seen) == len(RUNNER_STEPS)
    check_runner_requests(seen)
    assert mem.topics.read(f"user{SEPARATOR}prefs") == "likes tea\n"


def test_the_async_tool_runs_in_the_async_runner(make_memory: MakeMemory) -> None:
    mem = make_memory()
    seen: list[dict[str, Any]] = []

    async def main() -> None:
        client = AsyncAnthropic(
            api_key="test-key",
            http_client=httpx.AsyncClient(transport=scripted_transport(RUNNER_STEPS, seen)),
        )
        runner = client.beta.messages.tool_runner(
            model="claude-sonnet-5-5",
            max_tokens=1024,
            tools=[AsyncAgentMemMemoryTool(mem)],
            messages=[{"role": "user", "content": "Remember that I like tea, not coffee."}],
        )
        await runner.until_done()

    asyncio.run(main())
    check_runner_requests(seen)
    assert mem.topics.read(f"user{SEPARATOR}prefs") == "likes tea\n"


# ---------------------------------------------------------------- packaging


def test_import_agentmem_does_not_import_anthropic() -> None:
    code = (
        "import sys, agentmem\n"
        "assert 'anthropic' not in sys.modules, 'anthropic imported'\n"
        "assert 'agentmem.integrations.anthropic_memory' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env(), timeout=120)


def test_without_the_sdk_the_error_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['anthropic'] = None\n"
        "from agentmem.errors import ConfigurationError\n"
        "try:\n"
        "    import agentmem.integrations.anthropic_memory\n"
        "except ConfigurationError as exc:\n"
        "    assert \"pip install 'agentmem[anthropic]'\" in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('imported without anthropic')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=child_env(), timeout=120)


def test_the_tool_needs_a_memory() -> None:
    with pytest.raises(agentmem.InvalidArgumentError, match=r"agentmem\.Memory"):
        AgentMemMemoryTool("/tmp/somewhere")  # type: ignore[arg-type]
