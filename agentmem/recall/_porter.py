"""The index's tokenizer, as :mod:`agentmem.recall` uses it (kept for its old import path).

It lives in :mod:`agentmem.session_store.postings_terms`, beside the postings that are
built with it.
"""

from agentmem.session_store.postings_terms import Matcher, stem, terms

__all__ = ["Matcher", "stem", "terms"]
