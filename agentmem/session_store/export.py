"""Export a session to one self-contained JSON or HTML file.

Pure functions of a :class:`~agentmem.session_store.records.SessionRecord`:
no database access, so any backend's records export the same bytes.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any, Final

from agentmem._json import decode_arguments
from agentmem.messages import Message
from agentmem.session_store.records import EXPORT_FORMAT, EXPORT_VERSION, SessionRecord, _iso

__all__ = ["export_data", "export_html", "export_json"]


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


# Message keys in reading order; any other key follows, alphabetically.
_EXPORT_KEY_ORDER: Final = (
    "role",
    "name",
    "content",
    "refusal",
    "reasoning_content",
    "tool_calls",
    "tool_call_id",
)


def _export_message(message: Message) -> dict[str, Any]:
    rank = {key: i for i, key in enumerate(_EXPORT_KEY_ORDER)}
    keys = sorted(message, key=lambda k: (rank.get(k, len(rank)), k))
    return {key: _sorted_keys(message[key]) for key in keys}


def export_data(record: SessionRecord) -> dict[str, Any]:
    """The JSON export of a session, as a dict (see :meth:`SessionStore.export`).

    Top-level, ``session`` and billing keys come in a fixed order; a
    message starts with ``role``, ``name``, ``content``, ``refusal``,
    ``reasoning_content``, ``tool_calls``, ``tool_call_id`` and continues
    with its other keys alphabetically; keys nested deeper are sorted. Equal
    sessions export to equal bytes.
    """
    info = record.info
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "session": {
            "id": info.id,
            "name": info.name,
            "created_at": info.created_at,
            "created_at_iso": _iso(info.created_at),
            "updated_at": info.updated_at,
            "updated_at_iso": _iso(info.updated_at),
            "working_directory": info.working_directory,
            "model": info.model,
            "context_window": info.context_window,
            "message_count": info.message_count,
        },
        "messages": [_export_message(m) for m in record.messages],
        "state": _sorted_keys(record.state),
        "billing": [
            {
                "at": b.at,
                "at_iso": _iso(b.at),
                "kind": b.kind,
                "model": b.model,
                "prompt_tokens": b.prompt_tokens,
                "completion_tokens": b.completion_tokens,
                "cost_usd": b.cost_usd,
                "cached_prompt_tokens": b.cached_prompt_tokens,
                "cache_write_tokens": b.cache_write_tokens,
            }
            for b in record.billing
        ],
        "threads": {
            tid: [_export_message(m) for m in record.threads[tid]] for tid in sorted(record.threads)
        },
    }


def export_json(record: SessionRecord) -> str:
    """The JSON export of a session as text: UTF-8-ready, two-space indented, newline-terminated."""
    return json.dumps(export_data(record), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- export: HTML

_CSS: Final = """
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --code: #f3f4f6; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
       max-width: 60rem; padding: 1.5rem; }
