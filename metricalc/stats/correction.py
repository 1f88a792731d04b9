"""Multiple-comparison correction over an explicit family of p-values (statsmodels).

The family is every comparison of one call (all pairs, or every system against the baseline,
of one metric). The method is always passed explicitly to
:func:`statsmodels.stats.multitest.multipletests` (its own default is Holm-Sidak). For m
p-values sorted increasingly, :math:`p_{(1)} \\le .. \\le p_{(m)}`:

- ``holm`` (default): :math:`\\tilde p_{(i)} = \\max_{j \\le i} \\min(1, (m - j + 1)\\, p_{(j)})`;
- ``bonferroni``: :math:`\\tilde p_i = \\min(1, m\\, p_i)`;
- ``fdr_bh`` (Benjamini-Hochberg, controls the false discovery rate):
  :math:`\\tilde p_{(i)} = \\min_{j \\ge i} \\min(1, m\\, p_{(j)} / j)`;
- ``none``: :math:`\\tilde p_i = p_i`.

Speed: statsmodels' Holm branch ends with an explicit ``gc.collect()``, a full collection whose
cost grows with the number of Python objects alive in the process (0.1-0.4 s per call in a
report build, about 0.08 s right after importing statsmodels). :func:`correct` therefore moves
the objects that exist before the call to the collector's permanent generation
(:func:`gc.freeze`) for the duration of the call, so that collection visits only the few objects
the call creates; the corrected p-values are the same (a collection frees memory, it does not
change values), and the frozen objects are handed back (:func:`gc.unfreeze`) afterwards. A
process that froze objects itself is left alone (the call then pays the full collection).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from statsmodels.stats.multitest import multipletests

from metricalc.validation import Choice, validate_params

__all__ = ["CORRECTIONS", "correct"]

CORRECTIONS = ("holm", "bonferroni", "fdr_bh", "none")
"""The correction methods (statsmodels' names)."""


@contextmanager
def _quick_collections() -> Iterator[None]:
    """Objects alive now are skipped by ``gc.collect()`` inside the block (module docstring)."""
    if gc.get_freeze_count():  # the process froze objects itself: unfreezing would undo that
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@validate_params(method=Choice(CORRECTIONS))
def correct(pvalues: np.ndarray, *, method: str = "holm") -> np.ndarray:
    """Corrected p-values of one family.

    Examples
    --------
    >>> from metricalc.stats import correct
    >>> correct([0.01, 0.04, 0.03], method="holm").round(3).tolist()
    [0.03, 0.06, 0.06]
    >>> correct([0.01, 0.04, 0.03], method="none").tolist()
    [0.01, 0.04, 0.03]
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if method == "none" or p.size == 0:
        return p.copy()
    with _quick_collections():
        corrected = multipletests(p, method=method)[1]
    return np.asarray(corrected, dtype=np.float64)
