"""Atomic file writes and moving unreadable files aside.

Two rules from DESIGN section 8 live here, so every store follows them the
same way:

* **Every file write is atomic.** :func:`atomic_write_bytes` writes to a
  temporary file in the *same directory* (so the final rename never crosses
  a filesystem), flushes and ``fsync``\\ s it, ``os.replace``\\ s it over the
  target and then ``fsync``\\ s the directory so the rename itself is on disk.
  A reader sees the old content or the new content, never a mix, whatever
  instant the process dies at. The temporary file is removed on any
  :class:`BaseException` (including ``KeyboardInterrupt``), so an
  interrupted write leaves no debris; a ``kill -9`` between create and
  rename can leave one ``.<name>.*.tmp`` file, which is harmless.
* **A corrupt file is never overwritten.** :func:`move_aside` renames it to
  ``<name>.corrupt-<UTC timestamp>`` (adding ``-1``, ``-2``... when that
  name is taken) so a person can inspect or recover it, and the caller can
  start afresh under the original name.

What this module does not do: locking (callers that read-modify-write one
file take a ``filelock`` around the whole cycle) and durability of the data
inside SQLite databases (SQLite does its own syncing, see
:mod:`agentmem._storage.sqlite`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from agentmem.errors import CorruptStoreError, UnsafePathError

__all__ = [
    "SQLITE_COMPANIONS",
    "atomic_write_bytes",
    "atomic_write_text",
    "file_in",
    "fsync_directory",
    "move_aside",
    "set_aside",
]

SQLITE_COMPANIONS: tuple[str, ...] = ("-wal", "-shm", "-journal")
"""Suffixes of the files SQLite keeps beside a database (write-ahead log, shared memory, rollback
journal). They belong to the database and move with it."""


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Flush a directory entry change (create, rename, unlink) to disk.

    A no-op on platforms that cannot open a directory (Windows), where
    ``os.replace`` is already durable enough for our purposes.

    Args:
        directory: The directory whose entries changed.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            # Some filesystems refuse fsync on a directory (EINVAL); the rename still happened.
            os.fsync(fd)
    finally:
        os.close(fd)


def file_in(directory: Path, name: str, root: Path | None, *, key: str, what: str) -> Path:
    """``directory / name``, checked to sit directly in ``directory`` once symlinks are
    resolved, with ``directory`` itself inside ``root`` (default: ``directory``).

    Raises:
        UnsafePathError: naming ``key``: the path cannot be resolved, or it leads
            outside ``what`` (such as ``"the notes directory"``).
    """
    path = directory / name
    try:
        base = directory.resolve()
        resolved = path.resolve()
        top = root.resolve() if root is not None else base
    except (OSError, RuntimeError) as exc:
        raise UnsafePathError(key, directory, f"cannot resolve: {exc}") from exc
    if resolved.parent != base or not base.is_relative_to(top):
        raise UnsafePathError(key, directory, f"resolves outside {what}")
    return path


def _create_temp(target: Path) -> tuple[int, str]:
    """Create ``.<name>.<random>.tmp`` beside ``target``.

    Unlike :func:`tempfile.mkstemp` (always 0600) the file gets the mode a
    plain ``open()`` would give it (0666 minus the umask), or the mode of
    the file it replaces, so an atomic write does not change permissions.
    """
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = str(target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp"))
        try:
            fd = os.open(name, flags, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(name, mode)
        return fd, name
    raise FileExistsError(f"could not create a temporary file beside {target}")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Args:
        path: The file to write. Its directory must exist.
        data: The complete new content.

    Raises:
        OSError: the file could not be written; ``path`` is unchanged and no
            temporary file is left behind.
    """
    target = Path(path)
    directory = target.parent
    fd, tmp_name = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_directory(directory)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> None:
    """Replace ``path`` with ``text`` atomically and durably (see :func:`atomic_write_bytes`).

    Args:
        path: The file to write. Its directory must exist.
        text: The complete new content; written without newline translation.
        encoding: Text encoding, UTF-8 unless told otherwise.

    Raises:
        OSError: the file could not be written; ``path`` is unchanged.
        UnicodeEncodeError: ``text`` cannot be encoded; nothing was written.
    """
    atomic_write_bytes(path, text.encode(encoding))


def _aside_name(path: Path, stamp: str, counter: int) -> Path:
    suffix = f".corrupt-{stamp}" if counter == 0 else f".corrupt-{stamp}-{counter}"
    return path.with_name(path.name + suffix)


def _taken(candidate: Path, companions: Sequence[str]) -> bool:
    return any(os.path.lexists(candidate.with_name(candidate.name + s)) for s in ("", *companions))


def move_aside(
    path: str | os.PathLike[str],
    *,
    companions: Sequence[str] = (),
    now: float | None = None,
) -> Path:
    """Rename an unreadable file to ``<name>.corrupt-<YYYYmmddTHHMMSSZ>`` and return the new path.

    The file is renamed, never copied or rewritten, so its bytes are exactly
    what was found. When the timestamped name is taken a counter is added
    (``...Z-1``, ``...Z-2``). Companion files (``path + suffix`` for each
    suffix in ``companions``, for example SQLite's ``-wal`` and ``-shm``)
    that exist are moved to ``new_path + suffix`` so they stay paired with
    their main file.

    Args:
        path: The file to move. It must exist.
        companions: Suffixes of companion files to move along, for example
            :data:`SQLITE_COMPANIONS`.
        now: The time to stamp (epoch seconds); the current time when ``None``.

    Returns:
        The path the file now lives at.

    Raises:
        OSError: the file or a companion could not be renamed; whatever had
            moved is moved back, so the files stay together where they were.
    """
    source = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    counter = 0
    target = _aside_name(source, stamp, counter)
    while _taken(target, companions):
        counter += 1
        target = _aside_name(source, stamp, counter)
    # All or nothing: a stale write-ahead log left beside a fresh database under the old name
    # would be replayed into it, so if any companion cannot follow, everything moves back.
    moved: list[tuple[Path, Path]] = []
    try:
        for suffix in ("", *companions):
            origin = source.with_name(source.name + suffix)
            if suffix and not os.path.lexists(origin):
                continue
            destination = target.with_name(target.name + suffix)
            os.rename(origin, destination)
            moved.append((origin, destination))
    except BaseException:
        for origin, destination in reversed(moved):
            with contextlib.suppress(OSError):
                os.rename(destination, origin)
        raise
    finally:
        fsync_directory(source.parent)
    return target


def set_aside(
    path: str | os.PathLike[str], *, what: str, reason: str, logger: logging.Logger
) -> tuple[Path, str]:
    """Move an unreadable file aside (:func:`move_aside`) and report it on ``logger``.

    The one "move it aside and say so" step of the JSON stores (long-term
    memory, notes, the time machine's records); each keeps the returned
    message and path on its own attributes.

    Args:
        path: The unreadable file.
        what: How to name it in messages ("long-term memory /x/ltm.json").
        reason: Why it is unreadable.
        logger: Where the warning goes.

    Returns:
        Where the file now lives, and the warning that was logged.

    Raises:
        CorruptStoreError: the file could not be moved aside (it is left where it was).
    """
    source = Path(path)
    try:
        moved = move_aside(source)
    except OSError as exc:
        raise CorruptStoreError(
            f"{what} is unreadable ({reason}) and could not be moved aside: {exc}", path=source
        ) from exc
    message = f"{what} is unreadable ({reason}); moved aside to {moved}"
    logger.warning(message)
    return moved, message
