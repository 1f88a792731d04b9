"""The ``patches`` benchmark of ``metricalc run``: HPatches patch and image retrieval.

Data: a patch dataset (the built-in synthetic one, generated once under
``<outputs>/data/patches/``, or ``data.patches`` in the HPatches release layout) and benchmark
files: those of ``data.benchmarks`` (e.g. the ECCV 2016 ``.benchmark`` / ``.labels``), or drawn
from the dataset with :func:`metricalc.benchmarks.hpatches_patches.make_benchmark` (every split x
difficulty x
number of sequences x seed). The files used are copied or drawn into ``benchmarks/`` of the run
folder, so the evaluation reads nothing outside it.

Export (through the scheduler): (1) the descriptors of every patch-image some benchmark pool
names (:func:`metricalc.benchmarks.hpatches_patches.describe.describe_patches`), one task and one
part file per
patch-image; (2) the top-51 ``.results`` of every benchmark file
(:func:`metricalc.benchmarks.hpatches_patches.compute.compute_results`), one task per file, into
``retrieval/<tag>/``; (3) the parts merged into ``predictions.h5``, the mark of a finished
export. Evaluation (from the cached files only):
:func:`metricalc.benchmarks.hpatches_patches.evaluate_folders`, the
QueryCube of contract A (one descriptor named after the tag), per-file and per-group mAPs, the
metric set, per-sequence metrics and figures.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from dask.delayed import delayed

from metricalc.benchmarks.hpatches_patches.benchmark import DIFFICULTIES, QUERIES_PER_SEQUENCE
from metricalc.benchmarks.hpatches_patches.compute import DISTANCES, compute_results
from metricalc.benchmarks.hpatches_patches.dataset import SPLITS, PatchDataset
from metricalc.benchmarks.hpatches_patches.describe import METHODS, describe_image
from metricalc.benchmarks.hpatches_patches.experiment_data import dataset_label, prepare_benchmarks
from metricalc.benchmarks.hpatches_patches.experiment_predictions import (
    describe_seconds,
    merge_parts,
    open_descriptors,
    read_part,
    write_part,
)
from metricalc.benchmarks.hpatches_patches.experiment_tables import (
    file_summaries,
    file_table,
    group_table,
    patch_metrics,
)
from metricalc.benchmarks.hpatches_patches.files import read_benchmark, write_ranked_results
from metricalc.benchmarks.hpatches_patches.generator import MAX_PATCHES
from metricalc.benchmarks.hpatches_patches.pool import DescriptorPool
from metricalc.benchmarks.hpatches_patches.querycube import evaluate_folders
from metricalc.core.ranking import AP_METHODS
from metricalc.errors import InvalidInputError
from metricalc.experiment.benchmark import (
    Context,
    Evaluation,
    Values,
    check_dataset_keys,
    data_defaults,
    scalar_summary,
)
from metricalc.experiment.config import Config
from metricalc.experiment.plots import plot_retrieval_map
from metricalc.experiment.rundir import RunDir
from metricalc.experiment.scheduler import batches
from metricalc.plotting.figures import plot_scene_map
from metricalc.progress import progress_bar

__all__ = ["DEFAULT_CONF", "Patches", "describe_patch_image"]

DEFAULT_CONF: dict[str, Any] = {
    "data": data_defaults(
        "patches",
        max_patches=MAX_PATCHES,
        benchmarks=None,
        files=None,
        splits=list(SPLITS),
        difficulties=list(DIFFICULTIES),
        n_sequences=None,
        benchmark_seeds=[0],
        queries_per_sequence=QUERIES_PER_SEQUENCE,
    ),
    "model": {"descriptor": "sift", "distance": "l2"},
    "eval": {"ap_method": "vlfeat"},
}
"""Defaults of every key (docs/experiments.md describes each)."""

BENCHMARKS_FOLDER = "benchmarks"
RETRIEVAL_FOLDER = "retrieval"
_STAGED = ".results"  # under predictions.parts/: a dot, so never a sequence name


def describe_patch_image(
    root: Path, sequence: str, image: str, count: int, method: str
) -> tuple[np.ndarray, float]:
    """The descriptors of patch-image ``sequence.image`` of the dataset in ``root`` (which has
    ``count`` patches per image) and the seconds it took."""
    started = time.perf_counter()
    one = PatchDataset(Path(root), {sequence: count}, {sequence: (image,)}, {})
    descriptors = describe_image(one, sequence, image, method=method)
    return descriptors, time.perf_counter() - started


def _retrieval_folder(rundir: RunDir, tag: str) -> Path:
    return rundir.path / RETRIEVAL_FOLDER / tag


class Patches:
    """The ``patches`` benchmark (module docstring): units are benchmark files."""

    name, units_group = "patches", "files"
    default_conf: Mapping[str, Any] = DEFAULT_CONF

    def validate(self, conf: Config) -> None:
        """Check a merged configuration: the data keys every benchmark has, the benchmark files,
        the descriptor and distance, the AP method (errors name key, value and origin)."""
        v = Values(conf)
        check_dataset_keys(v, "data.patches")
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
        rundir, model = ctx.rundir, ctx.conf["model"]
        benchmarks = rundir.path / BENCHMARKS_FOLDER
        dataset, stems = prepare_benchmarks(ctx.conf["data"], ctx.outputs, benchmarks)
        pools = {stem: read_benchmark(benchmarks / f"{stem}.benchmark").pool for stem in stems}
        names = sorted({name for pool in pools.values() for name in pool})
        images = [(name.split(".")[0], name.split(".")[1]) for name in names]
        for sequence, image in images:
            dataset.path(sequence, image)  # a clear error for a patch-image the data lack
        self._describe(ctx, dataset, [(s, i) for s, i in images if not rundir.part(s, i).is_file()])
        self._rank(ctx, pools)
        parts = {(s, i): rundir.part(s, i) for s, i in images}
        attrs = ctx.export_attrs(descriptor=model["descriptor"], distance=model["distance"])
        merge_parts(parts, rundir.predictions, attrs)  # last: marks the export complete

    def _describe(self, ctx: Context, dataset: PatchDataset, todo: list[tuple[str, str]]) -> None:
        """Describe the patch-images ``todo`` (sequence, image), one part file each."""
        rundir, scheduler = ctx.rundir, ctx.scheduler

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
                        ctx.conf["model"]["descriptor"],
                        dask_key_name=scheduler.key("describe", s, i),
                    )
                    for s, i in batch
                }
                scheduler.run(tasks, described)

    def _rank(self, ctx: Context, pools: Mapping[str, tuple[str, ...]]) -> None:
        """The ``.results`` of every benchmark file, staged under ``predictions.parts`` (kept
        by an interrupted export), then moved to ``retrieval/<tag>/``."""
        rundir, scheduler = ctx.rundir, ctx.scheduler
        staged = rundir.parts / _STAGED
        benchmarks = rundir.path / BENCHMARKS_FOLDER
        todo = [stem for stem in pools if not (staged / f"{stem}.results").is_file()]

        def ranked(stem: str, lines: list[list[str]]) -> None:
            write_ranked_results(staged / f"{stem}.results", pools[stem], lines)
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
        conf = ctx.conf
        cube = self._cube(ctx)
        files = file_table(cube)
        metrics, scenes = self.metrics(cube, conf)
        groups = group_table(files, ctx.tag)
        one = files.sel(descriptor=ctx.tag)
        summaries = {**scalar_summary(metrics, ctx.tag), **file_summaries(one, groups)}
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

    def _cube(self, ctx: Context) -> xr.Dataset:
        """The QueryCube of the run's ``.results``
        (:func:`metricalc.benchmarks.hpatches_patches.evaluate_folders`)
        with the describing time and the run's attrs."""
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
        return cube

    def metrics(self, cube: xr.Dataset, conf: Mapping[str, Any]) -> tuple[xr.Dataset, xr.Dataset]:
        """The metric set and per-sequence metrics of a patch-retrieval cube
        (:func:`metricalc.benchmarks.hpatches_patches.experiment_tables.patch_metrics`)."""
        return patch_metrics(cube)
