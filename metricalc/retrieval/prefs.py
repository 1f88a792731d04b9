"""Preferences of a run: trec_eval's ``form_prefs_counts.c`` (``-R prefs`` and ``qrels_prefs``).

Per query, the judged documents (those of any line of the query's preferences) get a *docid
rank*: the retrieved ones ``0 .. J_r - 1`` in the run's order (score descending as float32, ties
by docno **ascending**, the first ``-M`` documents), the others ``J_r ..`` in docno order.
Per judgment group (JG):

- one sub-group (JSG): every line is preferred to every line with a lower ``rel_level``
  (equivalence classes; a document twice at one level counts twice);
- several JSGs: the preferences of each JSG, closed under transitivity (a preference array);
  a cycle, or a document both 0 and above 0, is an error.

A preference :math:`a \\succ b` (docid ranks) is *fulfilled, retrieved* if :math:`a < b < J_r`,
*fulfilled, implied* if :math:`a < J_r \\le b`, *failed, retrieved* if :math:`b < a < J_r`,
*failed, implied* if :math:`b < J_r \\le a`, and *not occurring* if :math:`a, b \\ge J_r`.
:class:`PrefsCounts` holds these counts per JG and the per-pair sums the ``prefs_pair``
measures need; :mod:`~metricalc.retrieval.prefs_measures` turns them into measures.
docs/retrieval.md gives the definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from metricalc.errors import InvalidInputError
from metricalc.retrieval.order import decode_ids, score_key
from metricalc.retrieval.prefs_classes import ClassLines, class_counts
from metricalc.retrieval.prefs_files import Judgments, where
from metricalc.retrieval.trec_files import Run

__all__ = ["COUNTS", "PrefsCounts", "prefs_counts", "run_positions"]

COUNTS = ("ful_ret", "poss_ret", "ful_imp", "poss_imp", "notoccur", "num_rel", "num_rel_ret",
          "num_nonrel", "num_nonrel_ret", "rnonrel_ful", "rnonrel_poss", "rnonrel_ret_ful",
          "rnonrel_ret_poss")
"""Per-JG counts: preferences by class (``poss_*`` include the fulfilled ones), relevant
(``rel_level > 0``) and non-relevant documents (retrieved), and the fulfilled and possible
preferences of ``prefs_avgjg_Rnonrel`` and ``prefs_avgjg_Rnonrel_ret``."""

PAIRS = ("pair_sum_ret", "pairs_ret", "pair_sum_imp", "pairs_imp", "pairs_none")
"""Per query, over document pairs with a preference in some JG: the sum of the fraction of
their preferences that are fulfilled, and the number of pairs, both retrieved, one retrieved
(``imp``) and none retrieved."""


@dataclass(frozen=True, eq=False)
class PrefsCounts:
    """The counts of :data:`COUNTS` per JG (``jg_query[j]`` its query, an index of ``qids``)
    and of :data:`PAIRS` per query; ``n_prefs_queries`` is the number of queries in the
    preferences (``-c`` averages over them)."""

    qids: list[str]
    jg_query: np.ndarray
    jg: dict[str, np.ndarray]
    pairs: dict[str, np.ndarray]
    n_prefs_queries: int
    tag: str


def run_positions(judged: Judgments, run: Run, *,
                  depth: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The evaluated queries (codes of ``judged.qids`` in both files), and per line of
    ``judged`` its query's index among them (-1: not evaluated) and the 0-based rank of its
    document in the run (-1: not retrieved). The run is ordered as ``form_prefs_counts.c``
    orders it: float32 score descending, ties by docno ascending, cut at ``depth``."""
    if depth is not None and depth < 1:
        raise InvalidInputError(f"depth (-M) must be a positive integer; got {depth}")
    run_q = _lookup(run.qids, judged.qids)[run.qid]
    keep = np.flatnonzero(run_q >= 0)
    name_rank = np.empty(len(run.docnos), dtype=np.int64)
    name_rank[pc.sort_indices(run.docnos).to_numpy()] = np.arange(len(run.docnos))
    ties = name_rank[run.doc[keep]]
    key = score_key(run.score[keep], "float32")
    order = keep[np.lexsort((ties, key, run_q[keep]))]
    q = run_q[order]
    evaluated, first, counts = np.unique(q, return_index=True, return_counts=True)
    rank = np.arange(q.size) - np.repeat(first, counts)
    if depth is not None:
        cut = rank < depth
        order, q, rank = order[cut], q[cut], rank[cut]
    n_docs = max(len(judged.docnos), 1)
    run_doc = _lookup(run.docnos, judged.docnos)[run.doc[order]]
    known = np.flatnonzero(run_doc >= 0)
    keys = q[known] * n_docs + run_doc[known]  # distinct: a run retrieves a document once
    by_key = np.argsort(keys)
    wanted = judged.qid * n_docs + judged.doc
    at = np.minimum(np.searchsorted(keys[by_key], wanted), max(keys.size - 1, 0))
    found = np.flatnonzero(keys[by_key][at] == wanted) if keys.size else np.zeros(0, np.int64)
    line_rank = np.full(wanted.size, -1, dtype=np.int64)
    line_rank[found] = rank[known][by_key[at[found]]]
    query_index = np.full(len(judged.qids), -1, dtype=np.int64)
    query_index[evaluated] = np.arange(evaluated.size)
    return evaluated, query_index[judged.qid], line_rank


