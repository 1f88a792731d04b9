"""Significance of descriptor comparisons; see docs/stats.md.

- :func:`compare`: paired tests of systems on one metric (by default the randomization test of
  the mean difference, McNemar for binary outcomes; t-test, Wilcoxon, sign on request), effect
  sizes, the bootstrap BCa CI of the mean difference (or the t interval), one correction family;
- :func:`rank_systems`: Friedman test over scenes (blocks), average ranks, Nemenyi critical
  difference and pairwise Wilcoxon tests of many systems;
- :func:`power`: power and sample size of the paired t-test, in [0, 1] everywhere;
- the building blocks: :func:`unit_values` (the units a comparison pairs on), :func:`correct`,
  :func:`rank_biserial`, :func:`cohens_dz`, :func:`bca_interval`, :func:`t_interval`,
  :func:`sign_flip_pvalues`,
  :func:`paired_test`, :func:`untestable`, :func:`default_test`, :func:`direction`,
  :func:`verdict`, :func:`disagreement`, :func:`nemenyi_q`,
  :func:`critical_difference`.
"""

from metricalc.stats.bootstrap import bca_interval
from metricalc.stats.compare import MIN_UNITS, compare
from metricalc.stats.correction import CORRECTIONS, correct
from metricalc.stats.effect import cohens_dz, rank_biserial
from metricalc.stats.intervals import INTERVALS, t_interval
from metricalc.stats.paired import TESTS, default_test, paired_test, untestable
from metricalc.stats.power import PowerResult, power
from metricalc.stats.randomization import sign_flip_pvalues
from metricalc.stats.ranking import critical_difference, nemenyi_q, rank_systems
from metricalc.stats.sides import direction, disagreement, verdict
from metricalc.stats.units import PAIR_BY, SPLITS, metric_values, unit_values

__all__ = [
    "CORRECTIONS",
    "INTERVALS",
    "MIN_UNITS",
    "PAIR_BY",
    "SPLITS",
    "TESTS",
    "PowerResult",
    "bca_interval",
    "cohens_dz",
    "compare",
    "correct",
    "critical_difference",
    "default_test",
    "direction",
    "disagreement",
    "metric_values",
    "nemenyi_q",
    "paired_test",
    "power",
    "rank_biserial",
    "rank_systems",
    "sign_flip_pvalues",
    "t_interval",
    "unit_values",
    "untestable",
    "verdict",
]
