r"""The cells of the pose table as statistics of image pairs: comparisons and estimator noise.

``metricalc pose eval`` (:func:`metricalc.pose.evaluate.evaluate_pairs`) records one pose error
:math:`e = \max(e_R, e_t)` per method (system) and image pair (unit); a pair's cluster is its
scene (the folder both image names share, the ``scene`` coordinate) or, where the pair list
gives none, the pair itself (see docs/pose.md). Each column of the table is a statistic of those
records, with pair :math:`i` counted :math:`w_i` times under a cluster resample
(:func:`metricalc.pose.accuracy.weighted_pose_auc`,
:func:`~metricalc.pose.accuracy.weighted_imc_maa`):

- ``auc@5``, ``auc@10``, ``auc@20``: SuperGlue's pose AUC at 5, 10, 20 degrees;
- ``mAA@10``: the Image Matching Challenge's mean average accuracy at 10 degrees.

Results over several seeds of the estimator (``pose eval --seeds``) give the mean over seeds
:math:`\bar T = \frac1S \sum_s T^{(s)}` of the statistic (:class:`SeedMeanStatistic`), and
:func:`seed_noise` splits a difference's uncertainty into estimator noise (the spread over
seeds) and sampling noise (the cluster bootstrap).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.pose.accuracy import weighted_imc_maa, weighted_pose_auc
from metricalc.pose.evaluate import at_best_threshold
from metricalc.stats.clustered import intraclass_correlation
from metricalc.stats.compare import MIN_UNITS, compare_statistic, generators
from metricalc.stats.statistics import UnitStatistic
from metricalc.validation import check_choice, check_integer

__all__ = [
    "COLUMNS",
    "FAILED_ERROR",
    "PAIR_BY",
    "SeedMeanStatistic",
    "compare_pose",
    "is_pose_results",
    "pose_statistic",
    "seed_noise",
]

COLUMNS: tuple[str, ...] = ("auc@5", "auc@10", "auc@20", "mAA@10")
"""The columns of the pose table (:func:`metricalc.pose.evaluate.summarize`)."""
PAIR_BY: tuple[str, ...] = ("scene", "pair")
"""The independent units of a pose comparison: scenes where the pair list gives them, or pairs."""
FAILED_ERROR = 1e6
"""A failed estimate's error (:math:`\\infty`) in the records: beyond every threshold, so every
statistic is the same, and finite, so the records tell it from a missing value (the Image
Matching Benchmark's own stand-in)."""

_PHRASES = {
    "auc@5": "SuperGlue's pose AUC at 5 degrees of the image pairs",
    "auc@10": "SuperGlue's pose AUC at 10 degrees of the image pairs",
    "auc@20": "SuperGlue's pose AUC at 20 degrees of the image pairs",
    "mAA@10": "the IMC's mAA at 10 degrees of the image pairs",
}


def _function(column: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    check_choice("column", column, COLUMNS)
    if column.startswith("auc@"):
        return partial(weighted_pose_auc, threshold=float(column[4:]))
    return weighted_imc_maa


def is_pose_results(results: xr.Dataset) -> bool:
    """Whether a Dataset holds the per-pair results of ``pose eval --out``."""
    return "pose_error" in results.data_vars and {"descriptor", "pair"} <= set(results.dims)


def _clusters(results: xr.Dataset, pair_by: str) -> tuple[np.ndarray, np.ndarray]:
    """Cluster labels and each pair's cluster index: its scene, or the pair where it has none
    (files written before scenes were recorded: every pair)."""
    check_choice("pair_by", pair_by, PAIR_BY)
    pairs = np.asarray(results["pair"].values).astype(str)
    scenes = np.full(len(pairs), "")
    if pair_by == "scene" and "scene" in results.coords:
        scenes = np.asarray(results["scene"].values).astype(str)
    own = scenes == ""
    keys = np.where(own, "pair " + pairs, "scene " + scenes)  # a scene named like a pair differs
    _, first, codes = np.unique(keys, return_index=True, return_inverse=True)
    return np.where(own, pairs, scenes)[first], codes


@dataclass
class SeedMeanStatistic:
    """The mean over seeds of one statistic, :math:`\\bar T_s(w) = \\frac1S\\sum_k T^{(k)}_s(w)`.

    A resample weights the clusters the same way in every seed; a swap exchanges the two
    systems' records of every seed inside a cluster (under the null hypothesis the methods are
    exchangeable within a cluster, whatever the seed). Implements
    :class:`metricalc.stats.statistics.ClusteredStatistic`.
    """

    name: str
    phrase: str
    systems: list[str]
    clusters: np.ndarray
    per_seed: list[UnitStatistic]

    def present(self) -> np.ndarray:
        out: np.ndarray = np.logical_and.reduce([s.present() for s in self.per_seed])
        return out

    def weighted(self, system: int, weights: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.mean([s.weighted(system, weights) for s in self.per_seed], axis=0)
        return out

    def swapped_difference(
        self, first: int, second: int, swap: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        out: np.ndarray = np.mean(
            [s.swapped_difference(first, second, swap, keep) for s in self.per_seed], axis=0
        )
        return out

    def cluster_values(self) -> np.ndarray:
        out: np.ndarray = np.mean([s.cluster_values() for s in self.per_seed], axis=0)
        return out


def _errors(results: xr.Dataset) -> np.ndarray:
    """Pose errors (descriptor, seed, pair), failures as :data:`FAILED_ERROR`."""
    if not is_pose_results(results):
        raise InvalidInputError(
            "not pose results: expected the variable pose_error over descriptor x pair "
            "(metricalc pose eval --out)"
        )
    errors = at_best_threshold(results)["pose_error"]
    if "seed" not in errors.dims:
        errors = errors.expand_dims("seed")
    values = np.asarray(errors.transpose("descriptor", "seed", "pair").values, dtype=np.float64)
    return np.where(np.isinf(values), FAILED_ERROR, values)


def pose_statistic(
    results: xr.Dataset, column: str, *, pair_by: str = "scene"
) -> SeedMeanStatistic:
    """The statistic of one column of the pose table over the methods of ``results``.

    Parameters
    ----------
    results : xarray.Dataset
        :func:`metricalc.pose.evaluate.evaluate_pairs` (or ``pose eval --out``): a threshold
        sweep is taken at each method's best threshold, as the table does; a ``seed``
        dimension gives the mean over seeds.
    column : {"auc@5", "auc@10", "auc@20", "mAA@10"}
    pair_by : {"scene", "pair"}
        The clusters: scenes (pairs without a scene alone), or every pair alone.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> r = xr.Dataset({"pose_error": (("descriptor", "pair"), [[1.0, 3.0, np.inf]])},
    ...                coords={"descriptor": ["sift"], "pair": ["a/b", "c/d", "e/f"]})
    >>> stat = pose_statistic(r, "auc@5")
    >>> float(stat.weighted(0, np.ones((1, 3)))[0])  # pose_auc([1, 3, inf], [5])
    0.5
    """
    function = _function(column)
    clusters, codes = _clusters(results, pair_by)
    errors = _errors(results)
    systems = [str(name) for name in results["descriptor"].values]
    per_seed = [
        UnitStatistic(column, _PHRASES[column], systems, clusters, errors[:, k], codes, function)
        for k in range(errors.shape[1])
    ]
    phrase = _PHRASES[column] + (
        f", mean over {len(per_seed)} seeds of the estimator" if len(per_seed) > 1 else ""
    )
    return SeedMeanStatistic(column, phrase, systems, clusters, per_seed)


def compare_pose(
    results: xr.Dataset,
    *,
    columns: Sequence[str] = COLUMNS,
    pair_by: str = "scene",
    baseline: str | None = None,
    correction: str = "holm",
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
) -> dict[str, xr.Dataset]:
    """Every pair of methods (or every method against ``baseline``) on each column: the
    difference of the column's statistic, its paired cluster-bootstrap CI and the
    within-cluster swap test (:func:`metricalc.stats.compare.compare_statistic`); the
    comparisons of one column are one correction family.

    Returns
    -------
    dict of str -> xarray.Dataset
        Column name -> the comparisons (the variables of :func:`metricalc.stats.compare`).
    """
    scenes = _scenes(results)
    n_clusters = len(_clusters(results, pair_by)[0])
    if pair_by == "scene" and (scenes != "").any() and n_clusters < MIN_UNITS:
        raise InvalidInputError(
            f"{n_clusters} independent units (scenes, and pairs without one); a paired test "
            f"needs at least {MIN_UNITS}: with so few scenes no test "
            "generalises to new scenes. pair_by='pair' (--pair-by pair) tests over image pairs, "
            "ignoring that the pairs of one scene are correlated"
        )
    out = {}
    for column in columns:
        statistic = pose_statistic(results, column, pair_by=pair_by)
        compared = compare_statistic(
            statistic, pair_by=pair_by, baseline=baseline, correction=correction, alpha=alpha,
            seed=seed, n_resamples=n_resamples, confidence_level=confidence_level,
            attrs=results.attrs,
        )  # fmt: skip
        if pair_by == "pair" and (scenes != "").any():
            pairs = np.asarray(results["pair"].values).astype(str)
            _add_clustering(compared, statistic, pairs, scenes)
        out[column] = compared
    return out


def _scenes(results: xr.Dataset) -> np.ndarray:
    """Each pair's scene, ``""`` for none (and for files without scenes)."""
    if "scene" not in results.coords:
        return np.full(results.sizes["pair"], "")
    return np.asarray(results["scene"].values).astype(str)


def _add_clustering(
    compared: xr.Dataset, statistic: SeedMeanStatistic, pairs: np.ndarray, scenes: np.ndarray
) -> None:
    """``icc``, ``design_effect`` of pair-level tests: the intraclass correlation within scenes
    of the per-pair differences (each pair's column alone), pairs without a scene alone."""
    order = np.argsort(pairs)  # the clusters are the pairs, sorted by name
    scene = scenes[order]
    labels = np.where(scene != "", "scene " + scene, "pair " + pairs[order])
    values = statistic.cluster_values()
    names = list(statistic.systems)
    for k, (descriptor, baseline) in enumerate(compared.get_index("comparison")):
        d = values[names.index(descriptor)] - values[names.index(baseline)]
        icc, deff = intraclass_correlation(d, labels)
        compared["icc"][k], compared["design_effect"][k] = icc, deff


def seed_noise(
    results: xr.Dataset,
    *,
    columns: Sequence[str] = COLUMNS,
    pair_by: str = "scene",
    seed: int = 0,
    n_resamples: int = 2_000,
) -> xr.Dataset:
    r"""How much of each method difference is estimator noise and how much sampling noise.

    For methods :math:`a, b`, a column and seeds :math:`k = 1..S` of the estimator,
    :math:`D_k = T_a^{(k)} - T_b^{(k)}` on all pairs and :math:`\bar D = \frac1S\sum_k D_k`:

    .. math::

        \mathrm{SD}_\mathrm{seed} = \sqrt{\tfrac{1}{S-1}\textstyle\sum_k (D_k - \bar D)^2},
        \qquad
        \mathrm{SE}_\mathrm{boot} = \mathrm{SD}_b\!\left(\bar D^*_b\right),
        \qquad
        \mathrm{share}_\mathrm{seed} = \frac{\mathrm{SD}_\mathrm{seed}^2}
        {\mathrm{SD}_\mathrm{seed}^2 + \mathrm{SE}_\mathrm{boot}^2},

    with :math:`\bar D^*_b` the seed-mean difference on the :math:`b`-th paired cluster resample
    (the same clusters for every seed and both methods). :math:`\mathrm{SD}_\mathrm{seed}` is
    how far a rerun with another seed moves the difference of one run;
    :math:`\mathrm{SE}_\mathrm{boot}` how far another sample of scenes (pairs) would move it;
    the variance of a one-seed difference is about their sum (law of total variance), and
    ``share_seed`` is the estimator's part of it.

    Returns
    -------
    xarray.Dataset
        Over ``comparison`` (all pairs of methods, MultiIndex ``descriptor``, ``baseline``) and
        ``column``: ``difference`` (:math:`\bar D`), ``sd_seed``, ``se_bootstrap``,
        ``share_seed``; attrs ``n_seeds``, ``n_clusters``, ``n_pairs``, ``pair_by``,
        ``n_resamples``, ``seed``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> e = np.array([[[1.0, 2.0, 8.0], [2.0, 2.0, 6.0]], [[3.0, 4.0, 9.0], [3.0, 5.0, 9.0]]])
    >>> r = xr.Dataset({"pose_error": (("descriptor", "seed", "pair"), e)},
    ...                coords={"descriptor": ["a", "b"], "seed": [0, 1], "pair": ["p", "q", "r"]})
    >>> noise = seed_noise(r, columns=["auc@10"], n_resamples=200)
    >>> round(float(noise.difference[0, 0]), 4), round(float(noise.sd_seed[0, 0]), 4)
    (0.1667, 0.0236)
    """
    n_resamples = check_integer("n_resamples", n_resamples, minimum=2)
    seed = check_integer("seed", seed, minimum=0)
    statistics = [pose_statistic(results, column, pair_by=pair_by) for column in columns]
    names = statistics[0].systems
    pairs = [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    if not pairs:
        raise InvalidInputError(
            f"the estimator noise of a difference needs two methods; got {names}"
        )
    n_seeds, n_clusters = len(statistics[0].per_seed), len(statistics[0].clusters)
    _, resamples = generators(seed)
    weights = resamples.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters),
                                    size=n_resamples).astype(np.float64)
    ones = np.ones((1, n_clusters))
    shape = (len(pairs), len(columns))
    difference, sd, se = np.empty(shape), np.empty(shape), np.empty(shape)
    for c, statistic in enumerate(statistics):
        per_seed = np.array([[s.weighted(k, ones)[0] for k in range(len(names))]
                             for s in statistic.per_seed])  # (seeds, systems)
        boot = np.stack([statistic.weighted(k, weights) for k in range(len(names))])
        for p, (i, j) in enumerate(pairs):
            d = per_seed[:, i] - per_seed[:, j]
            difference[p, c] = d.mean()
            sd[p, c] = d.std(ddof=1) if n_seeds > 1 else np.nan
            se[p, c] = (boot[i] - boot[j]).std(ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(sd**2 + se**2 > 0, sd**2 / (sd**2 + se**2), np.nan)
    index = xr.Coordinates.from_pandas_multiindex(pd.MultiIndex.from_arrays(
        [[names[i] for i, _ in pairs], [names[j] for _, j in pairs]],
        names=["descriptor", "baseline"],
    ), "comparison")
    dims = ("comparison", "column")
    return xr.Dataset(
        {"difference": (dims, difference), "sd_seed": (dims, sd), "se_bootstrap": (dims, se),
         "share_seed": (dims, share)},
        coords={**index, "column": list(columns)},
        attrs={"n_seeds": n_seeds, "n_clusters": n_clusters,
               "n_pairs": results.sizes["pair"], "pair_by": pair_by,
               "n_resamples": n_resamples, "seed": seed},
    )  # fmt: skip

