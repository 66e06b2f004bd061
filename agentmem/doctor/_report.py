"""What the doctor hands back: a :class:`Finding` per thing checked, in a :class:`DoctorReport`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agentmem.errors import AgentMemError, FormatVersionError

__all__ = ["NEWER", "SEVERITIES", "STORES", "DoctorReport", "Finding", "Sink", "failure"]

STORES: Final = (
    "root",
    "sessions",
    "recall-index",
    "ltm",
    "notes",
    "topics",
    "semantic",
    "items",
    "time-machine",
)
"""The stores a finding can be about, in the order they are checked."""

SEVERITIES: Final = ("ok", "warning", "damaged")


@dataclass(frozen=True)
class Finding:
    """One thing the doctor looked at, and what it found."""

    store: str
    """``"root"``, ``"sessions"``, ``"recall-index"``, ``"ltm"``, ``"notes"``, ``"topics"``,
    ``"semantic"``, ``"items"`` or ``"time-machine"``."""
    target: str
    """The file path, or the session id / table, the finding is about."""
    severity: str
    """``"ok"``, ``"warning"`` (nothing is lost, but something needs attention) or
    ``"damaged"`` (data that cannot be read as it is)."""
    problem: str
    """One sentence: what is wrong (for ``"ok"``, a summary of what was checked)."""
    recovery: str
    """One sentence: what opening it normally would do (move aside, quarantine, rebuild,
    refuse, or nothing)."""

    def __post_init__(self) -> None:
        if self.store not in STORES:
            raise ValueError(f"unknown store {self.store!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")
        for name in ("target", "problem", "recovery"):  # one line each, whatever was quoted
            object.__setattr__(self, name, " ".join(str(getattr(self, name)).split()))

    def to_dict(self) -> dict[str, str]:
        """The finding as a JSON-ready mapping."""
        return {
            "store": self.store,
            "target": self.target,
            "severity": self.severity,
            "problem": self.problem,
            "recovery": self.recovery,
        }


@dataclass(frozen=True)
class DoctorReport:
    """Everything :func:`~agentmem.doctor.diagnose` found under one root."""

    root: str
    """The memory root, as an absolute path."""
    backend: str
    """``"embedded"``, or the PostgreSQL DSN with its password masked."""
    findings: tuple[Finding, ...]
    """Every finding, store by store in the order of :data:`STORES`."""

    @property
    def ok(self) -> bool:
        """Whether no finding is ``"damaged"`` (warnings do not count)."""
        return not any(f.severity == "damaged" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready mapping (``ok`` included)."""
        return {
            "root": self.root,
            "backend": self.backend,
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
        }


Sink = Callable[[Finding], None]
"""Where a checker puts its findings."""


NEWER: Final = "nothing: opening refuses it with FormatVersionError and leaves it in place"
"""The recovery of data a newer agentmem wrote."""


def failure(store: str, target: str, exc: AgentMemError, problem: str) -> Finding:
    """The finding for a store that opening (or reading) refuses with ``exc``."""
    if isinstance(exc, FormatVersionError):
        return Finding(store, target, "damaged", problem, NEWER)
    return Finding(
        store, target, "damaged", problem, f"nothing: opening fails with {type(exc).__name__}"
    )
