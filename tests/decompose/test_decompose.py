"""The decomposition engine: counts, factor curves, identity, curve AP, what-if, monotonicity."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import metricalc as mc
from metricalc.decompose import (
    chain_counts,
    compound,
    compound_monotonicity,
    curve_average_precision,
    decompose,
    factor_ap,
    improvement_check,
    interpolated_precision,
    monotonicity_check,
    perfect_stage_curves,
    random_improvement,
    stack_chains,
    verify,
    what_if,
    what_if_table,
)
from tests.conftest import random_cases

# ---------------------------------------------------------------------------------------------
# Hand-computed chain
# ---------------------------------------------------------------------------------------------

CONFIDENCE = [0.9, 0.8, 0.7, 0.6, 0.6, 0.5]
OUTCOMES = [[1, 1, 1], [1, 0, 0], [0, 1, 1], [1, 1, 0], [1, 1, 1], [0, 0, 0]]
# through L:       1 1 0 1 1 0  -> at 0.9, 0.8, 0.7, 0.6, 0.5: 1 2 2 4 4
# through L, C|L:  1 0 0 1 1 0  ->                             1 1 1 3 3
# through all:     1 0 0 0 1 0  ->                             1 1 1 2 2


def test_hand_chain_counts_and_curves():
    d = decompose(CONFIDENCE, OUTCOMES, [5, 5, 4])
    assert d.cutoff.values.tolist() == [0.9, 0.8, 0.7, 0.6, 0.5]
    assert d.n_selected.values.tolist() == [1, 2, 3, 5, 6]
    assert d.tp.values.tolist() == [[1, 2, 2, 4, 4], [1, 1, 1, 3, 3], [1, 1, 1, 2, 2]]
    assert d.fp.values.tolist() == [[0, 0, 1, 1, 2], [0, 1, 1, 1, 1], [0, 0, 0, 1, 1]]
    # default recall side: the predictions themselves
    assert d.found.values.tolist() == d.tp.values.tolist()
    np.testing.assert_allclose(d.precision, [1, 1 / 2, 1 / 3, 2 / 5, 2 / 6])
    np.testing.assert_allclose(d.recall, [1 / 4, 1 / 4, 1 / 4, 2 / 4, 2 / 4])
    np.testing.assert_allclose(d.factor_precision.sel(stage="C|L"), [1, 1 / 2, 1 / 2, 3 / 4, 3 / 4])
    np.testing.assert_allclose(d.factor_recall.sel(stage="L"), [1 / 5, 2 / 5, 2 / 5, 4 / 5, 4 / 5])
    # R_k = (F_k / G_k) / (F_{k-1} / G_{k-1}): G changes from 5 to 4 at the last stage
    np.testing.assert_allclose(
        d.factor_recall.sel(stage="S|C,L"), [(1 / 4) / (1 / 5)] * 3 + [(2 / 4) / (3 / 5)] * 2
    )
    check = verify(d)
    assert check.ok and check.points_checked == 5 and check.max_deviation < 1e-15


def test_composed_curve_is_the_core_pr_curve():
    rng = np.random.default_rng(3)
    y, s = rng.random(200) < 0.4, np.round(rng.random(200), 2)
    d = decompose(s, y[:, None], int(y.sum()))
    pr = mc.pr_curve(y, s)
    np.testing.assert_array_equal(d.precision.values, pr.precision.values)
    np.testing.assert_array_equal(d.recall.values, pr.recall.values)
    np.testing.assert_array_equal(d.cutoff.values, pr.cutoff.values)


def test_found_at_counts_ground_truth_items():
    # two objects: found through L at 0.8 and 0.6, the first through C|L at 0.8
    found_at = [[0.8, 0.8], [0.6, -np.inf]]
    d = decompose([0.9, 0.8, 0.6], [[0, 0], [1, 1], [1, 0]], 2, found_at=found_at)
    assert d.found.values.tolist() == [[0, 1, 2], [0, 1, 1]]
    np.testing.assert_allclose(d.factor_recall.sel(stage="C|L"), [np.nan, 1, 0.5])
    assert verify(d).ok


def test_counted_predictions_add_thresholds_only():
    d = decompose([0.9, 0.8, 0.7], [[1, 1], [1, 1], [0, 0]], 2, counted=[True, False, True])
    assert d.cutoff.values.tolist() == [0.9, 0.8, 0.7]
    assert d.n_selected.values.tolist() == [1, 1, 2]
    assert d.tp.values.tolist() == [[1, 1, 1], [1, 1, 1]]


def test_no_prediction_gives_one_empty_point():
    d = decompose(np.zeros(0), np.zeros((0, 2), bool), 3)
    assert d.sizes["threshold"] == 1 and d.n_selected.values.tolist() == [0]
    assert float(curve_average_precision(d.precision, d.recall)) == 0.0
    d0 = decompose(np.zeros(0), np.zeros((0, 2), bool), 0)
    assert np.isnan(curve_average_precision(d0.precision, d0.recall))


def test_zero_division_policy():
    d = decompose([0.9, 0.8], [[0, 0], [1, 1]], 1, zero_division=0)
    assert d.factor_precision.sel(stage="C|L").values.tolist() == [0.0, 1.0]
    with pytest.warns(mc.UndefinedMetricWarning):
        decompose([0.9, 0.8], [[0, 0], [1, 1]], 1, zero_division="warn")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": [0.5, np.nan]}, "confidence must hold finite"),
        ({"outcomes": [[1, 2], [0, 0]]}, "outcomes must hold booleans"),
        ({"outcomes": [1, 0]}, "outcomes must have shape"),
        ({"n_ground_truth": -1}, "n_ground_truth must be >= 0"),
        ({"n_ground_truth": [1, 2, 3]}, "one count per stage"),
        ({"stages": ["L", "L"]}, "distinct names"),
        ({"found_at": [[0.5, 0.9]]}, "must not increase along the chain"),
        ({"found_at": [[0.5]]}, "found_at has shape"),
        ({"counted": [True]}, "counted has shape"),
        ({"batch_dims": ["x"]}, "batch_dims must name"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    args = {"confidence": [0.9, 0.8], "outcomes": [[1, 1], [1, 0]], "n_ground_truth": 2}
    args.update(kwargs)
    with pytest.raises(mc.InvalidInputError, match=message):
        decompose(args.pop("confidence"), args.pop("outcomes"), args.pop("n_ground_truth"), **args)


# ---------------------------------------------------------------------------------------------
# Identity on random chains (hypothesis)
# ---------------------------------------------------------------------------------------------


@st.composite
def chains(draw):
    n = draw(st.integers(0, 40))
    k = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    levels = draw(st.sampled_from([2, 5, 0]))
    confidence = rng.integers(0, levels, n) / levels if levels else rng.normal(size=n)
    outcomes = rng.random((n, k)) < draw(st.floats(0.1, 0.95))
    ground_truth = rng.integers(0, 30, k)
    found_at = None
    if draw(st.booleans()):
        m = int(rng.integers(0, 20))
        raw = np.where(rng.random((m, k)) < 0.7, rng.normal(size=(m, k)), -np.inf)
        found_at = np.minimum.accumulate(raw, axis=1)  # non-increasing along the chain
    counted = rng.random(n) < 0.85 if draw(st.booleans()) else None
    return confidence, outcomes, ground_truth, found_at, counted


@settings(max_examples=300, deadline=None)
@given(chains())
def test_identity_holds_on_random_chains(chain):
    confidence, outcomes, ground_truth, found_at, counted = chain
    d = decompose(
        confidence,
        outcomes,
        ground_truth,
        stages=[f"s{i}" for i in range(outcomes.shape[1])],
        found_at=found_at,
        counted=counted,
    )
    check = verify(d)
    assert check.max_deviation < 1e-12
    # the counts telescope exactly: fp sums to the composed false positives
    np.testing.assert_array_equal(d.fp.sum("stage") + d.tp.isel(stage=-1), d.n_selected)
    # a brute-force count at every cutoff, and the curves from those counts by the definitions
    keep = np.ones(confidence.size, bool) if counted is None else counted
    through = np.logical_and.accumulate(outcomes, axis=1)
    items = np.where(through & keep[:, None], confidence[:, None], -np.inf)
    items = items if found_at is None else found_at
    G = ground_truth.astype(float)
    for j, cut in enumerate(d.cutoff.values):
        if np.isnan(cut):
            continue
        selected = keep & (confidence >= cut)
        T = [int(selected.sum()), *through[selected].sum(axis=0).tolist()]
        F = (items >= cut).sum(axis=0).tolist()
        assert d.n_selected.values[j] == T[0]
        assert d.tp.values[:, j].tolist() == T[1:]
        assert d.found.values[:, j].tolist() == F
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.array(F) / G  # recall of the chain 1..k
            expected = {
                "factor_precision": np.array(T[1:]) / np.array(T[:-1]),
                "factor_recall": rate / np.concatenate([[1.0], rate[:-1]]),
                "precision": T[-1] / T[0] if T[0] else np.nan,
                "recall": F[-1] / G[-1] if G[-1] else np.nan,
            }
        for name, want in expected.items():
            got = d[name].values[..., j]
            want = np.where(np.isfinite(want), want, np.nan)  # 0 / 0 and x / 0: undefined
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg=name)


def test_identity_over_batch_dims():
    rng = np.random.default_rng(0)
    confidence = rng.random((3, 4, 50))
    outcomes = rng.random((3, 4, 50, 3)) < 0.7
    d = decompose(
        confidence,
        outcomes,
        rng.integers(1, 40, (3, 4, 3)),
        batch_dims=("iou", "category"),
        coords={"category": list("abcd")},
    )
    assert d.factor_precision.dims == ("iou", "category", "stage", "threshold")
    assert verify(d).ok
    one = decompose(confidence[1, 2], outcomes[1, 2], d.n_ground_truth.values[1, 2])
    np.testing.assert_array_equal(d.precision.values[1, 2], one.precision.values)


def test_stack_chains_pads_without_changing_any_ap():
    a = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    b = decompose([0.5, 0.4], [[1, 1], [0, 0]], 2)
    both = stack_chains([a, b], "category", coords=["a", "b"])
    assert both.sizes["threshold"] == 4
    assert np.isnan(both.cutoff.sel(category="b").values[2:]).all()
    for method in mc.AP_METHODS:
        stacked = factor_ap(both, method=method)
        alone = factor_ap(b, method=method)
        np.testing.assert_allclose(stacked.ap.sel(category="b"), alone.ap)
        np.testing.assert_allclose(stacked.factor_ap.sel(category="b"), alone.factor_ap)
    with pytest.raises(mc.InvalidInputError, match="stages"):
        stack_chains([a, decompose([0.5], [[1]], 1)], "category")
    counts = chain_counts([0.5], [[1, 1]], 1)
    assert "precision" not in counts and "precision" in stack_chains([counts], "x")


# ---------------------------------------------------------------------------------------------
# AP of curves
# ---------------------------------------------------------------------------------------------


def test_curve_ap_equals_the_core_on_ranked_lists():
    """One-stage chains are ranked lists: with no tied scores every method agrees with the core;
    with ties, "step" still does (a tie group is one threshold in both)."""
    checked = 0
    for y_true, y_score in random_cases(11, 150, large=(3_000,)):
        extra = 2 if y_true.size % 3 == 0 else 0
        R = int(y_true.sum()) + extra
        d = decompose(y_score, y_true[:, None], R)
        tied = np.unique(y_score).size < y_score.size
        for method in mc.AP_METHODS:
            if tied and method != "step":
                continue
            core = mc.average_precision(y_true, y_score, method=method, n_relevant=R)
            mine = curve_average_precision(d.precision, d.recall, method=method)
            if R == 0:
                assert np.isnan(core) and np.isnan(mine)
                continue
            tol = 1e-9 if method == "trapezoid" else 1e-12  # hpatches' 1e-10 guards
            assert abs(float(mine) - core) < tol, (method, y_true.size)
            checked += 1
    assert checked > 200


def test_curve_ap_hand_values_and_undefined_points():
    P, R = [np.nan, 1.0, 0.5, 0.6], [0.0, 0.5, 0.5, 1.0]
    assert float(curve_average_precision(P, R, method="step")) == pytest.approx(0.5 + 0.3)
    # interpolated: p(t) = 1 up to 0.5 (51 levels), 0.6 above (50 levels)
    expected = (51 * 1.0 + 50 * 0.6) / 101
    assert float(curve_average_precision(P, R, method="coco101")) == pytest.approx(expected)
    expected11 = (6 * 1.0 + 5 * 0.6) / 11
    assert float(curve_average_precision(P, R, method="voc11")) == pytest.approx(expected11)
    # trapezoid from (0, 1): 0.5 * (1 + 1) / 2 + 0 + 0.5 * (0.5 + 0.6) / 2
    assert float(curve_average_precision(P, R, method="trapezoid")) == pytest.approx(0.775)
    assert np.isnan(curve_average_precision([0.5], [np.nan]))
    levels = interpolated_precision(xr.DataArray(P, dims="threshold"),
                                    xr.DataArray(R, dims="threshold"), levels=[0, 0.5, 0.51, 1])
    assert levels.values.tolist() == [1.0, 1.0, 0.6, 0.6]


def slow_curve_ap(P, R, method):
    """Curve AP by the definitions, one point at a time (undefined points skipped)."""
    points = [(p, r) for p, r in zip(P, R, strict=True) if not (np.isnan(p) or np.isnan(r))]
    if all(np.isnan(R)):
        return np.nan
    if method in ("coco101", "voc11"):
        # VOC 2007's code: np.arange(0, 1.1, 0.1), whose 0.3 is 0.30000000000000004
        levels = np.linspace(0, 1, 101) if method == "coco101" else np.arange(0.0, 1.1, 0.1)
        return float(np.mean([max([p for p, r in points if r >= t], default=0.0)
                              for t in levels]))
    total, (p0, r0) = 0.0, (1.0, 0.0)
    for p, r in points:
        total += (r - r0) * ((p + p0) / 2 if method == "trapezoid" else p)
        p0, r0 = p, r
    return total


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 30), st.sampled_from(mc.AP_METHODS))
def test_curve_ap_equals_the_definitions_on_any_curve(seed, n, method):
    """Factor curves are not ranked lists: recall goes up and down, exceeds 1 (DecompoVision),
    repeats exactly, and points are undefined."""
    rng = np.random.default_rng(seed)
    R = rng.choice([0.0, 0.25, 0.3, 0.5, 0.7, 1.0, 1.5], n) if seed % 2 else rng.random(n) * 1.2
    P = rng.choice([0.0, 0.5, 1.0], n) if seed % 3 == 0 else rng.random(n)
    R[rng.random(n) < 0.2] = np.nan
    P[rng.random(n) < 0.1] = np.nan
    got = float(curve_average_precision(P, R, method=method))
    want = slow_curve_ap(P.tolist(), R.tolist(), method)
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(want, abs=1e-12)


def test_ap_does_not_factor():
    d = decompose(CONFIDENCE, OUTCOMES, 5, stages=["L", "C|L", "S|C,L"])
    aps = factor_ap(d, method="coco101")
    assert abs(float(aps.ap) - float(aps.factor_ap_product)) > 0.01


# ---------------------------------------------------------------------------------------------
# What if a stage were perfect
# ---------------------------------------------------------------------------------------------


def test_what_if_by_hand():
    d = decompose([0.9, 0.8, 0.7, 0.6], [[1, 1], [1, 0], [0, 0], [1, 1]], 3)
    w = what_if(d, method="step")
    # perfect L: the curve (P_C|L, R_C|L) = (1, 1), (0.5, 0.5), (0.5, 0.5), (2/3, 2/3)
    c_l = 1 * 1 + (0.5 - 1) * 0.5 + (2 / 3 - 0.5) * (2 / 3)
    # perfect C|L: (P_L, R_L) = (1, 1/3), (1, 2/3), (2/3, 2/3), (3/4, 1)
    l_only = (1 / 3) * 1 + (1 / 3) * 1 + (1 / 3) * 0.75
    np.testing.assert_allclose(w.ap_if_perfect.values, [c_l, l_only])
    # composed: (1, 1/3), (1/2, 1/3), (1/3, 1/3), (1/2, 2/3)
    assert float(w.ap) == pytest.approx(1 / 3 + (1 / 3) * 0.5)
    table = what_if_table(d, method="step")
    assert table.index.tolist() == ["L", "C|L"]
    np.testing.assert_allclose(table["gain"], w.gain.values)


@settings(max_examples=150, deadline=None)
@given(chains(), st.sampled_from(mc.AP_METHODS))
def test_perfect_last_stage_is_the_shorter_chain_exactly(chain, method):
    """With the last stage perfect the composed curve is the chain without it, to the last bit:
    recall levels hit exactly (k / 10 = 0.1 ...) must not be missed by a rounded product."""
    confidence, outcomes, ground_truth, found_at, counted = chain
    if outcomes.shape[1] < 2:
        return
    names = [f"s{i}" for i in range(outcomes.shape[1])]
    d = decompose(confidence, outcomes, ground_truth, stages=names, found_at=found_at,
                  counted=counted)
    shorter = decompose(confidence, outcomes[:, :-1], ground_truth[:-1], stages=names[:-1],
                        found_at=None if found_at is None else found_at[:, :-1], counted=counted)
    perfect = perfect_stage_curves(d).sel(perfect=names[-1])
    # defined where the other factors are (not where, e.g., G_1 = 0 leaves R_1 undefined)
    defined = (perfect.precision.notnull() & perfect.recall.notnull()).values
    for name in ("precision", "recall"):
        np.testing.assert_array_equal(perfect[name].values[defined], shorter[name].values[defined])
    if defined.all():
        got = what_if(d, method=method).ap_if_perfect.sel(stage=names[-1]).item()
        assert got == float(factor_ap(shorter, method=method).ap) or np.isnan(got)


def test_perfect_stage_curve_is_exact_where_a_product_rounds_down():
    # 3 of 10 objects through L, 1 of those 3 through C|L: (3/10) * (1/3) = 0.09999999999999999
    found_at = [[0.9, 0.9, 0.9]] + [[0.9, -np.inf, -np.inf]] * 2 + [[-np.inf] * 3] * 7
    d = decompose([0.9], [[1, 1, 1]], 10, found_at=found_at)
    assert d.product_recall.item() < 0.1 == d.recall.item()
    perfect = perfect_stage_curves(d)
    assert perfect.recall.sel(perfect="S|C,L").item() == 0.1
    assert what_if(d).ap_if_perfect.sel(stage="S|C,L").item() == pytest.approx(11 / 101)


def test_what_if_table_is_compound_over_batch_dims():
    rng = np.random.default_rng(5)
    d = decompose(
        rng.random((4, 60)), rng.random((4, 60, 2)) < 0.6, rng.integers(5, 30, (4, 2)),
        batch_dims=("category",),
    )
    per_chain = what_if(d)
    table = what_if_table(d)
    np.testing.assert_allclose(table["ap_if_perfect"], per_chain.ap_if_perfect.mean("category"))
    assert table["ap"].iloc[0] == pytest.approx(float(per_chain.ap.mean()))


def test_what_if_counts_an_unreachable_stage_as_zero():
    # nothing is ever localized: P_C|L undefined everywhere; a perfect L cannot be credited
    d = decompose([0.9, 0.8], [[0, 0], [0, 0]], 2)
    w = what_if(d)
    assert float(w.ap) == 0.0
    assert w.ap_if_perfect.sel(stage="L").item() == 0.0


# ---------------------------------------------------------------------------------------------
# Monotonicity (the seed's theorems)
# ---------------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(chains(), st.integers(0, 2**32 - 1), st.sampled_from(["coco101", "voc11"]))
def test_improving_any_factor_never_lowers_interpolated_ap(chain, seed, method):
    confidence, outcomes, ground_truth, found_at, counted = chain
    d = decompose(
        confidence, outcomes, ground_truth, stages=[f"s{i}" for i in range(outcomes.shape[1])],
        found_at=found_at, counted=counted,
    )
    stage = str(np.random.default_rng(seed).choice(d.stage.values))
    improved = random_improvement(d, stages=[stage], seed=seed)
    check = improvement_check(d, improved, method=method)
    assert bool(check.improved) and bool(check.holds)
    assert not (check.gain < -1e-12).any()


def test_step_ap_is_not_monotone_in_the_factors():
    """The theorem needs interpolated AP: raising the first point's recall moves area to a
    point of lower precision under the step rule."""
    # one object, reached through L at 0.9 and through C|L at 0.8:
    # P_C|L = (0, 1/2), R_C|L = (0, 1); composed (P, R) = (0, 0), (1/2, 1): step AP 1/2
    d = decompose([0.9, 0.8], [[1, 0], [1, 1]], 1, found_at=[[0.9, 0.8]])
    assert float(factor_ap(d, method="step").ap) == 0.5
    improved = d[["factor_precision", "factor_recall"]].copy(deep=True)
    improved["factor_recall"].loc[{"stage": "C|L"}] = [0.5, 1.0]  # the first point's recall rises
    step = improvement_check(d, improved, method="step")
    assert bool(step.improved) and not bool(step.holds)
    assert float(step.ap_after) == 0.25  # 0.5 * 0 + 0.5 * 0.5
    interpolated = improvement_check(d, improved, method="coco101")
    assert bool(interpolated.holds) and float(interpolated.gain) == 0.0


def test_monotonicity_check_reports_per_stage():
    d = decompose(CONFIDENCE, OUTCOMES, 5)
    check = monotonicity_check(d, method="coco101", trials=10)
    assert check.improved_stage.values.tolist() == ["L", "C|L", "S|C,L", "all"]
    assert bool(check.holds.all()) and (check.min_gain >= -1e-12).all()


def test_compound_metric_and_its_monotonicity():
    ap = xr.DataArray([[0.2, np.nan, 0.9], [0.4, 0.5, 0.6]], dims=("iou", "category"))
    assert float(compound(ap)) == pytest.approx(np.nanmean(ap.values))
    per_iou = compound(ap, dims="category")
    np.testing.assert_allclose(per_iou, np.nanmean(ap.values, axis=1))
    median = compound_monotonicity(ap, F=lambda a: np.nanmedian(a, axis=-1))
    assert bool(median.monotone.where(ap.notnull(), True).all())
    assert np.isnan(median.min_change.sel(iou=0, category=1))
    mean = compound_monotonicity(ap)
    assert bool(mean.monotone.all()) and float(mean.min_change.min()) > 0
    # a non-monotone F is caught: minus the mean decreases when any AP rises
    negative = compound_monotonicity(ap, F=lambda a: -np.nanmean(a, axis=-1))
    assert not bool(negative.monotone.where(ap.notnull(), False).any())
    with pytest.raises(mc.InvalidInputError, match="steps"):
        compound_monotonicity(ap, steps=[0])


def test_factor_figure_draws_the_product_on_the_composed_curve():
    from metricalc.decompose.figures import plot_factor_curves

    # (3/10) * (1/3) is one unit in the last place below the recall level 0.1
    found_at = [[0.9, 0.9, 0.9]] + [[0.9, -np.inf, -np.inf]] * 2 + [[-np.inf] * 3] * 7
    d = decompose([0.9, 0.5], [[1, 1, 1], [0, 0, 0]], 10, found_at=found_at)
    assert d.product_recall.values[0] < 0.1 == d.recall.values[0]
    drawn = [line.get_ydata() for line in plot_factor_curves(d).get_lines()]
    curves = [y for y in drawn if len(y)]  # in legend order: 3 factors, composed, product
    assert len(curves) == 5 and curves[3][10] == 100.0  # percent
    np.testing.assert_array_equal(curves[4], curves[3])
