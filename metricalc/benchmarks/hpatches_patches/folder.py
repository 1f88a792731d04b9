"""Evaluate a folder of ``.results`` files against their benchmarks, per file and per group.

A results folder holds ``<name>.results`` files named after the benchmark files of the HPatches
release (``<train|test>_<easy|hard>_<N>s_<seed>.benchmark``); each is evaluated against
``<benchmarks>/<name>.benchmark`` and ``<name>.labels``. A broken file is reported with its error
and skipped; the others are still evaluated. The folder's name is the descriptor's name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import xarray as xr

from metricalc.benchmarks.hpatches_patches.evaluate import evaluate_files
from metricalc.errors import InvalidInputError, MetricalcError

NAME = re.compile(r"(?P<split>train|test)_(?P<difficulty>easy|hard)_(?P<size>\d+s)_(?P<seed>\d+)")
"""Benchmark file names of the release: split, difficulty, number of sequences, seed."""

GROUPS = ("split", "difficulty", "size")


@dataclass
class FolderEvaluation:
    """Per-file results (one row per evaluated file) and the files that failed.

    Attributes
    ----------
    files : pandas.DataFrame
        One row per evaluated file: descriptor, file, split, difficulty, size, n_queries,
        patch_retrieval_map, image_retrieval_map.
    errors : list of (Path, str)
        The ``.results`` files that could not be evaluated and why.
    descriptor : str
        The results folder's name.
    queries : dict of str to xarray.Dataset
        Per evaluated file (its stem), the per-query Dataset of
        :func:`~metricalc.benchmarks.hpatches_patches.evaluate_results`.
    """

    files: pd.DataFrame
    errors: list[tuple[Path, str]] = field(default_factory=list)
    descriptor: str = ""
    queries: dict[str, xr.Dataset] = field(default_factory=dict)

    def groups(self) -> pd.DataFrame:
        """Mean of the per-file mAPs per group (split, difficulty, size), one row per group."""
        rows = []
        for column in GROUPS:
            known = self.files.dropna(subset=[column])
            for value, part in known.groupby(column):
                rows.append(
                    {
                        "descriptor": self.descriptor,
                        "group": f"{column}={value}",
                        "files": len(part),
                        "patch_retrieval_map": part["patch_retrieval_map"].mean(),
                        "image_retrieval_map": part["image_retrieval_map"].mean(),
                    }
                )
        return pd.DataFrame(rows, columns=["descriptor", "group", "files", "patch_retrieval_map",
                                           "image_retrieval_map"])  # fmt: skip


def folder_name(path: str | os.PathLike[str]) -> str:
    """The name of a folder as given: ``"."`` and ``"sift/"`` name the folder they are, and a
    symbolic link keeps its own name (not its target's).

    Examples
    --------
    >>> folder_name("results/sift/"), folder_name("results/sift/../raw")
    ('sift', 'raw')
    """
    return Path(os.path.abspath(path)).name


def evaluate_folder(
    benchmarks: str | os.PathLike[str],
    results: str | os.PathLike[str],
    *,
    ap_method: str = "vlfeat",
) -> FolderEvaluation:
    """Evaluate every ``*.results`` of ``results`` against its benchmark and labels.

    Parameters
    ----------
    benchmarks : path
        Folder with the ``.benchmark`` and ``.labels`` files.
    results : path
        Folder with one ``<name>.results`` per evaluated benchmark.
    ap_method : str
        As :func:`~metricalc.benchmarks.hpatches_patches.evaluate_results` (``"vlfeat"`` by
        default).

    Returns
    -------
    FolderEvaluation
        ``files``: columns descriptor, file, split, difficulty, size, n_queries,
        patch_retrieval_map, image_retrieval_map; ``errors``: (file, message) of the files that
        could not be evaluated; ``queries``: the per-query results of each evaluated file.
    """
    benchmarks, results = Path(benchmarks), Path(results)
    for folder, what in ((benchmarks, "--benchmarks"), (results, "--results")):
        if not folder.is_dir():
            raise InvalidInputError(f"{what} {folder} is not a folder")
    paths = sorted(results.glob("*.results"))
    if not paths:
        raise InvalidInputError(f"{results} holds no .results files")
    descriptor = folder_name(results)
    rows, errors, queries = [], [], {}
    for path in paths:
        stem = path.stem
        try:
            ds = evaluate_files(
                benchmarks / f"{stem}.benchmark",
                benchmarks / f"{stem}.labels",
                path,
                ap_method=ap_method,
            )
        except MetricalcError as error:
            errors.append((path, str(error)))
            continue
        queries[stem] = ds
        match = NAME.fullmatch(stem)
        groups = match.groupdict() if match else dict.fromkeys(GROUPS)
        rows.append(
            {
                "descriptor": descriptor,
                "file": stem,
                "split": groups["split"],
                "difficulty": groups["difficulty"],
                "size": groups["size"],
                "n_queries": int(ds.n_queries),
                "patch_retrieval_map": float(ds.patch_retrieval_map),
                "image_retrieval_map": float(ds.image_retrieval_map),
            }
        )
    columns = ["descriptor", "file", *GROUPS, "n_queries", "patch_retrieval_map",
               "image_retrieval_map"]  # fmt: skip
    return FolderEvaluation(pd.DataFrame(rows, columns=columns), errors, descriptor, queries)
