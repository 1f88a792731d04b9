"""Paired comparisons of systems on one metric: tests, effect sizes, CIs, one correction family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core._validate import check_choice
from metricalc.errors import InvalidInputError
from metricalc.stats._checks import check_fraction, check_int
from metricalc.stats.bootstrap import bca_interval
from metricalc.stats.correction import CORRECTIONS, correct
from metricalc.stats.effect import cohens_dz, rank_biserial
from metricalc.stats.paired import NEEDS_NONZERO, TESTS, is_binary, paired_test
from metricalc.stats.randomization import sign_flip_pvalues
from metricalc.stats.units import unit_values

__all__ = ["MIN_UNITS", "compare"]

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


def generators(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The random generators of a call with ``seed``: (sign flips, bootstrap resamples).

    Two independent streams spawned from ``numpy.random.SeedSequence(seed)``, so the
    randomization test and the bootstrap do not depend on each other's draws."""
    flips, resamples = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(flips), np.random.default_rng(resamples)


def _pairs(names: list[str], baseline: str | None) -> list[tuple[int, int]]:
    """(descriptor, baseline) system indices of the comparisons of one call."""
    if baseline is None:
        if len(names) < 2:
            raise InvalidInputError(
                f"a comparison needs at least two systems; the cube has {names}"
            )
        return [(i, j) for i in range(len(names)) for j in range(i + 1, len(names))]
    if not isinstance(baseline, str) or baseline not in names:
        raise InvalidInputError(
            f"baseline {baseline!r} is not a system of the cube; systems: {', '.join(names)}"
        )
    b = names.index(baseline)
    if len(names) < 2:
        raise InvalidInputError(f"baseline {baseline!r} is the only system; nothing to compare")
    return [(i, b) for i in range(len(names)) if i != b]


def _too_few(units: xr.DataArray, a: str, b: str, n: int, dropped: int) -> InvalidInputError:
    pair_by = units.attrs["pair_by"]
    if n == 0 and dropped and pair_by == "query":
        return InvalidInputError(
            f"{a!r} and {b!r} share no query ({dropped} queries are in only one of them): their "
            f"keypoints differ (keypoints={units.attrs['keypoints']!r}); pair by image pair or "
            "scene instead: pair_by='pair'"
        )
    return InvalidInputError(
        f"{a!r} vs {b!r}: {n} paired units (pair_by={pair_by!r}, {dropped} dropped because "
        f"missing in one system); a paired test needs at least {MIN_UNITS}"
    )


def _dataset(
    rows: dict[str, list[Any]], descriptors: list[str], baselines: list[str], attrs: dict
) -> xr.Dataset:
    index = pd.MultiIndex.from_arrays([descriptors, baselines], names=["descriptor", "baseline"])
    coords = xr.Coordinates.from_pandas_multiindex(index, "comparison")
    variables: dict[str, Any] = {}
    for name in _INT_VARIABLES:
        variables[name] = ("comparison", np.asarray(rows[name], dtype=np.int64))
    for name in _FLOAT_VARIABLES:
        variables[name] = ("comparison", np.asarray(rows[name], dtype=np.float64))
    variables["reject"] = ("comparison", variables["pvalue_corrected"][1] < attrs["alpha"])
    order = [*_INT_VARIABLES[:2], *_FLOAT_VARIABLES[:9], "reject", *_FLOAT_VARIABLES[9:]]
    order += list(_INT_VARIABLES[2:])
    return xr.Dataset({name: variables[name] for name in order}, coords=coords, attrs=attrs)


