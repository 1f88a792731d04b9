"""Metric tables in the terminal (rich)."""

from __future__ import annotations

import math
import re
import sys

import pandas as pd
import xarray as xr
from rich import box
from rich.console import Console
from rich.table import Table

from metricalc.report.labels import is_fraction_metric

TABLE_METRICS = (
    ("true_map_micro", "mAP"),
    ("true_map_macro_by_scene", "mAP macro"),
    ("viewpoint_map", "mAP v"),
    ("illumination_map", "mAP i"),
    ("precision_at_1", "HR@1"),
    ("precision_at_5", "HR@5"),
    ("keypoint_verification_ap", "verif AP"),
    ("keypoint_retrieval_ap", "retr AP"),
    ("r0_rate", "R=0 rate"),
    ("total_queries_processed", "queries"),
)
"""(metric name, column header) of the default terminal table; rates shown in percent. The
hit-rate columns (``HR@K``) follow the cut-offs of the metric set: one per ``precision_at_K``."""

_HIT_RATE = re.compile(r"precision_at_(\d+)")


def terminal_console() -> Console:
    """The console the ``print_*`` functions of the terminal tables use when given none: the
    terminal's, or for a pipe or a log file one as wide as a terminal shows (120 columns)."""
    return Console() if sys.stdout.isatty() else Console(width=120)


def _cell(name: str, value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if name.startswith("total_"):
        return f"{int(value):,}"
    return f"{100 * value:.1f}"


def _shown_columns(metrics: xr.Dataset) -> list[tuple[str, str]]:
    """:data:`TABLE_METRICS` present in ``metrics``, with ``HR@K`` for every ``precision_at_K``
    of the metric set (in order of K) where the defaults have HR@1 and HR@5."""
    ks = sorted(int(m[1]) for n in metrics.data_vars if (m := _HIT_RATE.fullmatch(str(n))))
    shown: list[tuple[str, str]] = []
    for name, header in TABLE_METRICS:
        if name == "precision_at_1":
            shown += [(f"precision_at_{k}", f"HR@{k}") for k in ks]
        elif not _HIT_RATE.fullmatch(name) and name in metrics:
            shown.append((name, header))
    return shown


def print_metric_table(
    metrics: xr.Dataset, *, title: str = "", console: Console | None = None
) -> None:
    """Print one row per descriptor with the main metrics (percent) of a metric set."""
    table = Table(title=title or None)
    table.add_column("descriptor", no_wrap=True)
    shown = _shown_columns(metrics)
    for _, header in shown:
        table.add_column(header, justify="right")
    for d in metrics["descriptor"].values.tolist():
        row = metrics.sel(descriptor=d)
        status = str(row["status"].values) if "status" in row else "ok"
        cells = [_cell(n, float(row[n].values)) for n, _ in shown]
        table.add_row(d if status == "ok" else f"{d} (error)", *cells)
    (console or terminal_console()).print(table)


def print_frame(frame: pd.DataFrame, *, title: str = "", console: Console | None = None) -> None:
    """Print a table (one row per frame row); float columns named ``*_map`` in percent."""
    table = Table(title=title or None)
    for column in frame.columns:
        table.add_column(str(column), justify="left" if frame[column].dtype == object else "right")
    for _, row in frame.iterrows():
        cells = []
        for column, value in row.items():
            if str(column).endswith("_map") and isinstance(value, float):
                cells.append(f"{100 * value:.2f}" if math.isfinite(value) else "-")
            else:
                cells.append("-" if value is None else str(value))
        table.add_row(*cells)
    (console or terminal_console()).print(table)


def _number(value: float, *, percent: bool, signed: bool = False) -> str:
    if not math.isfinite(value):
        return "-"
    shown, digits = (100 * value, ".2f") if percent else (value, ".4g")
    return format(shown, ("+" if signed else "") + digits)


def _effect(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "-"


def _pvalue(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _marker(row: pd.Series) -> str:
    """``>`` / ``<``: the side a comparison calls better; ``?``: rejected, but the test and the
    mean difference disagree (no side); ``""``: not rejected."""
    if row.get("caveat", ""):
        return "?"
    return {1: ">", -1: "<"}.get(int(row["favours"]), "")


def print_comparisons(
    comparisons: xr.Dataset, *, title: str = "", console: Console | None = None
) -> None:
    """Print a :func:`metricalc.stats.compare` result, one row per comparison.

    Means and differences of metrics in [0, 1] (``ap``, ``hit@K``, ...) are shown in percent
    points; ``>`` marks a comparison rejected at the corrected alpha in the descriptor's favour,
    ``<`` in the baseline's (``favours``: never the system with the lower mean). ``?`` marks a
    rejected comparison whose test points against the mean difference (a Wilcoxon or sign test
    asked for); its ``caveat`` is printed below the table, as are the comparisons that could not
    be tested (``-`` for their p-values) with the reason (``note``)."""
    attrs = comparisons.attrs
    metric = str(attrs.get("metric", ""))
    percent = is_fraction_metric(metric)
    level = round(100 * float(attrs.get("confidence_level", 0.95)), 1)
    caption = (
        f"{attrs.get('test')} test, {attrs.get('correction')} correction, alpha "
        f"{attrs.get('alpha')}, {level:g}% BCa CI, pair by {attrs.get('pair_by')}"
    )
    if attrs.get("split"):
        caption += f", {attrs['split']} queries only"
    if percent:
        caption += "; values in percent"
    table = Table(
        title=title or None, caption=caption, box=box.SIMPLE_HEAD, collapse_padding=True
    )
    for header in ("descriptor", "baseline"):
        table.add_column(header, no_wrap=True)
    for header in ("n", metric, "base", "diff", "CI", "p", "p adj", "", "r_rb", "d_z", "W/T/L"):
        table.add_column(header, justify="right", no_wrap=True)
    frame = comparisons.to_dataframe()
    for (descriptor, baseline), row in frame.iterrows():
        low = _number(row["ci_low"], percent=percent, signed=True)
        high = _number(row["ci_high"], percent=percent, signed=True)
        table.add_row(
            str(descriptor),
            str(baseline),
            f"{int(row['n']):,}",
            _number(row["mean_descriptor"], percent=percent),
            _number(row["mean_baseline"], percent=percent),
            _number(row["mean_diff"], percent=percent, signed=True),
            f"[{low}, {high}]",
            _pvalue(row["pvalue"]),
            _pvalue(row["pvalue_corrected"]),
            _marker(row),
            _effect(row["rank_biserial"]),
            _effect(row["cohens_dz"]),
            f"{int(row['wins'])}/{int(row['ties'])}/{int(row['losses'])}",
        )
    console = console or terminal_console()
    console.print(table)
    for (descriptor, baseline), row in frame.iterrows():
        if row.get("caveat", ""):
            console.print(f"? {descriptor} vs {baseline}: {row['caveat']}", markup=False)
        if row["note"]:
            console.print(f"not tested: {descriptor} vs {baseline}: {row['note']}", markup=False)
