r"""trec_eval's measures, vectorised over all queries of a :class:`~.ranking.Ranked` run.

Notation for one query: documents at ranks :math:`i = 1..n` (``num_ret``, after ``-M``),
:math:`h_i = 1` if document :math:`i` is relevant (qrels value :math:`\ge` level), :math:`g_i` its
gain (the qrels value where positive, else 0, whatever the level), :math:`H_k = \sum_{i \le
\min(k, n)} h_i`, :math:`R` the relevant documents in the qrels (``num_rel``), :math:`N` the
judged non-relevant ones (:math:`0 \le` value :math:`<` level). Every measure but the counts is 0
for a query with :math:`R = 0` (trec_eval evaluates such queries, and they count in the mean).

Each function takes the :class:`~.ranking.Ranked` run (and the measure's parameters) and returns
one float per query. The definitions follow trec_eval 9.0.8's ``m_<name>.c`` (docs/retrieval.md
has every formula and the file it comes from).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TypeVar
from weakref import WeakKeyDictionary

import numpy as np

from metricalc.retrieval.ranking import NOT_IN_POOL, UNJUDGED, Ranked

T = TypeVar("T")

__all__ = [
    "EXPECTED_OK",
    "GM_FLOOR",
    "bpref",
    "eleven_point",
    "f1_at_k",
    "iprec_at_recall",
    "map_",
    "map_cut",
    "ndcg",
    "ndcg_cut",
    "num_nonrel_judged_ret",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "once_per_ranked",
    "precision_at_k",
    "precision_sums",
    "recall_at_k",
    "recip_rank",
    "relative_p",
    "rprec",
    "rprec_mult",
    "segment_sum",
    "set_f",
    "set_map",
    "set_p",
    "set_recall",
    "set_relative_p",
    "success",
]

GM_FLOOR = 1e-5
"""trec_eval's MIN_GEO_MEAN: ``gm_map`` floors each query's AP at this value."""

EXPECTED_OK = frozenset({
    "num_ret", "num_rel", "num_rel_ret", "P", "recall", "Rprec", "ndcg", "ndcg_cut",
    "set_P", "set_recall", "set_F", "f1", "map", "map_cut", "recip_rank", "success",
    "relative_P", "set_relative_P", "Rprec_mult",
})
"""Measures whose value under ``tie_policy="expected"`` is their exact expectation over uniformly
random orders of the tied documents: those linear in the per-position relevance indicators and gains
(given ``num_ret``), and AP, reciprocal rank and success in closed form. ``bpref``,
``iprec_at_recall``, ``11pt_avg``, ``set_map``, ``num_nonrel_judged_ret`` and the geometric
means have none here."""


# --------------------------------------------------------------------------------------------
# Segment helpers: one query = one segment of the position arrays
# --------------------------------------------------------------------------------------------


def _segment_reduce(ufunc: np.ufunc, values: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    empty: float) -> np.ndarray:
    """``ufunc.reduce(values[lo[q]:hi[q]])`` for every q (``empty`` where lo >= hi), in order."""
    out = np.full(lo.shape, empty, dtype=np.float64)
    ok = hi > lo
    if ok.any():
        values = values.astype(np.float64, copy=False)
        bounds = np.empty(2 * int(ok.sum()), dtype=np.int64)
        bounds[0::2] = lo[ok]
        bounds[1::2] = hi[ok]
        if bounds[-1] == values.size:  # reduceat's last segment runs to the end anyway
            bounds = bounds[:-1]
        out[ok] = ufunc.reduceat(values, bounds)[0::2]
    return out


def segment_sum(values: np.ndarray, start: np.ndarray) -> np.ndarray:
    """The sum of ``values[start[q]:start[q + 1]]`` for every q, added in order."""
    return _segment_reduce(np.add, values, start[:-1], start[1:], 0.0)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0."""
    den = np.asarray(den, dtype=np.float64)
    result: np.ndarray = np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape),
                                   where=den != 0)
    return result


