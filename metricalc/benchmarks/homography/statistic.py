r"""The homography columns of ``metricalc run hpatches`` runs as statistics of image pairs.

A run's ``results.h5`` records per image pair (group ``pairs``) the corner error of the robust
estimate at the run's selected RANSAC threshold (``H_error_ransac``) and of the plain DLT
(``H_error_dlt``), a failed estimate as :math:`+\infty`. Glue Factory's columns are statistics
of those errors (:func:`metricalc.keypoints.homography_errors.error_auc`): with pair :math:`i`
counted :math:`w_i` times under a cluster resample
(:func:`metricalc.benchmarks.twoview.accuracy.weighted_pose_auc`: the same area under the
recall-versus-error
curve, in pixels),

- ``H_error_ransac@1px``, ``@3px``, ``@5px``: the AUC of the RANSAC errors up to 1, 3, 5 px;
- ``H_error_ransac_mAA``: the mean of those three AUCs;
- ``H_error_dlt@1px``, ``@3px``, ``@5px``: the AUCs of the DLT errors.

The clusters are the pairs' scenes (HPatches sequences), as for every HPatches comparison
(docs/stats.md); each run keeps the RANSAC threshold it selected on all its pairs, so the
interval leaves out the selection's own variability (docs/experiments.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import xarray as xr

from metricalc.benchmarks.twoview.accuracy import weighted_pose_auc
from metricalc.errors import InvalidInputError
from metricalc.stats.pair_records import FAILED_ERROR, compare_columns, pair_clusters
from metricalc.stats.statistics import UnitStatistic
from metricalc.validation import check_choice

__all__ = ["COLUMNS", "compare_homography", "homography_records", "homography_statistic"]

COLUMNS: tuple[str, ...] = (
    "H_error_ransac@1px",
    "H_error_ransac@3px",
    "H_error_ransac@5px",
    "H_error_ransac_mAA",
    "H_error_dlt@1px",
    "H_error_dlt@3px",
    "H_error_dlt@5px",
)
"""The homography columns of a run's summary (:func:`metricalc.keypoints.homography.summarize`)."""
MAA_THRESHOLDS: tuple[float, ...] = (1.0, 3.0, 5.0)
"""The AUC thresholds (px) whose mean is ``H_error_ransac_mAA``."""
_ERRORS = ("H_error_ransac", "H_error_dlt")


