r"""New retrieval tasks from a patch dataset: ``.benchmark`` and ``.labels`` as the release's.

A task ``<split>_<difficulty>_<N>s_<seed>`` is drawn the way the files of the ECCV 2016 release
are built (read off ``data/hpatches-eccv2016-retrieval/``: in every file the pool is 6 patch-images
per sequence, the queries are 100 per sequence, all from ``ref``, distinct, spread over the
sequences in proportion to their patch counts, and each cluster is the query's index in the 6
images of the pool):

1. **Sequences.** :math:`N` sequences drawn without replacement from the dataset's sequences of
   the split (:meth:`~metricalc.benchmarks.hpatches_patches.dataset.PatchDataset.split_sequences`),
   in the order
   drawn.
2. **Pool** (line 1 of both files). For each drawn sequence ``seq.ref`` then ``seq.e1`` ..
   ``seq.e5`` (easy) or ``seq.h1`` .. ``seq.h5`` (hard).
3. **Queries** (``.benchmark`` lines 2..). :math:`Q = 100 N` reference patches drawn uniformly
   without replacement among all :math:`\sum_s n_s` reference patches of the drawn sequences
   (:math:`n_s` patches in sequence :math:`s`), in the order drawn; so the expected number of
   queries of sequence :math:`s` is :math:`Q n_s / \sum_{s'} n_{s'}`.
4. **Clusters** (``.labels`` lines 2..). Query ``seq.ref.i``: ``seq.ref.i``, then ``seq.e1.i`` ..
   ``seq.e5.i`` (or ``h``): patch :math:`i` of every image of the pool from its sequence.

The draws come from ``numpy.random.default_rng([seed, crc32("<split>_<difficulty>_<N>s")])``, so
a task is the same for the same dataset and arguments on every machine. The files are written
atomically, then read back and checked with :func:`~metricalc.benchmarks.hpatches_patches.validate`.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

from metricalc.benchmarks.hpatches_patches.checks import read_task
from metricalc.benchmarks.hpatches_patches.dataset import (
    LEVELS,
    SPLITS,
    PatchDataset,
    open_patch_dataset,
)
from metricalc.benchmarks.hpatches_patches.files import write_atomic
from metricalc.errors import InvalidInputError
from metricalc.validation import Choice, Integer, validate_params

__all__ = ["DIFFICULTIES", "QUERIES_PER_SEQUENCE", "benchmark_name", "make_benchmark"]

DIFFICULTIES = ("easy", "hard")
"""The jitter levels a benchmark can use (the release has easy and hard tasks)."""

QUERIES_PER_SEQUENCE = 100
"""Queries per pool sequence in the release (500 for 5 sequences, 4,000 for 40)."""


def benchmark_name(split: str, difficulty: str, n_sequences: int, seed: int) -> str:
    """The file stem ``<split>_<difficulty>_<N>s_<seed>`` (seed zero-padded to two digits).

    Examples
    --------
    >>> benchmark_name("train", "easy", 40, 0)
    'train_easy_40s_00'
    """
    return f"{split}_{difficulty}_{n_sequences}s_{seed:02d}"


@validate_params(
    split=Choice(SPLITS),
    n_sequences=Integer(1),
    seed=Integer(0),
    difficulty=Choice(DIFFICULTIES),
    queries_per_sequence=Integer(1),
)
def make_benchmark(
    dataset: PatchDataset | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    split: str,
    n_sequences: int,
    seed: int,
    difficulty: str,
    queries_per_sequence: int = QUERIES_PER_SEQUENCE,
) -> tuple[Path, Path]:
    """Draw a retrieval task from a patch dataset and write its ``.benchmark`` and ``.labels``.

    Parameters
    ----------
    dataset : PatchDataset or path
        A patch dataset (:func:`~metricalc.benchmarks.hpatches_patches.read_patch_dataset`) or its
        folder.
    out : path
        Folder to write ``<split>_<difficulty>_<N>s_<seed>.benchmark`` and ``.labels`` into
        (created if needed).
    split : {"train", "test"}
    n_sequences : int
        :math:`N`, the sequences of the pool.
    seed : int
        Non-negative; with the other arguments it fixes every draw (module docstring).
    difficulty : {"easy", "hard"}
        The images of the pool after ``ref``: ``e1..e5`` or ``h1..h5``.
    queries_per_sequence : int
        100 in the release; fewer for small datasets.

    Returns
    -------
    (Path, Path)
        The ``.benchmark`` and ``.labels`` files.

    Raises
    ------
    InvalidInputError
        Unknown split or difficulty; fewer sequences of the split than ``n_sequences`` (naming
        what the dataset has); a drawn sequence without the difficulty's images; fewer reference
        patches than queries; a negative seed.

    Examples
    --------
    >>> import tempfile
    >>> from metricalc.benchmarks.hpatches_patches.dataset import write_patches
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     for seq in ("v_a", "v_b"):
    ...         for image in ("ref", "e1", "e2", "e3", "e4", "e5"):
    ...             path = Path(tmp) / "data" / seq / f"{image}.png"
    ...             _ = write_patches(path, np.zeros((4, 65, 65), np.uint8))
    ...     _ = (Path(tmp) / "data" / "splits.json").write_text('{"train": ["v_a", "v_b"]}')
    ...     bench, labels = make_benchmark(Path(tmp) / "data", tmp, split="train", n_sequences=2,
    ...                                    seed=0, difficulty="easy", queries_per_sequence=2)
    ...     lines = bench.read_text().splitlines()
    >>> bench.name, len(lines[0].split(",")), len(lines) - 1
    ('train_easy_2s_00.benchmark', 12, 4)
    """
    dataset = open_patch_dataset(dataset)
    name = benchmark_name(split, difficulty, n_sequences, int(seed))
    rng = np.random.default_rng([int(seed), zlib.crc32(name.rsplit("_", 1)[0].encode())])
    letter = LEVELS[difficulty]
    images = ("ref", *(f"{letter}{k}" for k in range(1, 6)))
    drawn = _draw_sequences(dataset, rng, split, n_sequences, images, difficulty)
    owner, index = _draw_queries(dataset, rng, drawn, queries_per_sequence)
    pool = ",".join(f"{s}.{image}" for s in drawn for image in images)
    queries = [f"{drawn[o]}.ref.{i}" for o, i in zip(owner.tolist(), index.tolist(), strict=True)]
    clusters = [
        ",".join(f"{drawn[o]}.{image}.{i}" for image in images)
        for o, i in zip(owner.tolist(), index.tolist(), strict=True)
    ]
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} is a file; expected a folder for the benchmark files")
    benchmark_path, labels_path = out / f"{name}.benchmark", out / f"{name}.labels"
    write_atomic(benchmark_path, "\n".join([pool, *queries, ""]).encode("utf-8"))
    write_atomic(labels_path, "\n".join([pool, *clusters, ""]).encode("utf-8"))
    read_task(benchmark_path, labels_path)
    return benchmark_path, labels_path


def _draw_sequences(
    dataset: PatchDataset,
    rng: np.random.Generator,
    split: str,
    n_sequences: int,
    images: tuple[str, ...],
    difficulty: str,
) -> list[str]:
    """Step 1: ``n_sequences`` sequences of ``split`` drawn without replacement, each holding
    ``images``."""
    candidates = dataset.split_sequences(split)
    if len(candidates) < n_sequences:
        unknown = [s for s in dataset.sequences if s not in dataset.splits]
        hint = (
            f"; {len(unknown)} sequences have no split ({', '.join(unknown[:5])}"
            f"{', ...' if len(unknown) > 5 else ''}): list them in splits.json"
            if unknown
            else ""
        )
        raise InvalidInputError(
            f"{dataset.root}: {len(candidates)} {split} sequences, expected at least "
            f"{n_sequences} (--sequences){hint}"
        )
    drawn = [candidates[i] for i in rng.choice(len(candidates), n_sequences, replace=False)]
    for sequence in drawn:
        missing = [image for image in images if image not in dataset.images[sequence]]
        if missing:
            raise InvalidInputError(
                f"{dataset.root / sequence}: no {missing[0]}.png; a {difficulty} benchmark needs "
                f"{', '.join(images)}"
            )
    return drawn


def _draw_queries(
    dataset: PatchDataset, rng: np.random.Generator, drawn: list[str], queries_per_sequence: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
    """Step 3: the queries, drawn uniformly without replacement among the reference patches of
    the ``drawn`` sequences: per query its sequence (position in ``drawn``) and patch index."""
    counts = np.array([dataset.counts[s] for s in drawn])
    n_queries = queries_per_sequence * len(drawn)
    if n_queries > counts.sum():
        raise InvalidInputError(
            f"{n_queries} queries ({queries_per_sequence} per sequence) but the drawn sequences "
            f"{', '.join(drawn)} hold {counts.sum()} reference patches; expected a smaller "
            "queries_per_sequence"
        )
    offsets = np.concatenate([[0], np.cumsum(counts)])
    picked = rng.choice(int(counts.sum()), n_queries, replace=False)
    owner = np.searchsorted(offsets, picked, side="right") - 1
    return owner, picked - offsets[owner]
