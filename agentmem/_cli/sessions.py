"""``session list|show|export|trim|delete`` and ``undo-history``.

What opens what:

* ``list``, ``show`` and ``export`` only read through the sessions store
  (:meth:`SessionStore.list`, :meth:`~SessionStore.load`,
  :meth:`~SessionStore.export`); they work while an agent has the session
  open, and take no lock.
* ``trim`` opens the session as an agent would (``mem.session(id,
  create=False, context_window=...)``, taking its lock: exit 4 when it is
  open elsewhere), builds one payload at that window, which runs the
  context pipeline's proactive trim when the window holds more than its
  threshold (75% of it) and moves the stored window position and the
  ``<thread_summary>`` forward, then closes the session (saving its state).
  Nothing is deleted: the archive keeps every message, and the stored
  context window is not changed.
* ``undo-history`` reads the time machine's task tree. The time machine
  has no read-only mode: opening it may finish a restore a killed agent
  left half done, which writes the user's files. So it takes the
  session's lock first (exit 4 when the session is open elsewhere), opens
  :class:`~agentmem.time_machine.TimeMachine` as a session would, reads
  the tree and releases the lock, without opening the session itself
  (which would save its state on close).
* ``delete`` takes the lock too (:meth:`SessionStore.delete`).

``trim`` and ``undo-history`` work in the session's stored working
directory (the time machine snapshots files there), so they refuse a
session whose directory no longer exists.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentmem._cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    Cli,
    CliError,
    Output,
    info_json,
    iso,
    terminal_text,
)
from agentmem._cli.parsing import Commands, Handler, positive_int, window_size
from agentmem._truncate import truncate_text
from agentmem.memory import Usage
from agentmem.messages import message_text
from agentmem.session.wiring import SNAPSHOTS_DIR
from agentmem.session_store import SessionInfo
from agentmem.time_machine import TimeMachine, check_snapshots
from agentmem.yarn import ThreadSummary

__all__ = ["register"]

TOOL_OUTPUT_CHARS = 600
"""Tool results longer than this are shown cut (head and tail) in text mode."""
ARGUMENT_CHARS = 200
"""Tool-call arguments longer than this are shown cut in text mode."""


def _session_dir(info: SessionInfo) -> Path:
    """The session's working directory, which must still exist (see the module docstring)."""
    wd = info.working_directory
    if not wd or not Path(wd).is_dir():
        raise CliError(
            EXIT_ERROR,
            f"session {info.id}'s working directory {wd!r} does not exist",
            "its time machine works there; restore the directory first",
        )
    return Path(wd)


def _summary_text(state: Mapping[str, Any]) -> str | None:
    """The stored ``<thread_summary>`` rendered, or ``None`` when nothing was trimmed yet."""
    yarn = state.get("yarn")
    raw = yarn.get("summary") if isinstance(yarn, Mapping) else None
    if not isinstance(raw, Mapping):
        return None
    try:
        return ThreadSummary.from_json(raw).render()
    except Exception as exc:  # shown, not fatal: the messages matter more
        return f"(unreadable thread summary: {exc})"


def _window(state: Mapping[str, Any]) -> dict[str, Any]:
    window = state.get("window")
    if not isinstance(window, Mapping):
        return {"start": 0, "pinned": []}
    return {"start": window.get("start", 0), "pinned": list(window.get("pinned", []))}


# ---------------------------------------------------------------------- list / show


def session_list(cli: Cli, args: argparse.Namespace) -> Output:
    infos = cli.memory().sessions.list(limit=args.limit)
    lines = [f"{'ID':<34} {'UPDATED':<20} {'MSGS':>6}  {'MODEL':<16} NAME"]
    for i in infos:
        model = i.model or "-"
        lines.append(
            f"{i.id:<34} {iso(i.updated_at):<20} {i.message_count:>6}  {model:<16} {i.name or ''}"
        )
    text = "\n".join(lines) if infos else "no sessions"
    return Output([info_json(i) for i in infos], text.rstrip())


def _message_lines(index: int, message: Mapping[str, Any]) -> list[str]:
    role = message.get("role", "?")
    task = message.get("task_id")
    head = f"[{index}] {role}" + (f" (task {task})" if task is not None else "")
    if role == "tool":
        head += f" <- {message.get('tool_call_id', '?')}"
    text = message_text(message)
    if role == "tool":
        text = truncate_text(text, TOOL_OUTPUT_CHARS)
    lines = [head + ":"]
    lines += [f"    {line}" for line in text.splitlines()] if text else []
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        arguments = str(function.get("arguments", ""))
        args = truncate_text(arguments, ARGUMENT_CHARS, ellipsis=True)
        lines.append(f"    -> {function.get('name', '?')}({args})  [{call.get('id', '?')}]")
    return lines