def compare(
    cube: xr.Dataset | Mapping[str, xr.Dataset],
    *,
    metric: str = "ap",
    pair_by: str = "query",
    test: str = "wilcoxon",
    correction: str = "holm",
    alpha: float = 0.05,
    baseline: str | None = None,
    split: str | None = None,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
) -> xr.Dataset:
    """Paired significance tests of systems on one metric, with effect sizes and bootstrap CIs.

    The metric is taken per unit (:func:`~metricalc.stats.unit_values`: queries, image pairs or
    scenes); each comparison pairs the units both systems have (the others are dropped and
    counted) and works on the differences :math:`d_i = x_i - y_i` (descriptor minus baseline).
    All comparisons of the call are one family for the multiple-comparison correction.

    Parameters
    ----------
    cube : QueryCube or mapping of label -> QueryCube
        One cube (systems = its descriptors) or several, e.g. ``{"locked": c1, "native": c2}``
        (systems ``"sift (locked)"``, ...; protocols equal except ``keypoints``/``distance``).
        Descriptors with status ``"error"`` are left out (attr ``excluded_descriptors``).
    metric : str
        A numeric (descriptor, query) variable (``ap``, ``nn_correct``, ``image_ap``, ...) or
        ``"hit@K"``.
    pair_by : {"query", "pair", "scene"}
        The unit. Queries need the same queries in both systems (locked keypoints); with native
        keypoints pair by image pair or scene (the metric is averaged per unit first).
    test : {"wilcoxon", "ttest", "randomization", "sign", "mcnemar"}
        See :mod:`metricalc.stats.paired`; ``randomization`` is the paired sign-flip test with
        ``n_resamples`` flips, :math:`p = (b + 1)/(m + 1)` (:mod:`metricalc.stats.randomization`);
        ``mcnemar`` needs a binary metric and ``pair_by="query"``.
    correction : {"holm", "bonferroni", "fdr_bh", "none"}
        Passed explicitly to :func:`statsmodels.stats.multitest.multipletests`.
    alpha : float
        ``reject`` is ``pvalue_corrected < alpha``.
    baseline : str, optional
        A system name: every other system against it. None: all unordered pairs (i < j in
        system order: descriptor = system i, baseline = system j).
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
        (bool), ``rank_biserial``, ``cohens_dz`` (float64), ``wins``, ``ties``, ``losses``
        (int64: units with :math:`d_i` > 0, = 0, < 0). ``statistic`` is scipy's (wilcoxon,
        ttest), the number of wins (sign), statsmodels' (mcnemar) or the mean difference
        (randomization). attrs: ``metric``, ``pair_by``, ``test``, ``correction``, ``alpha``,
        ``split`` (``""`` for all), ``seed``, ``n_resamples``, ``confidence_level``,
        ``excluded_descriptors``, and the protocol attrs of the cube(s)
        (``keypoints``/``distance`` may be ``"mixed"``; the cube's own ``seed`` attr is
        ``protocol_seed``).

    Raises
    ------
    InvalidInputError
        Unknown metric (the message lists the available ones), test, correction, baseline or
        split; fewer than 5 paired units; all differences zero (tests other than
        randomization); cubes of different protocols; mcnemar on a non-binary metric.

    Examples
    --------
    >>> import numpy as np
    >>> from metricalc import cube as qc, stats
    >>> rng = np.random.default_rng(0)
    >>> n = 40
    >>> coords = {"scene": ["v_a"] * n, "pair": ["1-2"] * n, "keypoint_set": ["sift"] * n,
    ...           "query_keypoint": np.arange(n)}
    >>> sift = rng.uniform(0.4, 1.0, n)
    >>> c = qc.new_cube(["sift", "orb"], coords, {"ap": [sift, sift - rng.uniform(0, 0.3, n)]},
    ...                 attrs=qc.DEFAULT_ATTRS)
    >>> ds = stats.compare(c, baseline="sift")
    >>> one = ds.sel(descriptor="orb", baseline="sift")
    >>> int(one.n), int(one.losses), bool(one.reject), bool(one.ci_high < 0)
    (40, 40, True, True)
    >>> ds.to_dataframe().index.names
    FrozenList(['descriptor', 'baseline'])
    """
    check_choice("test", test, TESTS)
    check_choice("correction", correction, CORRECTIONS)
    alpha = check_fraction("alpha", alpha)
    confidence_level = check_fraction("confidence_level", confidence_level)
    seed = check_int("seed", seed, minimum=0)
    n_resamples = check_int("n_resamples", n_resamples, minimum=1)
    if test == "mcnemar" and pair_by != "query":
        raise InvalidInputError(
            f"the mcnemar test pairs binary outcomes of single queries: use pair_by='query' "
            f"(got pair_by={pair_by!r}), or another test for unit means"
        )
    units = unit_values(cube, metric=metric, pair_by=pair_by, split=split)
    names = [str(n) for n in units["descriptor"].values.tolist()]
    pairs = _pairs(names, baseline)
    values = units.values
    present = np.isfinite(values)
    if test == "mcnemar" and not is_binary(values[present]):
        raise InvalidInputError(
            f"the mcnemar test needs a binary metric (0 or 1 per query); {metric!r} has other "
            "values (use e.g. metric='hit@1' or 'nn_correct')"
        )
    rows: dict[str, list[Any]] = {name: [] for name in (*_INT_VARIABLES, *_FLOAT_VARIABLES)}
    masks, differences = [], np.zeros((len(pairs), values.shape[1]))
    for k, (i, j) in enumerate(pairs):
        both = present[i] & present[j]
        n, dropped = int(both.sum()), int((present[i] ^ present[j]).sum())
        if n < MIN_UNITS:
            raise _too_few(units, names[i], names[j], n, dropped)
        x, y = values[i, both], values[j, both]
        d = x - y
        if test in NEEDS_NONZERO:
            try:
                statistic, pvalue = paired_test(x, y, test=test)
            except InvalidInputError as error:
                raise InvalidInputError(f"{names[i]!r} vs {names[j]!r}: {error}") from None
        else:
            statistic, pvalue = float(d.mean()), np.nan  # p from the sign flips below
        masks.append(both)
        differences[k, both] = d
        for name, value in (
            ("n", n),
            ("n_dropped", dropped),
            ("wins", int((d > 0).sum())),
            ("ties", int((d == 0).sum())),
            ("losses", int((d < 0).sum())),
            ("mean_descriptor", x.mean()),
            ("mean_baseline", y.mean()),
            ("mean_diff", d.mean()),
            ("median_diff", np.median(d)),
            ("statistic", statistic),
            ("pvalue", pvalue),
            ("rank_biserial", rank_biserial(d)),
            ("cohens_dz", cohens_dz(d)),
        ):
            rows[name].append(value)
    flips, resamples = generators(seed)
    if test == "randomization":
        rows["pvalue"] = list(sign_flip_pvalues(differences, n_resamples=n_resamples, rng=flips))
    rows["ci_low"], rows["ci_high"] = [np.nan] * len(pairs), [np.nan] * len(pairs)
    groups: dict[bytes, list[int]] = {}
    for k, mask in enumerate(masks):  # comparisons on the same units share their resamples
        groups.setdefault(np.packbits(mask).tobytes(), []).append(k)
    for members in groups.values():
        low, high = bca_interval(
            differences[np.ix_(members, masks[members[0]])],
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            rng=resamples,
        )
        for k, lo, hi in zip(members, low, high, strict=True):
            rows["ci_low"][k], rows["ci_high"][k] = float(lo), float(hi)
    rows["pvalue_corrected"] = list(correct(np.asarray(rows["pvalue"]), method=correction))
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
        "excluded_descriptors": list(units.attrs["excluded_descriptors"]),
    }
    for name, value in units.attrs.items():
        if name not in ("metric", "pair_by", "split", "excluded_descriptors"):
            attrs["protocol_seed" if name == "seed" else str(name)] = value
    return _dataset(rows, [names[i] for i, _ in pairs], [names[j] for _, j in pairs], attrs)
