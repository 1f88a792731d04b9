r"""Measures researchers ask for beside trec_eval's: judgment rate, ERR, RBP and its residual,
NCG; vectorised over all queries of a :class:`~.ranking.Ranked` run.

Notation as in :mod:`~metricalc.retrieval.measures` (ranks :math:`i = 1..n`, :math:`h_i`
relevant at the level, :math:`g_i` the qrels value where positive, :math:`c_i` the relevance
code, ``-1`` for a document outside the qrels); :math:`m = \min(k, n)`. docs/retrieval.md gives
every formula and its source.
"""

from __future__ import annotations

import numpy as np

from metricalc.retrieval.gain_measures import cumsum_within, rank_within, safe_divide
from metricalc.retrieval.measures import segment_sum
from metricalc.retrieval.ranking import NOT_IN_POOL, UNJUDGED, Ranked

__all__ = ["ERR_MAX_GRADE", "err", "judged", "ncg", "rbp", "rbp_residual"]

ERR_MAX_GRADE = 4
"""The largest grade of ERR's stopping probability, gdeval's ``MAX_JUDGMENT``."""


def _upto(ranked: Ranked, values: np.ndarray, k: int | None) -> np.ndarray:
    """Per query, the sum of ``values`` over its first :math:`\\min(k, n)` positions."""
    if k is not None:
        values = np.where(ranked.rank <= k, values, 0.0)
    return segment_sum(values, ranked.start)


def judged(ranked: Ranked, k: int) -> np.ndarray:
    r"""``Judged@k`` (ir_measures): :math:`\frac{1}{m} |\{i \le m : c_i \ne -1\}|`, the share of
    the first :math:`m` documents that the qrels list (a negative qrels value counts as listed;
    0 if nothing is retrieved)."""
    listed = (ranked.code != NOT_IN_POOL).astype(np.float64)
    m = np.minimum(k, ranked.num_ret).astype(np.float64)
    count = _upto(ranked, listed, k)
    return safe_divide(count, m, m > 0)


def err(ranked: Ranked, k: int) -> np.ndarray:
    r"""``ERR@k`` (Chapelle et al., CIKM 2009, as TREC's ``gdeval.pl`` computes it):
    :math:`\sum_{i \le m} \frac{R_i}{i} \prod_{j < i} (1 - R_j)` with the stopping probability
    :math:`R_i = (2^{\min(g_i, 4)} - 1) / 2^4` (grades above 4, which gdeval refuses, count as
    4)."""
    grade = np.minimum(ranked.gain, ERR_MAX_GRADE)
    stop = (2.0 ** grade - 1.0) / 2.0 ** ERR_MAX_GRADE
    keep = np.log1p(-stop)  # stop < 1: finite
    reach = np.exp(cumsum_within(keep, ranked.start) - keep)  # product over the ranks above
    return _upto(ranked, reach * stop / ranked.rank, k)


def rbp(ranked: Ranked, p: float, k: int | None = None) -> np.ndarray:
    r"""``RBP(p)`` (Moffat and Zobel, TOIS 2008): :math:`(1 - p) \sum_{i \le m} h_i p^{i - 1}`
    (every rank without ``k``)."""
    weight = (1.0 - p) * p ** (ranked.rank - 1.0)
    return _upto(ranked, weight * ranked.hit, k)


def rbp_residual(ranked: Ranked, p: float, k: int | None = None) -> np.ndarray:
    r"""The residual of ``RBP(p)`` (Moffat and Zobel, TOIS 2008): the most RBP can still gain if
    every unjudged document of the first :math:`m` and every rank below :math:`m` were relevant,
    :math:`(1 - p) \sum_{i \le m,\, c_i < 0} p^{i - 1} + p^{m}`."""
    weight = (1.0 - p) * p ** (ranked.rank - 1.0)
    unjudged = ((ranked.code == NOT_IN_POOL) | (ranked.code == UNJUDGED)).astype(np.float64)
    m = ranked.num_ret if k is None else np.minimum(k, ranked.num_ret)
    result: np.ndarray = _upto(ranked, weight * unjudged, k) + p ** m.astype(np.float64)
    return result


def ncg(ranked: Ranked, k: int) -> np.ndarray:
    r"""``NCG@k`` (Järvelin and Kekäläinen, TOIS 2002, cumulative gain normalised):
    :math:`\sum_{i \le m} g_i \big/ \sum_{j \le \min(k, R^+)} g^*_j` with :math:`g^*` the
    positive qrels values in decreasing order (0 if there are none)."""
    gained = _upto(ranked, ranked.gain, k)
    ideal_rank = rank_within(ranked.ideal_start)
    best = segment_sum(np.where(ideal_rank <= k, ranked.ideal_gain, 0.0), ranked.ideal_start)
    return safe_divide(gained, best, best > 0)
