"""A host framework's session or thread id as an agentmem session id (one helper for all).

Hosts name their conversations with any string (an e-mail address, a path, ids that
differ only in case); agentmem session ids are restricted to a safe alphabet. The id is
the SHA-256 of the host id's exact UTF-8 bytes (lone surrogates kept distinct), so
equal host ids give equal session ids and different ones different ids, behind a
prefix naming the integration and, where wanted, a readable part.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["host_session_id"]

_SLUG: Final = re.compile(r"[^a-z0-9_-]+")


def host_session_id(prefix: str, host_id: str, *, readable: bool = False, digits: int = 64) -> str:
    """``<prefix>[<readable part>-]<digits hex digits of the SHA-256 of host_id>``.

    ``readable``: put a lower-cased slug of ``host_id`` (at most 60 characters) before
    the digest, for ids a person reads in listings; the digest alone keeps them distinct.
    """
    digest = hashlib.sha256(host_id.encode("utf-8", "surrogatepass")).hexdigest()[:digits]
    if not readable:
        return prefix + digest
    slug = _SLUG.sub("-", host_id.lower()).strip("-")[:60] or "thread"
    return f"{prefix}{slug}-{digest}"
