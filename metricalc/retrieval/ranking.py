"""A run joined with its qrels and ordered the way trec_eval orders it (``form_res_rels.c``).

Per query, trec_eval sorts the retrieved documents by score descending (as doubles, or as 32-bit
floats with ``scores="float32"``: :mod:`~metricalc.retrieval.order`), ties broken by docno
descending in byte order; ``-M depth`` keeps the first ``depth`` documents of that order, then
``-J`` (``judged_only``) drops the documents without a judgment (a qrels value >= 0), the others
moving up. Each retrieved document
gets the relevance code of trec_eval: its qrels value if judged (>= 0), ``-2`` if the qrels give
a negative value (in the pool but unjudged), ``-1`` if the qrels do not list it.

Everything here works on all queries at once: one sort of all run lines by (query, score), one
hash join with the qrels, per-query offsets; no Python loop per query.

Tie policies other than trec_eval's docno order (``tie_policy=``):

- ``"optimistic"`` / ``"pessimistic"``: inside a group of tied scores, documents in decreasing /
  increasing relevance code (then docno descending), the best / worst order for every measure;
- ``"expected"``: every position of a tie group holds the group's mean relevance indicator and
  mean gain, the expectation under a uniformly random order of the tied documents, and the
  groups' shape (:class:`TieGroups`) for the measures that need more than the means (see
  :data:`metricalc.retrieval.measures.EXPECTED_OK`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.retrieval.order import SCORES, Names, decode_ids, score_key, trec_order

if TYPE_CHECKING:
    from metricalc.retrieval.trec_files import Qrels, Run

__all__ = ["TIE_POLICIES", "Joined", "Ranked", "TieGroups", "join_run", "rank_joined", "rank_lists",
           "rank_run"]

TIE_POLICIES = ("trec_eval", "expected", "optimistic", "pessimistic")
"""How tied scores are ordered: trec_eval's docno order, or a tie policy (module docstring)."""
NOT_IN_POOL = -1
"""Relevance code of a retrieved document the qrels do not list (trec_eval RELVALUE_NONPOOL)."""
UNJUDGED = -2
"""Relevance code of a document with a negative qrels value (trec_eval RELVALUE_UNJUDGED)."""


@dataclass(frozen=True, eq=False)
class TieGroups:
    """Per position (``tie_policy="expected"``): its tie group's first rank in the query (1-based),
    size :math:`t`, relevant documents :math:`r`, and relevant documents ranked before the group
    :math:`c` (whole groups before it, so an integer). Sizes count the whole group, also the part
    a depth cut removes."""

    first: np.ndarray
    size: np.ndarray
    relevant: np.ndarray
    before: np.ndarray


@dataclass(frozen=True, eq=False)
class Ranked:
    """The evaluated queries (in run and qrels) with their ranked relevance codes.

    Positions ``start[q]:start[q + 1]`` are query ``q``'s retrieved documents in rank order.
    ``hit`` (document relevant: code >= level) and ``gain`` (the qrels value where positive, else
    0) are floats so that ``tie_policy="expected"`` can hold expectations in them. ``num_zero``
    counts the judgments of value 0 per query (with ``ideal_gain``, every judged value: what custom
    gains need).
    """

    qids: list[str]
    start: np.ndarray
    code: np.ndarray
    hit: np.ndarray
    gain: np.ndarray
    num_rel: np.ndarray
    num_nonrel: np.ndarray
    ideal_gain: np.ndarray
    ideal_start: np.ndarray
    n_qrels_queries: int
    tag: str
    tie_policy: str
    tie_groups: TieGroups | None = None
    num_zero: np.ndarray | None = None

    @cached_property
    def num_ret(self) -> np.ndarray:
        return _read_only(np.diff(self.start))

    @cached_property
    def query(self) -> np.ndarray:
        """The query index of every position."""
        return _read_only(np.repeat(np.arange(len(self.qids)), self.num_ret))

    @cached_property
    def rank(self) -> np.ndarray:
        """The 1-based rank of every position inside its query."""
        return _read_only(np.arange(self.code.size) - np.repeat(self.start[:-1], self.num_ret) + 1)


