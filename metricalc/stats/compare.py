"""Paired comparisons of systems on one metric: tests, effect sizes, CIs, one correction family."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.stats.bootstrap import bca_interval
from metricalc.stats.correction import CORRECTIONS, correct
from metricalc.stats.effect import cohens_dz, rank_biserial
from metricalc.stats.paired import (
    MEAN_TESTS,
    TESTS,
    default_test,
    is_binary,
    paired_test,
    untestable,
)
from metricalc.stats.randomization import sign_flip_pvalues
from metricalc.stats.units import unit_values
from metricalc.validation import check_choice, check_fraction, check_integer

__all__ = ["MIN_UNITS", "compare", "direction", "disagreement", "verdict"]

MIN_UNITS = 5
"""A comparison needs at least this many paired units."""

_FLOAT_VARIABLES = (
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
)
_INT_VARIABLES = ("n", "n_dropped", "wins", "ties", "losses")
_ORDER = (
    "n", "n_dropped", "mean_descriptor", "mean_baseline", "mean_diff", "median_diff", "ci_low",
    "ci_high", "statistic", "pvalue", "pvalue_corrected", "reject", "favours", "rank_biserial",
    "cohens_dz", "wins", "ties", "losses", "note", "caveat",
)  # fmt: skip
"""The variables of a compare Dataset, in order."""


def generators(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The random generators of a call with ``seed``: (sign flips, bootstrap resamples).

    Two independent streams spawned from ``numpy.random.SeedSequence(seed)``, so the
    randomization test and the bootstrap do not depend on each other's draws."""
    flips, resamples = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(flips), np.random.default_rng(resamples)


def direction(test: str, *, mean_diff: float, rank_biserial: float, wins: int, losses: int) -> int:
    r"""The side a two-sided paired test's own statistic points to: +1 the descriptor, -1 the
    baseline, 0 none.

    A two-sided test rejects "no difference" when its own statistic lies far out in either
    tail; the tail tells which system the evidence is for. That is the sign of

    - the mean difference :math:`\bar d` for the t-test (:math:`t = \bar d / (s_d/\sqrt n)`)
      and the randomization test (statistic :math:`\sum_i d_i`);
    - :math:`T^+ - T^-` for the Wilcoxon test, the sign of the matched-pairs rank-biserial r
      (the same zero-dropping ranks as :func:`scipy.stats.wilcoxon`);
    - wins - losses for the sign test and McNemar's test (the discordant counts b - c).

    The mean difference can point the other way than a rank or sign test (many small wins
    against a few large losses): the Wilcoxon test then points to the system with the lower
    mean. :func:`compare` calls a system better only where this side and the mean difference
    agree (:func:`verdict`). 0 when the statistic is at its null centre or undefined.

    Examples
    --------
    >>> from metricalc.stats.compare import direction
    >>> direction("wilcoxon", mean_diff=0.001, rank_biserial=-0.22, wins=40, losses=60)
    -1
    >>> direction("ttest", mean_diff=0.001, rank_biserial=-0.22, wins=40, losses=60)
    1
    >>> direction("sign", mean_diff=-0.2, rank_biserial=-0.1, wins=30, losses=10)
    1
    """
    if test in MEAN_TESTS:
        value = float(mean_diff)
    elif test == "wilcoxon":
        value = float(rank_biserial)
    else:
        value = float(wins - losses)
    return int(np.sign(value)) if math.isfinite(value) else 0


def verdict(side: int, mean_diff: float) -> int:
    """The system a rejected comparison calls better: ``side`` (:func:`direction`) where the
    mean difference has the same sign, else 0 (no verdict: a system with the lower or an equal
    mean is never called better).

    Examples
    --------
    >>> from metricalc.stats.compare import verdict
    >>> verdict(1, 0.02), verdict(-1, 0.009), verdict(1, 0.0), verdict(0, -0.3)
    (1, 0, 0, 0)
    """
    mean_side = int(np.sign(mean_diff)) if math.isfinite(mean_diff) else 0
    return side if side == mean_side else 0


