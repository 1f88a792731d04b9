r"""trec_eval's graded-gain and sampled-pool measures, vectorised over all queries.

Notation as in :mod:`~metricalc.retrieval.measures`; besides, :math:`c_i` is the relevance code
of the document at rank :math:`i` (its qrels value, ``-1`` not in the qrels, ``-2`` a negative
qrels value), :math:`g(v)` the gain of qrels value :math:`v` (:math:`v` itself, or the custom
gain given as ``level=gain`` pairs: ``ndcg.1=3,2=9``; ``-1`` and ``-2`` have gain 0 unless a
pair names them), :math:`g^*_1 \ge g^*_2 \ge \dots \ge g^*_{R^+}` the positive gains of the
judged documents of the query (the ideal ranking) and :math:`DCG_k = \sum_{i \le \min(k, n)}
g(c_i) / \log_2(i + 1)`, :math:`IDCG_k = \sum_{j \le \min(k, R^+)} g^*_j / \log_2(j + 1)`.

The definitions follow trec_eval 9.0.8's ``m_ndcg.c``, ``m_ndcg_rel.c``, ``m_Rndcg.c``,
``m_G.c``, ``m_binG.c``, ``m_infap.c``, ``m_yaap.c``, ``m_utility.c`` and ``m_relstring.c``;
docs/retrieval.md has every formula.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from metricalc.retrieval.measures import num_rel_ret, once_per_ranked, precision_sums, segment_sum
from metricalc.retrieval.ranking import NOT_IN_POOL, UNJUDGED, Ranked

__all__ = [
    "INFAP_EPSILON",
    "Gains",
    "bin_g",
    "cumsum_within",
    "g_measure",
    "infap",
    "ndcg_gains",
    "ndcg_rel",
    "rank_within",
    "relstring",
    "rndcg",
    "running_at",
    "safe_divide",
    "utility",
    "yaap",
]

INFAP_EPSILON = 1e-5
"""trec_eval's INFAP_EPSILON, the smoothing of infAP's precision among judged documents."""

Gains = Sequence[tuple[int, float]]
"""Custom gains: ``(qrels value, gain)`` pairs; the first pair of a value counts."""


def safe_divide(num: np.ndarray, den: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """``num / den`` where ``ok``, else 0."""
    num = np.asarray(num, dtype=np.float64)
    result: np.ndarray = np.divide(num, den, out=np.zeros(np.broadcast(num, den).shape),
                                   where=ok)
    return result


def gain_of(values: np.ndarray, gains: Gains) -> np.ndarray:
    """The gain of each relevance code: the code where >= 0 (else 0), or its custom gain."""
    out: np.ndarray = np.maximum(values, 0).astype(np.float64)
    for level, gain in reversed(list(gains)):  # the first pair of a level wins
        out[values == level] = gain
    return out


def _position_gains(ranked: Ranked, gains: Gains) -> np.ndarray:
    return ranked.gain if not gains else gain_of(ranked.code, gains)


def _ideal(ranked: Ranked, gains: Gains) -> tuple[np.ndarray, np.ndarray]:
    """The positive gains of each query's judged documents, descending, and their offsets."""
    if not gains:
        return ranked.ideal_gain, ranked.ideal_start
    n_q = len(ranked.qids)
    zeros = ranked.num_zero if ranked.num_zero is not None else np.zeros(n_q, dtype=np.int64)
    values = np.r_[ranked.ideal_gain.astype(np.int64), np.zeros(int(zeros.sum()), np.int64)]
    query = np.r_[np.repeat(np.arange(n_q), np.diff(ranked.ideal_start)),
                  np.repeat(np.arange(n_q), zeros)]
    g = gain_of(values, gains)
    keep = g > 0
    g, query = g[keep], query[keep]
    order = np.lexsort((-g, query))
    return g[order], np.r_[0, np.cumsum(np.bincount(query, minlength=n_q))]


