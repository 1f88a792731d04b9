r"""TREC runs as a QueryCube: every trec_eval measure of every run on every query.

One cube holds several runs evaluated on one qrels file (:func:`retrieval_cube`), so that
:func:`metricalc.stats.compare`, :func:`metricalc.stats.unit_values` and
:func:`metricalc.metric_set` take a per-query IR measure as they take a descriptor's AP:
``compare(cube, metric="ndcg_cut_10", test="randomization", baseline="bm25")``. It is a valid
QueryCube (:func:`metricalc.cube.validate`) plus one float64 variable per measure; the variant is
checked by :func:`validate_retrieval_cube`.

========================  ===============================================================
``descriptor``            the run's name (the keys of the mapping of runs, or their tags)
``scene``                 the TREC query id (``qid``)
``split``                 ``"other"``; ``pair`` ``""``; ``keypoint_set`` ``"trec"``;
                          ``query_keypoint`` 0: a query's identity is its qid, so
                          ``compare(pair_by="query")`` (the default) pairs runs by qid
``ap``                    trec_eval's ``map`` per query (its AP, :math:`\frac{1}{R}\sum_i
                          h_i H_i / i`; 0 for a query without a relevant document)
``P_5``, ``ndcg_cut_10``  every other measure with a per-query value, under trec_eval's printed
...                       name (``iprec_at_recall_0.10``, ``num_rel_ret``, ...), float64
``n_relevant``            1 where the run has a value for the query, -1 where it has none
                          (``better`` and ``ties`` are -1: a TREC query has no single rank)
``runid``                 over ``descriptor``: the run's tag (trec_eval's ``runid``; ``""``
                          for evaluations given without ``runid``)
========================  ===============================================================

Queries: without ``complete``, those evaluated for at least one run (in both that run and the
qrels, as trec_eval evaluates them); a run that lacks one of them has NaN there (and
``n_relevant = -1``), so a paired comparison drops the query and counts it in ``n_dropped``.
With ``complete`` (trec_eval ``-c``), every qrels query, a query missing from a run scoring 0:
the mean of a variable over a run's queries is then trec_eval's ``all`` in both cases.

``gm_map`` and ``gm_bpref`` have no per-query value in trec_eval's output (it prints them for
``all`` only) and are not in the cube; ``runid`` and ``num_q`` are not per query either.

attrs: :data:`metricalc.cube.DEFAULT_ATTRS` with ``benchmark = "trec_eval"``, ``dataset`` = the
qrels' name, ``ap_method = "ir"`` (trec_eval's AP is the ``ir`` AP with :math:`R` the relevant
documents in the qrels), and the evaluation options ``measures`` (the printed names, ``map``
for ``ap``, space-separated), ``ties``, ``level``, ``depth`` (0: no cut), ``complete`` (0 or 1),
``qrels`` (its source). The cube's ``tie_policy`` attr is the default and inert (it derives AP
from rank statistics, which a TREC cube has none of): the order of tied scores is ``ties``, the
``tie_policy`` the runs were evaluated with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd
import xarray as xr

from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.retrieval.order import decode_ids
from metricalc.retrieval.ranking import TIE_POLICIES
from metricalc.retrieval.trec_eval import TrecEval, evaluate, parse_measures
from metricalc.retrieval.trec_files import Qrels, Run

__all__ = [
    "BENCHMARK",
    "KEYPOINT_SET",
    "EvalOptions",
    "cube_variable",
    "evaluate_for_cube",
    "evaluate_runs",
    "measure_variables",
    "retrieval_cube",
    "run_names",
    "validate_retrieval_cube",
]

BENCHMARK = "trec_eval"
"""The ``benchmark`` attr of a retrieval cube."""

KEYPOINT_SET = "trec"
"""The ``keypoint_set`` of every query of a retrieval cube (a query is identified by its qid)."""


def cube_variable(measure: str) -> str:
    """The cube variable of a measure's printed name: ``ap`` for ``map``, else the name.

    Examples
    --------
    >>> cube_variable("map"), cube_variable("ndcg_cut_10")
    ('ap', 'ndcg_cut_10')
    """
    return "ap" if measure == "map" else measure


def run_names(runs: Mapping[str, Run] | Sequence[Run]) -> dict[str, Run]:
    """The runs by name: a mapping as given, a sequence named by the runs' tags (``runid``).

    Raises
    ------
    InvalidInputError
        No run, an empty or non-string name, or two runs of a sequence with the same tag.
    """
    if isinstance(runs, Run):
        runs = [runs]
    if isinstance(runs, Mapping):
        named = dict(runs)
    else:
        named = {}
        for run in runs:
            if run.tag in named:
                raise InvalidInputError(
                    f"two runs have the tag {run.tag!r} ({named[run.tag].source} and "
                    f"{run.source}); name them: pass a mapping {{name: run}}"
                )
            named[run.tag] = run
    if not named:
        raise InvalidInputError("runs: expected at least one run, got none")
    for name, run in named.items():
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"run names must be non-empty strings; got {name!r}")
        if not isinstance(run, Run):
            raise InvalidInputError(
                f"run {name!r} must be a metricalc.retrieval.Run (read_run); got "
                f"{type(run).__name__}"
            )
    return named


class EvalOptions(TypedDict, total=False):
    """The options of :func:`~metricalc.retrieval.evaluate` that several runs share:
    ``complete`` (trec_eval ``-c``), ``level`` (``-l``), ``depth`` (``-M``), ``tie_policy``,
    ``scores``, ``judged_only`` (``-J``) and ``num_docs`` (``-N``), each with
    :func:`~metricalc.retrieval.evaluate`'s default where not given."""

    complete: bool
    level: int
    depth: int | None
    tie_policy: str
    scores: str
    judged_only: bool
    num_docs: int


