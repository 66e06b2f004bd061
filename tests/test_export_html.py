"""The HTML export page: what it shows of a real session, and that it escapes everything.

The page must be readable at 10,000 messages (tool outputs collapsed, long
texts clipped, a task index with anchors, the thread summary, billing
totals) and inert whatever a record holds. The browser side (no console
error, no fetch, render time) is in tests/test_export_browser.py.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentmem
from agentmem.session_store import (
    BillingRecord,
    SessionInfo,
    SessionRecord,
    SessionStore,
    export_html,
    html_page,
)
from agentmem.time_machine import read_task_tree
from agentmem.yarn import ThreadSummary


class _Page(html.parser.HTMLParser):
    """Start tags with their attributes, and the page's text (character references decoded)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[tuple[str, str | None], ...]]] = []
        self.data: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(attrs)))

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    @property
    def text(self) -> str:
        return "".join(self.data)

    def ids(self) -> set[str]:
        return {v for _, attrs in self.tags for k, v in attrs if k == "id" and v}

    def hrefs(self) -> list[str]:
        return [v or "" for _, attrs in self.tags for k, v in attrs if k == "href"]


def _memory(tmp_path: Path) -> agentmem.Memory:
    return agentmem.Memory(root=tmp_path / "mem", working_dir=tmp_path, durability="normal")


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _tool_round(s: agentmem.Session, i: int, output: str) -> None:
    call = {"id": f"call_{i}", "type": "function"}
    call["function"] = {"name": "bash", "arguments": json.dumps({"cmd": f"step {i}"})}
    s.append({"role": "assistant", "content": None, "tool_calls": [call]})
    s.append({"role": "tool", "tool_call_id": f"call_{i}", "content": output})


# --------------------------------------------------------------------------- a real session


