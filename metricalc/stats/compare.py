"""Paired comparisons of systems on one metric: tests, effect sizes, CIs, one correction family."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.stats.bootstrap import check_bootstrap_memory
from metricalc.stats.compare_rows import (
    COMPARE_VARIABLES,
    FLOAT_VARIABLES,
    INT_VARIABLES,
    MIN_UNITS,
    add_clustering,
    add_intervals,
    cluster_rows,
    paired_rows,
)
from metricalc.stats.correction import CORRECTIONS, correct
from metricalc.stats.cube_statistic import LEVEL_PHRASES, LEVELS, cube_statistic
from metricalc.stats.intervals import INTERVALS, resolved_interval
from metricalc.stats.paired import TESTS, default_test, is_binary
from metricalc.stats.randomization import sign_flip_pvalues
from metricalc.stats.sides import direction, disagreement, verdict
from metricalc.stats.statistics import ClusteredStatistic
from metricalc.stats.units import SPLITS, unit_values
from metricalc.validation import (
    Choice,
    Fraction,
    Integer,
    Nullable,
    Text,
    validate_params,
)

__all__ = ["COMPARE_VARIABLES", "MIN_UNITS", "compare", "compare_statistic"]

def generators(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The random generators of a call with ``seed``: (sign flips, bootstrap resamples).

    Two independent streams spawned from ``numpy.random.SeedSequence(seed)``, so the
    randomization test and the bootstrap do not depend on each other's draws."""
    flips, resamples = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(flips), np.random.default_rng(resamples)


