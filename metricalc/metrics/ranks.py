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


def _hit_sums_block(
    better: np.ndarray, ties: np.ndarray, cutoffs: np.ndarray, policy: str
) -> np.ndarray:
    """Per row of one chunk (..., Q): the sums over its ranked queries (``better >= 0``) of the
    hit probability at each cutoff, then their count; shape (..., 1, cutoffs + 1).

    Untied queries (t = 0, rank b + 1 under every policy) are counted by one ``bincount`` of
    b; the few tied ones go through :func:`metricalc.core.kernels.hit_probability`."""
    rows_b = better.reshape(-1, better.shape[-1])
    rows_t = ties.reshape(-1, ties.shape[-1])
    cap = int(cutoffs.max())
    out = np.zeros((rows_b.shape[0], cutoffs.size + 1))
    for r, (b, t) in enumerate(zip(rows_b, rows_t, strict=True)):
        ranked = b >= 0
        plain = ranked & (t == 0)
        counts = np.bincount(np.minimum(b[plain], cap), minlength=cap + 1)
        below = np.concatenate([[0], np.cumsum(counts)])  # below[k]: untied queries with b < k
        out[r, :-1] = below[cutoffs]
        tied = ranked & (t > 0)
        if tied.any():
            out[r, :-1] += hit_probability(b[tied], t[tied], cutoffs, policy).sum(axis=0)
        out[r, -1] = np.count_nonzero(ranked)
    return out.reshape(*better.shape[:-1], 1, cutoffs.size + 1)


def _lazy_hit_sums(
    better: xr.DataArray, ties: xr.DataArray, cutoffs: list[int], policy: str
) -> tuple[xr.DataArray, xr.DataArray]:
    r"""For dask-backed rank statistics over ``(descriptor, query)`` (-1: no rank): the sums
    :math:`S_k = \sum_{q : b_q \ge 0} h_q(k)` of the hit probability
    (:func:`metricalc.core.kernels.hit_probability`) at each cutoff (dim ``k``), and the count
    of ranked queries; per chunk, then summed over the chunks (the core wrappers see each list
    whole, which a lazy cube must not)."""
    import dask.array as da

    data_b = better.transpose("descriptor", "query").data
    data_t = ties.transpose("descriptor", "query").data
    ks = np.asarray(cutoffs, np.int64)
    partial = da.map_blocks(  # type: ignore[no-untyped-call]  # dask: no hints
        _hit_sums_block,
        data_b,
        data_t,
        cutoffs=ks,
        policy=policy,
        new_axis=2,
        chunks=(data_b.chunks[0], (1,) * len(data_b.chunks[1]), (ks.size + 1,)),
        dtype=np.float64,
        meta=np.array((), np.float64),
    )
    sums = partial.sum(axis=1)
    coords = {"descriptor": better["descriptor"].values}
    total = xr.DataArray(sums[:, :-1], dims=("descriptor", "k"), coords={**coords, "k": ks})
    return total, xr.DataArray(sums[:, -1], dims="descriptor", coords=coords)


def _lazy_hit_rate(
    better: xr.DataArray, ties: xr.DataArray, ks: list[int], policy: str
) -> xr.DataArray:
    r"""The hit rate of :func:`metricalc.hit_rate_at_k` of dask-backed rank statistics, from
    per-chunk sums and counts (:func:`_lazy_hit_sums`):

    .. math:: HR@k = \frac{\sum_{q : b_q \ge 0} h_q(k)}{|\{q : b_q \ge 0\}|}

    NaN without a ranked query."""
    sums, ranked = _lazy_hit_sums(better, ties, ks, policy)
    rate: xr.DataArray = sums / ranked.where(ranked > 0)
    return rate


def rank_histogram(
    better: xr.DataArray, ties: xr.DataArray, r1: xr.DataArray, policy: str
) -> xr.DataArray:
    """Counts of R = 1 queries (with rank statistics) per rank bin (:data:`RANK_BINS`).

    Under ``expected`` a tied query spreads its unit weight evenly over its tied ranks
    b + 1 .. b + t + 1.
    """
    uppers = [int(upper) for _, _, upper in RANK_BINS[:-1]]
    edges = xr.DataArray(uppers, dims="rank_bin")
    if better.chunks is not None:  # per-chunk sums: P(rank <= edge) is the hit probability
        sums, total_lazy = _lazy_hit_sums(better.where(r1, -1), ties, uppers, policy)
        below = sums.rename(k="rank_bin").drop_vars("rank_bin")
        total = total_lazy.expand_dims(rank_bin=1, axis=-1)
        cumulative = xr.concat([below, total], dim="rank_bin")
    elif policy == "expected":
        b, t = better.where(r1), ties.where(r1)
        # P(rank <= edge); NumPy's ufuncs on DataArrays return DataArrays
        cumulative = cast(xr.DataArray, np.minimum(np.maximum(edges - b, 0), t + 1) / (t + 1))
    else:
        rank = rank_from_rank_stats(better, ties, policy=policy).where(r1)
        cumulative = (rank <= edges).where(r1)
    if better.chunks is None:
        below = cumulative.sum("query", skipna=True)  # (descriptor, rank_bin): 9 cumulative
        total = r1.sum("query").astype(np.float64).expand_dims(rank_bin=1, axis=-1)
        cumulative = xr.concat([below, total], dim="rank_bin")
    histogram = cumulative - cumulative.shift(rank_bin=1, fill_value=0.0)
    labels = [label for label, _, _ in RANK_BINS]
    return histogram.transpose("descriptor", "rank_bin").assign_coords(rank_bin=labels)
