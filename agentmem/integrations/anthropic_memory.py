"""Anthropic's memory tool (``memory_20250818``) served from agentmem's topic files.

:class:`AgentMemMemoryTool` is a subclass of the Anthropic SDK's
``BetaAbstractMemoryTool``: hand it to ``client.beta.messages.tool_runner(tools=[...])``
and Claude's ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and
``rename`` commands under ``/memories`` read and write the same topic files the
memory updater writes and later sessions put in their system prompt
(:class:`agentmem.topics.TopicStore`, ``mem.topics``), on the embedded files
backend and on PostgreSQL alike. :class:`AsyncAgentMemMemoryTool` is the same
tool for ``AsyncAnthropic`` (each command runs in a worker thread).

How paths map onto topics (docs/integrations/anthropic-memory.md):

* ``/memories/<name>.md`` is the topic ``<name>``: the file ``memories/<name>.md``
  the memory updater writes. A topic file's name must end in ``.md`` (lowercase);
  any other file name is refused with a message saying so (never renamed).
* ``/memories/<dir>/.../<name>.md`` is the topic ``<dir>{S}...{S}<name>``
  where ``{S}`` is U+2215 DIVISION SLASH (:data:`SEPARATOR`), a character topic names
  may hold and paths may not. Directories are not stored: a directory exists while
  a topic file lies beneath it (an emptied directory disappears), and a directory
  name may not end in ``.md``, so a path is never both a file and a directory.
* Every path component follows the topic-name rule (:func:`agentmem.topics.check_topic`:
  no leading ``.``/``~``, no ``:``, no control characters, no reserved names), and
  the whole topic name stays within its 128 characters. Refused outright, with the
  SDK's ``ToolError``: paths outside ``/memories`` (``/memoriesX`` included), ``.``
  and ``..`` components, empty components (``//``), backslashes, NUL and other
  control characters, percent escapes (``%2e``), and U+2215 itself.

Writes go through the topic store, so content is secret-scrubbed and cut to the
per-file token limit (the tool's answer says when either happened). Edits
(``str_replace``, ``insert``, ``rename``, deleting a directory) are one
read-modify-write under :meth:`TopicStore.locked`, the store's cross-process
lock, so several threads or processes editing at once lose nothing; ``create``
is a compare-and-swap against "absent". Answers and error texts are the SDK's
own ``BetaLocalFilesystemMemoryTool``'s.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from agentmem._optional import require

require("anthropic", "agentmem.integrations.anthropic_memory", "anthropic")

from anthropic.lib.tools import (  # noqa: E402
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    BetaFunctionToolResultType,
    ToolError,
)
from anthropic.types.beta import (  # noqa: E402
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818Command,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from agentmem import AgentMemError, InvalidArgumentError, Memory, UnsafePathError  # noqa: E402
from agentmem.topics import TopicInfo, TopicStore, WriteResult, check_topic  # noqa: E402

__all__ = [
    "MEMORIES",
    "SEPARATOR",
    "AgentMemMemoryTool",
    "AsyncAgentMemMemoryTool",
    "path_of_topic",
    "topic_of_path",
]

MEMORIES = "/memories"
"""The memory tool's root directory."""
SEPARATOR = "\u2215"
"""Joins a nested path's directories in its topic name (U+2215 DIVISION SLASH)."""
SUFFIX = ".md"
MAX_LINES = 999_999
_WIDTH = len(str(MAX_LINES))
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_REASON = re.compile(r"\(([^()]*)\)$")


@dataclass(frozen=True)
class _Path:
    """A parsed ``/memories`` path."""

    text: str
    """As given (echoed in answers, as the SDK does)."""
    parts: tuple[str, ...]
    """Its components below ``/memories`` (``()``: the root)."""
    topic: str | None
    """The topic of a file path (one ending in ``.md``); ``None`` for a directory."""

    @property
    def prefix(self) -> str:
        """What the topics under this directory start with (``""`` for the root)."""
        return "".join(part + SEPARATOR for part in self.parts)


def _refuse(path: str, reason: str) -> ToolError:
    return ToolError(f"Path {path} is refused: {reason}")


