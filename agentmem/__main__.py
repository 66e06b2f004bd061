"""``python -m agentmem``: the inspection CLI (:mod:`agentmem.cli`)."""

from agentmem.cli import main

raise SystemExit(main())
