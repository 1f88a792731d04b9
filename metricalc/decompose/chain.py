"""The decomposition engine: a chain of stages, its counts along the confidence threshold, the
factor precision and recall curves, their product and the composed curve (docs/decomposition.md).

A composed task succeeds on a prediction when every stage of a chain succeeds: localization L,
then classification given localization C|L, then segmentation given both S|C,L, and so on.
Everything here is built from counts (the core's :func:`~metricalc.counts_at_thresholds`):
keeping the predictions with confidence :math:`\\ge \\delta`,

- :math:`TP_0(\\delta)` (``n_selected``) predictions are kept,
- :math:`TP_k(\\delta)` (``tp``) of them pass stages 1..k,
- :math:`FP_k(\\delta) = TP_{k-1} - TP_k` (``fp``) reach stage k and fail it,
- :math:`F_k(\\delta)` (``found``) ground-truth items are reached through stages 1..k, out of
  :math:`G_k` (``n_ground_truth``).

The factor curves are ratios of consecutive counts, so their products telescope to the
composed curve exactly; :func:`verify` measures how exactly in floating point.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypedDict, Unpack

import numpy as np
import xarray as xr

from metricalc.core.confusion import counts_at_thresholds, precision
from metricalc.decompose.inputs import (
    DEFAULT_STAGES,
    as_bool,
    as_float,
    chain_shape,
    check_batch_dims,
    found_at_array,
    ground_truth_counts,
    stage_names,
)
from metricalc.errors import InvalidInputError
from metricalc.validation import (
    ZERO_DIVISION,
    Text,
    ZeroDivision,
    fill_value,
    validate_params,
    warn_undefined,
)

__all__ = [
    "DEFAULT_STAGES",
    "ChainOptions",
    "chain_counts",
    "decompose",
    "factor_curves",
    "stack_chains",
]

STAGE, THRESHOLD = "stage", "threshold"

COUNT_VARIABLES = ("n_selected", "tp", "fp", "found")
"""Counts along ``threshold``; padding a chain repeats their final value."""


class ChainOptions(TypedDict, total=False):
    """The keyword options of :func:`chain_counts`, which :func:`decompose` passes on."""

    stages: Sequence[str] | None
    counted: Any
    found_at: Any
    batch_dims: Sequence[str]
    coords: Mapping[Hashable, Any] | None


# --------------------------------------------------------------------------------------------
# Counts
# --------------------------------------------------------------------------------------------


def _selected_counts(
    confidence: np.ndarray, passed: np.ndarray, counted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cutoffs and counts of the rows [counted, counted & passed_1, ..., counted & passed_K].

    One call of the core's :func:`counts_at_thresholds`: row 0 counts the kept predictions, row
    k the predictions through stages 1..k. Every row of one chain shares the chain's confidences,
    so they share the thresholds; chains with fewer distinct confidences are padded by the core
    (final point repeated, cutoff NaN).
    """
    rows = np.concatenate([counted[..., None, :], passed & counted[..., None, :]], axis=-2)
    scores = np.broadcast_to(confidence[..., None, :], rows.shape)
    counts = counts_at_thresholds(rows, scores)
    tp = counts["tp"].values  # (..., 1 + K, L)
    cutoff = counts["cutoff"].values[..., 0, :]
    return cutoff, tp


def _found_counts(found_at: np.ndarray, cutoff: np.ndarray) -> np.ndarray:
    """``found[..., k, j]``: items with ``found_at[..., :, k] >= cutoff[..., j]``.

    Padded thresholds (cutoff NaN) repeat the chain's final point.
    """
    batch, (m, k) = found_at.shape[:-2], found_at.shape[-2:]
    length = cutoff.shape[-1]
    filled = cutoff.copy()
    if length:
        # padding is at the end: carry the last real cutoff forward (all-NaN rows: nothing kept)
        index = np.where(np.isnan(filled), 0, np.arange(length))
        last = np.maximum.accumulate(index, axis=-1)
        filled = np.take_along_axis(filled, last, axis=-1)
        filled = np.where(np.isnan(filled), np.inf, filled)
    found = np.empty((*batch, k, length), dtype=np.int64)
    ordered = np.sort(found_at, axis=-2)  # ascending along items
    for chain in np.ndindex(*batch):  # one searchsorted per chain and stage: bounded work
        for stage in range(k):
            column = ordered[(*chain, slice(None), stage)]
            found[(*chain, stage)] = m - np.searchsorted(column, filled[chain], side="left")
    return found


