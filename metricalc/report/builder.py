"""Build the report of a study: tables, tests, sentences, figures and the HTML page.

:func:`build` loads (or takes) the study's cubes, computes the metric set, runs the tests of every
testable column (:mod:`metricalc.report.analysis`), and writes below ``out``:

- ``report.html``: self-contained (figures embedded, no network), every name escaped;
- ``tables.tex`` (booktabs), ``tables.md``, ``table.csv``: the results table;
- ``comparisons.csv``: one row per comparison of every column (all variables of
  :func:`metricalc.stats.compare` and the sentence), ``rankings.csv``: average ranks;
- ``metrics.csv``: the full metric set per system; ``summary.txt``: the sentences and notes;
- ``figures/<name>.png`` and ``.svg``.

``out`` is the report's own folder, by default ``reports/<study>/report/`` inside the study
folder that holds the study's data (the built-in benchmark, the cube cache, what ``metricalc
demo`` writes when the study is the demo's). The outputs are written into a staged folder beside
``out`` and swapped in whole (:func:`metricalc.fileio.staged_folder`): ``out`` holds all of one
run's outputs, never a mix of two runs', and a report killed half-way leaves the previous one
intact. The build lists the files it wrote in ``out/report-files.json`` (:data:`MANIFEST`); the
next build removes only those of them it does not write again, and keeps everything else in
``out`` (a cache, the benchmark, another job's figures in ``figures/``, your own files).

Other parts add sections to the page with
:func:`~metricalc.report.sections.register_section` (e.g. the detector-or-descriptor
decomposition).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.cube import PROTOCOL_ATTRS
from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write, csv_text, recover_folder, staged_folder
from metricalc.hpatches import CVPR17_PROTOCOL, cvpr17_unit
from metricalc.plotting.comparisons import (
    CORRECTION_NAMES,
    INTERVAL_NAMES,
    PAIR_UNITS,
    TEST_NAMES,
    interval_name,
)
from metricalc.plotting.labels import dataset_name, metric_info
from metricalc.plotting.tables import Table
from metricalc.progress import progress_bar
from metricalc.report.analysis import ColumnTests, run_tests, state_once
from metricalc.report.data import combined, load_cubes, summary_metrics
from metricalc.report.html import EmbeddedFigure, data_uri, png_data_uri, render_report
from metricalc.report.model import Report, Section
from metricalc.report.reference import reference_rows
from metricalc.report.sections import SECTION_HOOKS, SectionHook, register_section
from metricalc.report.study import Study, load_study
from metricalc.report.summary import describe_ranking, summarize
from metricalc.validation import Boolean, validate_params

__all__ = [
    "MANIFEST",
    "REPORT_FOLDER",
    "REPORT_OUTPUTS",
    "SECTION_HOOKS",
    "Report",
    "Section",
    "SectionHook",
    "build",
    "outputs_of",
    "register_section",
]

REPORT_FOLDER = "report"
"""The folder of a study's report inside its study folder (``reports/<study>/report/``)."""
MANIFEST = "report-files.json"
"""The report's manifest: the paths of the files the build wrote in its folder, relative to
it. The next build of that folder removes those it does not write again, and nothing else."""
REPORT_OUTPUTS = frozenset(
    {
        "report.html",
        "tables.tex",
        "tables.md",
        "table.csv",
        "comparisons.csv",
        "rankings.csv",
        "metrics.csv",
        "summary.txt",
        "figures",
        MANIFEST,
    }
)
"""The names a report writes in its folder (``figures`` is a folder: each figure's file is
listed in the manifest)."""


def outputs_of(folder: Path) -> set[str]:
    """The files a report build wrote in ``folder``: those its :data:`MANIFEST` lists, and the
    manifest. A folder without a readable manifest (a report of an earlier metricalc version)
    is taken to hold the report's files of :data:`REPORT_OUTPUTS` at its top level; its figures
    cannot be told from other files of ``figures/`` and are kept."""
    try:
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
        return set(REPORT_OUTPUTS - {"figures"})
    return {MANIFEST, *(str(name) for name in listed if isinstance(name, str))}


