"""Plain-language sentences for comparisons and rankings.

One sentence per comparison of a :func:`metricalc.stats.compare` Dataset, e.g.

    SIFT > ORB on viewpoint mAP: +12.3 points, 95% CI [9.8, 14.9], Wilcoxon p < 0.001 after Holm,
    large effect (rank-biserial r = 0.62; 1,234 paired queries).

and one paragraph per :func:`metricalc.stats.rank_systems` Dataset. The wording rules (effect
size thresholds, p-value digits, "no significant difference") are the module constants below and
are listed in docs/report.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from metricalc.errors import InvalidInputError
from metricalc.plotting.comparisons import (
    READ_VARIABLES,
    TEST_NAMES,
    comparison_pairs,
    comparison_row,
)
from metricalc.plotting.labels import (
    compared_metric_phrase,
    display_name,
    format_p,
    is_fraction_metric,
)
from metricalc.validation import Integer, validate_params

__all__ = [
    "EFFECT_THRESHOLDS",
    "EFFECT_WORDS",
    "called_better",
    "cd_groups",
    "describe_comparison",
    "describe_ranking",
    "effect_size",
    "summarize",
    "unit_words",
]

EFFECT_WORDS = ("negligible", "small", "medium", "large")
"""Words for an effect below the first threshold, between thresholds, and above the last."""

EFFECT_THRESHOLDS = {
    "rank_biserial": (0.1, 0.3, 0.5),
    "cohens_dz": (0.2, 0.5, 0.8),
}
"""Lower bounds of "small", "medium" and "large" for |effect|: Cohen's conventions for a
correlation (the matched-pairs rank-biserial r, used with the rank and count tests) and for a
standardized mean difference (Cohen's d_z, used with the tests of the mean difference)."""

TEST_WORDS = {
    "wilcoxon": "Wilcoxon",
    "ttest": "paired t-test",
    "randomization": "randomization test",
    "sign": "sign test",
    "mcnemar": "McNemar",
}
"""How a sentence names the test of the p-value."""

CORRECTION_WORDS = {
    "holm": "after Holm",
    "bonferroni": "after Bonferroni",
    "fdr_bh": "after Benjamini-Hochberg",
    "none": "uncorrected",
}
"""How a sentence names the multiple-comparison correction of the p-value."""

UNIT_WORDS = {"query": "paired queries", "pair": "image pairs", "scene": "scenes"}
"""The paired units counted at the end of a sentence, by ``pair_by``, unless the comparison
names its unit (attr ``unit_name``: :func:`unit_words`)."""

UNIT_NAME_ATTR = "unit_name"
"""The attr of a comparison or ranking Dataset that names its paired unit where ``pair_by``
alone does not (an HPatches CVPR'17 cube's: :func:`metricalc.hpatches.cvpr17_unit`); the report
sets it (:func:`metricalc.report.analysis.run_tests`)."""

EFFECT_NAMES = {"rank_biserial": "rank-biserial r", "cohens_dz": "d_z"}

MEAN_TESTS = ("randomization", "ttest")
"""Tests of the mean difference (``metricalc.stats.paired.MEAN_TESTS``; not imported, so that
the report's text does not load scipy.stats and statsmodels)."""


def effect_size(values: Mapping[str, Any], test: str) -> tuple[str, float, str]:
    """The effect size a sentence reports: (variable, value, word).

    Cohen's d_z (mean difference over the standard deviation of the differences) for the tests
    of the mean difference (randomization, paired t-test), whose sign is the sign of the mean;
    the matched-pairs rank-biserial r for the rank and count tests (Wilcoxon, sign, McNemar).
    The word is :data:`EFFECT_WORDS` at the :data:`EFFECT_THRESHOLDS` of that measure (on its
    absolute value).

    Examples
    --------
    >>> effect_size({"rank_biserial": -0.35, "cohens_dz": 0.9}, "wilcoxon")
    ('rank_biserial', -0.35, 'medium')
    >>> effect_size({"rank_biserial": 0.05, "cohens_dz": 0.9}, "ttest")
    ('cohens_dz', 0.9, 'large')
    >>> effect_size({"rank_biserial": -0.22, "cohens_dz": 0.3}, "randomization")
    ('cohens_dz', 0.3, 'small')
    """
    name = "cohens_dz" if test in MEAN_TESTS else "rank_biserial"
    value = float(values[name])
    if not math.isfinite(value):
        return name, value, "undetermined"
    word = EFFECT_WORDS[int(np.searchsorted(EFFECT_THRESHOLDS[name], abs(value), side="right"))]
    return name, value, word


def unit_words(attrs: Mapping[Any, Any], count: int) -> str:
    """``count`` paired units as a sentence counts them: ``"1,234 paired queries"`` by
    :data:`UNIT_WORDS` of the ``pair_by`` attr, or, where the attr ``unit_name``
    (:data:`UNIT_NAME_ATTR`) names the unit, ``"60 paired units, one per <unit_name>"``.

    Examples
    --------
    >>> unit_words({"pair_by": "query"}, 1234)
    '1,234 paired queries'
    >>> unit_words({"pair_by": "query", "unit_name": "image pair and level"}, 60)
    '60 paired units, one per image pair and level'
    """
    name = str(attrs.get(UNIT_NAME_ATTR, "") or "")
    if name:
        return f"{count:,} paired units, one per {name}"
    return f"{count:,} {UNIT_WORDS.get(str(attrs.get('pair_by', 'query')), 'paired units')}"


def _number(value: float, decimals: int, *, plus: bool = False) -> str:
    """``value`` with ``decimals`` decimals (``+`` for positive values when ``plus``); a value
    that rounds to zero prints without a sign ("0.0", never "-0.0")."""
    if not math.isfinite(value):
        return "n/a"
    text = f"{value:{'+' if plus else ''}.{decimals}f}"
    return text.lstrip("+-") if float(text) == 0 else text


def _difference(value: float, fraction: bool, decimals: int) -> str:
    return _number(100 * value if fraction else value, decimals + (0 if fraction else 2), plus=True)


def _bound(value: float, fraction: bool, decimals: int) -> str:
    return _number(100 * value if fraction else value, decimals + (0 if fraction else 2))


@validate_params(decimals=Integer(0, 6))
def describe_comparison(
    comparison: xr.Dataset,
    descriptor: str,
    baseline: str,
    *,
    names: Mapping[str, str] | None = None,
    metric_phrase: str | None = None,
    decimals: int = 1,
) -> str:
    """One sentence for the comparison ``descriptor`` vs ``baseline`` of a compare Dataset.

    Wording rules:

    - significant (``reject``: corrected p < alpha) with the test and the mean difference on
      the same side (:func:`called_better`): ``"A > B on <metric>: +d points, 95% CI [lo, hi],
      <test> p ... <correction>, <size> effect (...)"`` with A the system the comparison
      ``favours``, d = mean(A - B) > 0 and its bootstrap CI (points = percentage points, for
      metrics in [0, 1]);
    - significant, but a Wilcoxon or sign test points to the system with the lower mean (or
      the means are equal): ``"No verdict between A and B on <metric>: the <test> rejects (p
      ..., <size> effect) in favour of B on the location of the differences, but the mean
      difference favours A: d points (A minus B), ..."``; no system is called better;
    - not tested (the comparison's ``note``): ``"A vs B on <metric>: not tested: <note>
      (<units>)."``;
    - otherwise: ``"No significant difference between A and B on <metric>: d points (A minus
      B), ..."`` in the Dataset's order (A = descriptor, B = baseline);
    - the p-value is the corrected one, printed by :func:`~metricalc.plotting.labels.format_p`;
      the effect size by :func:`effect_size`; the sentence ends with the number of paired units
      (:func:`unit_words`: named by ``pair_by``, or by the attr ``unit_name`` where the
      comparison has it) and the units dropped for missing in one system, if any.

    Examples
    --------
    >>> import pandas as pd, xarray as xr
    >>> index = pd.MultiIndex.from_tuples([("orb", "sift")], names=["descriptor", "baseline"])
    >>> ds = xr.Dataset(
    ...     {"n": ("comparison", [1234]), "n_dropped": ("comparison", [0]),
    ...      "mean_diff": ("comparison", [-0.123]), "ci_low": ("comparison", [-0.149]),
    ...      "ci_high": ("comparison", [-0.098]), "pvalue_corrected": ("comparison", [1e-5]),
    ...      "reject": ("comparison", [True]), "favours": ("comparison", [-1]),
    ...      "rank_biserial": ("comparison", [-0.62]), "cohens_dz": ("comparison", [-1.1])},
    ...     coords=xr.Coordinates.from_pandas_multiindex(index, "comparison"),
    ...     attrs={"metric": "ap", "split": "viewpoint", "test": "wilcoxon", "correction": "holm",
    ...            "alpha": 0.05, "pair_by": "query", "confidence_level": 0.95})
    >>> print(describe_comparison(ds, "orb", "sift", names={"sift": "SIFT", "orb": "ORB"}))
    SIFT > ORB on viewpoint mAP: +12.3 points, 95% CI [9.8, 14.9], Wilcoxon p < 0.001 after Holm, large effect (rank-biserial r = 0.62; 1,234 paired queries).
    """  # noqa: E501
    pairs = comparison_pairs(
        comparison, "describe_comparison: comparison", needs=READ_VARIABLES
    )
    if (descriptor, baseline) not in pairs:
        raise InvalidInputError(
            f"describe_comparison: no comparison of {descriptor!r} against {baseline!r}; the "
            f"Dataset has {pairs}"
        )
    row = comparison_row(comparison, pairs.index((descriptor, baseline)))
    attrs = comparison.attrs
    metric = str(attrs.get("metric", "ap"))
    test = str(attrs.get("test", "wilcoxon"))
    fraction = is_fraction_metric(metric)
    phrase = metric_phrase or compared_metric_phrase(metric, str(attrs.get("split", "") or ""))
    unit = " points" if fraction else ""
    a, b = display_name(descriptor, names), display_name(baseline, names)
    diff, low, high = (float(row[k]) for k in ("mean_diff", "ci_low", "ci_high"))
    effect_name, effect, word = effect_size(row, test)
    significant = bool(row["reject"])
    side = called_better(row)
    if side < 0:  # the baseline wins: winner minus loser
        a, b, diff, low, high, effect = b, a, -diff, -high, -low, -effect
    level = float(attrs.get("confidence_level", 0.95))
    p = format_p(float(row["pvalue_corrected"]), alpha=float(attrs.get("alpha", 0.05)))
    corrected = f"{p} {CORRECTION_WORDS.get(str(attrs.get('correction', 'holm')), '')}"
    tested = f"{TEST_WORDS.get(test, test)} {corrected}"
    ci = (
        f"{100 * level:g}% CI [{_bound(low, fraction, decimals)}, "
        f"{_bound(high, fraction, decimals)}]"
    )
    difference = f"{_difference(diff, fraction, decimals)}{unit}"
    n = int(row.get("n", 0))
    counted = unit_words(attrs, n)
    dropped = int(row.get("n_dropped", 0))
    if dropped:
        counted += f", {dropped:,} unpaired left out"
    effect_text = (
        f"{EFFECT_NAMES[effect_name]} = {_number(effect, 2)}" if math.isfinite(effect) else ""
    )
    details = "; ".join(t for t in (effect_text, counted) if t)
    note = str(row.get("note", "") or "")
    if note:
        return f"{a} vs {b} on {phrase}: not tested: {note} ({counted})."
    if not significant:
        return (
            f"No significant difference between {a} and {b} on {phrase}: {difference} "
            f"({a} minus {b}), {ci}, {tested}, {word} effect ({details})."
        )
    if side == 0:  # rejected, but the test points against the means (a Wilcoxon or sign test)
        return (
            f"No verdict between {a} and {b} on {phrase}: the {TEST_NAMES.get(test, test)} "
            f"rejects ({corrected}, {word} effect){_tested_side(row, test, a, b)}, but "
            f"{_mean_side(diff, a, b)}: {difference} ({a} minus {b}), {ci} ({details})."
        )
    return f"{a} > {b} on {phrase}: {difference}, {ci}, {tested}, {word} effect ({details})."


def called_better(row: Mapping[str, Any]) -> int:
    """The system a comparison's sentence calls better: +1 the descriptor, -1 the baseline, 0
    neither. The comparison's ``favours`` where it is rejected and its mean difference points
    the same way; never the system with the lower (or an equal) mean."""
    if not bool(row["reject"]):
        return 0
    favours, diff = int(row["favours"]), float(row["mean_diff"])
    mean_side = int(np.sign(diff)) if math.isfinite(diff) else 0
    return favours if favours == mean_side else 0


def _tested_side(row: Mapping[str, Any], test: str, a: str, b: str) -> str:
    """`` in favour of X on <what the test tests>`` for a rejected comparison without a verdict
    (A = the descriptor), from the test's own statistic; ``""`` where it is unknown."""
    if test == "wilcoxon":
        value, what = float(row.get("rank_biserial", math.nan)), "the location of the differences"
    elif test in ("sign", "mcnemar"):
        value = float(row.get("wins", 0)) - float(row.get("losses", 0))
        what = "wins and losses"
    else:
        return ""
    if not math.isfinite(value) or value == 0:
        return ""
    return f" in favour of {a if value > 0 else b} on {what}"


def _mean_side(diff: float, a: str, b: str) -> str:
    """Which system the mean difference ``diff`` (A minus B) favours, in words."""
    if math.isfinite(diff) and diff != 0:
        return f"the mean difference favours {a if diff > 0 else b}"
    return "the means are equal"


@validate_params(decimals=Integer(0, 6))
def summarize(
    comparison: xr.Dataset,
    *,
    names: Mapping[str, str] | None = None,
    metric_phrase: str | None = None,
    decimals: int = 1,
) -> list[str]:
    """One sentence (:func:`describe_comparison`) per comparison, in the Dataset's order."""
    return [
        describe_comparison(
            comparison, d, b, names=names, metric_phrase=metric_phrase, decimals=decimals
        )
        for d, b in comparison_pairs(comparison, "summarize: comparison", needs=READ_VARIABLES)
    ]


def _join(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _check_ranking(ranking: Any, what: str) -> None:
    needed = ("average_rank", "nemenyi_different")
    if not isinstance(ranking, xr.Dataset) or any(v not in ranking for v in needed):
        raise InvalidInputError(
            f"{what} must be a Dataset from metricalc.stats.rank_systems (with average_rank and "
            "nemenyi_different)"
        )


def cd_groups(ranking: xr.Dataset) -> list[list[str]]:
    """Groups of systems not significantly different by the critical difference.

    Systems sorted by average rank; a group is a maximal run of consecutive systems no two of
    which are ``nemenyi_different`` (absolute rank difference > CD). Runs contained in another
    run and single systems are left out: these are the bars of a critical-difference diagram.

    Examples
    --------
    >>> import xarray as xr
    >>> names = ["a", "b", "c", "d"]
    >>> ranks = [1.0, 1.5, 2.6, 3.9]                      # CD = 1.2
    >>> different = [[abs(x - y) > 1.2 for y in ranks] for x in ranks]
    >>> ranking = xr.Dataset(
    ...     {"average_rank": ("descriptor", ranks),
    ...      "nemenyi_different": (("descriptor", "other"), different)},
    ...     coords={"descriptor": names, "other": names})
    >>> cd_groups(ranking)
    [['a', 'b'], ['b', 'c']]
    """
    _check_ranking(ranking, "cd_groups: ranking")
    systems = [str(s) for s in ranking["descriptor"].values.tolist()]
    ranks = np.asarray(ranking["average_rank"].values, dtype=np.float64)
    different = np.asarray(
        ranking["nemenyi_different"].transpose("descriptor", "other").values, dtype=bool
    )
    order = np.argsort(ranks, kind="stable")
    groups, reached = [], 0
    for start in range(len(order)):
        end = start
        while (
            end + 1 < len(order)
            and not different[np.ix_(order[start : end + 2], order[start : end + 2])].any()
        ):
            end += 1
        if end > start and end > reached:
            groups.append([systems[i] for i in order[start : end + 1]])
            reached = end
    return groups


def describe_ranking(
    ranking: xr.Dataset,
    *,
    names: Mapping[str, str] | None = None,
    metric_phrase: str | None = None,
) -> str:
    """A paragraph for a :func:`metricalc.stats.rank_systems` Dataset: the Friedman test, the
    average ranks (1 = best), the critical difference and the groups it does not separate."""
    _check_ranking(ranking, "describe_ranking: ranking")
    attrs = ranking.attrs
    phrase = metric_phrase or compared_metric_phrase(
        str(attrs.get("metric", "ap")), str(attrs.get("split", "") or "")
    )
    systems = [str(s) for s in ranking["descriptor"].values.tolist()]
    ranks = np.asarray(ranking["average_rank"].values, dtype=np.float64)
    order = np.argsort(ranks, kind="stable")
    alpha = float(attrs.get("alpha", 0.05))
    friedman_p = float(ranking["friedman_pvalue"]) if "friedman_pvalue" in ranking else math.nan
    statistic = (
        float(ranking["friedman_statistic"]) if "friedman_statistic" in ranking else math.nan
    )
    n_units = int(ranking["n_units"]) if "n_units" in ranking else 0
    named = str(attrs.get(UNIT_NAME_ATTR, "") or "")
    units = f"{n_units:,} paired units (one per {named})" if named else unit_words(attrs, n_units)
    listed = ", ".join(f"{display_name(systems[i], names)} {ranks[i]:.2f}" for i in order)
    text = (
        f"Ranking on {phrase}: Friedman test over {units} and {len(systems)} systems, "
        f"chi-square = {statistic:.2f}, {format_p(friedman_p, alpha=alpha)}. "
        f"Average ranks (1 = best): {listed}."
    )
    if "critical_difference" in ranking:
        cd = float(ranking["critical_difference"])
        groups = cd_groups(ranking)
        text += f" Nemenyi critical difference {cd:.2f} at alpha {alpha:g}"
        if groups:
            joined = "; ".join(_join([display_name(s, names) for s in group]) for group in groups)
            text += f"; not significantly different: {joined}."
        else:
            text += "; every pair of systems differs."
    return text