def session_show(cli: Cli, args: argparse.Namespace) -> Output:
    record = cli.memory().sessions.load(args.session_id)
    for key, value in record.reports().items():
        cli.warn(f"loading session {record.info.id} found {key}: {value}")
    usage = Usage.of(record.billing)
    total = len(record.messages)
    first = max(0, total - args.tail) if args.tail is not None else 0
    window = _window(record.state)
    summary = _summary_text(record.state)
    data = {
        "session": info_json(record.info),
        "usage": dataclasses.asdict(usage),
        "billing": [dataclasses.asdict(b) for b in record.billing],
        "window": window,
        "thread_summary": summary,
        "threads": {tid: len(msgs) for tid, msgs in record.threads.items()},
        "repairs": record.reports(),
        "messages": [{"index": i, "message": record.messages[i]} for i in range(first, total)],
    }
    info = record.info
    lines = [
        f"session {info.id}" + (f'  "{info.name}"' if info.name else ""),
        f"  created {iso(info.created_at)}  updated {iso(info.updated_at)}",
        f"  model {info.model or '-'}  context window {info.context_window or '-'}",
        f"  working directory {info.working_directory or '-'}",
        f"  messages {total} (window starts at {window['start']})"
        + (f", side threads {len(record.threads)}" if record.threads else ""),
        f"  usage: {usage.requests} requests, {usage.prompt_tokens} prompt + "
        f"{usage.completion_tokens} completion tokens"
        + (f" ({usage.cached_prompt_tokens} cached)" if usage.cached_prompt_tokens else "")
        + f", ${usage.cost_usd:.4f}",
    ]
    if summary:
        lines += ["thread summary:", *(f"  {line}" for line in summary.splitlines())]
    shown = total - first
    lines.append(f"messages ({shown} of {total}):" if first else f"messages ({total}):")
    for i in range(first, total):
        lines += _message_lines(i, record.messages[i])
    return Output(data, "\n".join(lines))


# ---------------------------------------------------------------------- export


def session_export(cli: Cli, args: argparse.Namespace) -> Output:
    out = Path(args.out) if args.out else None
    fmt = args.format
    if fmt is None:
        fmt = "json" if out is not None and out.suffix.lower() == ".json" else "html"
    path = (out if out is not None else Path(f"{args.session_id}.{fmt}")).absolute()
    sessions = cli.memory().sessions
    if path.resolve().is_relative_to(cli.root.resolve()):  # symlinks followed on both sides
        raise CliError(
            EXIT_USAGE,
            f"refusing to write the export to {path}: it is inside the memory root {cli.root}",
            "pass --out a path outside the root; nothing was written",
        )
    cli.progress.note(f"loading session {args.session_id} ...")
    written = sessions.export(args.session_id, path, format=fmt)
    size = written.stat().st_size
    data = {"session_id": args.session_id, "path": str(written), "format": fmt, "bytes": size}
    return Output(data, str(written))


# ---------------------------------------------------------------------- trim


def session_trim(cli: Cli, args: argparse.Namespace) -> Output:
    info = cli.memory().sessions.info(args.session_id)
    mem = cli.memory(working_dir=_session_dir(info))
    s = mem.session(info.id, create=False, context_window=args.window, model=args.model)
    try:
        history = len(s.history)

        def position() -> dict[str, int]:
            return {
                "window_start": s.window.start,
                "messages": s.window.message_count(),
                "tokens": s.window.token_count(),
            }

        before = position()
        cli.progress.note(f"building a payload for a {args.window}-token window ...")
        s.context()
        after = position()
        build = s.context_manager.last_build
        stats = build.stats if build is not None else None
        summary = s.yarn.summary
        model = s.model
    finally:
        s.close()
    trims = [dataclasses.asdict(t) for t in stats.trims] if stats is not None else []
    data = {
        "session_id": info.id,
        "context_window": args.window,
        "model": model,
        "archived_messages": history,
        "before": before,
        "after": after,
        "trimmed": bool(trims),
        "trims": trims,
        "payload_tokens": stats.tokens if stats is not None else None,
        "payload_messages": stats.messages if stats is not None else None,
        "thread_summary": summary is not None,
    }
    verdict = (
        f"trimmed: the window now starts at message {after['window_start']}"
        if trims
        else "nothing to trim: the window is below the trim threshold (75%) of "
        f"{args.window} tokens"
    )
    text = "\n".join(
        [
            f"session {info.id} at a {args.window}-token window ({model})",
            f"  before: {before['messages']} messages, {before['tokens']} tokens "
            f"(window starts at {before['window_start']})",
            f"  after:  {after['messages']} messages, {after['tokens']} tokens "
            f"(window starts at {after['window_start']})",
            f"  {verdict}; all {history} messages stay in the archive",
        ]
    )
    return Output(data, text)