def _ratio(numerator: np.ndarray, denominator: np.ndarray, zero_division: ZeroDivision) -> Any:
    """numerator / denominator (one division, float64), ``zero_division`` where it is 0."""
    undefined = denominator == 0
    if zero_division == "warn":
        warn_undefined("a decomposition ratio", int(undefined.sum()), zero_division)
    value = numerator / np.where(undefined, 1, denominator)
    return np.where(undefined, fill_value(zero_division), value).astype(np.float64)


@validate_params(zero_division=ZERO_DIVISION)
def decompose(
    confidence: Any,
    outcomes: Any,
    n_ground_truth: Any,
    *,
    zero_division: ZeroDivision = "nan",
    **options: Unpack[ChainOptions],
) -> xr.Dataset:
    r"""Counts and factor curves of a chain of stages along the confidence threshold.

    Each prediction :math:`i` has a confidence :math:`s_i` and one outcome per stage,
    :math:`o_{ik}` (stage k succeeds, given stages 1..k-1 did; read only where they did). The
    threshold :math:`\delta` runs over the distinct confidences, decreasing, keeping
    :math:`s_i \ge \delta`:

    .. math::

        TP_0 = \#\{i : s_i \ge \delta\}, \quad
        TP_k = \#\{i : s_i \ge \delta, o_{i1} \wedge \dots \wedge o_{ik}\}, \quad
        FP_k = TP_{k-1} - TP_k

    Recall counts items on the ground-truth side: item :math:`j` is reached through stage k at
    confidence :math:`f_{jk}` (``found_at``), so :math:`F_k(\delta) = \#\{j : f_{jk} \ge
    \delta\}` out of :math:`G_k` (``n_ground_truth``). The factor curves are

    .. math::

        P_k = \frac{TP_k}{TP_{k-1}}, \qquad
        R_1 = \frac{F_1}{G_1}, \quad R_k = \frac{F_k / G_k}{F_{k-1} / G_{k-1}},

    and the composed curve :math:`P_D = TP_K / TP_0`, :math:`R_D = F_K / G_K` equals their
    product wherever every factor is defined (the fractions telescope).

    Parameters
    ----------
    confidence : array-like, shape (..., n)
        Confidence of each prediction (higher = more confident); NaN refused. Leading axes are
        independent chains (``batch_dims``).
    outcomes : array-like of bool, shape (..., n, K)
        Stage outcomes, one column per stage, in chain order.
    n_ground_truth : int or array-like of int, shape (..., K)
        :math:`G_k`, the ground-truth items of each stage (a scalar: the same for every stage).
    stages : sequence of str, optional
        Stage names (default ``"L"``, ``"C|L"``, ``"S|C,L"``).
    counted : array-like of bool, shape (..., n), optional
        Predictions that count (default all). Predictions that do not count (e.g. COCO's
        ignored detections, or padding) add a threshold but no count.
    found_at : array-like, shape (..., m, K), optional
        Ground-truth side: the confidence at which item j is reached through stage k, ``-inf``
        if never; must not increase along the chain. Default: the counted predictions
        themselves (:math:`f_{ik} = s_i` when they pass stages 1..k), i.e. recall counts
        predictions, without one-to-one matching.
    batch_dims : sequence of str
        Names of the leading (chain) axes.
    coords : mapping, optional
        Coordinates of the batch dims.
    zero_division : {"nan", "warn", 0, 1}
        Value of a ratio whose denominator is 0 (a factor after a stage nothing passed).

    Returns
    -------
    xarray.Dataset
        Along ``threshold`` (and ``stage``; batch dims first): ``n_selected``, ``tp``, ``fp``,
        ``found``, ``n_ground_truth``, ``factor_precision``, ``factor_recall``,
        ``product_precision``, ``product_recall``, ``precision`` (:math:`P_D`), ``recall``
        (:math:`R_D`), coordinate ``cutoff``. A chain with no prediction has one point with
        nothing selected (cutoff NaN); shorter chains of a batch are padded by repeating their
        final point (cutoff NaN), which adds nothing to any AP.

    Examples
    --------
    >>> from metricalc.decompose import decompose
    >>> d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    >>> d.tp.values.tolist()                       # through L, through L and C|L
    [[1, 2, 2, 3], [1, 1, 1, 2]]
    >>> d.factor_precision.sel(stage="C|L").values.round(3).tolist()
    [1.0, 0.5, 0.5, 0.667]
    >>> d.precision.values.tolist(), d.product_precision.values.tolist()
    ([1.0, 0.5, 0.3333333333333333, 0.5], [1.0, 0.5, 0.3333333333333333, 0.5])
    """
    counts = chain_counts(confidence, outcomes, n_ground_truth, **options)
    return factor_curves(counts, zero_division=zero_division)


