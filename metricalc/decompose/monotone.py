r"""Numerical checks of the decomposition theorems (docs/decomposition.md).

1. **Decomposable metrics.** If every factor curve does not decrease (pointwise, at every
   threshold), the composed AP does not decrease. For the interpolated AP methods
   (``coco101``, ``voc11``) this is a theorem: the composed points :math:`(\prod_k P_k,
   \prod_k R_k)` move up and right, so the set :math:`\{n : R_n \ge t\}` only grows and its
   precisions only rise, and :math:`p(t) = \max\{P_n : R_n \ge t\}` rises at every level t.
   For ``step`` (and ``trapezoid``) it is *not*: raising the recall of one point moves area to a
   point of lower precision (``tests/decompose/test_decompose.py`` holds a counterexample), so the
   check
   below reports violations instead of assuming the theorem.
2. **Compound decomposable metrics.** :math:`M = F(AP^1, \dots, AP^K)` inherits 1 when F is
   non-decreasing in every argument (the mean of mAP is); :func:`compound_monotonicity` checks F.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from metricalc.core.ranking import AP_METHODS
from metricalc.decompose.ap import curve_average_precision
from metricalc.decompose.chain import STAGE
from metricalc.decompose.whatif import Aggregate, _dims, nanmean
from metricalc.errors import InvalidInputError
from metricalc.validation import (
    Choice,
    Function,
    Integer,
    ListOf,
    Nullable,
    Real,
    validate_params,
)

__all__ = [
    "compound_monotonicity",
    "improvement_check",
    "monotonicity_check",
    "random_improvement",
]

TOLERANCE = 1e-12


def _product_ap(factor_precision: xr.DataArray, factor_recall: xr.DataArray, method: str) -> Any:
    return curve_average_precision(
        factor_precision.prod(STAGE, skipna=False),
        factor_recall.prod(STAGE, skipna=False),
        method=method,
    )


@validate_params(method=Choice(AP_METHODS))
def improvement_check(
    curves: xr.Dataset, improved: xr.Dataset, *, method: str = "coco101"
) -> xr.Dataset:
    r"""Does improving the factor curves lower the composed AP?

    Parameters
    ----------
    curves : xarray.Dataset
        The original curves (output of :func:`~metricalc.decompose.decompose`).
    improved : xarray.Dataset
        ``factor_precision`` and ``factor_recall`` of the same shape (e.g. from
        :func:`random_improvement`, or a better detector's factors on the same thresholds).
    method : str
        AP method.

    Returns
    -------
    xarray.Dataset
        Per chain: ``ap_before`` and ``ap_after`` (AP of the product of the factors),
        ``gain``, ``improved`` (every factor point is at least its original, where defined) and
        ``holds`` (not improved, or the gain is :math:`\ge -10^{-12}`).

    Examples
    --------
    >>> from metricalc.decompose import decompose, improvement_check, random_improvement
    >>> d = decompose([0.9, 0.8, 0.7], [[1, 1], [1, 0], [0, 0]], 3)
    >>> check = improvement_check(d, random_improvement(d, seed=1))
    >>> bool(check.improved), bool(check.holds), float(check.gain) >= 0
    (True, True, True)
    """
    for name in ("factor_precision", "factor_recall"):
        if name not in improved or improved[name].shape != curves[name].shape:
            raise InvalidInputError(
                f"improved must hold {name} with the shape of the original curves "
                f"{curves[name].shape}"
            )
    before = _product_ap(curves["factor_precision"], curves["factor_recall"], method)
    after = _product_ap(improved["factor_precision"], improved["factor_recall"], method)
    better = []
    for name in ("factor_precision", "factor_recall"):
        old, new = curves[name], improved[name]
        ok = (new >= old) | old.isnull()
        better.append(ok.all([STAGE, "threshold"]))
    is_improved = better[0] & better[1]
    gain = after - before
    holds = ~is_improved | (gain >= -TOLERANCE) | gain.isnull()
    result = xr.Dataset(
        {
            "ap_before": before,
            "ap_after": after,
            "gain": gain,
            "improved": is_improved,
            "holds": holds,
        }
    )
    result.attrs["method"] = method
    return result


@validate_params(seed=Integer(0))
def random_improvement(
    curves: xr.Dataset, *, stages: str | Sequence[str] | None = None, seed: int = 0
) -> xr.Dataset:
    r"""Randomly improved factor curves: each point moves a random share towards its best value.

    .. math:: P'_k = P_k + u (1 - P_k), \qquad R'_k = R_k + v (\max(R_k, 1) - R_k)

    with :math:`u, v \sim U(0, 1)` drawn per point, for the chosen stages (default all).
    Recall factors above 1 (counting predictions without one-to-one matching) stay put.

    Returns
    -------
    xarray.Dataset
        ``factor_precision`` and ``factor_recall`` of the same shape as in ``curves``.

    Examples
    --------
    >>> from metricalc.decompose import decompose, random_improvement
    >>> d = decompose([0.9, 0.8], [[1, 0], [1, 1]], 2)
    >>> better = random_improvement(d, stages="C|L", seed=0)
    >>> bool((better.factor_precision >= d.factor_precision).all())
    True
    """
    rng = np.random.default_rng(seed)
    names = curves[STAGE].values.tolist()
    chosen = names if stages is None else ([stages] if isinstance(stages, str) else list(stages))
    unknown = [s for s in chosen if s not in names]
    if unknown:
        raise InvalidInputError(f"stages {unknown} are not stages of the curves {names}")
    selected = curves[STAGE].isin(chosen)
    out = {}
    for name in ("factor_precision", "factor_recall"):
        factor = curves[name]
        share = factor.copy(data=rng.random(factor.shape))
        best = np.maximum(factor, 1.0)
        improved = xr.where(selected, factor + share * (best - factor), factor)  # type: ignore[no-untyped-call]
        out[name] = improved.transpose(*factor.dims)
    return xr.Dataset(out)


@validate_params(method=Choice(AP_METHODS), trials=Integer(1), seed=Integer(0))
def monotonicity_check(
    curves: xr.Dataset, *, method: str = "coco101", trials: int = 20, seed: int = 0
) -> xr.Dataset:
    """Random improvements of each stage (and of all at once): the composed AP must not drop.

    Parameters
    ----------
    curves : xarray.Dataset
        The output of :func:`~metricalc.decompose.decompose`.
    method : str
        AP method; the theorem holds for ``coco101`` and ``voc11`` (module docstring).
    trials : int
        Random improvements per stage.
    seed : int
        Seed of the random improvements.

    Returns
    -------
    xarray.Dataset
        Over ``improved_stage`` (every stage, then ``"all"``): ``min_gain`` (the smallest change
        of the composed AP over trials and chains) and ``holds``; attrs ``method``,
        ``trials``.

    Examples
    --------
    >>> from metricalc.decompose import decompose, monotonicity_check
    >>> d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    >>> bool(monotonicity_check(d, method="coco101").holds.all())
    True
    """
    names = curves[STAGE].values.tolist()
    rng = np.random.default_rng(seed)
    labels, min_gain = [], []
    for stage in [*names, "all"]:
        worst = np.inf
        for _ in range(trials):
            improved = random_improvement(
                curves,
                stages=None if stage == "all" else stage,
                seed=int(rng.integers(2**32)),
            )
            check = improvement_check(curves, improved, method=method)
            gain = check["gain"].values
            if np.isfinite(gain).any():
                worst = min(worst, float(np.nanmin(gain)))
        labels.append(stage)
        min_gain.append(worst if np.isfinite(worst) else np.nan)
    gains = np.array(min_gain)
    result = xr.Dataset(
        {
            "min_gain": ("improved_stage", gains),
            "holds": ("improved_stage", ~(gains < -TOLERANCE)),
        },
        coords={"improved_stage": labels},
    )
    result.attrs.update(method=method, trials=trials)
    return result


@validate_params(F=Nullable(Function()), steps=ListOf(Real(0, 1, closed="right")))
def compound_monotonicity(
    ap: xr.DataArray,
    *,
    dims: str | Sequence[str] | None = None,
    F: Aggregate | None = None,
    steps: Sequence[float] = (0.1, 0.5, 1.0),
) -> xr.Dataset:
    r"""Check that a compound metric :math:`F(AP^1, \dots, AP^K)` is monotone in each argument.

    Each defined argument :math:`AP^i` in turn is raised to :math:`AP^i + s(1 - AP^i)` for every
    step s; F must not decrease.

    Parameters
    ----------
    ap, dims, F
        As for :func:`~metricalc.decompose.compound`: per-chain APs (an xarray.DataArray), the
        dims F reduces (default all), F (default :func:`nanmean`).
    steps : sequence of float
        Shares of the distance to 1 each argument is raised by, in (0, 1].

    Returns
    -------
    xarray.Dataset
        Over the argument dims: ``min_change`` (smallest change of F when that argument rises;
        NaN for undefined arguments) and ``monotone``; scalar ``value`` (F at ``ap``).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from metricalc.decompose import compound_monotonicity
    >>> ap = xr.DataArray([0.2, 0.5, 0.9], dims="category")
    >>> bool(compound_monotonicity(ap).monotone.all())
    True
    >>> spread = lambda a: np.nanstd(a, axis=-1)          # not monotone: raising 0.9 widens it
    >>> compound_monotonicity(ap, F=spread).monotone.values.tolist()
    [False, False, True]
    """
    names = _dims(ap, dims)
    if not names:
        raise InvalidInputError("compound_monotonicity needs at least one argument dim")
    shares = np.asarray(list(steps), dtype=np.float64)
    function = F or nanmean
    stacked = ap.stack(_args=names).transpose(..., "_args")
    values = stacked.values  # (..., n)
    n = values.shape[-1]
    base = np.asarray(function(values), dtype=np.float64)
    eye = np.eye(n, dtype=bool)
    changes = np.full((*values.shape[:-1], n), np.inf)
    for share in shares:
        raised = np.where(
            eye, values[..., None, :] + share * (1 - values[..., None, :]), values[..., None, :]
        )  # (..., n arguments, n values)
        change = np.asarray(function(raised), dtype=np.float64) - base[..., None]
        changes = np.minimum(changes, change)
    changes = np.where(np.isnan(values), np.nan, changes)
    min_change = stacked.copy(data=changes).unstack("_args")
    result = xr.Dataset(
        {
            "min_change": min_change,
            "monotone": ~(min_change < -TOLERANCE),
            "value": xr.DataArray(base, dims=stacked.dims[:-1]),
        }
    )
    return result
