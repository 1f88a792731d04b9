"""hit@K as the metric set's hit rate, untestable comparisons inside a family, explicit pairs,
the direction of a significant result (``favours``), and the correction's speed trick.

References: ``metricalc.metric_set`` (hit_rate_at_K, precision_at_K), a brute force over the
tied ranks, scipy's one-sided tests (the direction), statsmodels' ``multipletests`` (the family).
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
import scipy.stats
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

import metricalc as mc
from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.stats import compare as stats_compare
from metricalc.stats import correct, metric_values, rank_systems, unit_values
from tests.shared_checks import reference_multipletests


def compare(*args: Any, **kwargs: Any) -> xr.Dataset:
    """:func:`metricalc.stats.compare` with per-query units unless the test names others: the
    tests of this module exercise the unit-level machinery on small cubes of few scenes."""
    return stats_compare(*args, **{"pair_by": "query", **kwargs})


# ---------------------------------------------------------------------------------------------
# hit@K: the per-query hit probability under the cube's tie policy
# ---------------------------------------------------------------------------------------------


def random_rank_cube(rng: np.random.Generator, policy: str, n: int = 400, k: int = 3):
    """``k`` descriptors over ``n`` queries: R = 1 (most), 0 and -1, many ties of 0..7 items."""
    coords = {
        "scene": rng.choice(["i_a", "i_b", "v_c", "v_d"], n),
        "pair": rng.choice(["1-2", "1-3"], n),
        "keypoint_set": np.full(n, "sift"),
        "query_keypoint": np.arange(n),
    }
    relevant = rng.choice([1, 1, 1, 1, 0, -1], size=(k, n))
    better = rng.geometric(rng.uniform(0.1, 0.9), size=(k, n)) - 1
    ties = np.where(rng.random((k, n)) < 0.4, rng.integers(0, 8, (k, n)), 0)
    data = {
        "better": np.where(relevant == 1, better, -1),
        "ties": np.where(relevant == 1, ties, -1),
        "n_relevant": relevant,
    }
    attrs = {**qc.DEFAULT_ATTRS, "tie_policy": policy}
    return qc.new_cube([f"d{i}" for i in range(k)], coords, data, attrs=attrs)


def hit_by_brute_force(b: int, t: int, k: int, policy: str) -> float:
    """The share of the relevant item's possible ranks b + 1 .. b + t + 1 (one per order of the
    tied items) within the top k; the deterministic policies pick one of them."""
    ranks = np.arange(b + 1, b + t + 2)
    chosen = {
        "optimistic": ranks[:1],
        "pessimistic": ranks[-1:],
        "workbench": np.array([1 + b + (t + 1) // 2]),  # docs/protocols.md, protocol 1
        "expected": ranks,
    }[policy]
    return float((chosen <= k).mean())


@pytest.mark.parametrize("policy", mc.TIE_POLICIES)
def test_mean_hit_at_k_is_the_metric_set_hit_rate(policy):
    rng = np.random.default_rng(mc.TIE_POLICIES.index(policy))
    for _ in range(10):
        cube = random_rank_cube(rng, policy)
        metrics = mc.metric_set(cube, k=(1, 2, 5, 10))
        for k in (1, 2, 5, 10):
            values = metric_values(cube, f"hit@{k}").values
            r1 = (cube.n_relevant.values == 1) & (cube.better.values >= 0)
            assert np.isfinite(values[r1]).all() and np.isnan(values[~r1]).all()
            # equal up to the order of the summation (a few 1e-16)
            np.testing.assert_allclose(
                np.nanmean(values, axis=1), metrics[f"hit_rate_at_{k}"].values, rtol=1e-13
            )
            precision = metric_values(cube, f"precision@{k}").values  # hits / k per query
            np.testing.assert_allclose(
                np.nanmean(precision, axis=1), metrics[f"precision_at_{k}"].values, rtol=1e-13
            )
            fractional = (values > 0) & (values < 1)
            if policy != "expected":
                assert not fractional.any()  # a hit or a miss
            else:  # only queries whose tied items straddle rank k
                b, t = cube.better.values, cube.ties.values
                assert np.array_equal(fractional, r1 & (b < k) & (k < b + t + 1))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 12),
    st.integers(0, 12),
    st.integers(1, 15),
    st.sampled_from(mc.TIE_POLICIES),
)
def test_hit_at_k_equals_the_brute_force_over_tied_ranks(b, t, k, policy):
    coords = {"scene": ["v_a"], "pair": ["1-2"], "keypoint_set": ["sift"], "query_keypoint": [0]}
    cube = qc.new_cube(
        ["d"], coords, {"better": [[b]], "ties": [[t]]},
        attrs={**qc.DEFAULT_ATTRS, "tie_policy": policy},
    )  # fmt: skip
    assert metric_values(cube, f"hit@{k}").item() == hit_by_brute_force(b, t, k, policy)


def test_mcnemar_refuses_fractional_hits_and_says_why_and_what_to_do():
    cube = random_rank_cube(np.random.default_rng(3), "expected")
    values = metric_values(cube, "hit@2").values
    straddling = int(((values > 0) & (values < 1)).any(axis=0).sum())  # queries, not cells
    assert straddling > 0
    with pytest.raises(InvalidInputError) as error:
        compare(cube, metric="hit@2", test="mcnemar")
    message = str(error.value)
    assert f"'hit@2' is fractional on {straddling:,} queries" in message
    assert "tie policy 'expected'" in message and "straddle rank 2" in message
    assert "tie policy 'pessimistic' or 'optimistic'" in message
    assert "metricalc keypoints eval --tie-policy pessimistic" in message  # a flag that exists
    assert "eval.tie_policy=pessimistic" in message and "test='auto'" in message
    # the default test runs on the same fractional hits: the randomization test of their mean
    default = compare(cube, metric="hit@2", baseline="d0", n_resamples=199)
    assert default.attrs["test"] == "randomization" and np.isfinite(default.pvalue.values).all()
    # the same cube's hits are binary under a deterministic policy, and wilcoxon takes fractions
    binary = random_rank_cube(np.random.default_rng(3), "pessimistic")  # the same rank data
    assert np.array_equal(binary.ties.values, cube.ties.values)
    ds = compare(binary, metric="hit@2", test="mcnemar", baseline="d0")
    assert np.isfinite(ds.pvalue.values).all()
    auto = compare(binary, metric="hit@2", baseline="d0")  # binary outcomes: McNemar by default
    assert auto.attrs["test"] == "mcnemar"
    xr.testing.assert_identical(auto, ds)
    ds = compare(cube, metric="hit@2", test="wilcoxon", baseline="d0")
    x, y = unit_values(cube, metric="hit@2").sel(descriptor=["d1", "d0"]).values
    both = np.isfinite(x) & np.isfinite(y)
    expected = scipy.stats.wilcoxon(x[both], y[both]).pvalue
    assert float(ds.sel(descriptor="d1", baseline="d0").pvalue) == expected


# ---------------------------------------------------------------------------------------------
# Families with untestable comparisons
# ---------------------------------------------------------------------------------------------


def ap_cube(ap: dict[str, np.ndarray], **attrs) -> xr.Dataset:
    n = len(next(iter(ap.values())))
    coords = {
        "scene": np.repeat(["i_a", "i_b", "v_c", "v_d"], -(-n // 4))[:n],
        "pair": np.full(n, "1-2"),
        "keypoint_set": np.full(n, "sift"),
        "query_keypoint": np.arange(n),
    }
    values = np.vstack(list(ap.values()))
    n_relevant = np.where(np.isnan(values), 0, 1)
    return qc.new_cube(
        list(ap), coords, {"ap": values, "n_relevant": n_relevant},
        attrs={**qc.DEFAULT_ATTRS, **attrs},
    )  # fmt: skip


@pytest.fixture(scope="module")
def systems():
    """sift; rootsift identical to sift; orb worse; brief sharing only 3 queries with the rest."""
    rng = np.random.default_rng(7)
    n = 1234
    sift = rng.uniform(0.2, 1.0, n)
    orb = np.clip(sift - rng.uniform(-0.1, 0.3, n), 0, 1)
    brief = np.full(n, np.nan)
    brief[:3] = rng.uniform(0, 1, 3)
    return {"sift": sift, "rootsift": sift.copy(), "orb": orb, "brief": brief}


@pytest.mark.parametrize("test", ["wilcoxon", "ttest", "sign", "randomization"])
@pytest.mark.parametrize("correction", ["holm", "bonferroni", "fdr_bh", "none"])
def test_untestable_comparisons_are_kept_with_a_note_and_left_out_of_the_family(
    systems, test, correction
):
    ds = compare(ap_cube(systems), baseline="sift", test=test, correction=correction,
                 n_resamples=999)  # fmt: skip
    assert [d for d, _ in ds.indexes["comparison"]] == ["rootsift", "orb", "brief"]
    same, worse, few = (ds.sel(descriptor=d, baseline="sift") for d in ("rootsift", "orb", "brief"))
    assert few.note.item() == (
        "3 paired units (pair_by='query', 1,231 dropped because missing in one system); a "
        "paired test needs at least 5"
    )
    untested = [few]
    if test == "randomization":  # defined with every difference zero: p = 1
        assert same.note.item() == "" and float(same.pvalue) == 1.0
    else:
        assert same.note.item() == (
            "all 1,234 paired differences are zero (the systems give identical values on every "
            f"unit): the {test} test needs a non-zero difference"
        )
        untested.append(same)
        assert float(same.ci_low) == float(same.ci_high) == 0.0  # the CI of identical systems
        assert int(same.ties) == 1234 and float(same.mean_diff) == 0.0
    for row in untested:
        for name in ("statistic", "pvalue", "pvalue_corrected"):
            assert np.isnan(float(row[name])), name
        assert not bool(row.reject) and int(row.favours) == 0
    assert np.isnan(float(few.ci_low)) and int(few.n) == 3 and int(few.n_dropped) == 1231
    assert float(few.mean_descriptor) == pytest.approx(np.mean(systems["brief"][:3]))
    # the family: the comparisons with a p-value, corrected by statsmodels
    raw = ds.pvalue.values
    family = np.isfinite(raw)
    assert family.tolist() == [test == "randomization", True, False]
    expected = raw[family] if correction == "none" else reference_multipletests(
        raw[family], correction
    )
    assert ds.pvalue_corrected.values[family].tolist() == list(expected)
    assert ds.reject.values[family].tolist() == (expected < 0.05).tolist()
    assert worse.note.item() == "" and bool(worse.reject) and int(worse.favours) == -1


def test_a_call_raises_only_when_no_comparison_can_be_tested(systems):
    cube = ap_cube(systems)
    with pytest.raises(InvalidInputError) as error:
        compare(cube, pairs=[("rootsift", "sift"), ("brief", "orb")], test="wilcoxon")
    assert str(error.value) == (
        "no comparison of the call can be tested: 'rootsift' vs 'sift': all 1,234 paired "
        "differences are zero (the systems give identical values on every unit): the wilcoxon "
        "test needs a non-zero difference; 'brief' vs 'orb': 3 paired units (pair_by='query', "
        "1,231 dropped because missing in one system); a paired test needs at least 5"
    )
    with pytest.raises(InvalidInputError) as error:  # the same reason: named once
        compare(cube.isel(query=slice(0, 4)), baseline="sift")
    assert str(error.value) == (
        "no comparison of the call can be tested: 'rootsift' vs 'sift', 'orb' vs 'sift': 4 "
        "paired units (pair_by='query', 0 dropped because missing in one system); a paired test "
        "needs at least 5; 'brief' vs 'sift': 3 paired units (pair_by='query', 1 dropped because "
        "missing in one system); a paired test needs at least 5"
    )
    with pytest.raises(InvalidInputError, match=r"^'rootsift' vs 'sift': all 1,234 paired"):
        compare(cube, pairs=[("rootsift", "sift")], test="wilcoxon")  # one comparison
    grid = np.random.default_rng(2).integers(0, 4, 40) / 8  # exact binary fractions
    shifted = ap_cube({"a": grid + 0.25, "b": grid})  # every difference exactly 0.25
    with pytest.raises(InvalidInputError, match=r"all 40 paired differences equal 0\.25: the t "):
        compare(shifted, test="ttest")
    assert bool(compare(shifted, test="sign").reject.item())
    uniform = np.random.default_rng(4).uniform(0, 0.8, 40)
    rounded = ap_cube({"a": uniform + 0.125, "b": uniform})  # 0.125 up to rounding
    spread = np.ptp((uniform + 0.125) - uniform)
    assert spread > 0  # not bitwise constant: scipy would return a p-value from rounding noise
    with pytest.raises(InvalidInputError, match=r"all 40 paired differences equal 0\.125: the t "):
        compare(rounded, test="ttest")


def test_notes_reach_the_json_and_the_terminal_table_of_the_cli(systems, tmp_path):
    import json

    from tests.cli_helpers import run_cli

    path = tmp_path / "c.nc"
    qc.save(ap_cube(systems), path)
    command = ["compare", str(path), "--baseline", "sift", "--test", "wilcoxon",
               "--pair-by", "query"]  # fmt: skip
    done = run_cli(*command, "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["descriptor"]: row for row in json.loads(done.stdout)}
    assert rows["brief"]["note"].startswith("3 paired units") and rows["brief"]["pvalue"] is None
    assert rows["orb"]["note"] == "" and rows["orb"]["favours"] == -1
    done = run_cli(*command)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # rich may wrap long lines
    assert "not tested: rootsift vs sift: all 1,234 paired differences are zero" in text
    assert "not tested: brief vs sift: 3 paired units" in text


# ---------------------------------------------------------------------------------------------
# Explicit pairs
# ---------------------------------------------------------------------------------------------


def test_pairs_are_one_family_in_the_given_order(systems):
    cube = ap_cube({k: v for k, v in systems.items() if k != "brief"})
    rng = np.random.default_rng(1)
    native = ap_cube({"sift": systems["sift"], "orb": np.clip(systems["orb"] + rng.normal(
        0.02, 0.05, len(systems["orb"])), 0, 1)}, keypoints="native")  # fmt: skip
    cubes = {"locked": cube.sel(descriptor=["sift", "orb"]), "native": native}
    pairs = [("orb (locked)", "orb (native)"), ("sift (locked)", "sift (native)")]
    ds = compare(cubes, pairs=pairs, n_resamples=999, test="wilcoxon")
    assert list(ds.indexes["comparison"]) == pairs
    units = unit_values(cubes)
    x, y = units.sel(descriptor="orb (locked)").values, units.sel(descriptor="orb (native)").values
    row = ds.sel(descriptor="orb (locked)", baseline="orb (native)")
    assert float(row.pvalue) == scipy.stats.wilcoxon(x, y).pvalue
    # sift is the same system in both cubes: untested, so the family is the orb comparison alone
    assert str(ds.note.values[1]).startswith("all 1,234 paired differences are zero")
    assert float(row.pvalue_corrected) == float(row.pvalue)
    # the same comparisons as a baseline call, given as pairs
    by_baseline = compare(cube, baseline="sift", n_resamples=999)
    by_pairs = compare(cube, pairs=[("rootsift", "sift"), ("orb", "sift")], n_resamples=999)
    xr.testing.assert_identical(by_baseline, by_pairs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pairs": [("orb", "sift")], "baseline": "sift"}, "not both"),
        ({"pairs": []}, "non-empty sequence"),
        ({"pairs": "orb,sift"}, "non-empty sequence"),
        ({"pairs": [("orb", "sift", "x")]}, r"each item must be a \(descriptor, baseline\)"),
        ({"pairs": ["os"]}, r"each item must be a \(descriptor, baseline\)"),
        ({"pairs": [("orb", "surf")]}, "pairs: baseline 'surf' is not a system of the cube"),
        ({"pairs": [("orb", "orb")]}, "compares a system with itself"),
        ({"pairs": [("orb", "sift"), ("sift", "orb")]}, "compared twice"),
        ({"pairs": [("broken", "sift")]}, r"'broken' is not a system .*status 'error'"),
    ],
)
def test_pairs_are_checked(systems, kwargs, message):
    cube = ap_cube({"sift": systems["sift"], "orb": systems["orb"]})
    cube = qc.combine([cube, qc.error_record("broken", "crashed", attrs=dict(cube.attrs))])
    with pytest.raises(InvalidInputError, match=message):
        compare(cube, **kwargs)


# ---------------------------------------------------------------------------------------------
# favours: the direction of a significant result is the test's own
# ---------------------------------------------------------------------------------------------


def one_sided_direction(x: np.ndarray, y: np.ndarray, test: str) -> int:
    """+1 when the one-sided test "descriptor greater" has the smaller p-value, else -1."""
    d = x - y
    sides = ("greater", "less")
    if test == "wilcoxon":
        greater, less = (scipy.stats.wilcoxon(x, y, alternative=a).pvalue for a in sides)
    elif test in ("ttest", "randomization"):
        greater, less = (scipy.stats.ttest_rel(x, y, alternative=a).pvalue for a in sides)
    else:  # sign, mcnemar: the wins among the non-zero differences
        wins, n = int((d > 0).sum()), int((d != 0).sum())
        greater, less = (scipy.stats.binomtest(wins, n, alternative=a).pvalue for a in sides)
    return 1 if greater < less else -1


@pytest.mark.parametrize("test", ["wilcoxon", "ttest", "randomization", "sign"])
def test_favours_is_the_tests_side_only_where_the_mean_agrees(test):
    # orb: many small wins over sift, a few large losses; the mean favours sift
    rng = np.random.default_rng(11)
    n = 600
    sift = rng.uniform(0.3, 0.6, n)
    orb = sift + rng.uniform(0.005, 0.02, n)
    losers = rng.choice(n, 60, replace=False)
    orb[losers] = sift[losers] - rng.uniform(0.25, 0.3, 60)
    brief = sift - rng.uniform(0, 0.001, n)  # never better than sift
    cube = ap_cube({"sift": sift, "orb": np.clip(orb, 0, 1), "brief": brief})
    ds = compare(cube, test=test, n_resamples=2_000)
    units = unit_values(cube)
    for (d, b), favours, reject, caveat in zip(
        ds.indexes["comparison"], ds.favours.values, ds.reject.values, ds.caveat.values,
        strict=True,
    ):  # fmt: skip
        x, y = units.sel(descriptor=d).values, units.sel(descriptor=b).values
        side = one_sided_direction(x, y, test) if reject else 0
        agrees = side == np.sign(np.mean(x - y))
        assert favours == (side if agrees else 0), (d, b)
        assert bool(caveat) == (bool(reject) and not agrees), (d, b)
    orb_row = ds.sel(descriptor="sift", baseline="orb")
    assert float(orb_row.mean_diff) > 0 and bool(orb_row.reject)
    if test in ("ttest", "randomization"):  # tests of the mean difference
        assert int(orb_row.favours) == 1 and orb_row.caveat.item() == ""
    else:  # the test finds orb better, the mean sift: no verdict, and words that say so
        assert int(orb_row.favours) == 0
        assert orb_row.caveat.item().startswith(f"the {test} test rejects in favour of 'orb'")
        assert "the mean difference favours 'sift'" in orb_row.caveat.item()


def test_favours_of_mcnemar_is_the_discordant_balance():
    rng = np.random.default_rng(4)
    n = 300
    better = np.vstack([rng.integers(0, 3, n), rng.integers(0, 2, n)])
    coords = {"scene": np.full(n, "v_a"), "pair": np.full(n, "1-2"),
              "keypoint_set": np.full(n, "sift"), "query_keypoint": np.arange(n)}  # fmt: skip
    cube = qc.new_cube(["a", "b"], coords, {"better": better, "ties": np.zeros_like(better)},
                       attrs=qc.DEFAULT_ATTRS)  # fmt: skip
    ds = compare(cube, metric="hit@1", test="mcnemar")
    x, y = (better == 0).astype(float)
    row = ds.sel(descriptor="a", baseline="b")
    assert bool(row.reject) and int(row.favours) == one_sided_direction(x, y, "mcnemar") == -1


# ---------------------------------------------------------------------------------------------
# rank_systems with two identical systems; the correction's collection trick
# ---------------------------------------------------------------------------------------------


def test_rank_systems_leaves_identical_systems_out_of_the_pairwise_family(systems):
    cube = ap_cube({k: v for k, v in systems.items() if k != "brief"})
    ranking = rank_systems(cube, pair_by="query")
    p = ranking.pvalue_corrected
    assert np.isnan(float(p.sel(descriptor="sift", other="rootsift")))
    assert not bool(ranking.reject.sel(descriptor="rootsift", other="sift"))
    units = unit_values(cube).values
    raw = [scipy.stats.wilcoxon(units[i], units[2]).pvalue for i in (0, 1)]
    expected = reference_multipletests(raw, "holm")
    assert [float(p.sel(descriptor=s, other="orb")) for s in ("sift", "rootsift")] == list(expected)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "fdr_bh"])
def test_correct_equals_multipletests_and_leaves_the_collector_as_it_was(method):
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 0.1, 12)
    assert correct(p, method=method).tolist() == multipletests(p, method=method)[1].tolist()
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    sentinel = [p]  # a container the collector tracks until it is frozen
    gc.freeze()  # a process that froze objects itself keeps them frozen
    try:
        assert correct(p, method=method).tolist() == multipletests(p, method=method)[1].tolist()
        # still frozen (the freeze count itself may drop while another thread frees objects)
        assert not any(obj is sentinel for obj in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(obj is sentinel for obj in gc.get_objects())  # the check can tell
