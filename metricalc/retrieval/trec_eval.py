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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.retrieval import extra_measures as xm
from metricalc.retrieval import gain_measures as gm
from metricalc.retrieval import measures as m
from metricalc.retrieval.ranking import Joined, Ranked, join_run, rank_joined

if TYPE_CHECKING:
    from metricalc.retrieval.ir_names import IrSpec
    from metricalc.retrieval.trec_files import Qrels, Run
    from metricalc.retrieval.zscores import ZScores

__all__ = [
    "ALIASES",
    "FAMILIES",
    "NICKNAMES",
    "TrecEval",
    "evaluate",
    "evaluate_joined",
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
    kind: str  # "mean", "sum" (printed as an integer), "gm", "runid", "num_q", "string"
    # "none", "cutoffs", "levels", "multiples" (one value each); one value named by its
    # parameters: "beta", "average", "gains" (level=gain pairs), "length", "coefficients"
    params: str
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
        Family("P", "mean", "cutoffs", CUTOFFS, m.precision_at_k),
        Family("relstring", "string", "length", (10,), gm.relstring),
        Family("recall", "mean", "cutoffs", CUTOFFS, m.recall_at_k),
        Family("infAP", "mean", "none", fn=gm.infap),
        Family("gm_bpref", "gm", "none", fn=m.bpref),
        Family("Rprec_mult", "mean", "multiples", R_MULTIPLES, m.rprec_mult),
        Family("utility", "mean", "coefficients", (1.0, -1.0, 0.0, 0.0), gm.utility),
        Family("11pt_avg", "mean", "average", RECALL_LEVELS, m.eleven_point),
        Family("binG", "mean", "none", fn=gm.bin_g),
        Family("G", "mean", "gains", fn=gm.g_measure),
        Family("ndcg", "mean", "gains", fn=gm.ndcg_gains),
        Family("ndcg_rel", "mean", "gains", fn=gm.ndcg_rel),
        Family("Rndcg", "mean", "gains", fn=gm.rndcg),
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
        Family("yaap", "mean", "none", fn=gm.yaap),
        Family("f1", "mean", "cutoffs", (5, 10), m.f1_at_k),
        Family("Judged", "mean", "cutoffs", (10,), xm.judged),
        Family("ERR", "mean", "cutoffs", (20,), xm.err),
        Family("RBP", "mean", "persistence", (0.8,), xm.rbp),
        Family("RBP_residual", "mean", "persistence", (0.8,), xm.rbp_residual),
        Family("NCG", "mean", "cutoffs", (10,), xm.ncg),
    )
}
"""The measures, in trec_eval's printing order (after trec_eval's: ``f1``, ranx's F1 at k, and
``Judged``, ``ERR``, ``RBP``, ``NCG``, measures of ir_measures and the literature). trec_eval's
preference measures (``prefs_*``, ``*_avgjg``) read other qrels formats and are not here."""

NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "relstring", "recall",
                 "infAP", "gm_bpref", "utility", "11pt_avg", "ndcg", "relative_P",
                 "Rprec_mult", "success", "map_cut", "ndcg_cut", "ndcg_rel", "Rndcg", "binG",
                 "G", "set_P", "set_recall", "set_relative_P", "set_map", "set_F",
                 "num_nonrel_judged_ret"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P",
            "set_recall", "set_relative_P", "set_map", "set_F"),
}
"""trec_eval 9.0.8's nicknames (printed in the order of :data:`FAMILIES`, whatever the order
here)."""

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
    label: str | None = None  # the printable parameter string of a one-value family
    ordered: tuple[float, ...] = ()  # utility's coefficients, in the order given
    pairs: tuple[tuple[int, float], ...] = ()  # custom gains: (qrels value, gain)
    level: int | None = None  # rel=N of an ir_measures name: this measure's relevance level
    alias: str | None = None  # the ir_measures name it is printed under

    def names(self) -> list[str]:
        f = self.family
        if self.alias is not None:
            return [self.alias]
        if f.params == "cutoffs":
            return [f"{f.name}_{int(k)}" for k in self.values]
        if f.params in ("levels", "multiples"):
            return [f"{f.name}_{x:3.2f}" for x in self.values]
        if f.params in SINGLE and self.label is not None:
            return [f"{f.name}_{self.label}"]
        return [f.name]


