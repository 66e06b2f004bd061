"""The context pipeline: the payload for each LLM call, within the model's window.

:class:`ContextManager` builds the payload from the system prompt, the
thread summary, the task anchor and the working window, and keeps it inside
the window in three stages (proactive, validation and reactive trims, the
last with a recovery note). This package is where all of it lives; this
module only re-exports the public names, so ``from agentmem.context import
ContextManager`` is the one import a caller needs.

* :mod:`agentmem.context.manager` -- :class:`ContextManager` (the pipeline and
  its design notes) and :func:`check_overflow_attempt`;
* :mod:`agentmem.context.types` -- :class:`ContextSettings`,
  :class:`TrimEvent`, :class:`ContextStats`, :class:`ContextBuild`,
  :data:`TurnNote` and :func:`session_tools`;
* ``_progress.py`` -- :class:`Progress`, :func:`progress_of`,
  :func:`render_progress`, :func:`latest_todos`: the recovery note's and the
  progress file's text (re-exported here, the session writes the file);
* ``_state.py``, ``_shrink.py``, ``_identity.py`` -- private to the
  pipeline: the state kept between builds, payload-level truncation, the
  identity cache its state is keyed by.
"""

from agentmem._truncate import truncate_text
from agentmem.context._progress import (
    TODO_TOOL_NAMES,
    Progress,
    latest_todos,
    progress_of,
    render_progress,
)
from agentmem.context.manager import RECOVERY_TAG as RECOVERY_TAG  # the note's tag (not in __all__)
from agentmem.context.manager import ContextManager, check_overflow_attempt
from agentmem.context.types import (
    ContextBuild,
    ContextSettings,
    ContextStats,
    TrimEvent,
    TurnNote,
    session_tools,
)

__all__ = [
    "TODO_TOOL_NAMES",
    "ContextBuild",
    "ContextManager",
    "ContextSettings",
    "ContextStats",
    "Progress",
    "TrimEvent",
    "TurnNote",
    "check_overflow_attempt",
    "latest_todos",
    "progress_of",
    "render_progress",
    "session_tools",
    "truncate_text",
]