def _check_component(path: str, part: str, *, last: bool) -> None:
    if not last and part.lower().endswith(SUFFIX):
        raise _refuse(path, f"a directory name cannot end in {SUFFIX} (that marks a topic file)")
    try:
        check_topic(part, MEMORIES)  # the topic-name rule, for each component
    except UnsafePathError as exc:
        found = _REASON.search(str(exc))
        raise _refuse(
            path, f"the name {part!r} is not allowed ({found.group(1) if found else exc})"
        ) from None


def _parse(path: object, field: str = "path") -> _Path:
    """``path`` checked and split; :class:`ToolError` naming what is wrong."""
    if not isinstance(path, str):
        raise ToolError(f"`{field}` must be a string, got {type(path).__name__}")
    shown = repr(path) if any(unicodedata.category(c) == "Cc" for c in path) else path
    if not path.startswith(MEMORIES):
        raise ToolError(f"Path must start with {MEMORIES}, got: {shown}")
    rest = path[len(MEMORIES) :]
    if rest and not rest.startswith("/"):
        raise ToolError(f"Path {shown} would escape {MEMORIES} directory")
    for char in path:
        if unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp"):
            raise _refuse(shown, f"it contains the control character {char!r}")
        if char == "\\":
            raise _refuse(shown, "it contains a backslash (use '/')")
        if char == SEPARATOR:
            raise _refuse(shown, f"it contains {SEPARATOR!r} (U+2215), reserved for nested topics")
    if _PERCENT_ESCAPE.search(path):
        raise _refuse(shown, "it contains a percent escape (paths are taken literally)")
    if "//" in rest:
        raise _refuse(path, "it has an empty component ('//')")
    body = rest[1:]
    if body.endswith("/"):
        body = body[:-1]
    if not body:
        return _Path(path, (), None)
    parts = tuple(body.split("/"))
    for part in parts:
        if part in (".", ".."):
            raise ToolError(
                f"Path {path} would escape {MEMORIES} directory ('.' and '..' are refused)"
            )
        if not part:
            raise _refuse(path, "it has an empty component ('//')")
    for i, part in enumerate(parts):
        _check_component(path, part, last=i == len(parts) - 1)
    last = parts[-1]
    if not last.endswith(SUFFIX):
        if last.lower().endswith(SUFFIX):
            raise _refuse(path, f"a topic file's name must end in {SUFFIX} (lowercase)")
        return _Path(path, parts, None)
    stem = last[: -len(SUFFIX)]
    if stem.lower().endswith(SUFFIX):
        raise _refuse(path, f"a topic file's name cannot end in {SUFFIX}{SUFFIX}")
    _check_component(path, stem, last=True)
    topic = SEPARATOR.join((*parts[:-1], stem))
    try:
        checked = check_topic(topic)
    except UnsafePathError as exc:
        found = _REASON.search(str(exc))
        raise _refuse(
            path,
            f"as a topic it would be {topic!r}, which is not allowed "
            f"({found.group(1) if found else exc})",
        ) from None
    if checked != topic:  # pragma: no cover (the suffix checks above rule it out)
        raise _refuse(path, f"it does not name the topic {topic!r}")
    return _Path(path, parts, topic)


def topic_of_path(path: str) -> str | None:
    """The topic a ``/memories`` file path names; ``None`` for a directory path.

    Raises:
        InvalidArgumentError: the path is refused (the message says why).
    """
    try:
        return _parse(path).topic
    except ToolError as exc:
        raise InvalidArgumentError(str(exc)) from None


def path_of_topic(topic: str) -> str | None:
    """The ``/memories`` path of ``topic``, or ``None`` when no path names it.

    A topic written by other means (the memory updater, ``mem.topics.write``) whose
    name no accepted path maps back to (one holding ``%2e``, a U+2215-separated component
    starting with ``.``) has no path; the directory view lists it as not shown.
    """
    parts = topic.split(SEPARATOR)
    path = MEMORIES + "/" + "/".join((*parts[:-1], parts[-1] + SUFFIX))
    try:
        parsed = _parse(path)
    except ToolError:
        return None
    return path if parsed.topic == topic else None


