"""The measures by trec_eval's names, their parameters, the ``all`` summary and its printout.

Measures are named as trec_eval names them on its command line (``map``, ``P.5,10``,
``ndcg_cut.10``, ``iprec_at_recall``, the nicknames ``official``, ``all_trec`` and ``set``), or by
ranx's spelling (``ndcg@10``, ``precision@5``, ``recall@5``, ``mrr``, ``r-precision``,
``hit_rate@5``, ``f1@5``, ``map@10``), which maps onto them (:data:`ALIASES`). The values are
printed under trec_eval's names (``P_5``, ``ndcg_cut_10``, ``iprec_at_recall_0.10``) in
trec_eval's order (the order of its measure table, whatever the order asked), with its format.

The ``all`` summary is trec_eval 9.0.8's: the queries evaluated are those in both the run and the
qrels (a qrels query without a relevant document is evaluated, and scores 0); measures are
averaged over them, or with ``complete=True`` (``-c``) over every qrels query, a query missing
from the run counting 0 (for ``gm_map``: :math:`\\log 10^{-5}`); ``num_ret``, ``num_rel``,
``num_rel_ret`` are sums over the evaluated queries; ``gm_map`` is
:math:`\\exp(\\frac{1}{Q} \\sum_q \\log \\max(AP_q, 10^{-5}))`; ``num_q`` is the number of queries
averaged over.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.retrieval import measures as m
from metricalc.retrieval.ranking import Ranked, rank_run
from metricalc.retrieval.trec_files import Qrels, Run

__all__ = [
    "ALIASES",
    "FAMILIES",
    "NICKNAMES",
    "TrecEval",
    "evaluate",
    "evaluate_ranked",
    "parse_measures",
]

CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
R_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)


@dataclass(frozen=True)
class Family:
    """A trec_eval measure (one name, maybe several values: one per cutoff)."""

    name: str
    kind: str  # "mean", "sum" (printed as an integer), "gm", "runid", "num_q"
    params: str  # "none", "cutoffs", "levels", "multiples" (one value each), "beta", "average"
    default: tuple[float, ...] = ()
    fn: Callable[..., np.ndarray] | None = None


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("runid", "runid", "none"),
        Family("num_q", "num_q", "none"),
        Family("num_ret", "sum", "none", fn=m.num_ret),
        Family("num_rel", "sum", "none", fn=m.num_rel),
        Family("num_rel_ret", "sum", "none", fn=m.num_rel_ret),
        Family("map", "mean", "none", fn=m.map_),
        Family("gm_map", "gm", "none", fn=m.map_),
        Family("Rprec", "mean", "none", fn=m.rprec),
        Family("bpref", "mean", "none", fn=m.bpref),
        Family("recip_rank", "mean", "none", fn=m.recip_rank),
        Family("iprec_at_recall", "mean", "levels", RECALL_LEVELS, m.iprec_at_recall),
        Family("P", "mean", "cutoffs", CUTOFFS, m.precision),
        Family("recall", "mean", "cutoffs", CUTOFFS, m.recall),
        Family("gm_bpref", "gm", "none", fn=m.bpref),
        Family("Rprec_mult", "mean", "multiples", R_MULTIPLES, m.rprec_mult),
        Family("11pt_avg", "mean", "average", RECALL_LEVELS, m.eleven_point),
        Family("ndcg", "mean", "none", fn=m.ndcg),
        Family("ndcg_cut", "mean", "cutoffs", CUTOFFS, m.ndcg_cut),
        Family("map_cut", "mean", "cutoffs", CUTOFFS, m.map_cut),
        Family("relative_P", "mean", "cutoffs", CUTOFFS, m.relative_p),
        Family("success", "mean", "cutoffs", (1, 5, 10), m.success),
        Family("set_P", "mean", "none", fn=m.set_p),
        Family("set_relative_P", "mean", "none", fn=m.set_relative_p),
        Family("set_recall", "mean", "none", fn=m.set_recall),
        Family("set_map", "mean", "none", fn=m.set_map),
        Family("set_F", "mean", "beta", (1.0,), m.set_f),
        Family("num_nonrel_judged_ret", "sum", "none", fn=m.num_nonrel_judged_ret),
        Family("f1", "mean", "cutoffs", (5, 10), m.f1),
    )
}
"""The measures, in trec_eval's printing order (``f1``, ranx's F1 at k, last)."""

NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "recall", "gm_bpref",
                 "Rprec_mult", "11pt_avg", "ndcg", "ndcg_cut", "map_cut", "relative_P",
                 "success", "set_P", "set_relative_P", "set_recall", "set_map", "set_F",
                 "num_nonrel_judged_ret"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "set_P", "set_recall",
            "set_relative_P", "set_map", "set_F"),
}
"""trec_eval's nicknames; ``all_trec`` is the part of trec_eval's ``all_trec`` metricalc has
(docs/retrieval.md lists the measures it leaves out)."""

ALIASES: dict[str, str] = {
    "ndcg@": "ndcg_cut",
    "precision@": "P",
    "recall@": "recall",
    "hit_rate@": "success",
    "f1@": "f1",
    "map@": "map_cut",
    "mrr": "recip_rank",
    "r-precision": "Rprec",
}
"""ranx spellings (``name@k`` or a bare name) and the trec_eval measure they stand for."""


@dataclass(frozen=True)
class Requested:
    """A measure family with the parameters asked for."""

    family: Family
    values: tuple[float, ...]
    label: str | None = None  # set_F's printable parameter string

    def names(self) -> list[str]:
        f = self.family
        if f.params == "cutoffs":
            return [f"{f.name}_{int(k)}" for k in self.values]
        if f.params in ("levels", "multiples"):
            return [f"{f.name}_{x:3.2f}" for x in self.values]
        if f.params in ("beta", "average") and self.label is not None:
            return [f"{f.name}_{self.label}"]
        return [f.name]


def parse_measures(specs: Iterable[str]) -> list[Requested]:
    """The measures asked for by trec_eval ``-m`` arguments and ranx aliases, in trec_eval's
    order; cutoffs of one measure asked several times are merged.

    Examples
    --------
    >>> [r.names() for r in parse_measures(["ndcg@10", "P.5,10", "map", "mrr"])]
    [['map'], ['recip_rank'], ['P_5', 'P_10'], ['ndcg_cut_10']]
    """
    asked: dict[str, tuple[set[float], str | None]] = {}
    for spec in specs:
        for name, params in _expand(spec.strip()):
            family = FAMILIES[name]
            values, _ = asked.setdefault(name, (set(), None))
            if params is None:
                values.update(family.default)
            else:
                parsed = _parse_params(family, params, spec)
                values.update(parsed)
                if family.params in ("beta", "average"):  # one value named by its parameters
                    asked[name] = (set(parsed), params)
    return [Requested(FAMILIES[n], tuple(sorted(asked[n][0])), asked[n][1])
            for n in FAMILIES if n in asked]


def _expand(spec: str) -> list[tuple[str, str | None]]:
    lower = spec.lower()
    for prefix, name in ALIASES.items():
        if prefix.endswith("@") and lower.startswith(prefix):
            return [(name, spec[len(prefix):])]
        if lower == prefix:
            return [(name, None)]
    name, dot, params = spec.partition(".")
    if name in NICKNAMES and not dot:
        return [(n, None) for n in NICKNAMES[name]]
    if name not in FAMILIES:
        known = ", ".join([*FAMILIES, *NICKNAMES])
        raise InvalidInputError(
            f"unknown measure {spec!r}; expected one of {known} (with .params, e.g. P.5,10) "
            "or a ranx alias like ndcg@10, precision@5, mrr"
        )
    if dot and not params:
        raise InvalidInputError(f"measure {spec!r} has an empty parameter list after '.'")
    return [(name, params if dot else None)]


def _parse_params(family: Family, params: str, spec: str) -> set[float]:
    if family.params == "none":
        raise InvalidInputError(f"measure {family.name!r} takes no parameters; got {spec!r}")
    parts = params.split(",") if family.params != "beta" else [params]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if family.params == "cutoffs":
        if not values or any(v < 1 or not v.is_integer() for v in values):
            raise InvalidInputError(
                f"measure {spec!r}: cutoffs must be positive integers like 5,10; got {params!r}"
            )
    elif not values or any(not math.isfinite(v) for v in values) or (
        family.params in ("levels", "average") and any(not 0 <= v <= 1 for v in values)
    ) or (family.params == "multiples" and any(v < 0 for v in values)):
        what = {"levels": "recall levels in [0, 1] like 0.1,0.5",
                "average": "recall levels in [0, 1] like 0.2,0.5,0.8",
                "multiples": "multiples of R >= 0 like 0.5,1,2"}.get(family.params, "a number")
        raise InvalidInputError(f"measure {spec!r}: expected {what}; got {params!r}")
    return set(values)


@dataclass
class TrecEval:
    """Per-query values and the ``all`` summary of an evaluation.

    ``per_query[name]`` holds one value per query of ``queries`` (the evaluated queries, in byte
    order of their ids); ``summary`` maps every printed name to its ``all`` value (``runid`` a
    string, ``num_q`` and the ``num_*`` sums integers).
    """

    queries: list[str]
    per_query: dict[str, np.ndarray]
    summary: dict[str, float | int | str]
    integer: set[str] = field(default_factory=set)

    def to_text(self, *, per_query: bool = False) -> str:
        """The output of trec_eval (with ``-q``: per-query lines first, then ``all``)."""
        lines: list[str] = []
        if per_query:
            names = [n for n in self.summary if n in self.per_query]
            for i, qid in enumerate(self.queries):
                lines.extend(_line(n, qid, self.per_query[n][i], n in self.integer)
                             for n in names)
        for name, value in self.summary.items():
            if isinstance(value, str):
                lines.append(f"{name:<22}\tall\t{value}")
            else:
                lines.append(_line(name, "all", value, name in self.integer))
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, dict[str, Any]]:
        """``{"per_query": {qid: {name: value}}, "all": {name: value}}``, full precision."""
        names = [n for n in self.summary if n in self.per_query]
        per_query = {
            qid: {n: _number(self.per_query[n][i], n in self.integer) for n in names}
            for i, qid in enumerate(self.queries)
        }
        summary = {n: v if isinstance(v, str) else _number(v, n in self.integer)
                   for n, v in self.summary.items()}
        return {"per_query": per_query, "all": summary}


def _number(value: float, integer: bool) -> float | int:
    return int(value) if integer else float(value)


def _line(name: str, qid: str, value: float, integer: bool) -> str:
    shown = f"{int(value)}" if integer else f"{value:6.4f}"
    return f"{name:<22}\t{qid}\t{shown}"


def evaluate(
    qrels: Qrels,
    run: Run,
    measures: Sequence[str] = ("official",),
    *,
    complete: bool = False,
    level: int = 1,
    depth: int | None = None,
    ties: str = "trec_eval",
) -> TrecEval:
    """Evaluate ``run`` against ``qrels`` as ``trec_eval [-c] [-l level] [-M depth] -m ...``.

    Parameters
    ----------
    measures : sequence of str
        trec_eval measure arguments (``"map"``, ``"P.5,10"``, ``"official"``) or ranx aliases
        (``"ndcg@10"``); default trec_eval's default, ``official``.
    complete : bool
        ``-c``: average over every qrels query, those missing from the run scoring 0.
    level : int
        ``-l``: the smallest qrels value that is relevant (default 1).
    depth : int, optional
        ``-M``: evaluate the first ``depth`` documents of each query only.
    ties : {"trec_eval", "expected", "optimistic", "pessimistic"}
        Order of tied scores: trec_eval's (docno descending), or a tie policy
        (:mod:`metricalc.retrieval.ranking`); ``"expected"`` is refused for measures outside
        :data:`metricalc.retrieval.measures.EXPECTED_OK`.

    Examples
    --------
    >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d9": 1}})
    >>> run = Run.from_dict({"q1": {"d1": 3.0, "d3": 2.0, "d2": 1.0}, "q2": {"d4": 1.0}})
    >>> result = evaluate(qrels, run, ["map", "P.2"])
    >>> result.summary
    {'map': 0.41666666666666663, 'P_2': 0.25}
    >>> print(result.to_text(per_query=True), end="")  # doctest: +NORMALIZE_WHITESPACE
    map     q1   0.8333
    P_2     q1   0.5000
    map     q2   0.0000
    P_2     q2   0.0000
    map     all  0.4167
    P_2     all  0.2500
    """
    requested = parse_measures(measures)
    if ties == "expected":
        refused = [r.family.name for r in requested
                   if r.family.fn is not None and r.family.name not in m.EXPECTED_OK]
        if refused:
            raise InvalidInputError(
                f"ties='expected' is defined for {', '.join(sorted(m.EXPECTED_OK))}; not for "
                f"{', '.join(refused)} (use 'optimistic' or 'pessimistic' to bound them)"
            )
    ranked = rank_run(qrels, run, level=level, depth=depth, ties=ties)
    if not ranked.qids:
        raise InvalidInputError(
            f"no queries with both results and relevance info: {run.source} and {qrels.source} "
            "share no query id"
        )
    return evaluate_ranked(ranked, measures, complete=complete)


def evaluate_ranked(ranked: Ranked, measures: Sequence[str] = ("official",), *,
                    complete: bool = False) -> TrecEval:
    """The measures of an already ranked run (:func:`~metricalc.retrieval.rank_run`, or ranked
    lists: :func:`~metricalc.retrieval.ranking.rank_lists`), with the ``all`` summary of
    :func:`evaluate` (``complete``: averaged over ``ranked.n_qrels_queries``).

    Examples
    --------
    >>> from metricalc.retrieval.ranking import rank_lists
    >>> lists = rank_lists(np.array([[False, True, True], [True, False, False]]),
    ...                    np.array([2, 4]))
    >>> evaluate_ranked(lists, ["recip_rank", "P.2"]).summary
    {'recip_rank': 0.75, 'P_2': 0.5}
    """
    requested = parse_measures(measures)
    n_avg = ranked.n_qrels_queries if complete else len(ranked.qids)
    result = TrecEval(list(ranked.qids), {}, {})
    for req in requested:
        _add(result, req, ranked, n_avg)
    return result


def _add(result: TrecEval, req: Requested, ranked: Ranked, n_avg: int) -> None:
    f = req.family
    if f.kind == "runid":
        result.summary["runid"] = ranked.tag
        return
    if f.kind == "num_q":
        result.summary["num_q"] = n_avg
        result.integer.add("num_q")
        return
    assert f.fn is not None  # every other family has a kernel
    names = req.names()
    if f.params == "none":
        values = [f.fn(ranked)]
    elif f.params == "beta":
        values = [f.fn(ranked, req.values[0])]
    elif f.params == "average":
        values = [f.fn(ranked, req.values)]
    else:
        values = [f.fn(ranked, int(v) if f.params == "cutoffs" else v) for v in req.values]
    for name, value in zip(names, values, strict=True):
        if f.kind == "gm":
            logs = np.log(np.maximum(value, m.GM_FLOOR))
            missing = n_avg - len(ranked.qids)
            result.summary[name] = float(np.exp((in_order_sum(logs)
                                                 + missing * math.log(m.GM_FLOOR)) / n_avg))
            continue
        result.per_query[name] = value
        if f.kind == "sum" and ranked.ties != "expected":  # expected counts are fractional
            result.summary[name] = round(float(value.sum()))
            result.integer.add(name)
        elif f.kind == "sum":
            result.summary[name] = in_order_sum(value)
        else:
            result.summary[name] = in_order_sum(value) / n_avg


def in_order_sum(values: np.ndarray) -> float:
    """The sum of ``values`` added one after the other, as trec_eval adds the queries' values
    (NumPy's pairwise ``sum`` can differ in the last bit, which shows in the printed fourth
    decimal when a mean falls on a tie such as 0.07905).

    Examples
    --------
    >>> in_order_sum(np.array([0.1] * 10)), float(np.array([0.1] * 10).sum())
    (0.9999999999999999, 1.0)
    """
    return float(np.cumsum(values)[-1]) if values.size else 0.0
