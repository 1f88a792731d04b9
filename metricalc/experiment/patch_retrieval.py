"""The ``patches`` benchmark of ``metricalc eval``: HPatches patch and image retrieval (seed 001).

Data: a patch dataset (the built-in synthetic one, generated once under
``<outputs>/data/patches/``, or ``data.patches`` in the HPatches release layout) and benchmark
files: those of ``data.benchmarks`` (e.g. the ECCV 2016 ``.benchmark`` / ``.labels``), or drawn
from the dataset with :func:`metricalc.patches.make_benchmark` (every split x difficulty x
number of sequences x seed). The files used are copied or drawn into ``benchmarks/`` of the run
folder, so the evaluation reads nothing outside it.

Export (through the scheduler): (1) the descriptors of every patch-image some benchmark pool
names (:func:`metricalc.patches.describe.describe_patches`), one task and one part file per
patch-image; (2) the top-51 ``.results`` of every benchmark file
(:func:`metricalc.patches.compute.compute_results`), one task per file, into
``retrieval/<tag>/``; (3) the parts merged into ``predictions.h5``, the mark of a finished
export. Evaluation (from the cached files only): :func:`metricalc.patches.evaluate_folders`, the
QueryCube of contract A (one descriptor named after the tag), per-file and per-group mAPs, the
metric set, per-sequence metrics and figures.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from dask import delayed

from metricalc.core.ranking import AP_METHODS
from metricalc.datasets.patches import MAX_PATCHES, make_patch_dataset
from metricalc.datasets.sequences import DEFAULT_SIZE, PHOTOGRAPHS, QUICK_SCENES, resolve_scenes
from metricalc.errors import InvalidInputError
from metricalc.experiment.benchmark import Context, Evaluation, Values, scalar_summary
from metricalc.experiment.config import Config
from metricalc.experiment.patch_predictions import (
    describe_seconds,
    merge_parts,
    open_descriptors,
    read_part,
    write_part,
)
from metricalc.experiment.plots import plot_retrieval_map
from metricalc.experiment.rundir import RunDir, file_lock
from metricalc.experiment.scheduler import batches
from metricalc.metrics import metric_set, scene_metrics
from metricalc.patches.benchmark import (
    DIFFICULTIES,
    QUERIES_PER_SEQUENCE,
    benchmark_name,
    make_benchmark,
)
from metricalc.patches.compute import DISTANCES, DescriptorPool, compute_results, write_results
from metricalc.patches.dataset import SPLITS, PatchDataset, read_patch_dataset
from metricalc.patches.describe import METHODS, describe_patches
from metricalc.patches.files import read_benchmark, read_labels, validate, write_atomic
from metricalc.patches.folder import GROUPS, NAME, FolderEvaluation
from metricalc.patches.querycube import evaluate_folders
from metricalc.plotting.figures import plot_scene_map
from metricalc.progress import progress_bar
from metricalc.version import __version__

__all__ = [
    "DEFAULT_CONF",
    "METRIC_SET_KEPT",
    "QUICK_FILES",
    "QUICK_MAX_PATCHES",
    "QUICK_PER_SPLIT",
    "Patches",
    "describe_patch_image",
    "file_table",
    "load_dataset",
    "prepare_benchmarks",
]

DEFAULT_CONF: dict[str, Any] = {
    "data": {
        "patches": None,
        "quick": False,
        "scenes": None,
        "seed": 0,
        "size": DEFAULT_SIZE,
        "max_patches": MAX_PATCHES,
        "benchmarks": None,
        "files": None,
        "splits": list(SPLITS),
        "difficulties": list(DIFFICULTIES),
        "n_sequences": None,
        "benchmark_seeds": [0],
        "queries_per_sequence": QUERIES_PER_SEQUENCE,
    },
    "model": {"descriptor": "sift", "distance": "l2"},
    "eval": {"ap_method": "vlfeat"},
}
"""Defaults of every key (docs/experiments.md describes each)."""

QUICK_MAX_PATCHES = 200
"""``data.quick`` on the synthetic dataset: at most this many patches per sequence."""

QUICK_PER_SPLIT = 2
"""``data.quick`` on a patch dataset folder: the first sequences of each split."""

QUICK_FILES = 2
"""``data.quick`` with ``data.benchmarks``: the files with the smallest pools."""

METRIC_SET_KEPT = (
    "true_map_micro",
    "true_map_macro_by_scene",
    "viewpoint_map",
    "illumination_map",
    "viewpoint_map_micro",
    "illumination_map_micro",
    "total_queries_processed",
    "total_queries_excluded",
    "r0_rate",
    "processing_time_ms",
    "status",
    "error",
)
"""The variables of :func:`metricalc.metric_set` kept in a patch run's metric set (the others
need rank statistics or keypoint tasks, which a patch-retrieval cube does not have)."""

BENCHMARKS_FOLDER = "benchmarks"
RETRIEVAL_FOLDER = "retrieval"
_STAGED = ".results"  # under predictions.parts/: a dot, so never a sequence name


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def _subset(dataset: PatchDataset, sequences: Sequence[str]) -> PatchDataset:
    """The dataset restricted to ``sequences`` (each must be in it)."""
    missing = [s for s in sequences if s not in dataset.counts]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise InvalidInputError(
            f"patch dataset {dataset.root} has no sequence(s) {shown} (it has "
            f"{len(dataset.counts)}: {', '.join(dataset.sequences[:6])}"
            f"{', ...' if len(dataset.counts) > 6 else ''})"
        )
    keep = sorted(set(sequences))
    return PatchDataset(
        dataset.root,
        {s: dataset.counts[s] for s in keep},
        {s: dataset.images[s] for s in keep},
        {s: dataset.splits[s] for s in keep if s in dataset.splits},
    )


def _max_patches(data: Mapping[str, Any]) -> int:
    cap = QUICK_MAX_PATCHES if data["quick"] else data["max_patches"]
    return min(int(data["max_patches"]), cap)


def load_dataset(
    data: Mapping[str, Any], outputs: Path, *, sequences: Sequence[str] | None = None
) -> PatchDataset:
    """The patch dataset of the ``data`` configuration, restricted to the sequences it selects.

    ``sequences`` (the sequences the benchmark files of ``data.benchmarks`` name) wins over
    ``data.scenes`` and ``data.quick``. The synthetic dataset is generated once per seed, size
    and patch bound under ``<outputs>/data/patches/`` while holding a file lock, so concurrent
    runs share it.
    """
    wanted = sequences if sequences is not None else data["scenes"]
    if data["patches"] is None:
        if wanted is None and data["quick"]:
            wanted = QUICK_SCENES
        if sequences is not None:
            unknown = [s for s in sequences if not (s[:2] in ("i_", "v_") and s[2:] in PHOTOGRAPHS)]
            if unknown:
                shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
                raise InvalidInputError(
                    f"the benchmark files of data.benchmarks name sequences the synthetic patch "
                    f"dataset does not have ({shown}); give their patch dataset with "
                    "data.patches=DIR (e.g. the HPatches release, hpatches-release)"
                )
        max_patches = _max_patches(data)
        root = (
            outputs / "data" / "patches" / f"seed{data['seed']}_size{data['size']}_max{max_patches}"
        )
        lock = root.parent / f".{root.name}.lock"
        with file_lock(lock, f"synthetic patch dataset {root}", wait=True):
            dataset = make_patch_dataset(
                root, scenes=wanted, seed=data["seed"], size=data["size"], max_patches=max_patches
            )
        return _subset(dataset, resolve_scenes(wanted))
    dataset = read_patch_dataset(data["patches"])
    if wanted is not None:
        return _subset(dataset, list(wanted))
    if data["quick"]:
        kept = [s for split in SPLITS for s in dataset.split_sequences(split)[:QUICK_PER_SPLIT]]
        return _subset(dataset, kept or list(dataset.sequences[: 2 * QUICK_PER_SPLIT]))
    return dataset


def _given_stems(data: Mapping[str, Any]) -> tuple[Path, list[str]]:
    """The folder of ``data.benchmarks`` and the stems of the files to use."""
    folder = Path(data["benchmarks"])
    if not folder.is_dir():
        raise InvalidInputError(f"data.benchmarks: {folder} is not a folder of .benchmark files")
    if data["files"] is not None:
        stems = list(dict.fromkeys(data["files"]))
        for stem in stems:
            for suffix in (".benchmark", ".labels"):
                if not (folder / f"{stem}{suffix}").is_file():
                    raise InvalidInputError(
                        f"data.files names {stem!r} but {folder / (stem + suffix)} does not exist"
                    )
        return folder, stems
    stems = sorted(
        p.stem for p in folder.glob("*.benchmark") if (folder / f"{p.stem}.labels").is_file()
    )
    if not stems:
        raise InvalidInputError(
            f"data.benchmarks: {folder} holds no .benchmark file with its .labels"
        )
    if data["quick"]:
        sizes = {stem: len(read_benchmark(folder / f"{stem}.benchmark").pool) for stem in stems}
        stems = sorted(sorted(stems, key=lambda s: (sizes[s], s))[:QUICK_FILES])
    return folder, stems


def _draw(data: Mapping[str, Any], dataset: PatchDataset, out: Path) -> list[str]:
    """Draw every split x difficulty x size x seed benchmark of ``data`` into ``out``."""
    stems = []
    seeds = data["benchmark_seeds"]
    seeds = [seeds] if isinstance(seeds, int) else seeds
    for split in data["splits"]:
        available = len(dataset.split_sequences(split))
        if not available:
            raise InvalidInputError(
                f"the patch dataset {dataset.root} (as selected) has no {split} sequence; "
                "set data.splits (or list the split's sequences in its splits.json)"
            )
        sizes = data["n_sequences"]
        sizes = [available] if sizes is None else ([sizes] if isinstance(sizes, int) else sizes)
        for n in sizes:
            if n > available:
                raise InvalidInputError(
                    f"data.n_sequences = {n}: the patch dataset {dataset.root} (as selected) has "
                    f"{available} {split} sequence(s); set data.n_sequences (null: all) or "
                    "data.splits"
                )
            for difficulty in data["difficulties"]:
                for seed in seeds:
                    make_benchmark(
                        dataset,
                        out,
                        split=split,
                        n_sequences=n,
                        seed=seed,
                        difficulty=difficulty,
                        queries_per_sequence=data["queries_per_sequence"],
                    )
                    stems.append(benchmark_name(split, difficulty, n, seed))
    return sorted(dict.fromkeys(stems))


def prepare_benchmarks(
    data: Mapping[str, Any], outputs: Path, out: Path
) -> tuple[PatchDataset, list[str]]:
    """Write the benchmark files of a run into ``out`` (a fresh folder) and return the patch
    dataset and the file stems.

    With ``data.benchmarks`` the selected ``.benchmark`` / ``.labels`` pairs are checked
    (:func:`metricalc.patches.validate`) and copied; otherwise they are drawn from the dataset
    with :func:`metricalc.patches.make_benchmark`. Either way they are deterministic in the
    data configuration, so a resumed export writes the same files.
    """
    shutil.rmtree(out, ignore_errors=True)
    if data["benchmarks"] is None:
        dataset = load_dataset(data, outputs)
        return dataset, _draw(data, dataset, out)
    folder, stems = _given_stems(data)
    sequences: set[str] = set()
    for stem in stems:
        benchmark = read_benchmark(folder / f"{stem}.benchmark")
        validate(benchmark, read_labels(folder / f"{stem}.labels"))
        sequences.update(name.split(".")[0] for name in benchmark.pool)
        for suffix in (".benchmark", ".labels"):
            write_atomic(out / f"{stem}{suffix}", (folder / f"{stem}{suffix}").read_bytes())
    return load_dataset(data, outputs, sequences=sorted(sequences)), stems


def dataset_label(data: Mapping[str, Any]) -> str:
    """The cube's ``dataset`` attr: the benchmarks folder's name (contract A), or where drawn
    benchmarks come from.

    Examples
    --------
    >>> dataset_label({**DEFAULT_CONF["data"], "benchmarks": "/data/hpatches-eccv2016-retrieval"})
    'hpatches-eccv2016-retrieval'
    >>> dataset_label(DEFAULT_CONF["data"])
    'metricalc synthetic patches (seed 0, size 640, max_patches 1000), drawn benchmarks'
    """
    if data["benchmarks"] is not None:
        return Path(data["benchmarks"]).name
    if data["patches"] is not None:
        return f"{Path(data['patches']).name}, drawn benchmarks"
    return (
        f"metricalc synthetic patches (seed {data['seed']}, size {data['size']}, "
        f"max_patches {_max_patches(data)}), drawn benchmarks"
    )


# --------------------------------------------------------------------------------------------
# tasks (module-level functions: they run on threads, processes or cluster workers)
# --------------------------------------------------------------------------------------------


def describe_patch_image(
    root: Path, sequence: str, image: str, count: int, method: str
) -> tuple[np.ndarray, float]:
    """The descriptors of patch-image ``sequence.image`` of the dataset in ``root`` (which has
    ``count`` patches per image) and the seconds it took."""
    started = time.perf_counter()
    one = PatchDataset(Path(root), {sequence: count}, {sequence: (image,)}, {})
    descriptors = describe_patches(one.patches(sequence, image), method=method)
    return descriptors, time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# per-file tables
# --------------------------------------------------------------------------------------------


def _mean(values: np.ndarray) -> float:
    """The mean from an exactly rounded sum (:func:`math.fsum`): the same value whatever the
    order or memory layout of ``values`` (NaN for none)."""
    return math.fsum(values) / len(values) if len(values) else math.nan


def file_table(cube: xr.Dataset) -> xr.Dataset:
    r"""Per benchmark file (the cube's ``keypoint_set``) and descriptor: queries and the patch
    and image retrieval mAP, :math:`\mathrm{mAP}_f = \frac{1}{Q_f} \sum_{q \in f} AP_q`.

    Returns
    -------
    xarray.Dataset
        Over ``(descriptor, file)``: ``patch_retrieval_map``, ``image_retrieval_map``
        (float64); over ``file``: ``n_queries`` (int64) and the coordinates ``split``,
        ``difficulty``, ``size`` parsed from release-style names (``""`` otherwise).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> cube = xr.Dataset(
    ...     {"ap": (("descriptor", "query"), [[1.0, 0.5, 0.0]]),
    ...      "image_ap": (("descriptor", "query"), [[1.0, 1.0, 0.5]])},
    ...     coords={"descriptor": ["d"],
    ...             "keypoint_set": ("query", ["train_easy_2s_00", "train_easy_2s_00", "x"])})
    >>> t = file_table(cube)
    >>> t.patch_retrieval_map.values.tolist(), t.n_queries.values.tolist(), t.split.values.tolist()
    ([[0.75, 0.0]], [2, 1], ['train', ''])
    """
    stems = np.asarray(cube["keypoint_set"].values).astype(str)
    files = sorted(set(stems.tolist()))
    masks = [stems == stem for stem in files]
    out: dict[str, Any] = {}
    for name, source in (("patch_retrieval_map", "ap"), ("image_retrieval_map", "image_ap")):
        values = np.asarray(cube[source].transpose("descriptor", "query").values, np.float64)
        out[name] = (
            ("descriptor", "file"),
            np.array([[_mean(row[mask]) for mask in masks] for row in values]),
        )
    out["n_queries"] = ("file", np.array([int(mask.sum()) for mask in masks], np.int64))
    parsed = [NAME.fullmatch(stem) for stem in files]
    coords: dict[str, Any] = {"descriptor": cube["descriptor"].values, "file": files}
    for group in GROUPS:
        coords[group] = ("file", [m.group(group) if m else "" for m in parsed])
    return xr.Dataset(out, coords=coords)


def _groups(files: xr.Dataset, descriptor: str) -> pd.DataFrame:
    """Mean per-file mAPs per split, difficulty and size of one descriptor
    (:meth:`metricalc.patches.folder.FolderEvaluation.groups`)."""
    one = files.sel(descriptor=descriptor)
    table = pd.DataFrame(
        {
            "descriptor": descriptor,
            "file": one["file"].values,
            **{g: [v or None for v in one[g].values.tolist()] for g in GROUPS},
            "n_queries": one["n_queries"].values,
            "patch_retrieval_map": one["patch_retrieval_map"].values,
            "image_retrieval_map": one["image_retrieval_map"].values,
        }
    )
    return FolderEvaluation(table, descriptor=descriptor).groups()


def _retrieval_metrics(cube: xr.Dataset, files: xr.Dataset) -> xr.Dataset:
    """The patch-specific variables of the metric set (docs/experiments.md)."""
    descriptors = [str(d) for d in cube["descriptor"].values]
    tables = [_groups(files, d) for d in descriptors]
    labels = tables[0]["group"].tolist()
    data: dict[str, Any] = {}
    for name in ("patch_retrieval_map", "image_retrieval_map"):
        per_file = files[name].transpose("descriptor", "file").values
        data[name] = ("descriptor", [_mean(row) for row in per_file])
        data[f"{name}_by_file"] = files[name].transpose("descriptor", "file")
        data[f"{name}_by_group"] = (
            ("descriptor", "group"),
            np.array([t[name].to_numpy(np.float64) for t in tables]).reshape(len(tables), -1),
        )
    image_ap = cube["image_ap"].transpose("descriptor", "query").values
    data["image_retrieval_map_micro"] = ("descriptor", [_mean(row) for row in image_ap])
    data["n_files"] = ("descriptor", np.full(len(descriptors), files.sizes["file"], np.int64))
    data["n_files_by_group"] = (
        ("descriptor", "group"),
        np.array([t["files"].to_numpy(np.int64) for t in tables]).reshape(len(tables), -1),
    )
    return xr.Dataset(
        data, coords={"descriptor": descriptors, "file": files["file"].values, "group": labels}
    )


# --------------------------------------------------------------------------------------------
# the benchmark
# --------------------------------------------------------------------------------------------


def _retrieval_folder(rundir: RunDir, tag: str) -> Path:
    return rundir.path / RETRIEVAL_FOLDER / tag


class Patches:
    """The ``patches`` benchmark (module docstring)."""

    name = "patches"
    default_conf = DEFAULT_CONF
    units_group = "files"

    # -- configuration ----------------------------------------------------------------------

    def validate(self, conf: Config) -> None:
        """Check every value of a merged configuration (errors name key, value and origin)."""
        v = Values(conf)
        v.text("data.patches", optional=True)
        v.boolean("data.quick")
        v.texts("data.scenes", optional=True)
        v.integer("data.seed", low=0)
        v.integer("data.size", low=32)
        v.integer("data.max_patches", low=1)
        given = v.text("data.benchmarks", optional=True)
        v.texts("data.files", optional=True)
        if given is None and conf.get("data.files") is not None:
            raise conf.fail("data.files", "null unless data.benchmarks names a folder")
        if given is not None and conf.get("data.scenes") is not None:
            raise conf.fail(
                "data.scenes", "null with data.benchmarks (its files name the sequences)"
            )
        for key, choices in (("data.splits", SPLITS), ("data.difficulties", DIFFICULTIES)):
            values = v.texts(key) or []
            if any(value not in choices for value in values) or len(set(values)) < len(values):
                raise conf.fail(key, f"a list of distinct values out of {', '.join(choices)}")
        if conf.get("data.n_sequences") is not None:
            v.integers("data.n_sequences", low=1)
        v.integers("data.benchmark_seeds", low=0)
        v.integer("data.queries_per_sequence", low=1)
        v.choice("model.descriptor", METHODS)
        v.choice("model.distance", DISTANCES)
        v.choice("eval.ap_method", AP_METHODS)

    # -- export -----------------------------------------------------------------------------

    def export(self, ctx: Context) -> None:
        """Describe the missing patch-images, rank every benchmark file, merge the parts."""
        rundir, scheduler = ctx.rundir, ctx.scheduler
        data, model = ctx.conf["data"], ctx.conf["model"]
        benchmarks = rundir.path / BENCHMARKS_FOLDER
        dataset, stems = prepare_benchmarks(data, ctx.outputs, benchmarks)
        pools = {stem: read_benchmark(benchmarks / f"{stem}.benchmark").pool for stem in stems}
        names = sorted({name for pool in pools.values() for name in pool})
        images = [tuple(name.split(".")) for name in names]
        for sequence, image in images:
            dataset.path(sequence, image)  # a clear error for a patch-image the data lack
        todo = [(s, i) for s, i in images if not rundir.part(s, i).is_file()]

        def described(name: str, value: tuple[np.ndarray, float]) -> None:
            sequence, image = name.split(".")
            write_part(rundir.part(sequence, image), *value)  # the marker of a finished unit
            advance()

        bar = progress_bar("describing patch-images", total=len(todo), enabled=ctx.progress)
        with bar as advance:
            for batch in batches(todo, max(4, 4 * scheduler.workers)):
                tasks = {
                    f"{s}.{i}": delayed(describe_patch_image)(
                        dataset.root,
                        s,
                        i,
                        dataset.counts[s],
                        model["descriptor"],
                        dask_key_name=scheduler.key("describe", s, i),
                    )
                    for s, i in batch
                }
                scheduler.run(tasks, described)
        self._rank(ctx, pools)
        parts = {(s, i): rundir.part(s, i) for s, i in images}
        attrs = {
            "benchmark": self.name,
            "tag": ctx.tag,
            "export_hash": ctx.export_hash,
            "metricalc_version": __version__,
            "descriptor": model["descriptor"],
            "distance": model["distance"],
        }
        merge_parts(parts, rundir.predictions, attrs)  # last: marks the export complete

    def _rank(self, ctx: Context, pools: Mapping[str, tuple[str, ...]]) -> None:
        """The ``.results`` of every benchmark file, staged under ``predictions.parts`` (kept
        by an interrupted export), then moved to ``retrieval/<tag>/``."""
        rundir, scheduler = ctx.rundir, ctx.scheduler
        staged = rundir.parts / _STAGED
        benchmarks = rundir.path / BENCHMARKS_FOLDER
        todo = [stem for stem in pools if not (staged / f"{stem}.results").is_file()]

        def ranked(stem: str, lines: list[list[str]]) -> None:
            write_results(staged / f"{stem}.results", pools[stem], lines)
            advance()

        bar = progress_bar("ranking benchmark files", total=len(todo), enabled=ctx.progress)
        with bar as advance:
            for batch in batches(todo, max(1, scheduler.workers)):
                tasks = {}
                for stem in batch:
                    pool = DescriptorPool.from_arrays(
                        pools[stem],
                        [read_part(rundir.part(*name.split(".")))[0] for name in pools[stem]],
                    )
                    tasks[stem] = delayed(compute_results)(
                        benchmarks / f"{stem}.benchmark",
                        pool,
                        distance=ctx.conf["model"]["distance"],
                        dask_key_name=scheduler.key("rank", stem),
                    )
                scheduler.run(tasks, ranked)
        staged.mkdir(parents=True, exist_ok=True)
        final = _retrieval_folder(rundir, ctx.tag)
        shutil.rmtree(final.parent, ignore_errors=True)
        final.parent.mkdir(parents=True)
        os.replace(staged, final)

    # -- evaluation -------------------------------------------------------------------------

    def evaluate(self, ctx: Context) -> Evaluation:
        """Evaluate the cached ``.results`` against the run's benchmark files."""
        conf, rundir = ctx.conf, ctx.rundir
        benchmarks = rundir.path / BENCHMARKS_FOLDER
        folder = _retrieval_folder(rundir, ctx.tag)
        for path in (benchmarks, folder):
            if not path.is_dir():
                raise InvalidInputError(
                    f"{path} is missing: the cached export is incomplete; rerun with --overwrite"
                )
        done = evaluate_folders(benchmarks, [folder], ap_method=conf["eval"]["ap_method"])
        if done.errors:
            shown = "; ".join(f"{path.name}: {message}" for _, path, message in done.errors)
            raise InvalidInputError(f"{folder}: files that cannot be evaluated: {shown}")
        with open_descriptors(rundir.predictions) as handle:
            seconds = describe_seconds(handle)
        cube = done.cube
        cube["processing_time_ms"] = ("descriptor", [1e3 * seconds])
        cube.attrs.update(
            dataset=dataset_label(conf["data"]),
            distance=conf["model"]["distance"],
            seed=int(conf["data"]["seed"]),
            tag=ctx.tag,
        )
        files = file_table(cube)
        metrics, scenes = self.metrics(cube, conf)
        groups = _groups(files, ctx.tag)
        one = files.sel(descriptor=ctx.tag)
        summaries = {
            **scalar_summary(metrics, ctx.tag),
            "files": {
                stem: {
                    "n_queries": int(one["n_queries"].sel(file=stem)),
                    "patch_retrieval_map": float(one["patch_retrieval_map"].sel(file=stem)),
                    "image_retrieval_map": float(one["image_retrieval_map"].sel(file=stem)),
                }
                for stem in one["file"].values.tolist()
            },
            "groups": {
                row["group"]: {
                    "files": int(row["files"]),
                    "patch_retrieval_map": float(row["patch_retrieval_map"]),
                    "image_retrieval_map": float(row["image_retrieval_map"]),
                }
                for row in groups.to_dict(orient="records")
            },
        }
        table = one.drop_vars("descriptor")
        table.attrs.update(tag=ctx.tag, ap_method=conf["eval"]["ap_method"])
        figures = {
            "map_per_file": plot_retrieval_map(
                one.to_dataframe().reset_index(),
                label="file",
                title=f"Retrieval mAP per benchmark file ({ctx.tag})",
            ),
            "map_per_group": plot_retrieval_map(
                groups, label="group", title=f"Retrieval mAP per group of files ({ctx.tag})"
            ),
            "scene_map": plot_scene_map(scenes),
        }
        figures["scene_map"].set_title(f"Patch retrieval mAP per sequence ({ctx.tag})")
        return Evaluation(cube, table, summaries, metrics, scenes, figures)

    def metrics(self, cube: xr.Dataset, conf: Mapping[str, Any]) -> tuple[xr.Dataset, xr.Dataset]:
        """The metric set and per-sequence metrics of a patch-retrieval cube.

        Metric set: the variables of :func:`metricalc.metric_set` in :data:`METRIC_SET_KEPT`
        (``true_map_micro`` is the patch retrieval mAP over all queries, ``viewpoint_map`` and
        ``illumination_map`` the mean over the ``v_`` / ``i_`` sequences of their mAP, the
        ``*_map_micro`` variants over their queries) plus ``patch_retrieval_map``,
        ``image_retrieval_map`` (means of the per-file mAPs, HPatches' figure),
        ``image_retrieval_map_micro``, ``n_files`` and, over the dims ``file`` / ``group``,
        ``*_by_file`` and ``*_by_group``. Scene metrics: :func:`metricalc.scene_metrics`
        (``true_map`` and ``query_count`` per sequence) plus ``image_retrieval_map``.
        """
        full = metric_set(cube)
        kept = full[[name for name in METRIC_SET_KEPT if name in full.data_vars]]
        metrics = kept.assign(_retrieval_metrics(cube, file_table(cube)).data_vars)
        scenes = scene_metrics(cube)[["true_map", "true_map_with_zeros", "query_count",
                                      "excluded_count"]]  # fmt: skip
        labels = np.asarray(cube["scene"].values).astype(str)
        image_ap = np.asarray(cube["image_ap"].transpose("descriptor", "query").values)
        scenes["image_retrieval_map"] = (
            ("descriptor", "scene"),
            np.array(
                [
                    [_mean(row[labels == scene]) for scene in scenes["scene"].values]
                    for row in image_ap
                ]
            ).reshape(scenes.sizes["descriptor"], scenes.sizes["scene"]),
        )
        return metrics, scenes
