"""agentmem's benchmarks: ``python -m bench`` runs every peer comparison (``run_all.py``).

The scripts also run alone (``python bench/bench_session.py``); they import their
helpers (``_transcripts``, ``_data``) by plain name, from this directory.
"""
