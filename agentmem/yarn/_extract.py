"""The extractive heuristics behind YaRN's thread summary.

:class:`Fold` reads messages one at a time, oldest first, and keeps the
facts an agent needs after those messages left its context window: the
original and latest user requests, the current task, commits a commit
command reported, files named in tool arguments or written by shell
commands (:mod:`agentmem.yarn._shell`), question-and-answer decisions and tool
usage counts. :mod:`agentmem.yarn` turns :class:`Facts` into a
``ThreadSummary``, merges and renders it.

Every function here is total (never raises on a valid message, however
odd) and linear in the size of its input.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agentmem._json import decode_arguments
from agentmem._truncate import truncate_text
from agentmem.messages import is_real_user, message_text, sanitize_text
from agentmem.yarn._shell import commands_in_call, commands_in_text, written_files

# The caps keep the rendered summary bounded (a few thousand characters at most) whatever
# the length of the session; the oldest entries go first.
MAX_USER_REQUESTS: Final = 8
"""Requests kept in :attr:`ThreadSummary.user_requests`."""
MAX_COMMITS: Final = 15
"""Commits kept in :attr:`ThreadSummary.commits`."""
MAX_FILES: Final = 30
"""Paths kept in :attr:`ThreadSummary.files_touched`."""
MAX_DECISIONS: Final = 5
"""Exchanges kept in :attr:`ThreadSummary.decisions`."""
MAX_TEXT_CHARS: Final = 300
"""Requests, the current task, paths and each side of a decision are cut to this length."""
MAX_SUBJECT_CHARS: Final = 100
"""Commit subjects are cut to this length."""
MIN_TASK_WIDTH: Final = 20
"""A request narrower than this (wide East Asian characters count 2) is not a task."""
MAX_PENDING_ASKS: Final = 16
"""Unanswered ask-tool calls carried to the next batch (the oldest are forgotten)."""
UNKNOWN_TOOL: Final = "unknown"
"""Name counted for a tool call whose function name is missing."""


_WHITESPACE: Final = re.compile(r"\s+")
_WORD: Final = re.compile(r"\w+")
# A sentence ends at . ! or ? (optionally closed by quotes or brackets) before whitespace,
# or at a line break.
_SENTENCE_END: Final = re.compile(r"[.!?][\"')\]]*\s+|\n")
# `git commit` / `git rebase` / `git cherry-pick`: "[main abc1234] subject",
# "[main (root-commit) abc1234] subject", "[detached HEAD abc1234] subject", "[abc1234] subject".
_BRACKET_COMMIT: Final = re.compile(r"^\[(?:(\S[^\]\n]*) )?([0-9a-f]{7,40})\] +(\S[^\n]*)$", re.M)
_HEX_LETTER: Final = re.compile(r"[a-f]")
_PATH_KEYS: Final = ("path", "file_path", "filename", "old_path", "new_path")
_QUESTION_KEYS: Final = ("question", "message", "prompt", "text")
# Words that make up replies like "yes", "ok go ahead", "sounds good, continue": a request
# made only of these is a confirmation, not a task.
_CONFIRMATION_TEXT: Final = (
    "yes yeah yep yup y ok okay k sure go ahead please pls continue proceed do it that this "
    "sounds looks good great fine perfect thanks thank you thx lgtm right correct agreed "
    "agree carry on keep going done and so alright all exactly no nope with the me for now "
    "then just let lets s us"
)
_CONFIRMATION_WORDS: Final = frozenset(_CONFIRMATION_TEXT.split())


# --------------------------------------------------------------------------- text helpers


def squash(text: str) -> str:
    """Sanitise ``text`` and collapse every whitespace run to one space (one-line snippets)."""
    return _WHITESPACE.sub(" ", sanitize_text(text)).strip()


def snippet(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return truncate_text(squash(text), limit, ellipsis=True)


def is_substantive(text: str) -> bool:
    """True when ``text`` (already squashed) reads as a task rather than a confirmation."""
    width = 0
    for char in text:
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if width >= MIN_TASK_WIDTH:
            break
    if width < MIN_TASK_WIDTH:
        return False
    words = _WORD.findall(text.lower())
    return not words or not all(word in _CONFIRMATION_WORDS for word in words)


def last_sentence(text: str) -> str:
    """The last sentence of ``text``, which ends with a question mark."""
    start = 0
    for match in _SENTENCE_END.finditer(text, 0, len(text) - 1):
        start = match.end()
    return text[start:]


def tool_arguments(raw: Any) -> Mapping[str, Any]:
    """Decoded tool-call arguments (the rule of agentmem._json); anything else reads as ``{}``."""
    if isinstance(raw, Mapping):
        return raw
    return decode_arguments(raw) or {}


def argument_paths(args: Mapping[str, Any]) -> Iterator[str]:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and (path := snippet(value)):
            yield path
    values = args.get("paths")
    if isinstance(values, list):
        for value in values:
            if isinstance(value, str) and (path := snippet(value)):
                yield path


def ask_question(name: str, args: Mapping[str, Any]) -> str:
    for key in _QUESTION_KEYS:
        value = args.get(key)
        if isinstance(value, str) and (question := snippet(value)):
            return question
    # Claude Code's AskUserQuestion: {"questions": [{"question": ..., "options": [...]}]}.
    items = args.get("questions")
    if isinstance(items, list):
        texts = [item.get("question") if isinstance(item, Mapping) else item for item in items]
        joined = " / ".join(t for t in texts if isinstance(t, str) and t.strip())
        if question := snippet(joined):
            return question
    return f"{name}()"


def commits_made(text: str) -> list[str]:
    """Commits a commit command reported in one output, as ``"hash: subject"``, oldest first.

    Only the ``[branch abc1234] subject`` line that ``git commit`` (and
    ``cherry-pick``, ``revert``, ``merge``, ``rebase``) prints counts: hashes
    that ``git log`` or ``git show`` merely list are not commits made.
    """
    if "]" not in text:
        return []
    found = []
    for m in _BRACKET_COMMIT.finditer(text):
        if m.group(1) is None and not _HEX_LETTER.search(m.group(2)):
            continue  # "[1234567] ..." is more likely a log prefix than a commit
        found.append(f"{m.group(2)}: {snippet(m.group(3), MAX_SUBJECT_CHARS)}")
    return found


def shell_paths(command: str) -> Iterator[str]:
    """Paths a shell command writes, as one-line snippets."""
    for path in written_files(command):
        if cut := snippet(path):
            yield cut


def commit_key(entry: str) -> str:
    # Short and full hashes of one commit share their first 7 characters.
    return entry[:7]


def same(entry: str) -> str:
    return entry


def dedupe_tail(items: Iterable[str], limit: int, key: Callable[[str], str]) -> tuple[str, ...]:
    """Keep each key's last occurrence, in order of last occurrence, then the last ``limit``."""
    latest: dict[str, str] = {}
    for item in items:
        k = key(item)
        latest.pop(k, None)
        latest[k] = item
    values = tuple(latest.values())
    return values[-limit:]


