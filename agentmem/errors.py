"""Every error agentmem raises on purpose.

One root, :class:`AgentMemError`, so a host can catch everything the library
raises deliberately with one ``except``. Errors caused by bad input also
derive from :class:`ValueError` (and path errors from :class:`OSError` where
the operating system is involved) so code written against the builtins keeps
working. Errors carry structured attributes (``.index``, ``.field``,
``.path``) rather than only a message, and chain the low-level cause with
``raise ... from exc``.

The tree::

    AgentMemError
    ├── InvalidMessageError        (ValueError)  a message failed validation
    ├── InvalidArgumentError       (ValueError)  a bad argument to a public call
    ├── UnsafePathError            (ValueError)  a path escapes the working directory
    ├── ConfigurationError         (ValueError)  a bad Memory/session/ContextSettings setting
    ├── ContextOverflowError                     the minimum payload cannot fit the window
    ├── SessionNotFoundError       (KeyError)    no session with that id
    ├── MemoryNotFoundError        (KeyError)    no semantic memory with that id
    ├── ScriptExhaustedError       (AssertionError) a ScriptedLLM (agentmem.testing) ran out
    ├── LLMError                                 an LLM call could not be made or its reply used
    ├── RemoteMemoryError                        a memory server (mem0) refused, failed or timed out
    ├── StaleTaskError                           a task handle wrote after its task was left
    └── StorageError               (OSError)     a store could not be read or written
        ├── CorruptStoreError                    unreadable data, moved aside
        ├── StoreLockedError                     another process holds the store
        ├── SessionClosedError                   a write to a closed session (or its history)
        ├── RestoreError                         a time-machine restore refused (or rolled back)
        └── FormatVersionError   (+InvalidArgumentError) stored data in a format version
                                                 this release cannot read (a newer agentmem)

Nothing here shadows a builtin name (no ``MemoryError``, no ``TimeoutError``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AgentMemError",
    "ConfigurationError",
    "ContextOverflowError",
    "CorruptStoreError",
    "FormatVersionError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "LLMError",
    "MemoryNotFoundError",
    "RemoteMemoryError",
    "RestoreError",
    "ScriptExhaustedError",
    "SessionClosedError",
    "SessionNotFoundError",
    "StaleTaskError",
    "StorageError",
    "StoreLockedError",
    "UnsafePathError",
]


class AgentMemError(Exception):
    """Root of every error agentmem raises deliberately."""


class InvalidMessageError(AgentMemError, ValueError):
    """A message could not be accepted.

    Attributes:
        index: Position the offending message has (or would have) in the
            history it is added to (for a message checked on its own, its
            position in the batch given), or ``None`` when not applicable.
        field: Dotted path of the offending field inside the message, for
            example ``"tool_calls[0].function.arguments"``.
        reason: Human-readable explanation, without the location prefix.
    """

    def __init__(self, reason: str, *, index: int | None = None, field: str | None = None) -> None:
        self.index = index
        self.field = field
        self.reason = reason
        where = []
        if index is not None:
            where.append(f"message {index}")
        if field:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


class InvalidArgumentError(AgentMemError, ValueError):
    """A public call received an argument it cannot use (wrong provider name, bad index...)."""


class ConfigurationError(AgentMemError, ValueError):
    """A setting that cannot be used: the wrong type, out of range, or contradicting another.

    Raised for the arguments that configure agentmem rather than feed it
    data: ``Memory(...)`` (paths, flags, ``durability``, components that do
    not have their protocol's shape, ``context`` settings) and
    ``Memory.session(model=..., context_window=...)``. The message names the
    argument (``context.trim_target`` for a settings field).
    """


class ContextOverflowError(AgentMemError):
    """Even the smallest payload (system prompt, anchor, newest unit) cannot fit the window.

    Raised instead of returning a payload the provider would reject. Usually
    the system prompt plus injections is larger than ``context_window``.

    Attributes:
        needed: Tokens the minimal payload costs.
        window: The context window it had to fit.
    """

    def __init__(self, message: str, *, needed: int, window: int) -> None:
        self.needed = needed
        self.window = window
        super().__init__(message)


class SessionNotFoundError(AgentMemError, KeyError):
    """No session with the given id exists in the store.

    Attributes:
        session_id: The id that was asked for.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(session_id)

    def __str__(self) -> str:
        return f"no session with id {self.session_id!r}"


class MemoryNotFoundError(AgentMemError, KeyError):
    """No semantic memory with the given id exists (:mod:`agentmem.semantic`).

    Attributes:
        memory_id: The id that was asked for.
    """

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(memory_id)

    def __str__(self) -> str:
        return f"no memory with id {self.memory_id!r}"


class ScriptExhaustedError(AgentMemError, AssertionError):
    """A :class:`~agentmem.testing.ScriptedLLM` was called more often than it has replies.

    Also raised by ``ScriptedLLM.assert_complete`` when replies were left
    unused. An :class:`AssertionError` so test runners report it as a
    failed expectation; importable from ``agentmem.testing`` as well.
    """


class LLMError(AgentMemError):
    """An LLM call could not be made or its reply could not be used.

    Raised when a synchronous entry point is handed an async LLM (use the
    ``a``-prefixed twin), or when a reply is not an OpenAI-format assistant
    message. Errors the host's LLM raises itself are not wrapped.
    """


class RemoteMemoryError(AgentMemError):
    """A memory server (a mem0 server behind :class:`~agentmem.semantic.Mem0Client`) failed.

    Raised instead of any ``urllib``/``socket`` error. ``kind`` says what
    happened: ``"http"`` (the server answered with an error status; a 4xx is
    never retried, a 5xx only after the retries ran out), ``"timeout"`` (no
    answer within the client's timeout), ``"unreachable"`` (no connection)
    or ``"bad_response"`` (an answer that is not the JSON expected).

    Attributes:
        status: The HTTP status, or ``None`` when there was no HTTP answer.
        kind: ``"http"``, ``"timeout"``, ``"unreachable"`` or ``"bad_response"``.
        detail: The server's own message (its ``detail`` field) when it sent one.
        url: The URL that was called.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        status: int | None = None,
        detail: str | None = None,
        url: str | None = None,
    ) -> None:
        self.kind = kind
        self.status = status
        self.detail = detail
        self.url = url
        super().__init__(message)


class StaleTaskError(AgentMemError):
    """A write through a task handle after another task became the active one.

    Raised by :meth:`agentmem.tasks.TaskHandle.append` (and ``check``) once
    ``start_task``, ``undo`` or ``switch_to_task`` made another task active
    (or ran at all) after the handle was taken. Nothing was written: the
    writer's task is no longer the one being worked on.

    Attributes:
        task_id: The handle's task (``None``: the initial state).
        active_task_id: The task active when the write was refused.
    """

    def __init__(self, task_id: int | None, active_task_id: int | None) -> None:
        self.task_id = task_id
        self.active_task_id = active_task_id
        super().__init__(
            f"task {task_id} is no longer the active task (now {active_task_id}, or the "
            "same task after an undo/switch): a handle taken for it cannot write any more"
        )


class UnsafePathError(AgentMemError, ValueError):
    """A path points outside the directory agentmem is allowed to touch.

    Attributes:
        path: The path as given.
        root: The directory it had to stay inside.
    """

    def __init__(self, path: str | Path, root: str | Path, reason: str = "") -> None:
        self.path = Path(path)
        self.root = Path(root)
        detail = f" ({reason})" if reason else ""
        super().__init__(f"refusing path {str(path)!r}: outside {str(root)!r}{detail}")


class StorageError(AgentMemError, OSError):
    """A store could not be read or written.

    Attributes:
        path: The file or database involved, when there is one.
    """

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        super().__init__(message)

    def __str__(self) -> str:
        # OSError.__str__ would render errno-style tuples; keep the plain message.
        return str(self.args[0]) if self.args else ""


class CorruptStoreError(StorageError):
    """Stored data could not be parsed. It was moved aside, never overwritten.

    Attributes:
        path: The file that could not be parsed (its original location).
        moved_to: Where the unreadable file now lives, or ``None`` when it
            was left in place because moving it failed.
    """

    def __init__(
        self, message: str, *, path: str | Path | None = None, moved_to: str | Path | None = None
    ) -> None:
        super().__init__(message, path=path)
        self.moved_to = Path(moved_to) if moved_to is not None else None


class StoreLockedError(StorageError):
    """Another process (or another object in this process) holds an exclusive lock."""


class SessionClosedError(StorageError):
    """A call reached a session (its history, writer or facade) after it was closed.

    Nothing was changed: a closed session no longer holds its lock, so a
    write would race the session's next owner.
    """


class FormatVersionError(StorageError, InvalidArgumentError):
    """Stored data carries a format version this release cannot read.

    Raised for data written by a newer agentmem (or a malformed version
    field); the data is left untouched. Upgrade agentmem to read it. It is
    also an :class:`InvalidArgumentError`, which earlier releases raised
    here, so existing ``except`` clauses keep working.

    Attributes:
        found: The version found, when it is an integer.
        supported: The newest version this release reads.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        found: int | None = None,
        supported: int | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.found = found
        self.supported = supported


class RestoreError(StorageError):
    """The time machine could not restore a task's files.

    Every target is checked before any file changes, so most refusals leave
    the files, the snapshot store and the task tree unchanged (a snapshot is
    missing or damaged, a path would be written through a symlink leading
    out of the working directory, a directory stands where a file goes, a
    directory is not writable). A step that still fails half-way is rolled
    back; the message and :attr:`outcome` say which happened.

    Attributes:
        outcome: ``"unchanged"`` (refused before any change), ``"rolled
            back"`` (failed half-way; what it changed was put back) or
            ``"pending"`` (failed half-way and could not be put back: the next
            open of the session, or the next undo/switch, finishes the restore
            or rolls it back).
    """

    def __init__(
        self, message: str, *, path: str | Path | None = None, outcome: str = "unchanged"
    ) -> None:
        super().__init__(message, path=path)
        self.outcome = outcome