class _Prefix:
    """Cumulative sums of a per-position array, read per query up to a cutoff.

    One global cumulative sum serves every query when the values are integers (exact in floating
    point); expectations (``tie_policy="expected"``) are summed query by query instead, so that no
    rounding of the other queries' totals reaches them.
    """

    def __init__(self, ranked: Ranked, values: np.ndarray) -> None:
        self.values = values
        self.total = np.r_[0.0, np.cumsum(values)]
        self.lo = ranked.start[:-1]
        self.n = ranked.num_ret
        self.exact = ranked.tie_groups is None

    def upto(self, k: np.ndarray | int) -> np.ndarray:
        """Sum over the first min(k, n) positions of each query."""
        hi = self.lo + np.minimum(k, self.n)
        if self.exact:
            result: np.ndarray = self.total[hi] - self.total[self.lo]
            return result
        return _segment_reduce(np.add, self.values, self.lo, hi, 0.0)

    def within(self) -> np.ndarray:
        """Per position, the sum over the positions of its query up to and including it (for
        integer values only: the measures needing it have their own expected form)."""
        result: np.ndarray = self.total[1:] - np.repeat(self.total[self.lo], self.n)
        return result


def once_per_ranked(compute: Callable[[Ranked], T]) -> Callable[[Ranked], T]:
    """``compute``, called once per :class:`Ranked` (while it is in use): the arrays several
    measures and cutoffs read (``all_trec`` reads the cumulative hits a hundred times)."""
    done: WeakKeyDictionary[Ranked, T] = WeakKeyDictionary()

    @wraps(compute)
    def once(ranked: Ranked) -> T:
        if ranked not in done:
            done[ranked] = compute(ranked)
        return done[ranked]

    return once


@once_per_ranked
def _hits(ranked: Ranked) -> _Prefix:
    return _Prefix(ranked, ranked.hit)


# --------------------------------------------------------------------------------------------
# Counts and set measures
# --------------------------------------------------------------------------------------------


def num_ret(ranked: Ranked) -> np.ndarray:
    r""":math:`n`, the documents retrieved (after ``-M``); the summary is the sum."""
    return ranked.num_ret.astype(np.float64)


def num_rel(ranked: Ranked) -> np.ndarray:
    r""":math:`R`, the relevant documents in the qrels; the summary is the sum."""
    return ranked.num_rel.astype(np.float64)


def num_rel_ret(ranked: Ranked) -> np.ndarray:
    r""":math:`H_n`, the relevant documents retrieved; the summary is the sum."""
    return _hits(ranked).upto(ranked.num_ret)


def num_nonrel_judged_ret(ranked: Ranked) -> np.ndarray:
    r"""Judged non-relevant documents retrieved (qrels value :math:`\ge 0` and below the level);
    the summary is the sum."""
    judged = (ranked.code >= 0) & (ranked.hit == 0)
    return _Prefix(ranked, judged.astype(np.float64)).upto(ranked.num_ret)


def set_relative_p(ranked: Ranked) -> np.ndarray:
    r"""``set_relative_P``: :math:`H_n / \min(n, R)`."""
    return _ratio(num_rel_ret(ranked), np.minimum(ranked.num_ret, ranked.num_rel))


def set_map(ranked: Ranked) -> np.ndarray:
    r"""``set_map``: :math:`H_n^2 / (n R)`, set precision times set recall."""
    found = num_rel_ret(ranked)
    return _ratio(found * found, ranked.num_ret.astype(np.float64) * ranked.num_rel)


def set_p(ranked: Ranked) -> np.ndarray:
    r"""``set_P``: :math:`H_n / n`."""
    return _ratio(num_rel_ret(ranked), ranked.num_ret)


def set_recall(ranked: Ranked) -> np.ndarray:
    r"""``set_recall``: :math:`H_n / R` (0 if :math:`R = 0`)."""
    return _ratio(num_rel_ret(ranked), ranked.num_rel)


def set_f(ranked: Ranked, beta: float = 1.0) -> np.ndarray:
    r"""``set_F``: :math:`\frac{(\beta + 1) P R}{\beta P + R}` with :math:`P = H_n / n`,
    :math:`R = H_n / R` (trec_eval's parameter :math:`\beta` weighs recall; 0 if :math:`H_n = 0`).
    """
    found = num_rel_ret(ranked)
    p = _ratio(found, ranked.num_ret)
    r = _ratio(found, ranked.num_rel)
    return _ratio((beta + 1.0) * p * r, np.where(found > 0, beta * p + r, 0.0))