@dataclass(frozen=True)
class Facts:
    """The parts of a thread summary read from one batch of messages."""

    original_request: str | None
    user_requests: tuple[str, ...]
    current_task: str | None
    commits: tuple[str, ...]
    files_touched: tuple[str, ...]
    decisions: tuple[tuple[str, str], ...]  # (question, answer)
    tool_counts: dict[str, int]
    compressed_messages: int


class Fold:
    """Reads messages one at a time, oldest first, into the parts of a summary.

    ``pending_question`` and ``pending_asks`` are the only state that spans
    messages; :class:`~agentmem.yarn.YaRN` carries them from one batch to the next.
    """

    def __init__(
        self,
        ask_tools: frozenset[str],
        pending_question: str | None,
        pending_asks: Mapping[str, str],
    ) -> None:
        self.ask_tools = ask_tools
        self.pending_question = pending_question
        self.pending_asks = dict(pending_asks)
        self.count = 0
        self.original: str | None = None
        self.task: str | None = None
        self.requests: deque[str] = deque(maxlen=MAX_USER_REQUESTS)
        self.decisions: deque[tuple[str, str]] = deque(maxlen=MAX_DECISIONS)
        self.commits: list[str] = []
        self.files: list[str] = []
        self.counts: dict[str, int] = {}

    def feed(self, msg: Mapping[str, Any]) -> None:
        self.count += 1
        # An assistant question is answered only by the message right after it.
        question, self.pending_question = self.pending_question, None
        role = msg.get("role")
        if role == "user":
            raw = message_text(msg)
            # Agents that run commands without tool calls (mini-swe-agent) get the
            # output back in a user message.
            self.commits.extend(commits_made(raw))
            if not is_real_user(msg):
                return
            text = squash(raw)
            if not text:
                return
            request = truncate_text(text, MAX_TEXT_CHARS, ellipsis=True)
            self.requests.append(request)
            if self.original is None:
                self.original = request
            if is_substantive(text):
                self.task = request
            if question is not None:
                self.decisions.append((question, request))
        elif role == "assistant":
            calls = msg.get("tool_calls")
            if isinstance(calls, list):
                for call in calls:
                    if isinstance(call, Mapping):
                        self._call(call)
            text = message_text(msg).rstrip()
            for command in commands_in_text(text):  # mini-swe-agent: ```bash blocks
                self.files.extend(shell_paths(command))
            if text.endswith("?") and (asked := snippet(last_sentence(text))):
                self.pending_question = asked
        elif role == "tool":
            text = message_text(msg)
            call_id = msg.get("tool_call_id")
            if isinstance(call_id, str) and call_id in self.pending_asks:
                asked = self.pending_asks.pop(call_id)
                answer = snippet(text) or "(no answer)"
                self.decisions.append((asked, answer))
            self.commits.extend(commits_made(text))

    def _call(self, call: Mapping[str, Any]) -> None:
        function = call.get("function")
        if not isinstance(function, Mapping):
            function = {}
        raw_name = function.get("name")
        name = sanitize_text(raw_name) if isinstance(raw_name, str) and raw_name else UNKNOWN_TOOL
        self.counts[name] = self.counts.get(name, 0) + 1
        raw = function.get("arguments")
        args = tool_arguments(raw)
        self.files.extend(argument_paths(args))
        for command in commands_in_call(name, raw, args):
            self.files.extend(shell_paths(command))
        call_id = call.get("id")
        if name in self.ask_tools and isinstance(call_id, str):
            self.pending_asks.pop(call_id, None)
            self.pending_asks[call_id] = ask_question(name, args)
            while len(self.pending_asks) > MAX_PENDING_ASKS:
                del self.pending_asks[next(iter(self.pending_asks))]

    def facts(self, current_task: str | None) -> Facts:
        """What was read, with ``current_task`` (when substantive) as the task."""
        task = self.task
        if current_task is not None and is_substantive(squashed := squash(current_task)):
            task = truncate_text(squashed, MAX_TEXT_CHARS, ellipsis=True)
        return Facts(
            original_request=self.original,
            user_requests=tuple(self.requests),
            current_task=task,
            commits=dedupe_tail(self.commits, MAX_COMMITS, commit_key),
            files_touched=dedupe_tail(self.files, MAX_FILES, same),
            decisions=tuple(self.decisions),
            tool_counts=dict(self.counts),
            compressed_messages=self.count,
        )


class FrozenCounts(Mapping[str, int]):
    """Read-only, name-sorted tool counts, so a shared summary cannot be changed in place."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, int]) -> None:
        self._data = dict(sorted(data.items()))

    def __getitem__(self, key: str) -> int:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)

    def __getstate__(self) -> dict[str, int]:
        return self._data

    def __setstate__(self, state: dict[str, int]) -> None:
        self._data = state
