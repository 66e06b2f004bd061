"""The session state document: its header, its parts, and the parts this release cannot read.

A session's state (saved by the facade beside its messages) is one JSON
object: a format header and one part per component that remembers where it
stands (``window``, ``yarn``, ``tasks``, ``estimator``, and ``extensions``: the
semantic-memory personas and turn blocks, read by
:func:`agentmem.semantic.extension.read_extensions_state`). A part written by
a newer release, or one this release does not know, is *kept*: it is never
read, and it goes back unchanged on every save, so an older agentmem never
overwrites what a newer one wrote (docs/storage.md, "State parts").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from agentmem._storage.formats import check_format
from agentmem.errors import AgentMemError, FormatVersionError
from agentmem.history import MessageHistory
from agentmem.semantic.extension import read_extensions_state
from agentmem.stm import ShortTermMemory
from agentmem.tokens import LearningEstimator
from agentmem.yarn import YaRN

__all__ = ["STATE_FORMAT", "STATE_PARTS", "STATE_VERSION", "read_state"]

STATE_FORMAT: Final = "agentmem.session-state"
STATE_VERSION: Final = 1
STATE_PARTS: Final = frozenset(
    {"format", "version", "window", "yarn", "tasks", "estimator", "extensions"}
)
"""The keys this release writes; any other key is kept as stored."""

_log = logging.getLogger("agentmem.memory")

_READERS: Final[dict[str, Callable[[Any], object]]] = {
    "window": lambda part: ShortTermMemory(MessageHistory()).restore(part),
    "yarn": YaRN.from_state,
    "estimator": lambda part: LearningEstimator().restore(part),
    "extensions": read_extensions_state,
}


def _unreadable_parts(state: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """Part name -> (stored value, why) for the parts this release cannot read.

    A part is unreadable when its reader refuses its format version (a newer
    release wrote it), or when this release does not know the part at all.
    A part that is merely damaged is left to the session, which reports it
    and starts that part afresh.
    """
    kept = {
        key: (value, "not a part this release knows")
        for key, value in state.items()
        if key not in STATE_PARTS
    }
    for key, read in _READERS.items():
        part = state.get(key)
        if not part:
            continue
        try:
            read(part)
        except FormatVersionError as exc:
            kept[key] = (part, str(exc))
        except AgentMemError:
            pass
    return kept


def read_state(
    stored: Mapping[str, Any] | None, session_id: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """Split a stored state into (readable parts, kept parts, why each was kept).

    ``{}`` (never saved, or quarantined) reads as empty. A state without a
    format header was written before headers existed (the v1 golden file);
    its parts are read as they are.

    Raises:
        FormatVersionError: the state's own header names a newer format version.
    """
    state = dict(stored or {})
    if "format" in state or "version" in state:
        check_format(
            state, kind=STATE_FORMAT, version=STATE_VERSION, what=f"session {session_id} state"
        )
    unreadable = _unreadable_parts(state)
    for key, (_, why) in unreadable.items():
        state.pop(key, None)
        _log.warning(
            "session %s: state part %r kept as stored, unread and never overwritten (%s)",
            session_id,
            key,
            why,
        )
    kept = {key: value for key, (value, _) in unreadable.items()}
    reasons = {key: why for key, (_, why) in unreadable.items()}
    return state, kept, reasons
