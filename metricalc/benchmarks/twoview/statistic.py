r"""The cells of the pose table as statistics of image pairs: comparisons and estimator noise.

``metricalc pose eval`` (:func:`metricalc.benchmarks.twoview.evaluate.evaluate_pairs`) records one
pose error
:math:`e = \max(e_R, e_t)` per method (system) and image pair (unit); a pair's cluster is its
scene (the folder both image names share, the ``scene`` coordinate) or, where the pair list
gives none, the pair itself (see docs/pose.md). Each column of the table is a statistic of those
records, with pair :math:`i` counted :math:`w_i` times under a cluster resample
(:func:`metricalc.benchmarks.twoview.accuracy.weighted_pose_auc`,
:func:`~metricalc.benchmarks.twoview.accuracy.weighted_imc_maa`):

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
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.benchmarks.twoview.accuracy import weighted_imc_maa, weighted_pose_auc
from metricalc.benchmarks.twoview.evaluate import at_best_threshold
from metricalc.errors import InvalidInputError
from metricalc.stats.compare import generators
from metricalc.stats.pair_records import FAILED_ERROR, compare_columns, pair_clusters
from metricalc.stats.statistics import UnitStatistic
from metricalc.validation import check_choice, check_integer

__all__ = [
    "COLUMNS",
    "FAILED_ERROR",
    "SeedMeanStatistic",
    "compare_pose",
    "is_pose_results",
    "pose_statistic",
    "seed_noise",
]

COLUMNS: tuple[str, ...] = ("auc@5", "auc@10", "auc@20", "mAA@10")
"""The columns of the pose table (:func:`metricalc.benchmarks.twoview.evaluate.summarize`)."""
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
        :func:`metricalc.benchmarks.twoview.evaluate.evaluate_pairs` (or ``pose eval --out``): a
        threshold
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
    clusters, codes = pair_clusters(results["pair"].values, _scenes(results), pair_by)
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
    **options: Any,
) -> dict[str, xr.Dataset]:
    """Every pair of methods (or every method against ``baseline``) on each column: the
    difference of the column's statistic, its paired cluster-bootstrap CI and the
    within-cluster swap test (:func:`metricalc.stats.compare.compare_statistic`); the
    comparisons of one column are one correction family.

    Parameters
    ----------
    columns : sequence of str
        The columns compared (default: all of :data:`COLUMNS`).
    pair_by : {"scene", "pair"}
        The independent units (:func:`metricalc.stats.pair_records.pair_clusters`).
    **options
        The keywords of :func:`metricalc.stats.compare.compare_statistic`: ``baseline``,
        ``correction``, ``alpha``, ``seed``, ``n_resamples``, ``confidence_level``.

    Returns
    -------
    dict of str -> xarray.Dataset
        Column name -> the comparisons (the variables of :func:`metricalc.stats.compare`).
    """
    return compare_columns(
        partial(pose_statistic, results, pair_by=pair_by), columns,
        pairs=np.asarray(results["pair"].values), scenes=_scenes(results), pair_by=pair_by,
        attrs=results.attrs, **options,
    )  # fmt: skip


def _scenes(results: xr.Dataset) -> np.ndarray:
    """Each pair's scene, ``""`` for none (and for files without scenes)."""
    if "scene" not in results.coords:
        return np.full(results.sizes["pair"], "")
    return np.asarray(results["scene"].values).astype(str)


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

