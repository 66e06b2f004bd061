"""``memory``, ``topics``, ``notes``, ``recall``, ``reindex`` and ``doctor``.

Each command opens the memory through :meth:`Cli.memory` (never creating
the root), reads what it shows through the store's public API, and returns
an :class:`~agentmem._cli.common.Output`: the JSON document (the shapes are
listed in docs/cli.md) and its text form. What a store reports it could not
read (an unreadable note, a long-term memory document set aside) it also
logs; :mod:`agentmem.cli` prints those log records as ``agentmem: warning:``
lines, so nothing is dropped and nothing is said twice.
"""

from __future__ import annotations

import argparse
from typing import Any

from agentmem._cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_ROOT,
    ROOT_ENV,
    Cli,
    CliError,
    Output,
    iso,
)
from agentmem._cli.parsing import Commands, confidence, non_negative, positive_int
from agentmem.ltm import KINDS, LTMEntry

__all__ = ["register"]

KIND_ALIASES = {
    "discovery": "discoveries",
    "solution": "problem_solutions",
    "pattern": "code_patterns",
}
"""The short kind names the commands accept, beside the stored ones (:data:`agentmem.ltm.KINDS`)."""


# ---------------------------------------------------------------------- memory (LTM)


def _entry_text(entry: LTMEntry) -> str:
    line = f"{entry.id[:10]}  {entry.kind:<17} {entry.confidence:.2f}  {entry.text}"
    if entry.detail:
        line += f"\n{'':>12}-> {entry.detail}"
    return line


def _entries_output(entries: list[LTMEntry], empty: str) -> Output:
    text = "\n".join(_entry_text(e) for e in entries) if entries else empty
    return Output([e.to_json() for e in entries], text)


def memory_list(cli: Cli, args: argparse.Namespace) -> Output:
    kind = KIND_ALIASES.get(args.kind, args.kind) if args.kind else None
    entries = cli.memory().ltm.entries(kind)
    return _entries_output(entries, "no long-term memory entries")


def memory_search(cli: Cli, args: argparse.Namespace) -> Output:
    entries = cli.memory().ltm.search(args.query, limit=args.limit)
    return _entries_output(entries, f"no entry matches {args.query!r}")


def memory_stats(cli: Cli, args: argparse.Namespace) -> Output:
    stats = cli.memory().ltm.stats()
    kinds = ", ".join(f"{k} {n}" for k, n in stats["by_kind"].items())
    text = (
        f"entries: {stats['total']} ({kinds})\n"
        f"average confidence: {stats['average_confidence']:.2f}\n"
        f"applications: {stats['applications']} (confirmations {stats['confirmations']})\n"
        f"oldest: {iso(stats['oldest'])}  newest: {iso(stats['newest'])}\n"
        f"unreadable entries kept: {stats['unreadable']}\n"
        f"stored in: {stats['path'] or cli.backend or 'the backend'}"
    )
    return Output(stats, text)


def memory_prune(cli: Cli, args: argparse.Namespace) -> Output:
    ltm = cli.memory().ltm
    cli.progress.note("pruning long-term memory ...")
    removed = ltm.prune(
        max_age_days=args.max_age_days, min_confidence=args.min_confidence, dry_run=args.dry_run
    )
    verb = "would remove" if args.dry_run else "removed"
    text = f"{verb} {len(removed)} entr{'y' if len(removed) == 1 else 'ies'}"
    if removed:
        text += ":\n" + "\n".join(_entry_text(e) for e in removed)
    data = {
        "dry_run": bool(args.dry_run),
        "max_age_days": args.max_age_days,
        "min_confidence": args.min_confidence,
        "removed": [e.to_json() for e in removed],
    }
    return Output(data, text)


# ---------------------------------------------------------------------- topics and notes


def topics_list(cli: Cli, args: argparse.Namespace) -> Output:
    found = cli.memory().topics.list()
    data = [{"topic": t.topic, "size": t.size, "updated_at": t.updated_at} for t in found]
    lines = [f"{t.topic:<32} {t.size:>8} B  {iso(t.updated_at)}" for t in found]
    return Output(data, "\n".join(lines) if lines else "no topic files")


def _shown(what: str, name: str, content: str | None) -> Output:
    """One topic or note (``what``): its content, or exit 5 when there is none."""
    if content is None:
        raise CliError(EXIT_ERROR, f"no {what} {name!r}", f"`agentmem {what}s list` shows them")
    return Output({"topic" if what == "topic" else "key": name, "content": content}, content)


def topics_show(cli: Cli, args: argparse.Namespace) -> Output:
    return _shown("topic", args.topic, cli.memory().topics.read(args.topic))


def notes_list(cli: Cli, args: argparse.Namespace) -> Output:
    keys = cli.memory().notes.list()
    return Output([{"key": k} for k in keys], "\n".join(keys) if keys else "no notes")


def notes_show(cli: Cli, args: argparse.Namespace) -> Output:
    return _shown("note", args.key, cli.memory().notes.retrieve(args.key))


# ---------------------------------------------------------------------- recall and the index


def recall(cli: Cli, args: argparse.Namespace) -> Output:
    hits = cli.memory().recall(
        args.query, max_sessions=args.max_sessions, max_results=args.max_results
    )
    data = [
        {
            "session_id": h.session_id,
            "session_name": h.session_name,
            "session_date": h.session_date.isoformat(),
            "index": h.index,
            "role": h.role,
            "score": h.score,
            "preview": h.preview,
            "previous": h.previous,
            "next": h.next,
        }
        for h in hits
    ]
    blocks = []
    for h in hits:
        name = f' "{h.session_name}"' if h.session_name else ""
        head = f"{h.session_id}{name} [{h.index}] {h.role}  score {h.score:.3f}"
        blocks.append(f"{head}\n    {' '.join(h.preview.split())}")
    return Output(data, "\n".join(blocks) if blocks else f"nothing found for {args.query!r}")