# ---------------------------------------------------------------------- delete


def session_delete(cli: Cli, args: argparse.Namespace) -> Output:
    sessions = cli.memory().sessions
    info = sessions.info(args.session_id)
    if not args.yes:
        if not cli.stdin.isatty():
            raise CliError(
                EXIT_USAGE,
                "session delete needs --yes when stdin is not a terminal",
                "nothing was deleted",
            )
        name = f' "{info.name}"' if info.name else ""
        cli.progress.clear()
        cli.stderr.write(
            terminal_text(
                f"delete session {info.id}{name} ({info.message_count} messages) and its "
                "snapshots? [y/N] "
            )
        )
        cli.stderr.flush()
        if cli.stdin.readline().strip().lower() not in ("y", "yes"):
            return Output({"session_id": info.id, "deleted": False}, "nothing deleted")
    deleted = sessions.delete(info.id)
    data = {"session_id": info.id, "deleted": deleted}
    return Output(data, f"deleted session {info.id}" if deleted else "nothing deleted")


# ---------------------------------------------------------------------- undo-history


def _damaged_blobs(store_dir: Path) -> set[str]:
    """The blob ids :func:`check_snapshots` found missing or damaged (read-only)."""
    bad: set[str] = set()
    for found in check_snapshots(store_dir):
        if isinstance(found, int) or found.severity != "damaged":
            continue
        if found.target.parent.parent.name == "blobs":  # blobs/<2 hex>/<62 hex>
            bad.add(found.target.parent.name + found.target.name)
    return bad


def _task_blobs(record: Path) -> dict[int, tuple[int | None, set[str]]]:
    """Each task's parent and the blobs its record refers to, from the tree record the
    time machine just loaded (read only; ``{}`` when there is none)."""
    try:
        tasks = json.loads(record.read_text(encoding="utf-8"))["tasks"]
        out: dict[int, tuple[int | None, set[str]]] = {}
        for key, task in tasks.items():
            parent = task.get("parent")
            refs = [*task.get("before", {}).values(), *task.get("after", {}).values()]
            blobs = {r.partition(":")[0] for r in refs if isinstance(r, str) and r[:1] != "!"}
            out[int(key)] = (parent if type(parent) is int else None, blobs)
        return out
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _restore_problem(
    task_id: int, tasks: Mapping[int, tuple[int | None, set[str]]], bad: set[str]
) -> str | None:
    """Why restoring ``task_id`` (0: the initial state) would fail: a blob on its chain
    is missing or damaged (the restore is refused); ``None`` when they are intact."""
    node: int | None = task_id
    seen: set[int] = set()
    while node is not None and node in tasks and node not in seen:
        seen.add(node)
        parent, blobs = tasks[node]
        if blobs & bad:
            return "blob missing"
        node = parent
    return None