def _mean_auc(errors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The mean of the weighted AUCs at :data:`MAA_THRESHOLDS`."""
    out: np.ndarray = np.mean(
        [weighted_pose_auc(errors, weights, t) for t in MAA_THRESHOLDS], axis=0
    )
    return out


def _column(column: str) -> tuple[str, str, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """(error variable, phrase, weighted statistic) of a column."""
    check_choice("column", column, COLUMNS)
    variable, _, rest = column.partition("@")
    estimate = "RANSAC" if column.startswith("H_error_ransac") else "DLT"
    if column.endswith("_mAA"):
        phrase = "mean homography AUC at 1/3/5 px (RANSAC) of the image pairs"
        return "H_error_ransac", phrase, _mean_auc
    threshold = float(rest.removesuffix("px"))
    phrase = f"homography AUC at {threshold:g} px ({estimate}) of the image pairs"
    return variable, phrase, partial(weighted_pose_auc, threshold=threshold)


def homography_records(runs: Mapping[str, xr.Dataset]) -> xr.Dataset:
    """The per-pair corner errors of several runs over ``descriptor`` (the run labels) x
    ``pair``, on the image pairs every run has (attrs ``n_pairs_dropped``: pairs some run
    lacks).

    Parameters
    ----------
    runs : mapping of str -> xarray.Dataset
        Label -> the ``pairs`` group of a run's ``results.h5``
        (:func:`metricalc.experiment.results.open_pairs`): dim ``image_pair``, coordinate
        ``scene``, variables ``H_error_ransac`` and ``H_error_dlt``.

    Examples
    --------
    >>> import xarray as xr
    >>> run = lambda e: xr.Dataset(
    ...     {"H_error_ransac": ("image_pair", e), "H_error_dlt": ("image_pair", e)},
    ...     coords={"image_pair": ["v_a/1-2", "v_a/1-3"], "scene": ("image_pair", ["v_a"] * 2)})
    >>> records = homography_records({"sift": run([0.5, 2.0]), "orb": run([1.0, float("inf")])})
    >>> records.H_error_ransac.values.tolist()
    [[0.5, 2.0], [1.0, inf]]
    """
    if len(runs) < 2:
        raise InvalidInputError(f"a comparison needs two runs or more; got {list(runs)}")
    for label, pairs in runs.items():
        missing = [name for name in (*_ERRORS, "scene") if name not in pairs.variables]
        if missing or "image_pair" not in pairs.dims:
            raise InvalidInputError(
                f"run {label!r}: its results.h5 group 'pairs' lacks {missing or ['image_pair']}: "
                "not a homography run of `metricalc run hpatches`"
            )
    names = [np.asarray(p["image_pair"].values).astype(str) for p in runs.values()]
    common = sorted(set(names[0]).intersection(*names[1:]))
    if not common:
        raise InvalidInputError(f"the runs {list(runs)} have no image pair in common")
    first = next(iter(runs.values())).sel(image_pair=common)
    data = {
        variable: (("descriptor", "pair"), np.stack(
            [np.asarray(p[variable].sel(image_pair=common).values, dtype=np.float64)
             for p in runs.values()]))
        for variable in _ERRORS
    }  # fmt: skip
    return xr.Dataset(
        data,
        coords={"descriptor": list(runs), "pair": common,
                "scene": ("pair", np.asarray(first["scene"].values).astype(str))},
        attrs={"n_pairs_dropped": len(set().union(*names)) - len(common)},
    )  # fmt: skip


def homography_statistic(
    records: xr.Dataset, column: str, *, pair_by: str = "scene"
) -> UnitStatistic:
    """The statistic of one homography column over the runs of :func:`homography_records`.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> r = xr.Dataset({"H_error_ransac": (("descriptor", "pair"), [[0.5, 2.0, np.inf]]),
    ...                 "H_error_dlt": (("descriptor", "pair"), [[0.5, 2.0, np.inf]])},
    ...                coords={"descriptor": ["sift"], "pair": ["a", "b", "c"],
    ...                        "scene": ("pair", ["", "", ""])})
    >>> stat = homography_statistic(r, "H_error_ransac@3px")
    >>> float(stat.weighted(0, np.ones((1, 3)))[0])  # error_auc([0.5, 2, inf], [3])
    0.5
    """
    variable, phrase, function = _column(column)
    clusters, codes = pair_clusters(records["pair"].values, records["scene"].values, pair_by)
    errors = np.asarray(records[variable].transpose("descriptor", "pair").values, np.float64)
    if np.isnan(errors).any():
        raise InvalidInputError(f"{variable} has NaN errors; a failed estimate is +inf")
    systems = [str(name) for name in records["descriptor"].values]
    values = np.where(np.isinf(errors), FAILED_ERROR, errors)
    return UnitStatistic(column, phrase, systems, clusters, values, codes, function)


def compare_homography(
    records: xr.Dataset,
    *,
    columns: Sequence[str] = COLUMNS,
    pair_by: str = "scene",
    **options: Any,
) -> dict[str, xr.Dataset]:
    """Every pair of runs (or every run against ``baseline``) on each homography column: the
    difference of the column, its paired cluster-bootstrap CI and the within-cluster swap test
    (:func:`metricalc.stats.pair_records.compare_columns`).

    ``columns`` (default: all of :data:`COLUMNS`), ``pair_by`` and ``options`` (``baseline``,
    ``correction``, ``alpha``, ...) are those of
    :func:`metricalc.benchmarks.twoview.statistic.compare_pose`; the result maps each column to its
    comparisons (the variables of :func:`metricalc.stats.compare`).
    """
    return compare_columns(
        partial(homography_statistic, records, pair_by=pair_by), columns,
        pairs=np.asarray(records["pair"].values), scenes=np.asarray(records["scene"].values),
        pair_by=pair_by, attrs=records.attrs, **options,
    )  # fmt: skip
