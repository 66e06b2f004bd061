"""Reading a SQLite write-ahead log by hand, to tell a damaged log from a healthy one.

SQLite replays a ``-wal`` file up to the first frame whose salt or
checksum does not match and silently ignores everything after it, and it
deletes a log that sits beside an empty or missing database. Either way
acknowledged commits vanish without a word. :func:`inspect_wal` reads the
log the way SQLite does (format: https://www.sqlite.org/fileformat.html,
section 4) and says whether something was written that SQLite would drop:

* a log without a main database beside it (or beside an empty file);
* a log whose header is damaged while frames follow it;
* an intact commit frame of the current generation (its salts match the
  header, and its checksum holds when continued from the checksum stored
  in the frame before it) *after* the point where SQLite stops replaying:
  that commit was acknowledged, and SQLite would drop it;
* a log shorter than the wal-index (``-shm``) says it is: a commit
  advances the index's ``mxFrame`` only once its frames are written (and,
  with ``synchronous=FULL``, synced), so when a trusted index of the same
  generation counts more frames than the log's valid prefix holds, the log
  was cut (truncated, or its tail damaged) and committed frames are gone;
  likewise an empty or missing log while the index counts committed frames
  that no checkpoint copied into the main file.

Frames of an earlier generation (other salts, left behind when the log
restarted), the uncommitted frames of a transaction cut short by a kill
(SQLite writes a frame's header and its page separately, so a kill can
leave a header without its page), and the leftovers of such a
transaction that a later one overwrote in part are normal and not
reported. What this cannot see: damage to (or loss of) the last commits
of the log when no trusted ``-shm`` vouches for them (the index is
deleted on a clean close, and a kill between writing a commit and
updating the index leaves it behind); a torn last frame that was never
acknowledged looks the same.

Cost: the checksum chain is computed in Python over every frame, about
0.1 ms per 4 KiB frame (the ``-shm`` adds a 100-byte read). It runs only
when no other process has the database open, and finds a log only after a
crash; a clean close checkpoints and deletes the log.
"""

from __future__ import annotations

import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "WalIndex",
    "WalReport",
    "inspect_wal",
    "read_wal_index",
    "rebuild_wal",
    "wal_page_image",
]

_MAGIC_LE: Final = 0x377F0682
_MAGIC_BE: Final = 0x377F0683
_HEADER: Final = 32
_FRAME_HEADER: Final = 24
_MASK: Final = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class WalReport:
    """What :func:`inspect_wal` found."""

    problem: str | None
    """Why the log would lose data if SQLite opened it, or ``None``."""
    valid_bytes: int
    """Length of the prefix SQLite would replay (header + frames up to the last valid commit)."""
    page_size: int
    """The log's page size (0 when the header is unreadable)."""
    index_frames: int = 0
    """Committed frames the trusted wal-index (``-shm``) counts when the log's valid prefix
    holds fewer (the log was cut); 0 otherwise."""


