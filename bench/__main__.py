"""``python -m bench``: every peer comparison in one table (see ``bench/run_all.py``)."""

import sys

from bench.run_all import main

sys.exit(main())
