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
  interrupted write leaves no debris. A ``kill -9`` between create and
  rename can leave one ``.<name>.<host>-<pid>.<random>.tmp`` file: its name
  carries the writer's host and process id, and :func:`remove_stale_temps`
  (run by the stores when they open) deletes the ones whose writer, on this
  host, is no longer running. A temp file of a live writer is never touched.
* **A corrupt file is never overwritten.** :func:`move_aside` renames it to
  ``<name>.corrupt-<UTC timestamp>`` (adding ``-1``, ``-2``... when that
  name is taken) so a person can inspect or recover it, and the caller can
  start afresh under the original name.

* **Nothing is written outside the root.** :func:`check_inside` refuses,
  with :class:`~agentmem.errors.UnsafePathError`, a path that leaves the
  memory root or passes through a symbolic link *below* the root: every
  component from the root down is ``lstat``\\ ed, and any symlink is refused,
  whether it points outside or stays inside (one rule, no resolution races
  to reason about; the root itself may be a symlink, the host chose it). A
  NUL byte or an over-long name is refused the same way. Every writer calls
  it before it reads, creates, locks or replaces a file under the root
  (:func:`atomic_write_bytes` and :func:`make_dirs` take ``root=``, the
  lock helpers in :mod:`agentmem._storage.locks` check their lock file, the
  SQLite stores check the database and its companions on open). The check
  is made just before the operation: it stops links planted in the root,
  not a concurrent attacker racing the write.

