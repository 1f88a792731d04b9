"""The HPatches CVPR'17 tasks: verification, matching, retrieval (``patches hpatches-eval``, their
comparison).

The room of this benchmark (docs/architecture.md, "One benchmark, one room").
"""
