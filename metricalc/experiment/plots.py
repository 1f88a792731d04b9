"""Figures of an experiment run (``plots/`` in the run folder)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["plot_cumulative_errors"]


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
