"""The TREC runs (``trec-eval``, ``trec-export``); the measures are retrieval/'s.

The room of this benchmark (docs/architecture.md, "One benchmark, one room").
"""