# --------------------------------------------------------------------------------------------
# Cutoff measures
# --------------------------------------------------------------------------------------------


def precision_at_k(ranked: Ranked, k: int) -> np.ndarray:
    r"""``P_k``: :math:`H_k / k` (missing ranks count as non-relevant)."""
    return _hits(ranked).upto(k) / k


def recall_at_k(ranked: Ranked, k: int) -> np.ndarray:
    r"""``recall_k``: :math:`H_k / R`."""
    return _ratio(_hits(ranked).upto(k), ranked.num_rel)


def success(ranked: Ranked, k: int) -> np.ndarray:
    r"""``success_k``: 1 if :math:`H_k > 0`, else 0.

    Under ``tie_policy="expected"``: the probability that the first :math:`m = \min(k, n)` ranks
    hold a relevant document; with the tie group at rank :math:`m` (:math:`t` documents, :math:`r`
    relevant, :math:`m'` of them within the first :math:`m` ranks, :math:`c` relevant ones
    before it): 1 if :math:`c > 0`, else :math:`1 - \binom{t - r}{m'} / \binom{t}{m'}`."""
    groups = ranked.tie_groups
    if groups is None:
        return (_hits(ranked).upto(k) > 0).astype(np.float64)
    m = np.minimum(k, ranked.num_ret)
    out = np.zeros(len(ranked.qids))
    q = np.flatnonzero(m > 0)
    at = ranked.start[q] + m[q] - 1
    t, r = groups.size[at], groups.relevant[at].round()
    inside = m[q] - groups.first[at] + 1
    none = np.exp(_log_comb(t - r, inside) - _log_comb(t, inside))
    out[q] = np.where(groups.before[at] > 0, 1.0, 1.0 - none)
    return out


def f1_at_k(ranked: Ranked, k: int) -> np.ndarray:
    r"""``f1_k`` (ranx ``f1@k``, not a trec_eval measure): :math:`\frac{2 P_k\, r_k}{P_k + r_k}`
    with :math:`P_k = H_k / k`, :math:`r_k = H_k / R`; 0 if :math:`H_k = 0`."""
    found = _hits(ranked).upto(k)
    p = found / k
    r = _ratio(found, ranked.num_rel)
    return _ratio(2.0 * p * r, p + r)


def relative_p(ranked: Ranked, k: int) -> np.ndarray:
    r"""``relative_P_k``: :math:`H_k / \min(k, R)`."""
    return _ratio(_hits(ranked).upto(k), np.minimum(k, ranked.num_rel))


def rprec_mult(ranked: Ranked, x: float) -> np.ndarray:
    r"""``Rprec_mult_x``: precision at rank :math:`c = \lfloor xR + 0.9 \rfloor`,
    :math:`H_c / c` (missing ranks non-relevant; 0 if :math:`c = 0`)."""
    cut = (x * ranked.num_rel.astype(np.float64) + 0.9).astype(np.int64)
    return _ratio(_hits(ranked).upto(cut), cut)


def rprec(ranked: Ranked) -> np.ndarray:
    r"""``Rprec``: :math:`H_R / R`, precision at rank :math:`R` (0 if :math:`R = 0`)."""
    return _ratio(_hits(ranked).upto(ranked.num_rel), ranked.num_rel)


# --------------------------------------------------------------------------------------------
# Rank measures
# --------------------------------------------------------------------------------------------


@once_per_ranked
def _precision_at_hits(ranked: Ranked) -> np.ndarray:
    r"""Per position, :math:`h_i H_i / i`; under ``tie_policy="expected"`` its expectation
    :math:`\frac{r}{t} \big(c + 1 + (j - 1) \frac{r - 1}{t - 1}\big) / i` for the :math:`j`-th
    position of a tie group of :math:`t` documents, :math:`r` relevant, :math:`c` relevant ones
    ranked before the group (given that position holds a relevant document, each of the other
    :math:`j - 1` positions does with probability :math:`(r - 1) / (t - 1)`)."""
    groups = ranked.tie_groups
    if groups is None:
        plain: np.ndarray = ranked.hit * _hits(ranked).within() / ranked.rank
        return plain
    rank = ranked.rank
    t = groups.size.astype(np.float64)
    r = groups.relevant
    j = rank - groups.first + 1
    others = (j - 1) * (r - 1) / np.maximum(t - 1, 1)
    result: np.ndarray = r / t * (groups.before + 1 + others) / rank
    return result


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    r""":math:`\log \binom{n}{k}` (``-inf`` where k > n)."""
    from scipy.special import gammaln

    n, k = np.asarray(n, dtype=np.float64), np.asarray(k, dtype=np.float64)
    ok = (k >= 0) & (k <= n)
    out = np.full(np.broadcast(n, k).shape, -np.inf)
    kk, nn = np.broadcast_to(k, out.shape)[ok], np.broadcast_to(n, out.shape)[ok]
    out[ok] = gammaln(nn + 1) - gammaln(kk + 1) - gammaln(nn - kk + 1)
    return out