def _read_only(values: np.ndarray) -> np.ndarray:
    """``values``, made read-only: a :class:`Ranked` computes it once and shares it among the
    measures."""
    values.flags.writeable = False
    return values


@dataclass(frozen=True, eq=False)
class Joined:
    """A run's lines joined with the qrels, before ranking: line ``i`` of the run retrieves
    document ``doc[i]`` (a code of ``docnos``) with ``score[i]`` for the qrels query ``query[i]``
    (a code of ``qids``, the qrels' queries in byte order), and ``code[i]`` is its relevance code
    (the qrels value, ``UNJUDGED`` or ``NOT_IN_POOL``); the run's lines of queries without qrels
    are not here. ``qrels_query`` and ``rel`` are the qrels' judgments (query code, value).
    ``run_source`` and ``qrels_source`` name the data in messages."""

    query: np.ndarray
    doc: np.ndarray
    score: np.ndarray
    code: np.ndarray
    docnos: Names
    qids: Names
    qrels_query: np.ndarray
    rel: np.ndarray
    tag: str
    run_source: str = "run"
    qrels_source: str = "qrels"


def rank_run(qrels: Qrels, run: Run, *, level: int = 1, depth: int | None = None,
             tie_policy: str = "trec_eval", scores: str = "float64",
             judged_only: bool = False) -> Ranked:
    """Join ``run`` with ``qrels`` and rank every query of both as trec_eval does.

    Parameters
    ----------
    level : int
        Relevance level (trec_eval ``-l``): a document is relevant if its qrels value >= level.
    depth : int, optional
        Keep the first ``depth`` ranked documents of each query (trec_eval ``-M``).
    tie_policy : {"trec_eval", "expected", "optimistic", "pessimistic"}
        How tied scores are ordered (module docstring).
    scores : {"float64", "float32"}
        The precision at which scores compare (:mod:`~metricalc.retrieval.order`).
    judged_only : bool
        trec_eval ``-J``: after the depth cut, drop the retrieved documents without a judgment.
    """
    return rank_joined(join_run(qrels, run), level=level, depth=depth, tie_policy=tie_policy,
                       scores=scores, judged_only=judged_only)


def join_run(qrels: Qrels, run: Run) -> Joined:
    """The lines of ``run`` whose query has qrels, each with its relevance code: hash joins on
    the query and on (query, document), documents in the qrels' codes (the qrels' distinct
    documents hashed, usually fewer than the run's)."""
    # Qrels and Run hold pyarrow arrays: pyarrow is loaded already
    from metricalc.retrieval.arrow import from_numpy, index_in

    run_q = index_in(run.qids, qrels.qids)[run.qid]
    keep = np.flatnonzero(run_q >= 0)
    every = keep.size == run_q.size  # every query judged (the common case): no copies
    run_q = run_q if every else run_q[keep]
    run_doc = run.doc if every else run.doc[keep]
    n_docs = max(len(qrels.docnos), 1)
    run_qdoc = index_in(run.docnos, qrels.docnos)[run_doc]
    listed = np.flatnonzero(run_qdoc >= 0)
    found = np.full(run_q.size, -1, dtype=np.int64)
    found[listed] = index_in(from_numpy(run_q[listed] * n_docs + run_qdoc[listed]),
                             from_numpy(qrels.qid * n_docs + qrels.doc))
    return Joined(run_q, run_doc, run.score if every else run.score[keep],
                  relevance_code(found, qrels.rel), run.docnos,
                  qrels.qids, qrels.qid, qrels.rel, run.tag, run.source, qrels.source)


def relevance_code(found: np.ndarray, rel: np.ndarray) -> np.ndarray:
    """The relevance code of each run line from the index of its judgment in ``rel`` (-1: none):
    the qrels value, ``UNJUDGED`` where it is negative, ``NOT_IN_POOL`` where there is none.

    Examples
    --------
    >>> relevance_code(np.array([1, -1, 0]), np.array([-1, 2])).tolist()
    [2, -1, -2]
    """
    code = np.full(found.size, NOT_IN_POOL, dtype=np.int64)
    in_pool = found >= 0
    value = rel[found[in_pool]]
    code[in_pool] = np.where(value < 0, UNJUDGED, value)
    return code


