r"""Patch and image retrieval AP of a ``.results`` file (docs/patches.md).

For query :math:`q` with cluster :math:`C_q` (its corresponding patches, :math:`q` included) and
results :math:`s_1 = q, s_2, \dots, s_{51}`, rank 1 (the query itself) is skipped and the list
:math:`s_2..s_{51}` is scored twice:

- **patch retrieval**: :math:`s_k` is relevant when :math:`s_k \in C_q`;
- **image retrieval**: :math:`s_k` is relevant when its patch-image ``seq.img`` is the
  patch-image of a member of :math:`C_q` (any patch of those images, the query's own image
  included).

Both use VLFeat's ``vl_pr`` AP by default, as HPatches' ``retrieval_eval.m``: with
:math:`rel_j` the relevance of the :math:`j`-th listed result (:math:`j = k - 1 = 1..50`),
:math:`P_j = \frac{1}{j}\sum_{i \le j} rel_i` and :math:`R = \sum_j rel_j` the positives present,

.. math::

    AP_q = \frac{1}{R} \sum_{j=1}^{50} rel_j \, P_j \quad (R > 0), \qquad AP_q = 0 \quad (R = 0),

and the mAP of a task is the mean of :math:`AP_q` over all queries. Relevance is built as two
boolean matrices (queries x 50) and each task is one call of
:func:`metricalc.average_precision`.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.benchmarks.hpatches_patches.checks import validate
from metricalc.benchmarks.hpatches_patches.files import (
    N_RESULTS,
    Benchmark,
    Labels,
    Results,
    read_benchmark,
    read_labels,
    read_results,
)
from metricalc.core.ranking import AP_METHODS, average_precision
from metricalc.validation import Boolean, Choice, validate_params

__all__ = [
    "IR_MEASURES",
    "REPEAT_POLICIES",
    "evaluate_files",
    "evaluate_results",
    "ir_measures",
    "relevance",
]

IR_MEASURES = ("recip_rank", "P.1,5,10", "recall.5,10,50", "Rprec", "ndcg_cut.5,10",
               "success.1,5,10")
"""trec_eval measures of patch retrieval per query (:func:`ir_measures`): printed as
``recip_rank``, ``P_1`` .. ``P_10``, ``recall_5`` .. ``recall_50``, ``Rprec``, ``ndcg_cut_5``,
``ndcg_cut_10``, ``success_1`` .. ``success_10``."""

REPEAT_POLICIES = ("count", "negative")
"""How a signature listed again in the same line counts (see :func:`relevance`)."""

Repeats = Literal["count", "negative"]


@validate_params(repeats=Choice(REPEAT_POLICIES), check=Boolean())
def relevance(
    benchmark: Benchmark,
    labels: Labels,
    results: Results,
    *,
    repeats: Repeats = "count",
    check: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Patch and image relevance of ranks 2..51 of every query, as two boolean matrices.

    Parameters
    ----------
    benchmark, labels, results : Benchmark, Labels, Results
        Read with :func:`~metricalc.benchmarks.hpatches_patches.read_benchmark` etc. or built in
        memory.
    repeats : {"count", "negative"}
        A signature listed more than once in a line: ``"count"`` (default, as ``ismember`` in
        HPatches' ``retrieval_eval.m``) judges every occurrence on its own, so a cluster member
        listed twice is relevant twice and the query listed again at a rank :math:`\ge 2` is a
        patch match; ``"negative"`` makes every occurrence after the first (the query at rank 1
        included) non-relevant in both tasks.
    check : bool
        Run :func:`~metricalc.benchmarks.hpatches_patches.validate` first (default). Without it the
        inputs must be
        valid already.

    Returns
    -------
    patch, image : ndarray of bool, shape (n_queries, 50)
        ``patch[i, j]``: result ``j + 2`` of query ``i`` is in the query's cluster;
        ``image[i, j]``: its patch-image is the patch-image of a cluster member.

    Examples
    --------
    >>> from metricalc.benchmarks.hpatches_patches import Benchmark, Labels, Results
    >>> pool = ("a.ref", "a.e1", "b.ref")
    >>> bench = Benchmark(pool, ("a.ref.0",))
    >>> labels = Labels(pool, (("a.ref.0", "a.e1.0"),))
    >>> ranked = ["a.ref.0", "b.ref.1", "a.ref.5", "a.e1.0"] + [f"b.ref.{k}" for k in range(2, 49)]
    >>> patch, image = relevance(bench, labels, Results(pool, (tuple(ranked),)))
    >>> patch[0, :3].tolist(), image[0, :3].tolist()
    ([False, False, True], [False, True, True])
    """
    if check:
        validate(benchmark, labels, results)
    n = len(benchmark.queries)
    # One integer code per distinct signature and per distinct patch-image (hash-based
    # factorization; the Python work is per distinct name, not per query).
    names = [name for row in results.results for name in row]
    names += [name for cluster in labels.clusters for name in cluster]
    signature, distinct = pd.factorize(np.array(names, dtype=object))
    images, _ = pd.factorize(np.array([s.rpartition(".")[0] for s in distinct], dtype=object))
    image = images[signature]
    ranked_sig = signature[: n * N_RESULTS].reshape(n, N_RESULTS)
    ranked_img = image[: n * N_RESULTS].reshape(n, N_RESULTS)
    sizes = np.array([len(cluster) for cluster in labels.clusters])
    member = np.arange(sizes.max()) < sizes[:, None]  # row-major order = the flattened clusters
    cluster_sig = np.full(member.shape, -1, dtype=signature.dtype)  # -1 matches no code
    cluster_img = np.full(member.shape, -1, dtype=image.dtype)
    cluster_sig[member] = signature[n * N_RESULTS :]
    cluster_img[member] = image[n * N_RESULTS :]
    patch = (ranked_sig[:, 1:, None] == cluster_sig[:, None, :]).any(axis=-1)
    image_rel = (ranked_img[:, 1:, None] == cluster_img[:, None, :]).any(axis=-1)
    if repeats == "negative":
        earlier = np.tri(N_RESULTS, k=-1, dtype=bool)  # earlier[i, j]: rank j before rank i
        repeated = ((ranked_sig[:, :, None] == ranked_sig[:, None, :]) & earlier).any(axis=-1)
        patch &= ~repeated[:, 1:]
        image_rel &= ~repeated[:, 1:]
    return patch, image_rel