def _checksum(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big_endian else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & _MASK
        s1 = (s1 + words[i + 1] + s0) & _MASK
    return s0, s1


def inspect_wal(path: Path) -> WalReport | None:
    """Inspect ``<path>-wal``; ``None`` when there is no log (or an empty one) to worry about.

    Args:
        path: The main database file.

    Raises:
        OSError: the log exists but cannot be read.
    """
    wal = path.with_name(path.name + "-wal")
    try:
        data: bytes | None = wal.read_bytes()
    except FileNotFoundError:
        data = None
    if not data:
        # No log, or an empty one, is normal (a clean close checkpoints every frame before it
        # deletes the log; a TRUNCATE checkpoint empties the index first), unless a trusted
        # wal-index still counts committed frames the main file does not hold.
        index = read_wal_index(path, None)
        if index is None or index.mx_frame <= index.backfilled:
            return None
        lost = index.mx_frame - index.backfilled
        return WalReport(
            f"write-ahead log is {'empty' if data is not None else 'missing'} but its "
            f"wal-index (-shm) counts {index.mx_frame} committed frames: {lost} committed "
            f"frame{'' if lost == 1 else 's'} lost",
            0,
            0,
            index.mx_frame,
        )
    try:
        main_size = os.path.getsize(path)
    except FileNotFoundError:
        main_size = 0
    orphan = main_size == 0
    if len(data) < _HEADER:
        return WalReport(f"write-ahead log truncated to {len(data)} bytes", 0, 0)
    magic, version, page_size, _, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:_HEADER])
    big_endian = magic == _MAGIC_BE
    header_ok = (
        magic in (_MAGIC_LE, _MAGIC_BE)
        and version == 3007000
        and 512 <= page_size <= 65536
        and page_size & (page_size - 1) == 0
        and _checksum(data[:24], 0, 0, big_endian) == (c1, c2)
    )
    if not header_ok:
        problem = "write-ahead log header is damaged"
        if orphan:
            problem = "write-ahead log without its database, and its header is damaged"
        return WalReport(problem if len(data) > _HEADER or orphan else None, 0, 0)
    frame = _FRAME_HEADER + page_size
    seed = (c1, c2)  # each frame's checksum continues from the one stored before it
    offset = _HEADER
    valid = _HEADER
    broken_at: int | None = None
    while offset + frame <= len(data):
        pgno, commit, f1, f2, k1, k2 = struct.unpack(">6I", data[offset : offset + 24])
        current = (f1, f2) == (salt1, salt2) and pgno > 0
        s0, s1 = _checksum(data[offset : offset + 8], *seed, big_endian)
        intact = current and _checksum(data[offset + 24 : offset + frame], s0, s1, big_endian) == (
            k1,
            k2,
        )
        if broken_at is None:
            if intact:
                if commit:
                    valid = offset + frame
            else:
                broken_at = offset
        elif intact and commit:
            # An intact commit of this generation after the break: acknowledged, and SQLite
            # would drop it. (Uncommitted frames after a kill, or the leftovers of one that a
            # later transaction overwrote, never end in an intact commit frame.)
            return WalReport(
                f"write-ahead log frame at byte {broken_at} is damaged and the commit at byte "
                f"{offset} after it would be dropped",
                valid,
                page_size,
            )
        seed = (k1, k2)
        offset += frame
    if orphan:
        return WalReport("write-ahead log without its database", valid, page_size)
    index = read_wal_index(path, data[:_HEADER])
    valid_frames = (valid - _HEADER) // frame
    if index is not None and index.mx_frame > valid_frames:
        # Frames up to nBackfill are in the main file too; past them, the cut ones are gone.
        lost = index.mx_frame - max(valid_frames, index.backfilled)
        if index.backfilled >= valid_frames:
            # The main file holds a newer committed state than the valid prefix: replaying
            # the prefix over it would mix older pages in. Recover the main file alone.
            valid = _HEADER
        return WalReport(
            f"write-ahead log is shorter than its wal-index (-shm) says: {index.mx_frame} "
            f"committed frames, {valid_frames} valid in the log, {lost} committed frame"
            f"{'' if lost == 1 else 's'} lost (truncated, or its last frames damaged)",
            valid,
            page_size,
            index.mx_frame,
        )
    return WalReport(None, valid, page_size)


@dataclass(frozen=True, slots=True)
class WalIndex:
    """The trusted part of a ``-shm`` wal-index header."""

    mx_frame: int
    """Frames of the log's current generation that are committed (the last commit's index)."""
    backfilled: int
    """Frames already copied into the main file by a checkpoint (``nBackfill``)."""


_INDEX_HEADER: Final = 48
_INDEX_NEEDED: Final = 2 * _INDEX_HEADER + 4  # both header copies and nBackfill
_INDEX_VERSION: Final = 3007000


