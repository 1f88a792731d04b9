"""HPatches CVPR'17 comparisons at the level of sequences: the verification statistics under
sequence weights and swaps against the reference functions on the materialised lists, and the
matching composite against the metric set's value and a slow recomputation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats

from metricalc.benchmarks.hpatches_cvpr17.evaluate import (
    LEVEL_NAMES,
    imbalanced_prefix,
    sorted_labels_ap,
    sorted_labels_auc,
)
from metricalc.benchmarks.hpatches_cvpr17.files import LEVELS, PairSet
from metricalc.benchmarks.hpatches_cvpr17.pairs import KINDS, pair_cube, verification_from_cube
from metricalc.benchmarks.hpatches_cvpr17.verification import (
    COLUMNS,
    column_name,
    verification_statistics,
)


def random_pairs(rng: np.random.Generator, sizes: dict[str, int], sequences: list[str]) -> PairSet:
    """Pair files with random sequences (an inter negative's two patches in two sequences)."""
    pairs = {}
    for kind in KINDS:
        n = sizes[kind]
        s1 = rng.choice(sequences, n)
        s2 = s1 if kind != "neg_inter" else rng.choice(sequences, n)
        zeros = np.zeros(n, dtype=np.int64)
        pairs[kind] = (s1, zeros, zeros, s2, zeros + 1, zeros)
    return PairSet(pairs, "random")


def random_cube(seed: int, sizes: dict[str, int], sequences: list[str], systems=("a", "b")):
    """A pair cube of two descriptors with integer distances (many ties)."""
    rng = np.random.default_rng(seed)
    pairs = random_pairs(rng, sizes, sequences)
    cubes = []
    for name in systems:
        distances = {lv: {k: rng.integers(0, 6, sizes[k]).astype(np.float64) for k in KINDS}
                     for lv in LEVELS}  # fmt: skip
        distances["e"]["pos"] = np.maximum(distances["e"]["pos"] - 1, 0)  # easy: positives closer
        cubes.append(pair_cube(distances, pairs, descriptor=name, split="a"))
    import xarray as xr

    return xr.concat(cubes, dim="descriptor", data_vars="minimal", coords="minimal",
                     compat="override", join="override")  # fmt: skip


def materialised(cube, key, counts_a, counts_b) -> float:
    """The reference's statistic of list ``key`` with each pair of sequence c scored by
    descriptor a ``counts_a[c]`` times and by b ``counts_b[c]`` times (list order kept:
    every pair's copies together, a's copy first), each descriptor's distances replaced by
    their quantiles (average ranks over the pairs) at the level."""
    level, measure, side = key
    li = list(LEVEL_NAMES.values()).index(level)
    kind = cube["kind"].values.astype(str)
    seq = cube["first_sequence"].values
    n = cube.sizes["pair"]  # each descriptor's distances as quantiles at the level (a swap
    d = scipy.stats.rankdata(cube["distance"].values[:, li], axis=1) / n  # mixes rankings)
    neg_rows = np.flatnonzero(kind == f"neg_{side}")
    pos_rows = np.flatnonzero(kind == "pos")
    if measure == "imbalanced":
        a, c = imbalanced_prefix(neg_rows.size, pos_rows.size)
        neg_rows, pos_rows = neg_rows[:a], pos_rows[:c]

    def repeated(rows):
        values = []
        for row in rows:
            values += [d[0, row]] * int(counts_a[seq[row]]) + [d[1, row]] * int(counts_b[seq[row]])
        return np.array(values)

    neg, pos = repeated(neg_rows), repeated(pos_rows)
    distances = np.concatenate([neg, pos])
    labels = np.concatenate([np.zeros(neg.size, bool), np.ones(pos.size, bool)])
    ranked = labels[np.argsort(distances, kind="stable")]
    return sorted_labels_auc(ranked) if measure == "balanced" else sorted_labels_ap(ranked)


SIZES = {"neg_inter": 40, "neg_intra": 35, "pos": 30}
SEQUENCES = ["i_a", "i_b", "v_c", "v_d", "v_e"]


def test_unit_weights_give_the_evaluation_numbers() -> None:
    cube = random_cube(0, SIZES, SEQUENCES)
    expected = verification_from_cube(cube)
    stats = verification_statistics(cube)
    ones = np.ones((1, len(SEQUENCES)))
    for stat, (level, measure, side) in zip(stats, COLUMNS, strict=True):
        for s, name in enumerate(("a", "b")):
            got = float(stat.weighted(s, ones)[0])
            if level == "mean":
                want = np.mean([expected[name][lv][measure][sd] for lv in LEVEL_NAMES.values()
                                for sd in ("inter", "intra")])  # fmt: skip
            else:
                want = expected[name][level][measure][side]
            assert got == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_weights_and_swaps_equal_the_materialised_lists(seed) -> None:
    cube = random_cube(seed, SIZES, SEQUENCES)
    stats = verification_statistics(cube)
    rng = np.random.default_rng(seed)
    k = len(SEQUENCES)
    weights = rng.multinomial(k, np.full(k, 1 / k), size=4).astype(np.float64)
    swaps = rng.random((3, k)) < 0.5
    keep = np.array([True, True, False, True, True])
    for stat, key in zip(stats[2:], COLUMNS[2:], strict=True):
        got = stat.weighted(1, weights)
        want = [materialised(cube, key, np.zeros(k), w) for w in weights]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        got = stat.swapped_difference(0, 1, swaps, keep)
        want = [
            materialised(cube, key, keep * ~s, keep * s)
            - materialised(cube, key, keep * s, keep * ~s)
            for s in swaps
        ]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_compare_over_sequences_and_too_few() -> None:
    from metricalc.benchmarks.hpatches_cvpr17.statistic import compare_verification
    from metricalc.errors import InvalidInputError

    cube = random_cube(3, SIZES, [f"v_{k}" for k in "abcdef"])
    done = compare_verification(cube, n_resamples=200, columns=COLUMNS[:1])
    one = done["mean imbalanced"]
    assert one.attrs["pair_by"] == "sequence" and bool(one.exact[0]) and int(one.n[0]) == 6
    # the exact p-value: all 2**6 swaps of whole sequences, each list materialised
    key = COLUMNS[4]
    done = compare_verification(cube, n_resamples=50, columns=[key])[column_name(*key)]
    k = 6
    ones = np.ones(k)
    observed = materialised(cube, key, ones, 0 * ones) - materialised(cube, key, 0 * ones, ones)
    assert float(done.mean_diff[0]) == pytest.approx(observed, abs=1e-12)
    patterns = (np.arange(2**k)[:, None] >> np.arange(k)) & 1
    swapped = [materialised(cube, key, 1 - s, s) - materialised(cube, key, s, 1 - s)
               for s in patterns]  # fmt: skip
    extreme = np.abs(swapped) >= abs(observed) * (1 - 1e-9) - 1e-12
    assert float(done.pvalue[0]) == extreme.mean()
    few = random_cube(3, SIZES, ["v_a", "v_b", "v_c"])
    with pytest.raises(InvalidInputError, match=r"^not tested: the pairs lie in 3 sequences"):
        compare_verification(few)


# ------------------------------------------------------------ the matching average
def matching_units(rng: np.random.Generator, n_i: int, n_v: int) -> dict:
    """Per (sequence, level, k) a random AP (a few image pairs missing), unequal numbers of
    types."""
    keys = [(f"{kind}_s{i}", level, k) for kind, n in (("i", n_i), ("v", n_v)) for i in range(n)
            for level in "eht" for k in range(1, 6)]  # fmt: skip
    values = rng.random(len(keys))
    kept = rng.random(len(keys)) > 0.05
    return {key: v for key, v, keep in zip(keys, values.tolist(), kept, strict=True) if keep}


def slow_average(per_pair: dict) -> float:
    """hpatches-benchmark's ``DescriptorMatchingResult.avg`` with loops: per sequence and level
    the mean AP, per (type, level) the mean over sequences, per type the mean
    of the levels, the mean of the types."""
    by_sequence: dict = {}
    for (sequence, level, _k), ap in per_pair.items():
        by_sequence.setdefault((sequence.split("_")[0], level, sequence), []).append(ap)
    cells: dict = {}
    for (kind, level, _s), aps in by_sequence.items():
        cells.setdefault((kind, level), []).append(sum(aps) / len(aps))
    per_type = [sum(sum(cells[kind, lv]) / len(cells[kind, lv]) for lv in "eht") / 3
                for kind in "iv"]  # fmt: skip
    return sum(per_type) / 2


@pytest.mark.parametrize("seed", range(3))
def test_matching_average_as_a_statistic_of_sequences(seed) -> None:
    from metricalc.benchmarks.hpatches_cvpr17.cube import matching_cube
    from metricalc.metrics.retrieval import hpatches17_means
    from metricalc.stats.cvpr17_matching import matching_statistic

    rng = np.random.default_rng(seed)
    units = {name: matching_units(rng, 3 + seed, 5) for name in ("a", "b")}
    cubes = {name: matching_cube(u, descriptor="d", split="x") for name, u in units.items()}
    stat, _ = matching_statistic(cubes)
    assert stat.systems == ["d (a)", "d (b)"]
    # unit weights: the metric set's value (the evaluation code)
    for s, (name, cube) in enumerate(cubes.items()):
        table = hpatches17_means(cube, cube["status"] == "ok")["hpatches17_matching_map"]
        want = float(table.values[0])
        assert float(stat.weighted(s, np.ones((1, len(stat.clusters))))[0]) == pytest.approx(
            want, abs=1e-12
        )
        assert want == pytest.approx(slow_average(units[name]), abs=1e-12)
    # a resample: every sequence of cluster c counted w_c times, as distinct sequences
    clusters = stat.clusters.tolist()
    weights = rng.multinomial(len(clusters), np.full(len(clusters), 1 / len(clusters)), size=5)
    weights[0, [clusters.index("i_s0"), clusters.index("i_s1")]] += 1  # both types drawn
    got = stat.weighted(1, weights.astype(np.float64))
    for row, w in zip(got, weights, strict=True):
        copies = {(f"{s}#{j}", lv, k): ap for (s, lv, k), ap in units["b"].items()
                  for j in range(w[clusters.index(s)])}  # fmt: skip
        kinds = {s.split("_")[0] for s, _, _ in copies}
        want = slow_average(copies) if kinds == {"i", "v"} else np.nan
        np.testing.assert_allclose(row, want, rtol=0, atol=1e-12)


def test_matching_average_compared_in_a_report_and_the_cli(tmp_path, capsys) -> None:
    from metricalc import cube as qc
    from metricalc.benchmarks.hpatches_cvpr17.cube import matching_cube
    from metricalc.cli import main
    from metricalc.report.builder import build
    from metricalc.report.study import study_from_dict

    rng = np.random.default_rng(4)
    units = {name: matching_units(rng, 4, 4) for name in ("a", "b")}
    cubes = {name: matching_cube(u, descriptor="d", split="x") for name, u in units.items()}
    raw = {"data": {"dataset": "synthetic"}, "metrics": ["hpatches17_matching_map"],
           "tests": {"n_resamples": 99, "rank": False}, "outputs": ["summary"]}  # fmt: skip
    report = build(study_from_dict(raw, source=tmp_path / "s.yaml"), cubes=cubes,
                   out=tmp_path / "r")  # fmt: skip
    compared = report.tests["hpatches17_matching_map"].comparison
    for system, value in (("d (a)", compared.mean_descriptor), ("d (b)", compared.mean_baseline)):
        label = system[3]
        assert float(value[0]) == pytest.approx(slow_average(units[label]), abs=1e-12)
    assert compared.attrs["pair_by"] == "sequence" and int(compared.n[0]) == 8
    for name, cube in cubes.items():
        qc.save(cube, tmp_path / f"{name}.nc")
    paths = [str(tmp_path / "a.nc"), str(tmp_path / "b.nc")]
    assert main(["compare", *paths, "--metric", "match. mAP", "--n-resamples", "99",
                 "--json"]) == 0  # fmt: skip
    (row,) = json.loads(capsys.readouterr().out)
    assert row["mean_diff"] == pytest.approx(
        slow_average(units["a"]) - slow_average(units["b"]), abs=1e-12
    )
    assert row["n"] == 8 and row["exact"]
    # the default statistic of task cubes: the mAP hpatches-eval prints (the mean over the
    # units, here of unequal sequences), tested over sequences
    assert main(["compare", *paths, "--n-resamples", "99", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["mean_descriptor"] == pytest.approx(np.mean(list(units["a"].values())), abs=1e-12)
    assert row["n"] == 8


def test_paired_inference_reports_its_resamples_and_swaps(capsys) -> None:
    from metricalc.progress import progress_bar
    from metricalc.stats.clustered import inference_steps, paired_inference
    from metricalc.stats.statistics import RatioStatistic

    rng = np.random.default_rng(0)
    for k, n_resamples in ((6, 5003), (18, 2600)):  # exact swaps (2**6), random ones
        sums = rng.random((2, k, 1))
        stat = RatioStatistic("m", "mean", ["a", "b"], np.arange(k).astype(str), sums,
                              np.ones((2, k, 1)))  # fmt: skip
        done: list[int] = []
        paired_inference(stat, 0, 1, n_resamples=n_resamples, tick=done.append,
                         resample_rng=np.random.default_rng(1), swap_rng=np.random.default_rng(2))
        assert sum(done) == inference_steps(k, n_resamples) == n_resamples + min(2**k, n_resamples)
        assert max(done) <= 2500
    with progress_bar("work", total=3, enabled=True, stderr=True) as advance:
        advance(2)
        advance()
    captured = capsys.readouterr()
    assert captured.out == "" and "3/3" in captured.err
