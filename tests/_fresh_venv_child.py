"""Run inside a fresh venv holding only the agentmem wheel and its runtime dependencies.

Driven by tests/test_packaging.py (``python -W error _fresh_venv_child.py MODE``, in an
empty working directory). Prints one JSON object on stdout; the test makes the
assertions. The network is cut before agentmem is imported (any IP connection
attempt is recorded and refused), and every log record of WARNING or above is
recorded, so the test can say "nothing was downloaded" and "at most one warning".

Modes:

* ``session``: ``import agentmem``, every name of ``__all__``, a Memory session
  written, closed and resumed, recall, token counting without any tokenizer extra,
  and the optional features that are reached at call time (the PostgreSQL backend,
  the embedders) without their extras.
* ``modules``: import every module under ``agentmem/`` (:func:`pkgutil.walk_packages`;
  not ``agentmem/__main__.py``, which runs the CLI) and report, per module, ``ok``,
  the library's missing-extra error, or anything else.
"""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
import socket
import sys
from typing import Any

CONNECTIONS: list[str] = []
RECORDS: list[dict[str, str]] = []

_real_connect = socket.socket.connect


def _refuse(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        CONNECTIONS.append(repr(address))
        raise OSError(f"network cut by the packaging test: {address!r}")
    return _real_connect(self, address)


socket.socket.connect = _refuse  # type: ignore[method-assign]


class _Recorder(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        RECORDS.append(
            {"logger": record.name, "level": record.levelname, "message": record.getMessage()}
        )


logging.getLogger().addHandler(_Recorder(logging.WARNING))


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}", "message": str(exc)}


def _expect_error(call: Any) -> dict[str, str] | None:
    try:
        call()
    except Exception as exc:
        return _error(exc)
    return None


def session_mode() -> dict[str, Any]:
    import agentmem
    from agentmem.embedders import load_embedder

    out: dict[str, Any] = {"file": agentmem.__file__, "version": agentmem.__version__}
    out["all_resolved"] = sorted(name for name in agentmem.__all__ if hasattr(agentmem, name))

    mem = agentmem.Memory(root="root", working_dir=".")
    with mem.session(name="packaging", model="gpt-4o") as session:
        session_id = session.id
        session.history.replace_system_prompt("You are a test agent.")
        session.start_task("Please remember the word pelican.")
        session.append({"role": "assistant", "content": "Noted: pelican."})
        session.finish_task()
        written = session.context()
    mem.close()
    records_after_session = len(RECORDS)

    mem = agentmem.Memory(root="root", working_dir=".")
    with mem.session(session_id, create=False) as session:
        resumed = session.context()
    out["round_trip"] = written == resumed
    out["context_roles"] = [message["role"] for message in resumed]
    out["recall"] = [(hit.session_id == session_id, hit.preview) for hit in mem.recall("pelican")]
    mem.close()
    out["records_during_session"] = RECORDS[:records_after_session]

    estimator = agentmem.counter_for_model("gpt-4o")
    out["counter_for_model"] = type(estimator).__name__
    counts = []
    for _ in range(2):  # the second counter must not warn again
        counter = agentmem.TiktokenCounter(model="gpt-4o")
        counts.append((counter.encoding_name, counter.count_text("hello world, " * 10)))
    out["tiktoken_counters"] = counts
    out["records_later"] = RECORDS[records_after_session:]  # resume, recall, counters

    out["postgres"] = _expect_error(
        lambda: agentmem.Memory(root="pg-root", working_dir=".", backend="postgresql://x@h/db")
    )
    out["embedders"] = {
        name: _expect_error(lambda n=name: load_embedder(n)) for name in ("wordllama", "minilm")
    }
    return out


def modules_mode() -> dict[str, Any]:
    import agentmem
    from agentmem.errors import ConfigurationError

    walk_errors: list[str] = []
    results: dict[str, dict[str, str]] = {}
    for info in pkgutil.walk_packages(agentmem.__path__, "agentmem.", onerror=walk_errors.append):
        if info.name.endswith(".__main__"):
            continue  # a script: importing it runs the CLI (the test runs it as one)
        try:
            importlib.import_module(info.name)
        except ConfigurationError as exc:
            results[info.name] = {"outcome": "missing-extra", **_error(exc)}
        except BaseException as exc:  # reported, not raised: the test lists every failure
            results[info.name] = {"outcome": "error", **_error(exc)}
        else:
            results[info.name] = {"outcome": "ok"}
    return {"modules": results, "walk_errors": walk_errors}


def main() -> None:
    mode = sys.argv[1]
    out = session_mode() if mode == "session" else modules_mode()
    out["connections"] = CONNECTIONS
    out["records"] = RECORDS
    print(json.dumps(out))


if __name__ == "__main__":
    main()
