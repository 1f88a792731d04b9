"""HPatches CVPR'17 comparisons at the level of sequences: the verification statistics under
sequence weights and swaps against the reference functions on the materialised lists, and the
matching composite against the metric set's value and a slow recomputation."""

from __future__ import annotations

import numpy as np
import pytest

from metricalc.patches.cvpr17_eval import (
    LEVEL_NAMES,
    imbalanced_prefix,
    sorted_labels_ap,
    sorted_labels_auc,
)
from metricalc.patches.cvpr17_files import LEVELS, PairSet
from metricalc.patches.cvpr17_pairs import KINDS, pair_cube, verification_from_cube
from metricalc.patches.cvpr17_verification import COLUMNS, verification_statistics


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
        distances = {
            lv: {k: rng.integers(0, 6, sizes[k]).astype(np.float64) + (k == "pos") * -1.0 * (lv == "e")
                 for k in KINDS}
            for lv in LEVELS
        }  # fmt: skip
        for lv in LEVELS:
            for k in KINDS:
                distances[lv][k] = np.abs(distances[lv][k])
        cubes.append(pair_cube(distances, pairs, descriptor=name, split="a"))
    import xarray as xr

    return xr.concat(cubes, dim="descriptor", data_vars="minimal", coords="minimal",
                     compat="override", join="override")  # fmt: skip


def materialised(cube, key, counts_a, counts_b) -> float:
    """The reference's statistic of list ``key`` with each pair of sequence c scored by
    descriptor a ``counts_a[c]`` times and by b ``counts_b[c]`` times (list order kept:
    every pair's copies together, a's copy first)."""
    level, measure, side = key
    li = list(LEVEL_NAMES.values()).index(level)
    kind = cube["kind"].values.astype(str)
    seq = cube["first_sequence"].values
    d = cube["distance"].values[:, li]
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
            materialised(cube, key, keep * ~s, keep * s) - materialised(cube, key, keep * s, keep * ~s)
            for s in swaps
        ]  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_compare_over_sequences_and_too_few() -> None:
    from metricalc.errors import InvalidInputError
    from metricalc.patches.cvpr17_compare import compare_verification

    cube = random_cube(3, SIZES, [f"v_{k}" for k in "abcdef"])
    done = compare_verification(cube, n_resamples=200, columns=COLUMNS[:1])
    one = done["mean imbalanced"]
    assert one.attrs["pair_by"] == "sequence" and bool(one.exact[0]) and int(one.n[0]) == 6
    few = random_cube(3, SIZES, ["v_a", "v_b", "v_c"])
    with pytest.raises(InvalidInputError, match=r"^not tested: the pairs lie in 3 sequences"):
        compare_verification(few)