def prefs_counts(prefs: Judgments, run: Run, *, depth: int | None = None) -> PrefsCounts:
    """The preference counts of ``run`` (module docstring) for every query in both files.

    Examples
    --------
    >>> from metricalc.retrieval.trec_files import Run
    >>> from metricalc.retrieval.prefs_files import Judgments, where
    >>> prefs = Judgments(pa.array([b"q"]), np.zeros(3, int), np.zeros(3, int),
    ...                   np.zeros(3, int), pa.array([b"a", b"b", b"c"]), np.arange(3),
    ...                   np.array([2, 1, 0], np.float32), "prefs", "prefs")
    >>> counts = prefs_counts(prefs, Run.from_dict({"q": {"b": 2.0, "a": 1.0}}))
    >>> {k: int(counts.jg[k][0]) for k in ("ful_ret", "poss_ret", "ful_imp", "poss_imp")}
    {'ful_ret': 0, 'poss_ret': 1, 'ful_imp': 2, 'poss_imp': 2}
    """
    evaluated, query, line_rank = run_positions(prefs, run, depth=depth)
    lines = np.flatnonzero(query >= 0)
    query = query[lines]
    rank, n_judged, n_judged_ret = _docid_ranks(query, line_rank[lines], prefs.doc[lines],
                                                evaluated.size, len(prefs.docnos))
    # lines in trec_eval's order: query, JG, JSG, rel_level descending, docid rank
    jg, jsg, rel = prefs.jg[lines], prefs.jsg[lines], prefs.rel[lines]
    order = np.lexsort((rank, -rel, jsg, jg, query))
    query, jg, jsg, rel, rank = query[order], jg[order], jsg[order], rel[order], rank[order]
    new_jg = np.r_[True, (query[1:] != query[:-1]) | (jg[1:] != jg[:-1])]
    bounds = np.r_[np.flatnonzero(new_jg), query.size]
    jg_query = query[bounds[:-1]]
    n_jgs = jg_query.size
    group = np.repeat(np.arange(n_jgs), np.diff(bounds))
    sub_groups = np.bincount(group, weights=np.r_[False, (jsg[1:] != jsg[:-1]) & ~new_jg[1:]],
                             minlength=n_jgs)
    classes = (sub_groups == 0)[group]  # lines of one-sub-group JGs

    def conflict(line: int, message: str) -> InvalidInputError:
        original = int(lines[order][line])
        qid = prefs.qids[int(prefs.qid[original])].as_py().decode("utf-8", "replace")
        docno = prefs.docnos[int(prefs.doc[original])].as_py().decode("utf-8", "replace")
        return InvalidInputError(f"{where(prefs, original)}: query {qid!r}, document "
                                 f"{docno!r}: {message}")

    # one document at two levels of one sub-group; lines are sorted by level within a JG
    by_doc = np.flatnonzero(classes)[np.lexsort((rank[classes], group[classes]))]
    twice = ((group[by_doc][1:] == group[by_doc][:-1]) & (rank[by_doc][1:] == rank[by_doc][:-1])
             & (rel[by_doc][1:] != rel[by_doc][:-1]))
    if twice.any():
        raise conflict(int(by_doc[1:][twice][0]),
                       "a document has two rel_levels in one judgment sub-group")
    ec = ClassLines(group[classes], rank[classes], rel[classes], n_judged_ret[query[classes]],
                    n_jgs)
    per_jg = class_counts(ec)
    # one JG of classes without a document listed twice: its pairs are its preferences
    duplicated = np.bincount(by_doc[1:][(group[by_doc][1:] == group[by_doc][:-1])
                                        & (rank[by_doc][1:] == rank[by_doc][:-1])],
                             minlength=query.size) > 0
    simple = (np.bincount(jg_query, minlength=evaluated.size) == 1) & (
        np.bincount(query, weights=~classes | duplicated, minlength=evaluated.size) == 0)
    simple_jg = simple[jg_query]
    per_query = {name: np.zeros(evaluated.size) for name in PAIRS}
    for pair, count in (("pair_sum_ret", "ful_ret"), ("pairs_ret", "poss_ret"),
                        ("pair_sum_imp", "ful_imp"), ("pairs_imp", "poss_imp"),
                        ("pairs_none", "notoccur")):
        per_query[pair][jg_query[simple_jg]] = per_jg[count][simple_jg]
    q_bounds = np.searchsorted(jg_query, np.arange(evaluated.size + 1))
    for q in np.flatnonzero(~simple):  # a loop over the JGs of the other queries
        pairs = []
        for j in range(q_bounds[q], q_bounds[q + 1]):
            s = slice(bounds[j], bounds[j + 1])
            one = _Group(rank[s], rel[s], jsg[s], int(n_judged[q]), int(n_judged_ret[q]))
            try:
                a, b = one.preferences()
            except _ConflictError as error:
                raise conflict(bounds[j] + error.args[1], error.args[0]) from None
            if not one.classes:
                for name, value in one.counts(a, b).items():
                    per_jg[name][j] = value
            pairs.append((a, b))
        for name, value in _pair_sums(pairs, int(n_judged[q]), int(n_judged_ret[q])).items():
            per_query[name][q] = value
    return PrefsCounts(decode_ids(prefs.qids.take(pa.array(evaluated))), jg_query, per_jg,
                       per_query, len(prefs.qids), run.tag)