def _system_pairs(
    names: list[str],
    baseline: str | None,
    pairs: Sequence[tuple[str, str]] | None,
    excluded: list[str],
) -> list[tuple[int, int]]:
    """(descriptor, baseline) system indices of the comparisons of one call."""

    def index(name: Any, role: str) -> int:
        if isinstance(name, str) and name in names:
            return names.index(name)
        why = " (its evaluation failed: status 'error')" if name in excluded else ""
        raise InvalidInputError(
            f"{role} {name!r} is not a system of the cube{why}; systems: {', '.join(names)}"
        )

    if pairs is not None:
        if baseline is not None:
            raise InvalidInputError(
                "give either baseline= (every system against one) or pairs= (an explicit list "
                "of (descriptor, baseline) pairs), not both"
            )
        if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
            raise InvalidInputError(
                "pairs must be a non-empty sequence of (descriptor, baseline) system names, e.g. "
                f"[('sift (locked)', 'sift (native)')]; got {pairs!r}"
            )
        out: list[tuple[int, int]] = []
        for pair in pairs:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise InvalidInputError(
                    f"pairs: each item must be a (descriptor, baseline) pair; got {pair!r}"
                )
            i, j = index(pair[0], "pairs: descriptor"), index(pair[1], "pairs: baseline")
            if i == j:
                raise InvalidInputError(f"pairs: {pair!r} compares a system with itself")
            if (i, j) in out or (j, i) in out:
                raise InvalidInputError(
                    f"pairs: {names[i]!r} and {names[j]!r} are compared twice; each comparison "
                    "must appear once (one family for the correction)"
                )
            out.append((i, j))
        return out
    if baseline is None:
        if len(names) < 2:
            raise InvalidInputError(
                f"a comparison needs at least two systems; the cube has {names}"
            )
        return [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    b = index(baseline, "baseline")
    if len(names) < 2:
        raise InvalidInputError(f"baseline {baseline!r} is the only system; nothing to compare")
    return [(i, b) for i in range(len(names)) if i != b]


def _check_binary(values: np.ndarray, metric: str, tie_policy: Any) -> None:
    """McNemar's test needs 0/1 outcomes: a clear error saying why and what to do otherwise."""
    present = values[np.isfinite(values)]
    if is_binary(present):
        return
    if metric.startswith("hit@"):
        k = metric[4:]
        fractional = int(((values > 0) & (values < 1)).any(axis=0).sum())
        raise InvalidInputError(
            f"the mcnemar test needs binary outcomes (a hit or a miss per query), but {metric!r} "
            f"is fractional on {fractional:,} queries: under the cube's tie policy "
            f"{tie_policy!r}, a "
            f"query whose tied items straddle rank {k} counts its hit probability "
            "clip(K - better, 0, ties + 1) / (ties + 1). Leave the test at its default "
            "(test='auto', no --test): the randomization test of the mean hit rate, the table's "
            f"hit_rate_at_{k}; or evaluate the cube under tie policy 'pessimistic' or "
            "'optimistic' ('metricalc keypoints eval --tie-policy pessimistic', or "
            "'metricalc run hpatches ... eval.tie_policy=pessimistic'), where every query is a "
            "hit or a miss"
        )
    raise InvalidInputError(
        f"the mcnemar test needs a binary metric (0 or 1 per query); {metric!r} has other "
        "values (use e.g. metric='hit@1' or 'nn_correct', or the default test='auto')"
    )


def _dataset(
    rows: dict[str, list[Any]], descriptors: list[str], baselines: list[str], attrs: dict[str, Any]
) -> xr.Dataset:
    index = pd.MultiIndex.from_arrays([descriptors, baselines], names=["descriptor", "baseline"])
    coords = xr.Coordinates.from_pandas_multiindex(index, "comparison")
    variables: dict[str, Any] = {}
    for name in (*INT_VARIABLES, "favours"):
        variables[name] = ("comparison", np.asarray(rows[name], dtype=np.int64))
    for name in FLOAT_VARIABLES:
        variables[name] = ("comparison", np.asarray(rows[name], dtype=np.float64))
    for name in ("reject", "exact"):
        variables[name] = ("comparison", np.asarray(rows[name], dtype=bool))
    for name in ("note", "caveat", "interval_method"):
        variables[name] = ("comparison", np.asarray(rows[name], dtype=str))
    data = {name: variables[name] for name in COMPARE_VARIABLES}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _resolved_test(
    test: str, metric: str, pair_by: str, units: xr.DataArray, pairs: list[tuple[int, int]]
) -> str:
    """The test a call runs: ``auto`` resolved on the values of the compared systems; for
    ``mcnemar``, those values checked to be binary."""
    used = sorted({i for pair in pairs for i in pair})
    if test == "auto":
        test = default_test(metric, pair_by, units.values[used])
    if test == "mcnemar":
        _check_binary(units.values[used], metric, units.attrs.get("tie_policy"))
    return test


def _tested(
    rows: dict[str, list[Any]], pairs: list[tuple[int, int]], names: list[str]
) -> list[int]:
    """The comparisons that can be tested; none: an error naming each comparison and why."""
    tested = [k for k, note in enumerate(rows["note"]) if not note]
    if tested:
        return tested
    by_reason: dict[str, list[str]] = {}  # comparisons with the same reason named together
    for (i, j), note in zip(pairs, rows["note"], strict=True):
        by_reason.setdefault(note, []).append(f"{names[i]!r} vs {names[j]!r}")
    reasons = [f"{', '.join(which)}: {note}" for note, which in by_reason.items()]
    if len(pairs) == 1:
        raise InvalidInputError(reasons[0])
    raise InvalidInputError("no comparison of the call can be tested: " + "; ".join(reasons))


def _add_verdicts(
    rows: dict[str, list[Any]],
    test: str,
    correction: str,
    alpha: float,
    systems: list[tuple[str, str]],
) -> None:
    """``pvalue_corrected`` (one family: the tested comparisons), ``reject``, ``favours`` and
    ``caveat`` of every comparison of the (descriptor, baseline) ``systems``."""
    raw = np.asarray(rows["pvalue"], dtype=np.float64)
    corrected = np.full_like(raw, np.nan)
    family = np.isfinite(raw)
    corrected[family] = correct(raw[family], method=correction)
    rows["pvalue_corrected"] = list(corrected)
    rows["reject"] = list(family & (np.nan_to_num(corrected, nan=1.0) < alpha))
    sides = [
        direction(
            test,
            mean_diff=rows["mean_diff"][k],
            rank_biserial=rows["rank_biserial"][k],
            wins=rows["wins"][k],
            losses=rows["losses"][k],
        )
        if rows["reject"][k]
        else 0
        for k in range(len(systems))
    ]
    rows["favours"] = [verdict(side, rows["mean_diff"][k]) for k, side in enumerate(sides)]
    rows["caveat"] = [
        disagreement(test, side, rows["mean_diff"][k], descriptor, baseline)
        for k, (side, (descriptor, baseline)) in enumerate(zip(sides, systems, strict=True))
    ]


@validate_params(
    metric=Text(),
    pair_by=Choice(LEVELS),
    mean_over=Nullable(Choice(LEVELS)),
    test=Choice(TESTS),
    correction=Choice(CORRECTIONS),
    alpha=Fraction(),
    baseline=Nullable(Text()),
    split=Nullable(Choice(SPLITS)),
    seed=Integer(0),
    n_resamples=Integer(1),
    confidence_level=Fraction(),
    interval=Choice(INTERVALS),
)
def compare(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
    *,
    metric: str = "ap",
    pair_by: str = "scene",
    mean_over: str | None = None,
    test: str = "auto",
    correction: str = "holm",
    alpha: float = 0.05,
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    split: str | None = None,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    interval: str = "auto",
) -> xr.Dataset:
    """Paired significance tests of systems on one metric, with effect sizes and CIs.

    Each comparison is about the difference of the table statistic of the two systems (the
    mean of ``metric`` over ``mean_over`` units) and is made at the level where samples are
    independent, ``pair_by`` (scenes by default: the keypoints of one scene are correlated, so
    they are never counted as independent samples; see docs/stats.md):

    - ``mean_over == pair_by`` (a mean of unit values, e.g. the mean over scenes of the scene
      means): the metric is averaged per unit (:func:`~metricalc.stats.unit_values`), each
      comparison pairs the units both systems have (the others are dropped and counted) and
      works on the differences :math:`d_i = x_i - y_i` (descriptor minus baseline);
    - ``mean_over`` finer than ``pair_by`` (e.g. the mean over all queries, pooled, tested by
      scene): the paired cluster bootstrap and the within-cluster randomization test of that
      pooled statistic (:mod:`metricalc.stats.clustered`); counts, wins and effect sizes are
      then of the clusters.

    With units finer than scenes (``pair_by="query"`` or ``"pair"``, on request) the result
    carries the intraclass correlation of the differences within scenes and the design effect
    (``icc``, ``design_effect``), so a reader sees what ignoring the clustering costs. The
    comparisons of the call that can be tested are one family for the multiple-comparison
    correction.

    A comparison that cannot be tested (fewer than :data:`MIN_UNITS` paired units; all
    differences zero, for every test but the randomization test; constant differences, for the
    t-test) is kept with NaN ``statistic`` and p-values, ``reject`` False, ``favours`` 0 and a
    ``note`` saying why; it is left out of the correction family. The call raises only when no
    comparison can be tested.

    Parameters
    ----------
    cube : QueryCube or mapping of label -> QueryCube
        One cube (systems = its descriptors) or several, e.g. ``{"locked": c1, "native": c2}``
        (systems ``"sift (locked)"``, ...; protocols equal except ``keypoints``/``distance``).
        Descriptors with status ``"error"`` are left out (attr ``excluded_descriptors``).
    metric : str
        A numeric (descriptor, query) variable (``ap``, ``nn_correct``, ``image_ap``, ...) or
        ``"hit@K"`` (the per-query hit probability under the cube's tie policy; its mean over
        a system's queries is the metric set's ``hit_rate_at_K``) or ``"precision@K"``
        (``hit@K`` / K, whose mean is the metric set's ``precision_at_K``); see
        :func:`~metricalc.stats.metric_values`.
    pair_by : {"scene", "pair", "query"}
        The independent unit, resampled and permuted whole (default ``"scene"``). Queries need
        the same queries in both systems (locked keypoints) and ignore the clustering of
        queries in scenes; with native keypoints pair by image pair or scene.
    mean_over : {"query", "pair", "scene"}, optional
        The level of the table statistic: ``"query"``, the mean over all queries (pooled, the
        metric set's ``true_map_micro``); ``"pair"``, the mean over image pairs of the pair
        means; ``"scene"``, the mean over scenes of the scene means (``true_map_macro_by_scene``,
        ``viewpoint_map``). Default: ``pair_by``. Must not be coarser than ``pair_by``.
    test : {"auto", "randomization", "ttest", "wilcoxon", "sign", "mcnemar"}
        ``auto`` (default, :func:`~metricalc.stats.paired.default_test`): the test of what a
        results table shows, the mean. McNemar's test for binary outcomes (``hit@K`` or
        ``nn_correct`` paired by query with every value 0 or 1), else ``randomization``: the
        paired sign-flip test of the mean difference with ``n_resamples`` flips,
        :math:`p = (b + 1)/(m + 1)` (:mod:`metricalc.stats.randomization`). ``ttest`` also
        tests the mean difference. ``wilcoxon`` tests the location (pseudo-median) of the
        differences and ``sign`` their median; both can reject in favour of the system with the
        lower mean, which is then not called better (``favours`` 0, a ``caveat`` says so).
        ``mcnemar`` needs binary values (``hit@K`` under the ``optimistic``, ``pessimistic`` or
        ``workbench`` policy, or where no tie straddles rank K; ``nn_correct``) and
        ``pair_by="query"``. See :mod:`metricalc.stats.paired`.
    correction : {"holm", "bonferroni", "fdr_bh", "none"}
        Passed explicitly to :func:`statsmodels.stats.multitest.multipletests`, once for the
        family (:func:`~metricalc.stats.correct`).
    alpha : float
        ``reject`` is ``pvalue_corrected < alpha``.
    baseline : str, optional
        A system name: every other system against it. None (and no ``pairs``): all unordered
        pairs (i < j in system order: descriptor = system i, baseline = system j).
    pairs : sequence of (str, str), optional
        An explicit list of comparisons, ``(descriptor, baseline)`` system names, in the order
        of the result, e.g. each descriptor locked against itself native:
        ``[("sift (locked)", "sift (native)"), ("orb (locked)", "orb (native)")]``. Not with
        ``baseline``; each pair once (in either order).
    split : {"viewpoint", "illumination"}, optional
        Only the queries of that split.
    seed : int
        Seed of the sign flips and of the bootstrap resamples (:func:`generators`).
    n_resamples : int
        Sign flips of the randomization test and bootstrap resamples of the BCa CI.
    confidence_level : float
        Level of the CI of the mean difference.
    interval : {"auto", "bca", "t"}
        The CI of the mean difference: ``bca``, the BCa bootstrap interval with
        ``n_resamples`` resamples (:mod:`metricalc.stats.bootstrap`); ``t``, the Student t
        interval :math:`\\bar d \\pm t_{n-1} s_d / \\sqrt n` of
        :func:`scipy.stats.ttest_rel` (:mod:`metricalc.stats.intervals`): no resampling, so a
        call over a million units costs about the sign flips alone; ``auto`` (default), BCa
        when the call's largest comparison pairs at most
        :data:`~metricalc.stats.intervals.BCA_MAX_UNITS` (100,000) units, t above
        (:func:`~metricalc.stats.intervals.resolved_interval`). For a pooled statistic
        (``mean_over`` finer than ``pair_by``) the interval is always the paired cluster
        bootstrap, BCa where defined, percentile otherwise (``interval_method``; attr
        ``interval`` is ``"cluster"``).

    Returns
    -------
    xarray.Dataset
        Over the dim ``comparison``, indexed by a MultiIndex (``descriptor``, ``baseline``):
        ``n``, ``n_dropped`` (int64: paired units; units of only one of the two systems),
        ``mean_descriptor``, ``mean_baseline``, ``mean_diff``, ``median_diff``, ``ci_low``,
        ``ci_high``, ``statistic``, ``pvalue``, ``pvalue_corrected`` (float64), ``reject``
        (bool), ``favours`` (int64: +1 the descriptor, -1 the baseline, 0 neither: the system
        a rejected comparison calls better, :func:`verdict`: the side of the test's own
        statistic, :func:`direction`, where the mean difference points the same way; 0 where
        ``reject`` is False or the two disagree), ``rank_biserial``, ``cohens_dz`` (float64),
        ``wins``, ``ties``, ``losses`` (int64: units with :math:`d_i` > 0, = 0, < 0),
        ``interval_method`` (str: ``"bca"``, ``"percentile"`` or ``"t"``), ``exact`` (bool:
        the randomization p-value enumerated every sign pattern, at most 16 units), ``icc``,
        ``design_effect`` (float64: units finer than scenes only, else NaN), ``note``
        (str: why the comparison was not tested, ``""`` where it was), ``caveat`` (str: for a
        rejected comparison whose test points against the mean difference, the words of
        :func:`disagreement`; ``""`` otherwise). ``statistic`` is scipy's (wilcoxon, ttest),
        the number of wins (sign), statsmodels' (mcnemar) or the mean difference
        (randomization). attrs: ``metric``, ``pair_by``, ``mean_over``, ``statistic_phrase``
        (the statistic in words), ``test`` (the test run: ``auto``
        resolved), ``correction``, ``alpha``,
        ``split`` (``""`` for all), ``seed``, ``n_resamples``, ``confidence_level``, ``interval`` (the interval computed:
        ``auto`` resolved),
        ``excluded_descriptors``, and the protocol attrs of the cube(s)
        (``keypoints``/``distance`` may be ``"mixed"``; the cube's own ``seed`` attr is
        ``protocol_seed``).

    Raises
    ------
    InvalidInputError
        Unknown metric (the message lists the available ones), test, correction, baseline,
        pair or split; ``baseline`` with ``pairs``; no comparison of the call that can be tested
        (fewer than 5 paired units, all differences zero, ...: the message names each
        comparison and why); cubes of different protocols; mcnemar on a non-binary metric.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc import cube as qc, stats
    >>> rng = np.random.default_rng(0)
    >>> n = 40
    >>> coords = {"scene": np.repeat([f"v_{k}" for k in "abcdefgh"], 5), "pair": ["1-2"] * n,
    ...           "keypoint_set": ["sift"] * n, "query_keypoint": np.arange(n)}
    >>> sift = rng.uniform(0.4, 1.0, n)
    >>> c = qc.new_cube(["sift", "orb", "copy"], coords,
    ...                 {"ap": [sift, sift - rng.uniform(0, 0.3, n), sift]},
    ...                 attrs=qc.DEFAULT_ATTRS)
    >>> ds = stats.compare(c, baseline="sift")  # mean over scenes of the scene mAP, 8 scenes
    >>> one = ds.sel(descriptor="orb", baseline="sift")
    >>> int(one.n), int(one.losses), bool(one.reject), int(one.favours), bool(one.ci_high < 0)
    (8, 8, True, -1, True)
    >>> float(one.pvalue), bool(one.exact)  # 2 of the 2**8 sign patterns are as extreme
    (0.0078125, True)
    >>> ds.attrs["test"], ds.attrs["pair_by"], ds.attrs["mean_over"]
    ('randomization', 'scene', 'scene')
    >>> float(ds.sel(descriptor="copy", baseline="sift").pvalue)
    1.0
    >>> pooled = stats.compare(c, baseline="sift", mean_over="query")  # scenes resampled
    >>> pooled.attrs["interval"], int(pooled.sel(descriptor="orb").n.item())
    ('cluster', 8)
    >>> by_query = stats.compare(c, baseline="sift", pair_by="query", test="wilcoxon")
    >>> print(by_query.sel(descriptor="copy").note.item())
    all 40 paired differences are zero (the systems give identical values on every unit): the wilcoxon test needs a non-zero difference
    >>> ds.to_dataframe().index.names
    FrozenList(['descriptor', 'baseline'])
    >>> stats.compare(c, pairs=[("orb", "sift")]).sizes["comparison"]
    1
    """  # noqa: E501
    mean_over = pair_by if mean_over is None else mean_over
    if LEVELS.index(pair_by) < LEVELS.index(mean_over):
        raise InvalidInputError(
            f"a mean over {mean_over}s cannot be tested by resampling {pair_by}s: pair_by must "
            f"be at least as coarse as mean_over (pair_by={mean_over!r} or coarser)"
        )
    if test == "mcnemar" and pair_by != "query":
        raise InvalidInputError(
            f"the mcnemar test pairs binary outcomes of single queries: use pair_by='query' "
            f"(got pair_by={pair_by!r}), or another test for unit means"
        )
    if test in ("ttest", "wilcoxon", "sign") and mean_over != pair_by:
        raise InvalidInputError(
            f"the {test} test treats each {pair_by} as one value, so it tests a mean over "
            f"{pair_by}s, not the {LEVEL_PHRASES[mean_over]} (mean_over={mean_over!r}); use "
            "the randomization test (test='auto'), which resamples whole clusters"
        )
    flips, resamples = generators(seed)
    clustered = pair_by != "query" and (mean_over != pair_by or interval == "auto")
    if clustered and test in ("auto", "randomization"):
        statistic, cube_attrs = cube_statistic(
            cube, metric=metric, mean_over=mean_over, pair_by=pair_by, split=split
        )
        names = list(statistic.systems)
        excluded = list(cube_attrs["excluded_descriptors"])
        pairs_ = _system_pairs(names, baseline, pairs, excluded)
        test, interval = "randomization", "cluster"
        check_bootstrap_memory(len(pairs_), n_resamples)  # before any resample, not after
        scenes = None
        if pair_by == "pair":  # image-pair clusters "scene/pair": what ignoring scenes costs
            scenes = np.array([str(c).partition("/")[0] for c in statistic.clusters])
        rows = cluster_rows(
            statistic, pairs_, n_resamples, confidence_level, flips, resamples, pair_by, scenes
        )
        _tested(rows, pairs_, names)
        split_attr = split or ""
    else:
        units = unit_values(cube, metric=metric, pair_by=pair_by, split=split)
        names = [str(n) for n in units["descriptor"].values.tolist()]
        excluded = list(units.attrs["excluded_descriptors"])
        cube_attrs = dict(units.attrs)
        pairs_ = _system_pairs(names, baseline, pairs, excluded)
        test = _resolved_test(test, metric, pair_by, units, pairs_)
        rows, masks, differences = paired_rows(units, pairs_, test)
        tested = _tested(rows, pairs_, names)
        interval = resolved_interval(interval, max(rows["n"]))
        if interval == "bca":
            check_bootstrap_memory(len(masks), n_resamples)  # before hours of flips, not after
        if test == "randomization":
            every = len(tested) == len(pairs_)  # then no copy of the differences
            tested_d = differences if every else differences[tested]
            p = np.atleast_1d(sign_flip_pvalues(tested_d, n_resamples=n_resamples, rng=flips))
            for k, value in zip(tested, p, strict=True):
                rows["pvalue"][k] = float(value)
        add_intervals(rows, masks, differences, interval, confidence_level, n_resamples, resamples)
        add_clustering(rows, masks, differences, units)
        split_attr = units.attrs["split"]
    _add_verdicts(rows, test, correction, alpha, [(names[i], names[j]) for i, j in pairs_])
    attrs = {
        "metric": metric,
        "pair_by": pair_by,
        "mean_over": mean_over,
        "statistic_phrase": LEVEL_PHRASES[mean_over],
        "test": test,
        "correction": correction,
        "alpha": alpha,
        "split": split_attr,
        "seed": seed,
        "n_resamples": n_resamples,
        "confidence_level": confidence_level,
        "interval": interval,
        "excluded_descriptors": excluded,
    }
    for name, value in cube_attrs.items():
        if name not in ("metric", "pair_by", "split", "excluded_descriptors"):
            attrs["protocol_seed" if name == "seed" else str(name)] = value
    return _dataset(rows, [names[i] for i, _ in pairs_], [names[j] for _, j in pairs_], attrs)


@validate_params(
    pair_by=Text(),
    baseline=Nullable(Text()),
    correction=Choice(CORRECTIONS),
    alpha=Fraction(),
    seed=Integer(0),
    n_resamples=Integer(1),
    confidence_level=Fraction(),
)
def compare_statistic(
    statistic: ClusteredStatistic,
    *,
    pair_by: str,
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    correction: str = "holm",
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    attrs: Mapping[str, Any] | None = None,
    tick: Callable[[int], None] = lambda done: None,
) -> xr.Dataset:
    """Paired comparisons of the systems of any table statistic (the pose AUC of image pairs,
    ...): the paired cluster bootstrap and the within-cluster swap test of the statistic itself
    (:mod:`metricalc.stats.clustered`), the comparisons of the call one correction family.

    The result has the variables of :func:`compare` (counts, wins and effect sizes of the
    clusters, ``interval`` attr ``"cluster"``, ``test`` ``"randomization"``); ``pair_by`` names
    the clusters, ``metric`` and ``statistic_phrase`` are the statistic's ``name`` and
    ``phrase``, and ``attrs`` are added (the protocol of the records). ``tick`` is called with
    the number of resamples and swap patterns done, block by block (progress of long work:
    :func:`~metricalc.stats.clustered.inference_steps` per comparison).

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc.stats.statistics import UnitStatistic, weighted_mean
    >>> values = np.array([[0.9, 0.8, 0.7, 0.9, 0.6], [0.5, 0.6, 0.4, 0.7, 0.5]])
    >>> stat = UnitStatistic("acc", "mean accuracy", ["a", "b"], np.array(list("vwxyz")),
    ...                      values, np.arange(5), weighted_mean)
    >>> ds = compare_statistic(stat, pair_by="pair")
    >>> round(float(ds.mean_diff[0]), 4), float(ds.pvalue[0]), bool(ds.exact[0])
    (0.24, 0.0625, True)
    """
    flips, resamples = generators(seed)
    names = list(statistic.systems)
    pairs_ = _system_pairs(names, baseline, pairs, [])
    rows = cluster_rows(
        statistic, pairs_, n_resamples, confidence_level, flips, resamples, pair_by, tick=tick
    )
    _tested(rows, pairs_, names)
    systems = [(names[i], names[j]) for i, j in pairs_]
    _add_verdicts(rows, "randomization", correction, alpha, systems)
    result_attrs = {
        **dict(attrs or {}),
        "metric": statistic.name,
        "pair_by": pair_by,
        "mean_over": "",
        "statistic_phrase": statistic.phrase,
        "test": "randomization",
        "correction": correction,
        "alpha": alpha,
        "split": "",
        "seed": seed,
        "n_resamples": n_resamples,
        "confidence_level": confidence_level,
        "interval": "cluster",
        "excluded_descriptors": [],
    }
    return _dataset(rows, [d for d, _ in systems], [b for _, b in systems], result_attrs)
