"""The significance tests of a study: one :func:`metricalc.stats.compare` (and optionally one
:func:`metricalc.stats.rank_systems`) per table column that can be tested on per-query values.

A column's test comes from :data:`metricalc.plotting.labels.METRICS` (``test``: the cube metric,
the split, and the level of the column's mean: a mean over scenes of scene means is tested on
it, a mean pooled over queries on that pooled mean; ``hit_rate_at_K`` is tested on ``hit@K``
and ``precision_at_K`` on ``precision@K``, whose means are the columns' values;
``hpatches17_matching_map``, hpatches-benchmark's matching average, on that average, over
sequences: :mod:`metricalc.stats.cvpr17_matching`). The
independent unit is the study's ``pair_by`` (scenes by default), or the column's level where
that is coarser: the test and interval are always of the statistic the column prints, resampled
at the independent level (docs/stats.md).
The ranking (Friedman, Nemenyi CD)
uses the study's ``rank_by`` blocks, scenes by default (or image pairs), never single queries.
Where the cubes name their paired units otherwise (HPatches CVPR'17 task cubes, whose "query"
is an image pair and level: :func:`metricalc.hpatches.cvpr17_unit`), the comparison and ranking
Datasets get the attr ``unit_name`` (:data:`metricalc.report.summary.UNIT_NAME_ATTR`) that their
sentences count.

Baselines: ``None`` compares all pairs of systems; a system name compares every other system
against it; with several labelled cubes, a *label* (``baseline: native``) compares each
descriptor under every other label against the same descriptor under that label
(``sift (locked)`` vs ``sift (native)``: :func:`label_pairs`, given to ``compare`` as
``pairs=``). Each column's family is one ``compare`` call, so one correction family. A
comparison ``compare`` cannot test (e.g. two systems identical on every unit: a detector's own
keypoints locked and native) stays in the Dataset with its ``note`` and outside the family; the
report lists it in its notes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.hpatches import common_cvpr17_unit
from metricalc.plotting.labels import PAIR_BY_ORDER, metric_info
from metricalc.report.data import system_name
from metricalc.report.study import TestSpec
from metricalc.report.summary import UNIT_NAME_ATTR

__all__ = ["ColumnTests", "label_pairs", "run_tests", "state_once", "systems_of"]

MATCHING_AVERAGE = "hpatches17_matching_map"
"""The column tested as hpatches-benchmark's matching average itself, over sequences
(:func:`metricalc.stats.cvpr17_matching.compare_matching`)."""


@dataclass
class ColumnTests:
    """The test results of one table column (None where not run, with the reason in ``notes``).
    ``repeats`` names an earlier column whose comparison is this one's (the same ``compare``
    call: :func:`state_once`), whose sentences and forest plot stand for both."""

    column: str
    comparison: xr.Dataset | None = None
    ranking: xr.Dataset | None = None
    notes: list[str] = field(default_factory=list)
    repeats: str | None = None


def state_once(results: Mapping[str, ColumnTests]) -> None:
    """Mark what repeats an earlier column's result, so that a report states it once: a
    comparison equal to an earlier column's (the same metric, split and pairing, e.g. the
    query-weighted and the scene-averaged viewpoint mAP at the study's pairing) gets
    ``repeats``; a ranking equal to an earlier one (both columns ranked on the same scene means,
    e.g. ``true_map_micro`` and ``true_map_macro_by_scene`` ranked by scene) is dropped. Each
    gets a note naming the column it repeats."""
    comparisons: list[tuple[str, xr.Dataset]] = []
    rankings: list[tuple[str, xr.Dataset]] = []
    for column, result in results.items():
        label = metric_info(column).label
        same = _earlier_equal(comparisons, column, result.comparison)
        if same is not None:
            result.repeats = same
            result.notes.append(
                f"{label}: the same test as {metric_info(same).label} (the same values "
                f"paired the same way); its sentences are those of {metric_info(same).label}"
            )
        same = _earlier_equal(rankings, column, result.ranking)
        if same is not None:
            result.ranking = None
            result.notes.append(
                f"{label}: ranked as {metric_info(same).label} (the same units and values), "
                "stated once"
            )


def _earlier_equal(
    seen: list[tuple[str, xr.Dataset]], column: str, result: xr.Dataset | None
) -> str | None:
    """The earlier column whose result equals ``result``; a new result is added to ``seen``."""
    if result is None:
        return None
    same = next((c for c, d in seen if d.equals(result)), None)
    if same is None:
        seen.append((column, result))
    return same


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


def _independent_unit(cubes: Mapping[str, xr.Dataset], pair_by: str) -> str:
    """The study's independent unit for these cubes: TREC topics are independent samples and
    each is its own "scene" in a retrieval cube, so retrieval cubes are tested per query
    (topic); keypoint and patch cubes by the study's ``pair_by``."""
    from metricalc.retrieval.querycube import BENCHMARK

    if all(str(cube.attrs.get("benchmark", "")) == BENCHMARK for cube in cubes.values()):
        return "query"
    return pair_by


