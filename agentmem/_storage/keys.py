"""The names a store's documents may have: one rule for notes and topics.

A note key or a topic names a file (``memory/<key>.json``,
``memories/<topic>.md``) in the embedded backend, so :func:`check_key`
refuses every name that could leave its directory or mean something else to
a filesystem: path separators, ``..``, a leading ``.`` or ``~``, control
characters, ``:``, over-long names, Windows device names and the reserved
``session_progress``. The same rule holds on every backend, so a memory can
move between them. Public as :func:`agentmem.notes.check_key` and
:func:`agentmem.topics.check_topic`; it lives here so the file layout
(:mod:`agentmem._storage.backend`) can use it without importing a part.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from agentmem.errors import UnsafePathError

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_KEY_CHARS",
    "NOTE_SUFFIX",
    "PROGRESS_FILE",
    "PROGRESS_KEY",
    "TOPICS_DIR",
    "TOPIC_SUFFIX",
    "check_key",
    "check_topic",
]

MAX_KEY_CHARS = 128
MAX_KEY_BYTES = 200
PROGRESS_KEY = "session_progress"
"""The note that reads the trim checkpoint; never writable through the notes."""
PROGRESS_FILE = "session_progress.md"
"""The trim checkpoint's file, in the notes directory."""
NOTE_SUFFIX = ".json"
TOPICS_DIR = "memories"
TOPIC_SUFFIX = ".md"
_WINDOWS_DEVICES = re.compile(r"(?i)^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)$")


def check_key(
    key: object, directory: str | os.PathLike[str] = "memory", *, what: str = "note key"
) -> str:
    """Return ``key`` when it is a safe note key, else raise :class:`UnsafePathError`.

    The same rule names the memory updater's topic files
    (:func:`check_topic`), which pass ``what="topic"``. Re-exported as
    :func:`agentmem.notes.check_key`.

    Args:
        key: The key to check.
        directory: The notes directory (named in the error).
        what: What the key names, for the error message.
    """

    def refuse(reason: str) -> UnsafePathError:
        return UnsafePathError(str(key), Path(directory), f"{what} {reason}")

    if not isinstance(key, str):
        raise refuse(f"must be a string, got {type(key).__name__}")
    if not key:
        raise refuse("is empty")
    if len(key) > MAX_KEY_CHARS or len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise refuse(f"is longer than {MAX_KEY_CHARS} characters / {MAX_KEY_BYTES} bytes")
    for char in key:
        if char in "/\\" or char == os.sep or (os.altsep and char == os.altsep):
            raise refuse("contains a path separator")
        if unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") or char == "\x00":
            raise refuse(f"contains a control character {char!r}")
        if char == ":":
            raise refuse("contains ':' (drive letters and streams are refused)")
    if ".." in key:
        raise refuse("contains '..'")
    if key[0] in ".~" or key[-1] in ". ":
        raise refuse("starts with '.' or '~', or ends with '.' or a space")
    if os.path.isabs(key):
        raise refuse("is an absolute path")
    stem = key.split(".")[0].strip()
    if _WINDOWS_DEVICES.match(stem) or key.casefold() == PROGRESS_KEY:
        raise refuse("is a reserved name")
    return key


def check_topic(topic: object, directory: str | os.PathLike[str] = TOPICS_DIR) -> str:
    """The topic name (a trailing ``.md`` removed) when it is safe, else :class:`UnsafePathError`.

    Args:
        topic: The name to check.
        directory: The topics directory, named in the error.
    """
    if (
        isinstance(topic, str)
        and topic.lower().endswith(TOPIC_SUFFIX)
        and len(topic) > len(TOPIC_SUFFIX)
    ):
        topic = topic[: -len(TOPIC_SUFFIX)]
    return check_key(topic, directory, what="topic")