def rank_joined(joined: Joined, *, level: int = 1, depth: int | None = None,
                tie_policy: str = "trec_eval", scores: str = "float64",
                judged_only: bool = False) -> Ranked:
    """Rank the joined lines of every query as trec_eval does (:func:`rank_run`'s options)."""
    if tie_policy not in TIE_POLICIES:
        raise InvalidInputError(
            f"tie_policy must be one of {', '.join(TIE_POLICIES)}; got {tie_policy!r}"
        )
    if scores not in SCORES:
        raise InvalidInputError(f"scores must be one of {', '.join(SCORES)}; got {scores!r}")
    if judged_only and tie_policy == "expected":
        raise InvalidInputError(
            "judged_only (-J) re-ranks the judged documents; tie_policy='expected' averages over "
            "tie groups that it would split: use one of them"
        )
    if depth is not None and depth < 1:
        raise InvalidInputError(f"depth (-M) must be a positive integer; got {depth}")
    if level < 0:
        raise InvalidInputError(f"level (-l) must be >= 0; got {level}")
    n_queries = len(joined.qids)
    order = trec_order(joined.query, joined.score, joined.doc, joined.docnos, code=joined.code,
                       tie_policy=tie_policy, scores=scores)
    run_q, code = joined.query[order], joined.code[order]
    hit = (code >= level).astype(np.float64)
    gain = np.maximum(code, 0).astype(np.float64)
    first = np.flatnonzero(np.r_[True, run_q[1:] != run_q[:-1]]) if run_q.size else run_q
    evaluated = run_q[first]  # run_q is sorted: its blocks are the queries
    counts = np.diff(np.r_[first, run_q.size])
    within = np.arange(run_q.size) - np.repeat(first, counts)  # 0-based rank in the query
    groups = None
    if tie_policy == "expected" and run_q.size:
        hit, gain, groups = _expected(run_q, score_key(joined.score[order], scores), hit,
                                      gain, within)
    if depth is not None:
        cut = within < depth
        code, hit, gain = code[cut], hit[cut], gain[cut]
        if groups is not None:
            groups = TieGroups(*(a[cut] for a in (groups.first, groups.size, groups.relevant,
                                                  groups.before)))
        counts = np.minimum(counts, depth)
    if judged_only:
        query = np.repeat(np.arange(counts.size), counts)
        cut = code >= 0
        code, hit, gain = code[cut], hit[cut], gain[cut]
        counts = np.bincount(query[cut], minlength=counts.size)
    start = np.r_[0, np.cumsum(counts)]
    # judgments per query: relevant, judged non-relevant, the ideal gains (positive, descending)
    qid, rel = joined.qrels_query, joined.rel
    is_rel = rel >= level
    num_rel = np.bincount(qid, weights=is_rel, minlength=n_queries).astype(np.int64)
    nonrel = (rel >= 0) & ~is_rel
    num_nonrel = np.bincount(qid, weights=nonrel, minlength=n_queries).astype(np.int64)
    num_zero = np.bincount(qid, weights=rel == 0, minlength=n_queries)
    ideal_gain, ideal_start = _ideal(qid, rel, evaluated, n_queries)
    return Ranked(
        qids=decode_ids(joined.qids, evaluated),
        start=start,
        code=code,
        hit=hit,
        gain=gain,
        num_rel=num_rel[evaluated],
        num_nonrel=num_nonrel[evaluated],
        ideal_gain=ideal_gain,
        ideal_start=ideal_start,
        n_qrels_queries=n_queries,
        tag=joined.tag,
        tie_policy=tie_policy,
        tie_groups=groups,
        num_zero=num_zero[evaluated].astype(np.int64),
    )


