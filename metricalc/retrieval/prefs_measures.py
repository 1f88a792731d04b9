"""trec_eval 9.0.8's preference measures (``m_prefs_*.c``), from :mod:`~metricalc.retrieval.prefs`.

With per judgment group (JG) :math:`g` the fulfilled and possible preferences :math:`F_g, P_g`
of a class set (all: retrieved, implied and not occurring; ``_ret``: both documents retrieved;
``_imp``: at least one retrieved; a preference counts as failed when neither is retrieved):

- ``prefs_simp*`` :math:`= \\sum_g F_g / \\sum_g P_g` (0 when no preference is possible);
- ``prefs_avgjg*`` :math:`= \\frac{1}{G} \\sum_{g: P_g > 0} F_g / P_g` over the query's
  :math:`G` JGs;
- ``prefs_pair*``: the mean over document pairs with a preference (in the class set) of the
  fraction of the pair's preferences (over JGs) that are fulfilled;
- ``prefs_avgjg_Rnonrel`` (``_ret``): ``prefs_avgjg`` with the non-relevant documents of a JG
  counted as :math:`R` (its relevant ones, retrieved for ``_ret``), as trec_eval recounts them;
- ``prefs_num_prefs_poss``, ``_ful``, ``_ful_ret``: counts; their ``all`` value is the sum.

The ``all`` value of the others is the mean over the evaluated queries (``-c``: over every query
of the preferences). docs/retrieval.md gives the definitions in full.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.retrieval.prefs import PrefsCounts, prefs_counts
from metricalc.retrieval.prefs_files import Judgments
from metricalc.retrieval.trec_eval import Family, TrecEval, parse_measures
from metricalc.retrieval.trec_files import Run

__all__ = ["PREFS_FAMILIES", "PREFS_NICKNAMES", "add_values", "evaluate_prefs", "start_result"]

_ALL = ("ful_ret", "ful_imp"), ("poss_ret", "poss_imp", "notoccur")
_RET = ("ful_ret",), ("poss_ret",)
_IMP = ("ful_ret", "ful_imp"), ("poss_ret", "poss_imp")


def _per_query(counts: PrefsCounts, names: Sequence[str]) -> np.ndarray:
    """Per query, the sum over its JGs of the counts ``names``."""
    summed: np.ndarray = np.bincount(counts.jg_query, weights=_jg_sum(counts, names),
                                     minlength=len(counts.qids))
    return summed


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    """``top / bottom``, 0 where ``bottom`` is 0."""
    out: np.ndarray = np.divide(top, bottom, out=np.zeros_like(top), where=bottom > 0)
    return out


def _simp(classes: tuple[Sequence[str], Sequence[str]]) -> Callable[[PrefsCounts], np.ndarray]:
    def simp(counts: PrefsCounts) -> np.ndarray:
        return _ratio(_per_query(counts, classes[0]), _per_query(counts, classes[1]))
    return simp


def _jg_mean(counts: PrefsCounts, per_jg: np.ndarray) -> np.ndarray:
    """trec_eval's average over JGs: the sum over the query's JGs divided by their number,
    0 unless the sum is above 0 (a NaN from a 0 / 0 JG makes the query 0)."""
    n_q = len(counts.qids)
    total = np.bincount(counts.jg_query, weights=per_jg, minlength=n_q)
    n_jgs = np.bincount(counts.jg_query, minlength=n_q)
    with np.errstate(invalid="ignore"):
        positive = total > 0
    return np.where(positive, total / np.maximum(n_jgs, 1), 0.0)


def _jg_sum(counts: PrefsCounts, names: Sequence[str]) -> np.ndarray:
    """Per JG, the sum of the counts ``names``."""
    total: np.ndarray = np.sum([counts.jg[n] for n in names], axis=0)
    return total


def _avgjg(classes: tuple[Sequence[str], Sequence[str]]) -> Callable[[PrefsCounts], np.ndarray]:
    def avgjg(counts: PrefsCounts) -> np.ndarray:
        return _jg_mean(counts, _ratio(_jg_sum(counts, classes[0]), _jg_sum(counts, classes[1])))
    return avgjg


def _rnonrel(prefix: str) -> Callable[[PrefsCounts], np.ndarray]:
    def rnonrel(counts: PrefsCounts) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = counts.jg[prefix + "ful"] / counts.jg[prefix + "poss"]
        return _jg_mean(counts, ratio)
    return rnonrel


def _pair(parts: Sequence[str]) -> Callable[[PrefsCounts], np.ndarray]:
    def pair(counts: PrefsCounts) -> np.ndarray:
        top = sum(counts.pairs["pair_sum_" + p] for p in parts if p != "none")
        bottom = sum(counts.pairs["pairs_" + p] for p in parts)
        return _ratio(np.asarray(top, dtype=np.float64), np.asarray(bottom, dtype=np.float64))
    return pair


def _count(names: Sequence[str]) -> Callable[[PrefsCounts], np.ndarray]:
    def count(counts: PrefsCounts) -> np.ndarray:
        return _per_query(counts, names)
    return count


PREFS_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("runid", "runid", "none"),
        Family("num_q", "num_q", "none"),
        Family("prefs_num_prefs_poss", "sum", "none", fn=_count(_ALL[1])),
        Family("prefs_num_prefs_ful", "sum", "none", fn=_count(_ALL[0])),
        Family("prefs_num_prefs_ful_ret", "sum", "none", fn=_count(_RET[0])),
        Family("prefs_simp", "mean", "none", fn=_simp(_ALL)),
        Family("prefs_pair", "mean", "none", fn=_pair(("ret", "imp", "none"))),
        Family("prefs_avgjg", "mean", "none", fn=_avgjg(_ALL)),
        Family("prefs_avgjg_Rnonrel", "mean", "none", fn=_rnonrel("rnonrel_")),
        Family("prefs_simp_ret", "mean", "none", fn=_simp(_RET)),
        Family("prefs_pair_ret", "mean", "none", fn=_pair(("ret",))),
        Family("prefs_avgjg_ret", "mean", "none", fn=_avgjg(_RET)),
        Family("prefs_avgjg_Rnonrel_ret", "mean", "none", fn=_rnonrel("rnonrel_ret_")),
        Family("prefs_simp_imp", "mean", "none", fn=_simp(_IMP)),
        Family("prefs_pair_imp", "mean", "none", fn=_pair(("ret", "imp"))),
        Family("prefs_avgjg_imp", "mean", "none", fn=_avgjg(_IMP)),
    )
}
"""The measures of ``-R prefs`` and ``-R qrels_prefs``, in trec_eval's printing order."""

