"""What-if analysis: the composed AP when one stage is made perfect, and compound metrics.

Making stage k perfect sets its factor curves to 1 (:math:`P_k = R_k = 1` at every threshold);
the composed curve becomes the product of the other factors. Comparing the composed AP with
each stage made perfect says which stage limits the result ("a perfect localizer would raise AP
from 41 to 63; a perfect classifier to 48"). A compound metric (mAP) is a monotone function F of
per-chain APs, so the same table holds for it after F.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.ranking import AP_METHODS
from metricalc.decompose.ap import _composed_ap, _per_chain, curve_average_precision
from metricalc.decompose.chain import STAGE, THRESHOLD
from metricalc.errors import InvalidInputError
from metricalc.validation import Choice, Function, Nullable, validate_params

__all__ = [
    "compound",
    "compound_table",
    "nanmean",
    "perfect_stage_curves",
    "what_if",
    "what_if_table",
]

Aggregate = Callable[[np.ndarray], np.ndarray]
"""F of a compound metric: maps an array (..., n) of per-chain APs to (...) along the last axis."""

PERFECT = "perfect"
PERFECT_STAGE = "its factor precision and recall 1 at every threshold, the other stages as measured"
"""What the what-if analysis assumes of a perfect stage (said in the headlines of its table and
figure)."""


def nanmean(values: np.ndarray) -> np.ndarray:
    """Mean of the defined values along the last axis, NaN if none (COCO's mAP over categories
    with ground truth): the default F of :func:`compound`.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.decompose import nanmean
    >>> nanmean(np.array([[0.2, np.nan, 0.4], [np.nan, np.nan, np.nan]])).round(3).tolist()
    [0.3, nan]
    """
    values = np.asarray(values, dtype=np.float64)
    defined = ~np.isnan(values)
    count = defined.sum(axis=-1)
    total = np.where(defined, values, 0.0).sum(axis=-1)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _dims(ap: xr.DataArray, dims: str | Sequence[str] | None) -> list[str]:
    if dims is None:
        return [str(d) for d in ap.dims]
    names = [dims] if isinstance(dims, str) else [str(d) for d in dims]
    unknown = [d for d in names if d not in ap.dims]
    if unknown:
        raise InvalidInputError(f"dims {unknown} are not dims of the APs {tuple(ap.dims)}")
    return names


@validate_params(F=Nullable(Function()))
def compound(
    ap: xr.DataArray, *, dims: str | Sequence[str] | None = None, F: Aggregate | None = None
) -> xr.DataArray:
    r"""A compound metric :math:`M = F(AP^1, \dots, AP^K)` over the chains along ``dims``.

    With F the mean over categories this is mAP; with F the mean over IoU thresholds and
    categories it is COCO's AP. F must be non-decreasing in every argument for the compound
    metric to inherit the decomposition's monotonicity
    (:func:`~metricalc.decompose.compound_monotonicity` checks it).

    Parameters
    ----------
    ap : xarray.DataArray
        Per-chain APs (e.g. over ``iou`` and ``category``).
    dims : str or sequence of str, optional
        The dims F reduces (default all).
    F : callable, optional
        Maps an array (..., n) to (...) along its last axis; default :func:`nanmean`.

    Examples
    --------
    >>> import xarray as xr
    >>> from metricalc.decompose import compound
    >>> ap = xr.DataArray([0.5, float("nan"), 0.7], dims="category")
    >>> round(float(compound(ap)), 6)
    0.6
    """
    names = _dims(ap, dims)
    function = F or nanmean
    stacked = ap.stack(_args=names) if names else ap.expand_dims(_args=1)
    result: xr.DataArray = xr.apply_ufunc(function, stacked, input_core_dims=[["_args"]])
    return result.rename(ap.name)


def _exact_without(counts: np.ndarray, totals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Numerator and denominator of :math:`\prod_{j \ne k} r_j` for every stage k.

    ``counts`` and ``totals`` (..., K + 1, L) give the rates :math:`q_j = c_j / t_j` of the
    chains 0..K (:math:`q_0` the start), and :math:`r_j = q_j / q_{j-1}`; the product
    telescopes to :math:`\frac{q_K}{q_0} \cdot \frac{q_{k-1}}{q_k}`
    (:math:`\frac{q_{K-1}}{q_0}` for k = K), a ratio of products of integers that the caller
    divides once. Returns (numerator, denominator), each (K, ..., L).
    """
    K = counts.shape[-2] - 1
    c = [counts[..., j, :] for j in range(K + 1)]
    t = [totals[..., j, :] for j in range(K + 1)]
    num = [c[K] * c[k - 1] * t[k] * t[0] for k in range(1, K)] + [c[K - 1] * t[0]]
    den = [t[K] * t[k - 1] * c[k] * c[0] for k in range(1, K)] + [t[K - 1] * c[0]]
    return np.stack(num), np.stack(den)