# ----------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FigureJob:
    name: str
    title: str
    caption: str
    draw: Callable[[], Any]  # -> Axes
    group: str = ""  # column label for the significance figures, "" for the general ones


def _has(cubes: Mapping[str, xr.Dataset], names: tuple[str, ...]) -> bool:
    """Every cube has every variable of ``names`` with at least one value (not a sentinel)."""

    def known(values: xr.DataArray) -> bool:
        if np.issubdtype(values.dtype, np.floating):
            return bool(np.isfinite(values).any())
        return bool((values >= 0).any())

    return all(n in c.data_vars and known(c[n]) for c in cubes.values() for n in names)


def _figure_jobs(
    study: Study,
    cubes: dict[str, xr.Dataset],
    metrics: xr.Dataset,
    tests: dict[str, ColumnTests],
    notes: list[str],
) -> list[_FigureJob]:
    """The figures the study asks for that its data can show (a note for each that cannot).
    Curves are computed when a figure is drawn."""
    from metricalc.metrics import (
        matching_accuracy,
        matching_pr_curve,
        matching_roc_curve,
        scene_metrics,
    )
    from metricalc.plotting import curve_figures, figures
    from metricalc.report import stats_figures

    names = study.names

    def per_label(compute: Callable[[xr.Dataset], Any], pad: str = "") -> Any:
        return combined({label: compute(c) for label, c in cubes.items()}, pad=pad)

    split_maps = ("true_map_macro_by_scene", "viewpoint_map", "illumination_map")
    by_split = all(m in metrics and np.isfinite(metrics[m].values).any() for m in split_maps)
    image_pairs = all(
        np.char.find(c["pair"].values.astype(str), "-").min() >= 0
        for c in cubes.values()
        if c.sizes["query"]
    )
    ranked = "rank_histogram" in metrics and float(metrics["rank_histogram"].sum()) > 0
    ratio_test = _has(cubes, ("nn_correct", "nn_distance", "nn2_distance"))
    no_split = "no viewpoint / illumination mAP in the metric set"
    no_ratio = "the cube has no nearest-neighbour distances"
    general = [  # name, available, why not, title, caption, draw
        ("map_by_split", by_split, no_split, "mAP by scene type",
         "mAP of every system over all scenes, viewpoint (v_*) and illumination (i_*) "
         "scenes: each the mean over those scenes of the scene's mean AP over its R = 1 "
         "queries, as the table's mAP columns.",
         lambda: figures.plot_map_by_split(metrics, names=names)),
        ("split_scatter", by_split, no_split, "Viewpoint vs illumination mAP",
         "Each system's viewpoint mAP (x) against its illumination mAP (y); the dashed diagonal "
         "marks equal values.",
         lambda: figures.plot_split_scatter(metrics, names=names)),
        ("scene_map", image_pairs and _has(cubes, ("ap",)),
         "the cube has no image pairs (e.g. patch retrieval) or no AP values", "mAP per scene",
         "True mAP of every system (rows) in every scene (columns).",
         lambda: figures.plot_scene_map(per_label(scene_metrics), names=names)),
        ("rank_histogram", ranked, "no query has rank statistics", "Rank histogram",
         "Share of R = 1 queries by the rank of their relevant keypoint.",
         lambda: figures.plot_rank_histogram(metrics, names=names)),
        ("pr_curves", ratio_test, no_ratio, "Ratio-test precision-recall",
         "Precision against recall of nearest-neighbour matching as the ratio-test threshold "
         "varies (recall over all matchable queries).",
         lambda: curve_figures.plot_pr_curves(
             per_label(matching_pr_curve, "threshold"), names=names)),
        ("roc", ratio_test, no_ratio, "ROC graph of the ratio test",
         "True against false positive rate of the ratio-test match classifier; the dashed "
         "diagonal is chance. Each system's point of maximal Youden J (J = TPR - FPR, its "
         "height above the diagonal) is marked; the legend gives J and its ratio.",
         lambda: curve_figures.plot_roc(per_label(matching_roc_curve, "threshold"), names=names)),
        ("mma", _has(cubes, ("nn_error",)), "the cube has no reprojection errors (nn_error)",
         "Mean matching accuracy",
         "Share of mutual nearest-neighbour matches within each pixel threshold, averaged over "
         "every image pair, a pair without matches counting 0 (D2-Net's convention).",
         lambda: curve_figures.plot_mma(per_label(matching_accuracy), names=names)),
    ]  # fmt: skip
    jobs: list[_FigureJob] = []
    for name, available, reason, title, caption, draw in general:
        if name not in study.figures:
            continue
        if available:
            jobs.append(_FigureJob(name, title, caption, draw))
        else:
            notes.append(f"figure {name} skipped: {reason}")
    for column, result in tests.items():
        info = metric_info(column)
        per_column = [  # figure kind, stem, Dataset, title, caption, plot
            ("forest", "forest", result.comparison, f"Differences in {info.phrase}",
             f"Difference in {info.phrase}, the column's own statistic (descriptor minus "
             "baseline), with its "
             f"{interval_name({} if result.comparison is None else result.comparison.attrs)} "
             "confidence interval (per comparison, not corrected); filled points are "
             "significant after the correction.",
             stats_figures.plot_forest),
            ("cd_diagram", "cd", result.ranking, f"Critical difference diagram, {info.phrase}",
             "Average ranks (1 = best) over the paired units; bars join systems whose ranks "
             "differ by less than the Nemenyi critical difference (CD).",
             stats_figures.plot_cd_diagram),
        ]  # fmt: skip
        for kind, stem, data, title, caption, plot in per_column:
            if data is None or kind not in study.figures:
                continue
            if kind == "forest" and result.repeats is not None:  # drawn for that column
                continue

            def draw(plot: Any = plot, data: xr.Dataset = data, phrase: str = info.phrase) -> Any:
                return plot(data, names=names, metric_phrase=phrase)

            jobs.append(_FigureJob(f"{stem}_{column}", title, caption, draw, group=info.label))
    return jobs