def precision_sums(ranked: Ranked) -> np.ndarray:
    r""":math:`\sum_{i \le n} h_i H_i / i`, AP times :math:`R`."""
    return segment_sum(_precision_at_hits(ranked), ranked.start)


def map_(ranked: Ranked) -> np.ndarray:
    r"""``map`` (per query: AP): :math:`\frac{1}{R} \sum_{i \le n} h_i \frac{H_i}{i}`."""
    return _ratio(precision_sums(ranked), ranked.num_rel)


def map_cut(ranked: Ranked, k: int) -> np.ndarray:
    r"""``map_cut_k``: :math:`\frac{1}{R} \sum_{i \le \min(k, n)} h_i \frac{H_i}{i}`."""
    lo = ranked.start[:-1]
    hi = lo + np.minimum(k, ranked.num_ret)
    return _ratio(_segment_reduce(np.add, _precision_at_hits(ranked), lo, hi, 0.0),
                  ranked.num_rel)


def recip_rank(ranked: Ranked) -> np.ndarray:
    r"""``recip_rank``: :math:`1 / \min\{i : h_i = 1\}`, 0 if no relevant document is retrieved.

    Under ``tie_policy="expected"``: the first tie group holding a relevant document starts after
    rank :math:`s`, has :math:`t` documents, :math:`r` relevant; the first relevant one is its
    :math:`x`-th with probability :math:`\binom{t - x}{r - 1} / \binom{t}{r}`, so the value is
    :math:`\sum_x \binom{t - x}{r - 1} \binom{t}{r}^{-1} / (s + x)` over the ranks kept."""
    where = np.flatnonzero(ranked.hit > 0)
    query = ranked.query[where]
    first = np.r_[True, query[1:] != query[:-1]] if where.size else np.zeros(0, dtype=bool)
    out = np.zeros(len(ranked.qids))
    groups = ranked.tie_groups
    if groups is None:
        out[query[first]] = 1.0 / ranked.rank[where[first]]
        return out
    at = where[first]
    q = query[first]
    s = groups.first[at] - 1
    t, r = groups.size[at], groups.relevant[at].round().astype(np.int64)
    count = np.minimum(t - r + 1, ranked.num_ret[q] - s)
    x = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count) + 1
    t_x, r_x, s_x = (np.repeat(a, count) for a in (t, r, s))
    p = np.exp(_log_comb(t_x - x, r_x - 1) - _log_comb(t_x, r_x))
    out[q] = np.bincount(np.repeat(np.arange(q.size), count), weights=p / (s_x + x),
                         minlength=q.size)
    return out


def bpref(ranked: Ranked) -> np.ndarray:
    r"""``bpref``: :math:`\frac{1}{R} \sum_{\text{relevant retrieved } i} \left(1 -
    \frac{\min(m_i, R)}{\min(N, R)}\right)`, :math:`m_i` the judged non-relevant documents above
    rank :math:`i` (documents not in the pool or unjudged are skipped; a term is 1 when
    :math:`m_i = 0`)."""
    lo = ranked.start[:-1]
    return _ratio(_segment_reduce(np.add, _bpref_terms(ranked), lo, ranked.start[1:], 0.0),
                  ranked.num_rel)


