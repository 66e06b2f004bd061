"""Argument checks of the facade: each bad argument becomes an AgentMemError naming it.

:mod:`agentmem.memory` wires parts together; these helpers turn what a host
passes to ``Memory(...)``, ``Memory.session(...)`` and the ``Session``
methods into validated values, raising
:class:`~agentmem.errors.ConfigurationError` for configuration and
:class:`~agentmem.errors.InvalidArgumentError` for per-call arguments, so no
``TypeError``, ``OverflowError`` or pydantic error escapes the public API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path

from agentmem.context import ContextSettings
from agentmem.errors import ConfigurationError, InvalidArgumentError

__all__ = [
    "check_component",
    "check_flag",
    "check_injections",
    "config_path",
    "context_settings",
    "cost_value",
]


def config_path(label: str, value: object) -> Path:
    """``value`` as a path, or a :class:`ConfigurationError` naming the argument."""
    if not isinstance(value, str | PathLike):
        raise ConfigurationError(
            f"{label} must be a path (str or os.PathLike), got {type(value).__name__}"
        )
    try:
        path = Path(value)
        str(path).encode("utf-8")
        if "\x00" in str(path):
            raise ValueError("embedded null byte")
        return path
    except (TypeError, ValueError) as exc:  # bytes paths, NUL bytes, lone surrogates
        raise ConfigurationError(f"{label} is not a usable path: {value!r} ({exc})") from exc


def cost_value(value: object) -> float | None:
    """``value`` as a non-negative finite float, or ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        cost = float(value)
    except OverflowError:
        return None
    return cost if 0 <= cost < math.inf else None


def check_injections(injections: object) -> None:
    if isinstance(injections, str | bytes) or not isinstance(injections, Sequence):
        raise InvalidArgumentError(
            f"injections must be a sequence of strings, got {type(injections).__name__}"
        )
    for index, text in enumerate(injections):
        if not isinstance(text, str):
            raise InvalidArgumentError(
                f"injections[{index}] must be a string, got {type(text).__name__}"
            )


def check_flag(label: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{label} must be True or False, got {value!r}")


def check_component(label: str, value: object, protocol: type, shape: str) -> None:
    """Refuse a component that does not have its protocol's shape (attribute names only)."""
    if value is not None and not isinstance(value, protocol):
        raise ConfigurationError(
            f"{label} must provide {shape} ({protocol.__name__}), got {type(value).__name__}"
        )


def context_settings(context: object) -> ContextSettings:
    """The ``context`` argument as settings, or a :class:`ConfigurationError` naming the field."""
    if context is None:
        return ContextSettings()
    if isinstance(context, ContextSettings):
        return context
    if not isinstance(context, Mapping):
        raise ConfigurationError(
            f"context must be ContextSettings or a mapping, got {type(context).__name__}"
        )
    # ContextSettings raises ConfigurationError itself, naming the field.
    return ContextSettings(**{str(k): v for k, v in context.items()})
