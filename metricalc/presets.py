"""Protocol presets: the settings a paper's or a tool's evaluation fixed, in one table.

``--preset NAME`` on the verb a protocol belongs to sets every option of :data:`PRESETS`
``[NAME].settings`` as a default; an option given on the command line (or, for ``metricalc eval``,
in ``--conf`` or a ``key=value`` override) still wins. The preset's name and source are recorded
in what the verb writes (the cube attrs ``preset`` and ``preset_source``; the run config key
``eval.preset``), so a report shows which protocol produced a number. ``docs/presets.md`` gives
every setting with the file, function or notebook cell it was read from, and what metricalc
cannot reproduce.

Constants only (no NumPy, no domain imports): the command-line parser reads this table.

Settings are keyed by what the verb calls them: the option names (argparse ``dest``) of
``keypoints eval`` and ``patches hpatches-eval``, the dotted config keys of ``eval hpatches``.

Examples
--------
>>> from metricalc.presets import PRESETS, preset_for
>>> sorted(PRESETS)
['d2net', 'gluefactory', 'hpatches-cvpr17', 'superpoint', 'workbench']
>>> PRESETS["d2net"].verb, PRESETS["d2net"].values()["split"]
('keypoints eval', 'd2net')
>>> preset_for("d2net", "eval hpatches")
Traceback (most recent call last):
...
metricalc.errors.InvalidInputError: --preset d2net applies to metricalc keypoints eval, not to metricalc eval hpatches; the presets of eval hpatches: gluefactory
"""  # noqa: E501

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from metricalc.errors import InvalidInputError

__all__ = ["PRESETS", "PRESET_VERBS", "Preset", "Setting", "preset_attrs", "preset_for"]


@dataclass(frozen=True)
class Setting:
    """One setting of a preset: its value and where in the source it was read."""

    value: Any
    source: str


@dataclass(frozen=True)
class Preset:
    """A protocol preset.

    Attributes
    ----------
    name : str
        ``--preset`` name.
    source : str
        ``"repo/file@what"``: the code the protocol was read from.
    verb : str
        The verb the protocol belongs to (one of :data:`PRESET_VERBS`).
    settings : mapping
        Option (or config key) -> :class:`Setting`: what the preset sets.
    fixed : tuple of str
        Choices of the source that metricalc's verb makes anyway (no option to set).
    not_reproduced : tuple of str
        Choices of the source that metricalc's verb cannot express.
    """

    name: str
    source: str
    verb: str
    settings: Mapping[str, Setting]
    fixed: tuple[str, ...] = ()
    not_reproduced: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        """The settings' values: option -> value."""
        return {key: setting.value for key, setting in self.settings.items()}


D2NET_NOTEBOOK = (
    "mihaidusmanu/d2-net hpatches_sequences/HPatches-Sequences-Matching-Benchmark.ipynb"
)
SUPERPOINT_EVAL = "rpautrat/SuperPoint superpoint/evaluations/descriptor_evaluation.py"
SUPERPOINT_CONF = "rpautrat/SuperPoint superpoint/configs/superpoint_hpatches.yaml"
GLUEFACTORY_EVAL = "cvg/glue-factory gluefactory/eval/hpatches.py"
HPATCHES_EVAL = "hpatches/hpatches-benchmark python/hpatches_eval.py"

PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        "d2net": Preset(
            name="d2net",
            source=f"{D2NET_NOTEBOOK}@benchmark_features",
            verb="keypoints eval",
            settings={
                "split": Setting(
                    "d2net", "cell 6 (n_i = 52, n_v = 56); hpatches_sequences/README.md"
                ),
                "border": Setting(
                    0.0,
                    "benchmark_features: every keypoint of read_feats is "
                    "matched, none dropped near the edge",
                ),
                "max_keypoints": Setting(
                    None,
                    "benchmark_features reads every keypoint of the .npz (the paper's version; "
                    "hpatches_sequences/README.md: scores are only needed for the top-K version)",
                ),
            },
            fixed=(
                "mutual nearest neighbours (mnn_matcher; the cube's nn_mutual)",
                "MMA at 1..10 px (cell 17: plt_rng; matching_accuracy's default thresholds)",
                "a pair without a match counts 0 (dist = [inf]; matching_accuracy "
                "convention='d2net')",
                "the mean over all 540 image pairs, illumination 260 / viewpoint 280",
            ),
            not_reproduced=(
                "thresholds 11..15 px are computed by the notebook (rng = 1..15) but not "
                "plotted; pass them to matching_accuracy to get them",
                "the notebook's later top-K version (top_k = 2000: the highest scores) is "
                "--max-keypoints 2000, not the preset",
            ),
        ),
        "superpoint": Preset(
            name="superpoint",
            source=f"{SUPERPOINT_EVAL}@compute_homography",
            verb="keypoints eval",
            settings={
                "split": Setting(
                    "full",
                    f"{SUPERPOINT_CONF}: dataset hpatches, all 116 "
                    "sequences (alteration i / v / all)",
                ),
                "max_keypoints": Setting(
                    1000, f"compute_homography(keep_k_points=1000); {SUPERPOINT_CONF} top_k: 1000"
                ),
                "border": Setting(
                    0.0,
                    "keep_shared_points: no border margin, only points "
                    "whose warp leaves the image are dropped",
                ),
                "tau": Setting(
                    3.0,
                    "compute_homography(correctness_thresh=3); "
                    "detector_evaluation.compute_repeatability(distance_thresh=3)",
                ),
            },
            fixed=(
                "mutual nearest neighbours (cv2.BFMatcher(crossCheck=True); the cube's nn_mutual)",
                "L2 distance for float descriptors, Hamming for binary ones (orb=True)",
            ),
            not_reproduced=(
                f"resizing the images to 480 x 640 ({SUPERPOINT_CONF} preprocessing.resize)",
                "SuperPoint's own detector: NMS 4 px, detection_threshold 0.001",
                "homography correctness (mean corner error <= 3 px after cv2.findHomography "
                "RANSAC): use metricalc eval hpatches, whose corner error is that distance",
                "repeatability (compute_repeatability): not a metric of metricalc",
                "keeping only keypoints whose warp lies inside the other image before the "
                "top 1000 are taken (keep_shared_points); metricalc takes the top 1000 first, "
                "and a query projected outside image B has no correspondence (R = 0)",
            ),
        ),
        "workbench": Preset(
            name="workbench",
            source="F-Sossi/DescriptorWorkbench config/defaults/sift_baseline.yaml@keypoints",
            verb="keypoints eval",
            settings={
                "max_keypoints": Setting(
                    2000, "config/defaults/sift_baseline.yaml keypoints.max_features: 2000"
                ),
                "border": Setting(
                    40.0, "40 px border exclusion on keypoint generation (PROTOCOLS.md section 2)"
                ),
                "tau": Setting(3.0, "homography ground truth within 3 px (PROTOCOLS.md section 2)"),
                "tie_policy": Setting(
                    "workbench",
                    "computeAveragePrecision: rank 1 + better "
                    "+ floor((ties + 1) / 2) (PROTOCOLS.md section 1)",
                ),
                "bojanic": Setting(
                    True,
                    "KeypointVerification.cpp evaluateVerification / "
                    "evaluateRetrieval (PROTOCOLS.md section 4)",
                ),
                "y0": Setting(
                    "negative",
                    "evaluateRetrieval: same-sequence non-matches count "
                    "as non-relevant (PROTOCOLS.md section 4)",
                ),
                "image_retrieval": Setting(
                    True, "image_retrieval_map of its metric set (PROTOCOLS.md section 3)"
                ),
            },
            fixed=(
                "the metric set of PROTOCOLS.md section 3 (metricalc metrics CUBE)",
                "no +-2000 px clipping of projections (PROTOCOLS.md section 2)",
            ),
            not_reproduced=(
                "DescriptorWorkbench's detector parameters (contrast_threshold 0.04, "
                "edge_threshold 10) are OpenCV's SIFT defaults, which metricalc uses too; "
                "other detectors keep metricalc's settings",
            ),
        ),
        "gluefactory": Preset(
            name="gluefactory",
            source=f"{GLUEFACTORY_EVAL}@HPatchesPipeline",
            verb="eval hpatches",
            settings={
                "data.border": Setting(
                    0.0, "HPatchesPipeline.default_conf['data']: no border filtering"
                ),
                "eval.estimator": Setting(
                    "RANSAC",
                    "eval.estimator=opencv (the configs of "
                    "the published runs, e.g. superpoint+lightglue-"
                    "official.yaml benchmarks.hpatches.eval)",
                ),
                "eval.ransac_th": Setting(
                    -1, "run_eval: ransac_th -1 sweeps 0.5, 1.0, ..., 3.0 px"
                ),
                "eval.max_iters": Setting(3000, "OpenCVHomographyEstimator: maxIters 3000"),
                "eval.confidence": Setting(0.995, "OpenCVHomographyEstimator: confidence 0.995"),
                "eval.ransac_selection": Setting(
                    "gluefactory",
                    "eval_poses: the best threshold by the mean of the AUCs rounded to 4 decimals",
                ),
                "eval.dlt": Setting(
                    "gluefactory",
                    "eval_homography_dlt: kornia's DLT weighted by the matching scores",
                ),
            },
            fixed=(
                "AUC of the corner error at 1, 3, 5 px (run_eval: auc_ths = [1, 3, 5])",
                "medians of the per-pair values as the m* summaries (run_eval)",
            ),
            not_reproduced=(
                "resizing the images to 480 px on the shorter side (default_conf "
                "data.preprocessing: resize 480, side short)",
                "the default estimator poselib (eval.estimator: poselib); the preset uses "
                "OpenCV RANSAC, as the published LightGlue configs do",
                "the keypoint count is the model's (superpoint+lightglue-official.yaml: "
                "max_num_keypoints 1024 on HPatches); set model.max_keypoints to match",
            ),
        ),
        "hpatches-cvpr17": Preset(
            name="hpatches-cvpr17",
            source=f"{HPATCHES_EVAL}@docopt",
            verb="patches hpatches-eval",
            settings={
                "task": Setting(
                    "all",
                    "python/get_all_results.sh: --task=matching "
                    "--task=retrieval --task=verification",
                ),
                "split": Setting(
                    "full",
                    "python/get_all_results.sh: hpatches_results.py "
                    "--split=full (hpatches_eval.py's own default is a)",
                ),
                "distance": Setting("l2", "hpatches_eval.py --dist [default: L2]"),
            },
            fixed=(
                "the ranking, AP and AUC of python/utils/metrics.py and tasks.py "
                "(PROTOCOLS.md section 11)",
            ),
            not_reproduced=(
                "the official verification pair files (~600 MB): without --tasks they are "
                "generated by gen_verif's rule, so the verification numbers differ",
                "--pcapl (PCA / power-law normalised descriptors)",
            ),
        ),
    }
)
"""Every preset by name."""