def test_the_page_of_a_real_session_while_it_is_open(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        s = mem.session(name="refactor", context_window=2_000)
        edited = tmp_path / "module.py"
        for i in range(1, 7):
            s.start_task(f"request {i}: rename the helper " + "word " * 40)
            s.time_machine.record_file_before_change(edited)
            edited.write_text(f"version {i}\n", encoding="utf-8")
            _tool_round(s, i, f"output of step {i}\n" * 30)
            s.record_usage(1_000 + i, 20, 0.01)
            s.append({"role": "assistant", "content": f"done {i}"})
            s.context()  # trims: the thread summary goes into the state
        s.undo()  # task 6 is undone; task 5 is active again
        # The session stays open (its lock held) while it is exported, and nothing is written.
        before = _files(tmp_path / "mem" / "snapshots")
        page = mem.sessions.export(s.id, tmp_path / "out.html").read_text("utf-8")
        assert _files(tmp_path / "mem" / "snapshots") == before
        s.close()

    parsed = _Page(page)
    # Every link goes to an element of the page.
    assert parsed.hrefs() and {h[1:] for h in parsed.hrefs()} <= parsed.ids()
    assert {"summary", "tasks", "billing", "messages", "state"} <= parsed.ids()
    assert {f"task-{i}" for i in range(1, 7)} <= parsed.ids()
    text = parsed.text
    assert re.search(r"Summary of \d+ earlier messages that are no longer shown", text)
    rows = re.findall(r"<tr><td><a href=\"#task-(\d)\">.*?</tr>", page)
    assert rows == [str(i) for i in range(1, 7)]
    assert re.search(r"#6</a></td><td>#5</td><td>undone(, finished)?<", page)
    assert re.search(r"#5</a></td><td>#4</td><td>current(, finished)?<", page)
    assert "module.py" in page.split('id="billing"')[0]  # the files each task changed
    assert "6 requests, 6,141 tokens, $0.0600" in text
    assert '<div class="text">' + "output of step 3\n" * 30 + "</div></details>" in page
    assert page.count('<details class="tool-result">') == 6


def test_the_task_index_without_a_tree_comes_from_the_messages(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite")
    sid = store.create().id
    store.writer(sid).on_append(
        [
            {"role": "user", "content": "first request", "task_id": 1},
            {"role": "assistant", "content": "ok", "task_id": 1},
            {"role": "user", "content": "second request", "task_id": 2},
        ]
    )
    page = store.export(sid, tmp_path / "p.html").read_text("utf-8")
    store.close()
    assert re.search(
        r'#1</a></td><td></td><td>not in the task tree</td><td><div class="text">'
        r"first request</div>",
        page,
    )
    assert '<h3 class="task" id="task-2">Task #2' in page


# --------------------------------------------------------------------------- the task tree


def test_a_damaged_task_tree_is_reported_on_the_page_and_left_alone(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        s = mem.session()
        s.start_task("one")
        s.close()
        record = tmp_path / "mem" / "snapshots" / "sessions" / f"{s.id}.json"
        record.write_text('{"format": "agentmem.time-machine", "version": 1, "tasks": 7}')
        before = _files(tmp_path / "mem" / "snapshots")
        page = mem.sessions.export(s.id, tmp_path / "out.html").read_text("utf-8")
        # Not moved aside (opening the session does that, and reports it).
        assert _files(tmp_path / "mem" / "snapshots") == before
    assert re.search(r'<p class="problem">task tree record .*unreadable', page)
    assert "not in the task tree" in page  # the messages still give the index


def test_read_task_tree(tmp_path: Path) -> None:
    assert read_task_tree(None, "x") == read_task_tree(tmp_path, "missing")
    assert read_task_tree(tmp_path, "missing").tasks == ()
    (tmp_path / "sessions").mkdir()
    newer = {"format": "agentmem.time-machine", "version": 99, "tasks": {}, "active": 0}
    (tmp_path / "sessions" / "n.json").write_text(json.dumps(newer))
    view = read_task_tree(tmp_path, "n")
    assert view.tasks == () and view.problem is not None and "newer agentmem" in view.problem
    (tmp_path / "sessions" / "n.json").write_bytes(b"\xff\xfe")
    assert "unreadable" in (read_task_tree(tmp_path, "n").problem or "")


def test_files_changed_leave_out_paths_a_task_only_pinned(tmp_path: Path) -> None:
    with _memory(tmp_path) as mem:
        s = mem.session()
        a, b = tmp_path / "a.txt", tmp_path / "b.txt"
        s.start_task("one")
        s.time_machine.record_file_before_change(a)
        a.write_text("1")
        s.start_task("two")
        s.time_machine.record_file_before_change(b)
        b.write_text("2")
        s.undo()  # back to task 1, which edits a.txt again: task 2 gets a.txt pinned
        s.time_machine.record_file_before_change(a)
        a.write_text("1 again")
        s.close()
        view = read_task_tree(tmp_path / "mem" / "snapshots", s.id)
    files = {t["task_id"]: t["files"] for t in view.tasks}
    assert files == {1: ["a.txt"], 2: ["b.txt"]}
    assert view.active == 1


# --------------------------------------------------------------------------- readability


def _record(messages: list[dict[str, Any]], state: dict[str, Any] | None = None) -> SessionRecord:
    info = SessionInfo("s1", "t", 0.0, 0.0, None, None, None, len(messages))
    return SessionRecord(info, messages, state or {}, [], {})


def test_long_texts_are_clipped_with_the_whole_text_in_a_closed_block() -> None:
    long_text = "".join(f"line {i}\n" for i in range(500))
    page = export_html(
        _record(
            [
                {"role": "user", "content": long_text},
                {"role": "tool", "tool_call_id": "c", "content": long_text},
            ]
        )
    )
    user_part, tool_part = page.split('id="m1"')
    shown = user_part.split('id="m0"')[1]
    start = "".join(f"line {i}\n" for i in range(40)).rstrip("\n")
    assert f'<div class="text">{start}</div><details class="more">' in shown  # 40 lines
    assert f'<div class="text">{long_text}</div></details>' in shown  # then all of it
    assert "<summary>Show all 4,390 characters (500 lines)</summary>" in shown
    assert tool_part.count("line 499") == 1  # a tool result is collapsed whole, never clipped
    assert html_page.CLIP_LINES == 40


def test_the_contents_link_every_1000th_message_of_a_long_session() -> None:
    page = _Page(export_html(_record([{"role": "user", "content": "x"}] * 2_500)))
    assert [h for h in page.hrefs() if re.fullmatch(r"#m\d+", h)] == ["#m0", "#m1000", "#m2000"]
    assert {"m0", "m1000", "m2000"} <= page.ids()


def test_the_thread_summary_is_shown_and_a_damaged_one_reported() -> None:
    summary = ThreadSummary.from_messages([{"role": "user", "content": "<b>fix</b> the bug"}])
    state = {"yarn": {"format": "agentmem.yarn", "version": 1, "summary": summary.to_json()}}
    page = export_html(_record([{"role": "user", "content": "x"}], state))
    assert '<div class="summary"><div class="text">Summary of 1 earlier message' in page
    assert "&lt;b&gt;fix&lt;/b&gt; the bug" in page
    state["yarn"]["summary"] = {"format": "agentmem.thread-summary", "version": 1, "bad": "<i>"}
    page = export_html(_record([], state))
    assert "The stored thread summary is unreadable" in page and "&lt;i&gt;" in page
    assert "<i>" not in page


def test_what_loading_repaired_is_on_the_page_whole() -> None:
    record = _record([{"role": "user", "content": "x", "note": "y" * 3_000}])
    record.quarantined = list(range(1_000))
    page = export_html(record)
    assert "Loading this session found damage (quarantined or repaired)" in page
    assert '"quarantined": [0, 1, 2,' in _Page(page).text and ", 999]}" in page
    assert "y" * 3_000 in page  # an internal field, whole (clipped, with all of it a click away)


def test_billing_totals_by_kind_and_model_and_every_request_collapsed() -> None:
    record = _record([])
    record.billing = [
        BillingRecord(1.0, "llm", "m-a", 100, 10, 0.5),
        BillingRecord(2.0, "llm", "m-a", 200, 20, 0.25),
        BillingRecord(3.0, "memory_update", None, 5, 1, 0.125),
    ]
    page = export_html(record)
    assert '<tr><td>llm</td><td>m-a</td><td class="n">2</td><td class="n">300</td>' in page
    assert '<tr><th colspan="2">Total</th><td class="n">3</td><td class="n">305</td>' in page
    assert "0.8750</td></tr></table>" in page
    assert "<details><summary>Every request (3)</summary>" in page


# --------------------------------------------------------------------------- atomic writes


def test_an_export_replaces_the_file_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(tmp_path / "s.sqlite")
    sid = store.create().id
    store.writer(sid).on_append([{"role": "user", "content": "hello"}])
    target = tmp_path / "out.html"
    target.write_text("old")
    store.export(sid, target)
    assert "hello" in target.read_text("utf-8")

    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError("render failed")

    monkeypatch.setattr("agentmem.session_store.sessions.export_html", broken)
    before, listing = target.read_bytes(), sorted(os.listdir(tmp_path))
    with pytest.raises(RuntimeError):
        store.export(sid, target)
    assert target.read_bytes() == before and sorted(os.listdir(tmp_path)) == listing
    store.close()


# --------------------------------------------------------------------------- escaping


def _structure(page: str) -> list[tuple[str, tuple[tuple[str, str | None], ...]]]:
    return _Page(page).tags


def _fill(text: str) -> SessionRecord:
    """A record with ``text`` in every place a stored string can reach the page."""
    call = {"id": text, "type": "function", "function": {"name": text, "arguments": "x" + text}}
    decoded = {"id": text, "type": "function"}  # arguments that decode: one row each
    decoded["function"] = {"name": "f", "arguments": json.dumps({"k" + text: text, "n": [text]})}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": text},
        {"role": "user", "content": [{"type": "text", "text": text}], "name": text, "task_id": 1},
        {
            "role": "assistant",
            "content": text,
            "reasoning_content": text,
            "refusal": text,
            "tool_calls": [call, decoded],
            "task_id": 1,
            "k" + text: text,  # an internal field (never one of the shown ones)
        },
        {"role": "tool", "tool_call_id": text, "content": text, "task_id": 1},
        {"role": "r" + text, "content": {"odd": text}},  # an unknown role
    ]
    info = SessionInfo(text, text, 0.0, 0.0, text, text, None, len(messages))
    billing = [BillingRecord(0.0, text, text)]
    state = {"s" + text: text, "tasks": {"finished": [1], "iterations": {text: 1}}}
    return SessionRecord(info, messages, state, billing, {text: messages[:2]})


def _blank(text: str) -> str:
    """``text`` with every character but newlines replaced: the same length and lines."""
    return re.sub(r"[^\n]", "x", text)


@given(st.text(max_size=300) | st.sampled_from(['"><img src=x onerror=alert(1)>', "</pre><a>"]))
def test_no_tag_or_attribute_comes_from_stored_text(text: str) -> None:
    """The page's markup (tags, attributes, their values) is the same whatever the text is.

    Compared with the page of the same record where every character of the
    text is an ``x`` (same length, same lines, so clipping happens alike):
    anything the text could inject would change the tags.
    """
    page = export_html(_fill(text))
    assert _structure(page) == _structure(export_html(_fill(_blank(text))))
    assert "<script" not in page.lower()
    if text.strip():
        # The text itself is on the page, as text (json-quoted where shown as JSON).
        shown = _Page(page).text
        assert text in shown or json.dumps(text, ensure_ascii=False)[1:-1] in shown


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("parent", 1),  # a task that is its own parent
        ("parent", 7),  # a parent that does not exist
        ("dirty", [1, "a"]),  # paths of mixed types
    ],
)
def test_a_damaged_task_tree_is_reported_on_the_page(
    tmp_path: Path, field: str, value: object
) -> None:
    # These records used to hang the export (a loop of parents) or crash it.
    with agentmem.Memory(root=tmp_path / "mem", working_dir=tmp_path) as mem:
        with mem.session(name="damaged tree") as s:
            s.start_task("one")
            s.append({"role": "assistant", "content": "ok"})
        record = tmp_path / "mem" / "snapshots" / "sessions" / f"{s.id}.json"
        doc = json.loads(record.read_text())
        if field == "parent":
            doc["tasks"]["1"]["parent"] = value
        else:
            doc[field] = value
        record.write_text(json.dumps(doc))
        view = read_task_tree(tmp_path / "mem" / "snapshots", s.id)
        assert view.tasks == () and view.problem is not None
        page = mem.sessions.export(s.id, tmp_path / "out.html").read_text(encoding="utf-8")
        assert "unreadable" in page and "damaged tree" in page
        assert record.read_text() == json.dumps(doc)  # reported, not moved aside


