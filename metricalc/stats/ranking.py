"""Many systems at once: Friedman test, average ranks, Nemenyi critical difference (Demsar 2006).

On N units complete in all k systems, each unit ranks the systems (rank 1 = highest metric,
average ranks for ties); :math:`R_j` is system j's average rank. The Friedman test
(:func:`scipy.stats.friedmanchisquare`) asks whether the ranks differ at all. The Nemenyi
post-hoc test calls two systems different when their average ranks differ by more than the
critical difference

.. math::

    CD = q_\\alpha \\sqrt{\\frac{k (k + 1)}{6 N}}, \\qquad
    q_\\alpha = \\frac{Q_{1-\\alpha}(k, \\infty)}{\\sqrt 2},

with :math:`Q_{1-\\alpha}(k, \\infty)` the quantile of the studentized range of k means with
infinite degrees of freedom (:data:`scipy.stats.studentized_range`); :math:`q_{0.05}` = 1.960,
2.343, 2.569, ... for k = 2, 3, 4, ... as tabulated by Demsar (2006). The alternative Demsar also
discusses, pairwise Wilcoxon signed-rank tests with a correction over all pairs (Holm by
default), is given alongside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.stats
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.stats.compare import MIN_UNITS
from metricalc.stats.correction import CORRECTIONS, correct
from metricalc.stats.paired import paired_test, untestable
from metricalc.stats.units import PAIR_BY, SPLITS, unit_values
from metricalc.validation import Choice, Fraction, Integer, Nullable, Text, validate_params

__all__ = ["critical_difference", "nemenyi_q", "rank_systems"]


@validate_params(k=Integer(2), alpha=Fraction())
def nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """The Nemenyi critical value :math:`q_\\alpha` for k systems: the studentized range
    quantile :math:`Q_{1-\\alpha}(k, \\infty)` divided by :math:`\\sqrt 2`.

    Examples
    --------
    >>> from metricalc.stats import nemenyi_q
    >>> [round(nemenyi_q(k), 3) for k in (2, 3, 10)]
    [1.96, 2.344, 3.164]
    """
    return float(scipy.stats.studentized_range.ppf(1 - alpha, k, np.inf) / np.sqrt(2))


@validate_params(k=Integer(2), n=Integer(1), alpha=Fraction())
def critical_difference(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference of average ranks for k systems on n units.

    .. math:: CD = q_\\alpha \\sqrt{k (k + 1) / (6 n)}

    Examples
    --------
    >>> from metricalc.stats import critical_difference
    >>> round(critical_difference(4, 100), 4)   # 2.569 * sqrt(20 / 600)
    0.469
    """
    return nemenyi_q(k, alpha) * float(np.sqrt(k * (k + 1) / (6 * n)))