def cumsum_within(values: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per position, the running sum of ``values`` inside its segment (segments
    ``start[q]:start[q + 1]``), added in order as a per-query loop adds them."""
    if values.size == 0:
        return values.astype(np.float64)
    lengths = np.diff(start)
    # the segments as the rows of a padded matrix: np.cumsum along a row adds in order, as the
    # loop does; zeros after a segment's end change nothing before it
    rows, width = lengths.size, int(lengths.max(initial=0))
    if (lengths == width).all():  # no padding: the values are that matrix
        result_rows: np.ndarray = np.cumsum(values.reshape(rows, width), axis=1,
                                            dtype=np.float64)
        return result_rows.reshape(-1)
    column = np.arange(values.size) - np.repeat(start[:-1], lengths)
    row = np.repeat(np.arange(rows), lengths)
    result = np.empty(values.size, dtype=np.float64)
    block = max(1, (1 << 22) // max(width, 1))  # rows per block: bounded memory
    for first in range(0, rows, block):
        last = min(rows, first + block)
        inside = slice(int(start[first]), int(start[last]))
        padded = np.zeros((last - first, width))
        padded[row[inside] - first, column[inside]] = values[inside]
        result[inside] = np.cumsum(padded, axis=1)[row[inside] - first, column[inside]]
    return result


def running_at(values: np.ndarray, ranked: Ranked, at: np.ndarray, integers: bool) -> np.ndarray:
    """:func:`cumsum_within` of ``values`` over the queries of ``ranked``, at the positions
    ``at``; when the values are integers, from one running sum over all positions less the one
    before each query: exact too, and cheaper."""
    if not integers:
        within: np.ndarray = cumsum_within(values, ranked.start)[at]
        return within
    total = np.cumsum(values, dtype=np.float64)
    before = np.r_[0.0, total][ranked.start[:-1]]
    result: np.ndarray = total[at] - before[ranked.query[at]]
    return result


def _integers(ranked: Ranked, gains: Gains = ()) -> bool:
    """Whether the relevance indicators and gains of ``ranked`` are integers (not the
    expectations of ``tie_policy="expected"``, no custom gains)."""
    return ranked.tie_groups is None and not gains


@once_per_ranked
def _running_dcg(ranked: Ranked) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_dcgs` with the qrels values as gains, which ``ndcg_rel`` and ``Rndcg`` both
    read."""
    return _dcgs(ranked, ())


def _dcgs(ranked: Ranked, gains: Gains) -> tuple[np.ndarray, np.ndarray]:
    """The running DCG of every position and the running ideal DCG of every ideal position."""
    g = _position_gains(ranked, gains)
    ideal, ideal_start = _ideal(ranked, gains)
    dcg = cumsum_within(g / np.log2(ranked.rank + 1.0), ranked.start)
    idcg = cumsum_within(ideal / np.log2(rank_within(ideal_start) + 1.0), ideal_start)
    return dcg, idcg


def rank_within(start: np.ndarray) -> np.ndarray:
    """The 1-based rank of every position inside its segment ``start[q]:start[q + 1]``."""
    rank: np.ndarray = np.arange(start[-1]) - np.repeat(start[:-1], np.diff(start)) + 1
    return rank


def _at(cumulative: np.ndarray, first: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``cumulative[first + k - 1]``: a running sum at the ``k``-th position of the segments
    starting at ``first`` (0 where ``k`` is 0)."""
    safe = np.append(cumulative, 0.0)
    index = np.where(k > 0, first + k - 1, cumulative.size)
    result: np.ndarray = safe[index]
    return result


def ndcg_gains(ranked: Ranked, gains: Gains = ()) -> np.ndarray:
    r"""``ndcg`` with custom gains: :math:`DCG_n / IDCG_{R^+}` (0 if :math:`IDCG = 0`); gains may
    be 0 or negative, only positive ones enter the ideal ranking."""
    g = _position_gains(ranked, gains)
    ideal, ideal_start = _ideal(ranked, gains)
    dcg = segment_sum(g / np.log2(ranked.rank + 1.0), ranked.start)
    idcg = segment_sum(ideal / np.log2(rank_within(ideal_start) + 1.0), ideal_start)
    return safe_divide(dcg, idcg, idcg > 0)


def ndcg_rel(ranked: Ranked, gains: Gains = ()) -> np.ndarray:
    r"""``ndcg_rel``: nDCG averaged over the :math:`R^+` documents of positive gain,
    :math:`\frac{1}{R^+} \big(\sum_{i \le n,\, g(c_i) > 0} DCG_i / IDCG_i + (R^+ - m)\,
    DCG_n / IDCG_{R^+}\big)` with :math:`m` the retrieved documents of positive gain (0 if the
    sum is not positive)."""
    g = _position_gains(ranked, gains)
    ideal_start = _ideal(ranked, gains)[1]
    n_ideal = np.diff(ideal_start)
    dcg, idcg = _running_dcg(ranked) if not gains else _dcgs(ranked, gains)
    positive = np.flatnonzero(g > 0)  # the other terms are 0
    q = ranked.query[positive]
    at_ideal = _at(idcg, ideal_start[q], np.minimum(ranked.rank[positive], n_ideal[q]))
    terms = np.zeros(g.size)
    terms[positive] = safe_divide(dcg[positive], at_ideal, at_ideal > 0)
    total = segment_sum(terms, ranked.start)
    found = np.bincount(q, minlength=len(ranked.qids))
    full = _at(idcg, ideal_start[:-1], n_ideal)
    last = _at(dcg, ranked.start[:-1], ranked.num_ret)
    total = total + safe_divide((n_ideal - found) * last, full, full > 0)
    return safe_divide(total, n_ideal, total > 0)


def rndcg(ranked: Ranked, gains: Gains = ()) -> np.ndarray:
    r"""``Rndcg``: nDCG averaged at the R-levels, the ranks :math:`b` where the ideal gain
    :math:`g^*_b` is the last of its value (the last one :math:`b = R^+`), and at :math:`n` if
    :math:`n > R^+ + 1` (trec_eval's loop, as written, records no point at :math:`n = R^+ + 1`):
    the mean of :math:`DCG_b / IDCG_b` over them (0 if :math:`R = 0` or there is no such
    rank)."""
    ideal, ideal_start = _ideal(ranked, gains)
    n_ideal = np.diff(ideal_start)
    n_q = len(ranked.qids)
    dcg, idcg = _running_dcg(ranked) if not gains else _dcgs(ranked, gains)
    ideal_q = np.repeat(np.arange(n_q), n_ideal)
    last_of_value = np.r_[ideal[1:] != ideal[:-1], True]
    last_of_query = np.r_[ideal_q[1:] != ideal_q[:-1], True]
    where = np.flatnonzero((last_of_value | last_of_query)[:ideal.size])
    point_q = ideal_q[where]
    b = where - ideal_start[point_q] + 1
    value = idcg[where]
    reached = np.minimum(b, ranked.num_ret[point_q])
    num = _at(dcg, ranked.start[point_q], reached)
    ratio = safe_divide(num, value, value > 0)
    count = np.bincount(point_q[value > 0], minlength=n_q).astype(np.float64)
    total = np.bincount(point_q, weights=ratio, minlength=n_q)
    beyond = ranked.num_ret > n_ideal + 1  # trec_eval's loop passes rank R+ + 1 unrecorded
    full = _at(idcg, ideal_start[:-1], n_ideal)
    tail = beyond & (full > 0)
    last = _at(dcg, ranked.start[:-1], ranked.num_ret)
    total = total + safe_divide(last, full, tail)
    count = count + tail
    out = safe_divide(total, count, count > 0)
    return np.where(ranked.num_rel > 0, out, 0.0)


def g_measure(ranked: Ranked, gains: Gains = ()) -> np.ndarray:
    r"""``G``: :math:`\frac{1}{\sum_j g^*_j} \sum_{i \le n,\, g(c_i) \ne 0} g(c_i) / \log_2(2 +
    C_i - S_i)`, with :math:`S_i = \sum_{i' \le i} g(c_{i'})` and :math:`C_i = \sum_{i' \le i}
    \max(g^*_{i'}, 1)` (:math:`g^*_{i'} = 0` past :math:`R^+`); 0 if there is no positive gain."""
    g = _position_gains(ranked, gains)
    ideal, ideal_start = _ideal(ranked, gains)
    n_ideal = np.diff(ideal_start)
    nonzero = np.flatnonzero(g != 0)  # the other terms are 0
    if _integers(ranked, gains):  # ideal gains of 1 or more: C_i in closed form, exact
        rank, q = ranked.rank[nonzero], ranked.query[nonzero]
        k = np.minimum(rank, n_ideal[q])
        ideal_sum = np.r_[0.0, np.cumsum(ideal)]
        spent = ideal_sum[ideal_start[q] + k] - ideal_sum[ideal_start[q]] + (rank - k)
    else:
        rank, q = ranked.rank, ranked.query
        ideal_here = _at(ideal, ideal_start[q], np.where(rank <= n_ideal[q], rank, 0))
        cost = np.where(ideal_here >= 1.0, ideal_here, 1.0)
        spent = cumsum_within(cost, ranked.start)[nonzero]
    got = running_at(g, ranked, nonzero, _integers(ranked, gains))
    terms = np.zeros_like(g)
    terms[nonzero] = g[nonzero] / np.log2(2.0 + spent - got)
    total = segment_sum(ideal, ideal_start)
    found = segment_sum(terms, ranked.start)
    return safe_divide(found, total, total > 0)


def bin_g(ranked: Ranked) -> np.ndarray:
    r"""``binG``: :math:`\frac{1}{R} \sum_{i \le n,\, h_i = 1} 1 / \log_2(2 + i - H_i)`, each
    relevant document discounted by the non-relevant ones above it."""
    at = np.flatnonzero(ranked.hit > 0)
    found = running_at(ranked.hit, ranked, at, _integers(ranked))
    terms = np.zeros(ranked.hit.size)
    terms[at] = 1.0 / np.log2(2.0 + ranked.rank[at] - found)
    total = segment_sum(terms, ranked.start)
    return safe_divide(total, ranked.num_rel, ranked.num_rel > 0)


def infap(ranked: Ranked) -> np.ndarray:
    r"""``infAP`` (Yilmaz and Aslam, CIKM 2006): with :math:`r_j`, :math:`m_j`, :math:`u_j` the
    relevant, judged non-relevant and pooled-unjudged (qrels value < 0) documents above rank
    :math:`j` (documents outside the qrels are skipped), each relevant document at rank
    :math:`j` adds 1 if :math:`j = 1`, else :math:`\frac{1}{j} + \frac{j - 1}{j}
    \frac{r_j + m_j + u_j}{j - 1} \frac{r_j + \epsilon}{r_j + m_j + 2\epsilon}`; the sum is
    divided by :math:`R` (:math:`\epsilon` = :data:`INFAP_EPSILON`)."""
    code = ranked.code
    rel = (ranked.hit > 0) & (code >= 0)
    judged = code >= 0
    # counts above each relevant document (the others add nothing)
    at = np.flatnonzero(rel)
    r, judged_before, pooled_before = (
        running_at(x, ranked, at, _integers(ranked)) - 1.0  # less the document itself
        for x in (rel, judged, judged | (code == UNJUDGED))
    )
    m, u = judged_before - r, pooled_before - judged_before
    fj = ranked.rank[at] - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        later = (1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((r + m + u) / fj)
                 * ((r + INFAP_EPSILON) / (r + m + 2 * INFAP_EPSILON)))
    terms = np.zeros(code.size)
    terms[at] = np.where(fj == 0, 1.0, later)
    total = segment_sum(terms, ranked.start)
    return safe_divide(total, ranked.num_rel, ranked.num_rel > 0)


def yaap(ranked: Ranked) -> np.ndarray:
    r"""``yaap`` (Robertson, ECIR 2012): :math:`\log \frac{1 + s}{1 + R - s}` with
    :math:`s = \sum_{i \le n} h_i H_i / i` (AP times :math:`R`)."""
    s = precision_sums(ranked)
    result: np.ndarray = np.log((1.0 + s) / (1.0 + ranked.num_rel - s))
    return result


def utility(ranked: Ranked, coefficients: Sequence[float], num_docs: int = 0) -> np.ndarray:
    r"""``utility``: :math:`p_1 a + p_2 b + p_3 c + p_4 d` over the contingency table of the
    retrieved set, :math:`a = H_n`, :math:`b = n - H_n`, :math:`c = R - H_n`, :math:`d = N_{coll}
    + H_n - n - R` (:math:`N_{coll}`: ``-N``, the documents in the collection; default 0)."""
    p1, p2, p3, p4 = coefficients
    a = num_rel_ret(ranked)
    n = ranked.num_ret.astype(np.float64)
    R = ranked.num_rel.astype(np.float64)
    result: np.ndarray = p1 * a + p2 * (n - a) + p3 * (R - a) + p4 * (num_docs + a - n - R)
    return result


_CHARS = np.frombuffer(b"0123456789", dtype=np.uint8)


def relstring(ranked: Ranked, length: int) -> np.ndarray:
    """``relstring``: the relevance codes of the first ``length`` documents as a string, one
    character each: the digit for 0 to 9, ``>`` above 9, ``-`` outside the qrels, ``.`` a
    negative qrels value. Per query only (no ``all`` value)."""
    code = ranked.code
    chars = np.where(code > 9, ord(">"), np.where(code >= 0, _CHARS[np.clip(code, 0, 9)],
                     np.where(code == NOT_IN_POOL, ord("-"), ord("."))))
    keep = ranked.rank <= max(length, 0)
    text = chars[keep].astype(np.uint8).tobytes().decode("ascii")
    count = np.minimum(ranked.num_ret, max(length, 0))
    bounds = np.r_[0, np.cumsum(count)].tolist()
    return np.array([text[a:b] for a, b in itertools.pairwise(bounds)], dtype=object)
