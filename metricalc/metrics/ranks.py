"""Rank-based metrics of the set: hits at the cut-offs k and the rank histogram.

Both read the rank statistics of the R = 1 queries (``better``, ``ties``) under the cube's tie
policy (:mod:`metricalc.core.ranking`).
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
import xarray as xr

from metricalc.core.kernels import hit_probability
from metricalc.core.ranking import hit_rate_at_k, precision_at_k, rank_from_rank_stats

__all__ = [
    "AT_K_METRICS",
    "HISTOGRAM_CUTOFFS",
    "RANK_BINS",
    "at_k_from_sums",
    "at_k_metrics",
    "hit_sums",
    "rank_histogram",
    "rank_histogram_from_sums",
]

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

AT_K_METRICS = ("hit_rate_at", "recall_at", "precision_at")
"""The metrics at a cut-off k, named ``<prefix>_<k>``, in the order of the metric set."""


def at_k_metrics(
    better: xr.DataArray, ties: xr.DataArray, ks: list[int], tie_policy: str
) -> dict[str, xr.DataArray]:
    """``hit_rate_at_k`` and ``recall_at_k`` (both the hit rate HR@k) and ``precision_at_k``
    (HR@k / k) for every k, from the rank statistics of the R = 1 queries (-1 elsewhere)."""
    hits = hit_rate_at_k(better, ties, ks, tie_policy=tie_policy, dim="query")
    precision = precision_at_k(better, ties, ks, tie_policy=tie_policy, dim="query")
    return _by_name(hits, precision, ks)


def at_k_from_sums(
    sums: xr.DataArray, ranked: xr.DataArray, ks: list[int]
) -> dict[str, xr.DataArray]:
    r""":func:`at_k_metrics` from the sums of the hit probability of the ranked queries at the
    cutoffs (dim ``k``, :func:`hit_sums`) and their count (NaN without a ranked query):

    .. math:: HR@k = \frac{\sum_{q : b_q \ge 0} h_q(k)}{|\{q : b_q \ge 0\}|}, \qquad
        \text{precision\_at\_k} = HR@k / k
    """
    hits: xr.DataArray = sums.sel(k=ks) / ranked.where(ranked > 0)
    return _by_name(hits, hits / xr.DataArray(ks, dims="k", coords={"k": ks}), ks)


def _by_name(
    hits: xr.DataArray, precision: xr.DataArray, ks: list[int]
) -> dict[str, xr.DataArray]:
    out = {}
    for name, values in zip(AT_K_METRICS, (hits, hits, precision), strict=True):
        for kk in ks:
            out[f"{name}_{kk}"] = values.sel(k=kk, drop=True)
    return out


def hit_sums(
    better: np.ndarray, ties: np.ndarray, ranked: np.ndarray, cutoffs: np.ndarray, tie_policy: str
) -> np.ndarray:
    """Over the ``ranked`` queries (a mask; ``better >= 0`` there) of one list: the sums of the
    hit probability at each cutoff, then their count (length ``cutoffs.size + 1``).

    Untied queries (t = 0, rank b + 1 under every policy) are counted by one ``bincount`` of
    b; the few tied ones go through :func:`metricalc.core.kernels.hit_probability`."""
    out = np.zeros(cutoffs.size + 1)
    cap = int(cutoffs.max())
    # untied ranks capped at cap; every other query in the extra bin cap + 1
    capped = np.where(ranked & (ties == 0), np.minimum(better, cap), cap + 1)
    counts = np.bincount(capped, minlength=cap + 2)[: cap + 1]
    below = np.concatenate([[0], np.cumsum(counts)])  # below[k]: untied queries with b < k
    out[:-1] = below[cutoffs]
    tied = ranked & (ties > 0)
    if tied.any():
        out[:-1] += hit_probability(better[tied], ties[tied], cutoffs, tie_policy).sum(axis=0)
    out[-1] = np.count_nonzero(ranked)
    return out


HISTOGRAM_CUTOFFS = tuple(int(upper) for _, _, upper in RANK_BINS[:-1])
"""The highest rank of every bin of :data:`RANK_BINS` but the last: the cutoffs at which
:func:`rank_histogram_from_sums` needs the hit sums."""


def rank_histogram_from_sums(sums: xr.DataArray, ranked: xr.DataArray) -> xr.DataArray:
    """:func:`rank_histogram` from the sums of the hit probability (:math:`P(rank \\le k)`) of
    the ranked R = 1 queries at :data:`HISTOGRAM_CUTOFFS` (dim ``k``, :func:`hit_sums`) and
    their count."""
    below = sums.sel(k=list(HISTOGRAM_CUTOFFS)).rename(k="rank_bin").drop_vars("rank_bin")
    total = ranked.astype(np.float64).expand_dims(rank_bin=1, axis=-1)
    return _histogram(xr.concat([below, total], dim="rank_bin"))


def _histogram(cumulative: xr.DataArray) -> xr.DataArray:
    """Counts per bin from the cumulative counts over ``(descriptor, rank_bin)``."""
    histogram = cumulative - cumulative.shift(rank_bin=1, fill_value=0.0)
    labels = [label for label, _, _ in RANK_BINS]
    return histogram.transpose("descriptor", "rank_bin").assign_coords(rank_bin=labels)


def rank_histogram(
    better: xr.DataArray, ties: xr.DataArray, r1: xr.DataArray, tie_policy: str
) -> xr.DataArray:
    """Counts of R = 1 queries (with rank statistics) per rank bin (:data:`RANK_BINS`).

    Under ``expected`` a tied query spreads its unit weight evenly over its tied ranks
    b + 1 .. b + t + 1.
    """
    edges = xr.DataArray(list(HISTOGRAM_CUTOFFS), dims="rank_bin")
    if tie_policy == "expected":
        b, t = better.where(r1), ties.where(r1)
        # P(rank <= edge); NumPy's ufuncs on DataArrays return DataArrays
        cumulative = cast(xr.DataArray, np.minimum(np.maximum(edges - b, 0), t + 1) / (t + 1))
    else:
        rank = rank_from_rank_stats(better, ties, tie_policy=tie_policy).where(r1)
        cumulative = (rank <= edges).where(r1)
    below = cumulative.sum("query", skipna=True)  # (descriptor, rank_bin): 9 cumulative
    total = r1.sum("query").astype(np.float64).expand_dims(rank_bin=1, axis=-1)
    return _histogram(xr.concat([below, total], dim="rank_bin"))