def test_a_file_name_that_is_not_utf8_is_shown_replaced(tmp_path: Path) -> None:
    # A shell command under guard() made a Latin-1 file name (os.fsdecode: a lone surrogate).
    project = tmp_path / "project"
    project.mkdir()
    with (
        agentmem.Memory(root=tmp_path / "mem", working_dir=project) as mem,
        mem.session(name="unzip") as s,
    ):
        s.start_task("unzip the archive")
        with s.time_machine.guard():
            (project / os.fsdecode(b"caf\xe9.txt")).write_text("x")
        s.append({"role": "assistant", "content": "done"})
        page = mem.sessions.export(s.id, tmp_path / "out.html").read_text(encoding="utf-8")
    assert "caf\ufffd.txt" in page or "caf\\xe9.txt" in page


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_an_export_never_overwrites_the_store_it_reads(tmp_path: Path, suffix: str) -> None:
    # `mem.sessions.export(sid, <root>/sessions.sqlite, format="json")` used to replace
    # the database with the export (the next open moved it aside: every session lost).
    with agentmem.Memory(root=tmp_path / "mem", working_dir=tmp_path) as mem:
        with mem.session(name="kept") as s:
            s.append({"role": "user", "content": "hello"})
        own = mem.sessions.path
        assert own is not None
        with pytest.raises(agentmem.InvalidArgumentError, match="own database"):
            mem.sessions.export(s.id, own.parent / (own.name + suffix), format="json")
    with agentmem.Memory(root=tmp_path / "mem", working_dir=tmp_path) as mem:
        assert [info.name for info in mem.sessions.list()] == ["kept"]
