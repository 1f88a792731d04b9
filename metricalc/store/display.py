"""Terminal output of the ``metricalc db`` verbs (rich tables)."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from metricalc.plotting.terminal import (
    SHARED_METRIC_COLUMNS,
    print_table,
    printable,
    terminal_console,
    visible,
)
from metricalc.store.reading import Experiment
from metricalc.store.workbench import WorkbenchExport
from metricalc.store.workbench_check import CHECK_COLUMNS

__all__ = ["print_experiment", "print_experiments", "print_import"]

RESULT_TABLE = (
    ("true_map_macro", "mAP"),
    ("true_map_micro", "mAP (queries)"),
    *SHARED_METRIC_COLUMNS,
    ("processing_time_ms", "time ms"),
)
"""(results column, header) of ``metricalc db show``; rates in percent."""


def _say(console: Console, text: str) -> None:
    """One line of plain text (no rich markup: configs hold brackets), never wrapped, so that
    it can be piped and searched; control characters in names are shown as ``\\xNN``."""
    console.print(visible(text), soft_wrap=True, highlight=False, markup=False)


def _cell(value: Any, percent: bool) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{100 * value:.2f}" if percent else f"{value:,.1f}"
    return str(value)


def print_experiments(frame: pd.DataFrame, *, console: Console | None = None) -> None:
    """One line per experiment of :func:`metricalc.store.list_experiments`."""
    table = Table(title=f"{len(frame)} experiment(s)")
    for column in ("benchmark", "tag", "status", "descriptors", "config", "updated (UTC)"):
        table.add_column(column, justify="right" if column == "descriptors" else "left")
    for row in frame.itertuples(index=False):
        status = str(row.status)
        if status != "ok":
            status = f"{status}: {str(row.error)[:60]}"
        table.add_row(
            printable(row.benchmark),
            printable(row.tag),
            printable(status),
            str(row.descriptors),
            str(row.config_hash)[:12],
            str(row.updated_at)[:19].replace("T", " "),
        )
    print_table(table, console=console, keys=2)  # an experiment is its benchmark and tag


def print_experiment(
    experiment: Experiment, *, scenes: bool = False, console: Console | None = None
) -> None:
    """Header, config and one row per descriptor of an experiment (and its scenes)."""
    console = console or terminal_console()
    _say(console, f"{experiment.benchmark} / {experiment.tag}  (id {experiment.id})")
    _say(
        console,
        f"status: {experiment.status}" + (f" ({experiment.error})" * bool(experiment.error)),
    )
    _say(
        console, f"config {experiment.config_hash}: {json.dumps(experiment.config, sort_keys=True)}"
    )
    _say(
        console,
        f"metricalc {experiment.metricalc_version}; created {experiment.created_at}, "
        f"updated {experiment.updated_at}",
    )
    if experiment.timings:
        _say(
            console,
            "timings: " + ", ".join(f"{k} {v:.3f} s" for k, v in experiment.timings.items()),
        )
    table = Table()
    table.add_column("descriptor", no_wrap=True)
    shown = [(c, h) for c, h in RESULT_TABLE if c in experiment.results.columns]
    for _, header in shown:
        table.add_column(header, justify="right")
    for row in experiment.results.itertuples(index=False):
        label = row.descriptor if row.status == "ok" else f"{row.descriptor} ({row.status})"
        cells = [_cell(getattr(row, c), c != "processing_time_ms") for c, _ in shown]
        table.add_row(printable(label), *cells)
    print_table(table, console=console)
    if scenes and len(experiment.scenes):
        per_scene = Table(title="per scene")
        for column in ("descriptor", "scene", "mAP", "mAP with zeros", "queries", "excluded"):
            per_scene.add_column(
                column, justify="left" if column in ("descriptor", "scene") else "right"
            )
        for row in experiment.scenes.itertuples(index=False):
            per_scene.add_row(
                printable(row.descriptor),
                printable(row.scene),
                _cell(row.true_map, True),
                _cell(row.true_map_with_zeros, True),
                str(row.query_count),
                str(row.excluded_count),
            )
        print_table(per_scene, console=console, keys=2)


def print_import(export: WorkbenchExport, db: str, *, console: Console | None = None) -> None:
    """What an import stored and what its recomputation check found."""
    console = console or terminal_console()
    tags = export.tags
    span = f"{tags[0]} .. {tags[-1]}" if len(tags) > 1 else (tags[0] if tags else "-")
    _say(console, f"imported {len(export.rows)} row(s) of {export.path} into {db} ({span})")
    if export.absent_columns:
        _say(console, f"not in the file, stored as NULL: {', '.join(export.absent_columns)}")
    if export.checked_rows == 0:
        _say(console, "no per-scene metadata in this file: nothing to recompute")
        return
    failed = export.mismatches
    bad_rows = failed["line"].nunique()
    checks = ", ".join(dict.fromkeys(export.checks["check"]))
    _say(
        console,
        f"recomputed from the scenes of {export.checked_rows} row(s) ({checks}; mAP tolerance "
        f"{export.tolerance:g}, counts exact): {export.checked_rows - bad_rows} match, "
        f"{bad_rows} do not",
    )
    if len(failed):
        table = Table(title="rows that do not match")
        for column in CHECK_COLUMNS[:7]:
            table.add_column(
                column, justify="left" if column in ("descriptor", "check") else "right"
            )
        for row in failed.itertuples(index=False):
            table.add_row(
                str(row.line),
                str(row.experiment_id),
                printable(row.descriptor),
                str(row.check),
                f"{row.file:.9g}",
                f"{row.recomputed:.9g}",
                f"{row.difference:.3g}",
            )
        print_table(table, console=console, keys=3)
