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
"""

from __future__ import annotations

import numpy as np
from statsmodels.stats.multitest import multipletests

from metricalc.core._validate import check_choice

__all__ = ["CORRECTIONS", "correct"]

CORRECTIONS = ("holm", "bonferroni", "fdr_bh", "none")
"""The correction methods (statsmodels' names)."""


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
    check_choice("correction", method, CORRECTIONS)
    p = np.asarray(pvalues, dtype=np.float64)
    if method == "none" or p.size == 0:
        return p.copy()
    return np.asarray(multipletests(p, method=method)[1], dtype=np.float64)
