"""The significance tests of a study: one :func:`metricalc.stats.compare` (and optionally one
:func:`metricalc.stats.rank_systems`) per table column that can be tested on per-query values.

A column's test comes from :data:`metricalc.report.labels.METRICS` (``test``: the cube metric,
the split, and the coarsest pairing unit the column needs: scene-averaged mAP pairs by scene).
The study's ``pair_by`` is used unless the column needs a coarser unit.

Baselines (:func:`family`): ``None`` compares all pairs of systems; a system name compares every
other system against it; with several labelled cubes, a *label* (``baseline: native``) compares
each descriptor under every other label against the same descriptor under that label
(``sift (locked)`` vs ``sift (native)``). A family is tested by one
:func:`~metricalc.stats.compare` call where possible; label baselines, and families in which the
test refuses a pair (two systems identical on every unit), are tested pair by pair without
correction and then corrected together (:func:`correct_family`), so the family is always the
column's tested comparisons.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from metricalc.core.ranking import hit_rate_at_k
from metricalc.errors import InvalidInputError
from metricalc.report.data import system_name
from metricalc.report.labels import PAIR_BY_ORDER, metric_info
from metricalc.report.study import TestSpec
from metricalc.report.tables import comparison_from_frame

__all__ = [
    "ColumnTests",
    "correct_family",
    "family",
    "run_tests",
    "systems_of",
    "with_test_metric",
]


@dataclass
class ColumnTests:
    """The test results of one table column (None where not run, with the reason in ``notes``)."""

    column: str
    comparison: xr.Dataset | None = None
    ranking: xr.Dataset | None = None
    notes: list[str] = field(default_factory=list)


def systems_of(cubes: Mapping[str, xr.Dataset]) -> list[str]:
    """System names of labelled cubes, in label then descriptor order, failed ones included."""
    return [
        system_name(str(d), label)
        for label, cube in cubes.items()
        for d in cube["descriptor"].values.tolist()
    ]


def _source(cubes: Mapping[str, xr.Dataset]) -> Any:
    """What compare / rank_systems take: the cube itself, or the mapping of labelled cubes."""
    return cubes[""] if list(cubes) == [""] else dict(cubes)


def _pair_by(study_pair_by: str, needed: str | None) -> str:
    if needed is None:
        return study_pair_by
    return PAIR_BY_ORDER[max(PAIR_BY_ORDER.index(study_pair_by), PAIR_BY_ORDER.index(needed))]


_PRECISION_AT = re.compile(r"precision_at_([1-9][0-9]*)")


def _has_metric(cube: xr.Dataset, metric: str) -> bool:
    if metric.startswith("hit@") or _PRECISION_AT.fullmatch(metric):
        return "better" in cube.data_vars and "ties" in cube.data_vars
    return metric in cube.data_vars


def with_test_metric(cube: xr.Dataset, metric: str) -> xr.Dataset:
    r"""The cube with the per-query values of ``metric`` added when they are derived.

    ``precision_at_K`` (the metric set's hit rate at K) becomes, per query with a relevant item
    (R = 1 and rank statistics), its hit probability under the cube's tie policy:
    :func:`metricalc.hit_rate_at_k` of that query alone, so the mean over queries is the table's
    value (under ``expected`` a query tied across rank K counts
    :math:`\mathrm{clip}(K - b, 0, t + 1) / (t + 1)`); NaN for the other queries. Any other
    metric leaves the cube as it is.

    Examples
    --------
    >>> from metricalc.metrics import _example_cube
    >>> with_test_metric(_example_cube(), "precision_at_1")["precision_at_1"].values.tolist()
    [[1.0, 0.0, nan]]
    """
    match = _PRECISION_AT.fullmatch(metric)
    if match is None or metric in cube.data_vars:
        return cube
    better = np.asarray(cube["better"].values)
    ties = np.asarray(cube["ties"].values)
    ranked = (np.asarray(cube["n_relevant"].values) == 1) & (better >= 0)
    values = hit_rate_at_k(
        np.where(ranked, better, -1)[..., None],
        np.where(ranked, ties, -1)[..., None],
        int(match.group(1)),
        policy=str(cube.attrs.get("tie_policy", "expected")),
    )
    return cube.assign({metric: (("descriptor", "query"), np.asarray(values, np.float64))})


def correct_family(comparison: xr.Dataset, *, correction: str, alpha: float) -> xr.Dataset:
    """Recompute ``pvalue_corrected`` and ``reject`` of a Dataset of comparisons as one family
    (:func:`metricalc.stats.correct`: ``multipletests`` with the method passed explicitly;
    ``"none"``: corrected = raw). NaN p-values stay NaN, are left out of the family and never
    reject."""
    from metricalc.stats import correct

    p = np.asarray(comparison["pvalue"].values, dtype=np.float64)
    corrected = np.full_like(p, np.nan)
    finite = np.isfinite(p)
    corrected[finite] = correct(p[finite], method=correction)
    reject = np.where(np.isfinite(corrected), corrected < alpha, False)
    out = comparison.assign(
        pvalue_corrected=("comparison", corrected), reject=("comparison", reject)
    )
    out.attrs = {**comparison.attrs, "correction": correction, "alpha": alpha}
    return out


def _concat_comparisons(parts: list[xr.Dataset]) -> xr.Dataset:
    frame = pd.concat([part.to_dataframe() for part in parts])
    return comparison_from_frame(frame, parts[0].attrs)


def _ok_systems(cubes: Mapping[str, xr.Dataset]) -> dict[str, tuple[str, str]]:
    """System name -> (label, descriptor) of the systems whose evaluation did not fail."""
    out = {}
    for label, cube in cubes.items():
        status = cube["status"].values.tolist() if "status" in cube else None
        for i, d in enumerate(cube["descriptor"].values.tolist()):
            if status is None or status[i] != "error":
                out[system_name(str(d), label)] = (label, str(d))
    return out


def family(cubes: Mapping[str, xr.Dataset], baseline: str | None) -> list[tuple[str, str]]:
    """``(descriptor, baseline)`` of every comparison of a column's family, over the systems
    that did not fail: all pairs i < j in system order (no baseline), every system against the
    baseline system, or each descriptor under every other label against itself under the
    baseline label."""
    systems = _ok_systems(cubes)
    names = list(systems)
    if baseline is None:
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    if baseline in systems:
        return [(s, baseline) for s in names if s != baseline]
    return [
        (s, system_name(d, baseline))
        for s, (label, d) in systems.items()
        if label != baseline and system_name(d, baseline) in systems
    ]


def _pair_source(cubes: Mapping[str, xr.Dataset], a: str, b: str) -> Any:
    """The cube (or mapping of cubes) holding just systems ``a`` and ``b``, named as in
    ``cubes``."""
    systems = _ok_systems(cubes)
    parts: dict[str, list[str]] = {}
    for system in (a, b):
        label, descriptor = systems[system]
        parts.setdefault(label, []).append(descriptor)
    if list(cubes) == [""]:
        return cubes[""].sel(descriptor=parts[""])
    return {label: cubes[label].sel(descriptor=ds) for label, ds in parts.items()}


def _pairwise(
    cubes: Mapping[str, xr.Dataset],
    pairs: list[tuple[str, str]],
    options: dict[str, Any],
    label: str,
    notes: list[str],
) -> xr.Dataset | None:
    """One uncorrected ``compare`` per pair, then one correction over the pairs tested; pairs
    the test refuses get a note (one note if it refuses them all)."""
    from metricalc.stats import compare

    parts, refused = [], []
    for a, b in pairs:
        try:
            parts.append(
                compare(_pair_source(cubes, a, b), baseline=b, **{**options, "correction": "none"})
            )
        except InvalidInputError as error:
            refused.append((a, b, str(error)))
    if not parts:
        reason = refused[0][2] if refused else "no pair of systems to compare"
        notes.append(f"{label}: not tested ({reason})")
        return None
    notes += [
        f"{label}: not tested ({reason})" if a in reason and b in reason
        else f"{label}: {a} vs {b} not tested ({reason})"
        for a, b, reason in refused
    ]  # fmt: skip
    return correct_family(
        _concat_comparisons(parts), correction=options["correction"], alpha=options["alpha"]
    )


def run_tests(
    cubes: Mapping[str, xr.Dataset],
    columns: list[str],
    *,
    tests: TestSpec,
    baseline: str | None,
    advance: Callable[[], None] = lambda: None,
) -> dict[str, ColumnTests]:
    """Compare (and rank) the systems of ``cubes`` on every testable column.

    Parameters
    ----------
    cubes : mapping of str to QueryCube
        By label (``{"": cube}`` for one cube).
    columns : list of str
        Table columns; those without a per-query test get a note.
    tests : TestSpec
        Test, correction, alpha, pairing unit, CI level, resamples, seed, and whether to rank.
    baseline : str or None
        A system name, a label (several cubes), or None (all pairs).
    advance : callable
        Called once per column (progress bar).

    Returns
    -------
    dict of str to ColumnTests
        One entry per column. A column's family (:func:`family`) is tested by one ``compare``
        call when it can be; when the test refuses some pair (e.g. two systems identical on
        every unit: a detector's own keypoints locked and native), each pair is tested alone
        and the pairs tested are corrected together, the refused ones noted. Label baselines
        are always tested pair by pair. Refusals of the whole column (fewer than 5 paired
        units, ...) become notes; a baseline that names no system is an error.
    """
    from metricalc.stats import compare, rank_systems

    systems = systems_of(cubes)
    labels = [label for label in cubes if label]
    by_label = baseline is not None and len(cubes) > 1 and baseline in labels
    if baseline is not None and not by_label and baseline not in systems:
        extra = f" or a label ({', '.join(labels)})" if labels else ""
        raise InvalidInputError(
            f"baseline: {baseline!r} is not a system of the data; expected one of {systems}{extra}"
        )
    pairs = family(cubes, baseline)
    results = {}
    for column in columns:
        result = ColumnTests(column)
        results[column] = result
        info = metric_info(column)
        if info.test is None:
            result.notes.append(f"{info.label}: not tested (no per-query values in the cube)")
            advance()
            continue
        metric, split, needed = info.test
        if not all(_has_metric(cube, metric) for cube in cubes.values()):
            result.notes.append(f"{info.label}: not tested (the cube has no {metric!r})")
            advance()
            continue
        ready = {label: with_test_metric(cube, metric) for label, cube in cubes.items()}
        options = {
            "metric": metric,
            "pair_by": _pair_by(tests.pair_by, needed),
            "split": split,
            "alpha": tests.alpha,
            "correction": tests.correction,
        }
        comparing = {
            **options,
            "test": tests.test,
            "seed": tests.seed,
            "n_resamples": tests.n_resamples,
            "confidence_level": tests.confidence_level,
        }
        if not by_label:  # a refusal: tested pair by pair below, keeping the accepted pairs
            with contextlib.suppress(InvalidInputError):
                result.comparison = compare(_source(ready), baseline=baseline, **comparing)
        if result.comparison is None:
            result.comparison = _pairwise(ready, pairs, comparing, info.label, result.notes)
        if tests.rank and len(systems) >= 3:
            try:
                result.ranking = rank_systems(_source(ready), **options)
            except InvalidInputError as error:
                result.notes.append(f"{info.label}: not ranked ({error})")
        advance()
    return results