def _docid_ranks(query: np.ndarray, line_rank: np.ndarray, doc: np.ndarray, n_queries: int,
                 n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per line, the docid rank of its document (per query, the retrieved judged documents in
    run order, then the others in docno order); per query, the judged documents and the
    retrieved ones."""
    n_docs = max(n_docs, 1)
    distinct, inverse = np.unique(query * n_docs + doc, return_inverse=True)
    d_query, d_doc = distinct // n_docs, distinct % n_docs
    d_rank = np.full(distinct.size, -1, dtype=np.int64)
    d_rank[inverse] = line_rank
    retrieved = d_rank >= 0
    by_rank = np.lexsort((np.where(retrieved, d_rank, d_doc), ~retrieved, d_query))
    starts = np.searchsorted(d_query[by_rank], np.arange(n_queries + 1))
    docid = np.empty(distinct.size, dtype=np.int64)
    docid[by_rank] = np.arange(distinct.size) - np.repeat(starts[:-1], np.diff(starts))
    n_judged_ret = np.bincount(d_query[retrieved], minlength=n_queries)
    return docid[inverse], np.diff(starts), n_judged_ret


class _ConflictError(Exception):
    """Inconsistent preferences in one JG: a message and the offending line of the group."""


@dataclass
class _Group:
    """One JG's lines (in trec_eval's order) with the query's judged and judged retrieved
    document counts."""

    rank: np.ndarray
    rel: np.ndarray
    jsg: np.ndarray
    n_judged: int
    n_ret: int

    @property
    def classes(self) -> bool:
        """Whether the JG is one JSG (equivalence classes by ``rel_level``)."""
        return bool((self.jsg == self.jsg[0]).all())

    def preferences(self) -> tuple[np.ndarray, np.ndarray]:
        """Docid ranks ``(a, b)`` of every preference :math:`a \\succ b` (with multiplicity for
        equivalence classes)."""
        if self.classes:
            a, b = np.nonzero(self.rel[:, None] > self.rel[None, :])
            return self.rank[a], self.rank[b]
        return self._closure()

    def _levels(self) -> np.ndarray:
        """Per docid rank, the rel_level of its last line in the JG (-1: no line), as
        trec_eval's ``rel_array``; a document both 0 and above 0 is a conflict."""
        zero = np.zeros(self.n_judged, dtype=bool)
        positive = np.zeros(self.n_judged, dtype=bool)
        zero[self.rank[self.rel == 0]] = True
        positive[self.rank[self.rel > 0]] = True
        if (zero & positive).any():
            doc = self.rank[np.flatnonzero(zero[self.rank] & positive[self.rank])[0]]
            bad = int(np.flatnonzero(self.rank == doc)[-1])  # its line that conflicts
            raise _ConflictError("a document has both rel_level 0 and a rel_level above 0", bad)
        levels = np.full(self.n_judged, -1.0, dtype=np.float32)
        levels[self.rank] = self.rel  # numpy keeps the last of repeated indices
        return levels

    def _closure(self) -> tuple[np.ndarray, np.ndarray]:
        """The preferences of several JSGs closed under transitivity, as docid ranks ``(a, b)``:
        a Boolean array over the JG's documents, squared until it no longer changes."""
        self._levels()  # the 0 / above 0 check
        docs, local = np.unique(self.rank, return_inverse=True)
        closed = np.eye(docs.size, dtype=bool)
        same_jsg = self.jsg[:, None] == self.jsg[None, :]
        a, b = np.nonzero(same_jsg & (self.rel[:, None] > self.rel[None, :]))
        closed[local[a], local[b]] = True
        while True:  # squaring doubles the path length: log2(n) products at most
            wider = (closed.astype(np.float32) @ closed.astype(np.float32)) > 0
            if (wider == closed).all():
                break
            closed = wider
        np.fill_diagonal(closed, False)
        both = closed & closed.T
        if both.any():
            i = int(np.flatnonzero(both.any(axis=1))[0])
            raise _ConflictError("preferences in one judgment group form a cycle",
                                 int(np.flatnonzero(local == i)[0]))
        a, b = np.nonzero(closed)
        return docs[a], docs[b]

    def counts(self, a: np.ndarray, b: np.ndarray) -> dict[str, float]:
        """The counts of :data:`COUNTS` of a preference array's preferences ``a`` over ``b``
        (one-sub-group JGs: :func:`~metricalc.retrieval.prefs_classes.class_counts`)."""
        r = self.n_ret
        out: dict[str, float] = dict(_classify(a, b, r))
        levels = self._levels()
        ret = np.arange(self.n_judged) < r
        out |= {"num_rel": (levels > 0).sum(), "num_rel_ret": ((levels > 0) & ret).sum(),
                "num_nonrel": (levels == 0).sum(), "num_nonrel_ret": ((levels == 0) & ret).sum()}
        for retrieved_only in (False, True):
            prefix = "rnonrel_ret_" if retrieved_only else "rnonrel_"
            big_r = out["num_rel_ret" if retrieved_only else "num_rel"]
            big_n = out["num_nonrel_ret" if retrieved_only else "num_nonrel"]
            if big_r >= big_n:  # R - N non-relevant documents added below every relevant one
                ful = out["ful_ret"] + (0 if retrieved_only else out["ful_imp"])
                poss = out["poss_ret"] + (0 if retrieved_only else out["poss_imp"]
                                          + out["notoccur"])
                ful += out["num_rel_ret"] * (big_r - big_n)
                poss += out["num_rel"] * (big_r - big_n)
            else:
                ful, poss = self._rnonrel_array(a, b, int(out["num_rel"]), retrieved_only)
            out[prefix + "ful"], out[prefix + "poss"] = ful, poss
        return {k: float(v) for k, v in out.items()}

    def _rnonrel_array(self, a: np.ndarray, b: np.ndarray, num_rel: int,
                       retrieved_only: bool) -> tuple[int, int]:
        """trec_eval's recount of a preference array without the non-relevant documents after
        the ``num_rel``-th one (in docid rank order)."""
        levels = self._levels()
        scan = self.n_ret if retrieved_only else self.n_judged
        nonrel = np.flatnonzero(levels[:scan] == 0)
        first_dropped = nonrel[num_rel] if nonrel.size > num_rel else scan
        dropped = (np.arange(self.n_judged) >= first_dropped) & (levels == 0)
        keep = ~dropped[a] & ~dropped[b]
        if retrieved_only:
            keep &= (a < self.n_ret) & (b < self.n_ret)
        c = _classify(a[keep], b[keep], self.n_ret)
        if retrieved_only:
            return c["ful_ret"], c["poss_ret"]
        return c["ful_ret"] + c["ful_imp"], c["poss_ret"] + c["poss_imp"] + c["notoccur"]


