"""Rank statistics, tie policies, average precision in six toolkit conventions, hit rate and P@k."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from metricalc.core import ap_kernels, kernels
from metricalc.core.labeled import apply_kernel, fill_undefined, is_labeled, unwrap
from metricalc.errors import InvalidInputError
from metricalc.validation import (
    CUBE_TIE_POLICIES,
    TIE_POLICIES,
    ZERO_DIVISION,
    Choice,
    Integer,
    ListOf,
    Nullable,
    OneOf,
    Text,
    ZeroDivision,
    as_labels,
    as_scores,
    check_samples,
    first_index,
    validate_params,
)

__all__ = [
    "AP_METHODS",
    "TIE_POLICIES",
    "ap_from_rank_stats",
    "average_precision",
    "hit_rate_at_k",
    "precision_at_k",
    "rank_from_rank_stats",
    "rank_stats",
    "ranked_ap_slices",
]

AP_METHODS = ("step", "ir", "vlfeat", "trapezoid", "voc11", "coco101")


# --------------------------------------------------------------------------------------------
# Rank statistics of one relevant item
# --------------------------------------------------------------------------------------------


def _rank_stats_kernel(distances: np.ndarray, relevant_index: np.ndarray) -> tuple[np.ndarray, ...]:
    d = np.asarray(distances)
    if d.dtype == bool or d.dtype.kind not in "iuf":
        raise InvalidInputError(f"distances must be numeric; got dtype {d.dtype}")
    g = np.asarray(relevant_index)
    if d.ndim == 0 or d.shape[-1] == 0:
        raise InvalidInputError("distances must have at least one candidate on the last axis")
    if g.dtype.kind not in "iu":
        raise InvalidInputError(f"relevant_index must hold integers; got dtype {g.dtype}")
    if g.shape != d.shape[:-1]:
        raise InvalidInputError(
            f"relevant_index has shape {g.shape}; expected one index per list, shape {d.shape[:-1]}"
        )
    n = d.shape[-1]
    bad = (g < -1) | (g >= n)
    if bad.any():
        where = first_index(bad)
        raise InvalidInputError(
            f"relevant_index must be -1 (no relevant item) or in [0, {n - 1}]; "
            f"found {int(g[where])} at index {where}"
        )
    return kernels.rank_stats(d, g.astype(np.int64))


@validate_params(dim=Nullable(Text()))
def rank_stats(distances: Any, relevant_index: Any, *, dim: str | None = None) -> tuple[Any, Any]:
    r"""Count the candidates ranked before, and tied with, the relevant one (one pass, no sort).

    For a list of candidate distances :math:`d_0 .. d_{N-1}` with relevant candidate :math:`g`:

    .. math::

        better = \#\{i \ne g : d_i < d_g\}, \qquad ties = \#\{i \ne g : d_i = d_g\}

    Every tie policy's rank and AP derive from these two numbers (:func:`ap_from_rank_stats`).
    Lists are processed in cache-sized chunks, so memory stays bounded.

    Parameters
    ----------
    distances : array-like or DataArray, shape (..., N)
        Candidate distances (smaller is better), float or integer (Hamming). NaN is refused.
    relevant_index : array-like or DataArray of int, shape (...)
        Position of the relevant candidate in each list, or -1 when the list has none (R = 0).
    dim : str, optional
        Candidate dimension of DataArray inputs.

    Returns
    -------
    better, ties : ndarray or DataArray of int64
        -1 where ``relevant_index`` is -1.

    Examples
    --------
    >>> import numpy as np, metricalc as mc
    >>> d = np.array([[0.5, 0.2, 0.5, 0.1, 0.5], [1.0, 2.0, 3.0, 4.0, 5.0]])
    >>> better, ties = mc.rank_stats(d, np.array([0, -1]))
    >>> better.tolist(), ties.tolist()
    ([2, -1], [2, -1])
    """
    better, ties = apply_kernel(
        _rank_stats_kernel,
        {"distances": distances, "relevant_index": relevant_index},
        core=("distances",),
        dim=dim,
        output_core_dims=[[], []],
        output_dtypes=[np.int64, np.int64],
    )
    labeled = is_labeled(distances, relevant_index)
    return unwrap(better, labeled), unwrap(ties, labeled)


def _check_rank_stats(better: np.ndarray, ties: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b, t = np.asarray(better), np.asarray(ties)
    for name, value in (("better", b), ("ties", t)):
        if value.dtype.kind not in "iu":
            raise InvalidInputError(f"{name} must hold integer counts; got dtype {value.dtype}")
    try:
        b, t = np.broadcast_arrays(b, t)
    except ValueError:
        raise InvalidInputError(
            f"better and ties must have the same (or broadcastable) shapes; got {b.shape} and "
            f"{t.shape}"
        ) from None
    bad = (b < -1) | (t < -1) | ((b < 0) != (t < 0))
    if bad.any():
        where = first_index(bad)
        raise InvalidInputError(
            "better and ties must be counts >= 0, or both -1 for a list without a relevant item; "
            f"found better={int(b[where])}, ties={int(t[where])} at index {where}"
        )
    return b, t


def _check_input_order(b: np.ndarray, t: np.ndarray, tie_policy: str) -> None:
    """Under ``input_order`` a rank needs ``ties == 0``: rank statistics do not hold the order
    in which tied items were listed."""
    if tie_policy == "input_order" and (tied := t > 0).any():
        where = first_index(tied)
        raise InvalidInputError(
            "tie policy 'input_order' ranks tied items in their list order, which rank "
            f"statistics do not hold; found better={int(b[where])}, ties={int(t[where])} at "
            f"index {where} (expected ties = 0 or -1)"
        )


def _policy_kernel(
    better: np.ndarray, ties: np.ndarray, *, tie_policy: str, what: str
) -> np.ndarray:
    b, t = _check_rank_stats(better, ties)
    _check_input_order(b, t, tie_policy)
    if what == "ap":
        return kernels.ap_from_stats(b, t, tie_policy)
    return kernels.rank_from_stats(b, t, tie_policy)


def _elementwise(better: Any, ties: Any, tie_policy: str, what: str) -> Any:
    result = apply_kernel(
        _policy_kernel,
        {"better": better, "ties": ties},
        kwargs={"tie_policy": tie_policy, "what": what},
    )
    return unwrap(result, is_labeled(better, ties))


@validate_params(tie_policy=Choice(CUBE_TIE_POLICIES))
def ap_from_rank_stats(better: Any, ties: Any, *, tie_policy: str = "expected") -> Any:
    r"""Average precision of a list with one relevant item, from its rank statistics.

    With :math:`b` = better and :math:`t` = ties (docs/metrics.md):

    =========== ===================================== ====================================
    policy      rank                                  AP
    =========== ===================================== ====================================
    optimistic  :math:`1 + b`                         :math:`1 / rank`
    pessimistic :math:`1 + b + t`                     :math:`1 / rank`
    workbench   :math:`1 + b + \lfloor(t+1)/2\rfloor` :math:`1 / rank` (DescriptorWorkbench)
    expected    :math:`1 + b + t / 2`                 :math:`\frac{1}{t+1}\sum_{r=b+1}^{b+t+1} 1/r`
    input_order :math:`1 + b` (only where t = 0)      :math:`1 / rank`
    =========== ===================================== ====================================

    ``expected`` is the expectation of AP over a uniformly random order of the tied items.
    ``input_order`` (ties keep the list's order, a stable sort) has no rank when t > 0: the rank
    statistics do not say where the list put the tied items, so that is an error.

    Returns
    -------
    float, ndarray or DataArray
        NaN where better = ties = -1 (no relevant item, R = 0).

    Examples
    --------
    >>> import metricalc as mc
    >>> round(float(mc.ap_from_rank_stats(2, 3, tie_policy="expected")), 6)
    0.2375
    >>> float(mc.ap_from_rank_stats(2, 3, tie_policy="workbench"))
    0.2
    """
    return _elementwise(better, ties, tie_policy, "ap")


def ranked_ap_slices(
    better: np.ndarray, ties: np.ndarray, tie_policy: str, chunk: int = kernels.CHUNK_ELEMENTS
) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """:func:`ap_from_rank_stats` of every ranked cell (``better >= 0``) of a grid, ``chunk``
    flat cells at a time so that temporaries stay small: for each slice of the flattened grid
    holding a ranked cell, ``(slice, mask of its ranked cells, their AP)``.

    Examples
    --------
    >>> better, ties = np.array([[0, -1], [2, 0]]), np.array([[0, -1], [0, 1]])
    >>> for part, mask, ap in ranked_ap_slices(better, ties, "expected", chunk=3):
    ...     print(part, mask.tolist(), ap.tolist())
    slice(0, 3, None) [True, False, True] [1.0, 0.3333333333333333]
    slice(3, 6, None) [True] [0.75]
    """
    flat_better, flat_ties = better.reshape(-1), ties.reshape(-1)
    for start in range(0, flat_better.size, chunk):
        part = slice(start, start + chunk)
        ranked = flat_better[part] >= 0
        if ranked.any():
            values = flat_better[part][ranked], flat_ties[part][ranked]
            yield part, ranked, ap_from_rank_stats(*values, tie_policy=tie_policy)


@validate_params(tie_policy=Choice(CUBE_TIE_POLICIES))
def rank_from_rank_stats(better: Any, ties: Any, *, tie_policy: str = "expected") -> Any:
    r"""Rank (1-based) of the relevant item under a tie policy; see :func:`ap_from_rank_stats`.

    Returns a float (``expected`` gives :math:`1 + b + t/2`); NaN where R = 0.

    Examples
    --------
    >>> import metricalc as mc
    >>> [float(mc.rank_from_rank_stats(2, 3, tie_policy=p)) for p in mc.TIE_POLICIES]
    [3.0, 6.0, 5.0, 4.5]
    """
    return _elementwise(better, ties, tie_policy, "rank")


def _at_k_kernel(
    better: np.ndarray, ties: np.ndarray, k: np.ndarray, *, tie_policy: str, divide_by_k: bool
) -> tuple[np.ndarray, np.ndarray]:
    b, t = _check_rank_stats(better, ties)
    _check_input_order(b, t, tie_policy)
    if b.ndim == 0:
        raise InvalidInputError(
            "better and ties must hold one value per query along the last axis (or along dim=); "
            "got scalars"
        )
    hits = kernels.hit_probability(b, t, k, tie_policy)
    if divide_by_k:
        hits = hits / k
    valid = (b >= 0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(hits, axis=-2) / valid[..., None]
    return mean, np.broadcast_to(valid[..., None], mean.shape)


_AT_K_PARAMS = {
    "k": OneOf(Integer(1), ListOf(Integer(1))),
    "tie_policy": Choice(CUBE_TIE_POLICIES),
    "dim": Nullable(Text()),
    "zero_division": ZERO_DIVISION,
}
"""The declared options of :func:`hit_rate_at_k` and :func:`precision_at_k`."""


def _at_k(
    better: Any,
    ties: Any,
    k: int | Sequence[int],
    tie_policy: str,
    dim: str | None,
    zero_division: ZeroDivision,
    *,
    divide_by_k: bool,
) -> Any:
    """Hit rate at k, or precision at k with ``divide_by_k``."""
    what = "precision_at_k" if divide_by_k else "hit_rate_at_k"
    ks = np.atleast_1d(np.asarray(k))
    mean, valid = apply_kernel(
        _at_k_kernel,
        {"better": better, "ties": ties},
        core=("better", "ties"),
        dim=dim,
        output_core_dims=[["k"], ["k"]],
        output_dtypes=[np.float64, np.int64],
        output_sizes={"k": ks.size},
        kwargs={"k": ks, "tie_policy": tie_policy, "divide_by_k": divide_by_k},
    )
    result = fill_undefined(valid == 0, mean, zero_division, what)
    if not is_labeled(better, ties):
        return unwrap(result if np.ndim(k) else result[..., 0], False)
    result = result.assign_coords(k=ks)
    return result.isel(k=0, drop=True) if np.ndim(k) == 0 else result


@validate_params(**_AT_K_PARAMS)
def hit_rate_at_k(
    better: Any,
    ties: Any,
    k: int | Sequence[int] = 1,
    *,
    tie_policy: str = "expected",
    dim: str | None = None,
    zero_division: ZeroDivision = "nan",
) -> Any:
    r"""Share of queries whose relevant item ranks within the top ``k`` (a hit rate).

    .. math:: HR@k = \frac{1}{|Q_1|} \sum_{q \in Q_1} [rank_q \le k]

    over the queries :math:`Q_1` that have a relevant item (R = 1; R = 0 queries are excluded, as
    DescriptorWorkbench does). This is what DescriptorWorkbench calls ``precision_at_k`` (and
    ``recall_at_k``). Under ``expected`` a query tied across rank k counts the probability of a
    hit under a random order of the tied items, :math:`\mathrm{clip}(k - b, 0, t + 1) / (t + 1)`.

    Parameters
    ----------
    better, ties : array-like or DataArray of int, shape (..., Q)
        Rank statistics (:func:`rank_stats`), queries on the last axis or along ``dim``.
    k : int or sequence of int
        Cut-off(s); a sequence adds a trailing ``k`` axis (a ``k`` dim for DataArrays).
    tie_policy : {"optimistic", "pessimistic", "workbench", "expected"}
    zero_division : {"nan", "warn", 0, 1}
        Value when no query has a relevant item.

    Examples
    --------
    >>> import metricalc as mc
    >>> mc.hit_rate_at_k([0, 3, 9, -1], [0, 0, 0, -1], k=[1, 5]).tolist()
    [0.3333333333333333, 0.6666666666666666]
    """
    return _at_k(better, ties, k, tie_policy, dim, zero_division, divide_by_k=False)


@validate_params(**_AT_K_PARAMS)
def precision_at_k(
    better: Any,
    ties: Any,
    k: int | Sequence[int] = 1,
    *,
    tie_policy: str = "expected",
    dim: str | None = None,
    zero_division: ZeroDivision = "nan",
) -> Any:
    r"""Information-retrieval precision at ``k``: relevant items in the top ``k``, divided by ``k``.

    .. math:: P@k = \frac{1}{|Q_1|} \sum_{q \in Q_1} \frac{[rank_q \le k]}{k}

    With one relevant item per query P@k is at most 1/k; it is the IR (trec_eval ``P_k``)
    definition, not DescriptorWorkbench's ``precision_at_k``, which is :func:`hit_rate_at_k`.
    Arguments as :func:`hit_rate_at_k`.

    Examples
    --------
    >>> import metricalc as mc
    >>> mc.precision_at_k([0, 3, 9, -1], [0, 0, 0, -1], k=[1, 5]).round(4).tolist()
    [0.3333, 0.1333]
    """
    return _at_k(better, ties, k, tie_policy, dim, zero_division, divide_by_k=True)


# --------------------------------------------------------------------------------------------
# Average precision over ranked lists
# --------------------------------------------------------------------------------------------


def _ap_kernel(
    y_true: np.ndarray,
    y_score: np.ndarray,
    n_relevant: Any = None,
    *,
    method: str,
    tie_policy: str,
) -> np.ndarray:
    labels = as_labels("y_true", y_true)
    scores = as_scores("y_score", y_score)
    check_samples(labels, scores)
    present = kernels.count_true(labels)
    if n_relevant is None:
        R = present
    else:
        R = np.asarray(n_relevant)
        if R.dtype.kind not in "iu":
            raise InvalidInputError(f"n_relevant must hold integers; got dtype {R.dtype}")
        try:
            R = np.broadcast_to(R, present.shape)
        except ValueError:
            raise InvalidInputError(
                f"n_relevant has shape {R.shape}; expected one count per list, "
                f"shape {present.shape}"
            ) from None
        short = present > R
        if short.any():
            where = first_index(short)
            raise InvalidInputError(
                f"n_relevant must be >= the relevant items present in the list; found "
                f"n_relevant={int(R[where])} with {int(present[where])} present at index {where}"
            )
    if tie_policy == "workbench" and (present > 1).any():
        where = first_index(present > 1)
        raise InvalidInputError(
            "tie_policy='workbench' is defined for lists with one relevant item; the list at index "
            f"{where} has {int(present[where])}. Use 'optimistic', 'pessimistic' or 'expected'."
        )
    return ap_kernels.average_precision_rows(
        labels, scores, R, method=method, tie_policy=tie_policy
    )


@validate_params(
    method=Choice(AP_METHODS),
    tie_policy=Nullable(Choice(TIE_POLICIES)),
    dim=Nullable(Text()),
    zero_division=ZERO_DIVISION,
)
def average_precision(
    y_true: Any,
    y_score: Any,
    *,
    method: str = "step",
    n_relevant: Any = None,
    tie_policy: str | None = None,
    dim: str | None = None,
    zero_division: ZeroDivision = "nan",
) -> Any:
    r"""Average precision of ranked lists, in the convention of a named toolkit.

    Items are ranked by decreasing ``y_score``; :math:`R` is the number of relevant items
    (``n_relevant``, default the relevant items present), :math:`tp_i` the relevant items among
    the first :math:`i`, :math:`P_i = tp_i / i`.

    ``"step"`` (``sklearn.metrics.average_precision_score``)
        :math:`AP = \sum_n (R_n - R_{n-1}) P_n` over distinct score thresholds; tied scores form
        one threshold, so every relevant item of a tie group gets the precision at its end.
    ``"ir"`` (trec_eval ``map``, DescriptorWorkbench ``computeAveragePrecision``)
        :math:`AP = \frac{1}{R} \sum_{i \text{ relevant}} P_i`, the order inside tied scores set
        by ``tie_policy``: ``"expected"`` (default; expectation over a random order of tied items),
        ``"optimistic"`` (relevant first), ``"pessimistic"`` (relevant last), ``"workbench"``
        (one relevant item per list; rank :math:`1 + b + \lfloor (t+1)/2 \rfloor`, as
        DescriptorWorkbench). Without ties every policy gives trec_eval's value; trec_eval itself
        breaks ties by document id, which no policy here imitates.
    ``"vlfeat"`` (VLFeat ``vl_pr`` ``info.ap``; HPatches MATLAB ``retrieval_eval.m``)
        :math:`\frac{1}{R} \sum_{i \text{ relevant}} P_i` in stable order (ties keep input order);
        items scored :math:`-\infty` are never retrieved (relevant ones still count in R).
    ``"trapezoid"`` (hpatches-benchmark python ``utils/metrics.py``)
        Points :math:`(r_i, p_i)` for :math:`i = 0..N` with :math:`tp_0 = fp_0 = 0`,
        :math:`r_i = tp_i / R`, :math:`p_i = \max(tp_i, 10^{-10}) / \max(i, 10^{-10})`,
        stable order;
        AP is the trapezoid area :math:`\sum_i (r_{i+1} - r_i)(p_{i+1} + p_i) / 2`; items scored
        :math:`-\infty` are never retrieved, as in ``vlfeat``.
    ``"voc11"`` (PASCAL VOC 2007, py-faster-rcnn ``voc_eval(use_07_metric=True)``)
        :math:`\frac{1}{11} \sum_{t \in \{0, 0.1, .., 1\}} \max_{i : r_i \ge t} p_i` (0 if no
        point reaches t), stable order; the levels are ``np.arange(0, 1.1, 0.1)`` bit for bit
        (0.30000000000000004 at 0.3, so a recall of exactly 0.3 does not reach that level).
    ``"coco101"`` (pycocotools ``COCOeval``)
        The same with 101 recall thresholds ``np.linspace(0, 1, 101)`` and the monotone envelope
        of precision, located with ``searchsorted(side="left")``; stable order (mergesort).

    Parameters
    ----------
    y_true : array-like or DataArray of bool or {0, 1}, shape (..., N)
    y_score : array-like or DataArray, shape (..., N)
        Higher ranks first (pass ``-distance`` for distances). NaN is refused.
    method : {"step", "ir", "vlfeat", "trapezoid", "voc11", "coco101"}
    n_relevant : int or array of int, shape (...), optional
        :math:`R` for truncated lists: relevant items missing from the list count as never
        retrieved (their precision contributes 0). Must be >= the relevant items present.
    tie_policy : {"expected", "optimistic", "pessimistic", "workbench"}, optional
        Tie policy of ``"ir"`` (default ``"expected"``). The other methods have the fixed tie
        handling of the toolkit they reproduce, and passing ``tie_policy`` to them is an error.
    dim : str, optional
        Sample dimension of DataArray inputs; the other dims are kept (one AP per list).
    zero_division : {"nan", "warn", 0, 1}
        AP of a list with :math:`R = 0`. Default NaN: the AP of a list with nothing to find is
        undefined, and a silent 0 would drag a mean down (DescriptorWorkbench and scikit-learn
        return 0; pass ``zero_division=0`` to reproduce them, as ``*_including_zeros`` does).

    Returns
    -------
    float, ndarray or DataArray
        One AP per list.

    Examples
    --------
    >>> import metricalc as mc
    >>> float(mc.average_precision([1, 1, 0, 0, 0], [5, 4, 3, 2, 1], method="ir"))
    1.0
    >>> float(mc.average_precision([0, 0, 0, 1, 1], [5, 4, 3, 2, 1], method="ir"))
    0.325
    >>> round(float(mc.average_precision([0, 1, 1, 0], [0.1, 0.5, 0.5, 0.9])), 6)
    0.666667
    """
    if tie_policy is None:
        tie_policy = "expected"
    elif method != "ir":
        raise InvalidInputError(
            f"tie_policy= applies to method='ir' only; method={method!r} has the fixed tie "
            "handling of the toolkit it reproduces (see the docstring)"
        )
    labeled = is_labeled(y_true, y_score, n_relevant)
    named = {"y_true": y_true, "y_score": y_score}
    if n_relevant is not None:  # None must not reach dask, which would make it an object array
        named["n_relevant"] = n_relevant
    ap = apply_kernel(
        _ap_kernel,
        named,
        core=("y_true", "y_score"),
        dim=dim,
        kwargs={"method": method, "tie_policy": tie_policy},
    )
    if zero_division != "nan":  # NaN marks lists with R = 0
        ap = fill_undefined(ap != ap, ap, zero_division, "average_precision")
    return unwrap(ap, labeled)
