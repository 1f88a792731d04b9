"""Average precision of a curve given as points (precision, recall) along the threshold.

The core's :func:`~metricalc.average_precision` ranks a list of items; a factor curve of a
decomposition is not the curve of any ranked list (its recall can go down as the threshold
falls), so its AP is computed here from the curve points themselves, in the same conventions.
On the curve of a ranked list without tied scores every method agrees with the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.ap_kernels import COCO101_RECALLS, VOC11_RECALLS
from metricalc.core.labeled import apply_kernel, is_labeled, unwrap
from metricalc.core.ranking import AP_METHODS
from metricalc.decompose.chain import STAGE
from metricalc.errors import InvalidInputError
from metricalc.validation import Choice, Text, as_numbers, validate_params

__all__ = ["curve_average_precision", "factor_ap", "interpolated_precision"]

ENVELOPE_METHODS = ("voc11", "coco101")
"""Methods that average the interpolated precision :math:`\\max\\{P_n : R_n \\ge t\\}`; AP under
them never decreases when any curve point improves (the decomposition theorem holds)."""


def _previous_defined(defined: np.ndarray) -> np.ndarray:
    """Index of the previous defined point along the last axis (-1 where there is none)."""
    n = defined.shape[-1]
    index = np.where(defined, np.arange(n), -1)
    last = np.maximum.accumulate(index, axis=-1)
    previous = np.full(defined.shape, -1, dtype=np.int64)
    previous[..., 1:] = last[..., :-1]
    return previous


def _interpolated(P: np.ndarray, R: np.ndarray, defined: np.ndarray, levels: np.ndarray) -> Any:
    """max{P_n : R_n >= t} at each recall level t (0 where no point reaches t), rows x levels.

    Points sorted by decreasing recall give the running maximum of precision; the number of
    points with R >= t comes from one stable sort of the levels (ascending, placed first) with
    the recalls: a level lands before the recalls equal to it, so its sorted position minus its
    own rank counts the recalls below it.
    """
    rows, n = P.shape
    R = np.where(defined, R, -np.inf)
    P = np.where(defined, P, -np.inf)
    by_recall = np.argsort(-R, axis=-1, kind="stable")
    best = np.maximum.accumulate(np.take_along_axis(P, by_recall, axis=-1), axis=-1)
    keys = np.concatenate([np.broadcast_to(levels, (rows, levels.size)), R], axis=-1)
    order = np.argsort(keys, axis=-1, kind="stable")
    position = np.empty_like(order)
    np.put_along_axis(position, order, np.arange(keys.shape[-1]), axis=-1)
    below = position[:, : levels.size] - np.arange(levels.size)
    reaching = n - below
    value = np.take_along_axis(best, np.maximum(reaching - 1, 0), axis=-1)
    return np.where(reaching > 0, value, 0.0)


def _curve_ap_kernel(precision: np.ndarray, recall: np.ndarray, *, method: str) -> np.ndarray:
    P, R = as_numbers("precision", precision), as_numbers("recall", recall)
    if P.shape != R.shape or P.ndim == 0:
        raise InvalidInputError(
            f"precision and recall must have the same shape with the curve on the last axis; got "
            f"{P.shape} and {R.shape}"
        )
    batch, n = P.shape[:-1], P.shape[-1]
    if n == 0:
        return np.full(batch, np.nan)
    P, R = P.reshape(-1, n), R.reshape(-1, n)
    defined = ~np.isnan(P) & ~np.isnan(R)
    if method in ENVELOPE_METHODS:
        levels = COCO101_RECALLS if method == "coco101" else VOC11_RECALLS
        ap = _interpolated(P, R, defined, levels).mean(axis=-1)
    else:
        previous = _previous_defined(defined)
        has_previous = previous >= 0
        safe = np.maximum(previous, 0)
        previous_R = np.where(has_previous, np.take_along_axis(R, safe, axis=-1), 0.0)
        if method == "trapezoid":  # hpatches: the curve starts at (recall 0, precision 1)
            previous_P = np.where(has_previous, np.take_along_axis(P, safe, axis=-1), 1.0)
            area = (R - previous_R) * (P + previous_P) / 2
        else:  # step, ir, vlfeat: one formula on a curve (a tie group is one point)
            area = (R - previous_R) * P
        ap = np.where(defined, area, 0.0).sum(axis=-1)
    ap = np.where(np.isnan(R).all(axis=-1), np.nan, ap)
    return ap.reshape(batch)


@validate_params(method=Choice(AP_METHODS), dim=Text())
def curve_average_precision(
    precision: Any, recall: Any, *, method: str = "coco101", dim: str = "threshold"
) -> Any:
    r"""Average precision of curves given as points along ``dim``, thresholds decreasing.

    Points where precision or recall is undefined (NaN) are not on the curve.

    ``"coco101"``, ``"voc11"`` (interpolated)
        mean over the recall levels :math:`t` (101 of COCO, 11 of VOC 2007) of
        :math:`p(t) = \max\{P_n : R_n \ge t\}`, 0 when no point reaches :math:`t`. Defined for
        any set of points, also when recall goes down along the curve.
    ``"step"`` (and ``"ir"``, ``"vlfeat"``)
        :math:`\sum_n (R_n - R_{n-1}) P_n` with :math:`R_0 = 0`. A curve point holds a whole
        group of tied confidences, so the three per-item conventions of the core are one
        formula here; they agree with the core on ranked lists without tied scores.
    ``"trapezoid"``
        trapezoid area from the point (recall 0, precision 1) through the curve points
        (hpatches-benchmark).

    Parameters
    ----------
    precision, recall : DataArray or array-like
        Curve points; NumPy inputs on the last axis, DataArrays along ``dim`` (other dims kept).
    method : str
        One of :data:`metricalc.AP_METHODS`.
    dim : str
        Curve dimension of DataArray inputs.

    Returns
    -------
    float, ndarray or DataArray
        One AP per curve; NaN for a curve whose recall is undefined everywhere (no ground
        truth).

    Examples
    --------
    >>> from metricalc.decompose import curve_average_precision
    >>> P, R = [1.0, 0.5, 0.667], [0.5, 0.5, 1.0]
    >>> float(curve_average_precision(P, R, method="step"))
    0.8335
    >>> round(float(curve_average_precision(P, R, method="coco101")), 4)
    0.8351
    """
    labeled = is_labeled(precision, recall)
    ap = apply_kernel(
        _curve_ap_kernel,
        {"precision": precision, "recall": recall},
        core=("precision", "recall"),
        dim=dim if labeled else None,
        kwargs={"method": method},
    )
    return unwrap(ap, labeled)


@validate_params(method=Choice(AP_METHODS))
def factor_ap(curves: xr.Dataset, *, method: str = "coco101") -> xr.Dataset:
    r"""AP of the composed curve, of every factor curve, and the product of the factor APs.

    AP does not factor: :math:`AP(P_L P_{C|L}, R_L R_{C|L}) \ne AP_L \cdot AP_{C|L}` in
    general (docs/decomposition.md); ``factor_ap_product`` is there to show by how much.

    Parameters
    ----------
    curves : xarray.Dataset
        The output of :func:`~metricalc.decompose.decompose`.
    method : str
        Any of :data:`metricalc.AP_METHODS` (see :func:`curve_average_precision`).

    Returns
    -------
    xarray.Dataset
        ``ap`` (composed curve), ``factor_ap`` (over ``stage``) and ``factor_ap_product``, with
        the batch dims of ``curves``; attrs ``method``.

    Examples
    --------
    >>> from metricalc.decompose import decompose, factor_ap
    >>> d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    >>> aps = factor_ap(d, method="step")
    >>> float(aps.ap), aps.factor_ap.values.round(4).tolist()
    (0.5, [0.9167, 0.8611])
    """
    ap = _composed_ap(curves, method)
    factors = curve_average_precision(
        curves["factor_precision"], curves["factor_recall"], method=method
    )
    return _per_chain(
        {"ap": ap, "factor_ap": factors, "factor_ap_product": factors.prod(STAGE, skipna=False)},
        method,
    )


def _composed_ap(curves: xr.Dataset, method: str) -> xr.DataArray:
    """AP of the composed curve (``precision``, ``recall``) of every chain of ``curves``, by
    ``method`` (checked)."""
    ap: xr.DataArray = curve_average_precision(
        curves["precision"], curves["recall"], method=method
    )
    return ap


def _per_chain(values: Mapping[str, xr.DataArray], method: str) -> xr.Dataset:
    """Per-chain APs as a Dataset with attrs ``method``, without non-dimension coordinates."""
    result = xr.Dataset(values)
    result.attrs["method"] = method
    return result.drop_vars([c for c in result.coords if c not in result.dims], errors="ignore")


def _interpolation_kernel(precision: np.ndarray, recall: np.ndarray, *, levels: np.ndarray) -> Any:
    P, R = as_numbers("precision", precision), as_numbers("recall", recall)
    batch, n = P.shape[:-1], P.shape[-1]
    P, R = P.reshape(-1, max(n, 1))[:, :n], R.reshape(-1, max(n, 1))[:, :n]
    defined = ~np.isnan(P) & ~np.isnan(R)
    values = _interpolated(P, R, defined, levels) if n else np.zeros((P.shape[0], levels.size))
    values[np.isnan(R).all(axis=-1)] = np.nan
    return values.reshape(*batch, levels.size)


@validate_params(dim=Text())
def interpolated_precision(
    precision: Any, recall: Any, *, levels: Any = COCO101_RECALLS, dim: str = "threshold"
) -> xr.DataArray:
    r"""Interpolated precision :math:`p(t) = \max\{P_n : R_n \ge t\}` at recall levels t.

    The curve ``coco101`` averages (0 where no point reaches t, NaN for a curve whose recall is
    undefined everywhere); averaging it over categories gives the PR curve COCO plots.

    Parameters
    ----------
    precision, recall : DataArray
        Curve points along ``dim``.
    levels : array-like
        Recall levels (default COCO's 101).

    Returns
    -------
    xarray.DataArray
        ``dim`` replaced by ``recall_level``.

    Examples
    --------
    >>> import xarray as xr
    >>> from metricalc.decompose import interpolated_precision
    >>> P = xr.DataArray([1.0, 0.5, 0.667], dims="threshold")
    >>> R = xr.DataArray([0.5, 0.5, 1.0], dims="threshold")
    >>> interpolated_precision(P, R, levels=[0.0, 0.5, 0.75]).values.tolist()
    [1.0, 1.0, 0.667]
    """
    grid = np.asarray(levels, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or (np.diff(grid) <= 0).any():
        raise InvalidInputError(f"levels must be increasing recall levels; got {grid.tolist()}")
    values: xr.DataArray = apply_kernel(
        _interpolation_kernel,
        {"precision": precision, "recall": recall},
        core=("precision", "recall"),
        dim=dim,
        output_core_dims=[["recall_level"]],
        output_sizes={"recall_level": grid.size},
        kwargs={"levels": grid},
    )
    return values.assign_coords(recall_level=grid)
