"""The PhotoTour (UBC) FPR95 (``patches fpr95``).

The room of this benchmark (docs/architecture.md, "One benchmark, one room").
"""
