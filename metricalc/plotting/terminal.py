"""Metric tables in the terminal (rich)."""

from __future__ import annotations

import copy
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Column, Table

from metricalc.plotting.labels import is_fraction_metric

SHARED_METRIC_COLUMNS = (
    ("viewpoint_map", "mAP v"),
    ("illumination_map", "mAP i"),
    ("hit_rate_at_1", "HR@1"),
    ("hit_rate_at_5", "HR@5"),
    ("keypoint_verification_ap", "verif AP"),
    ("keypoint_retrieval_ap", "retr AP"),
)
"""(metric name, column header) of the split mAPs, hit rates and keypoint APs: the middle
columns of every terminal table of metrics (:data:`TABLE_METRICS`, ``metricalc db show``)."""

TABLE_METRICS = (
    ("true_map_macro_by_scene", "mAP"),
    ("true_map_micro", "mAP (queries)"),
    *SHARED_METRIC_COLUMNS,
    ("r0_rate", "R=0 rate"),
    ("total_queries_processed", "queries"),
)
"""(metric name, column header) of the default terminal table; rates shown in percent. As in
the paper table, "mAP" is the mean over scenes of scene mAPs and the query-weighted mean says
so. The hit-rate columns (``HR@K``) follow the cut-offs of the metric set: one per
``hit_rate_at_K``."""

_HIT_RATE = re.compile(r"hit_rate_at_(\d+)")