def perfect_stage_curves(curves: xr.Dataset) -> xr.Dataset:
    r"""The composed curves with each stage in turn made perfect (its factors set to 1).

    .. math::

        P^{(k)} = \prod_{j \ne k} P_j = \frac{T_K}{T_0} \cdot \frac{T_{k-1}}{T_k}, \qquad
        R^{(k)} = \prod_{j \ne k} R_j = \frac{F_K}{G_K} \cdot \frac{F_{k-1} / G_{k-1}}{F_k / G_k}

    Defined where every factor but the k-th is. The values are computed from the counts with
    one division (exactly rounded while the products of counts stay below :math:`2^{53}`), not
    as a product of rounded factors: COCO's interpolated AP jumps at recall levels such as 0.1,
    and :math:`0.3 \cdot (1/3)` rounds to just below 0.1. With the last stage perfect the curve
    is bit for bit that of the chain without it. Where a factor was filled by a
    ``zero_division`` policy, the product of the factors is kept.

    Returns
    -------
    xarray.Dataset
        ``precision`` and ``recall`` over a new leading dim ``perfect`` (one entry per stage,
        labelled by the stage names) and the dims of ``curves`` but ``stage``.

    Examples
    --------
    >>> from metricalc.decompose import decompose, perfect_stage_curves
    >>> d = decompose([0.9, 0.8], [[1, 1], [1, 0]], 2)
    >>> perfect_stage_curves(d).precision.sel(perfect="L").values.tolist()   # P_C|L alone
    [1.0, 0.5]
    """
    stages = curves[STAGE]
    perfect = xr.DataArray(stages.values, dims=PERFECT, coords={PERFECT: stages.values})
    is_perfect = stages == perfect
    order = [d for d in curves["factor_precision"].dims if d not in (STAGE, THRESHOLD)]
    ordered = curves.transpose(..., STAGE, THRESHOLD)
    tp, found = ordered["tp"].values, ordered["found"].values
    ones = np.ones_like(found[..., :1, :])
    G = np.concatenate([ones[..., 0], ordered["n_ground_truth"].values], axis=-1)[..., None]
    # (counts, totals) of the rates of chains 0..K: T_k / T_0 and F_k / G_k
    chains: dict[str, tuple[np.ndarray, np.ndarray | int]] = {
        "precision": (np.concatenate([ordered["n_selected"].values[..., None, :], tp], -2), 1),
        "recall": (np.concatenate([ones, found], axis=-2), G),
    }
    out = {}
    for name, (counts, totals) in chains.items():
        product = xr.where(is_perfect, 1.0, curves[f"factor_{name}"])  # type: ignore[no-untyped-call]
        product = product.prod(STAGE, skipna=False)
        product = product.transpose(PERFECT, *order, THRESHOLD)
        totals = np.broadcast_to(totals, counts.shape).astype(np.int64)
        num, den = _exact_without(counts.astype(np.int64), totals)
        keep = product.notnull().values & (den > 0)
        exact = num / np.where(keep, den, 1)
        out[name] = product.copy(data=np.where(keep, exact, product.values))
    return xr.Dataset(out)


