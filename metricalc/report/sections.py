"""Extra sections of the HTML report, contributed by other parts through section hooks.

A hook is called with the :class:`~metricalc.report.model.Report` (its study, cubes, metric
set and tests) before the page is written, and returns a :class:`Section` or None
(:func:`register_section`, :data:`SECTION_HOOKS`). The hook registered by default here is the
"detector or descriptor?" section of the metric decomposition
(:func:`metricalc.decompose.detector_or_descriptor`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.plotting.labels import display_name, escape_html
from metricalc.report.model import Report, Section

__all__ = [
    "SECTION_HOOKS",
    "Section",
    "SectionHook",
    "detector_or_descriptor_section",
    "register_section",
]


_DECOMPOSITION_COLUMNS = (
    ("repeatability", "repeatability"),
    ("correct_over_repeatable", "correct among repeatable"),
    ("matching_score", "matching score"),
    ("matching_ap", "matching AP"),
    ("ap_perfect_detector", "AP, perfect detector"),
    ("ap_perfect_descriptor", "AP, perfect descriptor"),
)


def _known(values: Any) -> bool:
    return bool((np.asarray(values) >= 0).any())


def detector_or_descriptor_section(report: Report) -> Section | None:
    """ "Detector or descriptor?": per system, the detector's repeatability, the descriptor's
    share of correct matches among repeatable keypoints, the matching AP and the AP with either
    stage made perfect, the sentence saying which stage limits the result, and the figure
    (:func:`metricalc.decompose.detector_or_descriptor`, one call per labelled cube).

    None unless the study's figures include ``detector_or_descriptor`` and every cube has
    nearest-neighbour results (``nn_correct``; a patch-retrieval cube has none). The figure is
    also written to ``figures/detector_or_descriptor.png`` / ``.svg`` when the study keeps
    figures.
    """
    from metricalc.decompose import detector_or_descriptor
    from metricalc.decompose.figures import plot_detector_or_descriptor
    from metricalc.plotting.figures import save_figure
    from metricalc.report.data import combined
    from metricalc.report.html import data_uri, png_data_uri

    study = report.study
    if "detector_or_descriptor" not in study.figures:
        return None
    if not all("nn_correct" in c and _known(c["nn_correct"].values) for c in report.cubes.values()):
        return None
    parts = {label: detector_or_descriptor(cube) for label, cube in report.cubes.items()}
    table = combined({label: part.table for label, part in parts.items()})
    sentences = [
        f"{label}: {part.sentence}" if label else part.sentence for label, part in parts.items()
    ]
    ax = plot_detector_or_descriptor(table, names=study.names)
    if "figures" in study.outputs:
        written = save_figure(ax, report.out / "figures" / "detector_or_descriptor")
        report.files.extend(written)
        uri = data_uri(written[0])
    else:
        uri = png_data_uri(ax)
    head = "".join(f'<th scope="col">{escape_html(h)}</th>' for _, h in _DECOMPOSITION_COLUMNS)
    rows = []
    for d in table["descriptor"].values.tolist():
        one = table.sel(descriptor=d)
        cells = "".join(
            f"<td>{100 * float(one[n]):.{study.decimals}f}</td>"
            if np.isfinite(float(one[n]))
            else "<td>&ndash;</td>"
            for n, _ in _DECOMPOSITION_COLUMNS
        )
        limited = escape_html(str(one["limited_by"].values))
        name = escape_html(display_name(str(d), study.names))
        rows.append(f'<tr><th scope="row">{name}</th>{cells}<td>{limited}</td></tr>')
    html = (
        "".join(f"<p>{escape_html(s)}</p>" for s in sentences)
        + '<div class="wide"><table class="decomposition"><thead><tr>'
        + '<th scope="col">system</th>'
        + head
        + '<th scope="col">limited by</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></div>"
        + f'<figure id="figure-detector_or_descriptor"><img src="{uri}" '
        'alt="Matching AP with a perfect detector or descriptor"><figcaption>Matching AP (%) of '
        "each system now, with a perfect detector (every query with a correspondence within the "
        "pixel threshold, the descriptor unchanged) and with a perfect descriptor (every "
        "repeatable query matched to its correspondence, the detector unchanged): the metric "
        "decomposition of the keypoint matching chain.</figcaption>"
        "</figure>"
    )
    return Section("detector-or-descriptor", "Detector or descriptor?", html)


SectionHook = Callable[[Report], Section | None]
"""A section hook: called with the :class:`~metricalc.report.model.Report`, returns a
:class:`Section` to append to the page, or None."""

SECTION_HOOKS: list[SectionHook] = [detector_or_descriptor_section]
"""Hooks called with the :class:`~metricalc.report.model.Report` (before the page is written);
each returns a :class:`Section` to append to the page, or None. Registered by default: the
decomposition's "detector or descriptor?" section."""


def register_section(hook: SectionHook) -> None:
    """Add a section to every report built from now on (see :data:`SECTION_HOOKS`)."""
    if not callable(hook):
        raise InvalidInputError(f"register_section: hook must be callable; got {hook!r}")
    SECTION_HOOKS.append(hook)
