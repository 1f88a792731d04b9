"""The data of a study: its cubes, by label, and what the report computes from them.

:func:`load_cubes` turns the ``data`` of a :class:`~metricalc.report.study.Study` into QueryCubes
(one per label; a single cube has the label ``""``). Data sources are looked up in
:data:`DATA_LOADERS` (cube files, a dataset evaluated now, the tags of experiment runs); a later
part adds its own kind with :func:`register_data_loader`.

:func:`system_name` names a descriptor of a labelled cube ``"<descriptor> (<label>)"``, the naming
of :func:`metricalc.stats.compare` for a mapping of cubes; :func:`summary_metrics` and
:func:`combined` put the per-label results side by side over those system names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from metricalc import cube as cubes
from metricalc.errors import InvalidInputError
from metricalc.report.study import DataSpec

if TYPE_CHECKING:
    from metricalc.keypoints.sequences import Sequence

__all__ = [
    "CACHE_FOLDER",
    "DATA_LOADERS",
    "combined",
    "load_cubes",
    "register_data_loader",
    "summary_metrics",
    "system_name",
]

DataLoader = Callable[[DataSpec, Path, bool], dict[str, xr.Dataset]]
"""``loader(spec, out, progress) -> {label: QueryCube}``."""

CACHE_FOLDER = "cache"
"""The folder of cached cubes below a study's data folder (``reports/<study>/cache/``)."""


def system_name(descriptor: str, label: str) -> str:
    """``descriptor`` for the unlabelled cube, ``"<descriptor> (<label>)"`` otherwise.

    Examples
    --------
    >>> system_name("sift", ""), system_name("sift", "native")
    ('sift', 'sift (native)')
    """
    return f"{descriptor} ({label})" if label else descriptor


def _load_cube_files(spec: DataSpec, out: Path, progress: bool) -> dict[str, xr.Dataset]:
    return {label: cubes.open_cube(path) for label, path in spec.cubes.items()}


def _dataset_sequences(spec: DataSpec, out: Path, progress: bool) -> tuple[list[Sequence], Path]:
    """The sequences of a ``dataset`` study (the built-in benchmark, made in ``<out>/benchmark``
    unless ``root`` names its folder, or a sequences folder) and the folder they are read from."""
    from metricalc.datasets.sequences import make_synthetic_dataset
    from metricalc.keypoints.sequences import load_sequences

    if spec.dataset == "synthetic":
        root = spec.root or out / "benchmark"
        sequences = make_synthetic_dataset(
            root, scenes=spec.scenes, seed=spec.seed, progress=progress
        )
        return sequences, root
    return load_sequences(spec.dataset, scenes=spec.scenes), Path(spec.dataset)


_PROTOCOL = ("tau", "border", "tie_policy", "bojanic", "seed")
"""The protocol settings of a ``dataset`` study, passed on to
:class:`~metricalc.keypoints.pipeline.EvaluationSettings` under the same names."""


def _load_dataset(spec: DataSpec, out: Path, progress: bool) -> dict[str, xr.Dataset]:
    """Each label's cube of the dataset, evaluated now or, when ``<out>/cache/<key>.nc`` (or a
    ``<out>/cube_<mode>.nc`` of ``metricalc demo``) holds the cube of the same inputs
    (:func:`metricalc.keypoints.pipeline.cached_evaluation`), read back from there."""
    from metricalc.keypoints.pipeline import EvaluationSettings, cached_evaluation
    from metricalc.keypoints.sequences import dataset_fingerprint

    sequences, root = _dataset_sequences(spec, out, progress)
    fingerprint = dataset_fingerprint(sequences)  # hashed once: cache keys and cubes
    demo_cubes = sorted(out.glob("cube_*.nc"))  # `metricalc demo` in the same folder
    protocol = {name: getattr(spec, name) for name in _PROTOCOL}  # the same for every label
    result = {}
    for label, mode in spec.keypoints.items():
        settings = EvaluationSettings(
            tuple(spec.descriptors),
            mode,
            image_retrieval=False,  # in the key, as in the demo's: its cube is this entry
            **protocol,
        )
        result[label], _ = cached_evaluation(
            sequences,
            settings,
            out / CACHE_FOLDER,
            dataset=fingerprint,
            dataset_path=str(root),
            elsewhere=demo_cubes,
            progress=progress,
        )
    return result


