"""Bootstrap BCa confidence interval of the mean paired difference.

Small samples go to :func:`scipy.stats.bootstrap` itself (``method="BCa"``). Above
:data:`SCIPY_MAX_UNITS` units scipy is slow for the mean (its jackknife builds ``n`` leave-one-out
samples: O(n^2); and it resamples ``n_resamples x n`` values per comparison), so the same
interval is computed here from the same definitions (Efron & Tibshirani 1993, 14.3), exactly in
distribution, in bounded memory:

- the jackknife of the mean is closed-form: leaving out :math:`d_i` gives
  :math:`\\bar d_{(i)} = (n \\bar d - d_i)/(n - 1)`, so :math:`(n-1)(\\bar d_{(\\cdot)} -
  \\bar d_{(i)}) = d_i - \\bar d` and the acceleration is

  .. math:: \\hat a = \\frac{\\sum_i (d_i - \\bar d)^3}{6 \\, (\\sum_i (d_i - \\bar d)^2)^{3/2}};

- a bootstrap resample is a multinomial count vector :math:`W \\sim \\mathrm{Mult}(n, 1/n)`
  over the units, and its mean is :math:`W \\cdot d / n`. When a row has few distinct values
  :math:`v_k` (counts :math:`c_k`; binary outcomes, heavily tied AP), the counts per distinct
  value are drawn directly, :math:`W' \\sim \\mathrm{Mult}(n, c / n)`, mean :math:`W' \\cdot v / n`
  (the same distribution, K draws instead of n). Otherwise the counts :math:`W` are drawn
  directly by a Poisson construction (``_resampled_means``), in cache-sized blocks, and the
  rows (comparisons) that share their units share the resamples through one matrix product
  :math:`W D^T`.

Then, as scipy does, with :math:`\\theta^*_b` the bootstrap means, :math:`\\hat\\theta` the mean
and :math:`z_\\alpha = \\Phi^{-1}(\\alpha)`, :math:`\\alpha = (1 - \\text{level}) / 2`:

.. math::

    \\hat z_0 = \\Phi^{-1}\\!\\left(\\frac{\\#\\{\\theta^*_b < \\hat\\theta\\} +
    \\#\\{\\theta^*_b \\le \\hat\\theta\\}}{2B}\\right), \\quad
    \\alpha_{1,2} = \\Phi\\!\\left(\\hat z_0 + \\frac{\\hat z_0 \\pm z_\\alpha}
    {1 - \\hat a(\\hat z_0 \\pm z_\\alpha)}\\right),

and the interval is the (linear-interpolation) :math:`\\alpha_1` and :math:`\\alpha_2` quantiles
of :math:`\\theta^*`.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.stats
from scipy.special import ndtr, ndtri

from metricalc.core.kernels import CHUNK_ELEMENTS
from metricalc.errors import InvalidInputError
from metricalc.stats._threads import in_threads
from metricalc.validation import Choice, Fraction, Integer, check_memory, validate_params

__all__ = [
    "ENGINES",
    "MULTINOMIAL_RATIO",
    "SCIPY_MAX_UNITS",
    "bca_interval",
    "check_bootstrap_memory",
]

SCIPY_MAX_UNITS = 1_000
"""Rows of at most this many units go to :func:`scipy.stats.bootstrap` (``engine="auto"``)."""

MULTINOMIAL_RATIO = 500
"""The fast engine draws a row's counts per distinct value when it has at most
``n / MULTINOMIAL_RATIO`` distinct values (binary outcomes, a few tied values): a multinomial
draw per category costs tens of times a unit of the shared resampling, which also serves every
row at once."""

TOLERANCE = 1e-12
"""Bootstrap means within :math:`10^{-12} \\max_i |d_i|` of the mean count as equal to it (they
are summed in another order than the mean itself)."""

ENGINES = ("auto", "scipy", "fast")

_BUCKETS = 1 << 16
_REFINE = 255
_GEMM_ROWS = 64
_GEMM_COLUMNS = 4_096


def _constant_rows(D: np.ndarray) -> np.ndarray:
    constant: np.ndarray = (D[:, :1] == D).all(axis=1)
    return constant


def _scipy_interval(
    D: np.ndarray, level: float, n_resamples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    batch = max(1, CHUNK_ELEMENTS // D.size)
    result = scipy.stats.bootstrap(
        (D,),
        np.mean,
        n_resamples=n_resamples,
        batch=batch,
        vectorized=True,
        axis=-1,
        confidence_level=level,
        method="BCa",
        rng=rng,
    )
    interval = result.confidence_interval
    return np.asarray(interval.low, dtype=np.float64), np.asarray(interval.high, np.float64)


def _multinomial_means(
    values: np.ndarray, counts: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """Bootstrap means of a sample given by its distinct values and their counts."""
    n = int(counts.sum())
    probabilities = counts / n
    rows = max(1, CHUNK_ELEMENTS // len(values))
    out = np.empty(n_resamples)
    for start in range(0, n_resamples, rows):
        size = min(rows, n_resamples - start)
        drawn = rng.multinomial(n, probabilities, size=size).astype(np.float64)
        out[start : start + size] = drawn @ values / n
    return out


@functools.lru_cache(maxsize=8)
def _poisson_table(mean: float) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-CDF lookup of Poisson(``mean``) on the top 16 bits of a uniform number.

    Returns the table (the value of every 16-bit bucket, :data:`_REFINE` where a CDF step falls
    inside the bucket) and the CDF (float64, reaching 1.0)."""
    cdf = scipy.stats.poisson.cdf(np.arange(64), mean)
    edges = np.arange(_BUCKETS + 1) / _BUCKETS
    start = np.searchsorted(cdf, edges[:-1], side="right")
    end = np.searchsorted(cdf, edges[1:], side="left")
    return np.where(start == end, start, _REFINE).astype(np.uint8), cdf