PRESET_VERBS = ("keypoints eval", "eval hpatches", "patches hpatches-eval")
"""The verbs that take ``--preset``."""


def preset_for(name: str, verb: str) -> Preset:
    """The preset ``name`` of ``verb``; a one-line error if it is unknown or belongs to another
    verb (the message says which verbs take it)."""
    if name not in PRESETS:
        raise InvalidInputError(
            f"--preset {name!r} is unknown; expected one of {', '.join(sorted(PRESETS))}"
        )
    preset = PRESETS[name]
    if preset.verb != verb:
        own = ", ".join(sorted(p.name for p in PRESETS.values() if p.verb == verb)) or "none"
        raise InvalidInputError(
            f"--preset {name} applies to metricalc {preset.verb}, not to metricalc {verb}; "
            f"the presets of {verb}: {own}"
        )
    return preset


def preset_attrs(preset: Preset | None) -> dict[str, str]:
    """The attrs that record a preset: ``preset`` and ``preset_source`` ("" without one).

    Examples
    --------
    >>> preset_attrs(PRESETS["hpatches-cvpr17"])["preset_source"]
    'hpatches/hpatches-benchmark python/hpatches_eval.py@docopt'
    >>> preset_attrs(None)
    {'preset': '', 'preset_source': ''}
    """
    if preset is None:
        return {"preset": "", "preset_source": ""}
    return {"preset": preset.name, "preset_source": preset.source}