def evaluate_runs(
    qrels: Qrels,
    runs: Mapping[str, Run] | Sequence[Run],
    measures: Sequence[str] = ("official",),
    **options: Unpack[EvalOptions],
) -> dict[str, TrecEval]:
    """:func:`~metricalc.retrieval.evaluate` of every run, by run name (:func:`run_names`);
    ``options``: :class:`EvalOptions`."""
    return {
        name: evaluate(qrels, run, measures, **options) for name, run in run_names(runs).items()
    }


def evaluate_for_cube(
    qrels: Qrels,
    runs: Mapping[str, Run],
    measures: Sequence[str] = ("official",),
    **options: Unpack[EvalOptions],
) -> dict[str, TrecEval]:
    """:func:`evaluate_runs` with ``map`` per query always computed (a retrieval cube's ``ap``);
    its ``all`` value is dropped when ``measures`` do not ask for it, so the summaries hold the
    asked measures only. ``options``: :class:`EvalOptions`."""
    asked = list(measures)
    results = evaluate_runs(qrels, runs, [*asked, "map"], **options)
    if "map" not in {r.family.name for r in parse_measures(asked)}:
        for result in results.values():
            del result.summary["map"]
    return results


def measure_variables(result: TrecEval) -> list[str]:
    """The printed names of the measures of ``result`` that have a value per query, in
    trec_eval's order (``map``, then ``P_5``, ...; not ``runid``, ``num_q``, ``gm_map``)."""
    return [name for name in result.summary if name in result.per_query]


