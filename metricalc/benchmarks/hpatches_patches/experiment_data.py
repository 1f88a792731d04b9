"""The data of a ``patches`` run: its patch dataset and the benchmark files it evaluates.

A patch dataset (the built-in synthetic one, generated once under ``<outputs>/data/patches/``,
or ``data.patches`` in the HPatches release layout) and benchmark files: those of
``data.benchmarks`` (e.g. the ECCV 2016 ``.benchmark`` / ``.labels``), checked and copied, or
drawn from the dataset with :func:`metricalc.benchmarks.hpatches_patches.make_benchmark` (every
split x difficulty x
number of sequences x seed), into ``benchmarks/`` of the run folder
(:func:`prepare_benchmarks`), so the evaluation reads nothing outside it.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from metricalc.benchmarks.hpatches_patches.benchmark import benchmark_name, make_benchmark
from metricalc.benchmarks.hpatches_patches.checks import read_task
from metricalc.benchmarks.hpatches_patches.dataset import SPLITS, PatchDataset, read_patch_dataset
from metricalc.benchmarks.hpatches_patches.files import read_benchmark, write_atomic
from metricalc.benchmarks.hpatches_patches.generator import make_patch_dataset
from metricalc.datasets.sequences import PHOTOGRAPHS, QUICK_SCENES, resolve_scenes
from metricalc.errors import InvalidInputError
from metricalc.experiment.rundir import file_lock

__all__ = [
    "QUICK_FILES",
    "QUICK_MAX_PATCHES",
    "QUICK_PER_SPLIT",
    "dataset_label",
    "load_dataset",
    "prepare_benchmarks",
]

QUICK_MAX_PATCHES = 200
"""``data.quick`` on the synthetic dataset: at most this many patches per sequence."""

QUICK_PER_SPLIT = 2
"""``data.quick`` on a patch dataset folder: the first sequences of each split."""

QUICK_FILES = 2
"""``data.quick`` with ``data.benchmarks``: the files with the smallest pools."""

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
            if stem in ("", ".", "..") or Path(stem).name != stem or "\\" in stem:
                raise InvalidInputError(
                    f"data.files: {stem!r} is not a file stem; expected the name of a .benchmark "
                    f"file in {folder}, without folder parts (results are written by that name)"
                )
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
    (:func:`metricalc.benchmarks.hpatches_patches.validate`) and copied; otherwise they are drawn
    from the dataset
    with :func:`metricalc.benchmarks.hpatches_patches.make_benchmark`. Either way they are
    deterministic in the
    data configuration, so a resumed export writes the same files.
    """
    shutil.rmtree(out, ignore_errors=True)
    if data["benchmarks"] is None:
        dataset = load_dataset(data, outputs)
        return dataset, _draw(data, dataset, out)
    folder, stems = _given_stems(data)
    sequences: set[str] = set()
    for stem in stems:
        benchmark, _ = read_task(folder / f"{stem}.benchmark", folder / f"{stem}.labels")
        sequences.update(name.split(".")[0] for name in benchmark.pool)
        for suffix in (".benchmark", ".labels"):
            write_atomic(out / f"{stem}{suffix}", (folder / f"{stem}{suffix}").read_bytes())
    return load_dataset(data, outputs, sequences=sorted(sequences)), stems


def dataset_label(data: Mapping[str, Any]) -> str:
    """The cube's ``dataset`` attr: the benchmarks folder's name (contract A), or where drawn
    benchmarks come from.

    Examples
    --------
    >>> from metricalc.benchmarks.hpatches_patches.experiment import DEFAULT_CONF
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