TEST_QUANTITIES = {
    "wilcoxon": "the location (pseudo-median) of the differences",
    "sign": "the count of wins and losses",
    "mcnemar": "the discordant outcomes",
}
"""What a test other than a test of the mean difference finds in favour of a system."""


def disagreement(test: str, side: int, mean_diff: float, descriptor: str, baseline: str) -> str:
    """Why a rejected comparison calls no system better: its test's statistic points to one
    system and the mean difference does not (``""`` when they agree).

    Examples
    --------
    >>> from metricalc.stats.compare import disagreement
    >>> print(disagreement("wilcoxon", 1, -0.009, "sift", "orb"))
    the wilcoxon test rejects in favour of 'sift' on the location (pseudo-median) of the differences, but the mean difference favours 'orb' (-0.009, sift minus orb): neither is called better; the mean difference is tested by test='randomization'
    """  # noqa: E501
    if side == 0 or verdict(side, mean_diff) != 0:
        return ""
    found, other = (descriptor, baseline) if side > 0 else (baseline, descriptor)
    if math.isfinite(mean_diff) and mean_diff != 0:
        means = (
            f"the mean difference favours {other!r} ({mean_diff:+.4g}, {descriptor} minus "
            f"{baseline})"
        )
    else:
        means = "the two means are equal"
    quantity = TEST_QUANTITIES.get(test, "its statistic")
    return (
        f"the {test} test rejects in favour of {found!r} on {quantity}, but {means}: neither is "
        "called better; the mean difference is tested by test='randomization'"
    )


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


def _check_binary(values: np.ndarray, metric: str, policy: Any) -> None:
    """McNemar's test needs 0/1 outcomes: a clear error saying why and what to do otherwise."""
    present = values[np.isfinite(values)]
    if is_binary(present):
        return
    if metric.startswith("hit@"):
        k = metric[4:]
        fractional = int(((values > 0) & (values < 1)).any(axis=0).sum())
        raise InvalidInputError(
            f"the mcnemar test needs binary outcomes (a hit or a miss per query), but {metric!r} "
            f"is fractional on {fractional:,} queries: under the cube's tie policy {policy!r}, a "
            f"query whose tied items straddle rank {k} counts its hit probability "
            "clip(K - better, 0, ties + 1) / (ties + 1). Leave the test at its default "
            "(test='auto', no --test): the randomization test of the mean hit rate, the table's "
            f"precision_at_{k}; or evaluate the cube under tie policy 'pessimistic' or "
            "'optimistic' ('metricalc keypoints eval --tie-policy pessimistic', or "
            "'metricalc eval hpatches ... eval.tie_policy=pessimistic'), where every query is a "
            "hit or a miss"
        )
    raise InvalidInputError(
        f"the mcnemar test needs a binary metric (0 or 1 per query); {metric!r} has other "
        "values (use e.g. metric='hit@1' or 'nn_correct', or the default test='auto')"
    )


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else math.nan


def _dataset(
    rows: dict[str, list[Any]], descriptors: list[str], baselines: list[str], attrs: dict[str, Any]
) -> xr.Dataset:
    index = pd.MultiIndex.from_arrays([descriptors, baselines], names=["descriptor", "baseline"])
    coords = xr.Coordinates.from_pandas_multiindex(index, "comparison")
    variables: dict[str, Any] = {}
    for name in (*_INT_VARIABLES, "favours"):
        variables[name] = ("comparison", np.asarray(rows[name], dtype=np.int64))
    for name in _FLOAT_VARIABLES:
        variables[name] = ("comparison", np.asarray(rows[name], dtype=np.float64))
    variables["reject"] = ("comparison", np.asarray(rows["reject"], dtype=bool))
    for name in ("note", "caveat"):
        variables[name] = ("comparison", np.asarray(rows[name], dtype=str))
    return xr.Dataset({name: variables[name] for name in _ORDER}, coords=coords, attrs=attrs)


