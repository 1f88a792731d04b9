"""The main job: the built-in benchmark, the built-in descriptors, the metric set, figures.

``metricalc demo`` builds the synthetic HPatches-style benchmark, extracts the built-in methods
twice (:data:`~metricalc.report.study.DEMO_LOCKED` on SIFT keypoints,
:data:`~metricalc.report.study.DEMO_NATIVE` on their own detectors' keypoints; AKAZE only when
this OpenCV has it), evaluates both into QueryCubes (with
``image_retrieval=True`` the locked one with DescriptorWorkbench's image retrieval,
``image_retrieval_map``), prints the metric tables and writes cubes, metric sets (CSV and JSON)
and figures to the output folder. Both cubes come from the keypoint pipeline
(:func:`metricalc.keypoints.evaluate_modes`, with ``<out>`` as its cache folder, so an unchanged
cube is read back), which does the work common to the two runs once: SIFT's detection and
description of each image serve both, and native SIFT's part of the native cube is the locked
cube's when its features are the same (docs/keypoints.md, "On every core").
It ends with the full report of the locked cube (the study of ``reports/demo.yaml``,
:func:`metricalc.report.study.demo_study`) in ``<out>/report/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import xarray as xr

from metricalc.datasets.sequences import QUICK_SCENES, make_synthetic_dataset
from metricalc.export import write_metric_set
from metricalc.keypoints import (
    EvaluationSettings,
    available_methods,
    evaluate_modes,
    keypoint_mode,
)
from metricalc.metrics import metric_set, scene_metrics
from metricalc.plotting.figures import (
    plot_map_by_split,
    plot_rank_histogram,
    plot_scene_map,
    save_figure,
)
from metricalc.plotting.terminal import print_metric_table
from metricalc.report.builder import REPORT_FOLDER, build
from metricalc.report.model import Report
from metricalc.report.study import DEMO_LOCKED, DEMO_NATIVE, demo_study

LOCKED_DETECTOR = "sift"


@dataclass
class DemoResult:
    """What the demo computed and wrote."""

    cubes: dict[str, xr.Dataset]
    metrics: dict[str, xr.Dataset]
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    reused: dict[str, bool] = field(default_factory=dict)
    report: Path | None = None


def run_demo(
    out: str | Path = Path("reports/demo"),
    *,
    quick: bool = False,
    seed: int = 0,
    image_retrieval: bool = False,
    progress: bool = True,
) -> DemoResult:
    """Run the demo pipeline and write its outputs below ``out``.

    Parameters
    ----------
    out : path
        Output folder (created); the synthetic benchmark is cached in ``out/benchmark``.
    quick : bool
        Only a few scenes (:data:`QUICK_SCENES`): a first look in well under a minute.
    seed : int
        Seed of the synthetic benchmark and the distractors.
    image_retrieval : bool
        Also DescriptorWorkbench's image retrieval (``image_retrieval_map``) of the locked cube:
        every reference image matched against every image, which doubles the demo's time on the
        full benchmark (:func:`metricalc.keypoints.evaluate`).
    progress : bool
        Progress bars on the long steps.

    Returns
    -------
    DemoResult
        The cubes and metric sets by mode, the files written and the report page
        (``<out>/report/report.html``).
    """
    started = time.perf_counter()
    out = Path(out)
    sequences = make_synthetic_dataset(
        out / "benchmark", scenes=QUICK_SCENES if quick else None, seed=seed, progress=progress
    )
    result = DemoResult(cubes={}, metrics={})
    locked, native = (
        EvaluationSettings(
            descriptors=methods,
            keypoints=keypoint_mode(detector),
            image_retrieval=image_retrieval and detector is not None,  # the report's cube
            seed=seed,
        )
        for detector, methods in (
            (LOCKED_DETECTOR, DEMO_LOCKED),
            (None, tuple(m for m in DEMO_NATIVE if m in available_methods())),
        )
    )
    reports: list[Report] = []

    def locked_outputs(cube: xr.Dataset, reused: bool) -> None:
        # while the pipeline makes the native cube: the locked files, figures and report
        _record(result, "locked", out, cube, reused)
        _write_mode(result, "locked", out)
        reports.append(
            build(
                demo_study(quick=quick, seed=seed),
                out=out / REPORT_FOLDER,
                cubes={"": cube},
                progress=progress,
            )
        )

    evaluated = evaluate_modes(
        sequences,
        locked,
        native,
        cache=out,
        names={mode: f"cube_{mode}.nc" for mode in ("locked", "native")},
        dataset_path=str(out / "benchmark"),
        progress=progress,
        meanwhile=locked_outputs,
    )
    _record(result, "native", out, *evaluated["native"])
    _write_mode(result, "native", out)
    (report,) = reports
    result.files += report.files
    result.report = report.html
    for mode, detector in (("locked", f" ({LOCKED_DETECTOR})"), ("native", "")):
        print_metric_table(result.metrics[mode], title=f"{mode} keypoints{detector}")
    result.seconds = time.perf_counter() - started
    return result


def _record(result: DemoResult, mode: str, out: Path, cube: xr.Dataset, reused: bool) -> None:
    """The cube of one keypoint mode into ``result`` (its file next in the list of files)."""
    result.cubes[mode] = cube
    result.reused[mode] = reused
    result.files.append(out / f"cube_{mode}.nc")


def _write_mode(result: DemoResult, mode: str, out: Path) -> None:
    """The metric set, its files and its figures of one keypoint mode."""
    cube = result.cubes[mode]
    metrics = metric_set(cube)
    result.metrics[mode] = metrics
    result.files += write_metric_set(metrics, out / f"metrics_{mode}")
    for name, plot, data in (
        ("map_by_split", plot_map_by_split, metrics),
        ("rank_histogram", plot_rank_histogram, metrics),
        ("scene_map", plot_scene_map, scene_metrics(cube)),
    ):
        result.files += save_figure(plot(data), out / "figures" / f"{mode}_{name}")
