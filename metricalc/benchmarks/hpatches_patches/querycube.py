r"""Patch-retrieval results as a QueryCube (one query per benchmark query line).

Each results folder is one descriptor (its folder name). Every query line of every evaluated
``.results`` file becomes one cube query:

========================  ===============================================================
``scene``                 the query's sequence (``i_ajuntament``)
``split``                 from the scene prefix (``i_`` illumination, ``v_`` viewpoint)
``pair``                  ``""`` (no image pair)
``keypoint_set``          the benchmark file stem (``train_easy_40s_00``)
``query_keypoint``        the query's 0-based index in that file
``ap``                    patch retrieval AP (ranks 2..51, the folder evaluation's AP method)
``image_ap``              image retrieval AP (an extra float64 variable over the same dims)
``recip_rank``, ``P_5``,  trec_eval's measures of patch retrieval (R = the cluster's other
...                       patches, each listed patch counted once;
                          :func:`~metricalc.benchmarks.hpatches_patches.evaluate.ir_measures`),
                          float64
``n_relevant``            1; ``better`` and ``ties`` are -1 (the AP is known, ranks are not)
========================  ===============================================================

attrs: the protocol attrs of :data:`metricalc.cube.DEFAULT_ATTRS` with ``ap_method`` (``"vlfeat"``
by default) and ``dataset`` = the benchmarks folder's name, plus
``benchmark = "hpatches-retrieval"``. A folder with broken files keeps the queries of its good
files and gets ``status = "error"`` with the messages (so ``metricalc compare`` leaves it out
rather than compare it on fewer files); a folder with no good file is an error record.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc import cube as qc
from metricalc.benchmarks.hpatches_patches.evaluate import IR_MEASURES
from metricalc.benchmarks.hpatches_patches.folder import (
    FolderEvaluation,
    evaluate_folder,
    folder_name,
)
from metricalc.core.ranking import AP_METHODS
from metricalc.errors import InvalidInputError
from metricalc.fileio import json_safe
from metricalc.validation import Choice, validate_params

__all__ = ["BENCHMARK", "RetrievalEvaluation", "evaluate_folders", "folder_cube", "ir_names"]

BENCHMARK = "hpatches-retrieval"
"""The ``benchmark`` attr of patch-retrieval cubes."""


def _attrs(dataset: str, ap_method: str) -> dict[str, object]:
    return {**qc.DEFAULT_ATTRS, "ap_method": ap_method, "dataset": dataset, "benchmark": BENCHMARK}


def folder_cube(
    evaluation: FolderEvaluation, *, dataset: str, ap_method: str = "vlfeat"
) -> xr.Dataset:
    """The QueryCube of one evaluated results folder (module docstring).

    Parameters
    ----------
    evaluation : FolderEvaluation
        From :func:`~metricalc.benchmarks.hpatches_patches.folder.evaluate_folder` (its
        ``descriptor`` names the
        cube's descriptor).
    dataset : str
        The ``dataset`` attr: the benchmarks folder's name.
    ap_method : str
        The AP method the folder was evaluated with (the ``ap_method`` attr).

    Returns
    -------
    xarray.Dataset
        A valid QueryCube with one descriptor and the extra variable ``image_ap``.
    """
    attrs = _attrs(dataset, ap_method)
    problems = "; ".join(
        message if path.name in message else f"{path.name}: {message}"
        for path, message in evaluation.errors
    )
    if not evaluation.queries:
        return qc.error_record(evaluation.descriptor, problems or "no .results file", attrs=attrs)
    parts = [evaluation.queries[stem] for stem in sorted(evaluation.queries)]
    stems = sorted(evaluation.queries)
    scene = np.concatenate([part["sequence"].values.astype(str) for part in parts])
    n = len(scene)
    coords = {
        "scene": scene,
        "pair": np.full(n, "", dtype="<U1"),
        "keypoint_set": np.concatenate(
            [np.full(part.sizes["query"], stem) for stem, part in zip(stems, parts, strict=True)]
        ),
        "query_keypoint": np.concatenate([part["query"].values for part in parts]),
    }
    data = {
        "ap": np.concatenate([part.patch_retrieval_ap.values for part in parts])[None],
        "n_relevant": np.ones((1, n), dtype=np.int8),
        "better": np.full((1, n), -1),
        "ties": np.full((1, n), -1),
    }
    status = {"status": ["error" if problems else "ok"], "error": [problems]}
    cube = qc.new_cube([evaluation.descriptor], coords, data, attrs=attrs, per_descriptor=status)
    image_ap = np.concatenate([part.image_retrieval_ap.values for part in parts])
    cube["image_ap"] = (("descriptor", "query"), image_ap[None].astype(np.float64))
    for name in ir_names():  # the trec_eval measures of patch retrieval
        values = np.concatenate([part[name].values for part in parts])
        cube[name] = (("descriptor", "query"), values[None].astype(np.float64))
    return qc.validate(cube)


def ir_names() -> list[str]:
    """The printed names of :data:`~metricalc.benchmarks.hpatches_patches.evaluate.IR_MEASURES`
    (``recip_rank``,
    ``P_1``, ...): the trec_eval variables of a patch-retrieval cube."""
    from metricalc.retrieval import parse_measures

    return [name for r in parse_measures(IR_MEASURES) for name in r.names()]


@dataclass(frozen=True)
class RetrievalEvaluation:
    """Several results folders evaluated: the cube and, per folder, the tables and errors.

    Attributes
    ----------
    cube : xarray.Dataset
        Every descriptor over the union of the queries (:func:`metricalc.cube.combine`): -1 / NaN
        where a folder lacks a file that another has.
    folders : list of FolderEvaluation
        One per results folder, in the order given.
    """

    cube: xr.Dataset
    folders: list[FolderEvaluation]

    @property
    def files(self) -> pd.DataFrame:
        """One row per evaluated file of every folder (column ``descriptor`` first)."""
        return pd.concat([f.files for f in self.folders], ignore_index=True)

    def groups(self) -> pd.DataFrame:
        """Per folder, the mean per-file mAPs per split, difficulty and size."""
        return pd.concat([f.groups() for f in self.folders], ignore_index=True)

    @property
    def errors(self) -> list[tuple[str, Path, str]]:
        """(descriptor, results file, message) of every file that could not be evaluated."""
        return [(f.descriptor, path, message) for f in self.folders for path, message in f.errors]

    def to_dict(self) -> dict[str, Any]:
        """``files``, ``groups`` (lists of row objects) and ``errors``, for JSON output
        (:func:`metricalc.fileio.json_safe`: NumPy values as Python, non-finite values as None)."""
        table: dict[str, Any] = json_safe({
            "files": self.files.to_dict(orient="records"),
            "groups": self.groups().to_dict(orient="records"),
            "errors": [
                {"descriptor": d, "file": str(path), "error": m} for d, path, m in self.errors
            ],
        })
        return table


@validate_params(ap_method=Choice(AP_METHODS))
def evaluate_folders(
    benchmarks: str | os.PathLike[str],
    results: Sequence[str | os.PathLike[str]],
    *,
    ap_method: str = "vlfeat",
) -> RetrievalEvaluation:
    """Evaluate several results folders (one per descriptor) into one QueryCube.

    Parameters
    ----------
    benchmarks : path
        Folder of ``.benchmark`` and ``.labels`` files; its name is the cube's ``dataset``.
    results : sequence of path
        Results folders, one per descriptor, each named after its descriptor.
    ap_method : str
        As :func:`~metricalc.benchmarks.hpatches_patches.evaluate_results`.

    Returns
    -------
    RetrievalEvaluation
        The cube over descriptors and, per folder, the per-file table, groups and errors.

    Raises
    ------
    InvalidInputError
        A missing folder, a folder without ``.results`` files, or two folders with the same name.
    """
    if isinstance(results, str | os.PathLike):
        results = [results]
    folders = [Path(path) for path in results]
    if not folders:
        raise InvalidInputError("results: expected at least one results folder, got none")
    seen: dict[str, Path] = {}
    for folder in folders:
        name = folder_name(folder)
        if name in seen:
            raise InvalidInputError(
                f"results folders {seen[name]} and {folder} have the same name {name!r}; the "
                "folder name is the descriptor, so each needs its own"
            )
        seen[name] = folder
    evaluations = [evaluate_folder(benchmarks, folder, ap_method=ap_method) for folder in folders]
    dataset = folder_name(benchmarks)
    cubes = [folder_cube(e, dataset=dataset, ap_method=ap_method) for e in evaluations]
    return RetrievalEvaluation(qc.combine(cubes), evaluations)