def reindex(cli: Cli, args: argparse.Namespace) -> Output:
    sessions = cli.memory().sessions
    on_open = list(sessions.recall_repairs)  # the cheap check on open may have rebuilt it
    cli.progress.note("checking the recall index against the messages ...")
    problems = sessions.check_recall_index(repair=True)
    data = {
        "problems": problems,
        "rebuilt": bool(problems),
        "rebuilt_on_open": on_open,
    }
    lines = [f"rebuilt when the store was opened: {line}" for line in on_open]
    if problems:
        lines.append(f"recall index: {len(problems)} problem(s) found; rebuilt from the messages")
        lines += [f"  - {p}" for p in problems]
    else:
        lines.append("recall index: consistent with the messages; nothing to do")
    return Output(data, "\n".join(lines))


# ---------------------------------------------------------------------- doctor


def _doctor_text(report: Any) -> str:
    lines = [f"root: {report.root}  backend: {report.backend}"]
    stores: dict[str, list[Any]] = {}
    for finding in report.findings:
        stores.setdefault(finding.store, []).append(finding)
    for store, findings in stores.items():
        lines.append(store)
        for f in findings:
            line = f"  {f.severity:<8} {f.target}: {f.problem}"
            if f.severity != "ok" and f.recovery:
                line += f" (on open: {f.recovery})"
            lines.append(line)
    damaged = sum(1 for f in report.findings if f.severity == "damaged")
    warnings = sum(1 for f in report.findings if f.severity == "warning")
    lines.append(
        "ok: nothing damaged" if report.ok else f"DAMAGED: {damaged} finding(s) need recovery"
    )
    if warnings:
        lines[-1] += f"; {warnings} warning(s)"
    return "\n".join(lines)


def doctor(cli: Cli, args: argparse.Namespace) -> Output:
    # The doctor decides what a root is (any root marker, even a damaged one): the
    # other commands' check would refuse the very roots it is for.
    from agentmem.doctor import RootNotFoundError, diagnose  # only this command needs it

    root = cli.root
    cli.progress.note(f"checking {root} ...")
    try:
        report = diagnose(root, backend=cli.backend, progress=cli.progress)
    except RootNotFoundError as exc:
        raise CliError(EXIT_ROOT, str(exc), f"pass --root DIR or set {ROOT_ENV}") from exc
    return Output(report.to_dict(), _doctor_text(report), EXIT_OK if report.ok else EXIT_PROBLEMS)


# ---------------------------------------------------------------------- the parsers


def register(commands: Commands) -> None:
    """Add this module's commands to the parser."""
    memory = commands.group(
        "memory",
        "long-term memory: facts, solutions and patterns learned across sessions",
        "agentmem memory list --kind discovery\n"
        "agentmem memory search pytest\n"
        "agentmem --json memory stats\n"
        "agentmem memory prune --max-age-days 30 --dry-run",
    )
    p = memory.command(
        "list",
        memory_list,
        "list the entries, most confident first",
        "agentmem memory list\nagentmem memory list --kind solution --json",
    )
    p.add_argument(
        "--kind",
        choices=[*KIND_ALIASES, *KINDS],
        help="only this kind (discovery, solution, pattern, or a stored kind name)",
    )
    p = memory.command(
        "search", memory_search, "entries sharing words with QUERY", "agentmem memory search pytest"
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--limit", type=positive_int, default=20, help="at most this many (default 20)")
    memory.command("stats", memory_stats, "counts, confidence, age", "agentmem memory stats --json")
    p = memory.command(
        "prune",
        memory_prune,
        "remove entries not confirmed for a while or below a confidence",
        "agentmem memory prune --dry-run\nagentmem memory prune --max-age-days 30",
    )
    p.add_argument(
        "--max-age-days",
        type=non_negative,
        default=90.0,
        help="remove entries not confirmed for this many days (default 90)",
    )
    p.add_argument(
        "--min-confidence",
        type=confidence,
        default=0.3,
        help="remove entries below this confidence, 0..1 (default 0.3)",
    )
    p.add_argument("--dry-run", action="store_true", help="only show what would be removed")

    topics = commands.group(
        "topics",
        "the memory updater's topic files",
        "agentmem topics list\nagentmem topics show testing",
    )
    topics.command("list", topics_list, "every topic file", "agentmem topics list --json")
    p = topics.command(
        "show", topics_show, "one topic file's content", "agentmem topics show testing"
    )
    p.add_argument("topic", metavar="TOPIC")

    notes = commands.group(
        "notes", "the notes (key -> text)", "agentmem notes list\nagentmem notes show k"
    )
    notes.command("list", notes_list, "every note key", "agentmem notes list")
    p = notes.command("show", notes_show, "one note's content", "agentmem notes show build-steps")
    p.add_argument("key", metavar="KEY")

    p = commands.command(
        "recall",
        recall,
        "search every stored session's messages",
        'agentmem recall "flaky test"\nagentmem recall migration --max-results 10 --json',
    )
    p.add_argument("query", metavar="QUERY")
    p.add_argument(
        "--max-results", type=positive_int, default=5, help="at most this many hits (default 5)"
    )
    p.add_argument(
        "--max-sessions", type=positive_int, default=None, help="hits from at most N sessions"
    )
    commands.command(
        "reindex",
        reindex,
        "check the recall index against the messages; rebuild it when it is wrong",
        "agentmem reindex",
    )
    commands.command(
        "doctor",
        doctor,
        "check every store read-only; say what opening would recover (exit 1 on damage)",
        "agentmem doctor\nagentmem doctor --json",
    )