def ir_measures(
    benchmark: Benchmark,
    labels: Labels,
    results: Results,
    measures: tuple[str, ...] = IR_MEASURES,
    *,
    check: bool = True,
) -> dict[str, np.ndarray]:
    r"""trec_eval's measures of patch retrieval, per query, by printed name.

    Query :math:`q`'s ranked list is its results at ranks 2..51 (rank 1, the query itself, is
    skipped), relevant where the patch is in the query's cluster, each patch counted once (a
    repeated signature and the query listed again are non-relevant: :func:`relevance` with
    ``repeats="negative"``, as trec_eval refuses a document retrieved twice). :math:`R` is the
    cluster's other patches, :math:`|C_q| - 1` (5 in HPatches), listed or not: so
    ``recall_50`` is the share of them in the list and the measures are those of
    :func:`metricalc.retrieval.evaluate` on this list (:func:`metricalc.retrieval.rank_lists`),
    e.g. ``recip_rank`` :math:`1/\min\{j : rel_j\}`, ``P_k`` :math:`H_k / k`, ``recall_k``
    :math:`H_k / R`, ``Rprec`` :math:`H_R / R`, ``ndcg_cut_k`` with gain 1, ``success_k``
    :math:`[H_k > 0]` (docs/retrieval.md).

    Parameters
    ----------
    benchmark, labels, results : Benchmark, Labels, Results
    measures : tuple of str
        trec_eval measure arguments (default :data:`IR_MEASURES`); those without a per-query
        value (``gm_map``, ``runid``, ``num_q``) give nothing.
    check : bool
        Run :func:`~metricalc.benchmarks.hpatches_patches.validate` first (default).

    Returns
    -------
    dict of str to ndarray
        Printed name -> float64 value per query, in the benchmark's order.

    Examples
    --------
    >>> from metricalc.benchmarks.hpatches_patches import Benchmark, Labels, Results
    >>> pool = ("a.ref", "a.e1", "a.e2", "b.ref")
    >>> labels = Labels(pool, (("a.ref.0", "a.e1.0", "a.e2.0"),))
    >>> bench = Benchmark(pool, ("a.ref.0",))
    >>> ranked = ("a.ref.0", "b.ref.99", "a.e1.0", "a.e1.0", "a.e2.0",
    ...           *(f"b.ref.{k}" for k in range(46)))
    >>> values = ir_measures(bench, labels, Results(pool, (ranked,)), ("recip_rank", "P.5"))
    >>> values["recip_rank"].tolist(), values["P_5"].tolist()   # a.e1.0 counts once
    ([0.5], [0.4])
    """
    from metricalc.retrieval import evaluate_ranked, rank_lists

    patch, _ = relevance(benchmark, labels, results, repeats="negative", check=check)
    others = np.array([len(cluster) - 1 for cluster in labels.clusters], dtype=np.int64)
    result = evaluate_ranked(rank_lists(patch, others), measures)
    return {name: result.per_query[name] for name in result.summary if name in result.per_query}


