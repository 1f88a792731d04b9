r"""The three HPatches CVPR'17 tasks, with the semantics of hpatches-benchmark's Python evaluation.

Reference: hpatches/hpatches-benchmark ``python/utils/tasks.py`` (``eval_verification``,
``eval_matching``, ``eval_retrieval``), ``python/utils/metrics.py`` (``tpfp``, ``pr``, ``roc``)
and the summaries of ``python/utils/results.py`` (``results_verification``,
``results_matching``, ``results_retrieval``). See ``docs/hpatches17.md``.

**Ranking and AP** (``metrics.tpfp`` / ``pr``). Items are sorted by distance ascending with a
stable sort (ties keep input order), one curve point per item; with :math:`tp_r`, :math:`fp_r`
the counts after :math:`r` items and :math:`\epsilon = 10^{-10}`,

.. math::

    P_r = \frac{\max(tp_r, \epsilon)}{\max(tp_r + fp_r, \epsilon)}, \qquad
    \mathrm{AP} = \sum_{\text{positive at rank } r} \frac{P_{r-1} + P_r}{2\,\max(p, \epsilon)}

(the trapezoid over recall, :math:`P_0 = 1`; ``p`` the number of positives, or ``numpos``):
:func:`metricalc.average_precision`'s ``method="trapezoid"``, computed from the ranks of the
positives by :func:`metricalc.core.ap_kernels.trapezoid_ap_from_ranks`.
**ROC AUC** (``metrics.roc``): the trapezoid of TPR over FPR per item, i.e.
:math:`\frac{1}{p\,n} \sum_{\text{negative}} tp_{\text{before it}}`: a tie counts 0 or 1 by input
order, not 1/2.

Distances (:data:`DISTANCES`: L2, or L1 as the reference's ``--dist L1``) are computed in
float64 from the float32 descriptors. Large L2 matrices use
:math:`\|a\|^2 + \|b\|^2 - 2 a \cdot b` (BLAS) to screen, and every comparison that the screen
cannot decide (within :data:`SCREEN_TOLERANCE` relative) is redone with the exact
:math:`\sqrt{\sum (a - b)^2}`, so exact ties are ties; L1 matrices come from ``cdist``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.distance import cdist

from metricalc.benchmarks.hpatches_cvpr17.files import (
    DATASET_MARK,
    LEVELS,
    Descriptors,
    PairSet,
    RetrievalTask,
    data_name,
    generate_verification_pairs,
    image_index,
    read_dataset_mark,
    read_descriptors,
    read_retrieval_task,
    read_splits,
    read_verification_pairs,
)
from metricalc.core.ap_kernels import trapezoid_ap_from_ranks
from metricalc.errors import InvalidInputError
from metricalc.hpatches import CVPR17_LEVELS

__all__ = [
    "DISTANCES",
    "LEVEL_NAMES",
    "POOL_SIZES",
    "SCREEN_TOLERANCE",
    "TASKS17",
    "VerificationDistances",
    "evaluate_hpatches17",
    "imbalanced_prefix",
    "matching",
    "matching_ap",
    "retrieval",
    "retrieval_ap",
    "sorted_labels_ap",
    "sorted_labels_auc",
    "summarise_verification",
    "verification",
    "verification_distances",
    "verification_scores",
]

POOL_SIZES: tuple[int, ...] = (100, 500, 1000, 5000, 10000, 15000, 20000)
"""Retrieval pool sizes: the first ``P`` items of (5 positives, distractors)."""

SCREEN_TOLERANCE = 1e-9
"""Relative band of squared distances within which the BLAS screen is redone exactly."""

LEVEL_NAMES: Mapping[str, str] = CVPR17_LEVELS
"""Level letters to the names of the JSON output and the benchmark's tables."""

_EPS = 1e-10
_CHUNK = 1 << 22  # elements of a temporary array


def sorted_labels_ap(labels: np.ndarray, numpos: int | None = None) -> float:
    """AP of a ranked list of 0/1 labels (``metrics.pr`` after the sort; 0 without a positive).

    >>> sorted_labels_ap(np.array([1, 0, 1]))  # (1 + 1)/2/2 + (1/2 + 2/3)/2/2
    0.7916666666666666
    """
    ranks = np.flatnonzero(labels) + 1
    return float(trapezoid_ap_from_ranks(ranks, ranks.size if numpos is None else numpos))


