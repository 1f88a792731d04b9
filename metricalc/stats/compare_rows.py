"""The rows of a :func:`metricalc.stats.compare` result: one per comparison, from the paired
unit values (tests of unit means) or from the cluster inference of a pooled statistic."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import xarray as xr

from metricalc.stats.bootstrap import bca_interval
from metricalc.stats.clustered import intraclass_correlation, paired_inference
from metricalc.stats.effect import cohens_dz, rank_biserial
from metricalc.stats.intervals import t_interval
from metricalc.stats.paired import paired_test, untestable
from metricalc.stats.randomization import EXACT_MAX_UNITS
from metricalc.stats.statistics import ClusteredStatistic

__all__ = [
    "COMPARE_VARIABLES",
    "FLOAT_VARIABLES",
    "INT_VARIABLES",
    "MIN_UNITS",
    "add_clustering",
    "add_intervals",
    "cluster_rows",
    "paired_rows",
]

MIN_UNITS = 5
"""A comparison needs at least this many paired units."""

FLOAT_VARIABLES = (
    "mean_descriptor",
    "mean_baseline",
    "mean_diff",
    "median_diff",
    "ci_low",
    "ci_high",
    "statistic",
    "pvalue",
    "pvalue_corrected",
    "rank_biserial",
    "cohens_dz",
    "icc",
    "design_effect",
)
INT_VARIABLES = ("n", "n_dropped", "wins", "ties", "losses")
COMPARE_VARIABLES = (
    "n", "n_dropped", "mean_descriptor", "mean_baseline", "mean_diff", "median_diff", "ci_low",
    "ci_high", "interval_method", "statistic", "pvalue", "pvalue_corrected", "exact", "reject",
    "favours", "rank_biserial", "cohens_dz", "wins", "ties", "losses", "icc", "design_effect",
    "note", "caveat",
)  # fmt: skip
"""The variables of a compare Dataset, in order."""



def _too_few(units: xr.DataArray, n: int, dropped: int) -> str:
    """Why a comparison of ``n`` paired units (``dropped`` unpaired) cannot be tested."""
    pair_by = units.attrs["pair_by"]
    if n == 0 and dropped and pair_by == "query":
        return (
            f"the two systems share no query ({dropped:,} queries are in only one of them): "
            f"their keypoints differ (keypoints={units.attrs['keypoints']!r}); pair by image "
            "pair or scene instead: pair_by='pair'"
        )
    return (
        f"{n:,} paired unit{'' if n == 1 else 's'} (pair_by={pair_by!r}, {dropped:,} dropped "
        f"because missing in one system); a paired test needs at least {MIN_UNITS}"
    )



def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan



def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else math.nan



def paired_rows(
    units: xr.DataArray, pairs: list[tuple[int, int]], test: str
) -> tuple[dict[str, list[Any]], list[np.ndarray], np.ndarray]:
    """Every comparison on its paired units: the rows of the result without CIs, corrected
    p-values and verdicts (the p-values of the randomization test are NaN: computed for all
    comparisons at once), the mask of paired units and the differences (0 where unpaired)."""
    values = units.values
    present = np.isfinite(values)
    rows: dict[str, list[Any]] = {name: [] for name in COMPARE_VARIABLES}
    masks, differences = [], np.zeros((len(pairs), values.shape[1]))
    for k, (i, j) in enumerate(pairs):
        both = present[i] & present[j]
        n, dropped = int(both.sum()), int((present[i] ^ present[j]).sum())
        x, y = values[i, both], values[j, both]
        d = x - y
        note = _too_few(units, n, dropped) if n < MIN_UNITS else untestable(d, test=test)
        if note:
            statistic, pvalue = math.nan, math.nan
        elif test == "randomization":
            statistic, pvalue = float(d.mean()), math.nan  # p from the sign flips
        else:
            statistic, pvalue = paired_test(x, y, test=test)
        masks.append(both)
        differences[k, both] = d
        for name, value in (
            ("n", n),
            ("n_dropped", dropped),
            ("wins", int((d > 0).sum())),
            ("ties", int((d == 0).sum())),
            ("losses", int((d < 0).sum())),
            ("mean_descriptor", _mean(x)),
            ("mean_baseline", _mean(y)),
            ("mean_diff", _mean(d)),
            ("median_diff", _median(d)),
            ("statistic", statistic),
            ("pvalue", pvalue),
            ("rank_biserial", rank_biserial(d)),
            ("cohens_dz", cohens_dz(d)),
            ("exact", test == "randomization" and not note and n <= EXACT_MAX_UNITS),
            ("note", note),
        ):
            rows[name].append(value)
    return rows, masks, differences



def add_intervals(
    rows: dict[str, list[Any]],
    masks: list[np.ndarray],
    differences: np.ndarray,
    interval: str,
    confidence_level: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> None:
    """``ci_low``, ``ci_high``: the BCa (comparisons on the same units share their resamples)
    or t CI of every comparison with enough paired units, NaN for the others."""
    rows["ci_low"], rows["ci_high"] = [math.nan] * len(masks), [math.nan] * len(masks)
    rows["interval_method"] = [interval if n >= MIN_UNITS else "" for n in rows["n"]]
    groups: dict[bytes, list[int]] = {}
    for k, mask in enumerate(masks):
        if rows["n"][k] < MIN_UNITS:
            continue
        if interval == "t":  # untested for identical systems: the CI is [0, 0]
            rows["ci_low"][k], rows["ci_high"][k] = t_interval(
                differences[k, mask], confidence_level=confidence_level
            )
        else:
            groups.setdefault(np.packbits(mask).tobytes(), []).append(k)
    for members in groups.values():
        bounds = bca_interval(
            differences[np.ix_(np.asarray(members), masks[members[0]])],
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            rng=rng,
        )  # 2-D differences: arrays
        low, high = np.atleast_1d(bounds[0]), np.atleast_1d(bounds[1])
        for k, lo, hi in zip(members, low, high, strict=True):
            rows["ci_low"][k], rows["ci_high"][k] = float(lo), float(hi)



def cluster_rows(
    statistic: ClusteredStatistic,
    pairs: list[tuple[int, int]],
    n_resamples: int,
    confidence_level: float,
    flips: np.random.Generator,
    resamples: np.random.Generator,
    pair_by: str,
    cluster_scenes: np.ndarray | None = None,
    tick: Callable[[int], None] = lambda done: None,
) -> dict[str, list[Any]]:
    """Every comparison by the paired cluster bootstrap and the within-cluster swap test
    (:func:`metricalc.stats.clustered.paired_inference`): the rows of the result without the
    corrected p-values and verdicts. Counts, wins and effect sizes are of the clusters; with
    ``cluster_scenes`` (the scene of each cluster, for clusters finer than scenes) the
    intraclass correlation of the cluster differences within scenes and the design effect;
    ``tick`` reports the resamples done (:func:`~metricalc.stats.clustered.paired_inference`)."""
    rows: dict[str, list[Any]] = {name: [] for name in COMPARE_VARIABLES}
    present = statistic.present()
    for i, j in pairs:
        result = paired_inference(
            statistic, i, j, n_resamples=n_resamples, confidence_level=confidence_level,
            resample_rng=resamples, swap_rng=flips, min_clusters=MIN_UNITS, tick=tick,
        )  # fmt: skip
        d = result.cluster_differences
        icc = deff = math.nan
        if cluster_scenes is not None:
            icc, deff = intraclass_correlation(d, cluster_scenes[present[i] & present[j]])
        d = d[np.isfinite(d)]
        note = (
            f"{result.clusters:,} paired unit{'' if result.clusters == 1 else 's'} "
            f"(pair_by={pair_by!r}, {result.dropped:,} dropped because missing in one system); "
            f"a paired test needs at least {MIN_UNITS}"
            if result.clusters < MIN_UNITS
            else ""
        )
        tested = not note
        for name, value in (
            ("n", result.clusters),
            ("n_dropped", result.dropped),
            ("wins", int((d > 0).sum())),
            ("ties", int((d == 0).sum())),
            ("losses", int((d < 0).sum())),
            ("mean_descriptor", result.first),
            ("mean_baseline", result.second),
            ("mean_diff", result.estimate),
            ("median_diff", _median(d)),
            ("ci_low", result.low if tested else math.nan),
            ("ci_high", result.high if tested else math.nan),
            ("interval_method", result.interval if tested else ""),
            ("statistic", result.estimate if tested else math.nan),
            ("pvalue", result.pvalue if tested else math.nan),
            ("exact", result.exact and tested),
            ("rank_biserial", rank_biserial(d)),
            ("cohens_dz", cohens_dz(d)),
            ("icc", icc),
            ("design_effect", deff),
            ("note", note),
        ):
            rows[name].append(value)
    return rows



def add_clustering(
    rows: dict[str, list[Any]],
    masks: list[np.ndarray],
    differences: np.ndarray,
    units: xr.DataArray,
) -> None:
    """``icc``, ``design_effect``: where the units are finer than scenes, the intraclass
    correlation of the paired differences within scenes and the design effect of their mean
    (:func:`metricalc.stats.clustered.intraclass_correlation`); NaN for scene units."""
    rows["icc"], rows["design_effect"] = [math.nan] * len(masks), [math.nan] * len(masks)
    if units.attrs["pair_by"] == "scene":
        return
    scenes = np.asarray(units["scene"].values).astype(str)
    for k, mask in enumerate(masks):
        rows["icc"][k], rows["design_effect"][k] = intraclass_correlation(
            differences[k, mask], scenes[mask]
        )
