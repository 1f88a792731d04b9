"""The studies: plain-language summaries, the figures of test results and the report of a study.

The tables and figure primitives are in :mod:`metricalc.plotting`. The names below are imported
on first use (the figures load matplotlib and seaborn):

- :func:`summarize`, :func:`describe_comparison`, :func:`describe_ranking`, :func:`cd_groups`
  (``summary``): sentences for comparisons and rankings;
- :func:`build`, :class:`Report`, :func:`register_section` (``builder``; defined in ``model`` and
  ``sections``): the report folder of a study;
- :func:`load_study`, :class:`Study`, :func:`demo_study` (``study``): study specifications;
  :func:`register_data_loader` (``data``): a new kind of study data;
- the figures of test results: :func:`plot_forest`, :func:`plot_cd_diagram` (``stats_figures``).
"""

from __future__ import annotations

from metricalc.lazy import lazy_getattr

_MODULES = {
    "summary": ("summarize", "describe_comparison", "describe_ranking", "cd_groups"),
    "builder": ("build", "Report", "register_section"),
    "study": ("Study", "load_study", "demo_study"),
    "data": ("register_data_loader",),
    "stats_figures": ("plot_forest", "plot_cd_diagram"),
}
"""The names each module of the package offers here."""

_WHERE = {name: f"{__name__}.{module}" for module, names in _MODULES.items() for name in names}

__all__ = sorted(_WHERE)

__getattr__ = lazy_getattr(__name__, _WHERE)
