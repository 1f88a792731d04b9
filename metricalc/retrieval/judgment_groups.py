"""Measures averaged over judgment groups: trec_eval's ``-R qrels_jg`` (``form_res_rels_jg.c``).

A ``qrels_jg`` file holds, per query, one set of judgments per judgment group (JG, e.g. one per
assessor). The run is ranked as for standard qrels (float32 score descending, ties by docno
descending, the first ``-M`` documents) and each measure is computed against each JG's
judgments as if they were the qrels, then averaged over the query's :math:`G` JGs:

.. math:: \\mathrm{map\\_avgjg} = \\frac{1}{G} \\sum_g AP_g, \\qquad
          \\mathrm{P\\_avgjg\\_k} = \\frac{1}{G} \\sum_g \\frac{H_{g,k}}{k}, \\qquad
          \\mathrm{Rprec\\_mult\\_avgjg\\_x} = \\frac{1}{G} \\sum_g
          \\frac{H_{g,c_g}}{c_g},\\ c_g = \\lfloor x R_g + 0.9 \\rfloor

(:math:`H_{g,k}`: documents relevant in JG :math:`g`, ``rel >= -l``, among the first :math:`k`;
:math:`R_g`: relevant documents of JG :math:`g`). The ``all`` value is the mean over the
evaluated queries (``-c``: over every query of the file). docs/retrieval.md has the details.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from metricalc.errors import InvalidInputError
from metricalc.retrieval import measures as m
from metricalc.retrieval.order import decode_ids
from metricalc.retrieval.prefs_files import Judgments
from metricalc.retrieval.prefs_measures import add_values, start_result
from metricalc.retrieval.ranking import Ranked, rank_run
from metricalc.retrieval.trec_eval import (
    CUTOFFS,
    R_MULTIPLES,
    Family,
    Requested,
    TrecEval,
    parse_measures,
)
from metricalc.retrieval.trec_files import Qrels, Run

__all__ = ["JG_FAMILIES", "JG_NICKNAMES", "evaluate_qrels_jg", "judgment_group_qrels"]

JG_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("runid", "runid", "none"),
        Family("num_q", "num_q", "none"),
        Family("map_avgjg", "mean", "none", fn=m.map_),
        Family("P_avgjg", "mean", "cutoffs", CUTOFFS, m.precision_at_k),
        Family("Rprec_mult_avgjg", "mean", "multiples", R_MULTIPLES, m.rprec_mult),
    )
}
"""The measures of ``-R qrels_jg``, in trec_eval's printing order."""

JG_NICKNAMES: dict[str, tuple[str, ...]] = {"qrels_jg": tuple(JG_FAMILIES)}
"""trec_eval's nickname of the ``qrels_jg`` measures (the default of the format)."""


def judgment_group_qrels(judged: Judgments) -> list[Qrels]:
    """Standard qrels per JG position: element :math:`s` holds the judgments of every query's
    :math:`(s+1)`-th JG (in byte order of the JG ids), and only the queries that have one."""
    order = np.lexsort((judged.jg, judged.qid))
    qid, jg = judged.qid[order], judged.jg[order]
    new_query = np.r_[True, qid[1:] != qid[:-1]]
    new_jg = new_query | np.r_[True, jg[1:] != jg[:-1]]
    count = np.cumsum(new_jg)
    slot = np.empty(order.size, dtype=np.int64)
    slot[order] = count - np.maximum.accumulate(np.where(new_query, count, 0))
    out = []
    for s in range(int(slot.max()) + 1):  # one set of qrels per JG position
        lines = np.flatnonzero(slot == s)
        present, q = np.unique(judged.qid[lines], return_inverse=True)
        out.append(Qrels(judged.qids.take(pa.array(present)), q.astype(np.int64),
                         judged.docnos, judged.doc[lines], judged.rel[lines],
                         f"{judged.source} (judgment group {s + 1} of each query)"))
    return out


def evaluate_qrels_jg(judged: Judgments, run: Run, measures: Sequence[str] = ("qrels_jg",), *,
                      complete: bool = False, level: int = 1,
                      depth: int | None = None) -> TrecEval:
    """Evaluate ``run`` as ``trec_eval -R qrels_jg [-c] [-l level] [-M depth] -m ...``.

    Examples
    --------
    Two assessors of query ``q``: ``d1`` is relevant for the first, ``d2`` for the second.

    >>> judged = Judgments(pa.array([b"q"]), np.zeros(4, int), np.array([0, 0, 1, 1]),
    ...                    np.zeros(4, int), pa.array([b"d1", b"d2"]), np.array([0, 1, 0, 1]),
    ...                    np.array([1, 0, 0, 1]), "qrels_jg", "qrels_jg")
    >>> run = Run.from_dict({"q": {"d1": 2.0, "d2": 1.0}})
    >>> evaluate_qrels_jg(judged, run, ["map_avgjg", "P_avgjg.1"]).summary
    {'map_avgjg': 0.75, 'P_avgjg_1': 0.5}
    """
    requested = parse_measures(measures, families=JG_FAMILIES, nicknames=JG_NICKNAMES,
                               aliases={})
    groups = [rank_run(qrels, run, level=level, depth=depth) for qrels in
              judgment_group_qrels(judged)]
    seen = {q for ranked in groups for q in ranked.qids}
    qids = [q for q in decode_ids(judged.qids) if q in seen]  # byte order, as each group's
    if not qids:
        raise InvalidInputError(f"no queries with both results and relevance info: "
                                f"{run.source} and {judged.source} share no query id")
    index = {q: i for i, q in enumerate(qids)}
    where = [np.array([index[q] for q in ranked.qids], dtype=np.int64) for ranked in groups]
    n_jgs = sum(np.bincount(w, minlength=len(qids)) for w in where)
    n_avg = len(judged.qids) if complete else len(qids)
    result = start_result(qids, run.tag, [r.family.name for r in requested], n_avg)
    for req in requested:
        if req.family.fn is None:
            continue
        total = np.zeros((len(req.names()), len(qids)))
        for ranked, w in zip(groups, where, strict=True):
            total[:, w] += _values(req, ranked)
        for name, values in zip(req.names(), total / n_jgs, strict=True):
            add_values(result, name, values, req.family.kind, n_avg)
    return result


def _values(req: Requested, ranked: Ranked) -> np.ndarray:
    """The requested values (one row per name) of one JG position's ranked run."""
    fn = req.family.fn
    assert fn is not None  # the caller skips runid and num_q
    if req.family.params == "none":
        return np.array([fn(ranked)])
    cast = int if req.family.params == "cutoffs" else float
    return np.array([fn(ranked, cast(v)) for v in req.values])