What this module does not do: locking (callers that read-modify-write one
file take a ``filelock`` around the whole cycle) and durability of the data
inside SQLite databases (SQLite does its own syncing, see
:mod:`agentmem._storage.sqlite`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from agentmem.errors import CorruptStoreError, UnsafePathError

__all__ = [
    "SQLITE_COMPANIONS",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_inside",
    "check_path_text",
    "file_in",
    "fsync_directory",
    "make_dirs",
    "move_aside",
    "remove_stale_temps",
    "set_aside",
    "temp_tag",
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


def check_inside(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    key: str | None = None,
    what: str = "the memory root",
) -> Path:
    """``path``, checked to lie under ``root`` without passing through a symlink.

    Every component from ``root`` (exclusive) down to ``path`` (inclusive)
    that exists is ``lstat``\\ ed; the first one missing ends the walk (the
    caller creates the rest, see :func:`make_dirs`). ``..`` is resolved
    lexically first, so ``root/a/../../x`` is refused as outside.

    Args:
        root: The directory nothing may leave.
        path: The file or directory about to be read or written.
        key: How to name the path in the error (default: the path itself).
        what: How to name ``root`` in the error.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        UnsafePathError: the path leaves ``root``, passes through a symlink
            below it, contains a NUL byte, or has a component too long for the
            filesystem.
    """
    given = Path(path)
    label = key if key is not None else str(given)

    def refuse(reason: str) -> UnsafePathError:
        return UnsafePathError(label, Path(root), reason)

    try:
        top = Path(os.path.abspath(root))
        target = Path(os.path.abspath(given))
    except (ValueError, TypeError) as exc:  # NUL bytes, undecodable names
        raise refuse(f"not a usable path: {exc}") from exc
    if "\x00" in str(target) or "\x00" in str(top):
        raise refuse("contains a NUL byte")
    if target != top and not target.is_relative_to(top):
        raise refuse(f"lies outside {what}")
    current = top
    for part in target.relative_to(top).parts:
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        except NotADirectoryError:
            break  # the operation itself will report it
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise refuse("a name is too long for the filesystem") from exc
            break
        except ValueError as exc:
            raise refuse(f"not a usable path: {exc}") from exc
        if stat.S_ISLNK(info.st_mode):
            raise refuse(f"{current} is a symbolic link; agentmem follows none under {what}")
    return given


def check_path_text(path: object, *, root: str | os.PathLike[str]) -> None:
    """Refuse a path the operating system would reject with a raw error, before any use.

    A NUL byte, a name that cannot be encoded for the filesystem (a lone
    surrogate), a component longer than the filesystem allows (``NAME_MAX``,
    255 bytes where it cannot be asked) or a whole path over ``PATH_MAX``
    (4096 bytes) raises :class:`UnsafePathError` naming ``root``, instead of
    the ``ValueError``/``OSError`` a later ``stat`` or ``open`` would raise.
    Anything that is not ``str``/``os.PathLike`` is left to the caller.
    """
    if not isinstance(path, str | os.PathLike):
        return
    try:
        text = os.fspath(path)
    except TypeError:
        return
    if isinstance(text, bytes):
        return
    label = text if "\x00" not in text else text.replace("\x00", "\\x00")
    if "\x00" in text:
        raise UnsafePathError(label, Path(root), "contains a NUL byte")
    try:
        encoded = os.fsencode(text)
    except UnicodeError as exc:
        raise UnsafePathError(label, Path(root), f"cannot be encoded: {exc}") from exc
    try:
        name_max = os.pathconf(root, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        name_max = 255
    if any(len(part) > name_max for part in encoded.split(os.fsencode(os.sep))):
        raise UnsafePathError(label[:80], Path(root), f"a name is longer than {name_max} bytes")
    if len(encoded) > 4096:
        raise UnsafePathError(label[:80], Path(root), "longer than 4096 bytes")


def make_dirs(root: str | os.PathLike[str], directory: str | os.PathLike[str]) -> Path:
    """Create ``directory`` (and its parents) under ``root``, refusing symlinks on the way.

    Raises:
        UnsafePathError: see :func:`check_inside` (checked before and after creating).
        OSError: the directory could not be created.
    """
    path = check_inside(root, directory)
    path.mkdir(parents=True, exist_ok=True)
    return check_inside(root, path)


def file_in(directory: Path, name: str, root: Path | None, *, key: str, what: str) -> Path:
    """``directory / name``, checked to sit directly in ``directory`` with no symlink
    between ``root`` (default: ``directory``) and the file (:func:`check_inside`).

    Raises:
        UnsafePathError: naming ``key``: the path leads outside ``what`` (such as
            ``"the notes directory"``) or passes through a symlink.
    """
    path = directory / name
    top = root if root is not None else directory
    if path.parent != directory or Path(name).name != name:
        raise UnsafePathError(key, directory, f"resolves outside {what}")
    check_inside(top, directory, key=key, what=what)
    return check_inside(top, path, key=key, what=what)


_HOST = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
"""This host in temp-file names: a pid only means something on the host that issued it."""
_TEMP = re.compile(r"^\..+\.(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)\.[0-9a-f]{12}\.tmp$")


def _pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (when unsure: yes)."""
    if pid == os.getpid():
        return True  # another thread of this process may be writing it
    if os.name != "posix" or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, another user's
        return True
    return True


def remove_stale_temps(
    directory: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> list[Path]:
    """Delete the temp files of :func:`atomic_write_bytes` whose writer is gone.

    A temp file is removed only when its name says it was made on this host
    by a process that is no longer running (a ``kill -9`` between create and
    rename). A live writer's temp file, another host's, and every file not
    named like ours are left alone. Never raises for a file it cannot
    remove; a missing or unsafe directory (see :func:`check_inside`, with
    ``root``) is skipped.

    Returns:
        The files removed.
    """
    folder = Path(directory)
    removed: list[Path] = []
    try:
        if root is not None:
            check_inside(root, folder)
        names = os.listdir(folder)
    except (OSError, UnsafePathError):
        return removed
    for name in names:
        match = _TEMP.match(name)
        if match is None or match["host"] != _HOST or _pid_alive(int(match["pid"])):
            continue
        path = folder / name
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
                removed.append(path)
    if removed:
        fsync_directory(folder)
    return removed


def temp_tag() -> str:
    """``<host>-<pid>.<random>``: the part of a temp file's name that says who wrote it
    (what :func:`remove_stale_temps` reads). Writers that create their own temp files
    name them ``.<name>.<temp_tag()>.tmp``."""
    return f"{_HOST}-{os.getpid()}.{secrets.token_hex(6)}"


def _create_temp(target: Path) -> tuple[int, str]:
    """Create ``.<name>.<host>-<pid>.<random>.tmp`` beside ``target``.

    Unlike :func:`tempfile.mkstemp` (always 0600) the file gets the mode a
    plain ``open()`` would give it (0666 minus the umask), or the mode of
    the file it replaces, so an atomic write does not change permissions.
    """
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        name = str(target.with_name(f".{target.name}.{temp_tag()}.tmp"))
        try:
            fd = os.open(name, flags, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(name, mode)
        return fd, name
    raise FileExistsError(f"could not create a temporary file beside {target}")


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, root: str | os.PathLike[str] | None = None
) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    Args:
        path: The file to write. Its directory must exist.
        data: The complete new content.
        root: When given, ``path`` must lie under it with no symlink on the way
            (:func:`check_inside`).

    Raises:
        UnsafePathError: ``path`` fails the ``root`` check; nothing was written.
        OSError: the file could not be written; ``path`` is unchanged and no
            temporary file is left behind.
    """
    target = Path(path) if root is None else check_inside(root, path)
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


def atomic_write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    encoding: str = "utf-8",
    root: str | os.PathLike[str] | None = None,
) -> None:
    """Replace ``path`` with ``text`` atomically and durably (see :func:`atomic_write_bytes`).

    Args:
        path: The file to write. Its directory must exist.
        text: The complete new content; written without newline translation.
        encoding: Text encoding, UTF-8 unless told otherwise.
        root: See :func:`atomic_write_bytes`.

    Raises:
        UnsafePathError: ``path`` fails the ``root`` check.
        OSError: the file could not be written; ``path`` is unchanged.
        UnicodeEncodeError: ``text`` cannot be encoded; nothing was written.
    """
    atomic_write_bytes(path, text.encode(encoding), root=root)


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