def _classify(a: np.ndarray, b: np.ndarray, r: int) -> dict[str, int]:
    """Preferences :math:`a \\succ b` counted by class (``poss_*`` include the fulfilled)."""
    a_ret, b_ret = a < r, b < r
    return {"ful_ret": int(((a < b) & b_ret).sum()),
            "poss_ret": int((a_ret & b_ret).sum()),
            "ful_imp": int((a_ret & ~b_ret).sum()),
            "poss_imp": int((a_ret != b_ret).sum()),
            "notoccur": int((~a_ret & ~b_ret).sum())}


def _pair_sums(pairs: list[tuple[np.ndarray, np.ndarray]], n: int, r: int) -> dict[str, float]:
    """The per-query values of :data:`PAIRS` from every JG's preferences."""
    a = np.concatenate([p[0] for p in pairs])
    b = np.concatenate([p[1] for p in pairs])
    low, high = np.minimum(a, b), np.maximum(a, b)
    key = low * max(n, 1) + high
    distinct, inverse = np.unique(key, return_inverse=True)
    toward_low = np.bincount(inverse, weights=(a < b), minlength=distinct.size)
    total = np.bincount(inverse, minlength=distinct.size)
    fraction = toward_low / total
    low, high = distinct // max(n, 1), distinct % max(n, 1)
    both, one = high < r, (low < r) & (high >= r)
    return {"pair_sum_ret": float(fraction[both].sum()), "pairs_ret": float(both.sum()),
            "pair_sum_imp": float(fraction[one].sum()), "pairs_imp": float(one.sum()),
            "pairs_none": float((low >= r).sum())}


def _lookup(values: pa.Array, value_set: pa.Array) -> np.ndarray:
    """Index of each of ``values`` in ``value_set``, -1 where absent."""
    found = pc.index_in(values, value_set=value_set)
    index: np.ndarray = found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return index
