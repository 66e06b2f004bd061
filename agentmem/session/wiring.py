"""SessionWiring: what a session is built from, and the session's defaults.

A :class:`~agentmem.session.Session` never sees the
:class:`~agentmem.memory.Memory` that opened it: the Memory makes one
:class:`SessionWiring` from its own configuration (the session store, the
long-term memory and topic files it injects, the LLM, summarizer and token
counter, the settings, the paths, the progress reporter, the scrubber and a
close callback) and every session is built from that, so a test can build a
session from a hand-made wiring (``tests/test_session_wiring.py``). The
constants here are the session defaults the facade also uses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmem._storage.backend import SESSIONS_FILE
from agentmem.context import ContextSettings
from agentmem.errors import AgentMemError
from agentmem.ltm import LongTermMemory
from agentmem.memory_updater import MemoryUpdateSettings
from agentmem.protocols import LLM, ProgressReporter, Summarizer, TokenCounter
from agentmem.scrub import Scrubber
from agentmem.session_store import SessionStore
from agentmem.topics import TopicStore

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MODEL",
    "MAX_CONTEXT_WINDOW",
    "MAX_TOKENS",
    "MIN_CONTEXT_WINDOW",
    "PERSONA_PROMPT_TOKENS",
    "PROGRESS_FILE",
    "SESSIONS_FILE",
    "SNAPSHOTS_DIR",
    "SessionWiring",
]

_log = logging.getLogger("agentmem.memory")

DEFAULT_MODEL = "gpt-4o"
DEFAULT_CONTEXT_WINDOW = 128_000
MIN_CONTEXT_WINDOW = 256
MAX_CONTEXT_WINDOW = 2**31 - 1
MAX_TOKENS = 2**53 - 1
"""Largest token figure ``record_usage`` accepts (exact in JSON and SQLite)."""
PROGRESS_FILE = Path("memory") / "session_progress.md"
SNAPSHOTS_DIR = "snapshots"
PERSONA_PROMPT_TOKENS = 1000
"""Most tokens the extensions' resident personas take in the system prompt."""


@dataclass(frozen=True, kw_only=True)
class SessionWiring:
    """What a :class:`Session` is built from: the parts and settings it uses, nothing more.

    :class:`~agentmem.memory.Memory` makes one from its own configuration and
    passes it to every session it opens; a test (or another host) can make
    one by hand. The stores are shared with whoever made the wiring; a
    session never closes them.

    Attributes:
        sessions: Where the session's messages, state and billing are stored.
        working_dir: The project directory (the time machine snapshots files under it).
        root: The memory directory: ``snapshots/`` and ``memory/session_progress.md``
            go under it (nothing is written there when ``incognito``).
        topics: The memory updater's topic files (it reads and writes them).
        ltm: Long-term memory, for the system prompt (with ``ltm_enabled``).
        ltm_enabled: Put ``ltm``'s block into every system prompt.
        incognito: Write nothing outside ``sessions``; inject neither long-term
            memory nor topic files; never run the memory updater.
        llm: The host's model, for the memory updater (``None``: no updates).
        summarizer: Optional LLM summarizer of the thread summary.
        token_counter: The host's counter (``None``: chosen by model name); a
            calibrating counter is deep-copied per session.
        reporter: Receives the session's progress events.
        scrubber: Redacts secrets in the progress file and task summaries.
        context: The default :class:`~agentmem.context.ContextSettings`
            (``context_window`` is the session's own).
        memory_update: When and how the memory updater runs, and the topic
            files' prompt budget.
        on_close: Called with the session once it closed (the Memory forgets it); typed
            ``Any`` so this module need not import the session it wires.
    """

    sessions: SessionStore
    working_dir: Path
    root: Path
    ltm: LongTermMemory
    topics: TopicStore
    ltm_enabled: bool = True
    incognito: bool = False
    llm: LLM | Any | None = None
    summarizer: Summarizer | None = None
    token_counter: TokenCounter | None = None
    reporter: ProgressReporter | None = None
    scrubber: Scrubber | None = None
    context: ContextSettings = field(default_factory=ContextSettings)
    memory_update: MemoryUpdateSettings = field(default_factory=MemoryUpdateSettings)
    on_close: Callable[[Any], None] | None = None

    def prompt_blocks(self, token_counter: TokenCounter, context_window: int) -> tuple[str, str]:
        """The long-term memory and topic blocks of a session's system prompt.

        Each part renders its own block under its cap
        (:meth:`~agentmem.ltm.LongTermMemory.prompt_block`,
        :meth:`~agentmem.topics.TopicStore.prompt_block`); ``""`` for one that
        is disabled, in incognito mode, or unreadable (logged: an unreadable
        file must not stop a session).
        """
        ltm = topics = ""
        if self.ltm_enabled and not self.incognito:
            ltm = _unless_unreadable(
                "long-term memory", lambda: self.ltm.prompt_block(context_window, token_counter)
            )
        settings = self.memory_update
        if settings.inject_topics and not self.incognito:
            topics = _unless_unreadable(
                "topic files",
                lambda: self.topics.prompt_block(
                    context_window, settings.prompt_tokens, token_counter
                ),
            )
        return ltm, topics


def _unless_unreadable(what: str, render: Callable[[], str]) -> str:
    try:
        return render()
    except AgentMemError as exc:
        _log.warning("%s not injected: %s", what, exc)
        return ""
