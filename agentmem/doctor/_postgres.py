"""placeholder"""
from __future__ import annotations

from agentmem.doctor._report import Sink


def check_postgres(dsn: str, add: Sink) -> None:
    raise NotImplementedError
