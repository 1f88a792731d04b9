"""Decomposition results in the terminal (rich tables), and written to a folder."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from metricalc.decompose.identity import Verification
from metricalc.decompose.whatif import PERFECT_STAGE
from metricalc.errors import InvalidInputError
from metricalc.fileio import atomic_write
from metricalc.plotting.terminal import print_table, printable, terminal_console

__all__ = ["print_detection", "print_keypoints", "write_detection", "write_keypoints"]


def _number(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "-"


def _percent(value: float) -> str:
    """A rate or an AP in percent (as the figures draw it), one decimal."""
    return _number(100 * value, 1)


def identity_line(check: Verification) -> str:
    """One line on the identity check P_D = prod P_k, R_D = prod R_k."""
    verdict = "holds" if check.ok else "FAILS"
    return (
        f"identity P_D = prod P_k, R_D = prod R_k {verdict} at {check.points_checked:,} curve "
        f"points: largest deviation {check.max_deviation:.1e} (tolerance {check.tolerance:g}; "
        f"{check.points_undefined:,} points with an undefined factor skipped)"
    )


STAT_MEANING = {
    "AP": "precision, IoU 0.50:0.95, all areas, 100 detections",
    "AP50": "precision, IoU 0.50, all areas, 100 detections",
    "AP75": "precision, IoU 0.75, all areas, 100 detections",
    "APs": "precision, IoU 0.50:0.95, small (< 32^2 px), 100 detections",
    "APm": "precision, IoU 0.50:0.95, medium (32^2 to 96^2 px), 100 detections",
    "APl": "precision, IoU 0.50:0.95, large (> 96^2 px), 100 detections",
    "AR1": "recall, IoU 0.50:0.95, all areas, 1 detection",
    "AR10": "recall, IoU 0.50:0.95, all areas, 10 detections",
    "AR100": "recall, IoU 0.50:0.95, all areas, 100 detections",
    "ARs": "recall, IoU 0.50:0.95, small, 100 detections",
    "ARm": "recall, IoU 0.50:0.95, medium, 100 detections",
    "ARl": "recall, IoU 0.50:0.95, large, 100 detections",
}
"""What each of the 12 COCO stats averages (per image and category for the detections)."""


def print_detection(result: Any, *, console: Console | None = None) -> None:
    """Standard COCO metrics, factor APs, composed AP, identity check and what-if table (APs in
    percent, as the figures draw them)."""
    out = console or terminal_console()
    attrs = result.curves.attrs
    stats = Table(title=f"COCO {result.evaluation.attrs['iou_type']} evaluation (%)")
    stats.add_column("metric")
    stats.add_column("value", justify="right")
    stats.add_column("average of")
    for name, value in result.stats.items():
        stats.add_row(name, _percent(value), STAT_MEANING.get(name, ""))
    print_table(stats, console=out)
    ious = result.curves["iou"].values
    span = f"IoU {ious[0]:.2f}" if ious.size == 1 else f"IoU {ious[0]:.2f}:{ious[-1]:.2f}"
    factors = Table(
        title=f"Decomposition ({attrs['convention']} convention, {span}, "
        f"{result.method} AP in percent, mean over IoU thresholds and categories)"
    )
    factors.add_column("curve")
    factors.add_column("AP", justify="right")
    product = 1.0
    for stage, value in result.factor_ap().items():
        factors.add_row(f"factor {stage}", _percent(value))
        product *= value
    factors.add_row("composed (P_D, R_D)", _percent(result.composed_ap()))
    factors.add_row("product of the factor APs (AP does not factor)", _percent(product))
    print_table(factors, console=out)
    out.print(identity_line(result.verification))
    print_table(what_if_table(result.table), console=out)


WHAT_IF_TITLE = f"What if one stage were perfect? ({PERFECT_STAGE}; AP in percent)"
"""The headline of the what-if table: what "perfect" assumes."""


def what_if_table(table: Any) -> Table:
    """The what-if DataFrame as a rich table (AP in percent, the gain in percentage points)."""
    view = Table(title=WHAT_IF_TITLE)
    for column in ("perfect stage", "AP now", "AP if perfect", "gain"):
        view.add_column(column, justify="left" if column == "perfect stage" else "right")
    for stage, row in table.iterrows():
        view.add_row(
            str(stage), _percent(row["ap"]), _percent(row["ap_if_perfect"]), _percent(row["gain"])
        )
    return view


def print_keypoints(section: Any, *, console: Console | None = None) -> None:
    """The detector-or-descriptor table, its sentence and the identity check."""
    out = console or terminal_console()
    table = section.table
    view = Table(
        title=f"Detector or descriptor? ({section.chains.attrs.get('confidence')} "
        f"confidence, {section.method} AP; rates and APs in percent)"
    )
    columns = (
        ("repeatability", "repeatability"),
        ("correct_over_repeatable", "correct among repeatable"),
        ("matching_score", "matching score"),
        ("identity_deviation", "identity deviation"),
        ("matching_ap", "matching AP"),
    )
    view.add_column("descriptor")
    for _, header in columns:
        view.add_column(header, justify="right")
    view.add_column("limited by")
    for name in table["descriptor"].values.tolist():
        row = table.sel(descriptor=name)
        cells = []
        for variable, _ in columns:
            value = float(row[variable])
            if variable == "identity_deviation":
                cells.append(f"{value:.1e}")
            else:
                cells.append(_percent(value))
        view.add_row(printable(name), *cells, str(row["limited_by"].values))
    print_table(view, console=out)
    out.print(printable(section.sentence))  # it names descriptors
    out.print(identity_line(section.verification))


def _write(out: str | Path, summary: dict[str, Any], drawings: dict[str, Any]) -> list[Path]:
    """``decomposition.json`` (atomic) and each figure as PNG and SVG into folder ``out``."""
    from metricalc.plotting.figures import save_figure

    out = Path(out)
    path = out / "decomposition.json"
    try:
        atomic_write(path, json.dumps(summary, indent=2))
        written = [path]
        for name, ax in drawings.items():
            written += save_figure(ax, out / name)
    except OSError as error:
        raise InvalidInputError(
            f"cannot write the decomposition to the folder {out}: {error.strerror or error}"
        ) from None
    return written


def write_detection(result: Any, out: str | Path) -> list[Path]:
    """``decomposition.json`` and the figures (factor curves, what-if) into folder ``out``."""
    from metricalc.decompose.figures import plot_factor_curves, plot_what_if

    drawings = {
        "factor_curves": plot_factor_curves(result.curves),
        "what_if": plot_what_if(result.table),
    }
    return _write(out, result.to_dict(), drawings)


def write_keypoints(section: Any, out: str | Path) -> list[Path]:
    """``decomposition.json`` and the figures (detector or descriptor: the factors per
    descriptor; factor curves: both factors of every descriptor along the threshold)."""
    from metricalc.decompose.figures import plot_keypoint_factors

    drawings = {
        "detector_or_descriptor": section.plot(),
        "factor_curves": plot_keypoint_factors(section.chains),
    }
    return _write(out, section.to_dict(), drawings)