@validate_params(
    metric=Text(),
    pair_by=Choice(PAIR_BY),
    split=Nullable(Choice(SPLITS)),
    alpha=Fraction(),
    correction=Choice(CORRECTIONS),
)
def rank_systems(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
    *,
    metric: str = "ap",
    pair_by: str = "scene",
    split: str | None = None,
    alpha: float = 0.05,
    correction: str = "holm",
) -> xr.Dataset:
    """Friedman test, average ranks, Nemenyi CD and pairwise Wilcoxon tests of all systems.

    Parameters
    ----------
    cube, metric, split
        As for :func:`~metricalc.stats.compare`.
    pair_by : {"scene", "pair", "query"}
        The blocks: each unit ranks the systems on the metric averaged over the unit. Scenes by
        default (Demsar 2006: one block per data set); image pairs where there are few scenes.
        Single queries make N huge and the CD meaningless (0.02 ranks over 95,000 queries).
        Only the units where every system has a value are used (the others are dropped and
        counted).
    alpha : float
        Level of the CD and of ``reject``.
    correction : {"holm", "bonferroni", "fdr_bh", "none"}
        Correction of the pairwise Wilcoxon p-values, over all k (k - 1) / 2 pairs.

    Returns
    -------
    xarray.Dataset
        Dims ``descriptor`` and ``other`` (the same system names): ``average_rank``, ``mean``
        (descriptor); ``nemenyi_different`` (descriptor, other; bool:
        :math:`|R_i - R_j| > CD`), ``pvalue_corrected`` and ``reject`` (descriptor, other:
        pairwise :func:`scipy.stats.wilcoxon` p-values after the correction, symmetric; NaN and
        False on the diagonal and for two systems equal on every unit, which the Wilcoxon test
        cannot compare; the correction family is the pairs with a p-value); scalars
        ``friedman_statistic``, ``friedman_pvalue`` (NaN for k = 2: scipy's test needs three
        systems), ``n_units``, ``n_dropped``,
        ``critical_difference``, ``q_alpha``. attrs: ``metric``, ``pair_by``, ``split``,
        ``alpha``, ``correction``, ``k``, ``excluded_descriptors`` and the protocol attrs.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc import cube as qc, stats
    >>> rng = np.random.default_rng(0)
    >>> n = 60                                     # 12 scenes of 5 queries
    >>> coords = {"scene": np.repeat([f"v_{i:02d}" for i in range(12)], 5),
    ...           "pair": ["1-2"] * n, "keypoint_set": ["sift"] * n, "query_keypoint": np.arange(n)}
    >>> base = rng.uniform(0, 0.5, n)
    >>> c = qc.new_cube(["sift", "orb", "brief"], coords,
    ...                 {"ap": [base + 0.4, base + rng.uniform(0, 0.2, n), base]},
    ...                 attrs=qc.DEFAULT_ATTRS)
    >>> r = stats.rank_systems(c)                  # blocks: the 12 scenes
    >>> r.average_rank.values.tolist(), bool(r.friedman_pvalue < 0.001), int(r.n_units)
    ([1.0, 2.0, 3.0], True, 12)
    >>> bool(r.nemenyi_different.sel(descriptor="sift", other="brief"))
    True
    """
    units = unit_values(cube, metric=metric, pair_by=pair_by, split=split)
    names = [str(n) for n in units["descriptor"].values.tolist()]
    k = len(names)
    if k < 2:
        raise InvalidInputError(f"ranking needs at least two systems; the cube has {names}")
    values = units.values
    present = np.isfinite(values)
    complete = present.all(axis=0)
    n_units, n_dropped = int(complete.sum()), int((present.any(axis=0) & ~complete).sum())
    if n_units < MIN_UNITS:
        hint = (
            "; with so few scenes rank by image pair: pair_by='pair'" if pair_by == "scene" else ""
        )
        raise InvalidInputError(
            f"{n_units} units have a value in all {k} systems (pair_by={pair_by!r}, {n_dropped} "
            f"dropped); ranking needs at least {MIN_UNITS}{hint}"
        )
    table = values[:, complete]
    if (table == table[:1]).all():
        raise InvalidInputError(
            f"all {k} systems have equal values on every unit: there is nothing to rank"
        )
    ranks = scipy.stats.rankdata(-table, axis=0)
    average_rank = ranks.mean(axis=1)
    if k >= 3:
        friedman = scipy.stats.friedmanchisquare(*table)
        statistic, pvalue = float(friedman.statistic), float(friedman.pvalue)
    else:
        statistic, pvalue = np.nan, np.nan
    q = nemenyi_q(k, alpha)
    cd = critical_difference(k, n_units, alpha)

    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    raw = np.full(len(pairs), np.nan)  # NaN: two systems equal on every unit, no test
    for m, (i, j) in enumerate(pairs):
        if not untestable(table[i] - table[j], test="wilcoxon"):
            raw[m] = paired_test(table[i], table[j], test="wilcoxon")[1]
    corrected = np.full_like(raw, np.nan)
    tested = np.isfinite(raw)
    corrected[tested] = correct(raw[tested], method=correction)
    pmatrix = np.full((k, k), np.nan)
    for (i, j), p in zip(pairs, corrected, strict=True):
        pmatrix[i, j] = pmatrix[j, i] = p
    different = np.abs(average_rank[:, None] - average_rank[None, :]) > cd

    attrs: dict[str, Any] = {
        "metric": metric,
        "pair_by": pair_by,
        "split": units.attrs["split"],
        "alpha": alpha,
        "correction": correction,
        "k": k,
        "excluded_descriptors": list(units.attrs["excluded_descriptors"]),
    }
    for name, value in units.attrs.items():
        attrs.setdefault(str(name), value)
    matrix = ("descriptor", "other")
    return xr.Dataset(
        {
            "average_rank": ("descriptor", average_rank),
            "mean": ("descriptor", table.mean(axis=1)),
            "nemenyi_different": (matrix, different),
            "pvalue_corrected": (matrix, pmatrix),
            "reject": (matrix, np.nan_to_num(pmatrix, nan=1.0) < alpha),
            "friedman_statistic": statistic,
            "friedman_pvalue": pvalue,
            "n_units": n_units,
            "n_dropped": n_dropped,
            "critical_difference": cd,
            "q_alpha": q,
        },
        coords={"descriptor": names, "other": names},
        attrs=attrs,
    )
