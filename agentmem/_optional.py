"""Optional dependencies: import one, or say which extra installs it.

Everything agentmem offers beyond its runtime dependencies (the embedders, the
PostgreSQL backend, the framework integrations) is imported when first used, so
``import agentmem`` never pays for it; :func:`require` is the one place that turns a
missing module into a :class:`~agentmem.errors.ConfigurationError` naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from agentmem.errors import ConfigurationError

__all__ = ["missing", "require"]


def missing(what: str, extra: str, module: str) -> ConfigurationError:
    """The error for ``what`` needing ``module``, installed by the extra ``extra``."""
    return ConfigurationError(
        f"{what} needs the optional {extra!r} extra (module {module!r} is not installed): "
        f"pip install 'agentmem[{extra}]'"
    )


def require(module: str, what: str, extra: str) -> ModuleType:
    """Import ``module``, or raise :func:`missing`'s error naming the extra.

    Raises:
        ConfigurationError: ``module`` is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(what, extra, module) from exc
