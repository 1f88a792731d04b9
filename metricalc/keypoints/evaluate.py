"""Evaluate descriptors on image sequences into a QueryCube (docs/keypoints.md, docs/cube.md).

For every descriptor, scene and image pair (1, k), k = 2..6: the keypoints of image 1 that lie
``border`` px inside it are the queries, the keypoints of image k inside it the candidates; the
ground truth comes from the homography (:mod:`metricalc.keypoints.geometry`), the rank statistics
and nearest neighbours from one GEMM per query chunk (:mod:`metricalc.keypoints.matching`).
A descriptor whose evaluation fails is kept as an error record with its message.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.keypoints.bojanic import SCENE_RESULTS, distractors, keeps_distances, scene_tasks
from metricalc.keypoints.featureset import check_inside_images
from metricalc.keypoints.geometry import inside
from metricalc.keypoints.image_retrieval import RETRIEVAL_VARIABLES, descriptor_image_retrieval
from metricalc.keypoints.pairs import PAIR_FIELDS, evaluate_pair
from metricalc.keypoints.parallel import run_staged
from metricalc.keypoints.sequences import dataset_fingerprint
from metricalc.progress import progress_bar
from metricalc.validation import (
    TIE_POLICIES,
    Boolean,
    Choice,
    Integer,
    Nullable,
    Real,
    Text,
    validate_params,
)

__all__ = ["evaluate"]


@validate_params(keypoint_set=Text(), processing_time_ms=Real(0, None))
def cube_from_pairs(
    name: str,
    pairs: Iterable[tuple[str, str, Mapping[str, np.ndarray]]],
    *,
    keypoint_set: str,
    attrs: Mapping[str, Any],
    processing_time_ms: float,
    per_sequence: Mapping[str, Any] | None = None,
    sequences: Sequence[str] | None = None,
) -> xr.Dataset:
    """The QueryCube of one descriptor from the per-pair results of :func:`evaluate_pair`.

    ``pairs`` yields ``(scene, pair, result)`` (e.g. ``("v_coffee", "1-3", evaluate_pair(...))``)
    in query order; the split comes from the scene name (:func:`metricalc.cube.split_of`).
    ``attrs`` are the protocol attrs.
    """
    columns: dict[str, list[np.ndarray]] = {k: [] for k in (*PAIR_FIELDS, "scene", "pair")}
    for scene, pair, result in pairs:
        for key in PAIR_FIELDS:
            columns[key].append(result[key])
        n = len(result["x"])
        columns["scene"].append(np.full(n, scene, dtype=object))
        columns["pair"].append(np.full(n, pair, dtype=object))
    table = {k: np.concatenate(v) if v else np.empty(0) for k, v in columns.items()}
    coords = {k: table[k] for k in ("scene", "pair", "query_keypoint", "x", "y")}
    coords["keypoint_set"] = np.full(len(table["x"]), keypoint_set, dtype=object)
    data = {k: table[k][None, :] for k in PAIR_FIELDS if k not in coords}
    return cubes.new_cube(
        [name],
        coords,
        data,
        attrs=attrs,
        per_descriptor={"processing_time_ms": np.array([processing_time_ms])},
        per_sequence=per_sequence,
        sequences=sequences,
    )


@dataclasses.dataclass(frozen=True)
class _Task:
    """One unit of the evaluation: a descriptor on one scene, or its image retrieval."""

    name: str
    scene: int  # index into the sequences; -1: the descriptor's image retrieval


@dataclasses.dataclass
class _Outcome:
    """What one task produced (or the error it raised) and how long it took."""

    pairs: list[tuple[str, str, dict[str, np.ndarray]]] = dataclasses.field(default_factory=list)
    scene: dict[str, float] = dataclasses.field(default_factory=dict)
    retrieval: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0


def _scene_outcome(
    name: str,
    sequence: Any,
    sequences: Sequence[Any],
    features: Mapping[str, Mapping[int, Any]],
    *,
    attrs: Mapping[str, Any],
    bojanic: bool,
) -> _Outcome:
    """The five image pairs of one scene and, with ``bojanic``, its verification / retrieval."""
    tau, border, tie_policy = attrs["tau_px"], attrs["border_px"], attrs["tie_policy"]
    scene = features.get(sequence.name)
    if scene is None:
        raise InvalidInputError(f"descriptor {name!r} has no features for scene {sequence.name!r}")
    outcome = _Outcome()
    pool = (
        distractors(
            sequence.name,
            sequences,
            features,
            border=border,
            n_scenes=attrs["n_distractor_scenes"],
            n_keypoints=attrs["n_distractors"],
            seed=attrs["seed"],
        )
        if bojanic
        else None
    )
    # the scene lists rank the same (reference, image k) products as the pairs: keep them when
    # the scene's matrix is small enough (as scene_tasks itself would)
    keep = pool is not None and keeps_distances(*_scene_sizes(sequence, scene, border, len(pool)))
    relevant, blocks = {}, []
    for k in range(2, 7):
        result = evaluate_pair(
            scene[1],
            scene[k],
            sequence.homography(k),
            sequence.shape(1),
            sequence.shape(k),
            tau=tau,
            border=border,
            tie_policy=tie_policy,
            keep_distances=keep,
        )
        if keep:
            blocks.append(result.pop("squared_distances"))
        outcome.pairs.append((sequence.name, f"1-{k}", result))
        relevant[k] = result["relevant"]
    if pool is not None:
        outcome.scene = scene_tasks(
            sequence,
            scene,
            pool,
            tau=tau,
            border=border,
            tie_policy=tie_policy,
            y0=attrs["y0_policy"],
            relevant=relevant,
            hard_distances=blocks if keep else None,
        )
    return outcome


def _scene_sizes(
    sequence: Any, scene: Mapping[int, Any], border: float, n_pool: int
) -> tuple[int, int]:
    """References and candidates of a scene's pooled lists: image 1's border-filtered keypoints,
    and those of images 2..6 with the distractors."""
    kept = [int(inside(scene[k].keypoints, sequence.shape(k), border).sum()) for k in range(1, 7)]
    return kept[0], sum(kept[1:]) + n_pool


def _run_task(
    task: _Task,
    sequences: Sequence[Any],
    features: Mapping[str, Mapping[str, Mapping[int, Any]]],
    *,
    attrs: Mapping[str, Any],
    bojanic: bool,
) -> _Outcome:
    """One task, its error kept as a message (the descriptor becomes an error record)."""
    started = time.perf_counter()
    try:
        if task.scene < 0:
            outcome = _Outcome(
                retrieval=descriptor_image_retrieval(
                    sequences, features[task.name], border=attrs["border_px"]
                )
            )
        else:
            outcome = _scene_outcome(
                task.name,
                sequences[task.scene],
                sequences,
                features[task.name],
                attrs=attrs,
                bojanic=bojanic,
            )
    except Exception as error:  # kept as an error record, never dropped
        outcome = _Outcome(error=f"{type(error).__name__}: {error}")
    outcome.seconds = time.perf_counter() - started
    return outcome


def _descriptor_cube(
    name: str,
    sequences: Sequence[Any],
    outcomes: Sequence[_Outcome],
    *,
    keypoint_set: str,
    attrs: Mapping[str, Any],
    bojanic: bool,
) -> xr.Dataset:
    """The QueryCube of one descriptor from its tasks' outcomes, in scene order (then its image
    retrieval), or its error record when one of them failed (the first in that order)."""
    for outcome in outcomes:
        if outcome.error is not None:
            return cubes.error_record(name, outcome.error, attrs=attrs)
    per_sequence: dict[str, np.ndarray] = {}
    if bojanic:
        per_sequence = {
            key: np.asarray([o.scene[key] for o in outcomes[: len(sequences)]])[None, :]
            for key in SCENE_RESULTS
        }
    for outcome in outcomes[len(sequences) :]:  # the image retrieval, when run
        per_sequence.update({k: v[None, :] for k, v in outcome.retrieval.items()})
    try:
        return cube_from_pairs(
            name,
            [pair for outcome in outcomes for pair in outcome.pairs],
            keypoint_set=keypoint_set,
            attrs=attrs,
            processing_time_ms=sum(o.seconds for o in outcomes) * 1e3,
            per_sequence=per_sequence or None,
            sequences=[s.name for s in sequences] if per_sequence else None,
        )
    except Exception as error:  # kept as an error record, never dropped
        return cubes.error_record(name, f"{type(error).__name__}: {error}", attrs=attrs)


PIXELS = Real(0, None)
"""A ground-truth tolerance or an image border: a finite, non-negative number of pixels."""


def check_protocol(*, tau: float, border: float) -> None:
    """Refuse a ground-truth tolerance or border that is not a finite, non-negative pixel count."""
    for name, value in (("tau", tau), ("border", border)):
        PIXELS.check(name, value)


def _distance_kind(features: Mapping[str, Mapping[str, Mapping[int, Any]]]) -> str:
    kinds = {
        "hamming" if image.descriptors.dtype == np.uint8 else "l2"
        for scenes in features.values()
        for images in scenes.values()
        for image in images.values()
    }
    return kinds.pop() if len(kinds) == 1 else "mixed"


@validate_params(
    keypoints=Text(),
    tau=PIXELS,
    border=PIXELS,
    tie_policy=Choice(TIE_POLICIES),
    bojanic=Boolean(),
    image_retrieval=Boolean(),
    y0=Choice(cubes.Y0_POLICIES),
    n_distractor_scenes=Integer(0),
    n_distractors=Integer(0),
    seed=Integer(0),
    dataset=Nullable(Text()),
    dataset_path=Text(empty=True),
    progress=Boolean(),
)
def evaluate(
    sequences: Sequence[Any],
    features: Mapping[str, Mapping[str, Mapping[int, Any]]],
    *,
    keypoints: str = "native",
    tau: float = 3.0,
    border: float = 40.0,
    tie_policy: str = "expected",
    bojanic: bool = True,
    image_retrieval: bool = False,
    y0: str = "negative",
    n_distractor_scenes: int = cubes.DEFAULT_ATTRS["n_distractor_scenes"],
    n_distractors: int = cubes.DEFAULT_ATTRS["n_distractors"],
    seed: int = 0,
    dataset: str | None = None,
    dataset_path: str = "",
    progress: bool = False,
    results_of: Mapping[str, xr.Dataset] | None = None,
) -> xr.Dataset:
    """Evaluate every descriptor of ``features`` on ``sequences`` into one QueryCube.

    Parameters
    ----------
    sequences : sequence of Sequence
        Scenes with six images and homographies H_1_k (:func:`load_sequences`).
    features : mapping descriptor -> scene -> image (1..6) -> Features
        From :func:`extract` or :func:`load_features`.
    keypoints : str
        ``"locked:<detector>"`` when all descriptors were computed on one detector's keypoints
        (queries identical across descriptors), ``"native"`` when each has its own, or
        ``"external"`` for bring-your-own features.
    tau : float
        Ground-truth tolerance in pixels (default 3).
    border : float
        Keypoints closer than this to the image edge are dropped (default 40).
    tie_policy : {"expected", "optimistic", "pessimistic", "workbench"}
        How the per-query AP treats tied distances (docs/metrics.md).
    bojanic : bool
        Also run keypoint verification and retrieval (docs/keypoints.md).
    image_retrieval : bool
        Also run DescriptorWorkbench's image retrieval
        (:mod:`metricalc.keypoints.image_retrieval`, ``image_retrieval_map``). Off by default:
        per descriptor it matches every reference image against every image of the dataset,
        (scenes) x (images) image matchings, several times the cost of the rest of the
        evaluation on 32 scenes and growing with the square of the number of scenes.
    y0 : {"negative", "ignore"}
        Retrieval: hard negatives count as non-relevant, or are removed.
    n_distractor_scenes, n_distractors, seed
        Distractors: ``n_distractors`` keypoints from one random image of each of
        ``n_distractor_scenes`` other scenes, drawn with ``seed``.
    dataset : str, optional
        The identity of the data, recorded in the cube attr ``dataset`` (a protocol attr: cubes
        combine only when it is equal). Default: the content fingerprint of ``sequences``
        (:func:`metricalc.keypoints.sequences.dataset_fingerprint`, ``"sha256:..."``), so cubes
        evaluated on the same images and homographies combine wherever the folder lies.
    dataset_path : str
        Where the data was read from (readable; not compared), recorded in the attr
        ``dataset_path`` when given.
    progress : bool
        Show a progress bar over image pairs.
    results_of : mapping descriptor -> QueryCube, optional
        Descriptors of ``features`` already evaluated on these same features (keypoints and
        rows) and data under the same protocol, in the cube given for each (native SIFT is in
        a cube locked on SIFT's keypoints when that run kept every keypoint): their part is that
        cube's (their queries, the variables this run makes, this run's attrs) instead of a
        second evaluation, which would give the same numbers. The cube's protocol attrs but
        ``keypoints`` and ``distance`` must equal this run's; the features are the caller's
        word (``metricalc demo`` compares them array by array).

    Returns
    -------
    xarray.Dataset
        The QueryCube over (descriptor, query) with every protocol parameter in its attrs; with
        ``bojanic`` or ``image_retrieval`` also the per-scene variables over
        (descriptor, sequence) (those of a task not run at their sentinels).
    """
    if not sequences:
        raise InvalidInputError("no sequences to evaluate")
    if not features:
        raise InvalidInputError("no features to evaluate")
    check_inside_images(features, sequences)
    if keypoints.startswith("locked:"):
        locked = keypoints.split(":", 1)[1]
    elif keypoints in ("native", "external"):
        locked = None
    else:
        raise InvalidInputError(
            f"keypoints must be 'native', 'external' or 'locked:<detector>'; got {keypoints!r}"
        )
    attrs = {
        "tau_px": float(tau),
        "border_px": float(border),
        "tie_policy": tie_policy,
        "ap_method": "ir",
        "distance": _distance_kind(features),
        "dataset": dataset_fingerprint(sequences) if dataset is None else dataset,
        "keypoints": keypoints,
        "y0_policy": y0,
        "n_distractor_scenes": int(n_distractor_scenes),
        "n_distractors": int(n_distractors),
        "seed": int(seed),
        **({"dataset_path": dataset_path} if dataset_path else {}),
    }
    unknown = [name for name in results_of or {} if name not in features]
    if unknown:
        raise InvalidInputError(f"results_of names {unknown}, which are not in features")
    reused = {
        name: _reused_part(cube, name, attrs, bojanic=bojanic, image_retrieval=image_retrieval)
        for name, cube in (results_of or {}).items()
    }
    per_descriptor = (*range(len(sequences)), *((-1,) if image_retrieval else ()))
    names = [name for name in features if name not in reused]
    groups = [[_Task(name, index) for index in per_descriptor] for name in names]
    total = len(names) * len(per_descriptor)
    with progress_bar("evaluating scenes", total=total, enabled=progress) as advance:
        parts = run_staged(
            lambda task: _run_task(task, sequences, features, attrs=attrs, bojanic=bojanic),
            groups,
            lambda i, outcomes: _descriptor_cube(
                names[i],
                sequences,
                outcomes,
                keypoint_set=locked or names[i],
                attrs=attrs,
                bojanic=bojanic,
            ),
            done=advance,
        )
    evaluated = dict(zip(names, parts, strict=True))
    return cubes.combine([reused[n] if n in reused else evaluated[n] for n in features])


def _reused_part(
    cube: xr.Dataset, name: str, attrs: Mapping[str, Any], *, bojanic: bool, image_retrieval: bool
) -> xr.Dataset:
    """Descriptor ``name`` of an evaluated ``cube`` as this run's part of it (``results_of``)."""
    if name not in cube.descriptor.values:
        raise InvalidInputError(f"results_of[{name!r}]: the cube has no descriptor {name!r}")
    differ = [
        key
        for key in (*cubes.PROTOCOL_ATTRS, "n_distractor_scenes", "n_distractors", "seed")
        if key not in ("keypoints", "distance") and cube.attrs.get(key) != attrs.get(key)
    ]
    if differ:
        raise InvalidInputError(
            f"results_of[{name!r}]: the cube was evaluated under another protocol "
            f"({', '.join(f'{k}={cube.attrs.get(k)!r}, not {attrs.get(k)!r}' for k in differ)})"
        )
    made = (SCENE_RESULTS if bojanic else ()) + (RETRIEVAL_VARIABLES if image_retrieval else ())
    missing = [v for v in made if v not in cube.data_vars]
    if missing:
        raise InvalidInputError(f"results_of[{name!r}]: the cube lacks {missing}")
    part = cube.sel(descriptor=[name])
    part = part.isel(query=np.flatnonzero(part["n_relevant"].values[0] != -1))
    others = [v for v in cubes.SEQUENCE_VARIABLES if v in part.data_vars and v not in made]
    if not made:  # a run without per-scene tasks has no per-scene variables
        return part.drop_vars(others).drop_dims("sequence").assign_attrs(dict(attrs))
    for variable in others:  # not run here: at their sentinels, as this run's own parts
        part[variable] = part[variable].copy(
            data=cubes.sentinel_array(variable, part[variable].shape)
        )
    return part.assign_attrs(dict(attrs))