def _size(n: int) -> str:
    """Bytes as the SDK's directory view shows them (``0B``, ``512B``, ``1.5K``)."""
    if n == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((n.bit_length() - 1) // 10, len(units) - 1)
    size = n / (1024**i)
    return f"{int(size)}{units[i]}" if size == int(size) else f"{size:.1f}{units[i]}"


def _text(command: object, field: str) -> str:
    value = getattr(command, field, None)
    if not isinstance(value, str):
        raise ToolError(f"`{field}` must be a string, got {type(value).__name__}")
    return value


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(i + start).rjust(_WIDTH)}\t{line}" for i, line in enumerate(lines))


@dataclass
class _Node:
    """One entry of the tree the topics make: a file, or a directory (``children``)."""

    size: int
    children: dict[str, _Node] | None  # None for a file


def _tree(infos: list[TopicInfo]) -> tuple[dict[str, _Node], list[str]]:
    """The directory tree of the topics that have a path, and the topics that have none.

    A directory's size is the sum of the sizes of the files beneath it.
    """
    root: dict[str, _Node] = {}
    hidden: list[str] = []
    for info in infos:
        path = path_of_topic(info.topic)
        if path is None:
            hidden.append(info.topic)
            continue
        parts = path[len(MEMORIES) + 1 :].split("/")
        level = root
        for part in parts[:-1]:
            node = level.setdefault(part, _Node(0, {}))
            node.size += info.size
            assert node.children is not None  # directory names never end in .md
            level = node.children
        level[parts[-1]] = _Node(info.size, None)
    return root, hidden


