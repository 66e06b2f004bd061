"""The inspection CLI's commands (``agentmem ...``, ``python -m agentmem ...``).

:mod:`agentmem.cli` is the entry point (the parser, ``main()``, the exit codes);
the commands live here, one module per group so none grows past a screenful
of jobs:

* :mod:`.common`: opening the root (never creating one), the one-line
  errors and their exit codes, the terminal-only progress line, JSON and
  text output;
* :mod:`.parsing`: one-line usage errors, the options every level accepts,
  command groups with their help and examples;
* :mod:`.stores`: ``memory``, ``topics``, ``notes``, ``recall``, ``reindex``
  and ``doctor`` (the stores shared by every session);
* :mod:`.sessions`: ``session`` and ``undo-history`` (one stored session).

The CLI sits above the whole library: it uses the :class:`~agentmem.Memory`
facade and its stores, and nothing in the library imports it.
"""
