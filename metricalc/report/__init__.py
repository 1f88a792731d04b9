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

_EXPORTS = {
    "summarize": "summary",
    "describe_comparison": "summary",
    "describe_ranking": "summary",
    "cd_groups": "summary",
    "build": "builder",
    "Report": "builder",
    "register_section": "builder",
    "Study": "study",
    "load_study": "study",
    "demo_study": "study",
    "register_data_loader": "data",
    "plot_forest": "stats_figures",
    "plot_cd_diagram": "stats_figures",
}

__all__ = sorted(_EXPORTS)

_WHERE = {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()}

__getattr__ = lazy_getattr(__name__, _WHERE)
