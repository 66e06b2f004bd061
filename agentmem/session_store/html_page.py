"""The HTML export's page: one self-contained, script-free file that stays readable at 10k messages.

Pure functions of a :class:`~agentmem.session_store.records.SessionRecord`
(and, when the caller has it, the session's task tree read from the time
machine's record): no database access, no I/O. :func:`render_page` is the
entry; :func:`agentmem.session_store.export_html` calls it.

What keeps a long session readable and quick to open:

* a contents block and a task index with anchors into the transcript, a
  heading where each task's messages start;
* the thread summary (YaRN's, from the session state) shown open near the top;
* tool results, reasoning, long texts and the per-request billing table
  collapsed in ``<details>`` (a closed block is not laid out);
* ``content-visibility: auto`` on each message, so the browser lays out only
  what is on screen (a 10k-message page renders in about a second,
  ``bench/bench_export.py``).

What keeps it inert: every stored string goes through :func:`html.escape`;
the Content-Security-Policy allows no script, no connection and no
resource but inline CSS and ``data:`` raster images; images are shown only
when embedded as base64 raster ``data:`` URLs, and remote URLs are shown as
text. Element ids are made from indexes and integer task ids, never from
stored text.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, TypeGuard

from agentmem._json import decode_arguments
from agentmem.errors import AgentMemError
from agentmem.messages import Message
from agentmem.session_store.records import BillingRecord, SessionRecord, _iso
from agentmem.time_machine import TaskTreeView
from agentmem.yarn import SUMMARY_OPEN, ThreadSummary

__all__ = ["CLIP_CHARS", "CLIP_LINES", "PROGRESS_EVERY", "render_page"]

CLIP_CHARS: Final = 2_000
"""A text longer than this shows its start, with the whole text in a collapsed block."""
CLIP_LINES: Final = 40
"""Same, for a text of more lines than this."""
PROGRESS_EVERY: Final = 1_000
"""``on_progress`` is called after every this many messages (and once at the end)."""

_CSS: Final = """
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --code: #f3f4f6;
        --accent: #eff6ff; }