class AgentMemMemoryTool(BetaAbstractMemoryTool):
    """Anthropic's ``memory_20250818`` tool over a Memory's topic files.

    Args:
        memory: The :class:`agentmem.Memory` whose topics (``memory.topics``) the
            tool serves; on either backend.
        cache_control: Passed to the SDK (the tool definition's ``cache_control``).

    Raises:
        InvalidArgumentError: ``memory`` is not a :class:`agentmem.Memory`.
    """

    def __init__(
        self, memory: Memory, *, cache_control: BetaCacheControlEphemeralParam | None = None
    ) -> None:
        if not isinstance(memory, Memory):
            raise InvalidArgumentError(
                f"memory must be an agentmem.Memory, got {type(memory).__name__}"
            )
        super().__init__(cache_control=cache_control)
        self.memory = memory
        self.topics: TopicStore = memory.topics

    # ------------------------------------------------------------------ dispatch

    def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        """Run one command; an agentmem error comes back as the SDK's :class:`ToolError`."""
        name = getattr(command, "command", None)
        if name not in ("view", "create", "str_replace", "insert", "delete", "rename"):
            raise ToolError(
                f"Unknown command {name!r}: the memory tool runs view, create, "
                "str_replace, insert, delete and rename"
            )
        try:
            return super().execute(command)
        except ToolError:
            raise
        except AgentMemError as exc:
            raise ToolError(f"The memory command {name} failed: {exc}") from exc

    # ------------------------------------------------------------------ commands

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        path = _parse(getattr(command, "path", None))
        if path.topic is not None:
            content = self.topics.read(path.topic)
            if content is None:
                raise self._missing(path.text, view=True)
            return self._view_file(path.text, content, getattr(command, "view_range", None))
        infos = self.topics.list()
        tree, hidden = _tree(infos)
        level: dict[str, _Node] = tree
        size = sum(node.size for node in tree.values())
        for part in path.parts:
            node = level.get(part)
            if node is None or node.children is None:
                raise self._missing(path.text, view=True)
            level, size = node.children, node.size
        shown = path.text.rstrip("/")
        lines = [f"{_size(size)}\t{path.text}"]
        for relative, node in _walk(level, "", 1):
            lines.append(f"{_size(node.size)}\t{shown}/{relative}")
        answer = (
            "Here're the files and directories up to 2 levels deep in "
            f"{path.text}, excluding hidden items:\n" + "\n".join(lines)
        )
        if hidden and not path.parts:
            answer += (
                f"\n({len(hidden)} topic(s) not shown: no /memories path names them: "
                + ", ".join(repr(t) for t in hidden)
                + ")"
            )
        return answer

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        path = _parse(getattr(command, "path", None))
        text = _text(command, "file_text")
        topic = self._file_topic(path, "create")
        written = self.topics.write_if_unchanged(topic, text, expected=None)
        if written is None:
            raise ToolError(f"File {path.text} already exists")
        return f"File created successfully at: {path.text}" + self._notes(written, text)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        path = _parse(getattr(command, "path", None))
        old, new = _text(command, "old_str"), _text(command, "new_str")
        topic = self._existing_file(path)
        with self.topics.locked():
            content = self.topics.read(topic)
            if content is None:
                raise self._missing(path.text, view=True)
            count = content.count(old)
            if count == 0:
                raise ToolError(
                    f"No replacement was performed, old_str `{old}` did not appear "
                    f"verbatim in {path.text}."
                )
            if count > 1:
                lines: list[int] = []
                start = 0
                while (pos := content.find(old, start)) != -1:
                    lines.append(content[:pos].count("\n") + 1)
                    start = pos + 1
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` "
                    f"in lines: {', '.join(map(str, lines))}. Please ensure it is unique"
                )
            changed = content[: content.find(old)].count("\n")
            wanted = content.replace(old, new)
            written = self.topics.write(topic, wanted)
        new_lines = written.content.split("\n")
        first, end = max(0, changed - 2), min(len(new_lines), changed + 3)
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):\n"
            + _numbered(new_lines[first:end], first + 1)
            + self._notes(written, wanted)
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        path = _parse(getattr(command, "path", None))
        text = _text(command, "insert_text")
        line = getattr(command, "insert_line", None)
        if type(line) is not int:
            raise ToolError(f"`insert_line` must be an integer, got {type(line).__name__}")
        topic = self._existing_file(path)
        with self.topics.locked():
            content = self.topics.read(topic)
            if content is None:
                raise self._missing(path.text, view=True)
            lines = content.split("\n")
            if lines[-1] == "":
                lines.pop()
            if line < 0 or line > len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {line}. "
                    f"It should be within the range [0, {len(lines)}]."
                )
            lines.insert(line, text.rstrip("\n"))
            wanted = "\n".join(lines)
            if not wanted.endswith("\n"):
                wanted += "\n"
            written = self.topics.write(topic, wanted)
        return f"The file {path.text} has been edited." + self._notes(written, wanted)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        path = _parse(getattr(command, "path", None))
        if not path.parts:
            raise ToolError(f"Cannot delete the {MEMORIES} directory itself")
        if path.topic is not None:
            if not self.topics.delete(path.topic):
                raise self._missing(path.text)
            return f"Successfully deleted {path.text}"
        with self.topics.locked():
            inside = self._under(path)
            if not inside:
                raise self._missing(path.text)
            for topic in inside:
                self.topics.delete(topic)
        return f"Successfully deleted {path.text}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old = _parse(getattr(command, "old_path", None), "old_path")
        new = _parse(getattr(command, "new_path", None), "new_path")
        if not old.parts:
            raise ToolError(f"Cannot rename the {MEMORIES} directory itself")
        with self.topics.locked():
            if self._exists(new):
                raise ToolError(f"The destination {new.text} already exists")
            if old.topic is not None:
                if new.topic is None:
                    raise self._not_markdown(new.text, "rename a topic file to")
                content = self.topics.read(old.topic)
                if content is None:
                    raise self._missing(old.text)
                self.topics.write(new.topic, content)
                self.topics.delete(old.topic)
            else:
                if new.topic is not None:
                    raise _refuse(
                        new.text, f"a directory name cannot end in {SUFFIX} (that marks a file)"
                    )
                inside = self._under(old)
                if not inside:
                    raise self._missing(old.text)
                if new.prefix.startswith(old.prefix):
                    raise ToolError(f"Cannot move {old.text} into itself ({new.text})")
                moves = [(t, new.prefix + t[len(old.prefix) :]) for t in inside]
                for _, target in moves:  # every new name checked before anything moves
                    if path_of_topic(target) is None:
                        raise _refuse(
                            new.text,
                            f"the topic {target!r} it would hold is not allowed (too long?)",
                        )
                contents = [(target, self.topics.read(t)) for t, target in moves]
                for target, content in contents:
                    if content is not None:
                        self.topics.write(target, content)
                for topic, _ in moves:
                    self.topics.delete(topic)
        return f"Successfully renamed {old.text} to {new.text}"

    def clear_all_memory(self) -> str:
        """Delete every topic file (what the SDK's local tool does to its folder)."""
        with self.topics.locked():
            for info in self.topics.list():
                self.topics.delete(info.topic)
        return "All memory cleared"

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _missing(path: str, *, view: bool = False) -> ToolError:
        if view:
            return ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return ToolError(f"The path {path} does not exist")

    @staticmethod
    def _not_markdown(path: str, action: str) -> ToolError:
        last = path.rstrip("/").rsplit("/", 1)[-1]
        stem = last.rsplit(".", 1)[0] if "." in last else last
        suggestion = path.rstrip("/")[: -len(last) or None] + stem + SUFFIX
        return ToolError(
            f"Cannot {action} {path}: agentmem keeps memories as markdown topic files, "
            f"so a file name must end in {SUFFIX} (for example {suggestion})"
        )

    def _file_topic(self, path: _Path, action: str) -> str:
        if path.topic is None:
            raise self._not_markdown(path.text, action)
        return path.topic

    def _existing_file(self, path: _Path) -> str:
        """The topic of a path that must name an existing file (the SDK's checks)."""
        if path.topic is None:
            if self._exists(path):
                raise ToolError(f"The path {path.text} is not a file.")
            raise self._missing(path.text, view=True)
        return path.topic

    def _under(self, path: _Path) -> list[str]:
        """The topics (with a path) inside the directory ``path``."""
        return [
            info.topic
            for info in self.topics.list()
            if info.topic.startswith(path.prefix) and path_of_topic(info.topic) is not None
        ]

    def _exists(self, path: _Path) -> bool:
        if not path.parts:
            return True
        if path.topic is not None:
            return self.topics.read(path.topic) is not None
        return bool(self._under(path))

    def _notes(self, written: WriteResult, wanted: str) -> str:
        """What the store changed in the text, for the model to know."""
        if written.truncated:
            return (
                f" The content had {written.tokens_before} tokens, over the "
                f"{self.topics.max_tokens_per_file}-token limit of a memory file, and its "
                "end was cut off: view it, and write a shorter version if something "
                "important was lost."
            )
        if written.content != wanted:
            return (
                " Some of the text was changed before it was stored (text that looked "
                "like a secret was redacted): view the file to see what was kept."
            )
        return ""

    def _view_file(self, path: str, content: str, view_range: object) -> str:
        lines = content.split("\n")
        if len(lines) > MAX_LINES:
            raise ToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
        start = 1
        if view_range:
            given = view_range if isinstance(view_range, list) else [view_range]
            bounds: list[int] = [n for n in given if type(n) is int]
            if not isinstance(view_range, list) or len(bounds) != len(given):
                raise ToolError(f"`view_range` must be a list of two integers, got {view_range!r}")
            if len(bounds) == 2:  # as the SDK: any other length shows the whole file
                first = max(1, bounds[0]) - 1
                end = len(lines) if bounds[1] == -1 else bounds[1]
                lines, start = lines[first:end], first + 1
        return f"Here's the content of {path} with line numbers:\n" + _numbered(lines, start)


def _walk(level: dict[str, _Node], relative: str, depth: int) -> Iterator[tuple[str, _Node]]:
    """Entries up to two levels deep, by name, as the SDK's view lists them."""
    for name in sorted(level):
        node = level[name]
        here = f"{relative}/{name}" if relative else name
        if node.children is None:
            yield here, node
        else:
            yield here + "/", node
            if depth < 2:
                yield from _walk(node.children, here, depth + 1)


class AsyncAgentMemMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`AgentMemMemoryTool` for ``AsyncAnthropic``: each command runs in a thread.

    The store's calls block (file locks, fsync, a PostgreSQL round trip), so every
    command runs through :func:`asyncio.to_thread`; answers and errors are the
    synchronous tool's.
    """

    def __init__(
        self, memory: Memory, *, cache_control: BetaCacheControlEphemeralParam | None = None
    ) -> None:
        self.sync = AgentMemMemoryTool(memory, cache_control=cache_control)
        super().__init__(cache_control=cache_control)

    async def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        return await asyncio.to_thread(self.sync.execute, command)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await asyncio.to_thread(self.sync.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await asyncio.to_thread(self.sync.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await asyncio.to_thread(self.sync.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await asyncio.to_thread(self.sync.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await asyncio.to_thread(self.sync.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await asyncio.to_thread(self.sync.rename, command)

    async def clear_all_memory(self) -> str:
        return await asyncio.to_thread(self.sync.clear_all_memory)