def sorted_labels_auc(labels: np.ndarray) -> float:
    """ROC AUC of a ranked list of 0/1 labels (``metrics.roc`` after the sort)."""
    labels = np.asarray(labels, dtype=bool)
    p = int(labels.sum())
    n = labels.size - p
    before = np.cumsum(labels)[~labels]
    return float(before.sum(dtype=np.float64) / max(p, _EPS) / max(n, _EPS))


@dataclass(frozen=True)
class _Distance:
    """A distance of the reference: exact values, and a fast screen of whole matrices.

    ``screen(a, b)`` returns values comparable to ``key(exact)`` (squared distances for L2, from
    BLAS; the distances themselves for L1, from ``cdist``) and a bound per row of ``a`` on
    their error.
    """

    name: str

    def exact(self, a: np.ndarray, ia: np.ndarray, b: np.ndarray, ib: np.ndarray) -> np.ndarray:
        """Exact distances in float64 of rows ``a[ia]`` and ``b[ib]``, gathered in chunks
        (so a flood of candidates never materialises whole)."""
        out = np.empty(ia.size, dtype=np.float64)
        step = max(1, _CHUNK // max(a.shape[1], 1))
        for start in range(0, ia.size, step):
            sl = slice(start, start + step)
            diff = a[ia[sl]].astype(np.float64) - b[ib[sl]]
            if self.name == "l1":
                out[sl] = np.abs(diff).sum(axis=1)
            else:
                out[sl] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        return out

    def key(self, d: np.ndarray) -> np.ndarray:
        """The exact distances mapped to the scale of :meth:`screen`."""
        return d if self.name == "l1" else d**2

    def screen(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Screened values of every row of ``a`` against every row of ``b`` (float64) and a
        per-row error bound (0 for the exact L1 ``cdist``)."""
        a = a.astype(np.float64)
        if self.name == "l1":
            return cdist(a, b, "cityblock"), np.zeros(a.shape[0])
        na = np.einsum("ij,ij->i", a, a)
        nb = np.einsum("ij,ij->i", b, b)
        g = na[:, None] + nb[None, :] - 2.0 * (a @ b.T)
        return g, SCREEN_TOLERANCE * (na + (nb.max() if nb.size else 0.0)) + 1e-300


DISTANCES: tuple[str, ...] = ("l2", "l1")
"""The distances of the reference's ``--dist`` (``L2``, ``L1``); ``masked_L1`` is not offered."""


def _distance(name: str) -> _Distance:
    if name not in DISTANCES:
        raise InvalidInputError(f"distance: expected one of {DISTANCES}, got {name!r}")
    return _Distance(name)


def _ranked_ap(distances: np.ndarray, labels: np.ndarray, numpos: int | None = None) -> float:
    order = np.argsort(distances, kind="stable")
    return sorted_labels_ap(labels[order], numpos)


VerificationDistances = Mapping[str, Mapping[str, np.ndarray]]
"""Per level letter (``e``, ``h``, ``t``) and pair file (``pos``, ``neg_inter``, ``neg_intra``)
the distance of every row of the file, in file order."""


def verification_distances(
    descriptors: Descriptors, pairs: PairSet, *, distance: str = "l2"
) -> dict[str, dict[str, np.ndarray]]:
    """The distance of every verification pair per level (:data:`VerificationDistances`).

    The sequences of a pair file are looked up once (:meth:`Descriptors.locate`); a level only
    moves the rows to its images."""
    metric = _distance(distance)
    result: dict[str, dict[str, np.ndarray]] = {level: {} for level in LEVELS}
    for kind in ("pos", "neg_inter", "neg_intra"):
        s1, t1, i1, s2, t2, i2 = pairs.pairs[kind]
        (first1, count1), (first2, count2) = descriptors.locate(s1, i1), descriptors.locate(s2, i2)
        for level in LEVELS:
            rows1 = first1 + image_index(level, t1) * count1
            rows2 = first2 + image_index(level, t2) * count2
            result[level][kind] = metric.exact(
                descriptors.matrix, rows1, descriptors.matrix, rows2
            )
    return result


def imbalanced_prefix(n_neg: int, n_pos: int) -> tuple[int, int]:
    """The negatives and positives of ``eval_verification``'s imbalanced list: the first
    ``n_pos + int(n_pos * 0.2)`` items of the negatives followed by the positives.

    Examples
    --------
    >>> imbalanced_prefix(1000, 10), imbalanced_prefix(5, 10)
    ((12, 0), (5, 7))
    """
    length = n_pos + int(n_pos * 0.2)
    negatives = min(n_neg, length)
    return negatives, min(n_pos, length - negatives)


def verification_scores(neg: np.ndarray, pos: np.ndarray) -> dict[str, float]:
    """``eval_verification``'s two numbers of one list (negatives, then positives).

    ``balanced``: ROC AUC over the whole list; ``imbalanced``: AP over its first
    ``n_pos + int(n_pos * 0.2)`` items (:func:`imbalanced_prefix`). A stable sort: a tied
    negative ranks first.
    """
    d = np.concatenate([neg, pos])
    labels = np.concatenate([np.zeros(neg.size, bool), np.ones(pos.size, bool)])
    n_imb = sum(imbalanced_prefix(neg.size, pos.size))
    return {
        "balanced": sorted_labels_auc(labels[np.argsort(d, kind="stable")]),
        "imbalanced": _ranked_ap(d[:n_imb], labels[:n_imb]),
    }


def summarise_verification(
    distances: VerificationDistances,
) -> dict[str, dict[str, dict[str, float]]]:
    """``{level: {balanced|imbalanced: {inter, intra}}}`` of :func:`verification_scores`."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    for level in LEVELS:
        entry: dict[str, dict[str, float]] = {"balanced": {}, "imbalanced": {}}
        for kind in ("inter", "intra"):
            scores = verification_scores(distances[level][f"neg_{kind}"], distances[level]["pos"])
            for measure, value in scores.items():
                entry[measure][kind] = value
        result[LEVEL_NAMES[level]] = entry
    return result


def verification(
    descriptors: Descriptors, pairs: PairSet, *, distance: str = "l2"
) -> dict[str, dict[str, dict[str, float]]]:
    """``eval_verification`` summarised: ``{level: {balanced|imbalanced: {inter, intra}}}``.

    Per level the list is (negatives, positives), so a tied negative ranks first. Balanced: ROC
    AUC over all of it; imbalanced: AP over its first ``n_pos + int(n_pos * 0.2)`` items.
    """
    return summarise_verification(verification_distances(descriptors, pairs, distance=distance))


def _nearest(
    ref: np.ndarray, image: np.ndarray, distance: _Distance
) -> tuple[np.ndarray, np.ndarray]:
    """First nearest neighbour in ``image`` of every row of ``ref`` and its exact distance.

    A column is a candidate unless its screened distance minus its error bound exceeds the
    smallest screened distance plus bound of the row; candidates are compared exactly, and the
    first (lowest column) of the exact minima wins, as ``np.argmin`` of the reference.
    """
    image64 = image.astype(np.float64)
    idx = np.empty(ref.shape[0], dtype=np.int64)
    dist = np.empty(ref.shape[0], dtype=np.float64)
    step = max(1, _CHUNK // max(image.shape[0], 1))
    for start in range(0, ref.shape[0], step):
        g, tol = distance.screen(ref[start : start + step], image64)
        upper = (g + tol[:, None]).min(axis=1)
        rows, cols = np.nonzero(g - tol[:, None] <= upper[:, None])
        exact = distance.exact(ref, start + rows, image64, cols)
        order = np.lexsort((cols, exact, rows))
        first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
        idx[start + rows[first]] = cols[first]
        dist[start + rows[first]] = exact[first]
    return idx, dist


def matching_ap(ref: np.ndarray, image: np.ndarray, *, distance: str = "l2") -> float:
    """``eval_matching`` for one image: AP of the nearest-neighbour distances, ``numpos = N``."""
    idx, dist = _nearest(ref, image, _distance(distance))
    correct = idx == np.arange(ref.shape[0])
    return _ranked_ap(dist, correct, numpos=ref.shape[0])


def matching(
    descriptors: Descriptors, test: Sequence[str], *, distance: str = "l2"
) -> dict[str, object]:
    """``results_matching``: per level the mean AP over (sequence, image 1..5); ``mean`` of levels.

    Also returns ``per_pair``: ``{(sequence, level, k): AP}``.
    """
    per_pair: dict[tuple[str, str, int], float] = {}
    for sequence in test:
        ref = descriptors.image(sequence, "ref")
        for level in LEVELS:
            for k in range(1, 6):
                per_pair[sequence, level, k] = matching_ap(
                    ref, descriptors.image(sequence, f"{level}{k}"), distance=distance
                )
    means = {
        LEVEL_NAMES[lv]: float(np.mean([v for key, v in per_pair.items() if key[1] == lv]))
        for lv in LEVELS
    }
    return {**means, "mean": float(np.mean(list(means.values()))), "per_pair": per_pair}


def _closer_count(
    screened: tuple[np.ndarray, np.ndarray],
    q: np.ndarray,
    dis: np.ndarray,
    pos_d: np.ndarray,
    distance: _Distance,
) -> np.ndarray:
    """Per query and distractor, how many of the (sorted) positives it is strictly closer than.

    ``screened`` are the screened values and a bound on their error per query: the count is
    certain where the counts with the bounds subtracted and added agree; elsewhere it is redone
    with the exact distance.
    """
    g, tol = screened
    p2 = distance.key(pos_d)
    count = np.zeros(g.shape, dtype=np.uint8)
    upper = np.zeros(g.shape, dtype=np.uint8)
    for j in range(pos_d.shape[1]):
        count += g < (p2[:, j] - tol)[:, None]
        upper += g <= (p2[:, j] + tol)[:, None]
    r, c = np.nonzero(count != upper)
    if r.size:
        exact = distance.exact(q, r, dis, c)
        count[r, c] = (exact[:, None] < pos_d[r]).sum(axis=1)
    return count


def _positive_distances(
    descriptors: Descriptors,
    q: np.ndarray,
    queries: tuple[np.ndarray, np.ndarray],
    level: int,
    distance: _Distance,
) -> np.ndarray:
    """Exact distances of each query to its patch in images 1..5 of a level (queries x 5)."""
    seqs, idx = queries
    images = 1 + 5 * level + np.arange(5)
    rows = descriptors.rows(np.repeat(seqs, 5), np.tile(images, len(seqs)), np.repeat(idx, 5))
    d = distance.exact(q, np.repeat(np.arange(len(q)), 5), descriptors.matrix, rows)
    return d.reshape(-1, 5)


def _pool_ranks(count: np.ndarray, bins: np.ndarray, n_pools: int) -> np.ndarray:
    """1-based ranks (queries x pools x 5) of the sorted positives in each pool prefix.

    A distractor closer than ``k`` of the sorted positives is closer than positives
    ``5 - k .. 4``; ``bins`` is ``6 (row (n_pools + 1) + first pool holding it)`` (first pool
    ``n_pools``: none).
    """
    rows = count.shape[0]
    hist = np.bincount((bins + count).ravel(), minlength=rows * (n_pools + 1) * 6)
    hist = hist.reshape(rows, n_pools + 1, 6)[:, :n_pools, :]
    # closer than positive j (0-based) <=> k >= 5 - j: reverse cumulative sums over k
    before = np.cumsum(hist[:, :, :0:-1], axis=2)  # k = 5, 4..1 -> positives 0..4
    return np.arange(1, 6) + np.cumsum(before, axis=1)


def retrieval_ap(
    descriptors: Descriptors,
    task: RetrievalTask,
    test: Sequence[str],
    *,
    pool_sizes: Sequence[int] = POOL_SIZES,
    distance: str = "l2",
    chunk: int = 128,
) -> np.ndarray:
    """Per query, level and pool size the AP of ``eval_retrieval`` (queries x 3 x pools).

    The list of a query: its 5 positives (its patch in images 1..5 of the level, in order), then
    the ``ref`` descriptors of the distractors of other sequences in file order; the pool of size
    ``P`` is the first ``P`` items. Ties rank the positives first (stable sort). Per positive,
    the distractors strictly closer are counted by the pool that first holds them, and the
    cumulative counts give its rank in every pool at once.
    """
    outside = sorted(set(np.unique(task.queries_seq).tolist()) - set(test))
    if outside:
        raise InvalidInputError(
            f"retrieval query sequence {outside[0]!r} is not in the split's test list"
        )
    cut = np.asarray(pool_sizes, dtype=np.int64) - 5
    if cut.ndim != 1 or (cut < 0).any() or (np.diff(cut) <= 0).any():
        raise InvalidInputError(f"pool_sizes: expected increasing sizes >= 5, got {pool_sizes}")
    metric = _distance(distance)
    m = descriptors.matrix
    q_rows = descriptors.rows(task.queries_seq, 0, task.queries_idx)
    dis = m[descriptors.rows(task.distractors_seq, 0, task.distractors_idx)].astype(np.float64)
    names = np.concatenate([task.queries_seq, task.distractors_seq])
    codes = np.unique(names, return_inverse=True)[1]
    q_code, d_code = codes[: q_rows.size], codes[q_rows.size :]
    out = np.empty((q_rows.size, len(LEVELS), cut.size), dtype=np.float64)
    for start in range(0, q_rows.size, chunk):
        sl = slice(start, start + chunk)
        q = m[q_rows[sl]].astype(np.float64)
        screened = metric.screen(q, dis)
        keep = d_code[None, :] != q_code[sl, None]
        first_pool = np.searchsorted(cut, np.cumsum(keep, axis=1) - 1, side="right")
        first_pool[~keep] = cut.size
        bins = (np.arange(q.shape[0])[:, None] * (cut.size + 1) + first_pool) * 6
        for li in range(len(LEVELS)):
            queries = (task.queries_seq[sl], task.queries_idx[sl])
            pos_d = np.sort(_positive_distances(descriptors, q, queries, li, metric), axis=1)
            count = _closer_count(screened, q, dis, pos_d, metric)
            out[sl, li, :] = trapezoid_ap_from_ranks(_pool_ranks(count, bins, cut.size), 5)
    return out


def retrieval(
    descriptors: Descriptors, task: RetrievalTask, test: Sequence[str], *, distance: str = "l2"
) -> dict[str, object]:
    """``results_retrieval``: per level and pool size the mean AP over the queries, and ``mean``
    over the levels; also ``per_query`` (queries x 3 x pools) and ``longest_list``, the longest
    list of any query (5 positives and the distractors of other sequences): pools at least that
    long hold every list whole and give equal columns."""
    ap = retrieval_ap(descriptors, task, test, distance=distance)
    names, codes = np.unique(
        np.concatenate([task.queries_seq, task.distractors_seq]).astype(str), return_inverse=True
    )
    per_sequence = np.bincount(codes[task.queries_seq.size :], minlength=names.size)
    own = per_sequence[codes[: task.queries_seq.size]]
    longest = 5 + int(task.distractors_seq.size - own.min()) if own.size else 5
    result: dict[str, object] = {"longest_list": longest}
    means = ap.mean(axis=0)
    for li, level in enumerate(LEVELS):
        result[LEVEL_NAMES[level]] = {
            str(p): float(v) for p, v in zip(POOL_SIZES, means[li], strict=True)
        }
    result["mean"] = {str(p): float(v) for p, v in zip(POOL_SIZES, means.mean(axis=0), strict=True)}
    result["per_query"] = ap
    return result


TASKS17: tuple[str, ...] = ("verification", "matching", "retrieval")
"""The tasks of :func:`evaluate_hpatches17`."""


def evaluate_hpatches17(
    descr_dir: str | os.PathLike[str],
    *,
    tasks: Sequence[str] = TASKS17,
    split: str = "a",
    task_dir: str | os.PathLike[str] | None = None,
    n_pairs: int = 1_000_000,
    distance: str = "l2",
) -> dict[str, Any]:
    """Run hpatches-benchmark's tasks on a descriptor folder ``DESCR_DIR/<seq>/<image>.csv``.

    Parameters
    ----------
    descr_dir : path
    tasks : sequence of {"verification", "matching", "retrieval"}
    split : {"a", "b", "c", "illum", "view", "full"} or another split of ``splits.json``
    task_dir : path, optional
        A folder in hpatches-benchmark's ``tasks/`` format (``splits.json`` or
        ``splits/splits.json``, ``retr_*`` and ``verif_*`` files). Default: the splits and
        retrieval files shipped with metricalc, and verification pairs generated by
        ``gen_verif``'s rule from the folder's patch counts (``n_pairs`` per file). A
        descriptor folder of generated data (marked) needs its own set's task folder.
    distance : {"l2", "l1"}
        The reference's ``--dist L2`` (default) or ``L1``.

    Returns
    -------
    dict
        ``{task: {split: ...}}`` in the structure of the JSON output (fractions), plus
        ``"dataset"`` (the data the folders' marks name,
        :func:`~metricalc.benchmarks.hpatches_cvpr17.files.
        data_name`: ``""`` for the HPatches release), ``"pairs_source"`` (where the
        verification pairs came from), ``"retrieval_longest_list"`` (the longest retrieval
        list: larger pools repeat its AP) and ``"units"``: the
        per-image-pair matching APs, the per-query retrieval APs, the verification distances
        (:func:`verification_distances`) and their :class:`PairSet`.
    """
    _distance(distance)
    for task in tasks:
        if task not in TASKS17:
            raise InvalidInputError(f"task: expected one of {TASKS17}, got {task!r}")
    splits = read_splits(task_dir)
    if split not in splits:
        raise InvalidInputError(f"split: expected one of {sorted(splits)}, got {split!r}")
    test = splits[split]
    dataset = data_name(descr_dir, task_dir)
    if dataset and task_dir is None:
        raise _own_tasks_needed(descr_dir, dataset)
    descriptors = read_descriptors(descr_dir, test)
    result: dict[str, Any] = {"dataset": dataset, "units": {}}
    if "verification" in tasks:
        if task_dir is not None and (Path(task_dir) / f"verif_pos_split-{split}.csv").is_file():
            pairs = read_verification_pairs(split, task_dir)
        else:
            pairs = generate_verification_pairs(test, descriptors.counts, n_pairs=n_pairs)
        distances = verification_distances(descriptors, pairs, distance=distance)
        result["verification"] = {split: summarise_verification(distances)}
        result["pairs_source"] = pairs.source
        result["units"]["verification"] = distances
        result["units"]["verification_pairs"] = pairs
    if "matching" in tasks:
        done = matching(descriptors, test, distance=distance)
        result["units"]["matching"] = done.pop("per_pair")
        result["matching"] = {split: done}
    if "retrieval" in tasks:
        retrieval_task = read_retrieval_task(split, task_dir)
        done = retrieval(descriptors, retrieval_task, test, distance=distance)
        result["units"]["retrieval"] = done.pop("per_query")
        result["units"]["retrieval_queries"] = retrieval_task.queries_seq
        result["retrieval_longest_list"] = done.pop("longest_list")
        result["retrieval"] = {split: done}
    return result


def _own_tasks_needed(descr_dir: str | os.PathLike[str], dataset: str) -> InvalidInputError:
    """The error for a descriptor folder of generated data evaluated with the shipped splits
    and retrieval files, which list only the HPatches release's sequences."""
    tasks = Path(descr_dir).parent.parent / "tasks"  # make_hpatches17_set's ROOT/tasks
    found = read_dataset_mark(tasks) == dataset
    where = str(tasks) if found else "ROOT/tasks of make_hpatches17_set"
    return InvalidInputError(
        f"{descr_dir} holds {dataset!r} ({DATASET_MARK}), whose sequences are not in the HPatches "
        f"splits shipped with metricalc; give the task folder of that set (task_dir, --tasks "
        f"{where})"
    )
