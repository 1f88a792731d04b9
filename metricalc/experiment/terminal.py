"""Summaries of experiment runs as a rich table in the terminal (one row per experiment)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from metricalc.plotting.terminal import print_table, printable

__all__ = ["SUMMARY_COLUMNS", "print_summaries"]

SUMMARY_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("true_map_micro", "mAP", True),
    ("patch_retrieval_map", "patch mAP", True),
    ("image_retrieval_map", "image mAP", True),
    ("hit_rate_at_1", "HR@1", True),
    ("mprec@3px", "mprec@3px", True),
    ("H_error_ransac@1px", "AUC@1px", True),
    ("H_error_ransac@3px", "AUC@3px", True),
    ("H_error_ransac@5px", "AUC@5px", True),
    ("ransac_th", "th (px)", False),
    ("H_error_dlt@3px", "DLT AUC@3px", True),
    ("mnum_matches", "matches", False),
)
"""(summary key, column header, shown in percent) of :func:`print_summaries`."""


def _cell(value: Any, percent: bool) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{100 * value:.1f}" if percent else f"{value:g}"


def print_summaries(
    summaries: Mapping[str, Mapping[str, Any]],
    *,
    title: str = "",
    console: Console | None = None,
) -> None:
    """Print ``{experiment: summaries}`` side by side, the columns of :data:`SUMMARY_COLUMNS`
    that any experiment has (missing values as ``-``).

    Examples
    --------
    >>> from rich.console import Console
    >>> print_summaries({"sift": {"true_map_micro": 0.5, "ransac_th": 3.0}},
    ...                 console=Console(width=60, color_system=None))
    ┏━━━━━━━━━━━━┳━━━━━━┳━━━━━━━━━┓
    ┃ experiment ┃  mAP ┃ th (px) ┃
    ┡━━━━━━━━━━━━╇━━━━━━╇━━━━━━━━━┩
    │ sift       │ 50.0 │       3 │
    └────────────┴──────┴─────────┘
    """
    shown = [c for c in SUMMARY_COLUMNS if any(c[0] in s for s in summaries.values())]
    table = Table(title=printable(title) if title else None)
    table.add_column("experiment", no_wrap=True)
    for _, header, _ in shown:
        table.add_column(header, justify="right")
    for name, values in summaries.items():
        cells = (_cell(values.get(key), percent) for key, _, percent in shown)
        table.add_row(printable(name), *cells)
    print_table(table, console=console)