def read_wal_index(path: Path, wal_header: bytes | None) -> WalIndex | None:
    """The wal-index header of ``<path>-shm`` when it can be trusted for ``wal_header``.

    The ``-shm`` (format: https://www.sqlite.org/walformat.html, section 2.1)
    starts with two copies of a 48-byte ``WalIndexHdr`` in the writer's
    native byte order, then ``WalCkptInfo`` (``nBackfill`` first). It is
    trusted only when both copies agree, ``isInit`` is set, the checksum
    over the first 40 bytes holds, the page size and checksum byte order
    match the log's, and its salts are the log header's (same generation;
    these three are not checked for an empty log, ``wal_header=None``).
    Anything else, including a missing or unreadable ``-shm`` (normal after
    a clean close), gives ``None``: the index is advisory.
    """
    shm = path.with_name(path.name + "-shm")
    try:
        with shm.open("rb") as f:
            data = f.read(_INDEX_NEEDED)
    except OSError:
        return None
    if len(data) < _INDEX_NEEDED or data[:_INDEX_HEADER] != data[_INDEX_HEADER : 2 * _INDEX_HEADER]:
        return None
    version, _, _, is_init, big_end, sz_page, mx_frame, _ = struct.unpack("=3I2BH2I", data[:24])
    (backfilled,) = struct.unpack("=I", data[96:100])
    checksum = _checksum(data[:40], 0, 0, sys.byteorder == "big")
    if (
        version != _INDEX_VERSION
        or not is_init
        or checksum != struct.unpack("=2I", data[40:48])
        or backfilled > mx_frame
    ):
        return None
    if wal_header is not None and (
        bool(big_end) != (struct.unpack(">I", wal_header[:4])[0] == _MAGIC_BE)
        or (sz_page if sz_page != 1 else 65536) != struct.unpack(">I", wal_header[8:12])[0]
        or data[32:40] != wal_header[16:24]
    ):
        return None
    return WalIndex(mx_frame, backfilled)


def wal_page_image(wal_bytes: bytes, page_size: int, pgno: int, valid_bytes: int) -> bytes | None:
    """The newest image of page ``pgno`` in the first ``valid_bytes`` of a log, or ``None``."""
    frame = _FRAME_HEADER + page_size
    found: bytes | None = None
    for offset in range(_HEADER, valid_bytes - frame + 1, frame):
        if struct.unpack(">I", wal_bytes[offset : offset + 4])[0] == pgno:
            found = wal_bytes[offset + 24 : offset + frame]
    return found


def rebuild_wal(data: bytes) -> bytes | None:
    """The log without its damaged frames, re-checksummed, so SQLite replays every commit.

    Keeps every intact frame of the current generation up to the last intact
    commit frame and drops the others, then recomputes the checksum chain.
    This reproduces the last committed state exactly when every dropped
    frame's page is written again by a later kept frame (an append-heavy
    log rewrites the same few pages in every commit, so this is the common
    case). Otherwise, or when the header is damaged, it returns ``None``.
    The caller must still check the result (``PRAGMA integrity_check``): a
    dropped frame's page number is read from its own, possibly damaged,
    header.

    Args:
        data: The whole ``-wal`` file.
    """
    if len(data) < _HEADER:
        return None
    magic, version, page_size, _, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:_HEADER])
    big_endian = magic == _MAGIC_BE
    if (
        magic not in (_MAGIC_LE, _MAGIC_BE)
        or version != 3007000
        or not 512 <= page_size <= 65536
        or page_size & (page_size - 1)
        or _checksum(data[:24], 0, 0, big_endian) != (c1, c2)
    ):
        return None
    frame = _FRAME_HEADER + page_size
    frames: list[tuple[int, int, bool, bool]] = []  # offset, pgno, intact, commit
    seed = (c1, c2)
    for offset in range(_HEADER, len(data) - frame + 1, frame):
        pgno, commit, f1, f2, k1, k2 = struct.unpack(">6I", data[offset : offset + 24])
        s0, s1 = _checksum(data[offset : offset + 8], *seed, big_endian)
        intact = (f1, f2) == (salt1, salt2) and pgno > 0
        intact = intact and _checksum(data[offset + 24 : offset + frame], s0, s1, big_endian) == (
            k1,
            k2,
        )
        frames.append((offset, pgno, intact, bool(commit)))
        seed = (k1, k2)
    last = max((i for i, f in enumerate(frames) if f[2] and f[3]), default=-1)
    if last < 0:
        return None
    kept = frames[: last + 1]
    for i, (_, pgno, intact, _) in enumerate(kept):
        if not intact and not any(k[2] and k[1] == pgno for k in kept[i + 1 :]):
            return None
    out = bytearray(data[:_HEADER])
    s0, s1 = c1, c2
    for offset, _, intact, _ in kept:
        if not intact:
            continue
        head = data[offset : offset + 8]
        page = data[offset + 24 : offset + frame]
        s0, s1 = _checksum(head, s0, s1, big_endian)
        s0, s1 = _checksum(page, s0, s1, big_endian)
        out += head + struct.pack(">4I", salt1, salt2, s0, s1) + page
    return bytes(out)
