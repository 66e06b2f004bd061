"""Build the session fixtures of the current format: ``sessions-v<N>.sqlite`` (+ the export).

``sessions-v1.sqlite`` and ``session-export-v1.json`` pin what agentmem 0.1
wrote; ``sessions-v2.sqlite`` the same sessions in format 2 (row
checksums). Future readers must keep loading every one of them exactly
(``tests/test_session_store.py`` checks it), so once committed they are
never regenerated for a new format: a new version gets new fixtures beside
these. This script writes the fixture of the *current* format version and
refuses to overwrite existing files unless given ``--force``.

Run from the repository root::

    python tests/golden/make_golden.py [--force]

The expected contents live here too (``EXPECTED_*``), written out by hand
rather than read back from the store, so the test compares the database
against an independent statement of what it must hold.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agentmem.session_store import FORMAT_VERSION, BillingRecord, SessionInfo, SessionStore

HERE = Path(__file__).resolve().parent
DB_NAME = "sessions-v1.sqlite"
CURRENT_DB_NAME = f"sessions-v{FORMAT_VERSION}.sqlite"
EXPORT_NAME = "session-export-v1.json"
MAIN_ID = "golden-main"
EMPTY_ID = "golden-empty"

PNG_1PX = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
    "z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

FIRST_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful coding agent."},
    {
        "role": "user",
        "content": "Fix the bug in <main.py> & add a test.\nThanks — ünïcödé, 漢字, 😀",
        "task_id": 1,
        "created_at": "2024-05-01T12:00:00Z",
    },
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Read the file first.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "main.py"}'},
            }
        ],
        "task_id": 1,
        "token_usage": {"prompt_tokens": 120, "completion_tokens": 30},
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "print('hello')\n", "task_id": 1},
    {"role": "assistant", "content": "A draft answer that gets replaced.", "task_id": 1},
]

REPLACEMENT = {"role": "assistant", "content": "The file prints a greeting.", "task_id": 1}

REWRITTEN_TAIL: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And what about this screenshot?"},
            {"type": "image_url", "image_url": {"url": PNG_1PX}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ],
        "task_id": 2,
    },
    {"role": "assistant", "content": "Done. <script>alert(1)</script>", "task_id": 2},
]

EXPECTED_MESSAGES: list[dict[str, Any]] = [
    FIRST_MESSAGES[0],
    FIRST_MESSAGES[1],
    FIRST_MESSAGES[2],
    FIRST_MESSAGES[3],
    REPLACEMENT,
    *REWRITTEN_TAIL,
]
"""on_append(FIRST_MESSAGES), a user turn appended and rolled back, on_replace(4), then
on_rewrite(5, REWRITTEN_TAIL)."""

EXPECTED_STATE: dict[str, Any] = {
    "window": {"start": 2, "max_tokens": 96000},
    "summary": "<thread_summary>The user asked for a fix.</thread_summary>",
    "counters": {"turns": 2, "trims": 0},
}

EXPECTED_BILLING = [
    BillingRecord(
        at=1_714_564_805.25,
        kind="llm",
        model="gpt-4o",
        prompt_tokens=120,
        completion_tokens=30,
        cost_usd=0.0006,
    ),
    BillingRecord(at=1_714_564_830.5, kind="memory_update", model="gpt-4o-mini", cost_usd=0.0),
]

EXPECTED_THREADS: dict[str, list[dict[str, Any]]] = {
    "yarn-0001": [
        {"role": "user", "content": "An evicted question."},
        {"role": "assistant", "content": "An evicted answer."},
    ]
}

EXPECTED_INFOS = [
    # list() order: most recently updated first.
    SessionInfo(
        id=MAIN_ID,
        name="Golden session ✓",
        created_at=1_714_564_800.0,
        updated_at=1_714_564_900.0,
        working_directory="/home/dev/project",
        model="gpt-4o",
        context_window=128_000,
        message_count=len(EXPECTED_MESSAGES),
    ),
    SessionInfo(
        id=EMPTY_ID,
        name=None,
        created_at=1_714_564_850.0,
        updated_at=1_714_564_850.0,
        working_directory=None,
        model=None,
        context_window=None,
        message_count=0,
    ),
]


class FixedClock:
    """A clock that says whatever it was last set to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def build(path: Path) -> None:
    """Write the golden sessions into a new database at ``path`` through the public API."""
    clock = FixedClock(1_714_564_800.0)
    with SessionStore(path, clock=clock) as store:
        store.create(
            session_id=MAIN_ID,
            name="Golden session",
            working_directory="/home/dev/project",
            model="gpt-4o",
            context_window=128_000,
        )
        writer = store.writer(MAIN_ID)
        clock.now = 1_714_564_805.0
        writer.on_append(FIRST_MESSAGES)
        writer.on_append([{"role": "user", "content": "rolled back"}])
        writer.on_rewrite(5, [])
        writer.add_billing(EXPECTED_BILLING[0])
        clock.now = 1_714_564_830.0
        writer.on_replace(4, REPLACEMENT)
        writer.add_billing(EXPECTED_BILLING[1])
        clock.now = 1_714_564_850.0
        store.create(session_id=EMPTY_ID)
        clock.now = 1_714_564_900.0
        writer.append_thread("yarn-0001", EXPECTED_THREADS["yarn-0001"])
        writer.on_rewrite(5, REWRITTEN_TAIL)
        writer.save_state(EXPECTED_STATE)
        writer.rename("Golden session ✓")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="overwrite existing fixtures")
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write into")
    args = parser.parse_args(argv)
    db, export = args.out / CURRENT_DB_NAME, args.out / EXPORT_NAME
    if not args.force and db.exists():
        print(f"{db} exists; pass --force to overwrite", file=sys.stderr)
        return 1
    for leftover in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        leftover.unlink(missing_ok=True)
    build(db)
    written = [f"{db} ({db.stat().st_size} bytes)"]
    if args.force or not export.exists():
        with SessionStore(db) as store:
            store.export(MAIN_ID, export)
        written.append(str(export))
    print("wrote " + " and ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