PREFS_NICKNAMES: dict[str, tuple[str, ...]] = {
    "all_prefs": tuple(PREFS_FAMILIES),
    "prefs": ("runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful",
              "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg"),
}
"""trec_eval's nicknames of the preference measures (``prefs`` is the default of the formats)."""


def start_result(qids: list[str], tag: str, asked: Sequence[str], n_avg: int) -> TrecEval:
    """An evaluation of ``qids`` holding ``runid`` and ``num_q`` where ``asked``."""
    result = TrecEval(list(qids), {}, {})
    if "runid" in asked:
        result.summary["runid"] = tag
    if "num_q" in asked:
        result.summary["num_q"] = n_avg
        result.integer.add("num_q")
    return result


def add_values(result: TrecEval, name: str, values: np.ndarray, kind: str, n_avg: int) -> None:
    """Add one measure's per-query ``values`` and its ``all`` value: their sum (``kind``
    ``"sum"``, printed as an integer) or their sum over ``n_avg`` (``"mean"``)."""
    result.per_query[name] = values
    if kind == "sum":
        result.summary[name] = round(float(values.sum()))
        result.integer.add(name)
    else:
        result.summary[name] = float(values.sum() / n_avg)


def evaluate_prefs(prefs: Judgments, run: Run, measures: Sequence[str] = ("prefs",), *,
                   complete: bool = False, depth: int | None = None) -> TrecEval:
    """Evaluate ``run`` against preferences as ``trec_eval -R prefs`` (or ``qrels_prefs``)
    ``[-c] [-M depth] -m ...``.

    Examples
    --------
    >>> import pyarrow as pa
    >>> prefs = Judgments(pa.array([b"q"]), np.zeros(3, int), np.zeros(3, int),
    ...                   np.zeros(3, int), pa.array([b"a", b"b", b"c"]), np.arange(3),
    ...                   np.array([2, 1, 0], np.float32), "prefs", "prefs")
    >>> run = Run.from_dict({"q": {"b": 2.0, "a": 1.0}})
    >>> evaluate_prefs(prefs, run, ["prefs_simp", "prefs_simp_ret"]).summary
    {'prefs_simp': 0.6666666666666666, 'prefs_simp_ret': 0.0}
    """
    requested = parse_measures(measures, families=PREFS_FAMILIES, nicknames=PREFS_NICKNAMES,
                               aliases={})
    counts = prefs_counts(prefs, run, depth=depth)
    if not counts.qids:
        raise InvalidInputError(f"no queries with both results and preferences: {run.source} "
                                f"and {prefs.source} share no query id")
    n_avg = counts.n_prefs_queries if complete else len(counts.qids)
    asked = [r.family.name for r in requested]
    result = start_result(counts.qids, counts.tag, asked, n_avg)
    for req in requested:
        if req.family.fn is not None:
            add_values(result, req.family.name, req.family.fn(counts), req.family.kind, n_avg)
    return result
