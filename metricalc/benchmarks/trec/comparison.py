r"""Several TREC runs compared on one qrels: trec_eval's ``all`` per run and measure, and paired
significance tests of every run against a baseline, one correction family per measure.

:func:`compare_runs` evaluates every run (:func:`~metricalc.retrieval.evaluate`), builds their
QueryCube (:func:`~metricalc.retrieval.querycube.retrieval_cube`) and, for every measure with a
per-query value, calls :func:`metricalc.stats.compare` on it: by default the paired
randomization (sign-flip) test on the mean difference over the queries both runs have
(docs/stats.md), every run against the baseline, Holm's correction over those
comparisons. :meth:`RunComparison.table` is the results table (:class:`metricalc.plotting.tables.
Table`): one row per run, one column per measure holding its ``all`` value, a superscript letter
where a run is significantly better than the run of that letter.

A letter is never put on the run whose ``all`` is lower: the test's direction
(:func:`metricalc.stats.direction`, the sign of the paired mean difference) is computed on the
queries both runs have, while ``all`` averages each run over its own queries; where a run lacks
queries the two can disagree, and such a comparison is left unmarked with a note
(:attr:`RunComparison.withheld`). With ``complete`` (``-c``) every run has every qrels query and
they cannot.

The comparison is a study over the retrieval domain: it evaluates (:mod:`metricalc.retrieval`),
tests (:mod:`metricalc.stats`) and renders (:mod:`metricalc.plotting`), so it lives with the
other studies in ``report/``, above all three (``docs/architecture.md``, the layer order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.retrieval.querycube import (
    EvalOptions,
    cube_variable,
    evaluate_for_cube,
    retrieval_cube,
    run_names,
)
from metricalc.retrieval.trec_eval import FAMILIES, TrecEval, parse_measures
from metricalc.retrieval.trec_files import Qrels, Run

__all__ = ["RunComparison", "compare_runs", "table_measures"]


def table_measures(result: TrecEval, asked: Sequence[str] | None = None) -> list[str]:
    """The printed names of the measures a comparison table shows: those whose ``all`` is a
    mean over queries (``map``, ``P_5``, ``gm_map``, ...); not ``runid``, ``num_q`` or the
    counts (``num_ret``, ``num_rel``, ``num_rel_ret``, ``num_nonrel_judged_ret``, whose ``all``
    is a sum). In the order ``asked`` names them (the ``-m`` arguments: ``map``, ``ndcg_cut.10``,
    ``P.5`` gives ``map``, ``ndcg_cut_10``, ``P_5``; the measures of one argument, such as
    ``official``, in trec_eval's order), or trec_eval's order without ``asked`` (and for what
    ``asked`` does not name in the standard qrels' measures).

    Examples
    --------
    >>> from metricalc.retrieval import Qrels, Run, evaluate
    >>> qrels = Qrels.from_dict({"q1": {"d1": 1, "d2": 0}})
    >>> run = Run.from_dict({"q1": {"d1": 2.0, "d2": 1.0}})
    >>> asked = ["map", "ndcg_cut.10", "P.5", "num_rel"]
    >>> table_measures(evaluate(qrels, run, asked)), table_measures(evaluate(qrels, run, asked), asked)
    (['map', 'P_5', 'ndcg_cut_10'], ['map', 'ndcg_cut_10', 'P_5'])
    """  # noqa: E501
    means = [name for name in result.summary
             if FAMILIES[result.families[name]].kind in ("mean", "gm")]  # fmt: skip
    if asked is None:
        return means
    order: list[str] = []
    for spec in asked:
        try:
            requested = parse_measures([spec])
        except InvalidInputError:  # a measure of another relevance format: trec_eval's order
            continue
        for one in requested:
            order += [n for n in one.names() if n in means and n not in order]
    return order + [n for n in means if n not in order]


@dataclass(frozen=True)
class RunComparison:
    """Runs evaluated on one qrels and tested against a baseline (:func:`compare_runs`).

    Attributes
    ----------
    results : dict of str to TrecEval
        Each run's evaluation, by run name, in the order given (``summary`` is its ``all``).
    cube : xarray.Dataset
        The runs' QueryCube (:func:`~metricalc.retrieval.querycube.retrieval_cube`).
    baseline : str
        The run every other run is compared with.
    measures : list of str
        The table's measures (:func:`table_measures`), printed names, in the order asked.
    comparisons : dict of str to xarray.Dataset
        Printed measure name -> :func:`metricalc.stats.compare` Dataset (every run against the
        baseline on that measure's per-query values; one correction family).
    untested : dict of str to str
        Measures of the table without a test, and why (``gm_map``: no per-query value; fewer
        than 5 queries in common, ...).
    withheld : list of str
        Significant comparisons whose direction disagrees with the runs' ``all`` values (a run
        lacking queries), left unmarked in the table.
    """

    results: dict[str, TrecEval]
    cube: xr.Dataset
    baseline: str
    measures: list[str]
    comparisons: dict[str, xr.Dataset]
    untested: dict[str, str]
    withheld: list[str]

    @property
    def runs(self) -> list[str]:
        """The run names, in order."""
        return list(self.results)

    def summary(self) -> xr.Dataset:
        """Over ``descriptor`` (the runs): each table measure's ``all`` value (float64)."""
        data = {
            name: ("descriptor", np.array([float(r.summary[name]) for r in
                                           self.results.values()]))
            for name in self.measures
        }
        return xr.Dataset(data, coords={"descriptor": self.runs})

    def marked(self) -> dict[str, xr.Dataset]:
        """The comparisons the table marks: :attr:`comparisons` with ``favours`` set to 0 where
        it points to the run whose ``all`` is lower (:attr:`withheld`)."""
        out = {}
        for measure, comparison in self.comparisons.items():
            favours = np.asarray(comparison["favours"].values).copy()
            favours[_against_all(self, measure, comparison)] = 0
            out[measure] = comparison.assign(favours=("comparison", favours))
        return out

    def table(self, *, decimals: int = 4, label: str = "tab:trec") -> Any:
        """The results table (:class:`metricalc.plotting.tables.Table`): ``all`` values, best in
        bold, second underlined, superscript letters for significant wins (:meth:`marked`);
        ``.to_latex()``, ``.to_markdown()``, ``.to_html()``, ``.to_csv()``."""
        from metricalc.plotting.tables import Table

        n_q = {int(r.summary["num_q"]) for r in self.results.values() if "num_q" in r.summary}
        queries = (f" over {n_q.pop():,} queries" if len(n_q) == 1 else
                   " over the queries each run was evaluated on")
        caption = (
            f"trec_eval measures of {len(self.runs)} runs on {self.cube.attrs['qrels']}: the "
            f"mean{queries} (trec_eval's all); tests against the baseline "
            f"{self.baseline}."
        )
        return Table(self.summary(), self.marked(), columns=self.measures, decimals=decimals,
                     caption=caption, label=label)

    def print(self, *, console: Any = None) -> None:
        """Print the table (one row per run, best bold, second underlined, letters after a
        caret: ``0.3120^a``; columns beyond the console's width in further blocks), then the
        corrected p-value of every run against the baseline per tested measure (``>``: the run
        is significantly better, ``<``: worse, as marked in the table), and the notes."""
        from metricalc.plotting.terminal import terminal_console

        console = console or terminal_console()
        self._print_table(console)
        if self.comparisons:
            self._print_pvalues(console)
        for line in [*self._notes(), *self.withheld]:
            console.print(line, markup=False)

    def _print_table(self, console: Any) -> None:
        """The results table (:meth:`table`) in blocks that fit the console, and its caption."""
        table = self.table()
        rows = [f"({letter}) {system}" for letter, system in zip(table.letters, table.systems,
                                                                 strict=True)]
        styles = {"best": "bold", "second": "underline"}
        values = [[((c.text or "-") + (f"^{c.letters}" if c.letters else ""),
                    styles.get(c.mark, "")) for c in row] for row in table.cells]
        _print_blocks("system", rows, table.headers(), values, console)
        console.print(table.caption, markup=False)

    def _print_pvalues(self, console: Any) -> None:
        """The corrected p-value of every run against the baseline per tested measure."""
        from metricalc.plotting.terminal import pvalue_cell

        tested = list(self.comparisons)
        others = [run for run in self.runs if run != self.baseline]
        marked = self.marked()
        cells = []
        for run in others:
            row = []
            for measure in tested:
                one = marked[measure].sel(descriptor=run, baseline=self.baseline)
                sign = {1: " >", -1: " <"}.get(int(one["favours"]), "")
                row.append((pvalue_cell(float(one["pvalue_corrected"])) + sign,
                            "bold" if sign else ""))
            cells.append(row)
        settings = self.comparisons[tested[0]].attrs
        console.print()
        console.print(
            f"{settings['correction']}-corrected p vs {self.baseline} ({settings['test']} "
            f"test, alpha {settings['alpha']}; >: the run is better, <: worse):",
            markup=False,
        )
        _print_blocks("run", others, tested, cells, console)

    def _notes(self) -> list[str]:
        """What :meth:`print` says after the tables: measures and comparisons not tested (and
        why), the caveats of the tests, and the queries only one run of a pair has."""
        notes = [f"not tested: {m}: {why}" for m, why in self.untested.items()]
        for measure, comparison in self.comparisons.items():
            caveats = (comparison["caveat"].values.tolist() if "caveat" in comparison
                       else [""] * comparison.sizes["comparison"])
            for (d, b), note, caveat in zip(_pairs(comparison),
                                            comparison["note"].values.tolist(), caveats,
                                            strict=True):
                if note:
                    notes.append(f"not tested: {measure}: {d} vs {b}: {note}")
                if caveat:
                    notes.append(f"{measure}: {d} vs {b}: {caveat}")
        dropped: dict[tuple[str, str], set[int]] = {}
        for comparison in self.comparisons.values():
            for pair, n in zip(_pairs(comparison), comparison["n_dropped"].values.tolist(),
                               strict=True):
                dropped.setdefault(pair, set()).add(int(n))
        for (d, b), counts in dropped.items():
            if counts != {0}:
                n_text = "/".join(str(c) for c in sorted(counts))
                notes.append(f"{d} vs {b}: {n_text} queries in only one of the two runs, left "
                             "out of the tests")
        return notes

    def to_json(self, *, per_query: bool = False) -> dict[str, Any]:
        """``{"baseline", "test", "correction", "alpha", "seed", "n_resamples", "runs":
        {name: {"all": {...}} (with ``per_query`` too)}, "comparisons": {measure: [{"run",
        "baseline", "n", "n_dropped", "mean_run", "mean_baseline", "mean_diff", "ci_low",
        "ci_high", "pvalue", "pvalue_corrected", "reject", "favours", "marked", "note", "caveat"}]},
        "untested": {measure: why}, "withheld": [...]}``; NaN as null."""
        settings = next(iter(self.comparisons.values())).attrs if self.comparisons else {}
        runs = {}
        for name, result in self.results.items():
            data = result.to_json()
            runs[name] = data if per_query else {"all": data["all"]}
        marked = self.marked()
        comparisons: dict[str, list[dict[str, Any]]] = {}
        for measure, comparison in self.comparisons.items():
            frame = comparison.to_dataframe().reset_index()
            rows = []
            for k, row in enumerate(frame.to_dict(orient="records")):
                rows.append({
                    "run": row["descriptor"], "baseline": row["baseline"], "n": row["n"],
                    "n_dropped": row["n_dropped"], "mean_run": row["mean_descriptor"],
                    "mean_baseline": row["mean_baseline"], "mean_diff": row["mean_diff"],
                    "ci_low": row["ci_low"], "ci_high": row["ci_high"], "pvalue": row["pvalue"],
                    "pvalue_corrected": row["pvalue_corrected"], "reject": row["reject"],
                    "favours": row["favours"],
                    "marked": int(marked[measure]["favours"].values[k]),
                    "note": row["note"], "caveat": row.get("caveat", ""),
                })
            comparisons[measure] = rows
        out: dict[str, Any] = json_safe({
            "baseline": self.baseline,
            **{key: settings.get(key) for key in ("test", "correction", "alpha", "seed",
                                                  "n_resamples", "confidence_level")},
            "runs": runs,
            "comparisons": comparisons,
            "untested": self.untested,
            "withheld": self.withheld,
        })
        return out


def _print_blocks(corner: str, rows: list[str], headers: list[str],
                  cells: list[list[tuple[str, str]]], console: Any) -> None:
    """Print a grid of ``(text, rich style)`` cells with row names (column ``corner``) and
    column headers; the columns that do not fit the console's width continue in another block
    below (never a cut or wrapped cell)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table as RichTable

    widths = [max([len(h), *(len(row[j][0]) for row in cells)]) + 3
              for j, h in enumerate(headers)]
    blocks: list[list[int]] = [[]]
    first = used = max([len(corner), *map(len, rows)]) + 3
    for j, width in enumerate(widths):
        if blocks[-1] and used + width > console.width:
            blocks.append([])
            used = first
        blocks[-1].append(j)
        used += width
    for block in blocks:
        shown = RichTable(box=box.SIMPLE_HEAD, collapse_padding=True)
        shown.add_column(corner, no_wrap=True)
        for j in block:
            shown.add_column(escape(headers[j]), justify="right", no_wrap=True)
        for name, row in zip(rows, cells, strict=True):
            shown.add_row(escape(name), *(f"[{row[j][1]}]{escape(row[j][0])}[/]" if row[j][1]
                                          else escape(row[j][0]) for j in block))
        console.print(shown)


def _pairs(comparison: xr.Dataset) -> list[tuple[str, str]]:
    """The (run, baseline) of every comparison of a :func:`metricalc.stats.compare` Dataset."""
    return [(str(d), str(b)) for d, b in comparison.get_index("comparison")]


def _against_all(result: RunComparison, measure: str, comparison: xr.Dataset) -> np.ndarray:
    """Comparisons of ``measure`` whose ``favours`` points to the run with the lower ``all``."""
    values = {name: float(r.summary[measure]) for name, r in result.results.items()}
    favours = np.asarray(comparison["favours"].values)
    sign = np.array([np.sign(values[d] - values[b]) for d, b in _pairs(comparison)])
    against: npt.NDArray[np.bool_] = (favours != 0) & (favours != sign)
    return against


def compare_runs(
    qrels: Qrels,
    runs: Mapping[str, Run] | Sequence[Run],
    measures: Sequence[str] = ("official",),
    *,
    baseline: str | None = None,
    test: str = "randomization",
    correction: str = "holm",
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    **options: Unpack[EvalOptions],
) -> RunComparison:
    """Evaluate several runs on one qrels and test every run against a baseline, per measure.

    Parameters
    ----------
    qrels : Qrels
        The judgments.
    runs : mapping of str to Run, or sequence of Run
        At least two runs, by name (a sequence: named by their tags, which must then differ).
    measures : sequence of str
        As :func:`~metricalc.retrieval.evaluate`.
    baseline : str, optional
        The run every other run is compared with; default the first.
    test, correction, alpha, seed, n_resamples, confidence_level
        As :func:`metricalc.stats.compare` (paired by query, i.e. by qid). The default test is
        the paired randomization test on the mean difference (:math:`p = (b+1)/(m+1)` over
        ``n_resamples`` sign flips); every measure's comparisons are one correction family and
        use the same ``seed``.
    **options
        ``complete``, ``level``, ``depth``, ``tie_policy``: as :func:`~metricalc.retrieval.evaluate`
        (:class:`~metricalc.retrieval.querycube.EvalOptions`).

    Returns
    -------
    RunComparison
        The evaluations, the cube, the comparisons per measure and the table.

    Raises
    ------
    InvalidInputError
        Fewer than two runs, an unknown baseline, or what :func:`~metricalc.retrieval.evaluate`
        and :func:`metricalc.stats.compare` refuse (except a measure that cannot be tested,
        which is listed in ``untested``).

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.retrieval import Qrels, Run
    >>> rng = np.random.default_rng(0)
    >>> qrels = Qrels.from_dict({f"q{i}": {f"d{j}": int(j < 3) for j in range(10)}
    ...                          for i in range(20)})
    >>> good = Run.from_dict({f"q{i}": {f"d{j}": 10.0 - j + rng.random() for j in range(10)}
    ...                       for i in range(20)}, tag="good")
    >>> noise = Run.from_dict({f"q{i}": {f"d{j}": rng.random() for j in range(10)}
    ...                        for i in range(20)}, tag="noise")
    >>> result = compare_runs(qrels, [noise, good], ["map", "P.5"], n_resamples=2000)
    >>> result.measures, result.baseline
    (['map', 'P_5'], 'noise')
    >>> row = result.comparisons["map"].sel(descriptor="good", baseline="noise")
    >>> bool(row.reject), int(row.favours)
    (True, 1)
    """
    from metricalc.stats import TESTS, compare

    if test not in TESTS:
        raise InvalidInputError(f"test must be one of {', '.join(TESTS)}; got {test!r}")
    named = run_names(runs)
    results = evaluate_for_cube(qrels, named, measures, **options)
    if len(results) < 2:
        raise InvalidInputError(
            f"a comparison needs at least two runs; got {len(results)} ({', '.join(results)})"
        )
    names = list(results)
    baseline = names[0] if baseline is None else baseline
    if baseline not in results:
        raise InvalidInputError(
            f"baseline {baseline!r} is not one of the runs: {', '.join(names)}"
        )
    cube = retrieval_cube(qrels, results, **options)
    cube["runid"] = ("descriptor", np.array([run.tag for run in named.values()], dtype=str))
    shown = table_measures(results[names[0]], measures)
    if not shown:
        raise InvalidInputError(
            f"none of the measures {list(measures)} is a mean over queries (runid, num_q and the "
            "counts num_ret, num_rel, ... are not compared); ask for e.g. map, P.10, ndcg_cut.10"
        )
    comparisons: dict[str, xr.Dataset] = {}
    untested: dict[str, str] = {}
    for measure in shown:
        why = _untestable(cube, measure, baseline, test)
        if why:
            untested[measure] = why
            continue
        comparisons[measure] = compare(
            cube, metric=cube_variable(measure), pair_by="query", test=test,
            correction=correction, alpha=alpha, baseline=baseline, seed=seed,
            n_resamples=n_resamples, confidence_level=confidence_level,
        )
    partial = RunComparison(results, cube, baseline, shown, comparisons, untested, [])
    withheld = []
    for measure, comparison in comparisons.items():
        index = comparison.get_index("comparison")
        for d, b in index[_against_all(partial, measure, comparison)]:
            withheld.append(
                f"{measure}: {d} vs {b} is significant on the queries both have, in favour of "
                "the run whose all (over its own queries) is lower: not marked"
            )
    return RunComparison(results, cube, baseline, shown, comparisons, untested, withheld)


def _untestable(cube: xr.Dataset, measure: str, baseline: str, test: str) -> str:
    """Why no comparison of ``measure`` against ``baseline`` can be tested ("" if one can): no
    per-query value, fewer than :data:`metricalc.stats.MIN_UNITS` queries in common, or
    differences :func:`metricalc.stats.untestable` refuses for ``test``."""
    from metricalc.stats import MIN_UNITS, untestable

    name = cube_variable(measure)
    if name not in cube.data_vars:
        return "trec_eval has no per-query value of it (a geometric mean, printed for all only)"
    values = np.asarray(cube[name].values)
    base = values[list(cube["descriptor"].values).index(baseline)]
    reasons = []
    for run, row in zip(cube["descriptor"].values.tolist(), values, strict=True):
        if run == baseline:
            continue
        both = np.isfinite(row) & np.isfinite(base)
        n = int(both.sum())
        if n < MIN_UNITS:
            reasons.append(f"{run}: {n} queries in common with {baseline}, a paired test needs "
                           f"at least {MIN_UNITS}")
            continue
        note = untestable(row[both] - base[both], test=test)
        if not note:
            return ""
        reasons.append(f"{run}: {note}")
    return "; ".join(reasons)