header.session h1 { margin: 0 0 .5rem; font-size: 1.4rem; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.msg { border: 1px solid var(--line); border-left-width: 4px; border-radius: 6px;
       margin: .8rem 0; padding: .5rem .8rem; }
.msg > .head { font-size: .8rem; color: var(--muted); margin-bottom: .3rem; }
.msg .role { font-weight: 700; text-transform: uppercase; letter-spacing: .04em; }
.role-system { border-left-color: #6b7280; }
.role-user { border-left-color: #2563eb; }
.role-assistant { border-left-color: #16a34a; }
.role-tool { border-left-color: #d97706; }
.role-unknown { border-left-color: #dc2626; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.empty { color: var(--muted); font-style: italic; }
.refusal { color: #b91c1c; }
pre { background: var(--code); color: inherit; padding: .5rem; border-radius: 4px;
      overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: .3rem 0; }
@media (prefers-color-scheme: dark) { :root { --code: #1f2937; --line: #374151; } }
.tool-call .fn { font-family: ui-monospace, monospace; font-weight: 600; }
.muted, .internal, .url { color: var(--muted); font-size: .8rem; }
.url { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
dl.internal { margin: .4rem 0 0; }
dl.internal dt { display: inline; font-family: ui-monospace, monospace; }
dl.internal dd { display: inline; margin: 0 0 0 .3rem; font-family: ui-monospace, monospace;
                 overflow-wrap: anywhere; }
dl.internal dd::after { content: ""; display: block; }
img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
summary { cursor: pointer; }
table { border-collapse: collapse; font-size: .85rem; }
td, th { border: 1px solid var(--line); padding: .2rem .5rem; text-align: left; }
section { margin-top: 2rem; }
""".strip()

# Content-Security-Policy as a second line of defence: even if markup slipped through the
# escaping, the browser would run no script and fetch nothing from the network.
_CSP: Final = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

# Raster images only (an SVG could carry markup), base64 only, nothing after the payload.
_DATA_IMAGE_RE: Final = re.compile(
    r"data:image/(?:png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}", re.IGNORECASE
)

_SHOWN_FIELDS: Final = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content", "refusal"}
)


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _render_image(url: object) -> str:
    if isinstance(url, str) and _DATA_IMAGE_RE.fullmatch(url):
        return f'<div><img alt="image" src="{_esc(url)}"></div>'
    if isinstance(url, str) and url.startswith("data:"):
        return '<div class="url">[image: unsupported data URL, not shown]</div>'
    # A remote URL is shown as text and never fetched: opening an export must not phone home.
    return f'<div class="url">[image: {_esc(url)}]</div>'


def _render_part(part: Any) -> str:
    if not isinstance(part, dict):
        return f"<pre>{_esc(_pretty_json(part))}</pre>"
    kind = part.get("type")
    if kind == "text":
        return f'<div class="text">{_esc(part.get("text", ""))}</div>'
    if kind == "refusal":
        return f'<div class="text refusal">{_esc(part.get("refusal", ""))}</div>'
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
    return f"<pre>{_esc(_pretty_json(part))}</pre>"


def _render_content(content: Any) -> str:
    if content is None or content == "" or content == []:
        return '<div class="empty">(no content)</div>'
    if isinstance(content, str):
        return f'<div class="text">{_esc(content)}</div>'
    if isinstance(content, list):
        return "".join(_render_part(part) for part in content)
    return f"<pre>{_esc(_pretty_json(content))}</pre>"


def _render_tool_call(call: Any) -> str:
    if not isinstance(call, dict):
        return f"<pre>{_esc(_pretty_json(call))}</pre>"
    function = call.get("function")
    if not isinstance(function, dict):
        function = {}
    name = function.get("name", "?")
    arguments = function.get("arguments", "")
    decoded = decode_arguments(arguments)
    shown = _pretty_json(decoded) if decoded is not None else None
    if shown is None:
        shown = arguments if isinstance(arguments, str) else _pretty_json(arguments)
    return (
        '<div class="tool-call">'
        f'<div><span class="fn">{_esc(name)}</span> '
        f'<span class="muted">{_esc(call.get("id", ""))}</span></div>'
        f"<pre>{_esc(shown)}</pre></div>"
    )


def _render_message(index: int, message: Message, anchor: str) -> str:
    role = message.get("role")
    role_text = role if isinstance(role, str) else "?"
    css = role_text if role_text in ("system", "user", "assistant", "tool") else "unknown"
    out = [f'<article class="msg role-{css}" id="{_esc(anchor)}">']
    head = f'<span class="role">{_esc(role_text)}</span> <span>#{index}</span>'
    if isinstance(message.get("name"), str):
        head += f" <span>{_esc(message['name'])}</span>"
    out.append(f'<div class="head">{head}</div>')
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        out.append(
            '<details class="reasoning"><summary>Reasoning</summary>'
            f'<div class="text">{_esc(reasoning)}</div></details>'
        )
    body = _render_content(message.get("content"))
    if role == "tool":
        call_id = message.get("tool_call_id", "")
        out.append(
            f'<details class="tool-result"><summary>Tool result <span class="muted">'
            f"{_esc(call_id)}</span></summary>{body}</details>"
        )
    elif message.get("content") is not None or not message.get("tool_calls"):
        out.append(body)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        out.append(f'<div class="text refusal">{_esc(refusal)}</div>')
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        out.extend(_render_tool_call(call) for call in calls)
    internal = {k: v for k, v in message.items() if k not in _SHOWN_FIELDS}
    if internal:
        out.append('<dl class="internal">')
        for key in sorted(internal):
            value = json.dumps(internal[key], ensure_ascii=False, sort_keys=True)
            out.append(f"<dt>{_esc(key)}</dt><dd>{_esc(value)}</dd>")
        out.append("</dl>")
    out.append("</article>")
    return "\n".join(out)


def export_html(record: SessionRecord) -> str:
    """The HTML export of a session: one self-contained, script-free page.

    Every stored string goes through :func:`html.escape`; images are shown
    only when embedded as base64 raster ``data:`` URLs; remote URLs appear
    as text and are never loaded.
    """
    info = record.info
    title = info.name or f"Session {info.id}"
    meta_rows = [
        ("Session id", info.id),
        ("Created", _iso(info.created_at)),
        ("Updated", _iso(info.updated_at)),
        ("Model", info.model or "unknown"),
        ("Context window", f"{info.context_window:,} tokens" if info.context_window else "unknown"),
        ("Working directory", info.working_directory or "unknown"),
        ("Messages", str(info.message_count)),
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
        meta_rows.append(("Usage", f"{tokens:,} tokens, ${cost:.4f}{cache}"))
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
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
    out.extend(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in meta_rows)
    out.append("</dl>")
    if record.quarantined:
        seqs = ", ".join(str(s) for s in record.quarantined)
        out.append(f'<p class="refusal">Damaged messages were quarantined: seq {_esc(seqs)}.</p>')
    out.append("</header>")
    out.append("<main>")
    out.extend(_render_message(i, m, f"m{i}") for i, m in enumerate(record.messages))
    out.append("</main>")
    if record.threads:
        out.append("<section><h2>Side threads</h2>")
        for t, thread_id in enumerate(sorted(record.threads)):
            messages = record.threads[thread_id]
            out.append(
                f"<details><summary>Thread {_esc(thread_id)} "
                f'<span class="muted">({len(messages)} messages)</span></summary>'
            )
            out.extend(_render_message(i, m, f"t{t}-{i}") for i, m in enumerate(messages))
            out.append("</details>")
        out.append("</section>")
    if record.billing:
        out.append("<section><h2>Billing</h2><table>")
        out.append(
            "<tr><th>At</th><th>Kind</th><th>Model</th><th>Prompt</th><th>Completion</th>"
            "<th>Cached</th><th>Cache write</th><th>Cost (USD)</th></tr>"
        )
        for b in record.billing:
            cells = (
                _iso(b.at),
                b.kind,
                b.model or "",
                str(b.prompt_tokens),
                str(b.completion_tokens),
                str(b.cached_prompt_tokens),
                str(b.cache_write_tokens),
                f"{b.cost_usd:.6f}",
            )
            out.append("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in cells) + "</tr>")
        out.append("</table></section>")
    if record.state:
        out.append(
            "<section><details><summary>Session state</summary>"
            f"<pre>{_esc(_pretty_json(record.state))}</pre></details></section>"
        )
    out.append("</body>")
    out.append("</html>")
    return "\n".join(out) + "\n"
