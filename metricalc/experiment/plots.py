"""Figures of an experiment run (``plots/`` in the run folder)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["plot_cumulative_errors", "plot_retrieval_map"]


def plot_cumulative_errors(
    errors: Mapping[str, np.ndarray],
    *,
    max_error: float = 10.0,
    unit: str = "px",
    title: str = "Homography estimation",
    ax: Axes | None = None,
) -> Axes:
    """Share of image pairs with an error up to x, one curve per method (x from 0 to
    ``max_error``); failed estimates (inf) never count.

    Examples
    --------
    >>> import numpy as np
    >>> ax = plot_cumulative_errors({"DLT": np.array([0.5, 3.0, np.inf])})
    >>> [line.get_label() for line in ax.get_lines()]
    ['DLT']
    """
    if ax is None:
        ax = Figure(figsize=(5.5, 4.0), layout="constrained").subplots()
    for name, values in errors.items():
        values = np.sort(np.asarray(values, dtype=np.float64).reshape(-1))
        n = max(values.size, 1)
        below = values[values <= max_error]
        x = np.concatenate([[0.0], below, [max_error]])
        y = np.concatenate([[0.0], np.arange(1, below.size + 1) / n, [below.size / n]])
        ax.step(x, 100 * y, where="post", label=name)
    ax.set_xlim(0, max_error)
    ax.set_ylim(0, 100)
    ax.set_xlabel(f"error ({unit})")
    ax.set_ylabel("image pairs (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return ax


_TASKS = {"patch_retrieval_map": "patch retrieval", "image_retrieval_map": "image retrieval"}


def plot_retrieval_map(
    table: pd.DataFrame,
    *,
    label: str = "file",
    title: str = "Retrieval mAP",
    ax: Axes | None = None,
) -> Axes:
    """Horizontal bars of the patch and the image retrieval mAP (in percent), one pair of bars
    per row of ``table`` (columns ``label``, ``patch_retrieval_map``, ``image_retrieval_map``),
    top to bottom in table order.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"file": ["a", "b"], "patch_retrieval_map": [0.5, 0.75],
    ...                       "image_retrieval_map": [0.25, 0.5]})
    >>> ax = plot_retrieval_map(table)
    >>> [round(bar.get_width()) for bar in ax.patches], ax.get_legend_handles_labels()[1]
    ([50, 75, 25, 50], ['patch retrieval', 'image retrieval'])
    """
    n = len(table)
    if ax is None:
        ax = Figure(figsize=(6.5, 1.6 + 0.45 * max(n, 1)), layout="constrained").subplots()
    rows = np.arange(n)
    height = 0.38
    for offset, (column, name) in zip((-height / 2, height / 2), _TASKS.items(), strict=True):
        values = 100 * table[column].to_numpy(np.float64)
        bars = ax.barh(rows + offset, values, height=height, label=name)
        ax.bar_label(bars, fmt="%.1f", padding=2, fontsize=8)
    ax.set_yticks(rows, table[label].astype(str).tolist())
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    ax.set_xlabel("mAP (%)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / max(n, 1)), ncol=2,
              fontsize=8, frameon=False)  # fmt: skip
    return ax
