"""Paired inference about a table statistic at the level of independent clusters.

Two systems are compared on the difference of their statistic,
:math:`\\hat\\theta = T_a - T_b` (:mod:`metricalc.stats.statistics`), over the clusters both
have (the others are dropped and counted). Both the interval and the test resample whole
clusters, so units of one cluster (the keypoints of one scene) are never treated as independent:

- **Paired cluster bootstrap.** A resample draws :math:`K` clusters with replacement, the same
  clusters for both systems (multinomial weights :math:`w \\sim \\mathrm{Mult}(K, 1/K)`), and
  recomputes both statistics: :math:`\\theta^*_b = T_a(w_b) - T_b(w_b)`. The interval is BCa
  (Efron & Tibshirani 1993, 14.3: bias correction :math:`\\hat z_0` from the share of
  :math:`\\theta^*_b` below :math:`\\hat\\theta`, acceleration :math:`\\hat a` from the
  leave-one-cluster-out jackknife) where it is defined, and the percentile interval otherwise
  (``interval`` of the result says which): BCa is undefined when every resample lies on one side
  of :math:`\\hat\\theta` or the jackknife is constant. With few clusters both are too narrow
  (a 95 % BCa interval over 16 scenes covers about 91 % of the time), so by default their normal
  quantiles are *expanded* (:func:`expanded_levels`, Hesterberg 2015).
- **Randomization test.** Under the null hypothesis the two systems are exchangeable within each
  cluster: swapping their records inside any set of clusters gives an equally likely data set.
  With :math:`T^*` the difference after a swap,

  .. math::

      p = \\frac{\\#\\{|T^*| \\ge |\\hat\\theta|\\}}{2^K} \\ \\text{(all } 2^K \\text{ swap
      patterns, } K \\le 16\\text{)}, \\qquad
      p = \\frac{b + 1}{m + 1} \\ \\text{(} m \\text{ random patterns otherwise)}.

With every unit its own cluster and the mean as statistic, these are the paired bootstrap of
the mean difference and the paired sign-flip test (:func:`scipy.stats.bootstrap`,
:func:`scipy.stats.permutation_test` with ``permutation_type="samples"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.stats
from scipy.special import ndtr, ndtri

from metricalc.stats.statistics import ClusteredStatistic

__all__ = [
    "BOOTSTRAP_CHUNK",
    "EXACT_MAX_CLUSTERS",
    "STEP_ROWS",
    "PairedInference",
    "expanded_levels",
    "inference_steps",
    "intraclass_correlation",
    "paired_inference",
]

EXACT_MAX_CLUSTERS = 16
"""Up to this many clusters the randomization test enumerates every swap pattern (65,536 for
16 clusters): its p-value is then exact, not a Monte Carlo estimate."""

BOOTSTRAP_CHUNK = 1 << 20
"""Resamples x clusters of one block of bootstrap weights (bounded memory)."""

STEP_ROWS = 2500
"""At most this many resamples (or swap patterns) per block: the unit of progress reports."""

TOLERANCE = 1e-9
"""A resampled difference counts as at least as extreme as the observed :math:`\\hat\\theta` when
:math:`|T^*| \\ge |\\hat\\theta| (1 - 10^{-9}) - 10^{-12}` (sums in another order)."""


@dataclass(frozen=True)
class PairedInference:
    """The inference about one comparison (first minus second system).

    Attributes
    ----------
    estimate : float
        :math:`\\hat\\theta = T_a - T_b` over the kept clusters.
    first, second : float
        :math:`T_a`, :math:`T_b` over the kept clusters.
    low, high : float
        The confidence interval of :math:`\\theta` (NaN when fewer than 2 clusters).
    interval : str
        ``"bca"`` or ``"percentile"``, prefixed ``"expanded "`` when widened for few clusters.
    pvalue : float
        Two-sided randomization p-value.
    exact : bool
        Whether every swap pattern was enumerated.
    clusters : int
        Clusters both systems have (the independent units).
    dropped : int
        Clusters only one of the two has.
    cluster_differences : numpy.ndarray
        Per kept cluster, the statistic within the cluster of ``first`` minus ``second``.
    """

    estimate: float
    first: float
    second: float
    low: float
    high: float
    interval: str
    pvalue: float
    exact: bool
    clusters: int
    dropped: int
    cluster_differences: np.ndarray


def _ignore(done: int) -> None:
    """The default ``tick``: no progress report."""


def _step(clusters: int) -> int:
    """Resamples per block: bounded memory, and a progress report at least every
    :data:`STEP_ROWS`."""
    return max(1, min(BOOTSTRAP_CHUNK // clusters, STEP_ROWS))


def inference_steps(clusters: int, n_resamples: int, min_clusters: int = 2) -> int:
    """The resamples and swap patterns of one :func:`paired_inference` over ``clusters`` kept
    clusters: the total its ``tick`` reports (0 below ``min_clusters``: nothing is resampled).

    >>> inference_steps(3, 1000), inference_steps(20, 1000), inference_steps(3, 1000, 5)
    (1008, 2000, 0)
    """
    if clusters < min_clusters:
        return 0
    return n_resamples + (1 << clusters if clusters <= EXACT_MAX_CLUSTERS else n_resamples)


def _bootstrap(
    statistic: ClusteredStatistic,
    first: int,
    second: int,
    keep: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    tick: Callable[[int], None] = _ignore,
) -> np.ndarray:
    """:math:`\\theta^*_b` for ``n_resamples`` paired cluster resamples of the kept clusters."""
    kept = np.flatnonzero(keep)
    size = len(kept)
    out = np.empty(n_resamples)
    step = _step(len(keep))
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        weights = np.zeros((rows, len(keep)))
        weights[:, kept] = rng.multinomial(size, np.full(size, 1.0 / size), size=rows)
        out[start : start + rows] = statistic.weighted(first, weights) - statistic.weighted(
            second, weights
        )
        tick(rows)
    return out


def _jackknife(
    statistic: ClusteredStatistic, first: int, second: int, keep: np.ndarray
) -> np.ndarray:
    """Leave-one-cluster-out differences, one per kept cluster (blocks of at most
    :data:`BOOTSTRAP_CHUNK` weights: K x K at once is gigabytes for many clusters)."""
    kept = np.flatnonzero(keep)
    out = np.empty(len(kept))
    step = max(1, BOOTSTRAP_CHUNK // len(keep))
    for start in range(0, len(kept), step):
        left_out = kept[start : start + step]
        weights = np.tile(keep.astype(np.float64), (len(left_out), 1))
        weights[np.arange(len(left_out)), left_out] = 0.0
        out[start : start + len(left_out)] = statistic.weighted(
            first, weights
        ) - statistic.weighted(second, weights)
    return out


def expanded_levels(confidence_level: float, clusters: int) -> np.ndarray:
    """The normal quantiles of a two-sided interval, expanded for few clusters (Hesterberg
    2015, "expanded percentile"): :math:`z \\mapsto \\sqrt{K/(K-1)}\\, t_{K-1}(\\Phi(z))`,
    which undoes the bootstrap's narrowness with :math:`K` clusters (its variance is
    :math:`(K-1)/K` of the unbiased one, and its tails are normal, not Student t).

    Examples
    --------
    >>> expanded_levels(0.95, 16).round(3).tolist()
    [-2.201, 2.201]
    """
    alpha = (1 - confidence_level) / 2
    t = scipy.stats.t.ppf(np.array([alpha, 1 - alpha]), clusters - 1)
    out: np.ndarray = np.sqrt(clusters / (clusters - 1)) * t
    return out


def _interval(
    estimate: float,
    resampled: np.ndarray,
    jackknife: np.ndarray,
    confidence_level: float,
    expand: bool,
) -> tuple[float, float, str]:
    """BCa interval where defined, else percentile (the method named in the result); with
    ``expand``, at the :func:`expanded_levels` of the clusters."""
    theta = resampled[np.isfinite(resampled)]
    if theta.size == 0:
        return np.nan, np.nan, "percentile"
    alpha = (1 - confidence_level) / 2
    z = (
        expanded_levels(confidence_level, len(jackknife))
        if expand
        else ndtri(np.array([alpha, 1 - alpha]))
    )
    prefix = "expanded " if expand else ""
    tolerance = TOLERANCE * max(abs(estimate), 1e-3)
    below = np.count_nonzero(theta < estimate - tolerance)
    at_or_below = np.count_nonzero(theta <= estimate + tolerance)
    share = (below + at_or_below) / (2 * theta.size)
    deviation = jackknife.mean() - jackknife
    spread = (deviation**2).sum()
    if 0 < share < 1 and np.isfinite(jackknife).all() and spread > 0:
        z0 = ndtri(share)
        a = (deviation**3).sum() / (6 * spread**1.5)
        levels = ndtr(z0 + (z0 + z) / (1 - a * (z0 + z)))
        if np.isfinite(levels).all():
            low, high = scipy.stats.quantile(theta, levels)
            return float(low), float(high), f"{prefix}bca"
    low, high = scipy.stats.quantile(theta, ndtr(z))
    return float(low), float(high), f"{prefix}percentile"


def _swap_patterns(kept: np.ndarray, n_clusters: int, rows: np.ndarray) -> np.ndarray:
    """Swap masks (rows, C) from the bits of the integers ``rows`` over the kept clusters."""
    bits = (rows[:, None] >> np.arange(len(kept))) & 1
    swap = np.zeros((len(rows), n_clusters), dtype=bool)
    swap[:, kept] = bits.astype(bool)
    return swap


def _randomization(
    statistic: ClusteredStatistic,
    first: int,
    second: int,
    keep: np.ndarray,
    estimate: float,
    n_resamples: int,
    rng: np.random.Generator,
    tick: Callable[[int], None] = _ignore,
) -> tuple[float, bool]:
    """Two-sided p-value of the within-cluster swap test, and whether it is exact."""
    kept = np.flatnonzero(keep)
    threshold = abs(estimate) * (1 - TOLERANCE) - 1e-12
    step = _step(len(keep))
    extreme = 0
    if len(kept) <= EXACT_MAX_CLUSTERS:
        total = 1 << len(kept)
        for start in range(0, total, step):
            swap = _swap_patterns(kept, len(keep), np.arange(start, min(total, start + step)))
            t = statistic.swapped_difference(first, second, swap, keep)
            extreme += int(np.count_nonzero(np.abs(t) >= threshold))
            tick(len(swap))
        return extreme / total, True
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        swap = np.zeros((rows, len(keep)), dtype=bool)
        swap[:, kept] = rng.random((rows, len(kept))) < 0.5
        t = statistic.swapped_difference(first, second, swap, keep)
        extreme += int(np.count_nonzero(np.abs(t) >= threshold))
        tick(rows)
    return (extreme + 1) / (n_resamples + 1), False


def paired_inference(
    statistic: ClusteredStatistic,
    first: int,
    second: int,
    *,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    resample_rng: np.random.Generator,
    swap_rng: np.random.Generator,
    min_clusters: int = 2,
    expand: bool = True,
    advance: Callable[[], None] = lambda: None,
    tick: Callable[[int], None] = _ignore,
) -> PairedInference:
    """Estimate, cluster-bootstrap interval and randomization p-value of one comparison.

    Parameters
    ----------
    statistic : ClusteredStatistic
        The table statistic of every system (:mod:`metricalc.stats.statistics`).
    first, second : int
        System indices: the comparison is ``first`` minus ``second``.
    n_resamples : int
        Bootstrap resamples, and random swap patterns when there are more than
        :data:`EXACT_MAX_CLUSTERS` clusters.
    confidence_level : float
        Two-sided level of the interval.
    resample_rng, swap_rng : numpy.random.Generator
        Sources of the bootstrap weights and of the random swap patterns.
    min_clusters : int
        Fewer kept clusters: the estimate only (interval and p-value NaN).
    expand : bool
        Widen the interval for few clusters (:func:`expanded_levels`; default). False gives
        the plain BCa / percentile interval, that of :func:`scipy.stats.bootstrap`.
    advance : callable
        Called once when the comparison is done (progress).
    tick : callable
        Called with the number of resamples, then of swap patterns, done after each block of
        at most :data:`STEP_ROWS` (progress of long work: :func:`inference_steps` in all).

    Returns
    -------
    PairedInference

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.statistics import RatioStatistic
    >>> from metricalc.stats.clustered import paired_inference
    >>> sums = np.array([[[3.0], [2.0], [4.0]], [[1.0], [1.0], [1.0]]])  # 2 systems, 3 scenes
    >>> stat = RatioStatistic("m", "mean", ["a", "b"], np.array(["x", "y", "z"]), sums,
    ...                       np.full((2, 3, 1), 4.0))
    >>> r = paired_inference(stat, 0, 1, resample_rng=np.random.default_rng(0),
    ...                      swap_rng=np.random.default_rng(1))
    >>> round(r.estimate, 4), r.pvalue, r.exact, r.clusters   # 2 of 8 patterns as extreme
    (0.5, 0.25, True, 3)
    """
    present = statistic.present()
    keep = present[first] & present[second]
    dropped = int(np.count_nonzero(present[first] ^ present[second]))
    ones = keep.astype(np.float64)[None, :]
    a, b = float(statistic.weighted(first, ones)[0]), float(statistic.weighted(second, ones)[0])
    estimate = a - b
    values = statistic.cluster_values()
    cluster_differences = (values[first] - values[second])[keep]
    n = int(np.count_nonzero(keep))
    if n < min_clusters or not np.isfinite(estimate):
        advance()
        return PairedInference(
            estimate, a, b, np.nan, np.nan, "percentile", np.nan, False, n, dropped,
            cluster_differences,
        )  # fmt: skip
    resampled = _bootstrap(statistic, first, second, keep, n_resamples, resample_rng, tick)
    jackknife = _jackknife(statistic, first, second, keep)
    low, high, method = _interval(estimate, resampled, jackknife, confidence_level, expand)
    pvalue, exact = _randomization(
        statistic, first, second, keep, estimate, n_resamples, swap_rng, tick
    )
    advance()
    return PairedInference(
        estimate, a, b, low, high, method, pvalue, exact, n, dropped, cluster_differences
    )


def intraclass_correlation(values: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """One-way ANOVA intraclass correlation of ``values`` grouped by ``clusters``, and the
    design effect of their mean.

    With :math:`k` clusters, :math:`N` values, :math:`n_0 = (N - \\sum_c n_c^2 / N)/(k - 1)`,
    and the between / within mean squares :math:`MSB`, :math:`MSW`:

    .. math::

        \\mathrm{ICC} = \\frac{MSB - MSW}{MSB + (n_0 - 1) MSW}, \\qquad
        \\mathrm{deff} = 1 + (\\bar n - 1)\\, \\mathrm{ICC},

    :math:`\\bar n = N / k` the mean cluster size. The design effect is the factor by which
    treating the :math:`N` values as independent understates the variance of their mean (its
    standard error by :math:`\\sqrt{\\mathrm{deff}}`). NaN where undefined (one cluster, no
    within-cluster spread).

    Examples
    --------
    >>> import numpy as np
    >>> icc, deff = intraclass_correlation(np.array([1.0, 1.1, 0.9, 3.0, 3.1, 2.9]),
    ...                                    np.array([0, 0, 0, 1, 1, 1]))
    >>> round(icc, 3), round(deff, 3)
    (0.995, 2.99)
    """
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    values, clusters = values[finite], np.asarray(clusters)[finite]
    _, codes = np.unique(clusters, return_inverse=True)
    k, total = int(codes.max(initial=-1)) + 1, len(values)
    if k < 2 or total <= k:
        return np.nan, np.nan
    sizes = np.bincount(codes, minlength=k).astype(np.float64)
    means = np.bincount(codes, weights=values, minlength=k) / sizes
    grand = values.mean()
    msb = float((sizes * (means - grand) ** 2).sum() / (k - 1))
    msw = float(((values - means[codes]) ** 2).sum() / (total - k))
    n0 = (total - (sizes**2).sum() / total) / (k - 1)
    denominator = msb + (n0 - 1) * msw
    if denominator <= 0:
        return np.nan, np.nan
    icc = (msb - msw) / denominator
    return float(icc), float(1 + (total / k - 1) * icc)