def terminal_console() -> Console:
    """The console the ``print_*`` functions of the terminal tables use when given none: the
    terminal's (its width, or ``COLUMNS`` when set), or for a pipe or a log file without
    ``COLUMNS`` one as wide as a terminal shows (120 columns)."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        return Console()
    return Console(width=120)


@dataclass(frozen=True)
class _Span:
    """Widths of one column's text: ``least`` (its longest word, or its longest cell when the
    cells must stay whole) and ``most`` (its longest line)."""

    least: int
    most: int


def _span(console: Console, column: Column) -> _Span:
    """The :class:`_Span` of ``column``: the header may wrap at spaces, and so may the cells
    of a left-aligned (text) column; the cells of a right-aligned (number) column stay whole."""
    options = console.options.update_width(10_000)
    header = Measurement.get(console, options, column.header)
    cells = [Measurement.get(console, options, cell) for cell in column.cells]
    whole = column.justify == "right"
    least = max([header.minimum] + [c.maximum if whole else c.minimum for c in cells])
    most = max([header.maximum] + [c.maximum for c in cells])
    return _Span(max(least, 1), max(most, 1))


_KEPT_STYLE = ("header_style", "footer_style", "style", "justify", "vertical", "highlight")
"""The attributes of a column that a part of a table (:func:`_part`) keeps."""


def _part(
    table: Table,
    columns: Sequence[int],
    widths: Sequence[int],
    title: str | None,
    *,
    rows: bool = True,
) -> Table:
    """A copy of ``table`` with only ``columns`` (in order), each of the fixed width given, long
    words folded onto the next line (never cut); without its rows unless ``rows``."""
    part = copy.copy(table)
    part.columns, part.rows, part.title = [], [], title
    originals = [table.columns[i] for i in columns]
    for column, width in zip(originals, widths, strict=True):
        kept = {name: getattr(column, name) for name in _KEPT_STYLE}
        part.add_column(column.header, column.footer, overflow="fold", width=width, **kept)
    cells = [list(column.cells) for column in originals]
    for r, row in enumerate(table.rows if rows else []):
        part.add_row(*(c[r] for c in cells), style=row.style, end_section=row.end_section)
    return part


def _frame_width(console: Console, table: Table, columns: Sequence[int]) -> int:
    """Columns taken by the borders and the padding of ``table`` cut down to ``columns``."""
    probe = _part(table, columns, [1] * len(columns), None, rows=False)
    probe.caption = None
    options = console.options.update_width(10_000)
    return Measurement.get(console, options, probe).maximum - len(columns)


def _widths(spans: Sequence[_Span], room: int) -> list[int]:
    """Column widths within ``room``: each its longest line if all fit, else its longest word
    plus a share of the spare room in proportion to what it lacks."""
    if sum(s.most for s in spans) <= room:
        return [s.most for s in spans]
    widths = [s.least for s in spans]
    lacking = [s.most - s.least for s in spans]
    spare, total = room - sum(widths), sum(lacking)
    if spare <= 0 or total == 0:
        return widths
    widths = [w + spare * gap // total for w, gap in zip(widths, lacking, strict=True)]
    for i in sorted(range(len(spans)), key=lambda i: -lacking[i]):
        if sum(widths) < room and widths[i] < spans[i].most:
            widths[i] += 1
    return widths


def _groups(
    console: Console, table: Table, spans: Sequence[_Span], keys: int, width: int
) -> list[list[int]]:
    """The columns after the first ``keys`` cut into consecutive groups, each fitting within
    ``width`` next to the key columns when every column is at its narrowest (a column too wide
    for that alone makes a group of its own)."""
    head = list(range(keys))
    groups: list[list[int]] = [[]]
    for i in range(keys, len(spans)):
        candidate = head + groups[-1] + [i]
        needed = _frame_width(console, table, candidate) + sum(spans[c].least for c in candidate)
        if groups[-1] and needed > width:
            groups.append([])
        groups[-1].append(i)
    return groups


def fit_table(
    table: Table, width: int, *, keys: int = 1, console: Console | None = None
) -> list[Table]:
    """``table`` laid out within ``width`` columns, never cutting a cell.

    Headers wrap onto several lines, text (left-aligned) cells at spaces; numbers
    (right-aligned cells) stay whole, and so do the row names (the first ``keys`` columns)
    while they take at most half the width. When even that is too wide, the columns are split into
    stacked parts, each repeating the first ``keys`` columns (the row names) and titled
    "(continued)" after the first, as few parts as will do and as even as they can be; the
    caption goes under the last part.

    Examples
    --------
    >>> from rich.table import Table
    >>> table = Table(title="t")
    >>> for header in ("descriptor", "a long header", "another long header"):
    ...     table.add_column(header, justify="left" if header == "descriptor" else "right")
    >>> table.add_row("my descriptor", "123456789", "987654321")
    >>> [len(part.columns) for part in fit_table(table, 80)]
    [3]
    >>> [(p.title, len(p.columns)) for p in fit_table(table, 30)]
    [('t', 2), ('(continued)', 2)]
    """
    console = console or Console(width=width)
    spans = [_span(console, column) for column in table.columns]
    keys = min(keys, len(spans))
    for k in range(keys):  # row names on one line when they take at most half the width
        spans[k] = _Span(
            max(spans[k].least, min(spans[k].most, width // (2 * keys))), spans[k].most
        )
    groups = _groups(console, table, spans, keys, width)
    fewest = len(groups)
    low, high = 1, width  # balance: the narrowest limit that needs no more parts
    while low < high:
        middle = (low + high) // 2
        if len(_groups(console, table, spans, keys, middle)) <= fewest:
            high = middle
        else:
            low = middle + 1
    groups = _groups(console, table, spans, keys, high)
    head = list(range(keys))
    title = table.title if isinstance(table.title, str) else None
    parts = []
    for number, group in enumerate(groups):
        columns = head + group
        room = width - _frame_width(console, table, columns)
        named = title if number == 0 else "(continued)"
        part = _part(table, columns, _widths([spans[c] for c in columns], room), named)
        part.caption = table.caption if number == len(groups) - 1 else None
        parts.append(part)
    return parts


def print_table(table: Table, *, console: Console | None = None, keys: int = 1) -> None:
    """Print ``table`` within the console's width (:func:`fit_table`): every cell in full."""
    console = console or terminal_console()
    for part in fit_table(table, console.width, keys=keys, console=console):
        console.print(part)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(value: object) -> str:
    r"""``value`` as plain text (printed without markup) with its control characters (the ESC
    of a terminal escape sequence, a newline, a carriage return) shown as ``\xNN``.

    Examples
    --------
    >>> visible("a\x1b[2Jb\nc")
    'a\\x1b[2Jb\\x0ac'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))


def printable(value: object) -> str:
    r"""``value`` as a table cell or title that the terminal shows as written: rich markup in it
    (``[red]``, ``[/]``) is escaped, never parsed, and control characters (the ESC of a terminal
    escape sequence, a newline) are shown as ``\xNN``.

    Examples
    --------
    >>> printable("[red]mine[/]")
    '\\[red]mine\\[/]'
    >>> printable("a\x1b[31mb")   # shown as a, \x1b, [31mb: no colour switched on
    'a\\x1b[31mb'
    """
    return escape(visible(value))


def _cell(name: str, value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if name.startswith("total_"):
        return f"{int(value):,}"
    return f"{100 * value:.1f}"


def _shown_columns(metrics: xr.Dataset) -> list[tuple[str, str]]:
    """:data:`TABLE_METRICS` present in ``metrics``, with ``HR@K`` for every ``hit_rate_at_K``
    of the metric set (in order of K) where the defaults have HR@1 and HR@5."""
    ks = sorted(int(m[1]) for n in metrics.data_vars if (m := _HIT_RATE.fullmatch(str(n))))
    shown: list[tuple[str, str]] = []
    for name, header in TABLE_METRICS:
        if name == "hit_rate_at_1":
            shown += [(f"hit_rate_at_{k}", f"HR@{k}") for k in ks]
        elif not _HIT_RATE.fullmatch(name) and name in metrics:
            shown.append((name, header))
    return shown


def print_metric_table(
    metrics: xr.Dataset, *, title: str = "", console: Console | None = None
) -> None:
    """Print one row per descriptor with the main metrics (percent) of a metric set.

    Under DescriptorWorkbench's retrieval rule (attr ``y0_policy = "negative"``: the other
    keypoints of the sequence are non-relevant, as in verification) the retrieval AP is the
    verification AP by definition: it is shown once, and a caption under the table says so.
    """
    shown = _shown_columns(metrics)
    names = {name for name, _ in shown}
    same = {"keypoint_verification_ap", "keypoint_retrieval_ap"} <= names and (
        metrics.attrs.get("y0_policy") == "negative"
    )
    if same:  # one number under two names: shown once
        shown = [(n, h) for n, h in shown if n != "keypoint_retrieval_ap"]
    caption = (
        "retr AP = verif AP by definition (shown once): DescriptorWorkbench's retrieval counts "
        "the sequence's other keypoints as non-relevant (y0 = negative)"
        if same
        else None
    )
    table = Table(title=printable(title) if title else None, caption=caption)
    table.add_column("descriptor", no_wrap=True)
    for _, header in shown:
        table.add_column(header, justify="right")
    for d in metrics["descriptor"].values.tolist():
        row = metrics.sel(descriptor=d)
        status = str(row["status"].values) if "status" in row else "ok"
        cells = [_cell(n, float(row[n].values)) for n, _ in shown]
        name = printable(d)
        table.add_row(name if status == "ok" else f"{name} (error)", *cells)
    print_table(table, console=console)


def print_frame(
    frame: pd.DataFrame, *, title: str = "", console: Console | None = None, keys: int = 1
) -> None:
    """Print a table (one row per frame row); float columns named ``*_map`` in percent. The
    first ``keys`` columns name the rows: a table too wide for the console continues in parts
    that repeat them (:func:`fit_table`)."""
    table = Table(title=printable(title) if title else None)
    for column in frame.columns:
        table.add_column(
            printable(column), justify="left" if frame[column].dtype == object else "right"
        )
    for _, row in frame.iterrows():
        cells = []
        for name, value in row.items():
            if str(name).endswith("_map") and isinstance(value, float):
                cells.append(f"{100 * value:.2f}" if math.isfinite(value) else "-")
            else:
                cells.append("-" if value is None else printable(value))
        table.add_row(*cells)
    print_table(table, console=console, keys=keys)


def _number(
    value: float, *, percent: bool, signed: bool = False, decimals: int | None = None
) -> str:
    if not math.isfinite(value):
        return "-"
    if decimals is not None:
        shown, digits = value, f".{decimals}f"
    else:
        shown, digits = (100 * value, ".2f") if percent else (value, ".4g")
    return format(shown, ("+" if signed else "") + digits)


def _effect(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "-"


def pvalue_cell(value: float) -> str:
    """A p-value in a terminal table: ``-`` when undefined, ``<0.001``, else three decimals."""
    if not math.isfinite(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _marker(row: pd.Series) -> str:
    """``>`` / ``<``: the side a comparison calls better; ``?``: rejected, but the test and the
    mean difference disagree (no side); ``""``: not rejected."""
    if row.get("caveat", ""):
        return "?"
    return {1: ">", -1: "<"}.get(int(row["favours"]), "")


def clustering_lines(comparisons: xr.Dataset, unit: str | None = None) -> list[str]:
    """What tests over units finer than scenes ignore: per comparison the intraclass correlation
    of the differences within scenes and the design effect (``icc``, ``design_effect`` of
    :func:`metricalc.stats.compare`); no line for tests over scenes. ``unit`` names the units
    (default: the ``pair_by`` attr), the ``cluster_name`` attr the clusters (default: scene)."""
    if "icc" not in comparisons or not np.isfinite(comparisons["icc"].values).any():
        return []
    plural = {"query": "queries", "pair": "image pairs"}
    by = str(comparisons.attrs.get("pair_by", "query"))
    unit = unit or plural.get(by, by)
    cluster, option = comparisons.attrs.get("cluster_name", "scene"), "--pair-by scene"
    if cluster != "scene":  # not the compare option's name (FPR95 records: 3D points)
        option = "the default --pair-by"
    lines = [
        f"the tests above treat {'the' if unit.endswith('s') else 'every'} {unit} as "
        f"independent, but those of one {cluster} are "
        f"correlated (intraclass correlation of the differences within {cluster}s, design "
        f"effect 1 + (mean {cluster} size - 1) ICC: the variance of a mean is that many times "
        f"larger than the tests assume); test over {cluster}s ({option}) for claims about new "
        f"{cluster}s:"
    ]
    index = comparisons.get_index("comparison")
    for (descriptor, baseline), icc, deff in zip(
        index, comparisons["icc"].values, comparisons["design_effect"].values, strict=True
    ):
        if np.isfinite(icc):
            lines.append(f"  {descriptor} vs {baseline}: ICC {icc:.3f}, design effect {deff:.1f}")
    return lines


def print_comparisons(
    comparisons: xr.Dataset,
    *,
    title: str = "",
    console: Console | None = None,
    unit: str | None = None,
    split_units: str = "queries",
    systems: str = "descriptor",
    decimals: int | None = None,
) -> None:
    """Print a :func:`metricalc.stats.compare` result, one row per comparison.

    The caption names the paired unit ``unit`` (default: the ``pair_by`` attr, right for a
    keypoint cube) and, with a split, what the split keeps (``split_units``). ``systems`` heads
    the first column (``"run"`` for TREC runs).

    Means and differences of metrics in [0, 1] (``ap``, ``hit@K``, ...) are shown in percent
    points, or with ``decimals`` as fractions with that many decimals (``0.5800``, as IR papers
    print trec_eval's measures); ``>`` marks a comparison rejected at the corrected alpha in the
    descriptor's favour, ``<`` in the baseline's (``favours``: never the system with the lower
    mean). ``?`` marks a rejected comparison whose test points against the mean difference (a
    Wilcoxon or sign test asked for); its ``caveat`` is printed below the table, as are the
    comparisons that could not be tested (``-`` for their p-values) with the reason
    (``note``)."""
    attrs = comparisons.attrs
    metric = str(attrs.get("metric", ""))
    percent = decimals is None and is_fraction_metric(metric)
    level = round(100 * float(attrs.get("confidence_level", 0.95)), 1)
    interval = {"t": "t", "cluster": "cluster bootstrap"}.get(str(attrs.get("interval")), "BCa")
    statistic = str(attrs.get("statistic_phrase", ""))
    if unit and attrs.get("mean_over") == attrs.get("pair_by"):  # the cube's own unit name
        statistic = f"mean over {unit}s"
    caption = (
        (f"{metric}: {statistic}; " if statistic else "")
        + f"{attrs.get('test')} test, {attrs.get('correction')} correction, alpha "
        f"{attrs.get('alpha')}, {level:g}% {interval} CI, independent unit: "
        f"{unit or attrs.get('pair_by')}"
    )
    if attrs.get("split"):
        caption += f", {attrs['split']} {split_units} only"
    if percent:
        caption += "; values in percent"
    table = Table(
        title=printable(title) if title else None,
        caption=printable(caption),
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
    )
    for header in (systems, "baseline"):
        table.add_column(header, no_wrap=True)
    for header in ("n", printable(metric), "base", "diff", "CI", "p", "p adj", "", "r_rb", "d_z",
                   "W/T/L"):  # fmt: skip
        table.add_column(header, justify="right", no_wrap=True)
    frame = comparisons.to_dataframe()
    pairs = [(str(d), str(b)) for d, b in frame.index.to_list()]  # (descriptor, baseline)
    rows = [(d, b, row) for (d, b), (_, row) in zip(pairs, frame.iterrows(), strict=True)]
    for descriptor, baseline, row in rows:
        low = _number(row["ci_low"], percent=percent, signed=True, decimals=decimals)
        high = _number(row["ci_high"], percent=percent, signed=True, decimals=decimals)
        table.add_row(
            printable(descriptor),
            printable(baseline),
            f"{int(row['n']):,}",
            _number(row["mean_descriptor"], percent=percent, decimals=decimals),
            _number(row["mean_baseline"], percent=percent, decimals=decimals),
            _number(row["mean_diff"], percent=percent, signed=True, decimals=decimals),
            escape(f"[{low}, {high}]"),
            pvalue_cell(row["pvalue"]),
            pvalue_cell(row["pvalue_corrected"]),
            _marker(row),
            _effect(row["rank_biserial"]),
            _effect(row["cohens_dz"]),
            f"{int(row['wins'])}/{int(row['ties'])}/{int(row['losses'])}",
        )
    console = console or terminal_console()
    print_table(table, console=console, keys=2)
    for line in clustering_lines(comparisons, unit):
        console.print(printable(line))
    for descriptor, baseline, row in rows:
        if row.get("caveat", ""):
            console.print(printable(f"? {descriptor} vs {baseline}: {row['caveat']}"))
        if row["note"]:
            console.print(printable(f"not tested: {descriptor} vs {baseline}: {row['note']}"))
