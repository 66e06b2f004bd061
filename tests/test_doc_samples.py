"""Every ```python block in README.md and docs/**/*.md runs, as a user would run it.

One test per page (its id is the page's path). A page's python blocks run in
order in one namespace, in a fresh temporary working directory, offline (the
``_no_network`` guard of conftest.py), with ``AGENTMEM_ROOT``,
``AGENTMEM_BACKEND`` and every ``*_API_KEY`` unset. A page may hold hidden
setup code in an HTML comment, run where it stands (so before the first block
when it sits above it)::

    <!-- doc-setup
    from agentmem.testing import ScriptedLLM
    llm = ScriptedLLM([...])
    -->

Doc-setup code finds pytest's ``monkeypatch`` in the namespace, to put an
offline stand-in where a sample builds a real client (``anthropic.Anthropic``
answering from a script, see tests/doc_fakes.py); it is undone after the page.

A page whose code names ``PG_DSN`` needs PostgreSQL: the harness gives it the
``postgresql://`` URI of a fresh database from the ``pg_dsn`` fixture
(tests/pg.py), and the page skips with that fixture's one line when there is
no server.

A fence right after a ``<!-- doc-output -->`` line is what the python block
before it prints (``...`` matches anything: ids, sizes), checked exactly
otherwise, so a page's shown figures cannot drift from the code.

A block may use top-level ``await`` (as in ``python -m asyncio`` or a
notebook): it then runs in its own ``asyncio.run``.

Code is compiled with the page's absolute path as its file name and padded
to its line in the page, so a traceback points at the line of the page and
shows it. Anything that is not runnable Python (signatures, pseudo-code,
output) is fenced ```text, ```sh or ```json; :func:`test_every_fence_names_its_language`
keeps a bare fence or a ```py from slipping past, and
:func:`test_the_harness_finds_the_samples` keeps the collector from silently
matching nothing.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pg import pg_uri

import agentmem
from agentmem.session import Session

ROOT = Path(__file__).resolve().parent.parent
MIN_BLOCKS = 30  # python blocks in README.md + docs/ were 36 when this was written

_FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_SETUP_OPEN = "<!-- doc-setup"
_SETUP_CLOSE = "-->"
_OUTPUT_MARK = "<!-- doc-output -->"
# Spellings of Python that renderers highlight but this harness would not run.
_PYTHON_ALIASES = {"py", "py3", "python3", "python2", "pycon", "ipython", "pyi", "sage"}


@dataclass(frozen=True)
class Fence:
    """One fenced block: its language (first word of the info string), code, and lines."""

    language: str
    code: str
    line: int  # 1-based line of the opening fence
    first_code_line: int  # 1-based line of the code's first line


@dataclass(frozen=True)
class Chunk:
    """What the harness runs or checks: a python block, a doc-setup comment, an output."""

    kind: str  # "block", "setup" or "output" (what the block before it must print)
    code: str
    line: int  # where it starts in the page (the fence or the comment)
    first_code_line: int


@dataclass(frozen=True)
class Page:
    path: Path
    fences: tuple[Fence, ...]
    chunks: tuple[Chunk, ...]  # in page order

    @property
    def name(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def blocks(self) -> list[Chunk]:
        return [c for c in self.chunks if c.kind == "block"]


def parse(path: Path) -> Page:
    """Split a Markdown page into its fences and the code to run (python blocks, doc-setup)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    fences: list[Fence] = []
    chunks: list[Chunk] = []
    output_mark: int | None = None  # the line of a doc-output mark waiting for its fence
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if output_mark is not None and not match and lines[i].strip():
            raise AssertionError(f"{path}:{output_mark}: {_OUTPUT_MARK} must precede a fence")
        if match:
            indent, fence = len(match["indent"]), match["fence"]
            info = match["info"].strip()
            body: list[str] = []
            j = i + 1
            while j < len(lines):
                close = _FENCE.match(lines[j])
                if (
                    close
                    and close["fence"][0] == fence[0]
                    and len(close["fence"]) >= len(fence)
                    and not close["info"].strip()
                ):
                    break
                body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
                j += 1
            code = "\n".join(body) + "\n"
            language = info.split()[0] if info else ""
            fences.append(Fence(language, code, i + 1, i + 2))
            if output_mark is not None:
                chunks.append(Chunk("output", code, i + 1, i + 2))
                output_mark = None
            elif language == "python":
                chunks.append(Chunk("block", code, i + 1, i + 2))
            i = j + 1
            continue
        if lines[i].strip() == _OUTPUT_MARK:
            output_mark = i + 1
            i += 1
            continue
        if lines[i].strip().startswith(_SETUP_OPEN):
            rest = lines[i].strip()[len(_SETUP_OPEN) :]
            body = [rest] if rest.strip() else []
            first = i + 1 if rest.strip() else i + 2
            j = i + 1
            while j < len(lines) and lines[j].strip() != _SETUP_CLOSE:
                body.append(lines[j])
                j += 1
            if j == len(lines):
                raise AssertionError(f"{path}:{i + 1}: doc-setup comment is never closed by -->")
            chunks.append(Chunk("setup", "\n".join(body) + "\n", i + 1, first))
            i = j + 1
            continue
        i += 1
    return Page(path, tuple(fences), tuple(chunks))


def doc_pages() -> list[Page]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [parse(p) for p in paths]


PAGES = doc_pages()
PAGES_WITH_CODE = [p for p in PAGES if p.blocks]


class DocSampleError(AssertionError):
    """A doc sample failed: names the page, the line of the block, and the exception."""


