"""The per-unit results of the HPatches CVPR'17 tasks as QueryCubes (for ``compare`` and reports).

Two descriptors evaluated on the same split have the same units, so the paired tests of
``metricalc compare`` pair them unit by unit, and the mean of a cube's ``ap`` is the task's mAP.
Each cube's attrs say what it holds: ``task``, ``split``, ``level`` (the levels it holds; the
level of a unit is its ``keypoint_set``), ``ap_method="trapezoid"`` (``metrics.pr``: the
trapezoid over recall with :math:`P_0 = 1`), ``tie_policy``, ``distance`` (``"l2"`` or
``"l1"``) and ``dataset``: ``"hpatches-cvpr17 <task>, split <split>[, pool <size>]"``, after
``"<data>: "`` when the descriptors are not of the HPatches release but of data metricalc
generated (``data``, the name the folders' mark gives:
:func:`metricalc.benchmarks.hpatches_cvpr17.files.data_name`; ``make_hpatches17_set``'s data is
``"synthetic-hpatches17 ..."``). Cubes of different data therefore never combine, and a report
shows no published number beside a cube of generated data.

Like every QueryCube, the cubes also hold the keypoint attrs of
:data:`metricalc.cube.PROTOCOL_ATTRS` (``tau_px``, ``border_px``, ``keypoints``, ...) at their
defaults, which ``validate`` and ``combine`` need and which say nothing about patches: a
report lists the attrs of :data:`metricalc.hpatches.CVPR17_PROTOCOL` instead.

- :func:`retrieval_cube`: one query per (retrieval query, level): ``scene`` the query's
  sequence, ``query_keypoint`` its row in ``retr_queries_split-X.csv``, ``ap`` its AP in the
  pool of ``pool_size`` items (:func:`metricalc.benchmarks.hpatches_cvpr17.evaluate.retrieval_ap`).
  ``tie_policy="optimistic"``: the positives come first in the list and a stable sort keeps
  them ahead of tied distractors.
- :func:`matching_cube`: one query per (sequence, image pair, level): ``scene`` the sequence,
  ``pair`` ``"1-<k+1>"`` (``ref`` is image 1 of the HPatches sequence, image ``k`` of a level
  its image ``k + 1``, as in the keypoint cubes), ``query_keypoint`` 0, ``ap`` the image pair's
  matching AP (:func:`metricalc.benchmarks.hpatches_cvpr17.evaluate.matching_ap`).
  ``tie_policy="input_order"``: tied nearest-neighbour distances keep the order of the ``ref``
  patches (hpatches-benchmark's stable sort), which is neither relevant-first nor
  relevant-last.

The verification pairs are not QueryCube units (a pooled AUC / AP is not a mean over units):
they form a pair cube (:mod:`metricalc.benchmarks.hpatches_cvpr17.pairs`). :func:`task_cubes` makes
every
task's cube of an :func:`~metricalc.benchmarks.hpatches_cvpr17.evaluate.evaluate_hpatches17` result
and
:func:`save_task_cubes` writes them, one file per task (:func:`cube_paths`), all or none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc import cube as qc
from metricalc.benchmarks.hpatches_cvpr17.evaluate import LEVEL_NAMES, POOL_SIZES, TASKS17
from metricalc.benchmarks.hpatches_cvpr17.files import dataset_attr
from metricalc.benchmarks.hpatches_cvpr17.pairs import pair_cube, save_pair_cube
from metricalc.errors import InvalidInputError
from metricalc.fileio import temporary_path

__all__ = ["cube_paths", "matching_cube", "retrieval_cube", "save_task_cubes", "task_cubes"]

_LEVELS = ",".join(LEVEL_NAMES.values())


def _attrs(task: str, split: str, distance: str, tie_policy: str, dataset: str) -> dict[str, str]:
    return {
        "ap_method": "trapezoid",
        "tie_policy": tie_policy,
        "distance": distance,
        "dataset": dataset,
        "benchmark": "hpatches-cvpr17",
        "task": task,
        "split": split,
        "level": _LEVELS,
    }


def retrieval_cube(
    ap: np.ndarray,
    queries_seq: np.ndarray,
    *,
    descriptor: str,
    split: str,
    pool_size: int = 20000,
    distance: str = "l2",
    data: str = "",
) -> xr.Dataset:
    """A QueryCube of the retrieval APs ``ap`` (queries x 3 levels x :data:`POOL_SIZES`);
    ``data`` names generated data (module docstring), ``""`` the HPatches release."""
    if pool_size not in POOL_SIZES:
        raise InvalidInputError(f"pool_size: expected one of {POOL_SIZES}, got {pool_size}")
    n = len(queries_seq)
    if ap.shape != (n, len(LEVEL_NAMES), len(POOL_SIZES)):
        raise InvalidInputError(f"ap: expected shape ({n}, 3, {len(POOL_SIZES)}), got {ap.shape}")
    column = POOL_SIZES.index(pool_size)
    frame = pd.DataFrame(
        {
            "descriptor": descriptor,
            "scene": np.repeat(np.asarray(queries_seq, dtype=str), len(LEVEL_NAMES)),
            "query": np.repeat(np.arange(n), len(LEVEL_NAMES)),
            "keypoint_set": np.tile(list(LEVEL_NAMES.values()), n),
            "ap": ap[:, :, column].ravel(),
        }
    )
    dataset = dataset_attr(data, f"hpatches-cvpr17 retrieval, split {split}, pool {pool_size}")
    attrs = _attrs("retrieval", split, distance, "optimistic", dataset)
    return qc.from_dataframe(frame, attrs={**attrs, "pool_size": pool_size})


def matching_cube(
    per_pair: Mapping[tuple[str, str, int], float],
    *,
    descriptor: str,
    split: str,
    distance: str = "l2",
    data: str = "",
) -> xr.Dataset:
    """A QueryCube of the matching APs ``{(sequence, level letter, k): AP}``
    (:func:`metricalc.benchmarks.hpatches_cvpr17.evaluate.matching`'s ``per_pair``); ``data`` names
    generated
    data (module docstring), ``""`` the HPatches release.

    The mean of ``ap`` over the units of a level is that level's mAP, over all units the
    ``mean`` (every level has the same image pairs).

    Examples
    --------
    >>> c = matching_cube({("v_a", "e", 1): 0.5, ("v_a", "h", 1): 0.25}, descriptor="d",
    ...                   split="full")
    >>> c.pair.values.tolist(), c.keypoint_set.values.tolist(), float(c.ap.mean())
    (['1-2', '1-2'], ['easy', 'hard'], 0.375)
    >>> c.attrs["tie_policy"], c.attrs["task"], c.attrs["dataset"]
    ('input_order', 'matching', 'hpatches-cvpr17 matching, split full')
    """
    if not per_pair:
        raise InvalidInputError("per_pair: expected the AP of at least one image pair, got none")
    keys = list(per_pair)
    wrong = [k for k in keys if k[1] not in LEVEL_NAMES or k[2] not in range(1, 6)]
    if wrong:
        raise InvalidInputError(
            f"per_pair: expected keys (sequence, level in {tuple(LEVEL_NAMES)}, k in 1..5), "
            f"got {wrong[0]!r}"
        )
    n = len(keys)
    coords = {
        "scene": np.array([k[0] for k in keys], dtype=str),
        "pair": np.array([f"1-{k[2] + 1}" for k in keys], dtype=str),
        "keypoint_set": np.array([LEVEL_NAMES[k[1]] for k in keys], dtype=str),
        "query_keypoint": np.zeros(n, dtype=np.int64),
    }
    variables = {
        "ap": np.array([[per_pair[k] for k in keys]], dtype=np.float64),
        "n_relevant": np.ones((1, n), dtype=np.int8),
    }
    dataset = dataset_attr(data, f"hpatches-cvpr17 matching, split {split}")
    attrs = _attrs("matching", split, distance, "input_order", dataset)
    return qc.new_cube([descriptor], coords, variables, attrs={**qc.DEFAULT_ATTRS, **attrs})


def task_cubes(
    result: Mapping[str, Any],
    *,
    descriptor: str,
    split: str,
    distance: str = "l2",
    pool_size: int = 20000,
    attrs: Mapping[str, Any] | None = None,
) -> dict[str, xr.Dataset]:
    """The cube of every task in an ``evaluate_hpatches17`` result: ``verification`` a pair
    cube, ``matching`` and ``retrieval`` QueryCubes, each of the result's ``dataset`` (the
    data the folders' marks name); ``attrs`` (e.g. a preset's) added to each."""
    units = result["units"]
    data = str(result.get("dataset", ""))
    cubes: dict[str, xr.Dataset] = {}
    if "verification" in units:
        cubes["verification"] = pair_cube(
            units["verification"], units["verification_pairs"], descriptor=descriptor,
            split=split, distance=distance, data=data,
        )  # fmt: skip
    if "matching" in units:
        cubes["matching"] = matching_cube(
            units["matching"], descriptor=descriptor, split=split, distance=distance, data=data
        )
    if "retrieval" in units:
        cubes["retrieval"] = retrieval_cube(
            units["retrieval"], units["retrieval_queries"], descriptor=descriptor, split=split,
            pool_size=pool_size, distance=distance, data=data,
        )  # fmt: skip
    for cube in cubes.values():
        cube.attrs.update(attrs or {})
    return cubes


def cube_paths(out: str | os.PathLike[str], tasks: Sequence[str] = TASKS17) -> dict[str, Path]:
    """The file of each task's cube: ``<out>.<task>.nc`` (a ``.nc`` ending of ``out`` dropped).

    >>> {k: str(v) for k, v in cube_paths("res/sift.nc", ["matching"]).items()}
    {'matching': 'res/sift.matching.nc'}
    """
    out = Path(out)
    stem = out.with_suffix("") if out.suffix == ".nc" else out
    return {task: stem.with_name(f"{stem.name}.{task}.nc") for task in tasks}


def save_task_cubes(
    cubes: Mapping[str, xr.Dataset], out: str | os.PathLike[str]
) -> dict[str, Path]:
    """Write each task's cube to :func:`cube_paths`: every file is written to a temporary name
    first and the files are renamed only once all are written, so a failure leaves the old
    files."""
    paths = cube_paths(out, list(cubes))
    with ExitStack() as stack:
        for task, cube in cubes.items():
            part = stack.enter_context(temporary_path(paths[task], suffix=".nc"))
            if task == "verification":
                save_pair_cube(cube, part)
            else:
                qc.save(cube, part)
    return paths