# ----------------------------------------------------------------------------------------------
# tables and text
# ----------------------------------------------------------------------------------------------


_COMPARISON_ATTRS = ("metric", "split", "pair_by", "test", "correction", "alpha")
"""The attrs of a comparison written as the first columns of ``comparisons.csv``."""
_RANKING_COLUMNS = (
    "column", "descriptor", "average_rank", "mean", "friedman_statistic", "friedman_pvalue",
    "critical_difference", "n_units",
)  # fmt: skip
"""The columns of ``rankings.csv`` (``mean`` and the test's columns when the ranking has them)."""


def _comparisons_frame(report: Report, sentences: dict[str, list[str]]) -> pd.DataFrame:
    frames = []
    for column, result in report.tests.items():
        if result.comparison is None:
            continue
        frame = result.comparison.to_dataframe().reset_index()
        attrs = result.comparison.attrs
        frame.insert(0, "column", column)
        for position, key in enumerate(_COMPARISON_ATTRS, start=1):
            frame.insert(position, key, attrs.get(key, ""))
        frame["sentence"] = sentences[result.repeats or column]  # a repeat: those of its twin
        frames.append(frame)
    if frames:
        return pd.concat(frames, ignore_index=True)
    from metricalc.stats.compare import COMPARE_VARIABLES  # lazy, as the tests' own imports

    columns = ("column", *_COMPARISON_ATTRS, "descriptor", "baseline", *COMPARE_VARIABLES)
    return pd.DataFrame(columns=[*columns, "sentence"])  # no comparison: the header alone