def _poisson_sums(Dt: np.ndarray, size: int, mean: float, rng: np.random.Generator) -> np.ndarray:
    """:math:`X D^T` for ``size`` rows :math:`X` of independent Poisson(``mean``) counts.

    ``Dt`` is (units, columns); cache-sized blocks of counts are drawn by inverse CDF from 16
    random bits each (the few buckets holding a CDF step are resolved with a fresh uniform)
    and multiplied at once, so no (size, units) array is ever held."""
    table, cdf = _poisson_table(mean)
    bits = rng.bit_generator
    n = Dt.shape[0]
    block = np.empty((size, min(n, _GEMM_COLUMNS)))
    total = np.zeros((size, Dt.shape[1]))
    for first in range(0, n, _GEMM_COLUMNS):
        width = min(n, first + _GEMM_COLUMNS) - first
        buckets = bits.random_raw(-(-size * width // 4)).view(np.uint16)[: size * width]
        counts = np.take(table, buckets)
        refine = np.flatnonzero(counts == _REFINE)
        if refine.size:
            uniform = (buckets[refine] + rng.random(refine.size)) / _BUCKETS
            counts[refine] = np.searchsorted(cdf, uniform, side="right")
        weights = block[:, :width]
        np.copyto(weights, counts.reshape(size, width))
        total += weights @ Dt[first : first + width]
    return total


def _resampled_means(D: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap means of every row of ``D`` over shared resamples of its columns (units).

    A resample is a count vector :math:`W \\sim \\mathrm{Mult}(n; 1/n, .., 1/n)` (unit i drawn
    :math:`W_i` times), drawn exactly in distribution without drawing n indices:

    1. :math:`X_i \\sim \\mathrm{Poisson}(\\mu)` independently, :math:`\\mu = \\max(0, 1 -
       5/\\sqrt n)`; given their sum :math:`S = s` the :math:`X_i` are
       :math:`\\mathrm{Mult}(s; 1/n, .., 1/n)` (the sums :math:`X D^T` and :math:`S` come from
       one matrix product, with a column of ones appended to :math:`D^T`);
    2. a resample with :math:`S > n` (probability about :math:`3 \\cdot 10^{-7}`) is drawn
       again, which keeps that conditional law;
    3. :math:`n - S` (about :math:`5 \\sqrt n`) further units are drawn uniformly and their
       values added: :math:`\\mathrm{Mult}(s) + \\mathrm{Mult}(n - s) = \\mathrm{Mult}(n)`.

    Blocks of :data:`_GEMM_ROWS` resamples draw from their own generators, spawned from
    ``rng``, and run in threads.
    """
    n_rows, n = D.shape
    Dt = np.ones((n, n_rows + 1))
    Dt[:, :n_rows] = D.T
    mean = max(0.0, 1.0 - 5.0 / float(np.sqrt(n)))

    def block(task: tuple[int, np.random.Generator]) -> np.ndarray:
        size, generator = task
        total = np.zeros((size, n_rows + 1))
        todo = np.arange(size) if mean > 0 else np.empty(0, dtype=np.int64)
        while todo.size:
            total[todo] = _poisson_sums(Dt, todo.size, mean, generator)
            todo = todo[total[todo, -1] > n]
        missing = n - total[:, -1].astype(np.int64)
        rows = np.repeat(np.arange(size), missing)
        # whole rows of Dt: a gather of contiguous rows, 3x faster than Dt[drawn, :n_rows]
        extra = np.take(Dt, generator.integers(0, n, size=rows.size), axis=0)
        for r in range(n_rows):  # one bincount per comparison row
            total[:, r] += np.bincount(rows, weights=extra[:, r], minlength=size)
        means: np.ndarray = total[:, :n_rows].T / n
        return means

    sizes = [min(_GEMM_ROWS, n_resamples - s) for s in range(0, n_resamples, _GEMM_ROWS)]
    return np.concatenate(
        in_threads(block, list(zip(sizes, rng.spawn(len(sizes)), strict=True))), axis=1
    )


def acceleration(D: np.ndarray) -> np.ndarray:
    """BCa acceleration of the mean of every row, from the closed-form jackknife.

    .. math:: \\hat a = \\frac{\\sum_i (d_i - \\bar d)^3}{6 \\, (\\sum_i (d_i - \\bar d)^2)^{3/2}}

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.bootstrap import acceleration
    >>> # deviations -1, -1, 2: a = 6 / (6 * 6**1.5)
    >>> acceleration(np.array([[0.0, 0.0, 3.0]])).round(4).tolist()
    [0.068]
    """
    deviation = D - D.mean(axis=1, keepdims=True)
    a: np.ndarray = (deviation**3).sum(axis=1) / (6 * ((deviation**2).sum(axis=1)) ** 1.5)
    return a


def _fast_interval(
    D: np.ndarray, level: float, n_resamples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    n_rows, n = D.shape
    means = np.empty((n_rows, n_resamples))
    shared = []
    for r in range(n_rows):  # one row per comparison: a few rows, never one per unit
        values, counts = np.unique(D[r], return_counts=True)
        if len(values) * MULTINOMIAL_RATIO <= n:
            means[r] = _multinomial_means(values, counts, n_resamples, rng)
        else:
            shared.append(r)
    if shared:
        means[shared] = _resampled_means(D[shared], n_resamples, rng)
    theta = D.mean(axis=1)
    a = acceleration(D)
    tolerance = (TOLERANCE * np.abs(D).max(axis=1))[:, None]
    below = (means < theta[:, None] - tolerance).sum(axis=1)
    at_or_below = (means <= theta[:, None] + tolerance).sum(axis=1)
    z0 = ndtri((below + at_or_below) / (2 * n_resamples))
    z = ndtri((1 - level) / 2)
    bounds = [ndtr(z0 + (z0 + s * z) / (1 - a * (z0 + s * z))) for s in (1, -1)]
    interval = scipy.stats.quantile(means, np.stack(bounds, axis=-1), axis=-1)
    return interval[:, 0], interval[:, 1]


def check_bootstrap_memory(rows: int, n_resamples: int) -> None:
    """Refuse ``n_resamples`` whose bootstrap means of ``rows`` rows (8 bytes each, and the
    sorted copy the quantiles take) exceed :func:`metricalc.validation.memory_limit`.

    Examples
    --------
    >>> check_bootstrap_memory(3, 10_000)
    """
    check_memory(
        f"n_resamples={n_resamples} ({rows} row{'' if rows == 1 else 's'} x {n_resamples} "
        "bootstrap means x 8 bytes, twice)",
        16.0 * rows * n_resamples,
    )


@validate_params(confidence_level=Fraction(), n_resamples=Integer(1), engine=Choice(ENGINES))
def bca_interval(
    differences: np.ndarray,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 10_000,
    rng: np.random.Generator,
    engine: str = "auto",
) -> tuple[np.ndarray, np.ndarray] | tuple[float, float]:
    """BCa bootstrap confidence interval of the mean of every row of ``differences``.

    The rows share their resamples of the columns (units), as :func:`scipy.stats.bootstrap`
    does for 2-D data. A constant row has the interval [value, value] (the bootstrap
    distribution is one point).

    Parameters
    ----------
    differences : array of shape (rows, n) or (n,)
        Paired differences (finite), n >= 2.
    confidence_level : float
        Two-sided level of the interval.
    n_resamples : int
        Bootstrap resamples B.
    rng : numpy.random.Generator
        Source of the resamples.
    engine : {"auto", "scipy", "fast"}
        ``"scipy"``: :func:`scipy.stats.bootstrap` (``method="BCa"``), ``"fast"``: the exact
        computation of this module (see above); ``"auto"``: scipy up to
        :data:`SCIPY_MAX_UNITS` units, else fast.

    Returns
    -------
    (low, high) : arrays of shape (rows,) (floats for a 1-D input)

    Raises
    ------
    InvalidInputError
        A bad option, non-finite or too few differences, or ``n_resamples`` whose bootstrap
        means (16 bytes per row and resample) exceed
        :func:`metricalc.validation.memory_limit`; refused before anything is drawn.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.bootstrap import bca_interval
    >>> d = np.random.default_rng(1).normal(0.1, 0.2, size=400)
    >>> low, high = bca_interval(d, rng=np.random.default_rng(0))
    >>> bool(low < d.mean() < high), round(high - low, 2)
    (True, 0.04)
    """
    level = float(confidence_level)
    D = np.asarray(differences, dtype=np.float64)
    single = D.ndim == 1
    D = np.atleast_2d(D)
    if D.ndim != 2 or D.shape[1] < 2 or not np.isfinite(D).all():
        raise InvalidInputError(
            f"differences must be a finite (rows, n) array with n >= 2; got shape {D.shape}"
        )
    check_bootstrap_memory(D.shape[0], n_resamples)
    low, high = D[:, 0].copy(), D[:, 0].copy()  # constant rows: [value, value]
    varied = ~_constant_rows(D)
    if varied.any():
        use_scipy = engine == "scipy" or (engine == "auto" and D.shape[1] <= SCIPY_MAX_UNITS)
        compute = _scipy_interval if use_scipy else _fast_interval
        low[varied], high[varied] = compute(D[varied], level, n_resamples, rng)
    if single:
        return float(low[0]), float(high[0])
    return low, high