@validate_params(method=Choice(AP_METHODS))
def what_if(curves: xr.Dataset, *, method: str = "coco101") -> xr.Dataset:
    """Composed AP, and composed AP with each stage made perfect, per chain.

    Parameters
    ----------
    curves : xarray.Dataset
        The output of :func:`~metricalc.decompose.decompose`.
    method : str
        AP method (:func:`~metricalc.decompose.curve_average_precision`).

    Returns
    -------
    xarray.Dataset
        ``ap`` (the composed curve :math:`P_D, R_D`), ``ap_if_perfect`` over ``stage`` and
        ``gain = ap_if_perfect - ap``, with the batch dims of ``curves``. A chain whose
        what-if curve is undefined at every point (no prediction passes the remaining stages,
        so no factor of theirs is defined) gets AP 0 where its composed AP is defined, so that
        compound means cover the same chains.

    Examples
    --------
    >>> from metricalc.decompose import decompose, what_if
    >>> d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    >>> w = what_if(d, method="step")
    >>> float(w.ap)
    0.5
    >>> dict(zip(w.stage.values.tolist(), w.ap_if_perfect.values.round(4).tolist()))
    {'L': 0.8611, 'C|L': 0.9167}
    """
    ap = _composed_ap(curves, method)
    perfect = perfect_stage_curves(curves)
    if_perfect = curve_average_precision(perfect["precision"], perfect["recall"], method=method)
    # no prediction reaches the remaining stages anywhere: nothing succeeds, AP 0 (not NaN,
    # which would drop the chain from a compound mean the composed AP keeps)
    if_perfect = xr.where(if_perfect.isnull() & ap.notnull(), 0.0, if_perfect)  # type: ignore[no-untyped-call]
    if_perfect = if_perfect.rename({PERFECT: STAGE})
    return _per_chain({"ap": ap, "ap_if_perfect": if_perfect, "gain": if_perfect - ap}, method)


@validate_params(method=Choice(AP_METHODS), F=Nullable(Function()))
def what_if_table(
    curves: xr.Dataset,
    *,
    method: str = "coco101",
    dims: str | Sequence[str] | None = None,
    F: Aggregate | None = None,
) -> pd.DataFrame:
    """The what-if table: one row per stage, compound AP now and with that stage made perfect.

    Parameters
    ----------
    curves, method
        As :func:`what_if`.
    dims : str or sequence of str, optional
        Batch dims the compound metric reduces (default: every batch dim).
    F : callable, optional
        Compound function (default :func:`nanmean`, i.e. mAP).

    Returns
    -------
    pandas.DataFrame
        Index ``stage``; columns ``ap`` (the composed AP, same on every row), ``ap_if_perfect``
        and ``gain``, sorted by stage order.

    Examples
    --------
    >>> from metricalc.decompose import decompose, what_if_table
    >>> d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    >>> what_if_table(d, method="step").round(4).to_dict("index")["L"]
    {'ap': 0.5, 'ap_if_perfect': 0.8611, 'gain': 0.3611}
    """
    return compound_table(what_if(curves, method=method), dims=dims, F=F)


def compound_table(
    scenario: xr.Dataset,
    *,
    dims: str | Sequence[str] | None = None,
    F: Aggregate | None = None,
) -> pd.DataFrame:
    """The what-if table from per-chain what-if APs (the output of :func:`what_if`), compound
    over ``dims`` with F; see :func:`what_if_table`.

    Examples
    --------
    >>> from metricalc.decompose import decompose, what_if
    >>> from metricalc.decompose.whatif import compound_table
    >>> d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    >>> compound_table(what_if(d, method="step")).round(4)["ap_if_perfect"].tolist()
    [0.8611, 0.9167]
    """
    names = [str(d) for d in scenario["ap"].dims] if dims is None else _dims(scenario["ap"], dims)
    ap = compound(scenario["ap"], dims=names, F=F)
    if_perfect = compound(scenario["ap_if_perfect"], dims=names, F=F)
    rest = [d for d in if_perfect.dims if d != STAGE]
    if rest:
        raise InvalidInputError(
            f"what_if_table: dims {rest} are left after the compound; pass dims= covering them"
        )
    frame = pd.DataFrame(
        {
            "ap": float(ap),
            "ap_if_perfect": if_perfect.values.astype(float),
        },
        index=pd.Index(if_perfect[STAGE].values.tolist(), name=STAGE),
    )
    frame["gain"] = frame["ap_if_perfect"] - frame["ap"]
    return frame
