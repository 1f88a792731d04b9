"""The paper table: one row per descriptor, one column per metric, significance letters.

:class:`Table` renders a metric set (:func:`metricalc.metric_set`, or any Dataset over
``descriptor``) as LaTeX (booktabs), Markdown, CSV and HTML. Rows get letters a, b, c, ... in row
order; a cell carries, as superscripts, the letters of the systems that row is significantly
better than in that column, read from the :func:`metricalc.stats.compare` Dataset given for the
column (its ``favours``: the side of a comparison rejected at the corrected alpha, by the test's
own statistic). The best value of a column is bold and, with three systems or more, the second
best underlined (with two, the second is the last, and is not marked). Published
numbers come as reference rows (:mod:`~metricalc.plotting.reference_rows`): below the measured
rows, marked "(reported)", never ranked, marked or tested. docs/report.md shows an example.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.fileio import csv_text
from metricalc.hpatches import cvpr17_unit
from metricalc.plotting.captions import (
    CVPR17_LABELS,
    PROTOCOL_LABELS,
    RETRIEVAL_LABELS,
    TREC_LABELS,
    attr_text,
    data_phrase,
    equal_by_definition,
    keypoint_protocol,
)
from metricalc.plotting.cells import Cell, markup, row_letter
from metricalc.plotting.comparisons import (
    CORRECTION_NAMES,
    PAIR_UNITS,
    READ_VARIABLES,
    TEST_NAMES,
    comparison_pairs,
)
from metricalc.plotting.labels import (
    display_name,
    escape_html,
    escape_latex,
    escape_markdown,
    metric_info,
)
from metricalc.plotting.reference_rows import (
    HTML_STYLE,
    ReferenceRow,
    check_reference_rows,
    reference_sentence,
)
from metricalc.validation import is_integer

__all__ = ["DEFAULT_COLUMNS", "STANDS_IN", "Table", "equal_by_definition", "row_letter"]

DEFAULT_COLUMNS = (
    "true_map_macro_by_scene",
    "viewpoint_map",
    "illumination_map",
    "hit_rate_at_1",
    "hit_rate_at_5",
    "keypoint_verification_ap",
    "keypoint_retrieval_ap",
    "image_retrieval_map",
)
"""Columns of a table when none are chosen; those absent or all-NaN in the metric set are left
out (a keypoint cube evaluated without image retrieval has no ``image_retrieval_map``, a
patch-retrieval cube no hit rates). One definition per family: every mAP column is a mean over
scenes of scene mAPs (DescriptorWorkbench's split mAPs), so the overall mAP is
``true_map_macro_by_scene`` (the query-weighted ``true_map_micro`` only in its place where the
metric set has no scene mean, :data:`STANDS_IN`)."""
STANDS_IN = {"true_map_macro_by_scene": "true_map_micro"}
"""A default column's stand-in where the metric set has no value for it."""

def _number(text: str) -> float:
    """The printed number of a cell (NaN for a dash)."""
    return float(text.replace(",", "")) if text else math.nan


def _family_size(comparison: xr.Dataset) -> tuple[int, int]:
    """(comparisons in the correction family, comparisons not tested) of a compare Dataset: the
    family is the comparisons with a p-value (:func:`metricalc.stats.compare`)."""
    if "pvalue" not in comparison.data_vars:
        return comparison.sizes["comparison"], 0
    tested = int(np.isfinite(np.asarray(comparison["pvalue"].values, dtype=np.float64)).sum())
    return tested, comparison.sizes["comparison"] - tested


class Table:
    """A results table of a metric set, with significance letters from comparisons.

    Parameters
    ----------
    metric_set : xarray.Dataset
        Over ``descriptor``: one variable per metric (:func:`metricalc.metric_set`); its attrs
        (the protocol) go into the caption. Rows are its descriptors in order.
    comparisons : mapping of str to xarray.Dataset, optional
        Column name -> :func:`metricalc.stats.compare` Dataset of that column's metric. A row
        carries the letter of system ``x`` in that column when the comparison of the two
        ``favours`` the row: rejected at the corrected alpha, the test's own statistic and the
        mean difference on the row's side (for a column where lower is better, the other side),
        and the row's value in the column at least as good as ``x``'s.
    columns : sequence of str, optional
        Metric names in order; default :data:`DEFAULT_COLUMNS` minus those absent or all-NaN. A
        chosen column must exist (all-NaN columns then show dashes).
    decimals : int
        Decimals of the printed values (rates are printed in percent).
    names : mapping of str to str, optional
        Display names of descriptors (``{"sift": "SIFT"}``); systems ``"d (label)"`` of labelled
        cubes use the name of ``d``.
    caption : str, optional
        First sentence of the caption (default "Results on <dataset>.", the attr ``dataset_path``
        when there is one, else ``dataset``: :func:`~metricalc.plotting.labels.dataset_name`).
    label : str
        LaTeX ``\\label``.
    reported : sequence of ReferenceRow, optional
        Published numbers shown below the measured rows, each marked "(reported)" (italic in
        LaTeX, Markdown and HTML, ``kind`` = ``reported`` in CSV); they take no letter, no bold
        or underline, and no part in the best / second marks or the tests.

    Notes
    -----
    Bold and underline follow the printed values: every cell equal (as printed) to the best value
    of its column is bold, every cell equal to the next distinct value underlined (only in a table
    of three measured systems or more: of two, the second best is the worst); rates and plain
    values are marked (lower is better for ``r0_rate``), counts are not. Non-finite values print
    as a dash and are never marked.

    Examples
    --------
    >>> import xarray as xr
    >>> metrics = xr.Dataset({"true_map_macro_by_scene": ("descriptor", [0.5, 0.75])},
    ...                      coords={"descriptor": ["orb", "sift"]})
    >>> print(Table(metrics, names={"sift": "SIFT"}).to_markdown(), end="")
    Table: Results. Values in percent; best in bold.
    <BLANKLINE>
    | system | mAP |
    | :--- | ---: |
    | (a) orb | 50.0 |
    | (b) SIFT | **75.0** |
    """

    def __init__(
        self,
        metric_set: xr.Dataset,
        comparisons: Mapping[str, xr.Dataset] | None = None,
        *,
        columns: Sequence[str] | None = None,
        decimals: int = 1,
        names: Mapping[str, str] | None = None,
        caption: str | None = None,
        label: str = "tab:results",
        reported: Sequence[ReferenceRow] | None = None,
    ) -> None:
        if not isinstance(metric_set, xr.Dataset) or "descriptor" not in metric_set.dims:
            raise InvalidInputError(
                "Table: metric_set must be an xarray.Dataset over 'descriptor' (metric_set(cube))"
            )
        if not is_integer(decimals) or not 0 <= decimals <= 6:
            raise InvalidInputError(f"Table: decimals must be an integer 0..6; got {decimals!r}")
        self.metric_set = metric_set
        self.decimals = decimals
        self.names = dict(names or {})
        self.label = label
        self.systems = [str(d) for d in metric_set["descriptor"].values.tolist()]
        if len(set(self.systems)) != len(self.systems):
            raise InvalidInputError(f"Table: descriptor names repeat: {self.systems}")
        self.columns = self._choose_columns(columns)
        self.comparisons = self._check_comparisons(comparisons or {})
        self.letters = [row_letter(i) for i in range(len(self.systems))]
        # with two systems the second best is the worst: only bold then
        self._ranks_second = len(self.systems) > 2
        status = metric_set["status"].values.tolist() if "status" in metric_set else None
        failed = zip(self.systems, status or [], strict=False)
        self.failed = {system for system, state in failed if state == "error"}
        self.cells = self._cells()
        self.reported = check_reference_rows(reported, self.columns)
        self.caption = self._caption(caption)

    # -- construction ----------------------------------------------------------------------

    def _column_values(self, name: str) -> np.ndarray:
        variable = self.metric_set[name]
        if variable.dims != ("descriptor",) or not np.issubdtype(variable.dtype, np.number):
            raise InvalidInputError(
                f"Table: column {name!r} must be a numeric variable over 'descriptor' only; it "
                f"has dims {variable.dims} and dtype {variable.dtype}"
            )
        return np.asarray(variable.values, dtype=np.float64)

    def _choose_columns(self, columns: Sequence[str] | None) -> list[str]:
        available = [
            str(n)
            for n, v in self.metric_set.data_vars.items()
            if v.dims == ("descriptor",) and np.issubdtype(v.dtype, np.number)
        ]
        if columns is None:

            def known(c: str) -> bool:
                return c in available and bool(np.isfinite(self._column_values(c)).any())

            chosen = [
                c if known(c) else STANDS_IN[c]
                for c in DEFAULT_COLUMNS
                if known(c) or (c in STANDS_IN and known(STANDS_IN[c]))
            ]
            if not chosen:  # e.g. a patch-retrieval summary: its own columns
                chosen = [c for c in available if known(c)]
            return self._once(chosen)
        if isinstance(columns, str) or not columns:
            raise InvalidInputError(
                f"Table: columns must be a non-empty sequence of metric names; got {columns!r}"
            )
        unknown = [c for c in columns if c not in available]
        if unknown:
            raise InvalidInputError(
                f"Table: column(s) {unknown} are not in the metric set; available: {available}"
            )
        if len(set(columns)) != len(columns):
            raise InvalidInputError(f"Table: columns repeat: {list(columns)}")
        for c in columns:
            self._column_values(c)
        return self._once([str(c) for c in columns])

    def _once(self, columns: list[str]) -> list[str]:
        """``columns`` without those equal by definition to another of them
        (:func:`equal_by_definition`, where the values agree), recorded in ``self.shown_once``
        (``{column left out: column shown}``) for the caption."""
        self.shown_once = {
            column: kept
            for column, kept in equal_by_definition(self.metric_set.attrs).items()
            if column in columns
            and kept in columns
            and np.array_equal(self._column_values(column), self._column_values(kept), True)
        }
        return [c for c in columns if c not in self.shown_once]

    def _check_comparisons(self, comparisons: Mapping[str, xr.Dataset]) -> dict[str, xr.Dataset]:
        if not isinstance(comparisons, Mapping):
            raise InvalidInputError(
                "Table: comparisons must map a column name to a metricalc.stats.compare Dataset"
            )
        out = {}
        for column, comparison in comparisons.items():
            if column not in self.columns:
                raise InvalidInputError(
                    f"Table: comparisons given for {column!r}, which is not a column of the "
                    f"table {self.columns}"
                )
            where = f"Table: comparisons[{column!r}]"
            for d, b in comparison_pairs(comparison, where, needs=READ_VARIABLES):
                for system in (d, b):
                    if system not in self.systems:
                        raise InvalidInputError(
                            f"Table: comparisons[{column!r}] compares {system!r}, which is not a "
                            f"row of the table {self.systems}"
                        )
            out[column] = comparison
        return out

    def _format(self, column: str, value: float) -> str:
        if not math.isfinite(value):
            return ""
        kind = metric_info(column).kind
        if kind == "count":
            return f"{round(value):,}"
        scale = 100.0 if kind == "rate" else 1.0
        return f"{scale * value:.{self.decimals}f}"

    def _marks(self, column: str, texts: list[str]) -> list[str]:
        info = metric_info(column)
        if info.kind == "count":
            return [""] * len(texts)
        printed = sorted({float(t) for t in texts if t}, reverse=info.higher_is_better)
        marks = []
        for text in texts:
            if text and float(text) == printed[0]:
                marks.append("best")
            elif text and len(printed) > 1 and float(text) == printed[1] and self._ranks_second:
                marks.append("second")
            else:
                marks.append("")
        return marks

    def _better_than(self, column: str) -> list[str]:
        """Letters per row of the systems that row is significantly better than.

        A letter needs the comparison to be rejected on the side of its mean difference (its
        ``favours``, in the direction of ``mean_diff``) and the winner's value in this column to
        be at least the loser's: a letter never marks the row with the worse value."""
        comparison = self.comparisons.get(column)
        if comparison is None:
            return [""] * len(self.systems)
        info = metric_info(column)
        sign = 1 if info.higher_is_better else -1
        values = self._column_values(column)
        position = {s: i for i, s in enumerate(self.systems)}
        beaten: list[set[int]] = [set() for _ in self.systems]
        pairs = comparison_pairs(comparison, f"comparisons[{column!r}]", needs=READ_VARIABLES)
        for (d, b), favours, diff in zip(
            pairs, comparison["favours"].values, comparison["mean_diff"].values, strict=True
        ):
            if favours == 0 or favours != np.sign(diff):
                continue
            winner, loser = (d, b) if sign * favours > 0 else (b, d)
            gap = sign * (values[position[winner]] - values[position[loser]])
            if not gap >= 0:  # the column's values disagree (or are missing): no letter
                continue
            beaten[position[winner]].add(position[loser])
        return ["".join(self.letters[j] for j in sorted(s)) for s in beaten]

    def _cells(self) -> list[list[Cell]]:
        by_column = []
        for column in self.columns:
            values = self._column_values(column)
            texts = [self._format(column, v) for v in values]
            marks = self._marks(column, texts)
            letters = self._better_than(column)
            by_column.append(
                [
                    Cell(float(v), t, m, s)
                    for v, t, m, s in zip(values, texts, marks, letters, strict=True)
                ]
            )
        return [list(row) for row in zip(*by_column, strict=True)] if by_column else []

    def _caption(self, first: str | None) -> str:
        """The caption in sentences: the title (or "Results on <data>."), the data (whatever
        the title: "synthetic" where metricalc generated them), the protocol, each column's
        definition (keypoint cubes), the marks, the tests and the columns shown once."""
        attrs = self.metric_set.attrs
        benchmark = str(attrs.get("benchmark", ""))
        keypoint = benchmark == "" and "tau_px" in attrs
        data = data_phrase(attrs, benchmark, keypoint=keypoint)
        if first is None:
            parts = [f"Results on {data}." if data else "Results."]
        else:
            parts = [first.strip()] + ([f"Data: {data}."] if data else [])
        if keypoint:
            parts.append(keypoint_protocol(attrs))
        else:
            protocol = [
                template.format(attr_text(attrs[key]))
                for key, template in {
                    "hpatches-retrieval": RETRIEVAL_LABELS,
                    "hpatches-cvpr17": CVPR17_LABELS,
                    "trec_eval": TREC_LABELS,
                }.get(benchmark, PROTOCOL_LABELS)
                if key in attrs and str(attrs[key]) != ""
            ]
            if protocol:
                parts.append("Protocol: " + ", ".join(protocol) + ".")
        defined = [c for c in self.columns if keypoint and metric_info(c).definition]
        if defined:
            parts.append(
                "Columns: "
                + "; ".join(
                    f"{metric_info(c).label} is the {metric_info(c).definition}" for c in defined
                )
                + "."
            )
        kinds = {metric_info(c).kind for c in self.columns}
        marks = "best in bold, second best underlined." if self._ranks_second else "best in bold."
        parts.append(
            "Values in percent; " + marks
            if kinds <= {"rate", "count"} and "rate" in kinds
            else marks[0].upper() + marks[1:]
        )
        if self.comparisons:
            parts.append(self._test_sentence())
        for column, kept in self.shown_once.items():
            parts.append(
                f"The {metric_info(column).phrase} equals the {metric_info(kept).phrase} by "
                "definition here (DescriptorWorkbench's rule: the sequence's other keypoints are "
                "non-relevant in both) and is not shown."
            )
        if self.reported:
            parts.append(reference_sentence(self.reported))
        return " ".join(parts)

    def _unit(self, pair_by: str) -> str:
        """How the caption names the paired unit: an HPatches CVPR'17 cube's own
        (:func:`metricalc.hpatches.cvpr17_unit`), else :data:`PAIR_UNITS`."""
        return cvpr17_unit(self.metric_set.attrs, pair_by) or PAIR_UNITS.get(pair_by, pair_by)

    def _test_sentence(self) -> str:
        settings: dict[tuple[str, str, str, str, int, int], list[str]] = {}
        for column, comparison in self.comparisons.items():
            a = comparison.attrs
            key = (
                str(a.get("test", "?")),
                str(a.get("pair_by", "?")),
                str(a.get("correction", "?")),
                attr_text(a.get("alpha", "?")),
                *_family_size(comparison),
            )
            settings.setdefault(key, []).append(metric_info(column).label)
        described = []
        for (test, pair_by, correction, alpha, n, untestable), labels in settings.items():
            text = (
                f"{TEST_NAMES.get(test, test)} paired by {self._unit(pair_by)}, "
                f"{CORRECTION_NAMES.get(correction, correction)} correction over "
                f"{n} comparison{'s' if n != 1 else ''}"
                + (f" ({untestable} more not testable)" if untestable else "")
                + f", alpha = {alpha}"
            )
            if len(settings) > 1:
                text += f" ({', '.join(labels)})"
            described.append(text)
        untested = [metric_info(c).label for c in self.columns if c not in self.comparisons]
        sentence = (
            "A superscript letter marks a system significantly better than the system of that "
            "letter (" + "; ".join(described) + ")."
        )
        if untested:
            sentence += f" Not tested: {', '.join(untested)}."
        return sentence

    # -- rendering -------------------------------------------------------------------------

    def _row_name(self, i: int, escape: Callable[[str], str]) -> str:
        """``(letter) name`` of row ``i``, the name escaped for the output format."""
        name = display_name(self.systems[i], self.names)
        suffix = " (failed)" if self.systems[i] in self.failed else ""
        return f"({self.letters[i]}) {escape(name + suffix)}"

    def _reported_texts(self, row: ReferenceRow) -> list[str]:
        """The printed values of a reference row ("" where it has none), as measured ones."""
        return [self._format(c, float(row.values.get(c, math.nan))) for c in self.columns]

    def _reported_lines(
        self, dash: str, italic: str, escape: Callable[[str], str]
    ) -> list[list[str]]:
        """Per reference row: its name and values, italic (``italic`` a format), dashes for
        missing values."""
        return [
            [italic.format(escape(row.label))]
            + [italic.format(escape(t)) if t else dash for t in self._reported_texts(row)]
            for row in self.reported
        ]

    def headers(self) -> list[str]:
        """Column headers (metric labels), without the system column."""
        return [metric_info(c).label for c in self.columns]

    def to_frame(self) -> pd.DataFrame:
        """The printed numbers as a DataFrame (index: systems; NaN where a dash is printed)."""
        data = {
            label: [_number(row[j].text) for row in self.cells]
            for j, label in enumerate(self.columns)
        }
        return pd.DataFrame(data, index=pd.Index(self.systems, name="descriptor"))

    def to_latex(self) -> str:
        r"""A ``table`` environment with a booktabs ``tabular`` (``\usepackage{booktabs}``)."""

        def cell(c: Cell) -> str:
            return markup(c, "latex", lambda text: text.replace(",", "{,}"))

        lines = [
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{escape_latex(self.caption)}}}",
            rf"\label{{{escape_latex(self.label)}}}",
            r"\begin{tabular}{l" + "r" * len(self.columns) + "}",
            r"\toprule",
            " & ".join(["System", *(escape_latex(h) for h in self.headers())]) + r" \\",
            r"\midrule",
        ]
        for i, row in enumerate(self.cells or [[] for _ in self.systems]):
            name = self._row_name(i, escape_latex)
            lines.append(" & ".join([name, *(cell(c) for c in row)]) + r" \\")
        if self.reported:
            lines.append(r"\midrule")
            for parts in self._reported_lines("--", r"\textit{{{}}}", escape_latex):
                lines.append(" & ".join(p.replace(",", "{,}") for p in parts) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """A pipe table (bold ``**``, underline ``<u>``, letters ``<sup>``) after a caption line."""

        def cell(c: Cell) -> str:
            return markup(c, "markdown", str)

        lines = [
            f"Table: {escape_markdown(self.caption)}",
            "",
            "| " + " | ".join(["system", *(escape_markdown(h) for h in self.headers())]) + " |",
            "| " + " | ".join([":---", *("---:" for _ in self.columns)]) + " |",
        ]
        for i, row in enumerate(self.cells or [[] for _ in self.systems]):
            cells = [self._row_name(i, escape_markdown), *(cell(c) for c in row)]
            lines.append("| " + " | ".join(cells) + " |")
        for parts in self._reported_lines("&ndash;", "*{}*", escape_markdown):
            lines.append("| " + " | ".join(parts) + " |")
        return "\n".join(lines) + "\n"

    def to_html(self) -> str:
        """A ``<table class="results">`` with caption, ``<strong>``, ``<u>`` and ``<sup>``."""

        def cell(c: Cell) -> str:
            return f'<td class="{c.mark or "plain"}">{markup(c, "html", escape_html)}</td>'

        head = "".join(f'<th scope="col">{escape_html(h)}</th>' for h in self.headers())
        rows = []
        for i, row in enumerate(self.cells or [[] for _ in self.systems]):
            name = self._row_name(i, escape_html)
            rows.append(
                f'<tr data-system="{escape_html(self.systems[i])}"><th scope="row">{name}</th>'
                + "".join(cell(c) for c in row)
                + "</tr>"
            )
        lines = self._reported_lines("&ndash;", "<em>{}</em>", escape_html)
        for reference, parts in zip(self.reported, lines, strict=True):
            rows.append(
                f'<tr class="reported" data-kind="reported" style="{HTML_STYLE}" '
                f'data-system="{escape_html(reference.name)}"><th scope="row">{parts[0]}</th>'
                + "".join(f'<td class="reported">{p}</td>' for p in parts[1:])
                + "</tr>"
            )
        return (
            '<table class="results">'
            f"<caption>{escape_html(self.caption)}</caption>"
            f'<thead><tr><th scope="col">system</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>\n"
        )

    def to_csv(self) -> str:
        """One row per system: kind (``measured``), letter, descriptor, name, then per column
        the printed value, its mark (best / second) and the letters of the systems it is
        significantly better than; then one row per reference row (kind ``reported``, no
        letter, mark or letters).
        """
        records = []
        for i, row in enumerate(self.cells or [[] for _ in self.systems]):
            record: dict[str, Any] = {
                "kind": "measured",
                "letter": self.letters[i],
                "descriptor": self.systems[i],
                "name": display_name(self.systems[i], self.names),
            }
            for column, c in zip(self.columns, row, strict=True):
                record[column] = _number(c.text)
                record[f"{column}_mark"] = c.mark
                record[f"{column}_better_than"] = c.letters
            records.append(record)
        for reference in self.reported:
            record = {"kind": "reported", "letter": "", "descriptor": reference.name,
                      "name": reference.label}  # fmt: skip
            for column, text in zip(self.columns, self._reported_texts(reference), strict=True):
                record[column] = _number(text)
                record[f"{column}_mark"] = ""
                record[f"{column}_better_than"] = ""
            records.append(record)
        return csv_text(pd.DataFrame.from_records(records))
