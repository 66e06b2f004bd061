"""Holding a cross-process file lock around one read-modify-write cycle.

Stores whose file is shared by many processes (``ltm.json``, the notes
directory) run each change as lock -> re-read -> apply -> atomic replace
(DESIGN section 8). :func:`held_lock` is that lock: a :mod:`filelock` on a
file under the root's ``locks/`` directory, held for the ``with`` block,
with a bounded wait and agentmem errors instead of ``filelock.Timeout`` or
``OSError``. The operating system drops the lock when its process dies, so
a killed writer never blocks the others.

Every agentmem lock file lives in ``<root>/locks/``; the lock file and its
directory are checked with :func:`~agentmem._storage.files.check_inside`
against that root before the lock is taken (``filelock`` opens the file
with ``O_CREAT | O_TRUNC``, which would follow a planted symlink and
truncate whatever it points at), so a symlinked ``locks/`` raises
:class:`~agentmem.errors.UnsafePathError`.

It is not re-entrant across calls (each call opens its own lock file
handle). :class:`StoreLock` is the lock of one store object: re-entrant
within it, and it tells whether the object holds it (only a holder may move
an unreadable file aside).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import filelock

from agentmem._storage.files import check_inside, make_dirs
from agentmem.errors import StorageError, StoreLockedError

__all__ = ["DEFAULT_LOCK_TIMEOUT", "StoreLock", "held_lock"]

DEFAULT_LOCK_TIMEOUT = 60.0


@contextmanager
def held_lock(
    path: str | os.PathLike[str],
    *,
    what: str,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
    root: str | os.PathLike[str] | None = None,
) -> Iterator[None]:
    """Hold the file lock at ``path`` (its directory is created) for the ``with`` block.

    Args:
        path: The lock file.
        what: What the lock protects, for error messages ("long-term memory").
        timeout: Seconds to wait for another holder before giving up.
        root: The memory root the lock file must stay under without a symlink
            (default: the parent of the lock's directory, ``<root>/locks/x.lock``).

    Raises:
        UnsafePathError: the lock file or its directory is (behind) a symlink.
        StoreLockedError: another holder kept it for more than ``timeout`` seconds.
        StorageError: the lock file could not be created or locked.
    """
    lock_path = Path(path)
    top = Path(root) if root is not None else lock_path.parent.parent
    try:
        make_dirs(top, lock_path.parent)
        check_inside(top, lock_path)
        lock = filelock.FileLock(str(lock_path), timeout=timeout, thread_local=False)
        lock.acquire()
    except filelock.Timeout as exc:
        raise StoreLockedError(
            f"{what}: lock {lock_path} held elsewhere for over {timeout:.0f} s", path=lock_path
        ) from exc
    except OSError as exc:
        raise StorageError(
            f"{what}: cannot lock {lock_path}: {exc.strerror or exc}", path=lock_path
        ) from exc
    try:
        yield
    finally:
        lock.release()


class StoreLock:
    """The file lock of one store object (:func:`held_lock`), re-entrant within that object.

    Calling it gives a context manager that holds the lock; inside a block that
    already holds it, it does nothing. :attr:`held` says whether this object
    holds it now. With ``path`` ``None`` (an in-memory store) it never locks
    and is never held. Not thread-aware: the store serialises its threads first.

    Args:
        path: The lock file, or ``None``.
        what: What the lock protects, for error messages.
        timeout: Seconds to wait for another holder.
        root: See :func:`held_lock`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        what: str,
        timeout: float = DEFAULT_LOCK_TIMEOUT,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.held = False
        self._what = what
        self._timeout = timeout
        self._root = root

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self.path is None or self.held:
            yield
            return
        with held_lock(self.path, what=self._what, timeout=self._timeout, root=self._root):
            self.held = True
            try:
                yield
            finally:
                self.held = False
