"""The session part: one conversation (:class:`Session`) wired from the parts below it.

:meth:`agentmem.Memory.session` builds a :class:`Session` from a
:class:`SessionWiring` (never from the Memory itself). The package's modules:

* :mod:`agentmem.session.session`: :class:`Session` (construction, tasks and
  undo, appends, usage, the end of a task, persistence, close);
* :mod:`agentmem.session.payload`: its context builders (``context`` and twins);
* :mod:`agentmem.session.wiring`: :class:`SessionWiring` and the session defaults;
* :mod:`agentmem.session.state`: the session state document and its parts;
* :mod:`agentmem.session.usage`: :class:`Usage` (token and cost totals) and
  the session's small helpers.

Only the facade (:mod:`agentmem.memory`) and the package root import it.
"""

from __future__ import annotations

from agentmem.session.session import Session
from agentmem.session.usage import Usage
from agentmem.session.wiring import SessionWiring

__all__ = ["Session", "SessionWiring", "Usage"]
