"""metricalc.stats.compare on hand-built cubes, patch-retrieval cubes and the built-in benchmark."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
import xarray as xr
from statsmodels.stats.contingency_tables import mcnemar

import metricalc as mc
from metricalc import cube as qc
from metricalc.errors import InvalidInputError
from metricalc.stats import compare, sign_flip_pvalues, unit_values
from metricalc.stats.compare import generators
from tests.shared_checks import reference_multipletests

DOC = Path(__file__).resolve().parents[2] / "docs" / "stats.md"
CONTRACT_ATTRS = (
    "metric", "pair_by", "test", "correction", "alpha", "split", "seed", "n_resamples",
    "confidence_level", "excluded_descriptors", *qc.PROTOCOL_ATTRS,
)  # fmt: skip

SCENES = ("i_a", "i_b", "i_c", "v_d", "v_e", "v_f", "v_g")
PAIRS = ("1-2", "1-3")
PER_PAIR = 4


def layout() -> pd.DataFrame:
    """7 scenes x 2 pairs x 4 queries, in cube order."""
    rows = [(s, p, q) for s in SCENES for p in PAIRS for q in range(PER_PAIR)]
    return pd.DataFrame(rows, columns=["scene", "pair", "query_keypoint"])


def hand_cube(ap: dict[str, np.ndarray], **attrs) -> xr.Dataset:
    table = layout()
    coords = {
        "scene": table.scene.to_numpy(),
        "pair": table.pair.to_numpy(),
        "keypoint_set": np.full(len(table), "sift"),
        "query_keypoint": table.query_keypoint.to_numpy(),
    }
    values = np.vstack(list(ap.values()))
    n_relevant = np.where(np.isnan(values), 0, 1)
    return qc.new_cube(
        list(ap), coords, {"ap": values, "n_relevant": n_relevant},
        attrs={**qc.DEFAULT_ATTRS, "keypoints": "locked:sift", **attrs},
    )  # fmt: skip


@pytest.fixture(scope="module")
def hand():
    """AP of three descriptors with holes: orb lacks the whole unit (v_d, 1-3) and a few
    queries, brief lacks scene i_c."""
    rng = np.random.default_rng(0)
    n = len(layout())
    sift = rng.uniform(0.3, 1.0, n)
    orb = np.clip(sift - rng.uniform(-0.1, 0.4, n), 0, 1)
    brief = np.clip(sift - rng.uniform(-0.3, 0.3, n), 0, 1)
    table = layout()
    orb[((table.scene == "v_d") & (table.pair == "1-3")).to_numpy()] = np.nan
    orb[[0, 9, 20]] = np.nan
    brief[(table.scene == "i_c").to_numpy()] = np.nan
    return {"sift": sift, "orb": orb, "brief": brief}


def unit_means(values: np.ndarray, pair_by: str) -> dict[tuple, float]:
    """Mean per unit by hand (pandas), NaN skipped; units without a value left out."""
    table = layout().assign(value=values)
    keys = {"query": ["scene", "pair", "query_keypoint"], "pair": ["scene", "pair"],
            "scene": ["scene"]}[pair_by]  # fmt: skip
    means = table.groupby(keys)["value"].mean().dropna()
    return {k if isinstance(k, tuple) else (k,): float(v) for k, v in means.items()}


def paired_by_hand(ap, name, base, pair_by):
    x, y = unit_means(ap[name], pair_by), unit_means(ap[base], pair_by)
    common = sorted(set(x) & set(y), key=lambda k: tuple(map(str, k)))
    dropped = len(set(x) ^ set(y))
    return np.array([x[k] for k in common]), np.array([y[k] for k in common]), dropped


# ---------------------------------------------------------------------------------------------
# Units and pairing
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair_by", ["query", "pair", "scene"])
def test_units_pairing_and_every_variable_by_hand(hand, pair_by):
    cube = hand_cube(hand)
    ds = compare(cube, pair_by=pair_by, baseline="sift", test="ttest", seed=3)
    for name in ("orb", "brief"):
        x, y, dropped = paired_by_hand(hand, name, "sift", pair_by)
        d = x - y
        row = ds.sel(descriptor=name, baseline="sift")
        assert int(row.n) == len(d) and int(row.n_dropped) == dropped
        assert float(row.mean_descriptor) == pytest.approx(x.mean(), rel=1e-12)
        assert float(row.mean_baseline) == pytest.approx(y.mean(), rel=1e-12)
        assert float(row.mean_diff) == pytest.approx(d.mean(), rel=1e-12)
        assert float(row.median_diff) == pytest.approx(np.median(d), rel=1e-12)
        reference = scipy.stats.ttest_rel(x, y)
        assert float(row.statistic) == pytest.approx(reference.statistic, rel=1e-9)
        assert float(row.pvalue) == pytest.approx(reference.pvalue, rel=1e-9)
        assert (int(row.wins), int(row.ties), int(row.losses)) == (
            int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum())
        )
        assert float(row.rank_biserial) == pytest.approx(mc.stats.rank_biserial(d), rel=1e-9)
        assert float(row.cohens_dz) == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-9)
        assert float(row.ci_low) < d.mean() < float(row.ci_high)
    expected_dropped = {"query": 3 + PER_PAIR, "pair": 1, "scene": 0}[pair_by]
    assert int(ds.sel(descriptor="orb", baseline="sift").n_dropped) == expected_dropped


def test_the_confidence_interval_is_scipys_bootstrap_of_the_unit_differences(hand):
    cube = hand_cube(hand)
    ds = compare(cube, pair_by="pair", baseline="sift", seed=7, interval="bca")
    units = unit_values(cube, pair_by="pair")  # the unit means (checked by hand above)
    # the two comparisons pair different units: one bootstrap call each, in comparison order
    _, resamples = generators(7)
    for name in ("orb", "brief"):
        x, y = units.sel(descriptor=name).values, units.sel(descriptor="sift").values
        both = np.isfinite(x) & np.isfinite(y)
        reference = scipy.stats.bootstrap(
            ((x - y)[both][None, :],), np.mean, n_resamples=10_000, batch=10_000, vectorized=True,
            axis=-1, method="BCa", rng=resamples,
        ).confidence_interval  # fmt: skip
        row = ds.sel(descriptor=name, baseline="sift")
        assert (float(row.ci_low), float(row.ci_high)) == (reference.low[0], reference.high[0])


def test_unit_values_are_the_unit_means(hand):
    units = unit_values(hand_cube(hand), pair_by="pair")
    assert list(units.indexes["unit"].names) == ["scene", "pair"]
    for name in hand:
        expected = unit_means(hand[name], "pair")
        got = units.sel(descriptor=name).to_series().dropna()
        assert {k: float(v) for k, v in got.items()} == pytest.approx(expected, rel=1e-12)


def test_a_lazily_opened_cube_gives_the_same_result(hand, tmp_path):
    cube = hand_cube(hand)
    qc.save(cube, tmp_path / "c.nc")
    lazy = qc.open_cube(tmp_path / "c.nc", chunks={})
    assert qc.is_lazy(lazy)
    xr.testing.assert_identical(
        compare(lazy, pair_by="pair", test="randomization", n_resamples=500),
        compare(cube, pair_by="pair", test="randomization", n_resamples=500),
    )


# ---------------------------------------------------------------------------------------------
# The Dataset layout of contract B
# ---------------------------------------------------------------------------------------------


def documented_variables() -> list[tuple[str, str]]:
    """(variable, dtype) of the rows of the table under "The result of `compare`" in
    docs/stats.md, in order."""
    section = DOC.read_text(encoding="utf-8").split("## The result of `compare`")[1]
    rows = [line.split(" | ") for line in section.split("\n## ")[0].splitlines()]
    return [(name, row[1]) for row in rows if row[0].startswith("| `")
            for name in re.findall(r"`(\w+)`", row[0])]  # fmt: skip


def test_layout_all_pairs_order_multiindex_dtypes_and_attrs(hand):
    cube = hand_cube(hand, seed=4)
    ds = compare(cube, pair_by="pair", test="wilcoxon")
    assert ds.indexes["comparison"].names == ["descriptor", "baseline"]
    assert list(ds.indexes["comparison"]) == [("sift", "orb"), ("sift", "brief"), ("orb", "brief")]
    documented = documented_variables()
    assert list(ds.data_vars) == [name for name, _ in documented]
    dtypes = {name: "str" if v.dtype.kind == "U" else str(v.dtype) for name, v in ds.items()}
    assert dtypes == dict(documented)
    assert ds.note.values.tolist() == ["", "", ""]
    assert ds.interval_method.values.tolist() == ["bca"] * 3
    frame = ds.to_dataframe()
    assert frame.index.names == ["descriptor", "baseline"] and len(frame) == 3
    one = ds.sel(descriptor="orb", baseline="brief")
    assert one.n.ndim == 0
    for name in CONTRACT_ATTRS:
        assert name in ds.attrs, name
    assert ds.attrs["seed"] == 0 and ds.attrs["protocol_seed"] == 4  # the cube's own seed
    assert ds.attrs["split"] == "" and ds.attrs["excluded_descriptors"] == []
    assert ds.attrs["keypoints"] == "locked:sift" and ds.attrs["tau_px"] == 3.0


@pytest.mark.parametrize("correction", ["holm", "bonferroni", "fdr_bh", "none"])
def test_one_correction_family_per_call(hand, correction):
    ds = compare(hand_cube(hand), pair_by="query", correction=correction, alpha=0.01)
    raw = ds.pvalue.values
    expected = raw if correction == "none" else reference_multipletests(raw, correction)
    assert ds.pvalue_corrected.values.tolist() == expected.tolist()
    assert ds.reject.values.tolist() == (expected < 0.01).tolist()


def test_randomization_p_values_are_the_shared_sign_flips(hand):
    cube = hand_cube(hand)
    ds = compare(
        cube, pair_by="query", test="randomization", baseline="sift", n_resamples=4_000, seed=5
    )
    units = unit_values(cube).values  # sift, orb, brief over queries
    present = np.isfinite(units)
    differences = np.zeros((2, units.shape[1]))
    for k, i in enumerate((1, 2)):
        both = present[i] & present[0]
        differences[k, both] = units[i, both] - units[0, both]
    flips, _ = generators(5)
    expected = sign_flip_pvalues(differences, n_resamples=4_000, rng=flips)
    assert ds.pvalue.values.tolist() == expected.tolist()
    assert ds.statistic.values.tolist() == ds.mean_diff.values.tolist()
    again = compare(
        cube, pair_by="query", test="randomization", baseline="sift", n_resamples=4_000, seed=5
    )
    xr.testing.assert_identical(ds, again)
    other = compare(
        cube, pair_by="query", test="randomization", baseline="sift", n_resamples=4_000, seed=6
    )
    assert not np.array_equal(other.ci_low.values, ds.ci_low.values)


@pytest.mark.parametrize("test", ["wilcoxon", "sign"])
def test_p_values_equal_scipy_on_the_paired_unit_vectors(hand, test):
    ds = compare(hand_cube(hand), pair_by="pair", test=test, baseline="sift")
    for name in ("orb", "brief"):
        x, y, _ = paired_by_hand(hand, name, "sift", "pair")
        d = x - y
        if test == "wilcoxon":
            expected = scipy.stats.wilcoxon(x, y).pvalue
        else:
            expected = scipy.stats.binomtest(int((d > 0).sum()), int((d != 0).sum())).pvalue
        assert float(ds.sel(descriptor=name, baseline="sift").pvalue) == expected


# ---------------------------------------------------------------------------------------------
# Metrics, splits, failed descriptors
# ---------------------------------------------------------------------------------------------


def rank_cube() -> xr.Dataset:
    rng = np.random.default_rng(1)
    n = len(layout())
    better = rng.integers(0, 4, size=(2, n))
    ties = rng.integers(0, 3, size=(2, n))
    better[:, :5], ties[:, :5] = -1, -1  # R = 0 queries
    nn_correct = np.where(better == 0, 1, 0)
    table = layout()
    coords = {"scene": table.scene.to_numpy(), "pair": table.pair.to_numpy(),
              "keypoint_set": np.full(n, "sift"), "query_keypoint": table.query_keypoint}
    return qc.new_cube(
        ["sift", "orb"], coords, {"better": better, "ties": ties, "nn_correct": nn_correct},
        attrs={**qc.DEFAULT_ATTRS, "tie_policy": "workbench"},
    )  # fmt: skip


def test_hit_at_k_by_hand_and_mcnemar_equals_statsmodels():
    cube = rank_cube()
    b, t = cube.better.values, cube.ties.values
    rank = 1 + b + (t + 1) // 2  # the workbench policy
    hit = np.where(b >= 0, (rank <= 2).astype(float), np.nan)
    units = unit_values(cube, metric="hit@2")
    np.testing.assert_array_equal(units.values, hit)
    ds = compare(cube, pair_by="query", metric="hit@2", test="mcnemar", baseline="sift")
    x, y = hit[1, 5:], hit[0, 5:]
    table = [[np.sum((x == 1) & (y == 1)), np.sum((x == 1) & (y == 0))],
             [np.sum((x == 0) & (y == 1)), np.sum((x == 0) & (y == 0))]]  # fmt: skip
    discordant = table[0][1] + table[1][0]
    expected = mcnemar(table, exact=discordant < 25, correction=True)
    row = ds.sel(descriptor="orb", baseline="sift")
    assert (float(row.statistic), float(row.pvalue)) == (expected.statistic, expected.pvalue)
    assert int(row.n) == len(x)


def test_nn_correct_split_and_failed_descriptors():
    cube = rank_cube()
    ds = compare(cube, pair_by="query", metric="nn_correct", split="viewpoint", test="sign")
    viewpoint = cube.split.values == "viewpoint"
    assert int(ds.n.item()) == int(viewpoint.sum())  # nn_correct is 0 (not missing) at R = 0
    assert ds.attrs["split"] == "viewpoint"
    broken = qc.combine([cube, qc.error_record("brief", "crashed", attrs=dict(cube.attrs))])
    ds = compare(broken, pair_by="query", metric="nn_correct", test="sign")
    assert ds.attrs["excluded_descriptors"] == ["brief"]
    assert list(ds.indexes["comparison"]) == [("sift", "orb")]


def patch_cube() -> xr.Dataset:
    """A patch-retrieval cube as contract A lays it out (AP known, no rank statistics)."""
    rng = np.random.default_rng(2)
    scenes = np.repeat(["i_ajuntament", "v_boat", "i_fruits", "v_wall", "v_yard", "i_zion"], 10)
    n = len(scenes)
    coords = {"scene": scenes, "pair": np.full(n, ""),
              "keypoint_set": np.full(n, "train_easy_40s_00"), "query_keypoint": np.arange(n)}
    ap = rng.uniform(0, 1, size=(2, n))
    cube = qc.new_cube(
        ["tfeat", "sift"], coords, {"ap": ap, "n_relevant": np.ones((2, n))},
        attrs={**qc.DEFAULT_ATTRS, "ap_method": "vlfeat", "dataset": "benchmarks",
               "benchmark": "hpatches-retrieval"},
    )  # fmt: skip
    image_ap = np.clip(ap + rng.normal(0.05, 0.1, size=(2, n)), 0, 1)
    return cube.assign(image_ap=(("descriptor", "query"), image_ap))


def test_patch_retrieval_cubes_compare_on_ap_and_image_ap():
    cube = patch_cube()
    for metric in ("ap", "image_ap"):
        ds = compare(cube, pair_by="query", metric=metric, baseline="sift", test="wilcoxon")
        values = cube[metric].values
        expected = scipy.stats.wilcoxon(values[0], values[1]).pvalue
        assert float(ds.sel(descriptor="tfeat", baseline="sift").pvalue) == expected
    by_scene = compare(cube, pair_by="pair", baseline="sift")  # pair "": one unit per scene
    assert int(by_scene.n.item()) == 6
    with pytest.raises(InvalidInputError, match="needs the rank statistics"):
        compare(cube, metric="hit@1")


# ---------------------------------------------------------------------------------------------
# Guard rails
# ---------------------------------------------------------------------------------------------


def test_guard_rails_name_what_is_wrong(hand):
    cube = hand_cube(hand)
    with pytest.raises(InvalidInputError, match=r"'orb' vs 'sift': 2 paired units"):
        compare(cube.isel(query=slice(0, 3)), pair_by="query", baseline="sift")
    same = hand_cube({"sift": hand["sift"], "copy": hand["sift"]})
    with pytest.raises(InvalidInputError, match=r"'sift' vs 'copy': all 56 paired differences"):
        compare(same, pair_by="query", test="wilcoxon")
    ds = compare(same, n_resamples=99)  # the default randomization test: p = 1, CI [0, 0]
    assert float(ds.pvalue.item()) == 1.0 and float(ds.ci_low.item()) == 0.0
    with pytest.raises(InvalidInputError, match=r"available: ap, better, .*hit@K"):
        compare(cube, metric="map")
    with pytest.raises(InvalidInputError, match="baseline 'rootsift' is not a system"):
        compare(cube, baseline="rootsift")
    with pytest.raises(InvalidInputError, match="test must be one of"):
        compare(cube, test="anova")
    with pytest.raises(InvalidInputError, match="correction must be one of"):
        compare(cube, correction="holm-sidak")
    with pytest.raises(InvalidInputError, match="split must be None or one of"):
        compare(cube, split="other")
    with pytest.raises(InvalidInputError, match="alpha must be"):
        compare(cube, alpha=5)
    with pytest.raises(InvalidInputError, match="seed must be"):
        compare(cube, seed=-1)
    with pytest.raises(InvalidInputError, match="binary metric"):
        compare(cube, pair_by="query", test="mcnemar")
    with pytest.raises(InvalidInputError, match="use pair_by='query'"):
        compare(rank_cube(), metric="hit@1", test="mcnemar", pair_by="pair")


# ---------------------------------------------------------------------------------------------
# Several cubes: systems "<descriptor> (<label>)", protocols checked
# ---------------------------------------------------------------------------------------------


def test_mapping_names_systems_and_refuses_different_protocols(hand):
    locked = hand_cube({"sift": hand["sift"], "orb": hand["orb"]})
    other = hand_cube({"sift": hand["brief"]}, keypoints="native", distance="hamming")
    ds = compare({"locked": locked, "native": other}, pair_by="pair", test="wilcoxon")
    assert list(ds.indexes["comparison"]) == [
        ("sift (locked)", "orb (locked)"),
        ("sift (locked)", "sift (native)"),
        ("orb (locked)", "sift (native)"),
    ]
    assert ds.attrs["keypoints"] == "mixed" and ds.attrs["distance"] == "mixed"
    x, y, _ = paired_by_hand({"a": hand["sift"], "b": hand["brief"]}, "a", "b", "pair")
    row = ds.sel(descriptor="sift (locked)", baseline="sift (native)")
    assert float(row.pvalue) == scipy.stats.wilcoxon(x, y).pvalue
    wider = hand_cube({"sift": hand["brief"]}, tau_px=5.0)
    with pytest.raises(InvalidInputError, match=r"attr 'tau_px' is 3.0 in cube 'a' but 5.0 in"):
        compare({"a": locked, "b": wider})
    with pytest.raises(InvalidInputError, match="labels must be non-empty strings"):
        compare({"": locked})


@pytest.fixture(scope="module")
def benchmark(quick_locked_cube, quick_native_cube):
    """The built-in benchmark (quick scenes), SIFT and ORB, locked on SIFT and native (the
    session's, tests/conftest.py)."""
    return quick_locked_cube, quick_native_cube


def pair_means(cube: xr.Dataset, name: str) -> pd.Series:
    """Mean AP per (scene, pair) of one descriptor, by pandas from the raw cube."""
    frame = pd.DataFrame({"scene": cube.scene.values, "pair": cube.pair.values,
                          "ap": cube.ap.sel(descriptor=name).values})  # fmt: skip
    return frame.groupby(["scene", "pair"])["ap"].mean().dropna()


def test_locked_against_native_keypoints_of_the_built_in_benchmark(benchmark):
    locked, native = benchmark
    cubes = {"locked": locked, "native": native}
    ds = compare(cubes, pair_by="pair", baseline="sift (locked)", test="randomization",
                 n_resamples=2_000)  # fmt: skip
    assert [d for d, _ in ds.indexes["comparison"]] == [
        "orb (locked)", "sift (native)", "orb (native)"
    ]
    for system, cube, name in (("orb (native)", native, "orb"), ("orb (locked)", locked, "orb")):
        x, y = pair_means(cube, name), pair_means(locked, "sift")
        common = x.index.intersection(y.index)
        row = ds.sel(descriptor=system, baseline="sift (locked)")
        assert int(row.n) == len(common)
        assert float(row.mean_diff) == pytest.approx((x[common] - y[common]).mean(), rel=1e-9)
    # SIFT detects the same keypoints in both runs: every image pair ties exactly
    same = ds.sel(descriptor="sift (native)", baseline="sift (locked)")
    assert int(same.ties) == int(same.n) > 0 and float(same.pvalue) == 1.0
    assert ds.attrs["keypoints"] == "mixed"

    ds = compare(cubes, pair_by="pair", baseline="orb (native)", test="wilcoxon")
    units = unit_values(cubes, pair_by="pair")
    for system in ("sift (locked)", "orb (locked)", "sift (native)"):
        x, y = units.sel(descriptor=system).values, units.sel(descriptor="orb (native)").values
        both = np.isfinite(x) & np.isfinite(y)
        expected = scipy.stats.wilcoxon(x[both], y[both]).pvalue
        assert float(ds.sel(descriptor=system, baseline="orb (native)").pvalue) == expected


def test_native_keypoints_paired_by_query_point_to_pair_by_pair(benchmark):
    locked, native = benchmark
    with pytest.raises(InvalidInputError, match=r"share no query .* pair_by='pair'"):
        compare(native, pair_by="query")
    # several comparisons: the one without shared queries is kept untested, with the reason
    ds = compare({"locked": locked, "native": native}, pair_by="query", baseline="sift (locked)",
                 test="randomization", n_resamples=100)  # fmt: skip
    untested = ds.sel(descriptor="orb (native)", baseline="sift (locked)")
    assert re.fullmatch(r"the two systems share no query .* pair_by='pair'", untested.note.item())
    assert int(untested.n) == 0 and np.isnan(float(untested.pvalue)) and not bool(untested.reject)
    tested = ds.sel(descriptor="orb (locked)", baseline="sift (locked)")
    assert tested.note.item() == "" and np.isfinite(float(tested.pvalue_corrected))
    ds = compare(locked, pair_by="query", baseline="sift")  # locked: every query shared
    assert int(ds.n_dropped.item()) == 0 and int(ds.n.item()) == int(
        (locked.n_relevant.sel(descriptor="sift") == 1).sum()
    )