@media (prefers-color-scheme: dark) {
  :root { --code: #1f2937; --line: #374151; --accent: #172033; } }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 64rem; padding: 1.5rem; }
h1 { margin: 0 0 .5rem; font-size: 1.4rem; }
h2 { font-size: 1.15rem; border-bottom: 1px solid var(--line); padding-bottom: .2rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
nav.toc ul { margin: .3rem 0; padding-left: 1.2rem; }
.summary { background: var(--accent); border: 1px solid var(--line); border-radius: 6px;
           padding: .6rem .9rem; }
.msg { border: 1px solid var(--line); border-left-width: 4px; border-radius: 6px;
       margin: .8rem 0; padding: .5rem .8rem;
       content-visibility: auto; contain-intrinsic-size: auto 7rem; }
.msg > .head { font-size: .8rem; color: var(--muted); margin-bottom: .3rem; }
.msg .role { font-weight: 700; text-transform: uppercase; letter-spacing: .04em; }
.role-system { border-left-color: #6b7280; }
.role-user { border-left-color: #2563eb; }
.role-assistant { border-left-color: #16a34a; }
.role-tool { border-left-color: #d97706; }
.role-unknown { border-left-color: #dc2626; }
.undone { opacity: .7; }
h3.task { font-size: 1rem; margin: 1.6rem 0 .4rem; padding: .3rem .6rem;
          background: var(--code); border-radius: 4px; overflow-wrap: anywhere; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.empty { color: var(--muted); font-style: italic; }
.refusal, .problem { color: #b91c1c; }
pre { background: var(--code); color: inherit; padding: .5rem; border-radius: 4px;
      overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
.tool-call .fn { font-family: ui-monospace, monospace; font-weight: 600; }
dl.args { margin: .2rem 0; }
dl.args dt { font-family: ui-monospace, monospace; font-size: .8rem; color: var(--muted); }
dl.args dd { margin: 0; }
.muted, .internal, .url { color: var(--muted); font-size: .8rem; }
.url { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
dl.internal { margin: .4rem 0 0; }
dl.internal dt { display: inline; font-family: ui-monospace, monospace; }
dl.internal dd { display: inline; margin: 0 0 0 .3rem; font-family: ui-monospace, monospace;
                 overflow-wrap: anywhere; }
dl.internal dd::after { content: ""; display: block; }
img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
summary { cursor: pointer; }
summary .preview { color: var(--muted); font-family: ui-monospace, monospace; font-size: .8rem; }
table { border-collapse: collapse; font-size: .85rem; margin: .4rem 0; }
td, th { border: 1px solid var(--line); padding: .2rem .5rem; text-align: left;
         vertical-align: top; overflow-wrap: anywhere; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
section { margin-top: 2rem; }
footer { margin-top: 3rem; color: var(--muted); font-size: .8rem; }
""".strip()

# Content-Security-Policy as a second line of defence: even if markup slipped through the
# escaping, the browser would run no script and fetch nothing from the network.
CSP: Final = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

# Raster images only (an SVG could carry markup), base64 only, nothing after the payload.
_DATA_IMAGE_RE: Final = re.compile(
    r"data:image/(?:png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}", re.IGNORECASE
)

# Fields each message shows in its own way; any other field is listed under the message.
_SHOWN_FIELDS: Final = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "refusal"}
)


_UNSHOWABLE = re.compile("[\x00\ud800-\udfff]")
"""NUL (browsers drop it) and lone surrogates (a file name that is not UTF-8, as
``os.fsdecode`` gives it: not encodable) are shown as U+FFFD."""


def _esc(value: object) -> str:
    text = html.escape(str(value), quote=True)
    return _UNSHOWABLE.sub("\ufffd", text)


def _when(timestamp: object) -> str:
    """An ISO time, or the stored value as text when it is no usable timestamp."""
    try:
        return _iso(float(timestamp))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return str(timestamp)


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)


def _is_task_id(value: object) -> TypeGuard[int]:
    return type(value) is int and value > 0


# --------------------------------------------------------------------------- text blocks


def _clip(text: str) -> str | None:
    """The start of ``text`` when it is too long to show whole, else ``None``."""
    if len(text) <= CLIP_CHARS and text.count("\n") < CLIP_LINES:
        return None
    head = text[:CLIP_CHARS]
    cut = -1
    for _ in range(CLIP_LINES):
        cut = head.find("\n", cut + 1)
        if cut < 0:
            break
    return head[:cut] if cut >= 0 else head


def _text_block(text: str, css: str = "text", tag: str = "div", *, clip: bool = True) -> str:
    """``text`` escaped in a ``<tag class=css>``; a long one clipped, whole in a closed block.

    ``clip=False`` for a text already inside a closed block (a tool result, reasoning).
    """
    start = _clip(text) if clip else None
    if start is None:
        return f'<{tag} class="{css}">{_esc(text)}</{tag}>'
    lines = text.count("\n") + (not text.endswith("\n"))
    return (
        f'<{tag} class="{css}">{_esc(start)}</{tag}>'
        f'<details class="more"><summary>Show all {len(text):,} characters '
        f"({lines:,} lines)</summary>"
        f'<{tag} class="{css}">{_esc(text)}</{tag}></details>'
    )


def _preview(text: str, limit: int = 90) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


# --------------------------------------------------------------------------- messages


def _render_image(url: object) -> str:
    if isinstance(url, str) and _DATA_IMAGE_RE.fullmatch(url):
        return f'<div><img alt="image" src="{_esc(url)}"></div>'
    if isinstance(url, str) and url.startswith("data:"):
        return '<div class="url">[image: unsupported data URL, not shown]</div>'
    # A remote URL is shown as text and never fetched: opening an export must not phone home.
    return f'<div class="url">[image: {_esc(url)}]</div>'


def _render_part(part: Any, clip: bool) -> str:
    if not isinstance(part, dict):
        return _text_block(_pretty_json(part), tag="pre", css="json", clip=clip)
    kind = part.get("type")
    if kind == "text":
        return _text_block(str(part.get("text", "")), clip=clip)
    if kind == "refusal":
        return _text_block(str(part.get("refusal", "")), css="text refusal", clip=clip)
    if kind == "image_url":
        image = part.get("image_url")
        return _render_image(image.get("url") if isinstance(image, dict) else image)
    if kind == "input_audio":
        audio = part.get("input_audio")
        fmt = audio.get("format", "?") if isinstance(audio, dict) else "?"
        return f'<div class="url">[audio: {_esc(fmt)}, not shown]</div>'
    if kind == "file":
        file = part.get("file")
        label = file.get("filename") if isinstance(file, dict) else None
        return f'<div class="url">[file: {_esc(label or "attachment")}, not shown]</div>'
    return _text_block(_pretty_json(part), tag="pre", css="json", clip=clip)


def _render_content(content: Any, *, clip: bool = True) -> str:
    if content is None or content == "" or content == []:
        return '<div class="empty">(no content)</div>'
    if isinstance(content, str):
        return _text_block(content, clip=clip)
    if isinstance(content, list):
        return "".join(_render_part(part, clip) for part in content)
    return _text_block(_pretty_json(content), tag="pre", css="json", clip=clip)


def _content_preview(content: Any) -> tuple[str, int]:
    """A one-line preview of a content value and its length in characters."""
    if isinstance(content, str):
        return _preview(content), len(content)
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        joined = "\n".join(t for t in texts if isinstance(t, str))
        return _preview(joined), len(joined)
    return "", 0


def _render_tool_call(call: Any) -> str:
    if not isinstance(call, dict):
        return _text_block(_pretty_json(call), tag="pre", css="json")
    function = call.get("function")
    if not isinstance(function, dict):
        function = {}
    name = function.get("name", "?")
    arguments = function.get("arguments", "")
    decoded = decode_arguments(arguments)
    if decoded:
        # One row per argument; a string shown as it is (a file's content reads as a file).
        rows = "".join(
            f"<dt>{_esc(key)}</dt><dd>"
            f"{_text_block(value if isinstance(value, str) else _pretty_json(value), 'arg', 'pre')}"
            "</dd>"
            for key, value in decoded.items()
        )
        shown = f'<dl class="args">{rows}</dl>'
    else:
        raw = _pretty_json(decoded) if decoded is not None else arguments
        text = raw if isinstance(raw, str) else _pretty_json(raw)
        shown = _text_block(text, tag="pre", css="args")
    return (
        '<div class="tool-call">'
        f'<div><span class="fn">{_esc(name)}</span> '
        f'<span class="muted">{_esc(call.get("id", ""))}</span></div>{shown}</div>'
    )


def render_message(index: int, message: Message, anchor: str, *, css: str = "") -> str:
    """One message as an ``<article>``; ``anchor`` is its element id (never stored text)."""
    role = message.get("role")
    role_text = role if isinstance(role, str) else "?"
    kind = role_text if role_text in ("system", "user", "assistant", "tool") else "unknown"
    out = [f'<article class="msg role-{kind}{css}" id="{_esc(anchor)}">']
    head = f'<span class="role">{_esc(role_text)}</span> <span>#{index}</span>'
    if isinstance(message.get("name"), str):
        head += f" <span>{_esc(message['name'])}</span>"
    out.append(f'<div class="head">{head}</div>')
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        out.append(
            '<details class="reasoning"><summary>Reasoning</summary>'
            f"{_text_block(reasoning, clip=False)}</details>"
        )
    content = message.get("content")
    body = _render_content(content, clip=role != "tool")
    if role == "tool":
        preview, size = _content_preview(content)
        out.append(
            '<details class="tool-result"><summary>Tool result '
            f'<span class="muted">{_esc(message.get("tool_call_id", ""))} \u00b7 {size:,} chars'
            f'</span> <span class="preview">{_esc(preview)}</span></summary>{body}</details>'
        )
    elif content is not None or not message.get("tool_calls"):
        out.append(body)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        out.append(_text_block(refusal, css="text refusal"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out.extend(_render_tool_call(call) for call in calls)
    internal = {
        key: value
        for key, value in message.items()
        if key not in _SHOWN_FIELDS and not (key == "task_id" and _is_task_id(value))
    }
    if internal:
        out.append('<dl class="internal">')
        for key in sorted(internal):
            value = json.dumps(internal[key], ensure_ascii=False, sort_keys=True, default=repr)
            out.append(f"<dt>{_esc(key)}</dt><dd>{_text_block(value, 'value', 'span')}</dd>")
        out.append("</dl>")
    out.append("</article>")
    return "".join(out)


# --------------------------------------------------------------------------- tasks


def _task_rows(record: SessionRecord, tree: TaskTreeView | None) -> list[dict[str, Any]]:
    """The task index: the tree's tasks and the tasks only the messages name, by id.

    Each row also gets ``messages`` (how many messages carry its id) and
    ``linked`` (whether the transcript has its heading to link to).
    """
    counts: dict[int, int] = {}
    requests: dict[int, str] = {}
    for message in record.messages:
        task_id = message.get("task_id")
        if _is_task_id(task_id):
            counts[task_id] = counts.get(task_id, 0) + 1
            if task_id not in requests and message.get("role") == "user":
                requests[task_id] = _content_preview(message.get("content"))[0]
    rows = [dict(task) for task in tree.tasks] if tree is not None else []
    known = {row["task_id"] for row in rows}
    for task_id in set(counts) - known:
        rows.append(
            {
                "task_id": task_id,
                "parent_id": None,
                "summary": requests.get(task_id, ""),
                "status": "not in the task tree",
                "files": [],
                "created_at": None,
            }
        )
    for row in rows:
        row["messages"] = counts.get(row["task_id"], 0)
    rows.sort(key=lambda row: row["task_id"])
    return rows


def _task_counters(state: Mapping[str, Any]) -> tuple[set[int], dict[int, int]]:
    """The session state's ``tasks`` part: finished ids and LLM iterations per task."""
    part = state.get("tasks")
    if not isinstance(part, Mapping):
        return set(), {}
    finished_raw = part.get("finished")
    finished = (
        {i for i in finished_raw if _is_task_id(i)} if isinstance(finished_raw, list) else set()
    )
    iterations: dict[int, int] = {}
    raw = part.get("iterations")
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if str(key).isascii() and str(key).isdigit() and type(value) is int:
                iterations[int(key)] = value
    return finished, iterations


def _render_tasks(rows: list[dict[str, Any]], state: Mapping[str, Any]) -> Iterator[str]:
    finished, iterations = _task_counters(state)
    yield (
        "<table><tr><th>Task</th><th>Parent</th><th>Status</th><th>Request</th>"
        '<th>Files changed</th><th class="n">Messages</th><th class="n">LLM calls</th>'
        "<th>Created</th></tr>"
    )
    for row in rows:
        task_id = row["task_id"]
        label = f"#{task_id}"
        cell = f'<a href="#task-{task_id}">{label}</a>' if row["messages"] else label
        parent = row.get("parent_id")
        status = str(row.get("status", ""))
        if task_id in finished:
            status += ", finished"
        files = [str(f) for f in row.get("files", ())]
        if not files:
            files_cell = ""
        elif len(files) <= 3:
            files_cell = "<br>".join(_esc(f) for f in files)
        else:
            listed = "<br>".join(_esc(f) for f in files)
            files_cell = f"<details><summary>{len(files):,} files</summary>{listed}</details>"
        created = row.get("created_at")
        yield (
            f"<tr><td>{cell}</td><td>{'' if parent is None else f'#{_esc(parent)}'}</td>"
            f"<td>{_esc(status)}</td><td>{_text_block(str(row.get('summary', '')))}</td>"
            f'<td>{files_cell}</td><td class="n">{row["messages"]:,}</td>'
            f'<td class="n">{_esc(iterations.get(task_id, ""))}</td>'
            f"<td>{_esc(_when(created)) if created else ''}</td></tr>"
        )
    yield "</table>"


# --------------------------------------------------------------------------- summary, billing


def _render_summary(record: SessionRecord) -> list[str]:
    """The YaRN thread summary kept in the session state, and summary messages in the history."""
    out: list[str] = []
    yarn = record.state.get("yarn")
    stored = yarn.get("summary") if isinstance(yarn, Mapping) else None
    if stored is not None:
        try:
            text = ThreadSummary.from_json(stored).render()
        except (AgentMemError, TypeError, ValueError) as exc:
            why = _esc(exc)
            out.append(f'<p class="problem">The stored thread summary is unreadable: {why}</p>')
            out.append(f"<pre>{_esc(_pretty_json(stored))}</pre>")
        else:
            out.append(f'<div class="summary">{_text_block(text)}</div>')
    in_history = [
        i
        for i, m in enumerate(record.messages)
        if m.get("compressed_summary") is True
        or (isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_OPEN))
    ]
    if in_history:
        links = ", ".join(f'<a href="#m{i}">#{i}</a>' for i in in_history)
        out.append(f"<p>Thread summaries stored as messages: {links}</p>")
    return out


def _billing_totals(billing: Sequence[BillingRecord]) -> list[tuple[str, str, list[int], float]]:
    groups: dict[tuple[str, str], tuple[list[int], float]] = {}
    for b in billing:
        counts, cost = groups.get((b.kind, b.model or ""), ([0, 0, 0, 0, 0], 0.0))
        counts[0] += 1
        counts[1] += b.prompt_tokens
        counts[2] += b.completion_tokens
        counts[3] += b.cached_prompt_tokens
        counts[4] += b.cache_write_tokens
        groups[(b.kind, b.model or "")] = (counts, cost + b.cost_usd)
    return [(kind, model, c, cost) for (kind, model), (c, cost) in sorted(groups.items())]


def _render_billing(billing: Sequence[BillingRecord]) -> Iterator[str]:
    numeric = "".join(
        f'<th class="n">{head}</th>'
        for head in ("Prompt", "Completion", "Cached", "Cache write", "Cost (USD)")
    )
    yield f'<table><tr><th>Kind</th><th>Model</th><th class="n">Calls</th>{numeric}</tr>'
    totals = [0, 0, 0, 0, 0]
    cost_total = 0.0
    for kind, model, counts, cost in _billing_totals(billing):
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        cost_total += cost
        cells = "".join(f'<td class="n">{c:,}</td>' for c in counts)
        names = f"<td>{_esc(kind)}</td><td>{_esc(model)}</td>"
        yield f'<tr>{names}{cells}<td class="n">{cost:.4f}</td></tr>'
    cells = "".join(f'<td class="n">{c:,}</td>' for c in totals)
    yield f'<tr><th colspan="2">Total</th>{cells}<td class="n">{cost_total:.4f}</td></tr></table>'
    yield (
        f"<details><summary>Every request ({len(billing):,})</summary><table>"
        f"<tr><th>At</th><th>Kind</th><th>Model</th>{numeric}</tr>"
    )
    for b in billing:
        numbers = (
            b.prompt_tokens,
            b.completion_tokens,
            b.cached_prompt_tokens,
            b.cache_write_tokens,
        )
        cells = "".join(f'<td class="n">{_esc(n)}</td>' for n in numbers)
        yield (
            f"<tr><td>{_esc(_when(b.at))}</td><td>{_esc(b.kind)}</td><td>{_esc(b.model or '')}</td>"
            f'{cells}<td class="n">{_esc(f"{b.cost_usd:.6f}")}</td></tr>'
        )
    yield "</table></details>"


# --------------------------------------------------------------------------- the page


def _head_rows(record: SessionRecord) -> list[tuple[str, str]]:
    info = record.info
    rows = [
        ("Session id", info.id),
        ("Created", _when(info.created_at)),
        ("Updated", _when(info.updated_at)),
        ("Model", info.model or "unknown"),
        ("Context window", f"{info.context_window:,} tokens" if info.context_window else "unknown"),
        ("Working directory", info.working_directory or "unknown"),
        ("Messages", f"{len(record.messages):,}"),
    ]
    if record.billing:
        cost = sum(b.cost_usd for b in record.billing)
        tokens = sum(b.prompt_tokens + b.completion_tokens for b in record.billing)
        cached = sum(b.cached_prompt_tokens for b in record.billing)
        written = sum(b.cache_write_tokens for b in record.billing)
        cache = (
            f" ({cached:,} read from the prompt cache, {written:,} written to it)"
            if cached or written
            else ""
        )
        calls = f"{len(record.billing):,} requests"
        rows.append(("Usage", f"{calls}, {tokens:,} tokens, ${cost:.4f}{cache}"))
    return rows


def render_page(
    record: SessionRecord,
    *,
    tasks: TaskTreeView | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> str:
    """The whole page as text (see the module docstring and :func:`export_html`)."""
    info = record.info
    title = info.name or f"Session {info.id}"
    rows = _task_rows(record, tasks)
    summary = _render_summary(record)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="agentmem">',
        f"<title>{_esc(title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        '<header class="session">',
        f"<h1>{_esc(title)}</h1>",
        '<dl class="meta">',
    ]
    out.extend(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in _head_rows(record))
    out.append("</dl>")
    reports = record.reports()
    if reports:
        found = json.dumps(reports, sort_keys=True, default=repr)
        out.append(
            '<p class="problem">Loading this session found damage (quarantined or repaired):</p>'
            + _text_block(found, "problem", "pre")
        )
    out.append("</header>")
    toc = [
        ("summary", "Thread summary", None if summary else 0),
        ("tasks", "Tasks", len(rows)),
        ("billing", "Billing", len(record.billing)),
        ("messages", "Messages", len(record.messages)),
        ("threads", "Side threads", len(record.threads)),
        ("state", "Session state", None if record.state else 0),
    ]
    out.append('<nav class="toc"><h2>Contents</h2><ul>')
    for anchor, label, count in toc:
        if count == 0:
            continue
        suffix = "" if count is None else f" ({count:,})"
        if anchor == "messages" and len(record.messages) > PROGRESS_EVERY:
            marks = range(0, len(record.messages), PROGRESS_EVERY)
            suffix += ": " + " \u00b7 ".join(f'<a href="#m{i}">#{i:,}</a>' for i in marks)
        out.append(f'<li><a href="#{anchor}">{label}</a>{suffix}</li>')
    out.append("</ul></nav>")
    if summary:
        out.append('<section id="summary"><h2>Thread summary</h2>')
        out.extend(summary)
        out.append("</section>")
    if rows or (tasks is not None and tasks.problem):
        out.append('<section id="tasks"><h2>Tasks</h2>')
        if tasks is not None and tasks.problem:
            out.append(f'<p class="problem">{_esc(tasks.problem)}</p>')
        if rows:
            out.extend(_render_tasks(rows, record.state))
        out.append("</section>")
    if record.billing:
        out.append('<section id="billing"><h2>Billing</h2>')
        out.extend(_render_billing(record.billing))
        out.append("</section>")
    out.append('<main id="messages"><h2>Messages</h2>')
    out.extend(_render_transcript(record, rows, on_progress))
    out.append("</main>")
    if record.threads:
        out.append('<section id="threads"><h2>Side threads</h2>')
        for t, thread_id in enumerate(sorted(record.threads)):
            messages = record.threads[thread_id]
            out.append(
                f"<details><summary>Thread {_esc(thread_id)} "
                f'<span class="muted">({len(messages):,} messages)</span></summary>'
            )
            out.extend(render_message(i, m, f"t{t}-{i}") for i, m in enumerate(messages))
            out.append("</details>")
        out.append("</section>")
    if record.state:
        out.append(
            '<section id="state"><details><summary>Session state</summary>'
            f"<pre>{_esc(_pretty_json(record.state))}</pre></details></section>"
        )
    out.append("<footer>Exported by agentmem. This page runs no script and loads nothing.</footer>")
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"


def _render_transcript(
    record: SessionRecord,
    rows: list[dict[str, Any]],
    on_progress: Callable[[int, int], None] | None,
) -> Iterator[str]:
    """The messages, a heading where the task changes; ``on_progress(done, total)`` as it goes."""
    by_id = {row["task_id"]: row for row in rows}
    total = len(record.messages)
    seen: set[int] = set()
    current: object = None
    css = ""
    for i, message in enumerate(record.messages):
        task_id = message.get("task_id")
        if _is_task_id(task_id) and task_id != current:
            row = by_id.get(task_id, {})
            status = str(row.get("status", ""))
            css = " undone" if status == "undone" else ""
            anchor = "" if task_id in seen else f' id="task-{task_id}"'
            again = " (continued)" if task_id in seen else ""
            seen.add(task_id)
            label = f' <span class="muted">{_esc(status)}</span>' if status else ""
            request = _esc(_preview(str(row.get("summary", "")), 200))
            yield f'<h3 class="task"{anchor}>Task #{task_id}{again}{label}: {request}</h3>'
        if task_id != current:
            current = task_id
            if not _is_task_id(task_id):
                css = ""
        yield render_message(i, message, f"m{i}", css=css)
        if on_progress is not None and (i + 1) % PROGRESS_EVERY == 0 and i + 1 < total:
            on_progress(i + 1, total)
    if on_progress is not None:
        on_progress(total, total)