def undo_history(cli: Cli, args: argparse.Namespace) -> Output:
    mem = cli.memory()
    info = mem.sessions.info(args.session_id)
    wd = _session_dir(info)
    store = mem.root / SNAPSHOTS_DIR
    record = store / "sessions" / f"{info.id}.json"
    lock = mem.sessions.lock(info.id)
    try:
        session = mem.sessions.load(info.id)
        machine = TimeMachine(
            wd,
            info.id,
            store,
            memory_root=mem.root,
            known_task_ids={m.get("task_id") for m in session.messages},
        )
        tasks = machine.get_task_history(args.limit)
        chain = machine.active_task_chain()
        active, newest = machine.active_task_id, machine.current_task_id
        problems = [*machine.problems, *machine.errors]
        task_blobs = _task_blobs(record)
        bad = _damaged_blobs(store) if task_blobs else set()
    finally:
        lock.release()
    # A damaged tree record is moved aside on open (now or by an earlier open): the tree
    # is then only the messages' task ids in a row, with no snapshots to restore.
    record_lost = not task_blobs and (
        any("time-machine record" in p for p in problems)
        or any(store.glob(f"sessions/{info.id}.json.corrupt-*"))
    )
    for task in tasks:
        if record_lost:
            why: str | None = "record damaged"
        elif task["status"] == "current":
            why = "active"
        else:
            why = _restore_problem(task["task_id"], task_blobs, bad)
        task["can_restore"] = why is None
        task["restore_problem"] = None if why == "active" else why
    initial = (
        active is not None and not record_lost and _restore_problem(0, task_blobs, bad) is None
    )
    data = {
        "session_id": info.id,
        "working_directory": str(wd),
        "active_task_id": active,
        "newest_task_id": newest,
        "active_chain": chain,
        "initial_state_can_restore": initial,
        "record_damaged": record_lost,
        "tasks": tasks,
        "problems": problems,
    }
    path = " -> ".join(map(str, chain)) or "(initial state)"
    lines = [
        f"session {info.id}: active task {active if active is not None else '-'}"
        f" (chain {path}), newest id {newest if newest is not None else '-'}",
    ]
    if record_lost:
        lines.append(
            "the task tree record was damaged and moved aside: the tasks below are only the "
            "task ids of the messages, with no snapshots; nothing can be restored"
        )
    lines.append(f"{'TASK':>5} {'PARENT':>6}  {'STATUS':<8} {'RESTORE':<18} {'FILES':>5}  SUMMARY")
    for t in tasks:
        parent = "-" if t["parent_id"] is None else str(t["parent_id"])
        restore = "yes" if t["can_restore"] else "-"
        if t["restore_problem"]:
            restore = f"no ({t['restore_problem']})"
        lines.append(
            f"{t['task_id']:>5} {parent:>6}  {t['status']:<8} "
            f"{restore:<18} {len(t['files']):>5}  "
            f"{' '.join(str(t['summary']).split())}"
        )
    if not tasks:
        lines.append("  (no tasks)")
    lines.append("restore from the agent: s.switch_to_task(id) or s.undo(); the CLI only shows it")
    return Output(data, "\n".join(lines))


# ---------------------------------------------------------------------- the parsers


def _on_session(
    commands: Commands, name: str, handler: Handler, help: str, *examples: str
) -> argparse.ArgumentParser:
    """A command about one session: its ``ID`` argument comes first."""
    parser = commands.command(name, handler, help, "\n".join(examples))
    parser.add_argument("session_id", metavar="ID")
    return parser


def register(commands: Commands) -> None:
    """Add ``session`` and ``undo-history`` to the parser."""
    session = commands.group(
        "session",
        "stored sessions: list, show, export, trim, delete",
        "agentmem session list --limit 10\n"
        "agentmem session show 3f2a... --tail 20\n"
        "agentmem session export 3f2a... --out chat.html\n"
        "agentmem session trim 3f2a... --window 32000\n"
        "agentmem session delete 3f2a... --yes",
    )
    p = session.command(
        "list", session_list, "sessions, most recently updated first", "agentmem session list"
    )
    p.add_argument("--limit", type=positive_int, default=None, help="at most N sessions")
    p = _on_session(
        session,
        "show",
        session_show,
        "one session: metadata, billing totals, thread summary, messages",
        "agentmem session show ID",
        "agentmem session show ID --tail 10 --json",
    )
    p.add_argument(
        "--tail", type=positive_int, default=None, metavar="N", help="only the last N messages"
    )
    p = _on_session(
        session,
        "export",
        session_export,
        "write a session to one self-contained HTML (default) or JSON file; prints the path",
        "agentmem session export ID",
        "agentmem session export ID --out chat.json",
    )
    p.add_argument("--out", metavar="PATH", help="the file to write (default: ./<ID>.<format>)")
    p.add_argument(
        "--format",
        choices=("html", "json"),
        default=None,
        help="html or json (default: from --out's extension, else html)",
    )
    p = _on_session(
        session,
        "trim",
        session_trim,
        "run the context pipeline at a window: the stored window and thread summary move "
        "forward, nothing is deleted",
        "agentmem session trim ID --window 32000",
        "agentmem session trim ID --window 8000 --json",
    )
    p.add_argument(
        "--window", type=window_size, required=True, metavar="TOKENS", help="context window"
    )
    p.add_argument("--model", default=None, metavar="M", help="model to count tokens for")
    p = _on_session(
        session,
        "delete",
        session_delete,
        "delete a session, its messages and its snapshots (asks unless --yes)",
        "agentmem session delete ID --yes",
    )
    p.add_argument("--yes", action="store_true", help="do not ask (needed when not on a terminal)")
    p = _on_session(
        commands,
        "undo-history",
        undo_history,
        "a session's time-machine task tree: active chain, branches, what can be restored",
        "agentmem undo-history ID",
        "agentmem undo-history ID --limit 50 --json",
    )
    p.add_argument("--limit", type=positive_int, default=10, help="the last N tasks (default 10)")