def _rankings_frame(report: Report) -> pd.DataFrame:
    frames = []
    for column, result in report.tests.items():
        ranking = result.ranking
        if ranking is None:
            continue
        frame = pd.DataFrame(
            {
                "column": column,
                "descriptor": [str(d) for d in ranking["descriptor"].values.tolist()],
                "average_rank": ranking["average_rank"].values,
            }
        )
        if "mean" in ranking:
            frame["mean"] = ranking["mean"].values
        for name in _RANKING_COLUMNS[4:]:
            if name in ranking:
                frame[name] = ranking[name].values.item()
        frames.append(frame)
    if frames:
        return pd.concat(frames, ignore_index=True)
    return pd.DataFrame(columns=list(_RANKING_COLUMNS))  # no ranking: the header alone


def _protocol(metrics: xr.Dataset) -> list[tuple[str, str]]:
    """The protocol list of the HTML page: the attrs of :data:`~metricalc.cube.PROTOCOL_ATTRS`,
    or for HPatches CVPR'17 cubes those of :data:`~metricalc.hpatches.CVPR17_PROTOCOL` that are
    set (their keypoint attrs, ``tau_px``, ``border_px``, ..., are defaults that do not apply to
    patches)."""
    attrs = metrics.attrs
    if attrs.get("benchmark") == "hpatches-cvpr17":  # the empty ones (no preset) left out
        return [(k, str(attrs[k])) for k in CVPR17_PROTOCOL if str(attrs.get(k, "")) != ""]
    return [(key, str(attrs[key])) for key in PROTOCOL_ATTRS if key in attrs]


def _tests_text(study: Study, attrs: Mapping[str, Any], *, ranked: bool) -> str:
    """The tests of the HTML page, their units named as the cubes name them
    (:func:`~metricalc.hpatches.cvpr17_unit`, else :data:`PAIR_UNITS`); the Friedman ranks
    only when a column was ``ranked`` (three systems or more)."""
    t = study.tests
    baseline = f"baseline {study.baseline}" if study.baseline else "all pairs of systems"
    unit = cvpr17_unit(attrs, t.rank_by) or PAIR_UNITS[t.rank_by]
    ranks = f", Friedman ranks over {unit}s" if ranked else ""
    paired = cvpr17_unit(attrs, t.pair_by) or PAIR_UNITS[t.pair_by]
    return (
        f"{TEST_NAMES[t.test]} of each column's own statistic, independent unit: {paired} "
        "(coarser where a column needs it), "
        f"{CORRECTION_NAMES[t.correction]} correction per column, alpha = {t.alpha:g}, "
        f"{100 * t.confidence_level:g}% {INTERVAL_NAMES[t.interval]}, {baseline}{ranks}, "
        f"seed {t.seed}."
    )


