"""Where the shared benchmark data lies: ``../shared/bench-data/`` beside the checkout."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]


def bench_data(*parts: str) -> Path:
    """``shared/bench-data/<parts>`` beside the checkout (or beside its parent, for a git
    worktree one level down); the first candidate when neither exists."""
    candidates = [
        p.joinpath("shared", "bench-data", *parts) for p in (_ROOT.parent, _ROOT.parents[1])
    ]
    return next((c for c in candidates if c.exists()), candidates[0])