@validate_params(ap_method=Choice(AP_METHODS), repeats=Choice(REPEAT_POLICIES))
def evaluate_results(
    benchmark: Benchmark,
    labels: Labels,
    results: Results,
    *,
    ap_method: str = "vlfeat",
    repeats: Repeats = "count",
) -> xr.Dataset:
    r"""Patch and image retrieval AP of every query, and their means (validates first).

    For query :math:`q`, the results at ranks 2..51 are relevant for patch retrieval when they
    are in :math:`q`'s cluster and for image retrieval when their patch-image is one of the
    cluster's (:func:`relevance`). With :math:`rel_j` the relevance of the :math:`j`-th of those
    50 results, :math:`P_j = \frac{1}{j}\sum_{i \le j} rel_i` and :math:`R = \sum_j rel_j`, the
    default ``"vlfeat"`` AP is

    .. math::

        AP_q = \frac{1}{R} \sum_{j=1}^{50} rel_j \, P_j, \qquad AP_q = 0 \text{ if } R = 0,

    and :math:`mAP = \frac{1}{Q} \sum_q AP_q` over all :math:`Q` queries.

    Parameters
    ----------
    benchmark, labels, results : Benchmark, Labels, Results
    ap_method : str
        Any of :data:`metricalc.AP_METHODS` (``"vlfeat"``, the HPatches MATLAB value, by
        default; the others compare with other re-implementations, e.g. ``"trapezoid"`` for
        the hpatches-benchmark python code). Every method normalises by the positives present
        in the list, and a list without positive scores 0.
    repeats : {"count", "negative"}
        How repeated signatures count, see :func:`relevance`.

    Returns
    -------
    xarray.Dataset
        Over dim ``query`` (``0..Q-1``, coords ``signature`` and ``sequence``):
        ``patch_retrieval_ap``, ``image_retrieval_ap`` and the positives present
        ``n_patch_relevant``, ``n_image_relevant``; the trec_eval measures of patch retrieval
        (:func:`ir_measures`, :data:`IR_MEASURES`: ``recip_rank``, ``P_1``, ...); scalars
        ``patch_retrieval_map``,
        ``image_retrieval_map`` and ``n_queries``. attrs: ``ap_method``, ``repeats``, ``ranks``
        and the file names ``benchmark``, ``labels``, ``results`` (``""`` when built in memory).

    Raises
    ------
    InvalidInputError
        Any failed rule of :func:`~metricalc.benchmarks.hpatches_patches.validate` (naming file and
        line), or an
        unknown ``ap_method`` / ``repeats``.

    Examples
    --------
    >>> from metricalc.benchmarks.hpatches_patches import Benchmark, Labels, Results
    >>> pool = ("a.ref", "a.e1", "a.e2", "b.ref")
    >>> bench = Benchmark(pool, ("a.ref.0",))
    >>> labels = Labels(pool, (("a.ref.0", "a.e1.0", "a.e2.0"),))
    >>> others = [f"b.ref.{k}" for k in range(46)]
    >>> ranked = ("a.ref.0", "a.e1.0", "b.ref.99", "a.e2.7", "a.e2.0", *others)
    >>> ds = evaluate_results(bench, labels, Results(pool, (ranked,)))
    >>> float(ds.patch_retrieval_map)  # positives at 1 and 4: (1/1 + 2/4) / 2
    0.75
    >>> round(float(ds.image_retrieval_map), 6)  # at 1, 3, 4: (1/1 + 2/3 + 3/4) / 3
    0.805556
    """
    patch, image = relevance(benchmark, labels, results, repeats=repeats)
    n, width = patch.shape
    # Strictly decreasing scores: the listed order is the ranking for every method.
    score = np.broadcast_to(np.arange(width, 0, -1, dtype=np.float64), (n, width))
    patch_ap = average_precision(patch, score, method=ap_method, zero_division=0)
    image_ap = average_precision(image, score, method=ap_method, zero_division=0)
    queries = np.array(benchmark.queries, dtype=object)
    sequences = np.array([q.partition(".")[0] for q in benchmark.queries], dtype=object)

    def name(obj: Benchmark | Labels | Results) -> str:
        return str(obj.path) if obj.path is not None else ""

    ir = ir_measures(benchmark, labels, results, check=False)
    return xr.Dataset(
        {
            "patch_retrieval_ap": ("query", np.asarray(patch_ap, dtype=np.float64)),
            "image_retrieval_ap": ("query", np.asarray(image_ap, dtype=np.float64)),
            "n_patch_relevant": ("query", patch.sum(axis=1)),
            "n_image_relevant": ("query", image.sum(axis=1)),
            **{name: ("query", values) for name, values in ir.items()},
            "patch_retrieval_map": float(np.mean(patch_ap)),
            "image_retrieval_map": float(np.mean(image_ap)),
            "n_queries": n,
        },
        coords={
            "query": np.arange(n),
            "signature": ("query", queries),
            "sequence": ("query", sequences),
        },
        attrs={
            "ap_method": ap_method,
            "repeats": repeats,
            "ranks": f"2..{N_RESULTS}",
            "benchmark": name(benchmark),
            "labels": name(labels),
            "results": name(results),
        },
    )


@validate_params(ap_method=Choice(AP_METHODS), repeats=Choice(REPEAT_POLICIES))
def evaluate_files(
    benchmark_path: str | os.PathLike[str],
    labels_path: str | os.PathLike[str],
    results_path: str | os.PathLike[str],
    *,
    ap_method: str = "vlfeat",
    repeats: Repeats = "count",
) -> xr.Dataset:
    """Read a ``.benchmark``, its ``.labels`` and a ``.results`` file, validate, evaluate.

    The same as ``evaluate_results(read_benchmark(b), read_labels(l), read_results(r), ...)``;
    see :func:`evaluate_results` for the definitions and the returned Dataset.

    Raises
    ------
    InvalidInputError
        A parse or validation failure, naming the file and the 1-based line.
    """
    return evaluate_results(
        read_benchmark(benchmark_path),
        read_labels(labels_path),
        read_results(results_path),
        ap_method=ap_method,
        repeats=repeats,
    )