def _summary_text(study: Study, sentences: list[str], rankings: list[str], notes: list[str]) -> str:
    lines = [study.title or study.name, "", *sentences]
    if rankings:
        lines += ["", *rankings]
    if notes:
        lines += ["", "Notes:", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# build
# ----------------------------------------------------------------------------------------------


def _results_table(
    study: Study, metrics: xr.Dataset, tests: dict[str, ColumnTests], columns: list[str]
) -> Table:
    """The study's results table with the significance letters of its tests and the reference
    rows of its ``reported`` numbers."""
    comparisons = {c: t.comparison for c, t in tests.items() if t.comparison is not None}
    caption = f"{study.title}." if study.title else None
    reported = reference_rows(study.reported, metrics.attrs, columns)
    return Table(metrics, comparisons, columns=columns, decimals=study.decimals,
                 names=study.names, caption=caption, label=f"tab:{study.name}",
                 reported=reported)  # fmt: skip


def _texts(
    study: Study, tests: dict[str, ColumnTests], notes: list[str]
) -> tuple[dict[str, list[str]], list[str]]:
    """The sentences of every tested column (by column) and of every ranking; the tests' notes
    are appended to ``notes``."""
    by_column: dict[str, list[str]] = {}
    rankings: list[str] = []
    for column, result in tests.items():
        notes += result.notes
        phrase = metric_info(column).phrase
        if result.comparison is not None and result.repeats is None:
            by_column[column] = summarize(
                result.comparison, names=study.names, metric_phrase=phrase, decimals=study.decimals
            )
        if result.ranking is not None:
            rankings.append(
                describe_ranking(result.ranking, names=study.names, metric_phrase=phrase)
            )
    return by_column, rankings


def _analyse(
    study: Study, out: Path, loaded: dict[str, xr.Dataset], progress: bool
) -> tuple[Report, dict[str, list[str]]]:
    """The metric set, the tests, the results table and the sentences of the study's cubes (the
    :class:`Report` before its files), and the sentences by column."""
    metrics = combined({label: summary_metrics(cube) for label, cube in loaded.items()})
    columns = list(study.metrics) if study.metrics else None
    chosen = Table(metrics, columns=columns, decimals=study.decimals, names=study.names).columns
    reference_rows(study.reported, metrics.attrs, chosen)  # refused before the tests run
    notes: list[str] = []
    with progress_bar("tests", total=len(chosen), enabled=progress) as advance:
        tests = run_tests(
            loaded, chosen, tests=study.tests, baseline=study.baseline, advance=advance
        )
    state_once(tests)
    table = _results_table(study, metrics, tests, chosen)
    by_column, rankings = _texts(study, tests, notes)
    sentences = [s for column in by_column for s in by_column[column]]
    report = Report(out, study, loaded, metrics, table, tests, sentences, rankings, notes)
    return report, by_column


def _draw_figures(report: Report, progress: bool) -> list[tuple[str, EmbeddedFigure]]:
    """Draw the study's figures (saved under ``figures/`` when the study keeps them, each file
    added to ``report.files``); each with its group (column label, "" for the general ones)."""
    from metricalc.plotting.figures import save_figure

    study, out = report.study, report.out
    jobs = _figure_jobs(study, report.cubes, report.metrics, report.tests, report.notes)
    embedded: list[tuple[str, EmbeddedFigure]] = []
    draw = "figures" in study.outputs or "html" in study.outputs
    with progress_bar("figures", total=len(jobs) if draw else 0, enabled=progress) as advance:
        for job in jobs if draw else []:
            ax = job.draw()
            if "figures" in study.outputs:
                written = save_figure(ax, out / "figures" / job.name)
                report.files.extend(written)
                uri = data_uri(written[0])
            else:
                uri = png_data_uri(ax)
            embedded.append((job.group, EmbeddedFigure(job.name, job.title, job.caption, uri)))
            advance()
    return embedded


def _page(report: Report, embedded: list[tuple[str, EmbeddedFigure]]) -> str:
    """The HTML page of ``report`` (the section hooks are called here)."""
    from metricalc.version import __version__

    study, metrics = report.study, report.metrics
    sections = [s for hook in SECTION_HOOKS if (s := hook(report)) is not None]
    ranked = any(result.ranking is not None for result in report.tests.values())
    groups: dict[str, list[EmbeddedFigure]] = {}
    for group, figure in embedded:
        if group:
            groups.setdefault(group, []).append(figure)
    spec_text = (
        study.source.read_text(encoding="utf-8")
        if study.source is not None and study.source.is_file()
        else ""
    )
    return render_report(
        {
            "version": __version__,
            "title": study.title or study.name,
            "study_name": study.name,
            "description": study.description,
            "dataset": dataset_name(metrics.attrs) or "unnamed",
            "n_systems": metrics.sizes["descriptor"],
            "sentences": report.sentences,
            "rankings": report.rankings,
            "notes": report.notes,
            "table_html": report.table.to_html(),
            "column_figures": [{"title": title, "figures": figs} for title, figs in groups.items()],
            "figures": [figure for group, figure in embedded if not group],
            "extra_sections": sections,
            "protocol": _protocol(metrics),
            "tests": _tests_text(study, metrics.attrs, ranked=ranked),
            "spec_text": spec_text,
            "files": [str(p.relative_to(report.out)) for p in report.files],
        }
    )


def _write_outputs(
    report: Report, by_column: dict[str, list[str]], embedded: list[tuple[str, EmbeddedFigure]]
) -> None:
    """Write the study's outputs (tables, CSV files, summary, HTML page) below ``report.out``,
    each added to ``report.files``."""
    study, table, metrics = report.study, report.table, report.metrics

    def write(name: str, text: str) -> None:
        path = report.out / name
        atomic_write(path, text)
        report.files.append(path)

    if "latex" in study.outputs:
        write("tables.tex", table.to_latex())
    if "markdown" in study.outputs:
        write("tables.md", table.to_markdown())
    if "csv" in study.outputs:
        write("table.csv", table.to_csv())
        write("comparisons.csv", csv_text(_comparisons_frame(report, by_column)))
        write("rankings.csv", csv_text(_rankings_frame(report)))
        scalar = [n for n, v in metrics.data_vars.items() if v.dims == ("descriptor",)]
        write("metrics.csv", csv_text(metrics[scalar].to_dataframe(), index=True))
    if "summary" in study.outputs:
        write("summary.txt", _summary_text(study, report.sentences, report.rankings, report.notes))
    if "html" in study.outputs:
        write("report.html", _page(report, embedded))


@validate_params(progress=Boolean())
def build(
    study: Study | str | Path,
    *,
    out: str | Path | None = None,
    cubes: Mapping[str, xr.Dataset] | None = None,
    progress: bool = False,
    data: str | Path | None = None,
) -> Report:
    """Render a study into its report folder.

    Parameters
    ----------
    study : Study or path
        A :class:`~metricalc.report.study.Study` or the path of its YAML file
        (:func:`~metricalc.report.study.load_study`).
    out : path, optional
        The report folder; default ``<study folder>/report`` (:data:`REPORT_FOLDER`), the study
        folder being ``<folder of the YAML>/<study name>`` (``reports/<study>/report/``).
    cubes : mapping of str to QueryCube, optional
        The study's cubes by label, already computed (``metricalc demo`` passes its own); by
        default they are loaded from the study's ``data``.
    progress : bool
        Progress bars (data loading, tests, figures).
    data : path, optional
        Where a ``dataset`` study keeps its data (``benchmark/``, ``cache/``) and finds the
        cubes ``metricalc demo`` left there; default the study folder when ``out`` is not
        given, else ``out``.

    Returns
    -------
    Report
        What was computed; ``report.files`` lists every file written and ``report.html`` the
        page.
    """
    if not isinstance(study, Study):
        study = load_study(study)
    if out is None:
        data = study.default_out() if data is None else data
        out = study.default_out() / REPORT_FOLDER
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} is a file; expected a folder for the report")
    recover_folder(out, outputs_of)  # a report killed while it swapped: finish first
    loaded = (
        dict(cubes)
        if cubes is not None
        else load_cubes(study.data, out=Path(data if data is not None else out), progress=progress)
    )
    report, by_column = _analyse(study, out, loaded, progress)
    # swapped in whole (never a mix of runs); of the previous folder only the files its
    # manifest lists go, everything else there (a cache, another job's files) is kept
    with staged_folder(out, outputs_of) as stage:
        report.out = stage
        embedded = _draw_figures(report, progress)
        _write_outputs(report, by_column, embedded)
        listed = sorted(path.relative_to(stage).as_posix() for path in report.files)
        atomic_write(stage / MANIFEST, json.dumps({"files": listed}, indent=1) + "\n")
    report.out = out
    report.files = [out / path.relative_to(stage) for path in report.files]
    return report