def _expected(qid: np.ndarray, key: np.ndarray, hit: np.ndarray, gain: np.ndarray,
              within: np.ndarray) -> tuple[np.ndarray, np.ndarray, TieGroups]:
    """Group means of ``hit`` and ``gain`` over each tie group (equal query and score ``key``),
    and the groups' shape."""
    starts = np.r_[True, (np.diff(key) != 0) | (np.diff(qid) != 0)]
    group = np.cumsum(starts) - 1
    size = np.bincount(group)
    relevant = np.bincount(group, weights=hit)
    first_rank = within[starts] + 1
    # relevant documents before each group: a within-query cumulative count at the group start
    query_start = np.r_[True, qid[1:] != qid[:-1]] if qid.size else starts
    total = np.r_[0.0, np.cumsum(hit)]
    at_query = np.maximum.accumulate(np.where(query_start, np.arange(qid.size), 0))
    before = (total[:-1] - total[at_query])[starts]
    groups = TieGroups(first_rank[group], size[group], relevant[group], before[group])
    return (relevant / size)[group], (np.bincount(group, weights=gain) / size)[group], groups


def _ideal(qid: np.ndarray, rel: np.ndarray, evaluated: np.ndarray,
           n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    """The positive qrels values of the evaluated queries, descending per query, and offsets."""
    position = np.full(n_queries, -1, dtype=np.int64)
    position[evaluated] = np.arange(evaluated.size)
    q = position[qid]
    take = np.flatnonzero((q >= 0) & (rel > 0))
    order = np.lexsort((-rel[take], q[take]))
    gains = rel[take][order].astype(np.float64)
    counts = np.bincount(q[take], minlength=evaluated.size)
    return gains, np.r_[0, np.cumsum(counts)]


def rank_lists(relevant: np.ndarray, n_relevant: np.ndarray, *,
               qids: list[str] | None = None) -> Ranked:
    """Ranked lists given in rank order (no scores, no ties) as a :class:`Ranked` run, for the
    measures of :mod:`~metricalc.retrieval.measures`.

    Row ``q`` of ``relevant`` is query ``q``'s list, best first: ``True`` where the item is
    relevant (gain 1), ``False`` where it is judged non-relevant. ``n_relevant[q]`` is
    :math:`R`, the relevant items of the query, listed or not (at least those listed). The
    listed non-relevant items are the judged non-relevant ones (:math:`N`, which only
    ``bpref`` reads); the ideal ranking is :math:`R` relevant items (gain 1).

    Examples
    --------
    >>> from metricalc.retrieval import measures
    >>> ranked = rank_lists(np.array([[False, True, True], [True, False, False]]),
    ...                     np.array([2, 4]))
    >>> measures.map_(ranked).tolist()   # (1/2 + 2/3) / 2 and (1/1) / 4
    [0.5833333333333333, 0.25]
    """
    hit = np.asarray(relevant)
    R = np.asarray(n_relevant)
    if hit.ndim != 2 or hit.dtype != bool:
        raise InvalidInputError(
            f"relevant must be a boolean (queries, ranks) array; got dtype {hit.dtype} and "
            f"shape {hit.shape}"
        )
    if R.shape != hit.shape[:1] or R.dtype.kind not in "iu":
        raise InvalidInputError(
            f"n_relevant must hold one integer per query ({hit.shape[0]}); got dtype "
            f"{R.dtype} and shape {R.shape}"
        )
    listed = hit.sum(axis=1)
    short = np.flatnonzero(listed > R)
    if short.size:
        q = int(short[0])
        raise InvalidInputError(
            f"query {q} lists {int(listed[q])} relevant items but n_relevant is {int(R[q])}: "
            "n_relevant counts every relevant item, listed or not"
        )
    n, width = hit.shape
    names = [str(q) for q in range(n)] if qids is None else list(qids)
    if len(names) != n:
        raise InvalidInputError(f"qids: expected {n} query names, got {len(names)}")
    flat = hit.reshape(-1)
    R = R.astype(np.int64)
    return Ranked(
        qids=names,
        start=np.arange(n + 1, dtype=np.int64) * width,
        code=flat.astype(np.int64),
        hit=flat.astype(np.float64),
        gain=flat.astype(np.float64),
        num_rel=R,
        num_nonrel=width - listed.astype(np.int64),
        ideal_gain=np.ones(int(R.sum())),
        ideal_start=np.r_[0, np.cumsum(R)],
        n_qrels_queries=n,
        tag="lists",
        tie_policy="trec_eval",
        num_zero=width - listed.astype(np.int64),
    )
