"""Extra sections of the HTML report, contributed by other parts through section hooks.

A hook is called with the :class:`~metricalc.report.model.Report` (its study, cubes, metric
set and tests) before the page is written, and returns a :class:`Section` or None
(:func:`register_section`, :data:`SECTION_HOOKS`). The hooks registered by default here are the
"detector or descriptor?" section of the metric decomposition
(:func:`metricalc.decompose.detector_or_descriptor`) and, for a study of the built-in benchmark,
how it relates to real HPatches (:func:`builtin_benchmark_section`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.plotting.labels import display_name, escape_html
from metricalc.report.model import Report, Section

__all__ = [
    "SECTION_HOOKS",
    "Section",
    "SectionHook",
    "builtin_benchmark_section",
    "detector_or_descriptor_section",
    "register_section",
]


_DECOMPOSITION_COLUMNS = (
    ("repeatability", "repeatability"),
    ("correct_over_repeatable", "correct among repeatable"),
    ("matching_score", "matching score"),
    ("matching_ap", "matching AP"),
)


def _known(values: Any) -> bool:
    return bool((np.asarray(values) >= 0).any())


def detector_or_descriptor_section(report: Report) -> Section | None:
    """ "Detector or descriptor?": per system, the detector's repeatability, the descriptor's
    share of correct matches among repeatable keypoints, the matching score and the matching AP
    (ratio-test confidence, as ``metricalc decompose keypoints``), the stage that limits (the
    lower factor), the sentence saying so and how it is decided, and the figure
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
    parts = {
        label: detector_or_descriptor(cube, names=study.names)
        for label, cube in report.cubes.items()
    }
    table = combined({label: part.table for label, part in parts.items()})
    sentences = [
        f"{label}: {part.sentence}" if label else part.sentence for label, part in parts.items()
    ]
    ax = plot_detector_or_descriptor(table, names=study.names)
    first = next(iter(parts.values()))
    method, confidence = first.method, first.chains.attrs["confidence"]
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
        'alt="Repeatability, correct among repeatable and matching score per system">'
        "<figcaption>Per system, in percent: the detector's repeatability (L, queries with a "
        "ground-truth correspondence within the pixel threshold), the descriptor's share of "
        "correct nearest neighbours among repeatable queries (C|L) and their product, the "
        "matching score; under each name the stage with the lower factor, which limits the "
        f"result. Matching AP: {method} AP of the matches ordered by the "
        f"{confidence} confidence.</figcaption>"
        "</figure>"
    )
    return Section("detector-or-descriptor", "Detector or descriptor?", html)


_SPLIT_MAPS = (("viewpoint_map", "viewpoint"), ("illumination_map", "illumination"))


def _fraction(value: float) -> str:
    return f"{value:.3f}" if np.isfinite(value) else "undefined"


def _order_sentence(metrics: xr.Dataset, names: Mapping[str, str] | None) -> str:
    """Which claims of the published order hold on both splits of ``metrics``, which do not."""
    from metricalc.datasets.anchors import PUBLISHED_ORDER

    present = set(metrics["descriptor"].values.tolist())
    held: list[str] = []
    failed: list[str] = []
    for claim in PUBLISHED_ORDER:
        if claim.better not in present or claim.worse not in present:
            continue
        text = (
            f"{display_name(claim.better, names)} {'>' if claim.strict else '>='} "
            f"{display_name(claim.worse, names)}"
        )
        scores = [
            (
                float(metrics[m].sel(descriptor=claim.better)),
                float(metrics[m].sel(descriptor=claim.worse)),
            )
            for m, _ in _SPLIT_MAPS
        ]
        (held if all(claim.holds(b, w) for b, w in scores) else failed).append(text)
    if not held and not failed:
        return ""
    sentence = "The order published HPatches results agree on"
    if held:
        sentence += f" holds here on both splits for {', '.join(held)}"
    if failed:
        sentence += ("; it does not hold " if held else " does not hold ") + (
            f"on at least one split for {', '.join(failed)}"
        )
    return sentence + "."


def builtin_benchmark_section(report: Report) -> Section | None:
    """ "The built-in benchmark and real HPatches": one paragraph setting this run's SIFT
    scores next to DescriptorWorkbench's on real HPatches sequences
    (:data:`metricalc.datasets.anchors.REAL_HPATCHES_ANCHORS`) and saying which claims of the
    published order (:data:`metricalc.datasets.anchors.PUBLISHED_ORDER`) hold on both splits.

    None unless the study evaluates the built-in benchmark (``data.dataset: synthetic``) in one
    cube whose metric set has SIFT and both split mAPs.
    """
    from metricalc.datasets.anchors import REAL_HPATCHES_ANCHORS

    study, metrics = report.study, report.metrics
    if study.data.kind != "dataset" or study.data.dataset != "synthetic" or len(report.cubes) != 1:
        return None
    needed = ["true_map_micro", *(m for m, _ in _SPLIT_MAPS)]
    if "sift" not in metrics["descriptor"].values.tolist() or not all(m in metrics for m in needed):
        return None
    sift = metrics.sel(descriptor="sift")
    (cube,) = report.cubes.values()
    scenes = len(np.unique(cube["scene"].values))
    real = ", ".join(
        f"{a.name} {a.true_map_micro:.3f} (viewpoint {a.viewpoint_map:.3f}, illumination "
        f"{a.illumination_map:.3f})"
        for a in REAL_HPATCHES_ANCHORS
    )
    paragraph = (
        f"The built-in benchmark is synthetic: {scenes} scenes made from scikit-image's "
        "photographs under illumination and viewpoint changes modelled on HPatches' "
        "(docs/synthetic.md), so a pipeline runs offline in minutes. It is a check of a "
        "pipeline and a comparison of descriptors against each other, not a substitute for "
        "real data. On 12 real HPatches sequences (6 illumination, 6 viewpoint; "
        "DescriptorWorkbench, the same metric set, 2,000 keypoints per image) the "
        "query-weighted mAP (true_map_micro, each query weighing the same, not the table's "
        "mean over scenes; viewpoint_map and illumination_map are means over scenes, as in the "
        "table) is: "
        f"{real}. Here SIFT scores {_fraction(float(sift['true_map_micro']))} query-weighted "
        f"(viewpoint {_fraction(float(sift['viewpoint_map']))}, illumination "
        f"{_fraction(float(sift['illumination_map']))}). " + _order_sentence(metrics, study.names)
    )
    return Section(
        "builtin-benchmark",
        "The built-in benchmark and real HPatches",
        f"<p>{escape_html(paragraph)}</p>",
    )


SectionHook = Callable[[Report], Section | None]
"""A section hook: called with the :class:`~metricalc.report.model.Report`, returns a
:class:`Section` to append to the page, or None."""

SECTION_HOOKS: list[SectionHook] = [builtin_benchmark_section, detector_or_descriptor_section]
"""Hooks called with the :class:`~metricalc.report.model.Report` (before the page is written);
each returns a :class:`Section` to append to the page, or None. Registered by default: how the
built-in benchmark relates to real HPatches, and the decomposition's "detector or descriptor?"
section."""


def register_section(hook: SectionHook) -> None:
    """Add a section to every report built from now on (see :data:`SECTION_HOOKS`)."""
    if not callable(hook):
        raise InvalidInputError(f"register_section: hook must be callable; got {hook!r}")
    SECTION_HOOKS.append(hook)