def _check_output(chunk: Chunk, page: Page, printed: str | None) -> None:
    """The block before a doc-output fence printed its text; ``...`` stands for anything."""
    if printed is None:
        raise DocSampleError(
            f"{page.name}: the output at line {chunk.line} does not follow a python block"
        )
    parts = [re.escape(part) for part in chunk.code.rstrip().split("...")]
    if not re.fullmatch(".*?".join(parts), printed.rstrip(), flags=re.DOTALL):
        raise DocSampleError(
            f"{page.name}: the output at line {chunk.line} is not what the block before it "
            f"printed:\n--- the page\n{chunk.code.rstrip()}\n--- printed\n{printed.rstrip()}"
        )


def _run(chunk: Chunk, page: Page, namespace: dict[str, Any]) -> None:
    # Padded to its line and compiled under the page's own path: tracebacks show the page's line.
    source = "\n" * (chunk.first_code_line - 1) + chunk.code
    what = "doc-setup comment" if chunk.kind == "setup" else "python block"
    try:
        code = compile(source, str(page.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if code.co_flags & inspect.CO_COROUTINE:  # top-level await, as in `python -m asyncio`
            asyncio.run(eval(code, namespace))
        else:
            exec(code, namespace)
    except Exception as exc:
        raise DocSampleError(
            f"{page.name}: the {what} at line {chunk.line} raised {type(exc).__name__}: {exc}"
        ) from exc


def _close_what_samples_opened(namespace: dict[str, Any]) -> None:
    """Close what a page left open (agentmem objects with ``close()``): sessions first, the
    memories last, so no store outlives its page (an unclosed one is a ResourceWarning)."""

    def rank(value: Any) -> int:
        return 0 if isinstance(value, Session) else 2 if isinstance(value, agentmem.Memory) else 1

    owned = [
        value
        for value in namespace.values()
        if type(value).__module__.startswith("agentmem.")
        and callable(getattr(value, "close", None))
    ]
    for value in sorted(owned, key=rank):
        value.close()


@pytest.fixture
def offline_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name in ("AGENTMEM_ROOT", "AGENTMEM_BACKEND") or name.endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a sample's "~" stays in the sandbox
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: p.name)
def test_doc_page_samples_run(
    page: Page, offline_env: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace: dict[str, Any] = {"__name__": "__doc_sample__", "monkeypatch": monkeypatch}
    if any("PG_DSN" in chunk.code for chunk in page.chunks):
        # A fresh database; skips with tests/pg.py's one line when there is no server.
        namespace["PG_DSN"] = pg_uri(request.getfixturevalue("pg_dsn"))
    chunks = list(page.chunks)
    last_block = max(i for i, c in enumerate(chunks) if c.kind == "block")
    late = [c.line for c in chunks[last_block + 1 :] if c.kind == "setup"]
    assert not late, f"{page.name}: doc-setup at line(s) {late} comes after every python block"
    printed: str | None = None  # what the last python block printed
    environ = dict(os.environ)  # a sample that sets a variable must not leak it to other tests
    try:
        for chunk in chunks:
            if chunk.kind == "output":
                _check_output(chunk, page, printed)
                continue
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                _run(chunk, page, namespace)
            printed = out.getvalue() if chunk.kind == "block" else None
    finally:
        _close_what_samples_opened(namespace)
        os.environ.clear()
        os.environ.update(environ)
    for value in namespace.values():  # a scripted client's every reply was asked for
        if type(value).__module__ == "doc_fakes" and hasattr(value, "assert_complete"):
            value.assert_complete()


def test_every_fence_names_its_language() -> None:
    """A bare fence or ```py would dodge the harness: each fence says what it holds."""
    bad = [
        f"{page.name}:{fence.line}: " + (fence.language or "no language")
        for page in PAGES
        for fence in page.fences
        if not fence.language
        or (fence.language != "python" and fence.language.lower() in _PYTHON_ALIASES | {"python"})
    ]
    assert not bad, "fences must name a language, and Python as exactly ```python:\n" + "\n".join(
        bad
    )


def test_the_harness_finds_the_samples() -> None:
    blocks = sum(len(p.blocks) for p in PAGES)
    assert blocks >= MIN_BLOCKS, f"found only {blocks} python blocks; is the collector broken?"
    assert any(p.name == "README.md" for p in PAGES_WITH_CODE)
    assert any(p.name.startswith("docs/integrations/") for p in PAGES_WITH_CODE)


def test_the_parser_reads_setup_fences_and_indents(tmp_path: Path) -> None:
    """The collector itself: setup comments, indented fences, longer fences, other languages."""
    page = tmp_path / "p.md"
    page.write_text(
        "# t\n"
        "<!-- doc-setup\n"
        "x = 1\n"
        "-->\n"
        "````text\n"
        "```python\n"
        "not code\n"
        "```\n"
        "````\n"
        "- item\n"
        "  ```python\n"
        "  y = x + 1\n"
        "  ```\n"
        "```\n"
        "bare\n"
        "```\n"
        "<!-- doc-output -->\n"
        "```text\n"
        "2\n"
        "```\n",
        encoding="utf-8",
    )
    parsed = parse(page)
    assert [(c.kind, c.code, c.first_code_line) for c in parsed.chunks] == [
        ("setup", "x = 1\n", 3),
        ("block", "y = x + 1\n", 12),
        ("output", "2\n", 19),
    ]
    assert [f.language for f in parsed.fences] == ["text", "python", "", "text"]


def test_an_output_fence_is_checked_with_ellipsis() -> None:
    page = Page(ROOT / "README.md", (), ())
    shown = Chunk("output", "id=... total=3\n", 1, 2)
    _check_output(shown, page, "id=abc123 total=3\n")
    with pytest.raises(DocSampleError, match="not what the block before it printed"):
        _check_output(shown, page, "id=abc123 total=4\n")
    with pytest.raises(DocSampleError, match="does not follow a python block"):
        _check_output(shown, page, None)
