"""The main job: the built-in benchmark, the built-in descriptors, the metric set, figures.

``metricalc demo`` builds the synthetic HPatches-style benchmark, extracts the built-in methods
twice (:data:`~metricalc.report.study.DEMO_LOCKED` on SIFT keypoints,
:data:`~metricalc.report.study.DEMO_NATIVE` on their own detectors' keypoints; AKAZE only when
this OpenCV has it), evaluates both into QueryCubes (with
``image_retrieval=True`` the locked one with DescriptorWorkbench's image retrieval,
``image_retrieval_map``), prints the metric tables and writes cubes, metric sets (CSV and JSON)
and figures to the output folder. Work common to the two runs is done once: SIFT's detection and
description of each image serve both, and native SIFT's part of the native cube is the locked
cube's when its features are the same (docs/keypoints.md, "On every core").
It ends with the full report of the locked cube (the study of ``reports/demo.yaml``,
:func:`metricalc.report.study.demo_study`) in ``<out>/report/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from metricalc.datasets.sequences import QUICK_SCENES, make_synthetic_dataset
from metricalc.export import write_metric_set
from metricalc.keypoints.detectors import DETECTORS, available_methods
from metricalc.keypoints.extraction import extract_both
from metricalc.keypoints.features import FeatureSet
from metricalc.keypoints.matching import exact_products
from metricalc.keypoints.pipeline import (
    EvaluationSettings,
    cache_key,
    cached_evaluation,
    evaluation_inputs,
    extract_features,
    holds_key,
    keypoint_mode,
)
from metricalc.keypoints.sequences import dataset_fingerprint
from metricalc.metrics import metric_set, scene_metrics
from metricalc.plotting.figures import (
    plot_map_by_split,
    plot_rank_histogram,
    plot_scene_map,
    save_figure,
)
from metricalc.plotting.terminal import print_metric_table
from metricalc.report.builder import REPORT_FOLDER, build
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
    fingerprint = dataset_fingerprint(sequences)  # hashed once: the cache key and both cubes
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

    native_key = cache_key(evaluation_inputs(sequences, native, dataset=fingerprint))
    native_cached = holds_key(out / "cube_native.nc", native_key)
    # native methods of the locked detector (SIFT) are described in the locked extraction,
    # from its detection and SIFT computation, identical to an extraction of their own
    shared = tuple(m for m in native.descriptors if DETECTORS[m] == DETECTORS[LOCKED_DETECTOR])
    extracted: dict[str, FeatureSet] = {}

    def evaluate_mode(
        mode: str,
        settings: EvaluationSettings,
        features: Callable[[], FeatureSet] | None = None,
        *,
        shown: bool = progress,
        results_of: Mapping[str, xr.Dataset] | None = None,
    ) -> tuple[xr.Dataset, bool]:
        return cached_evaluation(
            sequences,
            settings,
            out / f"cube_{mode}.nc",
            dataset=fingerprint,
            dataset_path=str(out / "benchmark"),
            progress=shown,
            features=features,
            results_of=results_of,
        )

    def locked_features() -> FeatureSet:
        if native_cached or not shared:
            return extract_features(sequences, locked, progress=progress)
        extracted["locked"], extracted["native"] = extract_both(
            sequences,
            locked.descriptors,
            shared,
            locked=LOCKED_DETECTOR,
            max_keypoints=locked.max_keypoints,
            border=locked.border,
            progress=progress,
        )
        return extracted["locked"]

    def native_in_background() -> tuple[FeatureSet, tuple[xr.Dataset, bool] | None]:
        # the native features are extracted (OpenCV, without the GIL) while the main thread
        # draws the locked figures and the report (matplotlib, with it); evaluated there too
        # when their distances are exact whatever BLAS does (SIFT's whole numbers, bits): the
        # report's tests limit BLAS to one thread for a while, which would change the last
        # digits of other descriptors' distances
        done = extracted.get("native", {})
        rest = replace(native, descriptors=tuple(m for m in native.descriptors if m not in done))
        more = extract_features(sequences, rest) if rest.descriptors else {}
        features = {m: done[m] if m in done else more[m] for m in native.descriptors}
        exact = all(
            exact_products(image.descriptors)
            for scenes in features.values()
            for images in scenes.values()
            for image in images.values()
        )
        if not exact:
            return features, None
        # a native method whose features are the locked run's (SIFT, unless the locked run
        # dropped keypoints another method could not describe) has the locked cube's results
        same = [m for m in done if _same_features(done[m], extracted["locked"].get(m))]
        return features, evaluate_mode(
            "native",
            native,
            lambda: features,
            shown=False,
            results_of={m: result.cubes["locked"] for m in same},
        )

    _record(result, "locked", out, *evaluate_mode("locked", locked, locked_features))
    with ThreadPoolExecutor(1) as background:
        pending = None if native_cached else background.submit(native_in_background)
        _write_mode(result, "locked", out)
        report = build(
            demo_study(quick=quick, seed=seed),
            out=out / REPORT_FOLDER,
            cubes={"": result.cubes["locked"]},
            progress=progress,
        )
        features, evaluated = (None, None) if pending is None else pending.result()
        if evaluated is None:
            given = None if features is None else (lambda: features)
            evaluated = evaluate_mode("native", native, given)
        _record(result, "native", out, *evaluated)
    _write_mode(result, "native", out)
    result.files += report.files
    result.report = report.html
    for mode, detector in (("locked", f" ({LOCKED_DETECTOR})"), ("native", "")):
        print_metric_table(result.metrics[mode], title=f"{mode} keypoints{detector}")
    result.seconds = time.perf_counter() - started
    return result


def _same_features(a: Mapping[str, Any], b: Mapping[str, Any] | None) -> bool:
    """Whether two extractions of one method hold the same keypoints and rows on every image."""
    return b is not None and all(
        np.array_equal(a[scene][k].keypoints, b[scene][k].keypoints)
        and np.array_equal(a[scene][k].descriptors, b[scene][k].descriptors)
        for scene in a
        for k in a[scene]
    )


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
