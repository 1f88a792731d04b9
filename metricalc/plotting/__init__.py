"""Presentation primitives every layer draws and prints with: figures, tables, terminal tables.

The names below are imported on first use (the figures load matplotlib and seaborn), so
``import metricalc.plotting.terminal`` stays light:

- the figures of a metric set: :func:`plot_map_by_split`, :func:`plot_split_scatter`,
  :func:`plot_scene_map`, :func:`plot_rank_histogram`, :func:`save_figure` (``figures``);
- the figures of curves from a cube: :func:`plot_pr_curves`, :func:`plot_roc`, :func:`plot_mma`
  (``curve_figures``);
- :class:`Table` (``tables``): LaTeX / Markdown / CSV / HTML tables with significance letters;
  ``comparisons``: reading a :func:`metricalc.stats.compare` Dataset (pairs, rows, test names);
- ``terminal``: rich tables fitted to the console; ``labels``: the metric names, number formats
  and escaping every renderer shares.
"""

from __future__ import annotations

from metricalc.lazy import lazy_getattr

_MODULES = {
    "tables": ("Table",),
    "figures": (
        "plot_map_by_split",
        "plot_split_scatter",
        "plot_scene_map",
        "plot_rank_histogram",
        "save_figure",
    ),
    "curve_figures": ("plot_pr_curves", "plot_roc", "plot_mma"),
}
"""The names each module of the package offers here."""

_WHERE = {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}

__all__ = sorted(_WHERE)

__getattr__ = lazy_getattr(__name__, _WHERE)
