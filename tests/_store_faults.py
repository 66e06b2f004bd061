"""Helpers shared by the storage fault tests (not collected by pytest)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("_kill9_child.py")


def kill_after(db: Path, session_id: str, acks: int) -> list[int]:
    """Run the appending child until it acknowledged ``acks`` appends, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), "append", str(db), session_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    acked: list[int] = []
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"start\n"
        assert proc.stdout.readline().startswith(b"ready")
        while len(acked) < acks:
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            acked.append(int(line))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return acked


def lay_out(directory: Path, files: dict[str, bytes | None]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "s.sqlite"
    for suffix, data in files.items():
        if data is not None:
            db.with_name(db.name + suffix).write_bytes(data)
    return db


def moved_aside(db: Path) -> list[Path]:
    return sorted(db.parent.glob(db.name + ".corrupt-*"))
