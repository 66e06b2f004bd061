"""The one check every versioned format goes through on the way in.

Every persisted structure carries ``{"format": <kind>, "version": <int>, ...}``
(DESIGN section 8). Readers accept their own and older versions and refuse
newer ones, so an old agentmem never half-reads what a new one wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmem.errors import FormatVersionError, InvalidArgumentError

__all__ = ["check_format"]


def check_format(data: Any, *, kind: str, version: int, what: str) -> int:
    """Check the format header of ``data`` and return its version.

    Args:
        data: The decoded structure.
        kind: The expected ``format`` value (``"agentmem.window"``...).
        version: The newest version this code reads.
        what: How to name the structure in errors ("window state").

    Raises:
        InvalidArgumentError: not a mapping, or another format.
        FormatVersionError: a malformed version, or one newer than ``version``
            (also an ``InvalidArgumentError``).
    """
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"expected a {what} object, got {type(data).__name__}")
    if data.get("format") != kind:
        raise InvalidArgumentError(
            f"not a {what}: format is {data.get('format')!r}, expected {kind!r}"
        )
    found = data.get("version")
    if type(found) is not int or found < 1:
        raise FormatVersionError(
            f"{what} version must be an integer >= 1, got {found!r}", supported=version
        )
    if found > version:
        raise FormatVersionError(
            f"{what} version {found} was written by a newer agentmem "
            f"(this one reads up to {version}); upgrade agentmem",
            found=found,
            supported=version,
        )
    return found