def chain_counts(
    confidence: Any,
    outcomes: Any,
    n_ground_truth: Any,
    *,
    stages: Sequence[str] | None = None,
    counted: Any = None,
    found_at: Any = None,
    batch_dims: Sequence[str] = (),
    coords: Mapping[Hashable, Any] | None = None,
) -> xr.Dataset:
    """The counts of :func:`decompose` alone (``n_selected``, ``tp``, ``fp``, ``found``,
    ``n_ground_truth``, coordinate ``cutoff``), for chains assembled later with
    :func:`stack_chains`; arguments as :func:`decompose`.

    Examples
    --------
    >>> from metricalc.decompose import chain_counts, factor_curves
    >>> counts = chain_counts([0.9, 0.8], [[1, 1], [1, 0]], 2)
    >>> sorted(counts.data_vars)
    ['found', 'fp', 'n_ground_truth', 'n_selected', 'tp']
    >>> factor_curves(counts).precision.values.tolist()
    [1.0, 0.5]
    """
    scores = as_float("confidence", confidence, allow_neg_inf=True)
    passed = as_bool("outcomes", outcomes)
    batch, n, k = chain_shape(scores, passed)
    names = stage_names(stages, k)
    check_batch_dims(batch_dims, batch)
    keep = np.ones(scores.shape, bool) if counted is None else as_bool("counted", counted)
    if keep.shape != scores.shape:
        raise InvalidInputError(f"counted has shape {keep.shape}; expected {scores.shape}")
    G = ground_truth_counts(n_ground_truth, batch, k)
    through = np.logical_and.accumulate(np.moveaxis(passed, -1, -2), axis=-2)  # (..., K, n)
    if found_at is None:
        reached = np.where(through & keep[..., None, :], scores[..., None, :], -np.inf)
        reached = np.moveaxis(reached, -2, -1)
    else:
        reached = found_at_array(found_at, batch, k)
    if n == 0:
        cutoff = np.full((*batch, 1), np.nan)
        tp = np.zeros((*batch, 1 + k, 1), np.int64)
    else:
        cutoff, tp = _selected_counts(scores, through, keep)
    found = _found_counts(reached, cutoff)
    dims = [*batch_dims]
    counts = xr.Dataset(
        {
            "n_selected": ([*dims, THRESHOLD], tp[..., 0, :]),
            "tp": ([*dims, STAGE, THRESHOLD], tp[..., 1:, :]),
            "fp": ([*dims, STAGE, THRESHOLD], tp[..., :-1, :] - tp[..., 1:, :]),
            "found": ([*dims, STAGE, THRESHOLD], found),
            "n_ground_truth": ([*dims, STAGE], G),
        },
        coords={STAGE: names, "cutoff": ([*dims, THRESHOLD], cutoff), **dict(coords or {})},
    )
    return counts


@validate_params(zero_division=ZERO_DIVISION)
def factor_curves(counts: xr.Dataset, *, zero_division: ZeroDivision = "nan") -> xr.Dataset:
    r"""Add the factor, product and composed curves to a Dataset of chain counts.

    From ``n_selected``, ``tp``, ``fp``, ``found`` and ``n_ground_truth`` (as :func:`decompose`
    returns them, or any Dataset with the same layout):

    .. math::

        P_k = \frac{TP_k}{TP_k + FP_k}, \quad
        R_k = \frac{F_k \, G_{k-1}}{F_{k-1} \, G_k} \; (R_1 = F_1 / G_1), \quad
        P_D = \frac{TP_K}{TP_0}, \quad R_D = \frac{F_K}{G_K}

    Factor precision uses the core's :func:`~metricalc.precision`; each ratio is one division
    of integers (so factors equal to 1 are exactly 1).

    Returns
    -------
    xarray.Dataset
        ``counts`` with ``factor_precision``, ``factor_recall``, ``product_precision``,
        ``product_recall``, ``precision`` and ``recall`` added.

    Examples
    --------
    >>> import xarray as xr
    >>> from metricalc.decompose import factor_curves
    >>> counts = xr.Dataset({
    ...     "n_selected": ("threshold", [2]), "tp": (("stage", "threshold"), [[2], [1]]),
    ...     "fp": (("stage", "threshold"), [[0], [1]]),
    ...     "found": (("stage", "threshold"), [[2], [1]]), "n_ground_truth": ("stage", [4, 4])})
    >>> curves = factor_curves(counts)
    >>> curves.factor_recall.values.ravel().tolist(), curves.recall.values.tolist()
    ([0.5, 0.5], [0.25])
    """
    missing = [v for v in (*COUNT_VARIABLES, "n_ground_truth") if v not in counts]
    if missing:
        raise InvalidInputError(
            f"counts lacks {missing}; expected the Dataset of metricalc.decompose.decompose"
        )
    # NumPy in the layout (..., stage, threshold): ratios of aligned arrays need no xarray
    # alignment (the non-index ``cutoff`` coordinate would be compared at every operation)
    counts = counts.transpose(..., STAGE, THRESHOLD)
    tp, fp, found = (counts[v].values for v in ("tp", "fp", "found"))
    n_selected = counts["n_selected"].values
    G = counts["n_ground_truth"].values[..., None]  # (..., stage, 1)
    factor_precision = precision({"tp": tp, "fp": fp}, zero_division=zero_division)
    previous_found = np.concatenate([np.ones_like(found[..., :1, :]), found[..., :-1, :]], -2)
    previous_G = np.concatenate([np.ones_like(G[..., :1, :]), G[..., :-1, :]], axis=-2)
    factor_recall = _ratio(found * previous_G, previous_found * G, zero_division)
    composed_precision = precision(
        {"tp": tp[..., -1, :], "fp": n_selected - tp[..., -1, :]}, zero_division=zero_division
    )
    composed_recall = _ratio(found[..., -1, :], G[..., -1, :], zero_division)
    staged = counts["tp"].dims
    flat = counts["n_selected"].dims
    return counts.assign(
        factor_precision=(staged, factor_precision),
        factor_recall=(staged, factor_recall),
        product_precision=(flat, np.prod(factor_precision, axis=-2)),
        product_recall=(flat, np.prod(factor_recall, axis=-2)),
        precision=(flat, composed_precision),
        recall=(flat, composed_recall),
    )


