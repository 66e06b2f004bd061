"""The HTML export in a real headless browser: inert, offline, quick to render at 10k messages.

Drives Debian's ``chromium`` over the DevTools protocol (``bench/_cdp.py``,
standard library only). What a test reads from the browser: console
messages, uncaught exceptions, the browser log (where CSP violations go),
every network request, JavaScript dialogs, and ``performance`` timings.
A control page first shows that each of those detectors does see a
violation, so a clean result means something.

Skips, with one line, when no Chromium binary is installed
(``apt-get install chromium``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agentmem
from agentmem.session_store import export_html
from agentmem.time_machine import read_task_tree

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _bench_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_agentmem_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


cdp = _bench_module("_cdp")
CHROMIUM = cdp.find_chromium()
if CHROMIUM is None:
    pytest.skip(
        "no chromium binary: the HTML export's browser tests skip (apt-get install chromium)",
        allow_module_level=True,
    )
sessions = _bench_module("_export_session")

EVIL_SCRIPT = "<script>alert(1)</script>"
TOOL_OUTPUT = "build log line\n" * 10 + f"out {EVIL_SCRIPT}"  # past the summary's preview
EVIL_ATTRIBUTE = '"><img src=x onerror=alert(2)>'
FETCHING = '<img src="http://127.0.0.1:9/pixel.png"><link rel="stylesheet" href="http://127.0.0.1:9/s.css">'


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with cdp.Browser(CHROMIUM) as b:
        yield b


def _evil_session(tmp_path: Path) -> Path:
    """A session holding markup in every kind of message, exported through the facade."""
    with agentmem.Memory(root=tmp_path / "mem", working_dir=tmp_path) as mem:
        s = mem.session(name=f"title {EVIL_SCRIPT}")
        s.start_task(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"please {EVIL_SCRIPT} and {EVIL_ATTRIBUTE}"},
                    {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/i.png"}},
                ],
            }
        )
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "bash", "arguments": '{"cmd": "echo \\"<script>\\""}'}
        s.append({"role": "assistant", "content": None, "tool_calls": [call]})
        s.append({"role": "tool", "tool_call_id": "call_1", "content": TOOL_OUTPUT})
        s.append({"role": "assistant", "content": f"{EVIL_ATTRIBUTE} then {FETCHING}"})
        s.record_usage(10, 2, 0.001)
        s.close()
        return mem.sessions.export(s.id, tmp_path / "evil.html")


def test_the_detectors_see_scripts_violations_and_fetches(browser: Any, tmp_path: Path) -> None:
    # Without these, a clean result below could mean a deaf detector.
    free = tmp_path / "free.html"
    free.write_text(
        "<!DOCTYPE html><title>control</title><script>console.error('seen')</script>"
        '<img src="http://127.0.0.1:9/control.png">',
        encoding="utf-8",
    )
    loaded = browser.load(free)
    assert any("seen" in p for p in loaded.problems())
    assert loaded.fetched() == ["http://127.0.0.1:9/control.png"]
    locked = tmp_path / "locked.html"
    locked.write_text(
        '<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
        "<title>control</title><script>console.error('ran')</script>",
        encoding="utf-8",
    )
    problems = browser.load(locked).problems()
    assert problems and not any("ran" in p for p in problems)  # the CSP violation, reported


def test_the_page_loads_with_no_console_error_and_fetches_nothing(
    browser: Any, tmp_path: Path
) -> None:
    loaded = browser.load(_evil_session(tmp_path))
    assert loaded.problems() == []
    assert loaded.fetched() == []
    assert loaded.requests == [loaded.url]


def test_markup_in_messages_shows_as_text(browser: Any, tmp_path: Path) -> None:
    loaded = browser.load(_evil_session(tmp_path))
    assert loaded.dialogs == []
    shown = browser.evaluate("document.body.innerText")
    assert f"please {EVIL_SCRIPT} and {EVIL_ATTRIBUTE}" in shown
    assert f"{EVIL_ATTRIBUTE} then {FETCHING}" in shown
    assert "[image: http://127.0.0.1:9/i.png]" in shown
    assert 'cmd\necho "<script>"' in shown  # the tool call's argument, as a string
    assert f"title {EVIL_SCRIPT}" in browser.evaluate("document.title")
    assert browser.evaluate("document.scripts.length") == 0
    assert browser.evaluate("document.querySelectorAll('[onerror], link, iframe').length") == 0
    assert browser.evaluate("document.images.length") == 0  # the remote image is text
    # A tool result is collapsed; opened, it shows its markup as text too.
    assert f"out {EVIL_SCRIPT}" not in shown and "build log line" in shown
    opened = browser.evaluate(
        "document.querySelectorAll('details.tool-result').forEach(d => d.open = true),"
        "document.body.innerText"
    )
    assert f"out {EVIL_SCRIPT}" in opened


def test_a_10000_message_export_renders_quickly(browser: Any, tmp_path: Path) -> None:
    sessions.make_task_tree(tmp_path / "mem", tmp_path, "export-bench", 8)
    record = sessions.build_record(10_000)
    tree = read_task_tree(tmp_path / "mem" / "snapshots", "export-bench")
    page = tmp_path / "big.html"
    page.write_text(export_html(record, tasks=tree), encoding="utf-8")
    loaded = browser.load(page)
    timings = browser.timings()
    print(
        f"\n10,000-message export ({page.stat().st_size / 1e6:.1f} MB): "
        f"first contentful paint {timings['first_contentful_paint']:.0f} ms, "
        f"DOMContentLoaded {timings['dom_content_loaded']:.0f} ms, "
        f"load {timings['load']:.0f} ms, layout and scroll to the end {timings['layout_ms']:.0f} ms"
    )
    assert loaded.problems() == [] and loaded.fetched() == []
    assert browser.evaluate("document.querySelectorAll('main article.msg').length") == 10_000
    assert browser.evaluate("document.querySelectorAll('#tasks tr').length") == 9
    # A sanity bound only (a loaded CI machine is slow); bench/bench_export.py measures.
    assert 0 < timings["load"] < 10_000
