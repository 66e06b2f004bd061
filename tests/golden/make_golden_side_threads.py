"""Build ``side-threads-state-v4.sqlite``: a session whose YaRN side threads live in its state JSON.

Until sessions format 4 (included), a session saved its YaRN side threads inside its
state document, rewritten whole on every save. Run once with that agentmem, from the
repository root; the file is committed and never regenerated::

    python tests/golden/make_golden_side_threads.py

The session holds a short conversation, a thread summary (a small window forced a
trim) and two side threads (``"sub-b"`` created before ``"sub-a"``, so their order is
not their ids' order). ``tests/test_side_threads.py`` resumes it with the current code:
every thread and the payload must come back exactly, and the next save moves the
threads to the store's threads table.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import orjson

from agentmem import Memory
from agentmem.session_store import FORMAT_VERSION

HERE = Path(__file__).resolve().parent
NAME = "side-threads-state-v4.sqlite"
CONTEXT = "side-threads-state-v4.context.json"
SESSION_ID = "side-threads"


def side_thread(tag: str, count: int) -> list[dict[str, object]]:
    """The messages archived to side thread ``tag`` (also used by the test)."""
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} step {i}: " + "x" * i}
        for i in range(count)
    ]


def main() -> int:
    if FORMAT_VERSION != 4:
        print(f"needs agentmem at sessions format 4, this is {FORMAT_VERSION}", file=sys.stderr)
        return 1
    path = HERE / NAME
    if path.exists():
        print(f"{path} exists; it is never regenerated", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        with Memory(root, working_dir=tmp) as memory:
            s = memory.session(SESSION_ID, name="golden", context_window=1_000)
            for i in range(12):
                s.append({"role": "user", "content": f"question {i} " + "word " * 40})
                s.append({"role": "assistant", "content": f"answer {i} " + "word " * 40})
                s.context()
            s.yarn.archive(side_thread("sub-b", 5), "sub-b")
            s.yarn.archive(side_thread("sub-a", 3), "sub-a")
            s.record_usage(100, 20)
            s.yarn.archive(side_thread("sub-b-more", 2), "sub-b")
            s.record_usage(120, 30)
            (HERE / CONTEXT).write_bytes(
                orjson.dumps(
                    {
                        "context": s.context(),
                        "threads": {t: s.yarn.thread(t) for t in s.yarn.thread_ids()},
                    },
                    option=orjson.OPT_INDENT_2,
                )
            )
            s.close()
        shutil.copyfile(root / "sessions.sqlite", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