def retrieval_cube(
    qrels: Qrels,
    runs: Mapping[str, Run] | Sequence[Run] | Mapping[str, TrecEval],
    measures: Sequence[str] = ("official",),
    **options: Unpack[EvalOptions],
) -> xr.Dataset:
    """The QueryCube of several runs on one qrels (module docstring): every per-query measure.

    Parameters
    ----------
    qrels : Qrels
        The judgments (:func:`~metricalc.retrieval.read_qrels`).
    runs : mapping of str to Run, sequence of Run, or mapping of str to TrecEval
        The runs by name (a sequence: named by their tags, which must then differ), or their
        evaluations (:func:`evaluate_runs` with the same options, to evaluate once for both the
        cube and the ``all`` values).
    measures, **options
        As :func:`~metricalc.retrieval.evaluate` (:class:`EvalOptions`; ``map`` is always
        computed: it is the cube's ``ap``).

    Returns
    -------
    xarray.Dataset
        A QueryCube over (run, qid) with one float64 variable per measure; valid for
        :func:`validate_retrieval_cube`.

    Examples
    --------
    >>> from metricalc.retrieval import Qrels, Run
    >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}})
    >>> runs = {"a": Run.from_dict({"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}),
    ...         "b": Run.from_dict({"q1": {"d2": 2.0, "d1": 1.0}})}
    >>> c = retrieval_cube(qrels, runs, ["map", "P.1"])
    >>> c.scene.values.tolist(), c.ap.values.tolist(), c.P_1.values.tolist()
    (['q1', 'q2'], [[1.0, 1.0], [0.5, nan]], [[1.0, 1.0], [0.0, nan]])
    >>> retrieval_cube(qrels, runs, ["P.1"], complete=True).P_1.values.tolist()
    [[1.0, 1.0], [0.0, 0.0]]
    """
    results, tags = _evaluations(qrels, runs, measures, **options)
    complete = options.get("complete", False)
    names = list(results)
    printed = _common_measures(results)
    if complete:
        queries = _as_text(decode_ids(qrels.qids))
    else:
        queries = np.unique(np.concatenate([_as_text(r.queries) for r in results.values()]))
    values, present = _measure_tables(results, queries, printed, fill=0.0 if complete else np.nan)
    has_value = present | complete
    n = queries.size
    coords = {
        "scene": queries,
        "split": np.full(n, "other"),
        "pair": np.full(n, "", dtype="<U1"),
        "keypoint_set": np.full(n, KEYPOINT_SET),
        "query_keypoint": np.zeros(n, dtype=np.int64),
    }
    attrs: dict[str, Any] = {
        **qc.DEFAULT_ATTRS,
        "ap_method": "ir",
        "dataset": qrels.source,
        "benchmark": BENCHMARK,
        "measures": " ".join(["map", *(m for m in printed if m != "map")]),
        "ties": options.get("tie_policy", "trec_eval"),
        "level": int(options.get("level", 1)),
        "depth": int(options.get("depth") or 0),
        "complete": int(bool(complete)),
        "qrels": qrels.source,
    }
    ap = np.where(has_value, values.pop("ap"), np.nan)
    cube = qc.new_cube(
        names,
        coords,
        {"ap": ap, "n_relevant": np.where(has_value, 1, -1)},
        attrs=attrs,
    )
    for name, table in values.items():
        cube[name] = ((qc.DESCRIPTOR, qc.QUERY), np.where(has_value, table, np.nan))
    cube["runid"] = (qc.DESCRIPTOR, np.array(tags, dtype=str))
    return validate_retrieval_cube(cube)


def _as_text(values: Sequence[str]) -> npt.NDArray[np.str_]:
    return np.asarray(values, dtype=np.str_)


def _evaluations(
    qrels: Qrels,
    runs: Mapping[str, Run] | Sequence[Run] | Mapping[str, TrecEval],
    measures: Sequence[str],
    **options: Unpack[EvalOptions],
) -> tuple[dict[str, TrecEval], list[str]]:
    """The evaluations of the runs by name (given, or :func:`evaluate_for_cube` with
    ``options``) and the runs' tags."""
    if isinstance(runs, Mapping) and runs and all(
        isinstance(r, TrecEval) for r in runs.values()
    ):
        results = {name: r for name, r in runs.items() if isinstance(r, TrecEval)}
        return results, [str(r.summary.get("runid", "")) for r in results.values()]
    named = run_names(runs)  # type: ignore[arg-type]
    tags = [run.tag for run in named.values()]
    return evaluate_for_cube(qrels, named, measures, **options), tags


def _common_measures(results: Mapping[str, TrecEval]) -> list[str]:
    """The per-query measures every run was evaluated on (``map`` among them)."""
    names = list(results)
    first = results[names[0]]
    if "map" not in first.per_query:
        raise InvalidInputError(
            "a retrieval cube needs trec_eval's map per query (the cube's ap); evaluate the "
            "runs with 'map' among the measures"
        )
    printed = measure_variables(first)
    for name, result in results.items():
        if measure_variables(result) != printed:
            raise InvalidInputError(
                f"run {name!r} was evaluated on the measures {measure_variables(result)}, run "
                f"{names[0]!r} on {printed}; evaluate every run with the same measures"
            )
    return printed