SINGLE = ("beta", "average", "gains", "length", "coefficients", "persistence")
"""Parameter kinds of the families with one value, printed with their parameter string."""


def parse_measures(specs: Iterable[str], *, families: Mapping[str, Family] = FAMILIES,
                   nicknames: Mapping[str, tuple[str, ...]] = NICKNAMES,
                   aliases: Mapping[str, str] = ALIASES) -> list[Requested]:
    """The measures asked for by trec_eval ``-m`` arguments and ranx aliases, in trec_eval's
    order; cutoffs of one measure asked several times are merged. ``families``, ``nicknames``
    and ``aliases`` default to the measures of standard qrels; the other relevance formats
    (``-R``) pass their own tables (and take no ir_measures names).

    Examples
    --------
    >>> [r.names() for r in parse_measures(["ndcg@10", "P.5,10", "map", "mrr"])]
    [['map'], ['recip_rank'], ['P_5', 'P_10'], ['ndcg_cut_10']]
    """
    asked: dict[str, Requested] = {}
    for spec in specs:
        trec_name = spec.strip().partition(".")[0]
        standard = families is FAMILIES
        known = trec_name in families or trec_name in nicknames
        ir_specs = None
        if not known and standard:  # imported for such names only: start-up time
            from metricalc.retrieval.ir_names import parse_ir_name

            ir_specs = parse_ir_name(spec.strip())
        if ir_specs is not None:
            for ir in ir_specs:
                asked[f"{ir.family}\t{ir.alias}"] = _ir_measure(ir, spec)
            continue
        for name, params in _expand(spec.strip(), families, nicknames, aliases):
            family = families[name]
            before = asked.get(name, Requested(family, ()))
            if params is None:
                asked[name] = Requested(family, tuple(sorted({*before.values, *family.default})),
                                        before.label, before.ordered, before.pairs)
            elif family.params in SINGLE:  # one value, named by its parameters: the last wins
                asked[name] = _single(family, params, spec)
            else:
                parsed = _parse_params(family, params, spec)
                asked[name] = Requested(family, tuple(sorted({*before.values, *parsed})))
    position = {name: i for i, name in enumerate(families)}
    return sorted(asked.values(), key=lambda r: position[r.family.name])


def _ir_measure(ir: IrSpec, spec: str) -> Requested:
    """The measure of an ir_measures name: one value, printed under that name."""
    family = FAMILIES[ir.family]
    if ir.params is None:
        values = family.default
    elif family.params == "persistence":
        values = (float(_single(family, ir.params, spec).values[0]),)
    else:
        values = tuple(sorted(_parse_params(family, ir.params, spec)))
    if ir.params is not None and len(values) != 1:
        raise InvalidInputError(f"measure {spec!r}: one cutoff, like @10; got {ir.params!r}")
    return Requested(family, values, level=ir.level, alias=ir.alias)


def _single(family: Family, params: str, spec: str) -> Requested:
    """The measure of a one-value family with the parameter string ``params``."""
    if family.params == "gains":
        return Requested(family, (), params, pairs=_gain_pairs(params, spec))
    if family.params == "length":
        return Requested(family, (float(_atol(params, spec)),), params)
    if family.params == "persistence":
        values = _parse_floats(params, spec)
        if len(values) != 1 or not 0 < values[0] < 1:
            raise InvalidInputError(f"measure {spec!r}: the persistence p must be one number in "
                                    f"(0, 1) like 0.8; got {params!r}")
        return Requested(family, tuple(values), params)
    if family.params == "coefficients":
        coefficients = tuple(_parse_floats(params, spec))
        if len(coefficients) != 4:
            raise InvalidInputError(
                f"measure {spec!r}: utility takes 4 coefficients (retrieved relevant, retrieved "
                f"non-relevant, missed relevant, missed non-relevant) like 1,-1,0,0; got {params!r}"
            )
        return Requested(family, coefficients, params, ordered=coefficients)
    return Requested(family, tuple(sorted(_parse_params(family, params, spec))), params)