def _load_experiments(spec: DataSpec, out: Path, progress: bool) -> dict[str, xr.Dataset]:
    """The QueryCubes of tagged runs (``<outputs>/results/<benchmark>/<tag>/results.h5``, one
    descriptor per run, named by its tag), combined into one cube (:func:`metricalc.cube.combine`:
    the runs must share their protocol; their queries are kept apart, so pair by image pair)."""
    from metricalc.experiment import DEFAULT_OUTPUTS
    from metricalc.experiment.rundir import RunDir

    outputs = spec.outputs if spec.outputs is not None else DEFAULT_OUTPUTS
    runs = []
    for tag in spec.experiments:
        results = RunDir(outputs, spec.benchmark, tag).results
        if not results.is_file():
            raise InvalidInputError(
                f"data.experiment: no results of tag {tag!r} ({results} does not exist); run "
                f"`metricalc run {spec.benchmark} --tag {tag}` first, or set data.outputs"
            )
        runs.append(cubes.open_cube(results))
    return {"": runs[0] if len(runs) == 1 else cubes.combine(runs)}


DATA_LOADERS: dict[str, DataLoader] = {
    "cube": _load_cube_files,
    "dataset": _load_dataset,
    "experiment": _load_experiments,
}
"""Data loaders by :attr:`DataSpec.kind`."""


def register_data_loader(kind: str, loader: DataLoader) -> None:
    """Make ``loader(spec, out, progress) -> {label: cube}`` load the study data of ``kind``."""
    if not callable(loader):
        raise InvalidInputError(f"register_data_loader: loader must be callable; got {loader!r}")
    DATA_LOADERS[kind] = loader


def load_cubes(spec: DataSpec, *, out: Path, progress: bool = False) -> dict[str, xr.Dataset]:
    """The cubes of a study's data, by label (``{"": cube}`` for one cube)."""
    loader = DATA_LOADERS.get(spec.kind)
    if loader is None:
        raise InvalidInputError(
            f"data: no loader for {spec.kind!r}; known: {', '.join(DATA_LOADERS)}"
        )
    loaded = loader(spec, Path(out), progress)
    for label, cube in loaded.items():
        if cube.sizes.get("descriptor", 0) == 0:
            where = f" {label!r}" if label else ""
            raise InvalidInputError(f"data: the cube{where} has no descriptors")
    return loaded


def _renamed(ds: xr.Dataset | xr.DataArray, label: str) -> Any:
    names = [system_name(str(d), label) for d in ds["descriptor"].values.tolist()]
    return ds.assign_coords(descriptor=names)


def combined(parts: Mapping[str, xr.Dataset | xr.DataArray], *, pad: str = "") -> Any:
    """Per-label results side by side over system names (:func:`system_name`).

    ``pad`` names a dim whose length may differ between labels (curve thresholds); shorter
    parts are padded by repeating their last point. Attrs come from the first part, and the
    distinct values of a text attr that differs between parts are joined, each once
    (``"locked:sift, native"``; a value that itself holds ``", "`` is not repeated).
    """
    items = [_renamed(part, label) for label, part in parts.items()]
    if pad and items:
        length = max(item.sizes.get(pad, 0) for item in items)
        items = [
            item.pad({pad: (0, length - item.sizes[pad])}, mode="edge")
            if 0 < item.sizes.get(pad, 0) < length
            else item
            for item in items
        ]
    result = xr.concat(items, dim="descriptor", join="outer", combine_attrs="drop")
    attrs: dict[Any, Any] = {}
    seen: dict[Any, list[str]] = {}  # the distinct values joined, each once
    for part in parts.values():
        for key, value in part.attrs.items():
            if key not in attrs:
                attrs[key], seen[key] = value, [str(value)]
            elif isinstance(attrs[key], str) and str(value) not in seen[key]:
                seen[key].append(str(value))
                attrs[key] = ", ".join(seen[key])
    result.attrs = attrs
    return result


def summary_metrics(cube: xr.Dataset) -> xr.Dataset:
    """The metric set of a cube (:func:`metricalc.metric_set`), plus ``image_retrieval_map``
    (mean ``image_ap`` over the queries that have one) for a patch-retrieval cube (contract A).

    On a patch-retrieval cube the mAP columns of the metric set are the patch retrieval mAP
    (all queries, viewpoint and illumination sequences); its keypoint-only metrics are NaN, and
    the table leaves them out.
    """
    from metricalc.metrics import metric_set

    metrics = metric_set(cube)
    if "image_ap" in cube.data_vars:
        image_ap = cube["image_ap"].where(cube["image_ap"] >= 0)
        mean = image_ap.sum("query") / image_ap.notnull().sum("query").where(lambda n: n > 0)
        if "status" in cube.data_vars:
            mean = mean.where(cube["status"] != "error")
        metrics["image_retrieval_map"] = mean.drop_vars(
            [c for c in mean.coords if c != "descriptor"]
        ).astype(np.float64)
    return metrics