def _measure_tables(
    results: Mapping[str, TrecEval], queries: np.ndarray, printed: list[str], *, fill: float
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per cube variable a (run, query) table of the runs' values (``fill`` where a run lacks
    the query), and where each run has the query."""
    index = pd.Index(queries)
    columns = [index.get_indexer(_as_text(r.queries)) for r in results.values()]
    present = np.zeros((len(results), queries.size), bool)
    for i, where in enumerate(columns):
        present[i, where] = True
    values = {}
    for measure in ["map", *(m for m in printed if m != "map")]:
        table = np.full((len(results), queries.size), fill)
        for i, (where, result) in enumerate(zip(columns, results.values(), strict=True)):
            table[i, where] = result.per_query[measure]
        values[cube_variable(measure)] = table
    return values, present


def validate_retrieval_cube(cube: xr.Dataset) -> xr.Dataset:
    """Check that ``cube`` is a retrieval cube (module docstring) and return it unchanged.

    A valid QueryCube (:func:`metricalc.cube.validate`) with the attr ``benchmark =
    "trec_eval"``, ``ties`` one of :data:`~metricalc.retrieval.TIE_POLICIES`, the query
    coordinates of a qid (``split`` ``"other"``, ``pair`` ``""``, ``keypoint_set`` ``"trec"``,
    ``query_keypoint`` 0), ``n_relevant`` 1 or -1, and every measure of the attr ``measures``
    a float64 variable over (descriptor, query), NaN exactly where ``n_relevant`` is -1.

    Raises
    ------
    InvalidInputError
        Naming the first check that fails.
    """
    qc.validate(cube)
    benchmark, tie_policy = (str(cube.attrs.get(name, "")) for name in ("benchmark", "ties"))
    if benchmark != BENCHMARK:
        raise InvalidInputError(
            f"not a retrieval cube: attr benchmark is {benchmark!r}, expected {BENCHMARK!r} "
            "(metricalc.retrieval.retrieval_cube)"
        )
    if tie_policy not in TIE_POLICIES:
        raise InvalidInputError(
            f"retrieval cube attr ties must be one of {TIE_POLICIES}; got {tie_policy!r}"
        )
    expected = {"split": "other", "pair": "", "keypoint_set": KEYPOINT_SET, "query_keypoint": 0}
    for name, value in expected.items():
        wrong = np.asarray(cube[name].values) != value
        if wrong.any():
            found = np.asarray(cube[name].values)[wrong][0]
            raise InvalidInputError(
                f"retrieval cube coordinate {name!r} must be {value!r} for every query (a "
                f"query is its qid, the coordinate scene); found {found!r}"
            )
    n_relevant = np.asarray(cube["n_relevant"].values)
    if (n_relevant == 0).any():
        raise InvalidInputError(
            "retrieval cube variable 'n_relevant' must be 1 (the run has the query) or -1 "
            "(it has not); found 0"
        )
    missing = n_relevant == -1
    measures = str(cube.attrs.get("measures", "")).split()
    for measure in measures:
        name = cube_variable(measure)
        if name not in cube.data_vars:
            raise InvalidInputError(
                f"retrieval cube lacks the variable {name!r} of its measure {measure!r}"
            )
        variable = cube[name]
        if variable.dims != (qc.DESCRIPTOR, qc.QUERY) or variable.dtype != np.float64:
            raise InvalidInputError(
                f"retrieval cube variable {name!r} must be float64 over (descriptor, query); "
                f"got {variable.dtype} over {variable.dims}"
            )
        values = np.asarray(variable.values)
        if (np.isnan(values) != missing).any():
            raise InvalidInputError(
                f"retrieval cube variable {name!r} must be NaN exactly where n_relevant is -1 "
                "(the run lacks the query)"
            )
    return cube
