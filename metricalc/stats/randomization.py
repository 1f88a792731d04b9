"""The paired randomization (sign-flip) test, for many comparisons at once.

Under the null hypothesis that two systems are exchangeable on every unit, each paired
difference is as likely to have the opposite sign. The test draws ``m`` random sign vectors and
counts how often the flipped sum is at least as far from zero as the observed one.

How it is fast (no Python loop per permutation): the differences of every comparison of one
call are stacked as the columns of a matrix ``D`` (units x comparisons; a unit a comparison does
not pair holds 0, which no sign changes), and one block of random bits ``B`` (permutations x
units, 64 units per random 64-bit word, unpacked with :func:`numpy.unpackbits`) serves every
comparison through one matrix product: with signs :math:`s = 2b - 1`,

.. math:: \\sum_i s_i d_i = 2 \\, (B D)_{\\cdot} - \\sum_i d_i .

The blocks are cache-sized (:data:`BLOCK_PERMUTATIONS` x :data:`BLOCK_UNITS`), so memory stays
bounded whatever the number of units and permutations. Each block of permutations draws its bits
from its own generator, spawned from ``rng`` (:meth:`numpy.random.Generator.spawn`), so the blocks
run in threads (single-threaded BLAS each) and the result does not depend on their scheduling.
"""

from __future__ import annotations

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.stats._threads import in_threads
from metricalc.validation import Integer, validate_params

__all__ = ["BLOCK_PERMUTATIONS", "BLOCK_UNITS", "EXACT_MAX_UNITS", "sign_flip_pvalues"]

EXACT_MAX_UNITS = 16
"""Up to this many units every one of the :math:`2^n` sign vectors is enumerated (65,536 for
16 units) and the p-value is exact: :math:`p = b / 2^n`, the identity counted in :math:`b`."""

BLOCK_PERMUTATIONS = 512
"""Permutations (rows) of one block of random signs."""

BLOCK_UNITS = 1024
"""Units (columns) of one block of random signs; a multiple of 64 (one random word = 64 signs)."""

SPAWN_BATCH = 256
"""Blocks whose generators are spawned at once (spawning in batches gives the same generators as
spawning all of them at once, so the p-values do not depend on it)."""

TOLERANCE = 1e-9
"""A flipped sum counts as extreme when :math:`|T^*| \\ge |T| - 10^{-9} \\sum_i |d_i|`: the
flipped sums are added in another order than the observed one, and equal sums (frequent with
tied or binary differences) must not be lost to rounding."""


def _exact_pvalues(D: np.ndarray) -> np.ndarray:
    """Exact two-sided p-values over all :math:`2^n` sign vectors (n <= :data:`EXACT_MAX_UNITS`)."""
    n_units = D.shape[1]
    patterns = np.arange(1 << n_units)[:, None]
    signs = 2.0 * ((patterns >> np.arange(n_units)) & 1) - 1.0
    flipped = signs @ D.T
    threshold = np.abs(D.sum(axis=1)) - TOLERANCE * np.abs(D).sum(axis=1)
    extreme = (np.abs(flipped) >= threshold).sum(axis=0)
    out: np.ndarray = extreme / float(1 << n_units)
    return out


@validate_params(n_resamples=Integer(1))
def sign_flip_pvalues(
    differences: np.ndarray, *, n_resamples: int = 10_000, rng: np.random.Generator
) -> np.ndarray | float:
    """Two-sided p-values of the paired sign-flip test, one per row of ``differences``.

    For a row :math:`d_1 .. d_n` (the paired differences; zeros for units the comparison does
    not pair) with observed statistic :math:`T = \\sum_i d_i` (n times the mean difference),
    ``m = n_resamples`` sign vectors :math:`s^{(j)} \\in \\{-1, 1\\}^n` are drawn uniformly and

    .. math::

        b = \\#\\{j : |\\textstyle\\sum_i s^{(j)}_i d_i| \\ge |T|\\}, \\qquad
        p = \\frac{b + 1}{m + 1}.

    With at most :data:`EXACT_MAX_UNITS` units every sign vector is enumerated instead and
    :math:`p = b / 2^n` is exact (the identity is one of the :math:`2^n`).

    All rows share the same sign vectors (each row's p-value is valid on its own; a
    multiple-comparison correction handles the dependence between rows).

    Parameters
    ----------
    differences : array of shape (comparisons, units) or (units,)
        Paired differences; NaN is not allowed (use 0 for an unpaired unit).
    n_resamples : int
        Number of random sign vectors ``m``.
    rng : numpy.random.Generator
        Source of the signs: one child generator per block of permutations is spawned from it.

    Returns
    -------
    numpy.ndarray
        p-values, shape (comparisons,) (a float for a 1-D ``differences``).

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.randomization import sign_flip_pvalues
    >>> d = np.array([[0.3, 0.2, 0.4, 0.1, 0.5, 0.2, 0.3, 0.1], [0.1, -0.1, 0.2, -0.2, 0, 0, 0, 0]])
    >>> p = sign_flip_pvalues(d, n_resamples=10_000, rng=np.random.default_rng(0))
    >>> bool(p[0] < 0.02), bool(p[1] > 0.5)   # exact values: 1/128 and 1
    (True, True)
    """
    D = np.asarray(differences, dtype=np.float64)
    single = D.ndim == 1
    D = np.atleast_2d(D)
    if D.ndim != 2 or not np.isfinite(D).all():
        raise InvalidInputError(
            "differences must be a finite (comparisons, units) array (0 for unpaired units)"
        )
    n_rows, n_units = D.shape
    if n_units <= EXACT_MAX_UNITS:
        p_exact = _exact_pvalues(D)
        return float(p_exact[0]) if single else p_exact
    width = -(-n_units // 64) * 64
    Dt = np.zeros((width, n_rows))
    Dt[:n_units] = D.T
    total = D.sum(axis=1)
    threshold = np.abs(total) - TOLERANCE * np.abs(D).sum(axis=1)

    def extremes(block: tuple[int, np.random.Generator]) -> np.ndarray:
        rows, generator = block
        plus = np.zeros((rows, n_rows))
        ones = np.empty((rows, min(BLOCK_UNITS, width)))
        for first in range(0, width, BLOCK_UNITS):
            cols = min(BLOCK_UNITS, width - first)
            words = generator.bit_generator.random_raw(rows * cols // 64)
            np.copyto(ones[:, :cols], np.unpackbits(words.view(np.uint8).reshape(rows, -1), axis=1))
            plus += ones[:, :cols] @ Dt[first : first + cols]
        counts: np.ndarray = (np.abs(2.0 * plus - total) >= threshold).sum(axis=0)
        return counts

    extreme = np.zeros(n_rows, dtype=np.int64)
    n_blocks = -(-n_resamples // BLOCK_PERMUTATIONS)
    for first in range(0, n_blocks, SPAWN_BATCH):  # a batch of generators at a time: memory
        count = min(SPAWN_BATCH, n_blocks - first)  # stays bounded for any n_resamples
        sizes = [
            min(BLOCK_PERMUTATIONS, n_resamples - (first + b) * BLOCK_PERMUTATIONS)
            for b in range(count)
        ]
        for counts in in_threads(extremes, list(zip(sizes, rng.spawn(count), strict=True))):
            extreme += counts
    p = (extreme + 1) / (n_resamples + 1)
    return float(p[0]) if single else p
