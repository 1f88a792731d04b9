"""The input checks of a chain (:func:`~metricalc.decompose.chain_counts`): confidences, stage
outcomes, stage names, ground-truth counts and the ground-truth side ``found_at``.

Each raises :class:`~metricalc.errors.InvalidInputError` naming the argument, the offending value
(and its index) and what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from metricalc.errors import InvalidInputError
from metricalc.validation import first_index

__all__ = [
    "as_bool",
    "as_float",
    "chain_shape",
    "check_batch_dims",
    "found_at_array",
    "ground_truth_counts",
    "stage_names",
]

DEFAULT_STAGES = ("L", "C|L", "S|C,L")
"""Stage names used when ``stages`` is not given (the first K of them; more stages need names)."""


def as_bool(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == bool:
        return arr
    if arr.dtype.kind not in "iuf":
        raise InvalidInputError(f"{name} must hold booleans (or 0/1); got dtype {arr.dtype}")
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        where = first_index(bad)
        raise InvalidInputError(
            f"{name} must hold booleans (or 0/1); found {arr[where].item()!r} at index {where}"
        )
    return arr.astype(bool)


def as_float(name: str, values: Any, *, allow_neg_inf: bool) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise InvalidInputError(f"{name} must be numeric; got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = np.isnan(arr) | (np.isinf(arr) & ~(allow_neg_inf & (arr < 0)))
    if bad.any():
        where = first_index(bad)
        expected = "finite numbers or -inf (never)" if allow_neg_inf else "finite numbers"
        raise InvalidInputError(
            f"{name} must hold {expected}; found {arr[where].item()!r} at index {where}"
        )
    return arr


def stage_names(stages: Sequence[str] | None, k: int) -> list[str]:
    if stages is None:
        if k > len(DEFAULT_STAGES):
            raise InvalidInputError(
                f"outcomes has {k} stages; name them with stages= (defaults exist for up to "
                f"{len(DEFAULT_STAGES)}: {DEFAULT_STAGES})"
            )
        return list(DEFAULT_STAGES[:k])
    names = [str(s) for s in stages]
    if len(names) != k or len(set(names)) != k:
        raise InvalidInputError(
            f"stages must be {k} distinct names (one per column of outcomes); got {list(stages)!r}"
        )
    return names


def ground_truth_counts(values: Any, batch: tuple[int, ...], k: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise InvalidInputError(
            f"n_ground_truth must hold non-negative integers; got dtype {arr.dtype}"
        )
    if arr.ndim == 0:
        arr = np.full(k, arr)
    try:
        arr = np.broadcast_to(arr, (*batch, k))
    except ValueError:
        raise InvalidInputError(
            f"n_ground_truth has shape {arr.shape}; expected one count per stage, shape "
            f"{(*batch, k)} (or ({k},), or a scalar)"
        ) from None
    if (arr < 0).any():
        where = first_index(arr < 0)
        raise InvalidInputError(
            f"n_ground_truth must be >= 0; found {int(arr[where])} at index {where}"
        )
    return arr.astype(np.int64)


def chain_shape(scores: np.ndarray, passed: np.ndarray) -> tuple[tuple[int, ...], int, int]:
    """(batch shape, predictions n, stages K) of confidence (..., n) and outcomes (..., n, K)."""
    if scores.ndim < 1 or passed.ndim != scores.ndim + 1:
        raise InvalidInputError(
            f"outcomes must have shape (..., n, K) for confidence of shape (..., n); got "
            f"{passed.shape} and {scores.shape}"
        )
    batch, n, k = scores.shape[:-1], scores.shape[-1], passed.shape[-1]
    if passed.shape[:-1] != scores.shape:
        raise InvalidInputError(
            f"outcomes has shape {passed.shape}; expected {(*scores.shape, k)} (one row per "
            "prediction of confidence)"
        )
    if k == 0:
        raise InvalidInputError("outcomes has no stage (shape (..., n, 0)); expected K >= 1")
    return batch, n, k


def check_batch_dims(batch_dims: Sequence[str], batch: tuple[int, ...]) -> None:
    if len(batch_dims) != len(batch):
        raise InvalidInputError(
            f"batch_dims must name the {len(batch)} leading axes of confidence; got "
            f"{list(batch_dims)!r}"
        )


def found_at_array(values: Any, batch: tuple[int, ...], k: int) -> np.ndarray:
    """``found_at`` checked: shape (..., m, K), never increasing along the chain."""
    reached = as_float("found_at", values, allow_neg_inf=True)
    if reached.ndim != len(batch) + 2 or reached.shape[:-2] != batch or reached.shape[-1] != k:
        raise InvalidInputError(
            f"found_at has shape {reached.shape}; expected {(*batch, 'm', k)} (one row per "
            "ground-truth item, one column per stage)"
        )
    rising = reached[..., 1:] > reached[..., :-1]
    if rising.any():
        where = first_index(rising)
        raise InvalidInputError(
            f"found_at must not increase along the chain (an item reaches stage k only "
            f"after stage k-1); item {where[:-1]} is found later at stage {where[-1]} than at "
            f"stage {where[-1] + 1}"
        )
    return reached
