"""Pausing the cyclic garbage collector around large loads.

Used by the session store while it reads a session's rows and by the facade
around a whole resume (rows, history, window, time-machine tree): each builds
hundreds of thousands of tuples, bytes and dicts that hold no reference
cycles, so collections triggered by those allocations only re-scan a growing
heap.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (nesting is safe).

    Reading 100k rows builds hundreds of thousands of tuples, bytes and
    dicts; each batch of allocations would trigger a collection over a
    growing heap (about half the cost of a load), for nothing: rows and
    JSON objects hold no reference cycles. Reference counting still frees
    everything; the collector resumes (if it was on) when the block ends.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()