@validate_params(dim=Text(), zero_division=ZERO_DIVISION)
def stack_chains(
    chains: Sequence[xr.Dataset],
    dim: str,
    *,
    coords: Any = None,
    zero_division: ZeroDivision = "nan",
) -> xr.Dataset:
    """Stack chains of different lengths along a new leading dim ``dim``.

    The counts of every chain are padded to the longest threshold dim by repeating their final
    point (cutoff NaN), which adds nothing to any AP, and the curves are recomputed.

    Parameters
    ----------
    chains : sequence of xarray.Dataset
        Outputs of :func:`decompose` or :func:`chain_counts` with the same stages and the
        same other dims.
    dim : str
        Name of the new dim.
    coords : array-like, optional
        Its coordinate values.

    Examples
    --------
    >>> from metricalc.decompose import decompose, stack_chains
    >>> a = decompose([0.9, 0.8], [[1, 1], [1, 0]], 2)
    >>> b = decompose([0.5], [[0, 0]], 1)
    >>> both = stack_chains([a, b], "category", coords=["cat", "dog"])
    >>> both.tp.sel(stage="C|L").values.tolist()
    [[1, 1], [0, 0]]
    """
    if not chains:
        raise InvalidInputError("stack_chains needs at least one chain")
    first = chains[0]
    for i, chain in enumerate(chains[1:], 1):
        if chain[STAGE].values.tolist() != first[STAGE].values.tolist() or any(
            chain[v].dims != first[v].dims for v in ("tp", "n_ground_truth")
        ):
            raise InvalidInputError(
                f"chain {i} has stages {chain[STAGE].values.tolist()} and dims "
                f"{chain['tp'].dims}; expected those of chain 0 ({first[STAGE].values.tolist()}, "
                f"{first['tp'].dims})"
            )
    length = max(chain.sizes[THRESHOLD] for chain in chains)

    def pad(values: np.ndarray, fill: float | None) -> np.ndarray:
        extra = length - values.shape[-1]
        widths = [(0, 0)] * (values.ndim - 1) + [(0, extra)]
        if fill is None:
            return np.pad(values, widths, mode="edge")
        return np.pad(values, widths, constant_values=fill)

    data = {}
    for name in COUNT_VARIABLES:
        dims = first[name].dims
        data[name] = ((dim, *dims), np.stack([pad(c[name].values, None) for c in chains]))
    data["n_ground_truth"] = (
        (dim, *first["n_ground_truth"].dims),
        np.stack([c["n_ground_truth"].values for c in chains]),
    )
    cutoff = np.stack([pad(c["cutoff"].values, np.nan) for c in chains])
    other = {
        k: v
        for k, v in first.coords.items()
        if k not in ("cutoff", STAGE) and THRESHOLD not in v.dims
    }
    counts = xr.Dataset(
        data,
        coords={
            **other,
            STAGE: first[STAGE].values,
            "cutoff": ((dim, *first["cutoff"].dims), cutoff),
            **({dim: coords} if coords is not None else {}),
        },
    )
    return factor_curves(counts, zero_division=zero_division)