def _name_units(result: xr.Dataset, cubes: Mapping[str, xr.Dataset]) -> xr.Dataset:
    """``result`` (a comparison or ranking) with the attr ``unit_name`` where every cube names
    its ``pair_by`` unit the same way (:func:`metricalc.hpatches.common_cvpr17_unit`)."""
    pair_by = str(result.attrs.get("pair_by", "query"))
    name = common_cvpr17_unit((cube.attrs for cube in cubes.values()), pair_by)
    if name is not None:
        result.attrs[UNIT_NAME_ATTR] = name
    return result


def _compare_column(
    result: ColumnTests,
    column: str,
    label: str,
    cubes: Mapping[str, xr.Dataset],
    family: dict[str, Any],
    options: dict[str, Any],
    tests: TestSpec,
) -> None:
    """One ``compare`` call for a column: its Dataset into ``result``, its refusals as notes."""
    from metricalc.stats import compare
    from metricalc.stats.cvpr17_matching import compare_matching

    resampling: dict[str, Any] = {
        "seed": tests.seed,
        "n_resamples": tests.n_resamples,
        "confidence_level": tests.confidence_level,
    }
    try:
        if column == MATCHING_AVERAGE:  # the composite itself, over sequences
            chosen = {k: options[k] for k in ("alpha", "correction")}
            comparison = compare_matching(_source(cubes), **family, **chosen, **resampling)
        else:
            comparison = compare(
                _source(cubes), **family, **options, test=tests.test, interval=tests.interval,
                **resampling,
            )  # fmt: skip
    except InvalidInputError as error:
        result.notes.append(f"{label}: not tested ({error})")
        return
    result.comparison = _name_units(comparison, cubes)
    index = comparison.get_index("comparison")
    result.notes += [
        f"{label}: {d} vs {b} not tested ({note})"
        for (d, b), note in zip(index, comparison["note"].values, strict=True)
        if note
    ]


def _has_metric(cube: xr.Dataset, metric: str) -> bool:
    if metric.startswith(("hit@", "precision@")):
        return "better" in cube.data_vars and "ties" in cube.data_vars
    return metric in cube.data_vars


def _ok_systems(cubes: Mapping[str, xr.Dataset]) -> dict[str, tuple[str, str]]:
    """System name -> (label, descriptor) of the systems whose evaluation did not fail."""
    out = {}
    for label, cube in cubes.items():
        status = cube["status"].values.tolist() if "status" in cube else None
        for i, d in enumerate(cube["descriptor"].values.tolist()):
            if status is None or status[i] != "error":
                out[system_name(str(d), label)] = (label, str(d))
    return out


def label_pairs(cubes: Mapping[str, xr.Dataset], label: str) -> list[tuple[str, str]]:
    """``(descriptor, baseline)`` system pairs of a label baseline: each descriptor under every
    other label against the same descriptor under ``label``, over the systems that did not
    fail, in system order.

    Examples
    --------
    >>> from metricalc.datasets import example_cube
    >>> cube = example_cube()
    >>> label_pairs({"locked": cube, "native": cube}, "native")
    [('sift (locked)', 'sift (native)')]
    """
    systems = _ok_systems(cubes)
    return [
        (s, system_name(d, label))
        for s, (own, d) in systems.items()
        if own != label and system_name(d, label) in systems
    ]


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
        One entry per column: the column's family tested by one ``compare`` call (label
        baselines through ``pairs=``). Comparisons ``compare`` could not test keep their
        ``note``, and a note of the column names each; a column ``compare`` refuses as a whole
        (e.g. fewer than 5 paired units in every comparison) gets a note instead of a
        comparison. A baseline that names no system is an error.
    """
    from metricalc.stats import rank_systems

    systems = systems_of(cubes)
    labels = [label for label in cubes if label]
    by_label = baseline is not None and len(cubes) > 1 and baseline in labels
    if baseline is not None and not by_label and baseline not in systems:
        extra = f" or a label ({', '.join(labels)})" if labels else ""
        raise InvalidInputError(
            f"baseline: {baseline!r} is not a system of the data; expected one of {systems}{extra}"
        )
    family: dict[str, Any] = {"baseline": baseline}
    if by_label:
        family = {"pairs": label_pairs(cubes, str(baseline))}
    results = {}
    study_unit = _independent_unit(cubes, tests.pair_by)
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
        options: dict[str, Any] = {
            "metric": metric,
            "pair_by": _pair_by(study_unit, needed),
            "mean_over": needed,
            "split": split,
            "alpha": tests.alpha,
            "correction": tests.correction,
        }
        if family.get("pairs") == []:
            why = f"no descriptor is under both {baseline!r} and another label"
            result.notes.append(f"{info.label}: not tested ({why})")
        else:
            _compare_column(result, column, info.label, cubes, family, options, tests)
        if tests.rank and len(systems) >= 3:
            try:
                blocks = {k: v for k, v in options.items() if k != "mean_over"}
                blocks["pair_by"] = _pair_by(tests.rank_by, needed)
                result.ranking = _name_units(rank_systems(_source(cubes), **blocks), cubes)
            except InvalidInputError as error:
                result.notes.append(f"{info.label}: not ranked ({error})")
        advance()
    return results
