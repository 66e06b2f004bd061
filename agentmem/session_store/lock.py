"""SessionLock: one agent per session, across processes (and hosts, on PostgreSQL)."""

from __future__ import annotations

import builtins
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Protocol

import filelock

from agentmem._storage.files import check_inside, make_dirs
from agentmem.errors import StorageError, StoreLockedError

__all__ = ["ExternalLock", "SessionLock"]


class ExternalLock(Protocol):
    """A lock kept outside the file system (a PostgreSQL advisory lock) for a SessionLock."""

    def try_acquire(self) -> bool:
        """Take it without waiting; ``False`` when another holder has it."""
        ...

    def release(self) -> None:
        """Release it (idempotent)."""
        ...


class SessionLock:
    """An exclusive, cross-process lock on one session.

    Obtained from :meth:`SessionStore.lock`, which acquires it. On disk it is
    an ``flock`` on ``<store dir>/locks/<id>.lock`` (via :mod:`filelock`),
    which the kernel drops when the holding process exits or is killed, so
    a crashed agent never wedges its session. For in-memory stores it is an
    entry in the store's set of held ids. On PostgreSQL it is an ``external``
    lock (an advisory lock on its own connection, which the server drops when
    that connection ends: :class:`agentmem._storage.postgres.AdvisoryLock`).
    Two locks on one id conflict even inside one process (two objects each
    think they own the session).

    Acquisition never waits: a held lock raises
    :class:`~agentmem.errors.StoreLockedError` at once. ``release()`` is
    idempotent, and a released lock can be acquired again.
    """

    def __init__(
        self,
        session_id: str,
        *,
        path: Path | None,
        held: builtins.set[str],
        guard: threading.Lock,
        external: ExternalLock | None = None,
    ) -> None:
        self._session_id = session_id
        self._path = path
        self._external = external
        self._held = held
        self._guard = guard
        self._file_lock = (
            filelock.FileLock(str(path), timeout=0, thread_local=False)
            if path is not None
            else None
        )
        self._locked = False

    @property
    def session_id(self) -> str:
        """The locked session's id."""
        return self._session_id

    @property
    def path(self) -> Path | None:
        """The lock file, or ``None`` for an in-memory store."""
        return self._path

    @property
    def locked(self) -> bool:
        """Whether this object currently holds the lock."""
        return self._locked

    def acquire(self) -> SessionLock:
        """Take the lock, without waiting. Does nothing when this object already holds it.

        Returns:
            ``self``.

        Raises:
            StoreLockedError: another process or object holds the lock.
            StorageError: the lock file could not be created.
        """
        with self._guard:
            if self._locked:
                return self
            if self._external is not None:
                if not self._external.try_acquire():
                    raise self._locked_error()
            elif self._file_lock is None:
                if self._session_id in self._held:
                    raise self._locked_error()
                self._held.add(self._session_id)
            else:
                assert self._path is not None
                root = self._path.parent.parent  # <root>/locks/<id>.lock: no symlink on the way
                make_dirs(root, self._path.parent)
                check_inside(root, self._path)
                self._acquire_file()
            self._locked = True
            return self

    def _acquire_file(self) -> None:
        """``flock`` the lock file, and make sure it is still the file at the path.

        A delete removes the lock file while holding it (:meth:`discard`). An
        acquirer that opened that file just before could lock it just after
        the release, while a third party locks a fresh file at the same path:
        two holders. So the path is looked at before and after: when it is gone
        or is another file, the lock taken is released and taken again.
        """
        assert self._file_lock is not None
        assert self._path is not None
        for _ in range(3):
            before = _identity(self._path)
            try:
                self._file_lock.acquire(timeout=0)
            except filelock.Timeout:
                raise self._locked_error() from None
            except OSError as exc:
                raise StorageError(
                    f"cannot lock session {self._session_id}: {exc}", path=self._path
                ) from exc
            after = _identity(self._path)
            if after is not None and before in (None, after):
                return
            self._file_lock.release(force=True)
        raise self._locked_error()

    def release(self) -> None:
        """Release the lock; does nothing when it is not held."""
        with self._guard:
            if not self._locked:
                return
            if self._external is not None:
                self._external.release()
            elif self._file_lock is None:
                self._held.discard(self._session_id)
            else:
                self._file_lock.release(force=True)
            self._locked = False

    def discard(self) -> None:
        """Release the lock and remove its lock file (the session is gone or never was).

        The file goes while the lock is still held, so no other holder uses it.

        Raises:
            StorageError: the file could not be removed (the lock is released anyway).
        """
        try:
            if self._locked and self._path is not None:
                try:
                    self._path.unlink(missing_ok=True)
                except OSError as exc:
                    raise StorageError(
                        f"cannot remove the lock file of session {self._session_id}: {exc}",
                        path=self._path,
                    ) from exc
        finally:
            self.release()

    def _locked_error(self) -> StoreLockedError:
        elsewhere = "process, host or object" if self._external else "process or object"
        return StoreLockedError(
            f"session {self._session_id} is already open in another {elsewhere}",
            path=self._path,
        )

    def __enter__(self) -> SessionLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "locked" if self._locked else "unlocked"
        return f"<SessionLock {self._session_id!r} {state}>"


def _identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of the file at ``path``, or ``None`` when there is none."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino
