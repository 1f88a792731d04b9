"""The ``hpatches`` benchmark of ``metricalc run``: sequences, keypoints, matches, homographies.

Export (per image pair 1 -> k of every scene, through the scheduler): detect and describe
images 1 and k (:func:`metricalc.keypoints.features.extract_image`, or read bring-your-own
``.npz`` files), match them (:func:`metricalc.keypoints.matching.nn_matches`) and draw the match
visualization. Evaluation (per pair, from ``predictions.h5`` only): the per-query results of
:func:`metricalc.keypoints.pairs.evaluate_pair` (the QueryCube) and the Glue Factory homography
metrics of :func:`metricalc.keypoints.homography.pair_homography_metrics`.

The data are an HPatches-style sequences folder (``data.root``) or, by default, the built-in
synthetic benchmark, generated once in ``<outputs>/data/synthetic/seed<seed>_size<size>`` under a
file lock (so concurrent runs share it safely). ``data.quick=true`` keeps a few scenes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from dask.delayed import delayed

from metricalc.benchmarks.hpatches_sequences.visualize import draw_matches, png_bytes
from metricalc.cube import split_of
from metricalc.datasets.sequences import QUICK_SCENES, make_synthetic_dataset
from metricalc.experiment.benchmark import (
    Context,
    Evaluation,
    Values,
    check_dataset_keys,
    data_defaults,
    scalar_summary,
)
from metricalc.experiment.config import PRESET_LABEL, Config
from metricalc.experiment.plots import plot_cumulative_errors
from metricalc.experiment.predictions import (
    PairPrediction,
    merge_parts,
    open_predictions,
    read_prediction,
    write_part,
)
from metricalc.experiment.rundir import file_lock
from metricalc.experiment.scheduler import batches
from metricalc.fileio import atomic_write
from metricalc.keypoints import (
    BUILTIN_METHODS,
    EvaluationSettings,
    Features,
    cube_from_pairs,
    dataset_fingerprint,
    image_features,
    keypoint_mode,
    load_sequences,
    nn_matches,
    pair_queries,
)
from metricalc.keypoints import Sequence as ImageSequence
from metricalc.keypoints import homography as hg
from metricalc.metrics import metric_set, scene_metrics
from metricalc.plotting.figures import plot_rank_histogram, plot_scene_map
from metricalc.presets import PRESETS, preset_attrs
from metricalc.progress import progress_bar
from metricalc.validation import TIE_POLICIES

__all__ = ["DEFAULT_CONF", "DETECTORS", "HPatches"]

DEFAULT_CONF: dict[str, Any] = {
    "data": data_defaults("root", border=40.0),
    "model": {
        "descriptor": "sift",
        "detector": None,
        "max_keypoints": 2000,
        "features": None,
        "matcher": {"mutual": True, "ratio": None},
    },
    "eval": {
        "tau": 3.0,
        "tie_policy": "expected",
        "estimator": "RANSAC",
        "ransac_th": 3.0,
        "max_iters": hg.DEFAULT_MAX_ITERS,
        "confidence": hg.DEFAULT_CONFIDENCE,
        "ransac_selection": "unrounded",
        "dlt": "svd",
        "k": [1, 5, 10],
        "preset": None,
    },
}
"""Defaults of every key (docs/experiments.md describes each)."""

DETECTORS: Mapping[str, str] = {
    "sift": "sift",
    "orb": "orb",
    "fast": "brief",
    "brisk": "brisk",
    "akaze": "akaze",
    "kaze": "kaze",
}
"""``model.detector`` -> the built-in method whose detector it is (``extract(locked=...)``)."""

QUICK_PER_SPLIT = 2
"""``data.quick`` on a sequences folder: the first scenes of each split (i_, v_)."""

PAIRS = tuple(f"1-{k}" for k in range(2, 7))
"""The image pairs of an HPatches scene."""


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def _dataset_path(sequences: Sequence[Any], root: Any) -> str:
    """Where the scenes were read from (the cube attr ``dataset_path``): ``data.root``, or the
    folder of the generated synthetic benchmark."""
    if root is not None:
        return str(root)
    return str(Path(sequences[0].root).parent) if sequences else ""


def load_data(data: Mapping[str, Any], outputs: Any) -> list[ImageSequence]:
    """The scenes of the ``data`` configuration (the synthetic benchmark is generated once)."""
    scenes = data["scenes"]
    if data["root"] is None:
        root = outputs / "data" / "synthetic" / f"seed{data['seed']}_size{data['size']}"
        wanted = scenes if scenes is not None else (QUICK_SCENES if data["quick"] else None)
        lock = root.parent / f".{root.name}.lock"  # concurrent runs wait for the generator
        with file_lock(lock, f"synthetic benchmark {root}", wait=True):
            return make_synthetic_dataset(root, scenes=wanted, seed=data["seed"], size=data["size"])
    sequences = load_sequences(data["root"], scenes=scenes)
    if data["quick"] and scenes is None:
        kept = [s for s in sequences if s.name.startswith("i_")][:QUICK_PER_SPLIT]
        kept += [s for s in sequences if s.name.startswith("v_")][:QUICK_PER_SPLIT]
        sequences = sorted(kept or sequences[: 2 * QUICK_PER_SPLIT], key=lambda s: s.name)
    return sequences


# --------------------------------------------------------------------------------------------
# tasks (module-level functions: they run on threads, processes or cluster workers)
# --------------------------------------------------------------------------------------------


def settings_of(conf: Mapping[str, Any]) -> EvaluationSettings:
    """The keypoint pipeline's settings of a run's configuration: the descriptor, its keypoints
    (``model.detector``: locked on that detector; ``model.features``: your own, external),
    the extraction and the protocol of the per-query results."""
    model, evaluation = conf["model"], conf["eval"]
    keypoints = keypoint_mode(DETECTORS[model["detector"]] if model["detector"] else None)
    return EvaluationSettings(
        descriptors=(model["descriptor"],),
        keypoints="external" if model["features"] is not None else keypoints,
        max_keypoints=model["max_keypoints"],
        tau=float(evaluation["tau"]),
        border=float(conf["data"]["border"]),
        tie_policy=evaluation["tie_policy"],
        seed=int(conf["data"]["seed"]),
    )


def describe_image(
    sequence: ImageSequence, k: int, model: Mapping[str, Any], settings: EvaluationSettings
) -> Features:
    """The keypoints and descriptors of image ``k`` of a scene under the model configuration
    (:func:`metricalc.keypoints.image_features`)."""
    return image_features(sequence, k, model["descriptor"], settings, features=model["features"])


def pair_prediction(
    sequence: ImageSequence,
    k: int,
    first: Features,
    second: Features,
    model: Mapping[str, Any],
) -> tuple[PairPrediction, bytes]:
    """Match image 1 to image ``k``; the predictions and the PNG of the match visualization."""
    if first.binary != second.binary:
        raise ValueError(f"scene {sequence.name}: images 1 and {k} have different descriptor kinds")
    matches0, scores0 = nn_matches(
        first.descriptors,
        second.descriptors,
        mutual=model["matcher"]["mutual"],
        ratio=model["matcher"]["ratio"],
    )
    prediction = PairPrediction(
        scene=sequence.name,
        pair=f"1-{k}",
        keypoints0=first.keypoints,
        keypoints1=second.keypoints,
        descriptors0=first.descriptors,
        descriptors1=second.descriptors,
        matches0=matches0,
        matching_scores0=scores0,
        shape0=sequence.shape(1),
        shape1=sequence.shape(k),
    )
    picture = draw_matches(
        sequence.image(1),
        sequence.image(k),
        first.keypoints,
        second.keypoints,
        matches0,
        sequence.homography(k),
    )
    return prediction, png_bytes(picture)


def pair_evaluation(
    prediction: PairPrediction,
    H: np.ndarray,
    evaluation: Mapping[str, Any],
    settings: EvaluationSettings,
) -> dict[str, Any]:
    """The per-query results (:func:`metricalc.keypoints.pair_queries`) and homography metrics
    of one cached image pair."""
    started = time.perf_counter()
    queries = pair_queries(
        Features(prediction.keypoints0, prediction.descriptors0),
        Features(prediction.keypoints1, prediction.descriptors1),
        H,
        prediction.shape0,
        prediction.shape1,
        settings,
    )
    homography = hg.pair_homography_metrics(
        prediction.keypoints0,
        prediction.keypoints1,
        prediction.matches0,
        H,
        prediction.shape0,
        estimator=evaluation["estimator"],
        thresholds=hg.ransac_thresholds(evaluation["ransac_th"]),
        max_iters=evaluation["max_iters"],
        confidence=evaluation["confidence"],
        dlt=evaluation["dlt"],
        scores0=prediction.matching_scores0,
    )
    return {
        "queries": queries,
        "homography": homography,
        "seconds": time.perf_counter() - started,
    }


# --------------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------------


def _scene_tasks(
    sequence: ImageSequence,
    ks: Sequence[int],
    model: Mapping[str, Any],
    settings: EvaluationSettings,
    scheduler: Any,
) -> dict[str, Any]:
    """The export tasks of the pairs (1, k) of one scene; image 1 is described once."""
    images: dict[int, Any] = {}
    for k in (1, *ks):
        images[k] = delayed(describe_image)(
            sequence, k, model, settings, dask_key_name=scheduler.key("image", sequence.name, k)
        )
    return {
        f"{sequence.name}/1-{k}": delayed(pair_prediction)(
            sequence,
            k,
            images[1],
            images[k],
            model,
            dask_key_name=scheduler.key("pair", sequence.name, k),
        )
        for k in ks
    }


def _pair_summary(queries: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Per-pair aggregates of the per-query results (docs/experiments.md)."""
    r1 = queries["n_relevant"] == 1
    n1, n0 = int(r1.sum()), int((queries["n_relevant"] == 0).sum())
    counted = queries["nn_correct"] >= 0
    return {
        "true_map": float(queries["ap"][r1].mean()) if n1 else float("nan"),
        "precision": float((queries["nn_correct"] == 1).sum() / counted.sum())
        if counted.any()
        else float("nan"),
        "n_queries": n1,
        "n_excluded": n0,
    }


class HPatches:
    """The ``hpatches`` benchmark (module docstring)."""

    name = "hpatches"
    default_conf: Mapping[str, Any] = DEFAULT_CONF
    units_group = "pairs"

    # -- configuration ----------------------------------------------------------------------

    def validate(self, conf: Config) -> None:
        """Check every value of a merged configuration (errors name key, value and origin)."""
        v = Values(conf)
        check_dataset_keys(v, "data.root")
        v.number("data.border", low=0)
        features = v.text("model.features", optional=True)
        if features is None:
            v.choice("model.descriptor", BUILTIN_METHODS)
            v.choice("model.detector", DETECTORS, optional=True)
        else:
            v.text("model.descriptor")
            if conf.get("model.detector") is not None:
                raise conf.fail("model.detector", "null with model.features (keypoints are read)")
        v.integer("model.max_keypoints", low=1, optional=True)
        v.boolean("model.matcher.mutual")
        if conf.get("model.matcher.ratio") is not None:
            v.number("model.matcher.ratio", low=0, high=1, strict=True)
        v.number("eval.tau", low=0)
        v.choice("eval.tie_policy", TIE_POLICIES)
        v.choice("eval.estimator", hg.available_estimators())
        try:
            hg.ransac_thresholds(conf.get("eval.ransac_th"))
        except ValueError:
            raise conf.fail(
                "eval.ransac_th", "a positive number of pixels, a list of them, or -1"
            ) from None
        v.integer("eval.max_iters", low=1)
        v.number("eval.confidence", low=0, high=1, strict=True)
        v.choice("eval.ransac_selection", hg.RANSAC_SELECTIONS)
        v.choice("eval.dlt", hg.DLT_METHODS)
        v.integers("eval.k", low=1)
        preset = conf.get("eval.preset")
        if preset is not None and not conf.origin("eval.preset").startswith(PRESET_LABEL):
            raise conf.fail("eval.preset", "null: it is set by --preset only")

    # -- export -----------------------------------------------------------------------------

    def export(self, ctx: Context) -> None:
        """Export every missing image pair (resuming), then merge them into predictions.h5."""
        rundir, model = ctx.rundir, ctx.conf["model"]
        settings = settings_of(ctx.conf)
        sequences = load_data(ctx.conf["data"], ctx.outputs)
        todo = [
            (sequence, k)
            for sequence in sequences
            for k in range(2, 7)
            if not rundir.part(sequence.name, f"1-{k}").is_file()
        ]
        scheduler = ctx.scheduler

        def finished(name: str, value: tuple[PairPrediction, bytes]) -> None:
            prediction, picture = value
            atomic_write(rundir.match_image(prediction.scene, prediction.pair), picture)
            write_part(rundir.part(prediction.scene, prediction.pair), prediction)  # the marker
            advance()

        scenes = list(dict.fromkeys(sequence for sequence, _ in todo))
        bar = progress_bar("exporting image pairs", total=len(todo), enabled=ctx.progress)
        with bar as advance:
            for batch in batches(scenes, max(2, 2 * scheduler.workers)):
                tasks = {}
                for sequence in batch:
                    ks = [k for s, k in todo if s is sequence]
                    tasks.update(_scene_tasks(sequence, ks, model, settings, scheduler))
                scheduler.run(tasks, finished)
        parts = {
            (sequence.name, pair): rundir.part(sequence.name, pair)
            for sequence in sequences
            for pair in PAIRS
        }
        merge_parts(parts, rundir.predictions, ctx.export_attrs())

    # -- evaluation -------------------------------------------------------------------------

    def evaluate(self, ctx: Context) -> Evaluation:
        """Evaluate the cached predictions of every image pair."""
        conf, rundir, scheduler = ctx.conf, ctx.rundir, ctx.scheduler
        evaluation, settings = conf["eval"], settings_of(conf)
        thresholds = hg.ransac_thresholds(evaluation["ransac_th"])
        sequences = load_data(conf["data"], ctx.outputs)
        pairs = [(sequence, pair) for sequence in sequences for pair in PAIRS]
        outputs: dict[str, dict[str, Any]] = {}
        kinds: set[str] = set()

        def finished(name: str, value: dict[str, Any]) -> None:
            outputs[name] = value
            advance()

        handle = open_predictions(rundir.predictions)
        bar = progress_bar("evaluating image pairs", total=len(pairs), enabled=ctx.progress)
        with handle, bar as advance:
            for batch in batches(pairs, max(4, 4 * scheduler.workers)):
                tasks = {}
                for sequence, pair in batch:
                    prediction = read_prediction(handle, sequence.name, pair)
                    kinds.add("hamming" if prediction.descriptors0.dtype == np.uint8 else "l2")
                    k = int(pair.split("-")[1])
                    tasks[f"{sequence.name}/{pair}"] = delayed(pair_evaluation)(
                        prediction,
                        sequence.homography(k),
                        evaluation,
                        settings,
                        dask_key_name=scheduler.key("evaluate", sequence.name, pair),
                    )
                scheduler.run(tasks, finished)
        names = [f"{sequence.name}/{pair}" for sequence, pair in pairs]
        attrs = {
            "tau_px": settings.tau,
            "border_px": settings.border,
            "tie_policy": settings.tie_policy,
            "ap_method": "ir",
            "distance": kinds.pop() if len(kinds) == 1 else "mixed",
            "dataset": dataset_fingerprint(sequences),  # combines with `keypoints eval` cubes
            "dataset_path": _dataset_path(sequences, conf["data"]["root"]),
            "keypoints": settings.keypoints,
            "y0_policy": "negative",
            "n_distractor_scenes": 0,
            "n_distractors": 0,
            "seed": settings.seed,
            "benchmark": self.name,
            "tag": ctx.tag,
            **preset_attrs(PRESETS[evaluation["preset"]] if evaluation["preset"] else None),
        }
        cube = cube_from_pairs(
            ctx.tag,
            [(n.split("/")[0], n.split("/")[1], outputs[n]["queries"]) for n in names],
            keypoint_set=ctx.tag,
            attrs=attrs,
            processing_time_ms=1e3 * sum(outputs[n]["seconds"] for n in names),
        )
        table = self._pairs(names, outputs, thresholds, rundir)
        summary, sweep = hg.summarize(
            {key: table[key].values for key in hg.SCALAR_KEYS}
            | {key: table[f"{key}_sweep"].values for key in hg.SWEEP_KEYS},
            thresholds,
            selection=evaluation["ransac_selection"],
        )
        best = thresholds.index(summary["ransac_th"])
        for key in hg.SWEEP_KEYS:
            table[key] = table[f"{key}_sweep"].isel(ransac_th=best, drop=True)
        table.attrs.update(
            estimator=evaluation["estimator"], ransac_th=summary["ransac_th"], tag=ctx.tag
        )
        metrics, scenes = self.metrics(cube, conf)
        summaries = {**scalar_summary(metrics, ctx.tag), **summary, "ransac_sweep": sweep}
        figures = {
            "homography_recall": plot_cumulative_errors(
                {
                    "DLT": table["H_error_dlt"].values,
                    f"{evaluation['estimator']} (th {summary['ransac_th']:g})": table[
                        "H_error_ransac"
                    ].values,
                },
                title=f"Homography corner error ({ctx.tag})",
            ),
            "rank_histogram": plot_rank_histogram(metrics),
            "scene_map": plot_scene_map(scenes),
        }
        return Evaluation(cube, table, summaries, metrics, scenes, figures)

    def _pairs(
        self,
        names: list[str],
        outputs: Mapping[str, dict[str, Any]],
        thresholds: Sequence[float],
        rundir: Any,
    ) -> xr.Dataset:
        scene = np.array([n.split("/")[0] for n in names])
        pair = np.array([n.split("/")[1] for n in names])
        coords = {
            "image_pair": np.array(names),
            "scene": ("image_pair", scene),
            "split": ("image_pair", split_of(scene)),
            "pair": ("image_pair", pair),
            "image0": ("image_pair", np.ones(len(names), np.int64)),
            "image1": ("image_pair", np.array([int(p.split("-")[1]) for p in pair])),
            "match_image": (
                "image_pair",
                np.array(
                    [
                        rundir.match_image(s, p).relative_to(rundir.path).as_posix()
                        for s, p in zip(scene, pair, strict=True)
                    ]
                ),
            ),
            "ransac_th": np.asarray(thresholds, dtype=np.float64),
        }
        data: dict[str, Any] = {}
        for key in hg.SCALAR_KEYS:
            values = np.array([outputs[n]["homography"][key] for n in names])
            data[key] = ("image_pair", values)
        for key in hg.SWEEP_KEYS:
            values = np.stack([outputs[n]["homography"][key] for n in names]).reshape(
                len(names), len(thresholds)
            )
            data[f"{key}_sweep"] = (("image_pair", "ransac_th"), values)
        summaries = [_pair_summary(outputs[n]["queries"]) for n in names]
        for key in ("true_map", "precision", "n_queries", "n_excluded"):
            data[key] = ("image_pair", np.array([s[key] for s in summaries]))
        return xr.Dataset(data, coords=coords)

    def metrics(self, cube: xr.Dataset, conf: Mapping[str, Any]) -> tuple[xr.Dataset, xr.Dataset]:
        """The metric set (cut-offs ``eval.k``) and per-scene metrics of a cube."""
        return metric_set(cube, k=conf["eval"]["k"]), scene_metrics(cube)
