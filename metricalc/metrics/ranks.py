"""Rank-based metrics of the set: hits at the cut-offs k and the rank histogram.

Both read the rank statistics of the R = 1 queries (``better``, ``ties``) under the cube's tie
policy (:mod:`metricalc.core.ranking`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import cast

import numpy as np
import xarray as xr

from metricalc.core.kernels import hit_probability
from metricalc.core.ranking import hit_rate_at_k, precision_at_k, rank_from_rank_stats
from metricalc.errors import InvalidInputError
from metricalc.validation import check_integer

__all__ = ["AT_K_METRICS", "RANK_BINS", "at_k_metrics", "check_k", "rank_histogram"]

RANK_BINS: tuple[tuple[str, float, float], ...] = (
    ("1", 1, 1),
    ("2", 2, 2),
    ("3", 3, 3),
    ("4", 4, 4),
    ("5", 5, 5),
    ("6-10", 6, 10),
    ("11-20", 11, 20),
    ("21-50", 21, 50),
    ("51-100", 51, 100),
    (">100", 101, math.inf),
)
"""Bins of the rank histogram: (label, lowest rank, highest rank). A rank r falls in the bin
with ``upper(previous bin) < r <= upper(bin)``, so fractional ranks are binned too."""

AT_K_METRICS = ("precision_at", "recall_at", "ir_precision_at")
"""The metrics at a cut-off k, named ``<prefix>_<k>``, in the order of the metric set."""


def check_k(k: int | Sequence[int]) -> list[int]:
    """The distinct cut-offs of ``k`` (a positive integer or a sequence of them), sorted."""
    values = list(k) if isinstance(k, Iterable) and not isinstance(k, str) else [k]
    if not values:
        raise InvalidInputError(f"k must be a positive integer or a sequence of them; got {k!r}")
    return sorted({check_integer("k", v, minimum=1) for v in values})


def at_k_metrics(
    better: xr.DataArray, ties: xr.DataArray, ks: list[int], policy: str
) -> dict[str, xr.DataArray]:
    """``precision_at_k`` and ``recall_at_k`` (both the hit rate HR@k) and ``ir_precision_at_k``
    (HR@k / k) for every k, from the rank statistics of the R = 1 queries (-1 elsewhere)."""
    if better.chunks is None:
        hits = hit_rate_at_k(better, ties, ks, policy=policy, dim="query")
        ir = precision_at_k(better, ties, ks, policy=policy, dim="query")
    else:
        hits = _lazy_hit_rate(better, ties, ks, policy)
        ir = hits / xr.DataArray(ks, dims="k", coords={"k": ks})
    out = {}
    for name, values in zip(AT_K_METRICS, (hits, hits, ir), strict=True):
        for kk in ks:
            out[f"{name}_{kk}"] = values.sel(k=kk, drop=True)
    return out


def _lazy_hit_rate(
    better: xr.DataArray, ties: xr.DataArray, ks: list[int], policy: str
) -> xr.DataArray:
    r"""The hit rate of :func:`metricalc.hit_rate_at_k` over the ``query`` dim of dask-backed
    rank statistics, as a sum and a count per chunk (the core wrapper sees each list whole):

    .. math:: HR@k = \frac{\sum_{q : b_q \ge 0} h_q(k)}{|\{q : b_q \ge 0\}|}

    with :math:`h_q(k)` the hit probability of :func:`metricalc.core.kernels.hit_probability`;
    NaN without a ranked query."""
    hits = xr.apply_ufunc(
        hit_probability,
        better,
        ties,
        kwargs={"k": np.asarray(ks), "policy": policy},
        output_core_dims=[["k"]],
        dask="parallelized",
        output_dtypes=[np.float64],
        dask_gufunc_kwargs={"output_sizes": {"k": len(ks)}},
    )
    total = hits.sum("query", skipna=True)
    ranked = (better >= 0).sum("query")
    rate: xr.DataArray = (total / ranked.where(ranked > 0)).assign_coords(k=ks)
    return rate


def rank_histogram(
    better: xr.DataArray, ties: xr.DataArray, r1: xr.DataArray, policy: str
) -> xr.DataArray:
    """Counts of R = 1 queries (with rank statistics) per rank bin (:data:`RANK_BINS`).

    Under ``expected`` a tied query spreads its unit weight evenly over its tied ranks
    b + 1 .. b + t + 1.
    """
    edges = xr.DataArray([upper for _, _, upper in RANK_BINS[:-1]], dims="rank_bin")
    if policy == "expected":
        b, t = better.where(r1), ties.where(r1)
        # P(rank <= edge); NumPy's ufuncs on DataArrays return DataArrays
        cumulative = cast(xr.DataArray, np.minimum(np.maximum(edges - b, 0), t + 1) / (t + 1))
    else:
        rank = rank_from_rank_stats(better, ties, policy=policy).where(r1)
        cumulative = (rank <= edges).where(r1)
    below = cumulative.sum("query", skipna=True)  # (descriptor, rank_bin): 9 cumulative counts
    total = r1.sum("query").astype(np.float64).expand_dims(rank_bin=1, axis=-1)
    cumulative = xr.concat([below, total], dim="rank_bin")
    histogram = cumulative - cumulative.shift(rank_bin=1, fill_value=0.0)
    labels = [label for label, _, _ in RANK_BINS]
    return histogram.transpose("descriptor", "rank_bin").assign_coords(rank_bin=labels)