@once_per_ranked
def _bpref_terms(ranked: Ranked) -> np.ndarray:
    """Per position, the term of :func:`bpref` (0 unless a judged relevant document)."""
    judged = (ranked.code != NOT_IN_POOL) & (ranked.code != UNJUDGED)
    nonrel = judged & (ranked.hit == 0)
    at = np.flatnonzero(judged & (ranked.hit > 0))  # the other terms are 0
    prefix = _Prefix(ranked, nonrel.astype(np.float64))
    q = ranked.query[at]
    above = prefix.total[at + 1] - prefix.total[ranked.start[q]]  # judged non-relevant above
    R = ranked.num_rel[q].astype(np.float64)
    N = ranked.num_nonrel[q].astype(np.float64)
    terms = np.zeros(ranked.code.size)
    terms[at] = np.where(above > 0, 1.0 - _ratio(np.minimum(above, R), np.minimum(N, R)), 1.0)
    return terms


def iprec_at_recall(ranked: Ranked, level: float) -> np.ndarray:
    r"""``iprec_at_recall_x``: interpolated precision at recall level :math:`x`.

    With :math:`r_j` the rank of the :math:`j`-th relevant retrieved document and
    :math:`c = \lfloor xR + 0.9 \rfloor` (trec_eval's rounding), the value is
    :math:`\max_{j \ge \max(c, 1)} j / r_j` if :math:`c \le H_n` and :math:`H_n > 0`, else 0.
    """
    prec = _precision_at_relevant(ranked)
    found = num_rel_ret(ranked).astype(np.int64)
    hit_start = np.r_[0, np.cumsum(found)]
    cut = (level * ranked.num_rel.astype(np.float64) + 0.9).astype(np.int64)
    lo = hit_start[:-1] + np.maximum(cut, 1) - 1
    out = _segment_reduce(np.maximum, prec, lo, hit_start[1:], 0.0)
    return np.where((cut <= found) & (found > 0), out, 0.0)


@once_per_ranked
def _precision_at_relevant(ranked: Ranked) -> np.ndarray:
    """:math:`j / r_j` of every relevant retrieved document, in rank order."""
    where = np.flatnonzero(ranked.hit > 0)
    prec: np.ndarray = ranked.hit[where] * _hits(ranked).within()[where] / ranked.rank[where]
    return prec


def eleven_point(ranked: Ranked, levels: tuple[float, ...]) -> np.ndarray:
    r"""``11pt_avg``: the mean of ``iprec_at_recall`` over ``levels`` (default 0.0, 0.1, ...,
    1.0)."""
    result: np.ndarray = np.mean([iprec_at_recall(ranked, x) for x in levels], axis=0)
    return result


def _log2_discount(rank: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(rank + 1.0)


def ndcg(ranked: Ranked) -> np.ndarray:
    r"""``ndcg``: :math:`\sum_{i \le n} \frac{g_i}{\log_2(i + 1)} \big/ \sum_{j} \frac{g^*_j}
    {\log_2(j + 1)}` with :math:`g^*` the positive qrels values in decreasing order (0 if there
    are none). Gains are the qrels values, whatever the level."""
    lo = ranked.start[:-1]
    dcg = _segment_reduce(np.add, _dcg_terms(ranked), lo, ranked.start[1:], 0.0)
    return _ratio(dcg, _ideal_dcg(ranked, None))


def ndcg_cut(ranked: Ranked, k: int) -> np.ndarray:
    r"""``ndcg_cut_k``: ``ndcg`` with both sums over the first :math:`k` ranks."""
    lo = ranked.start[:-1]
    dcg = _segment_reduce(np.add, _dcg_terms(ranked), lo, lo + np.minimum(k, ranked.num_ret), 0.0)
    return _ratio(dcg, _ideal_dcg(ranked, k))


@once_per_ranked
def _dcg_terms(ranked: Ranked) -> np.ndarray:
    r"""Per position, :math:`g_i / \log_2(i + 1)`."""
    terms: np.ndarray = ranked.gain * _log2_discount(ranked.rank)
    return terms


def _ideal_dcg(ranked: Ranked, k: int | None) -> np.ndarray:
    lo = ranked.ideal_start[:-1]
    count = np.diff(ranked.ideal_start)
    rank = np.arange(ranked.ideal_gain.size) - np.repeat(lo, count) + 1
    hi = ranked.ideal_start[1:] if k is None else lo + np.minimum(k, count)
    return _segment_reduce(np.add, ranked.ideal_gain * _log2_discount(rank), lo, hi, 0.0)