def compare(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
    *,
    metric: str = "ap",
    pair_by: str = "query",
    test: str = "auto",
    correction: str = "holm",
    alpha: float = 0.05,
    baseline: str | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    split: str | None = None,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
) -> xr.Dataset:
    """Paired significance tests of systems on one metric, with effect sizes and bootstrap CIs.

    The metric is taken per unit (:func:`~metricalc.stats.unit_values`: queries, image pairs or
    scenes); each comparison pairs the units both systems have (the others are dropped and
    counted) and works on the differences :math:`d_i = x_i - y_i` (descriptor minus baseline).
    The comparisons of the call that can be tested are one family for the multiple-comparison
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
        a system's queries is the metric set's ``precision_at_K``; see
        :func:`~metricalc.stats.metric_values`).
    pair_by : {"query", "pair", "scene"}
        The unit. Queries need the same queries in both systems (locked keypoints); with native
        keypoints pair by image pair or scene (the metric is averaged per unit first).
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
        Sign flips of the randomization test and bootstrap resamples of the CI.
    confidence_level : float
        Level of the BCa bootstrap CI of the mean difference (:mod:`metricalc.stats.bootstrap`).

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
        ``wins``, ``ties``, ``losses`` (int64: units with :math:`d_i` > 0, = 0, < 0), ``note``
        (str: why the comparison was not tested, ``""`` where it was), ``caveat`` (str: for a
        rejected comparison whose test points against the mean difference, the words of
        :func:`disagreement`; ``""`` otherwise). ``statistic`` is scipy's (wilcoxon, ttest),
        the number of wins (sign), statsmodels' (mcnemar) or the mean difference
        (randomization). attrs: ``metric``, ``pair_by``, ``test`` (the test run: ``auto``
        resolved), ``correction``, ``alpha``,
        ``split`` (``""`` for all), ``seed``, ``n_resamples``, ``confidence_level``,
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
    >>> coords = {"scene": ["v_a"] * n, "pair": ["1-2"] * n, "keypoint_set": ["sift"] * n,
    ...           "query_keypoint": np.arange(n)}
    >>> sift = rng.uniform(0.4, 1.0, n)
    >>> c = qc.new_cube(["sift", "orb", "copy"], coords,
    ...                 {"ap": [sift, sift - rng.uniform(0, 0.3, n), sift]},
    ...                 attrs=qc.DEFAULT_ATTRS)
    >>> ds = stats.compare(c, baseline="sift")
    >>> one = ds.sel(descriptor="orb", baseline="sift")
    >>> int(one.n), int(one.losses), bool(one.reject), int(one.favours), bool(one.ci_high < 0)
    (40, 40, True, -1, True)
    >>> ds.attrs["test"]
    'randomization'
    >>> print(ds.sel(descriptor="copy", baseline="sift").note.item())
    <BLANKLINE>
    >>> float(ds.sel(descriptor="copy", baseline="sift").pvalue)
    1.0
    >>> print(stats.compare(c, baseline="sift", test="wilcoxon").sel(descriptor="copy").note.item())
    all 40 paired differences are zero (the systems give identical values on every unit): the wilcoxon test needs a non-zero difference
    >>> ds.to_dataframe().index.names
    FrozenList(['descriptor', 'baseline'])
    >>> stats.compare(c, pairs=[("orb", "sift")]).sizes["comparison"]
    1
    """  # noqa: E501
    check_choice("test", test, TESTS)
    check_choice("correction", correction, CORRECTIONS)
    alpha = check_fraction("alpha", alpha)
    confidence_level = check_fraction("confidence_level", confidence_level)
    seed = check_integer("seed", seed, minimum=0)
    n_resamples = check_integer("n_resamples", n_resamples, minimum=1)
    if test == "mcnemar" and pair_by != "query":
        raise InvalidInputError(
            f"the mcnemar test pairs binary outcomes of single queries: use pair_by='query' "
            f"(got pair_by={pair_by!r}), or another test for unit means"
        )
    units = unit_values(cube, metric=metric, pair_by=pair_by, split=split)
    names = [str(n) for n in units["descriptor"].values.tolist()]
    excluded = list(units.attrs["excluded_descriptors"])
    pairs_ = _system_pairs(names, baseline, pairs, excluded)
    values = units.values
    present = np.isfinite(values)
    if test == "auto":
        used = sorted({i for pair in pairs_ for i in pair})
        test = default_test(metric, pair_by, values[used])
    if test == "mcnemar":
        used = sorted({i for pair in pairs_ for i in pair})
        _check_binary(values[used], metric, units.attrs.get("tie_policy"))
    rows: dict[str, list[Any]] = {name: [] for name in _ORDER}
    masks, differences = [], np.zeros((len(pairs_), values.shape[1]))
    for k, (i, j) in enumerate(pairs_):
        both = present[i] & present[j]
        n, dropped = int(both.sum()), int((present[i] ^ present[j]).sum())
        x, y = values[i, both], values[j, both]
        d = x - y
        note = _too_few(units, n, dropped) if n < MIN_UNITS else untestable(d, test=test)
        if note:
            statistic, pvalue = math.nan, math.nan
        elif test == "randomization":
            statistic, pvalue = float(d.mean()), math.nan  # p from the sign flips below
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
            ("note", note),
        ):
            rows[name].append(value)
    tested = [k for k, note in enumerate(rows["note"]) if not note]
    if not tested:
        by_reason: dict[str, list[str]] = {}  # comparisons with the same reason named together
        for (i, j), note in zip(pairs_, rows["note"], strict=True):
            by_reason.setdefault(note, []).append(f"{names[i]!r} vs {names[j]!r}")
        reasons = [f"{', '.join(which)}: {note}" for note, which in by_reason.items()]
        if len(pairs_) == 1:
            raise InvalidInputError(reasons[0])
        raise InvalidInputError("no comparison of the call can be tested: " + "; ".join(reasons))
    flips, resamples = generators(seed)
    if test == "randomization":
        p = np.atleast_1d(
            sign_flip_pvalues(differences[tested], n_resamples=n_resamples, rng=flips)
        )
        for k, value in zip(tested, p, strict=True):
            rows["pvalue"][k] = float(value)
    rows["ci_low"], rows["ci_high"] = [math.nan] * len(pairs_), [math.nan] * len(pairs_)
    groups: dict[bytes, list[int]] = {}
    for k, mask in enumerate(masks):  # comparisons on the same units share their resamples
        if rows["n"][k] >= MIN_UNITS:  # untested for identical systems: the CI is [0, 0]
            groups.setdefault(np.packbits(mask).tobytes(), []).append(k)
    for members in groups.values():
        interval = bca_interval(
            differences[np.ix_(members, masks[members[0]])],
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            rng=resamples,
        )  # 2-D differences: arrays
        low, high = np.atleast_1d(interval[0]), np.atleast_1d(interval[1])
        for k, lo, hi in zip(members, low, high, strict=True):
            rows["ci_low"][k], rows["ci_high"][k] = float(lo), float(hi)
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
        for k in range(len(pairs_))
    ]
    rows["favours"] = [verdict(side, rows["mean_diff"][k]) for k, side in enumerate(sides)]
    rows["caveat"] = [
        disagreement(test, side, rows["mean_diff"][k], names[i], names[j])
        for k, (side, (i, j)) in enumerate(zip(sides, pairs_, strict=True))
    ]
    attrs = {
        "metric": metric,
        "pair_by": pair_by,
        "test": test,
        "correction": correction,
        "alpha": alpha,
        "split": units.attrs["split"],
        "seed": seed,
        "n_resamples": n_resamples,
        "confidence_level": confidence_level,
        "excluded_descriptors": excluded,
    }
    for name, value in units.attrs.items():
        if name not in ("metric", "pair_by", "split", "excluded_descriptors"):
            attrs["protocol_seed" if name == "seed" else str(name)] = value
    return _dataset(rows, [names[i] for i, _ in pairs_], [names[j] for _, j in pairs_], attrs)