def _atol(text: str, spec: str) -> int:
    """The leading integer of ``text`` as C's ``atol`` reads it (``23.4`` is 23)."""
    match = re.match(r"\s*([+-]?\d+)", text)
    if match is None:
        raise InvalidInputError(f"measure {spec!r}: expected an integer; got {text!r}")
    return int(match.group(1))


def _parse_floats(params: str, spec: str) -> list[float]:
    try:
        values = [float(p) for p in params.split(",")]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) for v in values):
        raise InvalidInputError(f"measure {spec!r}: expected numbers like 1,-1,0,0; got {params!r}")
    return values


def _gain_pairs(params: str, spec: str) -> tuple[tuple[int, float], ...]:
    """``level=gain`` pairs, as trec_eval's ``-m ndcg.1=3,2=9,4=4.5`` gives them."""
    pairs: list[tuple[int, float]] = []
    for part in params.split(","):
        level, eq, gain = part.partition("=")
        try:
            value = float(gain)
        except ValueError:
            value = math.nan
        if not eq or not level or not math.isfinite(value):
            raise InvalidInputError(
                f"measure {spec!r}: expected gains as level=gain pairs like 1=3,2=9; got "
                f"{params!r}"
            )
        pairs.append((_atol(level, spec), value))
    return tuple(pairs)


def _expand(spec: str, families: Mapping[str, Family], nicknames: Mapping[str, tuple[str, ...]],
            aliases: Mapping[str, str]) -> list[tuple[str, str | None]]:
    lower = spec.lower()
    for prefix, name in aliases.items():
        if prefix.endswith("@") and lower.startswith(prefix):
            return [(name, spec[len(prefix):])]
        if lower == prefix:
            return [(name, None)]
    name, dot, params = spec.partition(".")
    if name in nicknames and not dot:
        return [(n, None) for n in nicknames[name]]
    if name not in families:
        known = ", ".join([*families, *nicknames])
        alias = " or a ranx alias like ndcg@10, precision@5, mrr" if aliases else ""
        raise InvalidInputError(
            f"unknown measure {spec!r}; expected one of {known} (with .params, e.g. P.5,10)"
            + alias
        )
    if dot and not params:
        raise InvalidInputError(f"measure {spec!r} has an empty parameter list after '.'")
    return [(name, params if dot else None)]


def _parse_params(family: Family, params: str, spec: str) -> set[float]:
    if family.params == "none":
        raise InvalidInputError(f"measure {family.name!r} takes no parameters; got {spec!r}")
    parts = params.split(",") if family.params != "beta" else [params]
    if family.params == "cutoffs":  # read as trec_eval reads them: 23.4 is 23
        cutoffs = [float(_atol(p, spec)) for p in parts]
        if any(v < 1 for v in cutoffs):
            raise InvalidInputError(
                f"measure {spec!r}: cutoffs must be positive integers like 5,10; got {params!r}"
            )
        return set(cutoffs)
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if not values or any(not math.isfinite(v) for v in values) or (
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
    order of their ids; ``relstring`` a string per query and no ``all`` value); ``summary`` maps
    every printed name to its ``all`` value (``runid`` a string, ``num_q`` and the ``num_*``
    sums integers). ``families`` maps every printed name to its family in :data:`FAMILIES`
    (``P_5`` and ``P(rel=2)@5`` to ``P``). ``zscores``: the values are z-scores (``-Z``),
    printed as trec_eval prints them (a ``Z`` before the name, every number with 4 decimals).
    """

    queries: list[str]
    per_query: dict[str, np.ndarray]
    summary: dict[str, float | int | str]
    integer: set[str] = field(default_factory=set)
    strings: list[str] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)
    zscores: bool = False

    def _query_names(self) -> list[str]:
        return [n for n in self.per_query if n in self.summary or n in self.strings]

    def to_text(self, *, per_query: bool = False, summary: bool = True) -> str:
        """The output of trec_eval (with ``-q``: per-query lines first, then ``all``; without
        ``summary``, trec_eval's ``-n``: no ``all`` lines)."""
        lines: list[str] = []
        if per_query:
            names = self._query_names()
            for i, qid in enumerate(self.queries):
                lines.extend(self._line(n, qid, self.per_query[n][i]) for n in names)
        for name, value in self.summary.items() if summary else ():
            if isinstance(value, str):
                lines.append(f"{name:<22}\tall\t{value}")
            else:
                lines.append(self._line(name, "all", value))
        return "".join(line + "\n" for line in lines)

    def _line(self, name: str, qid: str, value: float | str) -> str:
        if name in self.strings:
            return f"{name:<22}\t{qid}\t'{value}'"
        if self.zscores:
            return f"Z{name:<22}\t{qid}\t{float(value):6.4f}"
        shown = f"{int(value)}" if name in self.integer else f"{float(value):6.4f}"
        return f"{name:<22}\t{qid}\t{shown}"

    def to_json(self) -> dict[str, dict[str, Any]]:
        """``{"per_query": {qid: {name: value}}, "all": {name: value}}``, full precision."""
        names = self._query_names()
        per_query = {
            qid: {n: self.per_query[n][i] if n in self.strings
                  else _number(self.per_query[n][i], n in self.integer) for n in names}
            for i, qid in enumerate(self.queries)
        }
        summary = {n: v if isinstance(v, str) else _number(v, n in self.integer)
                   for n, v in self.summary.items()}
        return {"per_query": per_query, "all": summary}


def _number(value: float, integer: bool) -> float | int:
    return int(value) if integer else float(value)


def evaluate(
    qrels: Qrels,
    run: Run,
    measures: Sequence[str] = ("official",),
    *,
    complete: bool = False,
    level: int = 1,
    depth: int | None = None,
    tie_policy: str = "trec_eval",
    scores: str = "float64",
    judged_only: bool = False,
    num_docs: int = 0,
    zscores: ZScores | None = None,
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
    tie_policy : {"trec_eval", "expected", "optimistic", "pessimistic"}
        Order of tied scores: trec_eval's (docno descending), or a tie policy
        (:mod:`metricalc.retrieval.ranking`); ``"expected"`` is refused for measures outside
        :data:`metricalc.retrieval.measures.EXPECTED_OK`.
    scores : {"float64", "float32"}
        Scores compare as doubles (trec_eval 9.0.8) or as 32-bit floats (pytrec_eval and the
        older ``v9.0.8`` tag): :mod:`metricalc.retrieval.order`.
    judged_only : bool
        ``-J``: evaluate the judged retrieved documents only (after the depth cut).
    num_docs : int
        ``-N``: the documents in the collection (``utility``'s fourth cell).
    zscores : ZScores, optional
        ``-Z``: report z-scores (:func:`metricalc.retrieval.zscores.read_zscores`).

    Examples
    --------
    >>> from metricalc.retrieval import Qrels, Run
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
    return evaluate_joined(join_run(qrels, run), measures, complete=complete, level=level,
                           depth=depth, tie_policy=tie_policy, scores=scores,
                           judged_only=judged_only, num_docs=num_docs, zscores=zscores)


def evaluate_joined(joined: Joined, measures: Sequence[str] = ("official",), *,
                    complete: bool = False, level: int = 1, depth: int | None = None,
                    tie_policy: str = "trec_eval", scores: str = "float64",
                    judged_only: bool = False, num_docs: int = 0,
                    zscores: ZScores | None = None) -> TrecEval:
    """:func:`evaluate` of a run already joined with its qrels
    (:func:`~metricalc.retrieval.ranking.join_run`, or
    :func:`~metricalc.retrieval.small_join.join_files`), with :func:`evaluate`'s options."""
    requested = parse_measures(measures)
    if tie_policy == "expected":
        refused = [r.family.name for r in requested
                   if r.family.fn is not None and r.family.name not in m.EXPECTED_OK]
        if refused:
            raise InvalidInputError(
                f"tie_policy='expected' is defined for {', '.join(sorted(m.EXPECTED_OK))}; not for "
                f"{', '.join(refused)} (use 'optimistic' or 'pessimistic' to bound them)"
            )
    def ranking(at: int) -> Ranked:
        return rank_joined(joined, level=at, depth=depth, tie_policy=tie_policy, scores=scores,
                           judged_only=judged_only)

    ranked = ranking(level)
    by_level = {level: ranked} | {r.level: ranking(r.level) for r in requested
                                  if r.level is not None and r.level != level}
    if not ranked.qids:
        raise InvalidInputError(
            f"no queries with both results and relevance info: {joined.run_source} and "
            f"{joined.qrels_source} share no query id"
        )
    # with -c, trec_eval's num_rel recounts the relevant (> 0) judgments of every qrels query
    positive = int((joined.rel > 0).sum()) if complete else None
    return evaluate_ranked(ranked, measures, complete=complete, num_docs=num_docs,
                           zscores=zscores, qrels_num_rel=positive, by_level=by_level)


def evaluate_ranked(ranked: Ranked, measures: Sequence[str] = ("official",), *,
                    complete: bool = False, num_docs: int = 0, zscores: ZScores | None = None,
                    qrels_num_rel: int | None = None,
                    by_level: Mapping[int, Ranked] | None = None) -> TrecEval:
    """The measures of an already ranked run (:func:`~metricalc.retrieval.rank_run`, or ranked
    lists: :func:`~metricalc.retrieval.ranking.rank_lists`), with the ``all`` summary of
    :func:`evaluate` (``complete``: averaged over ``ranked.n_qrels_queries``; ``num_docs``,
    ``zscores``: :func:`evaluate`'s; ``qrels_num_rel``: the ``all`` value of ``num_rel`` under
    ``complete``, default the sum over the ranked queries; ``by_level``: the run ranked at the
    relevance levels that ``rel=N`` of ir_measures names ask for).

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
    result = TrecEval(list(ranked.qids), {}, {}, zscores=zscores is not None)
    for req in requested:
        at = ranked
        if req.level is not None:
            if by_level is None or req.level not in by_level:
                raise InvalidInputError(
                    f"measure {req.alias!r} asks for relevance level {req.level}: evaluate the "
                    "run with the qrels (evaluate) to rank it at that level"
                )
            at = by_level[req.level]
        _add(result, req, at, n_avg, num_docs, zscores)
    if qrels_num_rel is not None and "num_rel" in result.summary:
        result.summary["num_rel"] = qrels_num_rel
    return result


def _add(result: TrecEval, req: Requested, ranked: Ranked, n_avg: int, num_docs: int,
         zscores: ZScores | None) -> None:
    f = req.family
    result.families.update((name, f.name) for name in req.names())
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
    elif f.params == "gains":
        values = [f.fn(ranked, req.pairs)]
    elif f.params == "coefficients":
        values = [f.fn(ranked, req.ordered or f.default, num_docs)]
    elif f.params == "length":
        values = [f.fn(ranked, int((req.values or f.default)[0]))]
    elif f.params == "persistence":
        values = [f.fn(ranked, (req.values or f.default)[0])]
    else:
        values = [f.fn(ranked, int(v) if f.params == "cutoffs" else v) for v in req.values]
    for name, value in zip(names, values, strict=True):
        if f.kind == "string":
            result.per_query[name] = value
            result.strings.append(name)
            continue
        if zscores is not None:
            value = zscores.convert(result.queries, name, value)
        if f.kind == "gm":
            logs = np.log(np.maximum(value, m.GM_FLOOR))
            missing = n_avg - len(ranked.qids)
            result.summary[name] = float(np.exp((in_order_sum(logs)
                                                 + missing * math.log(m.GM_FLOOR)) / n_avg))
            continue
        result.per_query[name] = value
        if f.kind == "sum" and ranked.tie_policy != "expected" and zscores is None:
            result.summary[name] = round(float(value.sum()))
            result.integer.add(name)
        elif f.kind == "sum":  # expected counts are fractional, z-scores too
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
